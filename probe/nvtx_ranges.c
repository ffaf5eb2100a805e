/* nvtx_ranges.c — NVTX ranges (header-only NVTX3) around every step, layer and phase, named as in
 * the store ("layer3.2.conv2 backward_weights"), so Nsight Systems timelines show our names.
 * Promises: names are built once at create; a push/pop pair per layer call, nothing else. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nvtx3/nvToolsExt.h>
#include "error.h"
#include "probe/probe.h"

struct fp_nvtx {
    int nlayers;
    char **names;   /* [nlayers][FP_PHASE_COUNT] */
};

int fp_nvtx_compiled(void) { return 1; }

int fp_nvtx_create(fp_nvtx **out, int nl, const char *const *layer_names)
{
    *out = NULL;
    fp_nvtx *n = calloc(1, sizeof *n);
    if (!n || !(n->names = calloc((size_t)nl * FP_PHASE_COUNT, sizeof *n->names))) {
        free(n);
        return fp_fail(FP_ENOMEM, "nvtx: out of memory");
    }
    n->nlayers = nl;
    for (int l = 0; l < nl; l++)
        for (int ph = 0; ph < FP_PHASE_COUNT; ph++) {
            const char *ln = layer_names[l], *pn = fp_phase_name((fp_phase)ph);
            size_t len = strlen(ln) + strlen(pn) + 2;
            char *s = malloc(len);
            if (!s) {
                fp_nvtx_free(n);
                return fp_fail(FP_ENOMEM, "nvtx: out of memory");
            }
            snprintf(s, len, "%s %s", ln, pn);
            n->names[(size_t)l * FP_PHASE_COUNT + ph] = s;
        }
    *out = n;
    return FP_OK;
}

void fp_nvtx_free(fp_nvtx *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < (size_t)n->nlayers * FP_PHASE_COUNT; i++)
        free(n->names[i]);
    free(n->names);
    free(n);
}

static unsigned nv_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)self;
    (void)loss_scale;
    char name[48];
    snprintf(name, sizeof name, "step %lld", (long long)step);
    nvtxRangePushA(name);
    return 0;
}

static void nv_step_end(void *self, int64_t step)
{
    (void)self;
    (void)step;
    nvtxRangePop();
}

static void nv_layer_begin(void *self, int layer, fp_phase phase)
{
    fp_nvtx *n = self;
    nvtxRangePushA(layer >= 0 && layer < n->nlayers && (unsigned)phase < FP_PHASE_COUNT
                       ? n->names[(size_t)layer * FP_PHASE_COUNT + phase]
                       : "layer");
}

static void nv_layer_end(void *self, int layer, fp_phase phase)
{
    (void)self;
    (void)layer;
    (void)phase;
    nvtxRangePop();
}

static const fp_probe_ops nvtx_ops = {"nvtx", nv_step_begin, nv_step_end, nv_layer_begin, nv_layer_end, NULL};

int fp_nvtx_attach(fp_nvtx *n, fp_probe *p)
{
    if (!n)
        return fp_fail(FP_EINVAL, "nvtx: NULL");
    return fp_probe_add(p, &nvtx_ops, n);
}
