/* backend_cpu.c — the CPU backend of backend.h: instance, host memory with accounting, fp32 staging,
 * casts, relu, residual add / accumulate, softmax cross-entropy, unscale + check, and the ops table.
 * Promises: every op is the layers.h kernel (or the former model helper) bit for bit, 16-bit tensors
 * widened into fp32 staging before and narrowed after; dims and dtypes checked first. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser (relu mask). */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include <stdlib.h>
#include "numfmt.h"
#include "trainer/backend_cpu.h"

#define CHUNK 2048

size_t fp_tensor_count(const fp_tensor *t)
{
    if (t->d.n < 1 || t->d.h < 1 || t->d.w < 1 || t->d.c < 1)
        return 0;
    return (size_t)t->d.n * (size_t)t->d.h * (size_t)t->d.w * (size_t)t->d.c;
}

/* ---------------------------------------------------------------- checks */

int fp_bcpu_check(const char *op, const char *name, const fp_tensor *t, unsigned mask, int may_skip)
{
    if (!t->p)
        return may_skip ? FP_OK : fp_fail(FP_EINVAL, "%s: %s is NULL", op, name);
    unsigned bit = t->dt == FP_DT_F32 ? 1u : t->dt == FP_DT_F16 ? 2u : t->dt == FP_DT_BF16 ? 4u : 0u;
    if (!(bit & mask))
        return fp_fail(FP_EINVAL, "%s: %s has dtype %s, not accepted here", op, name, fp_dtype_name(t->dt));
    if (fp_tensor_count(t) == 0)
        return fp_fail(FP_EINVAL, "%s: %s has bad dims %dx%dx%dx%d", op, name, t->d.n, t->d.h, t->d.w, t->d.c);
    return FP_OK;
}

int fp_bcpu_same_dims(const char *op, const char *an, const fp_tensor *a, const char *bn, const fp_tensor *b)
{
    if (a->d.n != b->d.n || a->d.h != b->d.h || a->d.w != b->d.w || a->d.c != b->d.c)
        return fp_fail(FP_EINVAL, "%s: %s %dx%dx%dx%d and %s %dx%dx%dx%d differ", op, an, a->d.n, a->d.h, a->d.w,
                       a->d.c, bn, b->d.n, b->d.h, b->d.w, b->d.c);
    return FP_OK;
}

int fp_bcpu_check_compute(const char *op, fp_dtype compute)
{
    if ((unsigned)compute > FP_DT_BF16)
        return fp_fail(FP_EINVAL, "%s: bad compute dtype %d", op, (int)compute);
    return FP_OK;
}

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

/* dst = round_d(dst + round_d(c)): an fp32-computed gradient contribution (a 16-bit tensor in
 * PyTorch) summed into a 16-bit gradient. */
static void acc16(uint16_t *dst, const float *c, size_t n, fp_dtype d)
{
    float ta[CHUNK], tb[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        fp_widen_array(ta, dst + i, k, d);
        fp_round_to_dtype_copy(tb, c + i, k, d);
        for (size_t j = 0; j < k; j++)
            ta[j] += tb[j];
        fp_narrow_array(dst + i, ta, k, d);
    }
}

void fp_bcpu_dx_end(const fp_tensor *t, int accumulate, const float *buf)
{
    if (!fp_bcpu_is16(t->dt))
        return;
    if (accumulate)
        acc16(t->p, buf, fp_tensor_count(t), t->dt);
    else
        fp_narrow_array(t->p, buf, fp_tensor_count(t), t->dt);
}

