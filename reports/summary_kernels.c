/* summary_kernels.c — a run's kernels as both reports list them (summary.h): the kernel summary over all its
 * steps with the tensor-core flags. Promise: the arrays are the caller's to free, also on error; a kernel
 * without a flag is unknown (-1), never "no". */
#include <stdint.h>
#include <string.h>
#include "error.h"
#include "summary.h"

int fp_summary_run_kernels(fp_reader_t *r, int64_t run, fp_kernel_sum_t **k, size_t *n, fp_kernel_flag_t **fl,
                           size_t *nf)
{
    *k = NULL;
    *fl = NULL;
    *n = *nf = 0;
    int rc = fp_reader_kernel_summary(r, run, 0, INT64_MAX, k, n);
    if (rc == FP_OK)
        rc = fp_reader_kernel_flags(r, run, fl, nf);
    return rc;
}

int fp_kernel_flag_of(const fp_kernel_flag_t *fl, size_t nf, const char *name)
{
    int tc = -1;
    for (size_t q = 0; q < nf; q++)
        if (strcmp(fl[q].name, name) == 0)
            tc = fl[q].tensor_core;
    return tc;
}
