/* test_cuda_elementwise.c — the CUDA backend's vectorised, dtype-templated element-wise kernels
 * (trainer/cuda/backend_kernels.cu: cast, round, add / accumulate, add with the 16-bit gradient rounding,
 * scale, relu forward / backward) against the CPU backend bit for bit, on odd sizes (the 8-wide path's
 * tails) and on views at element offsets 0, 1, 3 and 8 (misaligned pointers take the one-at-a-time path),
 * in place where backend.h allows it; the elements around each view must stay untouched. Skips with a TAP
 * reason when built without CUDA or when no GPU is usable. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtype.h"
#include "error.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/backend_kernels.h"

static const fp_backend_ops *C, *G;
static fp_backend *cb, *gb;
static uint32_t rng = 0x2545F491u;

enum { PAD = 16 };   /* elements before the largest offset's view and after every view */
static const size_t sizes[] = {1, 7, 8, 9, 15, 17, 1023, 4099, 65543};
static const size_t offs[] = {0, 1, 3, 8};
#define NSIZES (sizeof sizes / sizeof *sizes)
#define NOFFS (sizeof offs / sizeof *offs)
static const fp_dtype fmts[3] = {FP_DT_F32, FP_DT_F16, FP_DT_BF16};
static const char *dn(fp_dtype d) { return fp_dtype_name(d); }

/* One buffer of PAD + n + PAD elements on both backends, the same random contents: values up to scale, with
 * -0, +-6e4 and fp32 subnormals mixed in; finite, so that no sum of two inputs is NaN (the kernels promise
 * bit-identity for non-NaN values, and Inf + -Inf gives different NaN patterns on the host and the GPU). */
typedef struct {
    fp_dtype dt;
    size_t n, total, esz;
    void *h, *d;
} buf;

static buf mkbuf(fp_dtype dt, size_t n, float scale)
{
    buf b = {dt, n, n + 2 * PAD, (size_t)fp_dtype_bytes(dt), NULL, NULL};
    float *f = malloc(b.total * sizeof(float));
    for (size_t i = 0; i < b.total; i++) {
        float v = scale * tu_uniform32_pm1(&rng);
        if (i % 37 == 5)
            v = -0.0f;
        else if (i % 53 == 11)
            v = (i & 64) ? -6.0e4f : 6.0e4f;   /* near fp16's largest: sums of two overflow to Inf */
        else if (i % 41 == 7)
            v = v * 1e-38f;   /* fp32 subnormal or tiny */
        f[i] = v;
    }
    C->alloc(cb, &b.h, b.total * b.esz);
    if (dt == FP_DT_F32)
        memcpy(b.h, f, b.total * b.esz);
    else
        fp_narrow_array(b.h, f, b.total, dt);
    free(f);
    if (G->alloc(gb, &b.d, b.total * b.esz) || G->upload(gb, b.d, b.h, b.total * b.esz))
        b.d = NULL;
    return b;
}

static void freebuf(buf *b)
{
    C->free(cb, b->h, b->total * b->esz);
    G->free(gb, b->d, b->total * b->esz);
}

static fp_tensor hv(const buf *b, size_t off)
{
    return fp_tensor_of((char *)b->h + off * b->esz, b->dt, (fp_dims){1, 1, 1, (int)b->n});
}
static fp_tensor dv(const buf *b, size_t off)
{
    return fp_tensor_of((char *)b->d + off * b->esz, b->dt, (fp_dims){1, 1, 1, (int)b->n});
}

/* The whole device buffer (view and the elements around it) equals the host's, byte for byte. */
static int same(const buf *b)
{
    if (!b->d)
        return 0;
    size_t bytes = b->total * b->esz;
    void *t = malloc(bytes);
    int ok = G->download(gb, t, b->d, bytes) == FP_OK && G->sync(gb) == FP_OK && memcmp(t, b->h, bytes) == 0;
    free(t);
    return ok;
}

