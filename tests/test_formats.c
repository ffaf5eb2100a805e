/* test_formats.c — the format table agrees with the number-format facts of docs/design.md, derived
 * independently here from exponent and mantissa widths; name parsing accepts and rejects. */
#include <math.h>
#include <stddef.h>
#include "formats.h"
#include "tap.h"

int main(void)
{
    tap_plan(29);
    struct { fp_format f; double max, min_normal, min_sub, ovf; } want[] = {
        {FP_FMT_FP16, 65504.0, ldexp(1, -14), ldexp(1, -24), 65520.0},
        {FP_FMT_BF16, ldexp(2 - ldexp(1, -7), 127), ldexp(1, -126), ldexp(1, -133), ldexp(2 - ldexp(1, -8), 127)},
        {FP_FMT_E4M3, 448.0, ldexp(1, -6), ldexp(1, -9), nextafterf(464.0f, INFINITY)},
        {FP_FMT_E5M2, 57344.0, ldexp(1, -14), ldexp(1, -16), 61440.0},
    };
    for (int i = 0; i < 4; i++) {
        const fp_format_info_t *fi = fp_format_info(want[i].f);
        tap_is_double(fi->max_finite, want[i].max, 0, 0, "%s max finite", fi->name);
        tap_is_double(fi->min_normal, want[i].min_normal, 0, 0, "%s min normal", fi->name);
        tap_is_double(fi->min_subnormal, want[i].min_sub, 0, 0, "%s min subnormal", fi->name);
        tap_is_double(fi->overflow_at, want[i].ovf, 0, 0, "%s overflow threshold", fi->name);
        /* min subnormal = min normal * 2^-mantissa_bits; epsilon = 2^-mantissa_bits */
        tap_is_double(fi->min_subnormal, ldexp(fi->min_normal, -fi->mantissa_bits), 0, 0,
                      "%s subnormal spacing follows from the mantissa width", fi->name);
        tap_is_double(fi->epsilon, ldexp(1, -fi->mantissa_bits), 0, 0, "%s epsilon", fi->name);
    }
    tap_is_int(fp_format_info(FP_FMT_E4M3)->saturates, 1, "E4M3 saturates");
    tap_is_int(fp_format_parse("BF16"), FP_FMT_BF16, "parse is case-insensitive");
    tap_is_int(fp_format_parse("e5m2"), FP_FMT_E5M2, "parse e5m2");
    tap_is_int(fp_format_parse("fp24"), -1, "unknown name rejected");
    tap_ok(fp_format_info(FP_FMT_COUNT) == NULL, "out-of-range format gives NULL");
    return tap_done();
}
