/* backend_cpu.c — the CPU backend of backend.h: instance, host memory with accounting, the checks and
 * the fp32 staging (widen / compute / narrow) shared by its ops, and the ops table.
 * Promises: every op is the layers.h kernel (or the former model helper) bit for bit, 16-bit tensors
 * widened into fp32 staging before and narrowed after; dims and dtypes checked first. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser (16-bit add). */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include <stdlib.h>
#include "numfmt.h"
#include "trainer/backend_cpu.h"

#define CHUNK 2048

/* ---------------------------------------------------------------- staging */

static size_t staging_bytes(const fp_backend *be)
{
    size_t s = be->wst_cap;
    for (int i = 0; i < FP_BCPU_SLOTS; i++)
        s += be->st_cap[i];
    return s * sizeof(float);
}

static void note_staging(fp_backend *be)
{
    size_t s = staging_bytes(be);
    if (s > be->staging_peak)
        be->staging_peak = s;
}

/* Grows *buf to hold floats (contents not kept); FP_ENOMEM leaves it empty. */
static int grow_buf(fp_backend *be, float **buf, size_t *cap, size_t floats)
{
    if (floats <= *cap)
        return FP_OK;
    free(*buf);
    *buf = malloc(floats * sizeof(float));
    *cap = *buf ? floats : 0;
    if (!*buf)
        return fp_fail(FP_ENOMEM, "cpu backend: out of memory for %zu floats of staging", floats);
    note_staging(be);
    return FP_OK;
}

float *fp_bcpu_stage(fp_backend *be, int slot, size_t floats)
{
    return grow_buf(be, &be->st[slot], &be->st_cap[slot], floats) ? NULL : be->st[slot];
}

float *fp_bcpu_wstage(fp_backend *be, size_t floats)
{
    if (grow_buf(be, &be->wst, &be->wst_cap, floats))
        return NULL;
    memset(be->wst, 0, floats * sizeof(float));
    return be->wst;
}

const float *fp_bcpu_in(fp_backend *be, const fp_tensor *t, int slot)
{
    if (!fp_bcpu_is16(t->dt))
        return t->p;
    size_t cnt = fp_tensor_count(t);
    float *buf = fp_bcpu_stage(be, slot, cnt);
    if (buf)
        fp_widen_array(buf, t->p, cnt, t->dt);
    return buf;
}

const float *fp_bcpu_in_compute(fp_backend *be, const fp_tensor *t, fp_dtype c, int slot)
{
    size_t cnt = fp_tensor_count(t);
    if (!fp_bcpu_is16(t->dt) && c == FP_DT_F32)
        return t->p;
    float *buf = fp_bcpu_stage(be, slot, cnt);
    if (!buf)
        return NULL;
    if (fp_bcpu_is16(t->dt)) {
        fp_widen_array(buf, t->p, cnt, t->dt);
        if (c != t->dt && c != FP_DT_F32)
            fp_round_to_dtype(buf, cnt, c);
        return buf;
    }
    fp_round_to_dtype_copy(buf, t->p, cnt, c);
    return buf;
}

const float *fp_bcpu_weight(fp_backend *be, const fp_tensor *w, fp_dtype compute, int slot)
{
    return fp_bcpu_is16(w->dt) ? fp_bcpu_in_compute(be, w, compute, slot) : w->p;
}

float *fp_bcpu_out(fp_backend *be, const fp_tensor *t, int slot)
{
    return fp_bcpu_is16(t->dt) ? fp_bcpu_stage(be, slot, fp_tensor_count(t)) : t->p;
}

void fp_bcpu_store(const fp_tensor *t, const float *buf)
{
    if (fp_bcpu_is16(t->dt))
        fp_narrow_array(t->p, buf, fp_tensor_count(t), t->dt);
}

float *fp_bcpu_dx_begin(fp_backend *be, const fp_tensor *t, int accumulate, int slot)
{
    size_t cnt = fp_tensor_count(t);
    if (!fp_bcpu_is16(t->dt)) {
        if (!accumulate)
            memset(t->p, 0, cnt * sizeof(float));
        return t->p;
    }
    float *buf = fp_bcpu_stage(be, slot, cnt);
    if (buf)
        memset(buf, 0, cnt * sizeof(float));
    return buf;
}

/* y = round_d(a + b), CHUNK values at a time: a in the 16-bit format d; b in d (b16) or, when b16 is NULL, fp32
 * rounded to d first (b32: an fp32-computed gradient contribution, a 16-bit tensor in PyTorch). y may alias a. */
static void add16(uint16_t *y, const uint16_t *a, const uint16_t *b16, const float *b32, size_t n, fp_dtype d)
{
    float ta[CHUNK], tb[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        fp_widen_array(ta, a + i, k, d);
        if (b16)
            fp_widen_array(tb, b16 + i, k, d);
        else
            fp_round_to_dtype_copy(tb, b32 + i, k, d);
        for (size_t j = 0; j < k; j++)
            ta[j] += tb[j];
        fp_narrow_array(y + i, ta, k, d);
    }
}