/* Reports one check over every size and offset: the first mismatch named. */
static int bad_n, bad_rc;
static size_t bad_size, bad_off;
static void note(int ok, int rc, size_t n, size_t off)
{
    if (!ok && !bad_n) {
        bad_n = 1;
        bad_rc = rc;
        bad_size = n;
        bad_off = off;
    }
}
static void start(void) { bad_n = 0; }
static void report(const char *what)
{
    if (!tap_ok(!bad_n, "%s: bit for bit over %zu sizes x %zu offsets", what, NSIZES, NOFFS))
        tap_diag("first mismatch: %zu elements at offset %zu (rc %d: %s)", bad_size, bad_off, bad_rc,
                 bad_rc ? fp_error_message() : "values differ");
}

static void casts(void)
{
    char w[96];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            start();
            for (size_t s = 0; s < NSIZES; s++)
                for (size_t o = 0; o < NOFFS; o++) {
                    size_t os = offs[o], od = offs[(o + 1) % NOFFS];   /* source and destination misaligned apart */
                    buf x = mkbuf(fmts[a], sizes[s], 300.0f), y = mkbuf(fmts[b], sizes[s], 1.0f);
                    int rc = C->cast(cb, hv(&y, od), hv(&x, os)) | G->cast(gb, dv(&y, od), dv(&x, os));
                    note(!rc && same(&y), rc, sizes[s], od);
                    freebuf(&x);
                    freebuf(&y);
                }
            snprintf(w, sizeof w, "cast %s -> %s", dn(fmts[a]), dn(fmts[b]));
            report(w);
        }
}

static void rounds(void)
{
    const fp_dtype to[3] = {FP_DT_TF32, FP_DT_F16, FP_DT_BF16};
    char w[96];
    for (int k = 0; k < 3; k++) {
        start();
        for (size_t s = 0; s < NSIZES; s++)
            for (size_t o = 0; o < NOFFS; o++) {
                buf x = mkbuf(FP_DT_F32, sizes[s], 1e5f), y = mkbuf(FP_DT_F32, sizes[s], 1.0f);
                int rc = C->round(cb, hv(&y, offs[o]), hv(&x, offs[NOFFS - 1 - o]), to[k]) |
                         G->round(gb, dv(&y, offs[o]), dv(&x, offs[NOFFS - 1 - o]), to[k]);
                note(!rc && same(&y), rc, sizes[s], offs[o]);
                rc = C->round(cb, hv(&x, offs[o]), hv(&x, offs[o]), to[k]) |   /* in place */
                     G->round(gb, dv(&x, offs[o]), dv(&x, offs[o]), to[k]);
                note(!rc && same(&x), rc, sizes[s], offs[o]);
                freebuf(&x);
                freebuf(&y);
            }
        snprintf(w, sizeof w, "round to %s in fp32 containers (and in place)", dn(to[k]));
        report(w);
    }
}

