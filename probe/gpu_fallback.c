/* gpu_fallback.c — where CUPTI or NVTX3 were not found: stand-ins that say "unavailable"
 * (FP_EUNAVAIL), so the trainer calls the same functions in every build. */
#include "config.h"
#include <stdlib.h>
#include "error.h"
#include "probe/probe.h"

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
int fp_cupti_set_run(fp_cupti *c, fp_store_t *store, int64_t run)
{
    (void)c;
    (void)store;
    (void)run;
    return fp_fail(FP_EUNAVAIL, "cupti: built without CUPTI");
}
int64_t fp_cupti_run(const fp_cupti *c)
{
    (void)c;
    return 0;
}
void fp_cupti_device_buffers(const fp_cupti *c, size_t *bytes, size_t *pool)
{
    (void)c;
    if (bytes)
        *bytes = 0;
    if (pool)
        *pool = 0;
}
#endif

#ifndef HAVE_NVTX
struct fp_nvtx {
    int unused;
};
int fp_nvtx_compiled(void) { return 0; }
int fp_nvtx_create(fp_nvtx **out, int nlayers, const char *const *layer_names)
{
    (void)nlayers;
    (void)layer_names;
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
