/* gpu_fallback.c — what every build has of the GPU probes: the tensor-core kernel-name heuristic,
 * and, where CUPTI or NVTX3 were not found, stand-ins that say "unavailable" (FP_EUNAVAIL) so the
 * trainer calls the same functions in every build. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "probe/probe.h"

int fp_kernel_uses_tensor_cores(const char *name)
{
    if (!name)
        return 0;
    static const char *const marks[] = {"hmma", "imma", "s16816", "h16816", "s1688", "h1688", "xmma",
                                        "gmma", "wgmma", "_tensorop_", "tensorop"};
    for (size_t i = 0; i < sizeof marks / sizeof *marks; i++)
        if (strstr(name, marks[i]))
            return 1;
    if (strstr(name, "cutlass") && (strstr(name, "f16") || strstr(name, "bf16") || strstr(name, "h16")))
        return 1;
    return 0;
}

#ifndef HAVE_CUPTI
struct fp_cupti {
    int unused;
};
int fp_cupti_open(fp_cupti **out, fp_store_t *store, int64_t run, int trace_every)
{
    (void)store;
    (void)run;
    (void)trace_every;
    *out = calloc(1, sizeof **out);
    return *out ? FP_OK : fp_fail(FP_ENOMEM, "cupti: out of memory");
}
void fp_cupti_close(fp_cupti *c) { free(c); }
int fp_cupti_available(const fp_cupti *c)
{
    (void)c;
    return 0;
}
const char *fp_cupti_reason(const fp_cupti *c)
{
    (void)c;
    return "built without CUPTI";
}
int fp_cupti_attach(fp_cupti *c, fp_probe *p)
{
    (void)c;
    (void)p;
    return fp_fail(FP_EUNAVAIL, "cupti: built without CUPTI");
}
int fp_cupti_flush(fp_cupti *c)
{
    (void)c;
    return fp_fail(FP_EUNAVAIL, "cupti: built without CUPTI");
}
uint64_t fp_cupti_dropped(const fp_cupti *c)
{
    (void)c;
    return 0;
}
uint64_t fp_cupti_kernels(const fp_cupti *c)
{
    (void)c;
    return 0;
}
#endif

#ifndef HAVE_NVTX
struct fp_nvtx {
    int unused;
};
int fp_nvtx_compiled(void) { return 0; }
int fp_nvtx_create(fp_nvtx **out, const struct fp_model *m)
{
    (void)m;
    *out = NULL;
    return fp_fail(FP_EUNAVAIL, "nvtx: built without NVTX3");
}
void fp_nvtx_free(fp_nvtx *n) { free(n); }
int fp_nvtx_attach(fp_nvtx *n, fp_probe *p)
{
    (void)n;
    (void)p;
    return fp_fail(FP_EUNAVAIL, "nvtx: built without NVTX3");
}
#endif