static void adds(void)
{
    char w[128];
    for (int yi = 0; yi < 3; yi++)
        for (int ai = 0; ai < 3; ai++)
            for (int bi = 0; bi < 3; bi++) {
                start();
                for (size_t s = 0; s < NSIZES; s++)
                    for (size_t o = 0; o < NOFFS; o++) {
                        size_t oy = offs[o], oa = offs[(o + 1) % NOFFS], ob = offs[(o + 2) % NOFFS];
                        if (s % 2)
                            oa = ob = oy;   /* every pointer at the same offset: aligned together or not */
                        buf y = mkbuf(fmts[yi], sizes[s], 1.0f), a = mkbuf(fmts[ai], sizes[s], 4.0f),
                            b = mkbuf(fmts[bi], sizes[s], 4.0f);
                        int rc = C->add(cb, hv(&y, oy), hv(&a, oa), hv(&b, ob)) |
                                 G->add(gb, dv(&y, oy), dv(&a, oa), dv(&b, ob));
                        note(!rc && same(&y), rc, sizes[s], oy);
                        if (yi == ai) {   /* y aliases a */
                            rc = C->add(cb, hv(&a, oa), hv(&a, oa), hv(&b, ob)) |
                                 G->add(gb, dv(&a, oa), dv(&a, oa), dv(&b, ob));
                            note(!rc && same(&a), rc, sizes[s], oa);
                        }
                        freebuf(&y);
                        freebuf(&a);
                        freebuf(&b);
                    }
                snprintf(w, sizeof w, "add into %s (a %s, b %s%s)", dn(fmts[yi]), dn(fmts[ai]), dn(fmts[bi]),
                         yi == ai ? "; and y = a in place" : "");
                report(w);
            }
    for (int yi = 0; yi < 3; yi++)
        for (int bi = 0; bi < 3; bi++) {
            start();
            for (size_t s = 0; s < NSIZES; s++)
                for (size_t o = 0; o < NOFFS; o++) {
                    buf y = mkbuf(fmts[yi], sizes[s], 1.0f), b = mkbuf(fmts[bi], sizes[s], 4.0f);
                    int rc = C->accumulate(cb, hv(&y, offs[o]), hv(&b, offs[NOFFS - 1 - o])) |
                             G->accumulate(gb, dv(&y, offs[o]), dv(&b, offs[NOFFS - 1 - o]));
                    note(!rc && same(&y), rc, sizes[s], offs[o]);
                    freebuf(&y);
                    freebuf(&b);
                }
            snprintf(w, sizeof w, "accumulate %s into %s", dn(fmts[bi]), dn(fmts[yi]));
            report(w);
        }
}

/* fp_cbk_add with round_b (backend.h's 16-bit gradient accumulation: y = round(y + round(b))) against
 * that formula on the host: widen, round b to y's format, one fp32 add, narrow. */
static void add_round_b(void)
{
    char w[96];
    for (int yi = 0; yi < 3; yi++)
        for (int bi = 0; bi < 3; bi++) {
            start();
            for (size_t s = 0; s < NSIZES; s++)
                for (size_t o = 0; o < NOFFS; o++) {
                    size_t n = sizes[s], oy = offs[o], ob = offs[(o + 3) % NOFFS];
                    buf y = mkbuf(fmts[yi], n, 1.0f), b = mkbuf(fmts[bi], n, 4.0f);
                    float *fy = malloc(n * sizeof(float)), *fb = malloc(n * sizeof(float));
                    fp_tensor ty = hv(&y, oy), tb = hv(&b, ob);
                    if (y.dt == FP_DT_F32)
                        memcpy(fy, ty.p, n * sizeof(float));
                    else
                        fp_widen_array(fy, ty.p, n, y.dt);
                    if (b.dt == FP_DT_F32)
                        memcpy(fb, tb.p, n * sizeof(float));
                    else
                        fp_widen_array(fb, tb.p, n, b.dt);
                    fp_round_to_dtype(fb, n, y.dt);
                    for (size_t i = 0; i < n; i++) {
                        volatile float r = fy[i] + fb[i];   /* one rounded fp32 add */
                        fy[i] = r;
                    }
                    if (y.dt == FP_DT_F32)
                        memcpy(ty.p, fy, n * sizeof(float));
                    else
                        fp_narrow_array(ty.p, fy, n, y.dt);
                    fp_tensor gy = dv(&y, oy), gbt = dv(&b, ob);
                    int rc = fp_cbk_add(gy.p, y.dt, gy.p, y.dt, gbt.p, b.dt, n, 1, fp_backend_cuda_stream(gb));
                    note(!rc && same(&y), rc, n, oy);
                    free(fy);
                    free(fb);
                    freebuf(&y);
                    freebuf(&b);
                }
            snprintf(w, sizeof w, "accumulate %s into %s rounding it first (fp_cbk_add round_b)", dn(fmts[bi]),
                     dn(fmts[yi]));
            report(w);
        }
}