void fp_bcpu_add16(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n, fp_dtype d)
{
    float ta[CHUNK], tb[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t c = n - i < CHUNK ? n - i : CHUNK;
        fp_widen_array(ta, a + i, c, d);
        fp_widen_array(tb, b + i, c, d);
        for (size_t k = 0; k < c; k++)
            ta[k] += tb[k];
        fp_narrow_array(y + i, ta, c, d);
    }
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

/* ---------------------------------------------------------------- casts */

static int cpu_cast(fp_backend *be, fp_tensor dst, fp_tensor src)
{
    (void)be;
    int rc = fp_bcpu_check("cast", "dst", &dst, FP_BCPU_ANY, 0);
    rc = rc ? rc : fp_bcpu_check("cast", "src", &src, FP_BCPU_ANY, 0);
    if (rc)
        return rc;
    size_t n = fp_tensor_count(&src);
    if (fp_tensor_count(&dst) != n)
        return fp_fail(FP_EINVAL, "cast: %zu values into %zu", n, fp_tensor_count(&dst));
    if (dst.dt == src.dt) {
        if (dst.p != src.p)
            memcpy(dst.p, src.p, n * (size_t)fp_dtype_bytes(dst.dt));
    } else if (dst.dt == FP_DT_F32) {
        fp_widen_array(dst.p, src.p, n, src.dt);
    } else if (src.dt == FP_DT_F32) {
        fp_narrow_array(dst.p, src.p, n, dst.dt);
    } else {   /* one 16-bit format to the other, through fp32 */
        float t[CHUNK];
        for (size_t i = 0; i < n; i += CHUNK) {
            size_t c = n - i < CHUNK ? n - i : CHUNK;
            fp_widen_array(t, (const uint16_t *)src.p + i, c, src.dt);
            fp_narrow_array((uint16_t *)dst.p + i, t, c, dst.dt);
        }
    }
    return FP_OK;
}

static int cpu_round(fp_backend *be, fp_tensor dst, fp_tensor src, fp_dtype to)
{
    (void)be;
    int rc = fp_bcpu_check("round", "dst", &dst, FP_BCPU_F32, 0);
    rc = rc ? rc : fp_bcpu_check("round", "src", &src, FP_BCPU_F32, 0);
    rc = rc ? rc : fp_bcpu_check_compute("round", to);
    if (rc)
        return rc;
    if (fp_tensor_count(&dst) != fp_tensor_count(&src))
        return fp_fail(FP_EINVAL, "round: %zu values into %zu", fp_tensor_count(&src), fp_tensor_count(&dst));
    if (dst.p == src.p)
        fp_round_to_dtype(dst.p, fp_tensor_count(&dst), to);
    else
        fp_round_to_dtype_copy(dst.p, src.p, fp_tensor_count(&dst), to);
    return FP_OK;
}

/* ---------------------------------------------------------------- relu */

/* relu on 16-bit storage, the kernel's semantics (v < 0 ? 0 : v: -0 and NaN pass through). */
static void relu16(uint16_t *restrict y, const uint16_t *restrict x, size_t n, fp_dtype d)
{
    unsigned inf = d == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < n; i++) {
        unsigned h = x[i], mag = h & 0x7fffu;
        y[i] = (uint16_t)((h & 0x8000u) && mag && mag <= inf ? 0u : h);
    }
}

/* dy = y > 0 ? dy : +0 on 16-bit storage (y > 0: sign clear, nonzero, not NaN), in place ... */
static void relu_mask16(uint16_t *restrict dy, const uint16_t *restrict y, size_t n, fp_dtype d)
{
    unsigned inf = d == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < n; i++)
        dy[i] = (uint16_t)((unsigned)(uint16_t)(y[i] - 1u) < inf ? dy[i] : 0u);
}
/* ... and into another buffer. */
static void relu_mask16_to(uint16_t *restrict dx, const uint16_t *restrict dy, const uint16_t *restrict y, size_t n,
                           fp_dtype d)
{
    unsigned inf = d == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < n; i++)
        dx[i] = (uint16_t)((unsigned)(uint16_t)(y[i] - 1u) < inf ? dy[i] : 0u);
}

static int cpu_relu_forward(fp_backend *be, fp_tensor y, fp_tensor x)
{
    (void)be;
    int rc = fp_bcpu_check("relu_forward", "y", &y, FP_BCPU_ANY, 0);
    rc = rc ? rc : fp_bcpu_check("relu_forward", "x", &x, FP_BCPU_ANY, 0);
    rc = rc ? rc : fp_bcpu_same_dims("relu_forward", "y", &y, "x", &x);
    if (!rc && y.dt != x.dt)
        rc = fp_fail(FP_EINVAL, "relu_forward: y and x of different formats");
    if (rc)
        return rc;
    size_t n = fp_tensor_count(&x);
    if (!fp_bcpu_is16(x.dt))
        return fp_relu_forward(y.p, x.p, n);
    if (y.p == x.p) {   /* in place: the same loop, one pointer (restrict is about the other) */
        uint16_t *p = y.p;
        unsigned inf = x.dt == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
        for (size_t i = 0; i < n; i++) {
            unsigned h = p[i], mag = h & 0x7fffu;
            p[i] = (uint16_t)((h & 0x8000u) && mag && mag <= inf ? 0u : h);
        }
    } else {
        relu16(y.p, x.p, n, x.dt);
    }
    return FP_OK;
}

