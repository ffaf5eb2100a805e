/* test_thread_pool.c — the kernels' worker pool: the static partition covers [0, n) on `align`
 * boundaries, every index runs exactly once, nested / concurrent loops run inline, and the kernels
 * split across it (GEMM, conv, batchnorm, elementwise, max-pool, SGD/Adam, the precision array helpers)
 * give bit-identical results for 1..4 threads; the split GEMM matches a double-precision reference;
 * holds nest, and loops run the same while the pool is held. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/cpu/gemm.h"
#include "thread_pool.h"
#include "trainer/layers.h"
#include "trainer/optim.h"
#include "trainer/precision.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float *rand_array(size_t n) { return tu_rand_array(n, &rng_state); }
static float *copy_of(const float *a, size_t n)
{
    float *b = malloc((n ? n : 1) * sizeof(float));
    memcpy(b, a, n * sizeof(float));
    return b;
}

/* ---------------------------------------------------------------- partition and coverage */
static void test_partition(void)
{
    static const size_t ns[] = {0, 1, 2, 15, 16, 17, 100, 1000, 65537};
    static const size_t aligns[] = {1, 3, 16};
    int bad = 0;
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int t = 1; t <= 5; t++) {
                size_t n = ns[k], al = aligns[a], next = 0;
                for (int i = 0; i < t; i++) {
                    size_t b, e;
                    fp_pool_part(n, al, t, i, &b, &e);
                    if (b != next || e < b || (b % al && b != n) || (e % al && e != n))
                        bad++;
                    next = e;
                }
                if (next != n)
                    bad++;
            }
    tap_ok(bad == 0, "fp_pool_part: contiguous parts covering [0, n), boundaries on align (%d bad)", bad);
}

typedef struct {
    int *hits;
    int nested_inline;
} cover_ctx;

static void nested_body(void *ctx, size_t b, size_t e)
{
    int *hits = ctx;
    for (size_t i = b; i < e; i++)
        hits[i]++;
}

static void cover_body(void *ctx, size_t b, size_t e)
{
    cover_ctx *c = ctx;
    for (size_t i = b; i < e; i++)
        c->hits[i]++;
    if (b == 0) {   /* a nested loop runs inline on this thread, over the whole range */
        int inner[64] = {0};
        fp_parallel_for(64, 1, 1, nested_body, inner);
        int ok = 1;
        for (int i = 0; i < 64; i++)
            ok &= inner[i] == 1;
        c->nested_inline = ok;
    }
}

static void test_coverage(void)
{
    for (int threads = 1; threads <= 4; threads++) {
        fp_pool_set_threads(threads);
        tap_is_int(fp_pool_threads(), threads, "fp_pool_threads() == %d", threads);
        size_t n = 100003;
        int *hits = calloc(n, sizeof(int));
        int bad = 0;
        for (int rep = 0; rep < 50; rep++) {
            cover_ctx c = {hits, 0};
            fp_parallel_for(n, 16, 1, cover_body, &c);
            if (!c.nested_inline)
                bad++;
        }
        for (size_t i = 0; i < n; i++)
            bad += hits[i] != 50;
        tap_ok(bad == 0, "%d threads: 50 loops over %zu items visit each exactly once, nested loops inline", threads,
               n);
        tap_is_int(fp_pool_parts(n, 1), threads, "%d threads: parts for a large range", threads);
        tap_is_int(fp_pool_parts(10, 8), 1, "%d threads: a range below min_part is one part", threads);
        free(hits);
    }
}

/* fp_pool_hold: holds nest and are let go one by one; loops while held (idle workers spinning between
 * them) and after visit every index exactly once. */
static void test_hold(void)
{
    fp_pool_set_threads(2);
    tap_is_int(fp_pool_held(), 0, "the pool starts not held");
    fp_pool_hold(1);
    fp_pool_hold(1);
    tap_is_int(fp_pool_held(), 2, "two holds nest");
    size_t n = 50021;
    int *hits = calloc(n, sizeof(int));
    for (int rep = 0; rep < 200; rep++)   /* many short loops with gaps: the held pool's use */
        fp_parallel_for(n, 16, 1024, nested_body, hits);
    fp_pool_hold(0);
    tap_is_int(fp_pool_held(), 1, "one let go: still held");
    fp_pool_hold(0);
    tap_is_int(fp_pool_held(), 0, "both let go: not held");
    for (int rep = 0; rep < 50; rep++)
        fp_parallel_for(n, 16, 1024, nested_body, hits);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += hits[i] != 250;
    tap_ok(bad == 0, "200 loops held and 50 not: each index visited exactly once per loop");
    free(hits);
}

