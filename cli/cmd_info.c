/* cmd_info.c — `fp16probe devices` (CPU vector features, the conversion path in use, the BLAS kernels and who
 * chose them, the GPU or why there is none) and `fp16probe formats` (the format table of lib/formats.h). Read-only. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "formats.h"
#include "gpu_detect.h"
#include "numfmt.h"
#include "trainer/run/environment.h"

static int wants_help(int argc, char **argv, const char *usage_line)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n", usage_line);
            return 1;
        }
    }
    return argc > 1 ? -1 : 0;
}

int cmd_devices(int argc, char **argv)
{
    int h = wants_help(argc, argv, "fp16probe devices");
    if (h > 0)
        return 0;
    if (h < 0)
        return cli_error(2, "devices: unexpected argument '%s'", argv[1]);
    printf("cpu: conversion paths:");
    for (int isa = 0; isa < FP_ISA_COUNT; isa++)
        if (fp_numfmt_isa_supported((fp_isa)isa))
            printf(" %s", fp_isa_name((fp_isa)isa));
    printf(" (using %s)\n", fp_isa_name(fp_numfmt_isa()));
    const char *core = fp_env_blas_core(), *chosen = getenv("FP16PROBE_BLAS_CORE");
    if (core)
        printf("cpu: BLAS kernels: %s (%s)\n", core,
               chosen ? "chosen by fp16probe: OpenBLAS's detection fell back to generic kernels on this CPU; "
                        "OPENBLAS_CORETYPE overrides"
               : getenv("OPENBLAS_CORETYPE") ? "OPENBLAS_CORETYPE" : "OpenBLAS's detection");
    else
        printf("cpu: BLAS: %s\n", fp_env_blas_name());
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    if (gpu.available)
        printf("gpu: %s (sm_%d%d), %d device(s), %s\n", gpu.name, gpu.compute_major, gpu.compute_minor,
               gpu.device_count, gpu.compat);
    else
        printf("gpu: unavailable: %s; using the CPU\n", gpu.reason);
    return 0;
}

int cmd_formats(int argc, char **argv)
{
    int h = wants_help(argc, argv, "fp16probe formats");
    if (h > 0)
        return 0;
    if (h < 0)
        return cli_error(2, "formats: unexpected argument '%s'", argv[1]);
    printf("%-6s %5s %5s %14s %14s %14s %14s %s\n", "format", "exp", "mant", "max finite", "overflow at",
           "min normal", "min subnormal", "on overflow");
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        const fp_format_info_t *fi = fp_format_info((fp_format)f);
        printf("%-6s %5d %5d %14.6g %14.6g %14.6g %14.6g %s\n", fi->name, fi->exponent_bits, fi->mantissa_bits,
               fi->max_finite, fi->overflow_at, fi->min_normal, fi->min_subnormal,
               fi->saturates ? "saturates" : "Inf");
    }
    return 0;
}