static int cpu_relu_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor y, int accumulate)
{
    (void)be;
    const char *op = "relu_backward";
    int rc = fp_bcpu_check(op, "dx", &dx, FP_BCPU_ANY, 0);
    rc = rc ? rc : fp_bcpu_check(op, "dy", &dy, FP_BCPU_ANY, 0);
    rc = rc ? rc : fp_bcpu_check(op, "y", &y, FP_BCPU_ANY, 0);
    rc = rc ? rc : fp_bcpu_same_dims(op, "dx", &dx, "dy", &dy);
    rc = rc ? rc : fp_bcpu_same_dims(op, "dy", &dy, "y", &y);
    if (!rc && (dx.dt != dy.dt || dy.dt != y.dt))
        rc = fp_fail(FP_EINVAL, "%s: dx, dy and y of different formats", op);
    if (!rc && accumulate && dx.p == dy.p)
        rc = fp_fail(FP_EINVAL, "%s: dx aliases dy while accumulating", op);
    if (rc)
        return rc;
    size_t n = fp_tensor_count(&dy);
    if (!fp_bcpu_is16(dy.dt)) {
        if (accumulate)
            return fp_relu_backward(dx.p, dy.p, y.p, n);
        float *o = dx.p;
        const float *g = dy.p, *yy = y.p;
        for (size_t k = 0; k < n; k++)
            o[k] = yy[k] > 0 ? g[k] : 0.0f;
        return FP_OK;
    }
    if (!accumulate) {
        if (dx.p == dy.p)
            relu_mask16(dx.p, y.p, n, y.dt);
        else
            relu_mask16_to(dx.p, dy.p, y.p, n, y.dt);
        return FP_OK;
    }
    /* round(dx + masked dy), as the 16-bit add of the masked gradient */
    unsigned inf = y.dt == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
    const uint16_t *ym = y.p, *g = dy.p;
    uint16_t *o = dx.p;
    float ta[CHUNK], tb[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t c = n - i < CHUNK ? n - i : CHUNK;
        fp_widen_array(ta, o + i, c, dx.dt);
        fp_widen_array(tb, g + i, c, dy.dt);
        for (size_t k = 0; k < c; k++)
            ta[k] += (unsigned)(uint16_t)(ym[i + k] - 1u) < inf ? tb[k] : 0.0f;
        fp_narrow_array(o + i, ta, c, dx.dt);
    }
    return FP_OK;
}

/* ---------------------------------------------------------------- residual */

static int cpu_add(fp_backend *be, fp_tensor y, fp_tensor a, fp_tensor b)
{
    int rc = fp_bcpu_check("add", "y", &y, FP_BCPU_ANY, 0);
    rc = rc ? rc : fp_bcpu_check("add", "a", &a, FP_BCPU_ANY, 0);
    rc = rc ? rc : fp_bcpu_check("add", "b", &b, FP_BCPU_ANY, 0);
    size_t n = fp_tensor_count(&a);
    if (!rc && (fp_tensor_count(&b) != n || fp_tensor_count(&y) != n))
        rc = fp_fail(FP_EINVAL, "add: counts %zu, %zu -> %zu differ", n, fp_tensor_count(&b), fp_tensor_count(&y));
    if (rc)
        return rc;
    if (fp_bcpu_is16(a.dt) && b.dt == a.dt && y.dt == a.dt) {
        fp_bcpu_add16(y.p, a.p, b.p, n, a.dt);
        return FP_OK;
    }
    if (a.dt == FP_DT_F32 && b.dt == FP_DT_F32 && y.dt == FP_DT_F32)
        return fp_add_forward(y.p, a.p, b.p, n);
    const float *a32 = fp_bcpu_in(be, &a, 0), *b32 = fp_bcpu_in(be, &b, 1);   /* mixed: through fp32 */
    float *y32 = fp_bcpu_out(be, &y, 2);
    if (!a32 || !b32 || !y32)
        return FP_ENOMEM;
    rc = fp_add_forward(y32, a32, b32, n);
    fp_bcpu_store(&y, y32);
    return rc;
}