/* Two threads running loops at once: one gets the pool, the other runs inline; both complete. */
typedef struct {
    int *hits;
    size_t n;
} conc_arg;

static void *conc_main(void *p)
{
    conc_arg *a = p;
    for (int rep = 0; rep < 200; rep++)
        fp_parallel_for(a->n, 1, 1, nested_body, a->hits);
    return NULL;
}

static void test_concurrent_callers(void)
{
    fp_pool_set_threads(3);
    size_t n = 4096;
    int *h1 = calloc(n, sizeof(int)), *h2 = calloc(n, sizeof(int));
    conc_arg a1 = {h1, n}, a2 = {h2, n};
    pthread_t th;
    int started = pthread_create(&th, NULL, conc_main, &a2) == 0;
    conc_main(&a1);
    if (started)
        pthread_join(th, NULL);
    else
        conc_main(&a2);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += (h1[i] != 200) + (h2[i] != 200);
    tap_ok(bad == 0, "two threads looping at once: every index of both visited 200 times (%d bad)", bad);
    free(h1);
    free(h2);
}

/* ---------------------------------------------------------------- kernels: 1 vs N threads */
#define MAXT 4

static int same(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* C = alpha op(A) op(B) + beta C in double, row-major. */
static void gemm_ref(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++)
                acc += (double)(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                       (double)(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            C[(size_t)i * ldc + j] = (float)(alpha * acc + (double)beta * C[(size_t)i * ldc + j]);
        }
}

static void test_gemm(void)
{
    /* rows split (M >= N), columns split (M < N), edges off the 16-unit, and one too small to split */
    static const int shapes[][3] = {{700, 40, 320}, {40, 700, 320}, {129, 129, 600}, {20, 24, 8}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tr = 0; tr < 4; tr++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = tr & 1, tb = tr >> 1;
            int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
            float *A = rand_array((size_t)(ta ? K : M) * lda), *B = rand_array((size_t)(tb ? N : K) * ldb);
            float *C0 = rand_array((size_t)M * ldc), *ref = copy_of(C0, (size_t)M * ldc);
            gemm_ref(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, ref, ldc);
            float *C[MAXT + 1];
            int ok = 1;
            double worst = 0;
            for (int t = 1; t <= MAXT; t++) {
                fp_gemm_use_pool(t);
                C[t] = copy_of(C0, (size_t)M * ldc);
                fp_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, C[t], ldc);
            }
            for (int t = 2; t <= MAXT; t++)
                ok &= same(C[1], C[t], (size_t)M * ldc);
            for (size_t i = 0; i < (size_t)M * ldc; i++) {
                double d = fabs((double)C[1][i] - (double)ref[i]);
                worst = d > worst ? d : worst;
            }
            ok &= worst < 1e-4 * K;   /* |entries| <= 1: fp32 rounding over K terms */
            for (int i = 0; i < M; i++)   /* the padding between rows untouched */
                for (int j = N; j < ldc; j++)
                    ok &= C[1][(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
            tap_ok(ok, "sgemm %dx%dx%d %c%c: matches the reference (max diff %.2g), padding kept, bit-identical for "
                   "1..%d threads", M, N, K, ta ? 'T' : 'N', tb ? 'T' : 'N', worst, MAXT);
            for (int t = 1; t <= MAXT; t++)
                free(C[t]);
            free(A);
            free(B);
            free(C0);
            free(ref);
        }
}

/* The precision helpers (trainer/precision.h) over an array with Inf, NaN, overflow and subnormals. */
static void test_precision_arrays(void)
{
    size_t n = ((size_t)1 << 19) + 33;
    float *x = rand_array(n);
    for (size_t i = 0; i < n; i++)
        x[i] = ldexpf(x[i], (int)(i % 60) - 30);
    x[n / 3] = 1.0f / 0.0f;
    x[n / 2] = nanf("");
    static const fp_dtype ds[] = {FP_DT_F16, FP_DT_BF16, FP_DT_TF32};
    float *r[MAXT + 1], *w[MAXT + 1], *a[MAXT + 1], *u[MAXT + 1];
    uint16_t *h[MAXT + 1];
    int found[MAXT + 1];
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        fp_dtype d = ds[k];
        int is16 = d != FP_DT_TF32;
        for (int t = 1; t <= MAXT; t++) {
            fp_pool_set_threads(t);
            r[t] = malloc(n * sizeof(float));
            fp_round_to_dtype_copy(r[t], x, n, d);
            a[t] = copy_of(x, n);
            fp_round_add(a[t], x, n, d);
            u[t] = copy_of(x, n);
            found[t] = fp_unscale_and_check(u[t], n, 1.0f / 1024);
            h[t] = malloc(n * sizeof(uint16_t));
            w[t] = malloc(n * sizeof(float));
            if (is16) {
                fp_narrow_array(h[t], x, n, d);
                fp_widen_array(w[t], h[t], n, d);
            }
        }
        int ok = 1;
        for (int t = 2; t <= MAXT; t++)
            ok &= same(r[1], r[t], n) && same(a[1], a[t], n) && same(u[1], u[t], n) && found[t] == found[1] &&
                  (!is16 || (memcmp(h[1], h[t], n * sizeof(uint16_t)) == 0 && same(w[1], w[t], n)));
        ok &= found[1] == 1;
        for (size_t i = 0; is16 && i < n; i++)   /* widen(narrow(x)) is round(x), NaN as NaN */
            ok &= isnan(r[1][i]) ? isnan(w[1][i]) : w[1][i] == r[1][i];
        tap_ok(ok, "%s: round, round-add, unscale + check, narrow / widen bit-identical for 1..%d threads",
               fp_dtype_name(d), MAXT);
        for (int t = 1; t <= MAXT; t++) {
            free(r[t]);
            free(a[t]);
            free(u[t]);
            free(h[t]);
            free(w[t]);
        }
    }
    free(x);
}

static void test_conv(void)
{
    static const fp_conv_params ps[] = {
        {32, 24, 3, 3, 1, 1}, {32, 24, 3, 3, 2, 1}, {32, 24, 1, 1, 2, 0}, {32, 24, 7, 7, 2, 3}};
    fp_dims xd = {5, 17, 16, 32};
    size_t nx = (size_t)xd.n * xd.h * xd.w * xd.c;
    float *x = rand_array(nx);
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++)
        for (int small = 0; small < 2; small++) {
            const fp_conv_params *p = &ps[k];
            fp_dims yd = fp_conv_out_dims(xd, p);
            size_t ny = (size_t)yd.n * yd.h * yd.w * yd.c, nw = (size_t)p->cout * p->kh * p->kw * p->cin;
            float *w = rand_array(nw), *dy = rand_array(ny), *dx0 = rand_array(nx), *dw0 = rand_array(nw);
            float *y[MAXT + 1], *dx[MAXT + 1], *dw[MAXT + 1];
            int ok = 1;
            for (int t = 1; t <= MAXT; t++) {
                fp_gemm_use_pool(t);
                fp_workspace ws = {0};
                ws.limit = small ? 20000 : 0;   /* several chunks, images split across chunks */
                y[t] = malloc(ny * sizeof(float));
                dx[t] = copy_of(dx0, nx);
                dw[t] = copy_of(dw0, nw);
                ok &= fp_conv_forward(y[t], x, xd, w, p, &ws) == FP_OK;
                ok &= fp_conv_backward_data(dx[t], dy, xd, w, p, &ws) == FP_OK;
                ok &= fp_conv_backward_weights(dw[t], dy, x, xd, p, &ws) == FP_OK;
                fp_workspace_free(&ws);
            }
            for (int t = 2; t <= MAXT; t++)
                ok &= same(y[1], y[t], ny) && same(dx[1], dx[t], nx) && same(dw[1], dw[t], nw);
            tap_ok(ok, "conv %dx%d stride %d pad %d%s: forward, backward data / weights bit-identical for 1..%d "
                   "threads", p->kh, p->kw, p->stride, p->pad, small ? " (small chunks)" : "", MAXT);
            for (int t = 1; t <= MAXT; t++) {
                free(y[t]);
                free(dx[t]);
                free(dw[t]);
            }
            free(w);
            free(dy);
            free(dx0);
            free(dw0);
        }
    free(x);
}

