/* dtype.c — names and storage sizes of the dtypes of dtype.h.
 * Promise: total over the enum; an out-of-range value is named "?" and stored in 4 bytes. */
#include "dtype.h"

const char *fp_dtype_name(fp_dtype d)
{
    switch (d) {
    case FP_DT_F32: return "fp32";
    case FP_DT_TF32: return "tf32";
    case FP_DT_F16: return "fp16";
    case FP_DT_BF16: return "bf16";
    }
    return "?";
}

int fp_dtype_bytes(fp_dtype d) { return d == FP_DT_F16 || d == FP_DT_BF16 ? 2 : 4; }
