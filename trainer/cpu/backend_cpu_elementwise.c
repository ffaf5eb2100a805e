/* backend_cpu_elementwise.c — the CPU backend's element-wise ops: casts and rounding, relu forward /
 * backward (16-bit storage handled bit-wise), residual add / accumulate, softmax cross-entropy, the fused
 * unscale + non-finite check and the parameter update with its lost-update counts (update_delta). Promises:
 * the former model helpers and layers.h kernels bit for bit. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser (relu mask). */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include "numfmt.h"
#include "trainer/backend_cpu.h"

#define CHUNK 2048

/* ---------------------------------------------------------------- casts */

int fp_bcpu_cast(fp_backend *be, fp_tensor dst, fp_tensor src)
{
    (void)be;
    int rc = fp_backend_check("cast", "dst", &dst, FP_BACKEND_ANY, 0);
    rc = rc ? rc : fp_backend_check("cast", "src", &src, FP_BACKEND_ANY, 0);
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

int fp_bcpu_round(fp_backend *be, fp_tensor dst, fp_tensor src, fp_dtype to)
{
    (void)be;
    int rc = fp_backend_check("round", "dst", &dst, FP_BACKEND_F32, 0);
    rc = rc ? rc : fp_backend_check("round", "src", &src, FP_BACKEND_F32, 0);
    rc = rc ? rc : fp_backend_check_compute("round", to);
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

int fp_bcpu_relu_forward(fp_backend *be, fp_tensor y, fp_tensor x)
{
    (void)be;
    int rc = fp_backend_check("relu_forward", "y", &y, FP_BACKEND_ANY, 0);
    rc = rc ? rc : fp_backend_check("relu_forward", "x", &x, FP_BACKEND_ANY, 0);
    rc = rc ? rc : fp_backend_same_dims("relu_forward", "y", &y, "x", &x);
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

int fp_bcpu_relu_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor y, int accumulate)
{
    (void)be;
    const char *op = "relu_backward";
    int rc = fp_backend_check(op, "dx", &dx, FP_BACKEND_ANY, 0);
    rc = rc ? rc : fp_backend_check(op, "dy", &dy, FP_BACKEND_ANY, 0);
    rc = rc ? rc : fp_backend_check(op, "y", &y, FP_BACKEND_ANY, 0);
    rc = rc ? rc : fp_backend_same_dims(op, "dx", &dx, "dy", &dy);
    rc = rc ? rc : fp_backend_same_dims(op, "dy", &dy, "y", &y);
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
        const float *yy = y.p;
        if (dx.p == dy.p) {   /* in place: one pointer read and written, so the loop vectorises */
            float *g = dy.p;
            for (size_t k = 0; k < n; k++)
                g[k] = yy[k] > 0 ? g[k] : 0.0f;
        } else {
            float *restrict o = dx.p;
            const float *restrict g = dy.p;
            for (size_t k = 0; k < n; k++)
                o[k] = yy[k] > 0 ? g[k] : 0.0f;
        }
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

int fp_bcpu_add(fp_backend *be, fp_tensor y, fp_tensor a, fp_tensor b)
{
    int rc = fp_backend_check("add", "y", &y, FP_BACKEND_ANY, 0);
    rc = rc ? rc : fp_backend_check("add", "a", &a, FP_BACKEND_ANY, 0);
    rc = rc ? rc : fp_backend_check("add", "b", &b, FP_BACKEND_ANY, 0);
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

int fp_bcpu_accumulate(fp_backend *be, fp_tensor dst, fp_tensor src)
{
    (void)be;
    int rc = fp_backend_check("accumulate", "dst", &dst, FP_BACKEND_ANY, 0);
    rc = rc ? rc : fp_backend_check("accumulate", "src", &src, FP_BACKEND_ANY, 0);
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

int fp_bcpu_softmax_xent(fp_backend *be, float *loss, fp_tensor dlogits, int *correct1, int *correct5,
                            fp_tensor logits, const int *labels, float dscale)
{
    (void)be;
    int rc = fp_backend_check("softmax_xent", "logits", &logits, FP_BACKEND_F32, 0);
    rc = rc ? rc : fp_backend_check("softmax_xent", "dlogits", &dlogits, FP_BACKEND_F32, 1);
    if (!rc && dlogits.p)
        rc = fp_backend_same_dims("softmax_xent", "dlogits", &dlogits, "logits", &logits);
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

int fp_bcpu_unscale_check(fp_backend *be, int *found_inf, fp_tensor g, float inv_scale)
{
    (void)be;
    int rc = fp_backend_check("unscale_check", "g", &g, FP_BACKEND_F32, 0);
    if (!rc && !found_inf)
        rc = fp_fail(FP_EINVAL, "unscale_check: NULL found_inf");
    if (rc)
        return rc;
    *found_inf = fp_unscale_and_check(g.p, fp_tensor_count(&g), inv_scale);
    return FP_OK;
}

int fp_bcpu_update_delta(fp_backend *be, fp_tensor d, fp_tensor nw, fp_tensor old, fp_tensor g, size_t *lost,
                         size_t *moved)
{
    (void)be;
    int rc = fp_backend_update_check("update_delta", &d, &nw, &old, &g, lost, moved);
    if (!rc)
        fp_update_delta(d.p, nw.p, old.p, g.p, fp_tensor_count(&d), lost, moved);
    return rc;
}