static void test_batchnorm(void)
{
    static const fp_dims dims[] = {{5, 32, 32, 80}, {3, 40, 40, 67}, {2, 4, 4, 2048}};
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        fp_dims xd = dims[k];
        size_t n = (size_t)xd.n * xd.h * xd.w * xd.c, C = (size_t)xd.c;
        float *x = rand_array(n), *dy = rand_array(n), *g = rand_array(C), *b = rand_array(C);
        float *rm0 = rand_array(C), *rv0 = rand_array(C), *dx0 = rand_array(n);
        for (size_t c = 0; c < C; c++)
            rv0[c] = 1.5f + rv0[c];
        fp_bn_params bp = {0.1f, 1e-5f};
        float *y[MAXT + 1], *sm[MAXT + 1], *si[MAXT + 1], *rm[MAXT + 1], *rv[MAXT + 1], *dx[MAXT + 1];
        float *dg[MAXT + 1], *db[MAXT + 1], *ye[MAXT + 1];
        int ok = 1;
        for (int t = 1; t <= MAXT; t++) {
            fp_pool_set_threads(t);
            y[t] = malloc(n * sizeof(float));
            ye[t] = malloc(n * sizeof(float));
            sm[t] = malloc(C * sizeof(float));
            si[t] = malloc(C * sizeof(float));
            rm[t] = copy_of(rm0, C);
            rv[t] = copy_of(rv0, C);
            dx[t] = copy_of(dx0, n);
            dg[t] = calloc(C, sizeof(float));
            db[t] = calloc(C, sizeof(float));
            ok &= fp_batchnorm_forward_train(y[t], sm[t], si[t], rm[t], rv[t], x, xd, g, b, &bp) == FP_OK;
            ok &= fp_batchnorm_forward_eval(ye[t], x, xd, g, b, rm[t], rv[t], &bp) == FP_OK;
            ok &= fp_batchnorm_backward(dx[t], dg[t], db[t], dy, x, xd, g, sm[t], si[t]) == FP_OK;
        }
        for (int t = 2; t <= MAXT; t++)
            ok &= same(y[1], y[t], n) && same(ye[1], ye[t], n) && same(sm[1], sm[t], C) && same(si[1], si[t], C) &&
                  same(rm[1], rm[t], C) && same(rv[1], rv[t], C) && same(dx[1], dx[t], n) &&
                  same(dg[1], dg[t], C) && same(db[1], db[t], C);
        tap_ok(ok, "batchnorm %dx%dx%dx%d: train / eval forward and backward bit-identical for 1..%d threads", xd.n,
               xd.h, xd.w, xd.c, MAXT);
        for (int t = 1; t <= MAXT; t++) {
            free(y[t]);
            free(ye[t]);
            free(sm[t]);
            free(si[t]);
            free(rm[t]);
            free(rv[t]);
            free(dx[t]);
            free(dg[t]);
            free(db[t]);
        }
        free(x);
        free(dy);
        free(g);
        free(b);
        free(rm0);
        free(rv0);
        free(dx0);
    }
}