static void scale(void)
{
    start();
    for (size_t s = 0; s < NSIZES; s++)
        for (size_t o = 0; o < NOFFS; o++) {
            buf x = mkbuf(FP_DT_F32, sizes[s], 100.0f);
            float *h = (float *)x.h + offs[o];
            for (size_t i = 0; i < x.n; i++) {
                volatile float r = h[i] * 1024.5f;
                h[i] = r;
            }
            int rc = fp_cbk_scale((float *)x.d + offs[o], x.n, 1024.5f, fp_backend_cuda_stream(gb));
            note(!rc && same(&x), rc, sizes[s], offs[o]);
            freebuf(&x);
        }
    report("scale fp32 by 1024.5 in place");
}

static void relus(void)
{
    char w[96];
    for (int k = 0; k < 3; k++) {
        start();
        for (size_t s = 0; s < NSIZES; s++)
            for (size_t o = 0; o < NOFFS; o++) {
                buf x = mkbuf(fmts[k], sizes[s], 1.0f), y = mkbuf(fmts[k], sizes[s], 1.0f);
                int rc = C->relu_forward(cb, hv(&y, offs[o]), hv(&x, offs[(o + 1) % NOFFS])) |
                         G->relu_forward(gb, dv(&y, offs[o]), dv(&x, offs[(o + 1) % NOFFS]));
                note(!rc && same(&y), rc, sizes[s], offs[o]);
                rc = C->relu_forward(cb, hv(&x, offs[o]), hv(&x, offs[o])) |   /* in place */
                     G->relu_forward(gb, dv(&x, offs[o]), dv(&x, offs[o]));
                note(!rc && same(&x), rc, sizes[s], offs[o]);
                freebuf(&x);
                freebuf(&y);
            }
        snprintf(w, sizeof w, "relu forward %s (and in place)", dn(fmts[k]));
        report(w);
        for (int acc = 0; acc < 2; acc++) {
            start();
            for (size_t s = 0; s < NSIZES; s++)
                for (size_t o = 0; o < NOFFS; o++) {
                    size_t odx = offs[o], ody = offs[(o + 1) % NOFFS], oy = offs[(o + 2) % NOFFS];
                    if (s % 2)
                        ody = oy = odx;
                    buf y = mkbuf(fmts[k], sizes[s], 1.0f), dy = mkbuf(fmts[k], sizes[s], 1.0f),
                        dx = mkbuf(fmts[k], sizes[s], 1.0f);
                    int rc = C->relu_backward(cb, hv(&dx, odx), hv(&dy, ody), hv(&y, oy), acc) |
                             G->relu_backward(gb, dv(&dx, odx), dv(&dy, ody), dv(&y, oy), acc);
                    note(!rc && same(&dx), rc, sizes[s], odx);
                    if (!acc) {   /* dx aliases dy: masks in place */
                        rc = C->relu_backward(cb, hv(&dy, ody), hv(&dy, ody), hv(&y, oy), 0) |
                             G->relu_backward(gb, dv(&dy, ody), dv(&dy, ody), dv(&y, oy), 0);
                        note(!rc && same(&dy), rc, sizes[s], ody);
                    }
                    freebuf(&y);
                    freebuf(&dy);
                    freebuf(&dx);
                }
            snprintf(w, sizeof w, "relu backward %s, accumulate %d%s", dn(fmts[k]), acc, acc ? "" : " (and dx = dy)");
            report(w);
        }
    }
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    if (gtu_backends_or_fail(&C, &cb, &G, &gb, (size_t)1 << 30, "element-wise test"))
        return tap_done();
    tap_plan(9 + 3 + 27 + 9 + 9 + 1 + 3 * 3);
    casts();
    rounds();
    adds();
    add_round_b();
    scale();
    relus();
    G->destroy(gb);
    C->destroy(cb);
#endif
    return tap_done();
}