void fp_bcpu_dx_end(const fp_tensor *t, int accumulate, const float *buf)
{
    if (!fp_bcpu_is16(t->dt))
        return;
    if (accumulate)   /* dst = round_d(dst + round_d(buf)) */
        add16(t->p, t->p, NULL, buf, fp_tensor_count(t), t->dt);
    else
        fp_narrow_array(t->p, buf, fp_tensor_count(t), t->dt);
}

void fp_bcpu_add16(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n, fp_dtype d)
{
    add16(y, a, b, NULL, n, d);
}

/* ---------------------------------------------------------------- instance and memory */

static int cpu_create(fp_backend **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return fp_fail(FP_ENOMEM, "cpu backend: out of memory");
    (*out)->ws.threads = 1;
    return FP_OK;
}

static void cpu_destroy(fp_backend *be)
{
    if (!be)
        return;
    fp_workspace_free(&be->ws);
    for (int i = 0; i < FP_BCPU_SLOTS; i++)
        free(be->st[i]);
    free(be->wst);
    free(be);
}

static void cpu_set_threads(fp_backend *be, int threads) { be->ws.threads = threads < 1 ? 1 : threads; }
static int cpu_sync(fp_backend *be) { (void)be; return FP_OK; }

static int cpu_alloc(fp_backend *be, void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        return fp_fail(FP_ENOMEM, "cpu backend: out of memory for %zu MiB", bytes >> 20);
    be->allocated += bytes;
    if (be->allocated > be->allocated_peak)
        be->allocated_peak = be->allocated;
    return FP_OK;
}

static void cpu_free(fp_backend *be, void *p, size_t bytes)
{
    if (!p)
        return;
    free(p);
    be->allocated -= bytes <= be->allocated ? bytes : be->allocated;
}

static int cpu_copy(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes && (!dst || !src))
        return fp_fail(FP_EINVAL, "cpu backend: copy with a NULL pointer");
    if (dst != src)
        memcpy(dst, src, bytes);
    return FP_OK;
}

static int cpu_zero(fp_backend *be, void *p, size_t bytes)
{
    (void)be;
    if (bytes && !p)
        return fp_fail(FP_EINVAL, "cpu backend: zero of a NULL pointer");
    memset(p, 0, bytes);
    return FP_OK;
}

static int cpu_reserve(fp_backend *be, size_t act_elems, size_t weight_elems)
{
    for (int i = 0; i < 3; i++)
        if (act_elems && !fp_bcpu_stage(be, i, act_elems))
            return FP_ENOMEM;
    if (weight_elems && grow_buf(be, &be->wst, &be->wst_cap, weight_elems))
        return FP_ENOMEM;
    return FP_OK;
}

static void cpu_memory(const fp_backend *be, fp_backend_mem *o)
{
    o->allocated = be->allocated;
    o->allocated_peak = be->allocated_peak;
    o->workspace = be->ws.cap * sizeof(float);
    o->workspace_peak = be->ws_peak > o->workspace ? be->ws_peak : o->workspace;
    o->staging = staging_bytes(be);
    o->staging_peak = be->staging_peak > o->staging ? be->staging_peak : o->staging;
}

/* ---------------------------------------------------------------- the table */

static const fp_backend_ops cpu_ops = {
    .name = "cpu",
    .host_memory = 1,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .set_threads = cpu_set_threads,
    .sync = cpu_sync,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .reserve = cpu_reserve,
    .memory = cpu_memory,
    .cast = fp_bcpu_cast,
    .round = fp_bcpu_round,
    .conv_forward = fp_bcpu_conv_forward,
    .conv_backward_data = fp_bcpu_conv_backward_data,
    .conv_backward_weights = fp_bcpu_conv_backward_weights,
    .bn_forward_train = fp_bcpu_bn_forward_train,
    .bn_forward_eval = fp_bcpu_bn_forward_eval,
    .bn_backward = fp_bcpu_bn_backward,
    .bn_act_query = fp_bcpu_bn_act_query,
    .bn_act_forward_train = fp_bcpu_bn_act_forward_train,
    .bn_act_backward = fp_bcpu_bn_act_backward,
    .bn_sync_stats = fp_bcpu_bn_sync_stats,
    .bn_sync_forward = fp_bcpu_bn_sync_forward,
    .bn_sync_backward_sums = fp_bcpu_bn_sync_backward_sums,
    .bn_sync_backward_dx = fp_bcpu_bn_sync_backward_dx,
    .relu_forward = fp_bcpu_relu_forward,
    .relu_backward = fp_bcpu_relu_backward,
    .maxpool_forward = fp_bcpu_maxpool_forward,
    .maxpool_backward = fp_bcpu_maxpool_backward,
    .avgpool_forward = fp_bcpu_avgpool_forward,
    .avgpool_backward = fp_bcpu_avgpool_backward,
    .linear_forward = fp_bcpu_linear_forward,
    .linear_backward_data = fp_bcpu_linear_backward_data,
    .linear_backward_weights = fp_bcpu_linear_backward_weights,
    .add = fp_bcpu_add,
    .accumulate = fp_bcpu_accumulate,
    .softmax_xent = fp_bcpu_softmax_xent,
    .unscale_check = fp_bcpu_unscale_check,
    .update_delta = fp_bcpu_update_delta,
};

const fp_backend_ops *fp_backend_cpu(void) { return &cpu_ops; }