static void test_elementwise_and_pool(void)
{
    size_t n = 300007;
    float *a = rand_array(n), *b = rand_array(n), *d0 = rand_array(n);
    float *r[MAXT + 1], *s[MAXT + 1], *acc[MAXT + 1], *rb[MAXT + 1], *inplace[MAXT + 1];
    fp_dims xd = {5, 64, 63, 64};
    fp_pool_params pp = {3, 2, 1};
    fp_dims yd = fp_pool_out_dims(xd, &pp);
    size_t nx = (size_t)xd.n * xd.h * xd.w * xd.c, ny = (size_t)yd.n * yd.h * yd.w * yd.c;
    float *px = rand_array(nx), *pdy = rand_array(ny), *pdx0 = rand_array(nx);
    float *py[MAXT + 1], *pdx[MAXT + 1];
    int *am[MAXT + 1];
    int ok = 1;
    for (int t = 1; t <= MAXT; t++) {
        fp_pool_set_threads(t);
        r[t] = malloc(n * sizeof(float));
        s[t] = malloc(n * sizeof(float));
        acc[t] = copy_of(d0, n);
        rb[t] = copy_of(d0, n);
        inplace[t] = copy_of(a, n);
        ok &= fp_relu_forward(r[t], a, n) == FP_OK;
        ok &= fp_relu_forward(inplace[t], inplace[t], n) == FP_OK;
        ok &= fp_relu_backward(rb[t], b, r[t], n) == FP_OK;
        ok &= fp_add_forward(s[t], a, b, n) == FP_OK;
        ok &= fp_accumulate(acc[t], a, n) == FP_OK;
        py[t] = malloc(ny * sizeof(float));
        am[t] = malloc(ny * sizeof(int));
        pdx[t] = copy_of(pdx0, nx);
        ok &= fp_maxpool_forward(py[t], am[t], px, xd, &pp) == FP_OK;
        ok &= fp_maxpool_backward(pdx[t], pdy, am[t], xd, &pp) == FP_OK;
    }
    int ew = 1, pl = 1;
    for (int t = 2; t <= MAXT; t++) {
        ew &= same(r[1], r[t], n) && same(s[1], s[t], n) && same(acc[1], acc[t], n) && same(rb[1], rb[t], n) &&
              same(r[1], inplace[t], n);
        pl &= same(py[1], py[t], ny) && memcmp(am[1], am[t], ny * sizeof(int)) == 0 && same(pdx[1], pdx[t], nx);
    }
    tap_ok(ok, "elementwise and max-pool kernels succeed");
    tap_ok(ew, "relu (also in place), relu backward, add, accumulate bit-identical for 1..%d threads", MAXT);
    tap_ok(pl, "max-pool 3x3/2 forward (values, argmax) and backward bit-identical for 1..%d threads", MAXT);
    for (int t = 1; t <= MAXT; t++) {
        free(r[t]);
        free(s[t]);
        free(acc[t]);
        free(rb[t]);
        free(inplace[t]);
        free(py[t]);
        free(am[t]);
        free(pdx[t]);
    }
    free(a);
    free(b);
    free(d0);
    free(px);
    free(pdy);
    free(pdx0);
}

