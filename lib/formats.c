/* formats.c — the format table built from formats.h's constants, and name lookup.
 * Promise: one row per fp_format, in enum order; nothing here restates a number. */
#include "formats.h"
#include <stddef.h>
#include <strings.h>

static const fp_format_info_t format_table[FP_FMT_COUNT] = {
    [FP_FMT_FP16] = {"fp16", FP16_MAX_FINITE, FP16_OVERFLOW_AT, FP16_MIN_NORMAL, FP16_MIN_SUBNORMAL,
                     FP16_EPSILON, 5, 10, 0},
    [FP_FMT_BF16] = {"bf16", BF16_MAX_FINITE, BF16_OVERFLOW_AT, BF16_MIN_NORMAL, BF16_MIN_SUBNORMAL,
                     BF16_EPSILON, 8, 7, 0},
    [FP_FMT_E4M3] = {"e4m3", E4M3_MAX_FINITE, E4M3_OVERFLOW_AT, E4M3_MIN_NORMAL, E4M3_MIN_SUBNORMAL,
                     E4M3_EPSILON, 4, 3, 1},
    [FP_FMT_E5M2] = {"e5m2", E5M2_MAX_FINITE, E5M2_OVERFLOW_AT, E5M2_MIN_NORMAL, E5M2_MIN_SUBNORMAL,
                     E5M2_EPSILON, 5, 2, 0},
};

const fp_format_info_t *fp_format_info(fp_format f)
{
    if ((int)f < 0 || f >= FP_FMT_COUNT)
        return NULL;
    return &format_table[f];
}

int fp_format_parse(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < FP_FMT_COUNT; i++)
        if (strcasecmp(name, format_table[i].name) == 0)
            return i;
    return -1;
}