static int cpu_accumulate(fp_backend *be, fp_tensor dst, fp_tensor src)
{
    (void)be;
    int rc = fp_bcpu_check("accumulate", "dst", &dst, FP_BCPU_ANY, 0);
    rc = rc ? rc : fp_bcpu_check("accumulate", "src", &src, FP_BCPU_ANY, 0);
    size_t n = fp_tensor_count(&src);
    if (!rc && fp_tensor_count(&dst) != n)
        rc = fp_fail(FP_EINVAL, "accumulate: %zu values into %zu", n, fp_tensor_count(&dst));
    if (rc)
        return rc;
    fp_dtype d = dst.dt, sd = src.dt;
    if (!fp_bcpu_is16(d) && !fp_bcpu_is16(sd))
        return fp_accumulate(dst.p, src.p, n);
    if (d == sd) {
        fp_bcpu_add16(dst.p, dst.p, src.p, n, d);
        return FP_OK;
    }
    for (size_t i = 0; i < n; i += CHUNK) {   /* mixed formats through fp32 */
        size_t c = n - i < CHUNK ? n - i : CHUNK;
        float ta[CHUNK], tb[CHUNK];
        const float *a = fp_bcpu_is16(d) ? (fp_widen_array(ta, (const uint16_t *)dst.p + i, c, d), ta)
                                         : (float *)dst.p + i;
        const float *b = fp_bcpu_is16(sd) ? (fp_widen_array(tb, (const uint16_t *)src.p + i, c, sd), tb)
                                          : (const float *)src.p + i;
        for (size_t k = 0; k < c; k++)
            ta[k] = a[k] + b[k];
        if (fp_bcpu_is16(d))
            fp_narrow_array((uint16_t *)dst.p + i, ta, c, d);
        else
            memcpy((float *)dst.p + i, ta, c * sizeof(float));
    }
    return FP_OK;
}

/* ---------------------------------------------------------------- loss and scaler */

static int cpu_softmax_xent(fp_backend *be, float *loss, fp_tensor dlogits, int *correct1, int *correct5,
                            fp_tensor logits, const int *labels, float dscale)
{
    (void)be;
    int rc = fp_bcpu_check("softmax_xent", "logits", &logits, FP_BCPU_F32, 0);
    rc = rc ? rc : fp_bcpu_check("softmax_xent", "dlogits", &dlogits, FP_BCPU_F32, 1);
    if (!rc && dlogits.p)
        rc = fp_bcpu_same_dims("softmax_xent", "dlogits", &dlogits, "logits", &logits);
    if (!rc && (logits.d.h != 1 || logits.d.w != 1))
        rc = fp_fail(FP_EINVAL, "softmax_xent: logits must be {n, 1, 1, classes}");
    if (!rc && (!loss || !labels))
        rc = fp_fail(FP_EINVAL, "softmax_xent: NULL loss or labels");
    if (rc)
        return rc;
    rc = fp_softmax_xent(loss, dlogits.p, correct1, correct5, logits.p, labels, logits.d.n, logits.d.c);
    if (!rc && dlogits.p && dscale != 1.0f) {   /* d(loss * s)/dlogits, in fp32 */
        float *g = dlogits.p;
        size_t n = fp_tensor_count(&dlogits);
        for (size_t i = 0; i < n; i++)
            g[i] *= dscale;
    }
    return rc;
}

static int cpu_unscale_check(fp_backend *be, int *found_inf, fp_tensor g, float inv_scale)
{
    (void)be;
    int rc = fp_bcpu_check("unscale_check", "g", &g, FP_BCPU_F32, 0);
    if (!rc && !found_inf)
        rc = fp_fail(FP_EINVAL, "unscale_check: NULL found_inf");
    if (rc)
        return rc;
    *found_inf = fp_unscale_and_check(g.p, fp_tensor_count(&g), inv_scale);
    return FP_OK;
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
    .cast = cpu_cast,
    .round = cpu_round,
    .conv_forward = fp_bcpu_conv_forward,
    .conv_backward_data = fp_bcpu_conv_backward_data,
    .conv_backward_weights = fp_bcpu_conv_backward_weights,
    .bn_forward_train = fp_bcpu_bn_forward_train,
    .bn_forward_eval = fp_bcpu_bn_forward_eval,
    .bn_backward = fp_bcpu_bn_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .maxpool_forward = fp_bcpu_maxpool_forward,
    .maxpool_backward = fp_bcpu_maxpool_backward,
    .avgpool_forward = fp_bcpu_avgpool_forward,
    .avgpool_backward = fp_bcpu_avgpool_backward,
    .linear_forward = fp_bcpu_linear_forward,
    .linear_backward_data = fp_bcpu_linear_backward_data,
    .linear_backward_weights = fp_bcpu_linear_backward_weights,
    .add = cpu_add,
    .accumulate = cpu_accumulate,
    .softmax_xent = cpu_softmax_xent,
    .unscale_check = cpu_unscale_check,
};

const fp_backend_ops *fp_backend_cpu(void) { return &cpu_ops; }