static void test_optim(void)
{
    static const size_t sizes[] = {100003, 7, 0, 250001, 16, 65536};
    enum { NT = sizeof sizes / sizeof sizes[0] };
    static const char *const names[NT] = {"a", "b", "c", "d", "e", "f"};
    size_t total = 0;
    for (int i = 0; i < NT; i++)
        total += sizes[i];
    float *p0 = rand_array(total), *g = rand_array(total);
    for (int kind = 0; kind < 3; kind++) {
        fp_optim_config cfg;
        fp_optim_config_default(&cfg, (fp_optim_kind)kind);
        if (kind == FP_OPTIM_SGD) {
            cfg.momentum = 0.9;
            cfg.nesterov = 1;
        }
        cfg.weight_decay = 1e-3;
        float *p[MAXT + 1];
        int ok = 1;
        for (int t = 1; t <= MAXT; t++) {
            fp_pool_set_threads(t);
            p[t] = copy_of(p0, total);
            fp_optim_param ps[NT];
            size_t off = 0;
            for (int i = 0; i < NT; i++) {
                ps[i].name = names[i];
                ps[i].param = sizes[i] ? p[t] + off : NULL;
                ps[i].grad = sizes[i] ? g + off : NULL;
                ps[i].n = sizes[i];
                ps[i].apply_weight_decay = i % 2;
                off += sizes[i];
            }
            fp_optim *o = NULL;
            ok &= fp_optim_new(&o, &cfg, ps, NT) == FP_OK;
            for (int step = 0; o && step < 3; step++)
                ok &= fp_optim_step(o, 0.05) == FP_OK;
            fp_optim_free(o);
        }
        for (int t = 2; t <= MAXT; t++)
            ok &= same(p[1], p[t], total);
        tap_ok(ok, "optimizer %s: 3 steps over %zu values in %d tensors bit-identical for 1..%d threads",
               fp_optim_name((fp_optim_kind)kind), total, NT, MAXT);
        for (int t = 1; t <= MAXT; t++)
            free(p[t]);
    }
    free(p0);
    free(g);
}

int main(void)
{
    test_partition();
    test_coverage();
    test_concurrent_callers();
    test_hold();
    test_gemm();
    test_precision_arrays();
    test_conv();
    test_batchnorm();
    test_elementwise_and_pool();
    test_optim();
    fp_pool_set_threads(2);
    fp_pool_shutdown();
    tap_is_int(fp_pool_threads(), 2, "shutdown keeps the thread count");
    int hits[40] = {0};
    fp_parallel_for(40, 1, 1, nested_body, hits);
    int all = 1;
    for (int i = 0; i < 40; i++)
        all &= hits[i] == 1;
    tap_ok(all, "the pool restarts after shutdown");
    fp_pool_shutdown();
    return tap_done();
}
