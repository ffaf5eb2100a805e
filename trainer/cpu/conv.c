/* conv.c — 2-D convolution (no bias), NHWC activations, OHWI weights, fp32 GEMMs through CBLAS.
 * Promises: forward overwrites y, both backwards accumulate (beta = 1); 1x1/stride-1/pad-0 is one GEMM
 * on the activation itself, the rest goes through im2col rows (kh*kw*cin, OHWI order) in chunks. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the usual loop vectoriser. */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include <limits.h>
#include <string.h>
#include "error.h"
#include "trainer/cpu/gemm.h"
#include "thread_pool.h"
#include "trainer/layers.h"

/* By default at most this many floats of im2col columns per chunk (32 MiB; ws->limit overrides):
 * bounds the workspace for big images while keeping each GEMM large (a chunk is at least one row). */
#define CONV_CHUNK_FLOATS ((size_t)1 << 23)

typedef struct {
    int n, h, w, cin;        /* input */
    int oh, ow, cout;        /* output */
    int kh, kw, s, pad;
    int M;                   /* output rows n*oh*ow */
    int K;                   /* kh*kw*cin */
    int direct;              /* 1x1, stride 1, pad 0: the activation is the column matrix */
} conv_geom;

static int conv_geometry(const char *fn, fp_dims xd, const fp_conv_params *p, conv_geom *g)
{
    if (!p)
        return fp_fail(FP_EINVAL, "%s: NULL conv params", fn);
    if (xd.n <= 0 || xd.h <= 0 || xd.w <= 0 || xd.c <= 0)
        return fp_fail(FP_EINVAL, "%s: bad input dims n=%d h=%d w=%d c=%d", fn, xd.n, xd.h, xd.w, xd.c);
    if (p->cin <= 0 || p->cout <= 0 || p->kh <= 0 || p->kw <= 0 || p->stride <= 0 || p->pad < 0)
        return fp_fail(FP_EINVAL, "%s: bad conv params cin=%d cout=%d k=%dx%d stride=%d pad=%d", fn, p->cin,
                       p->cout, p->kh, p->kw, p->stride, p->pad);
    if (p->cin != xd.c)
        return fp_fail(FP_EINVAL, "%s: input has %d channels, conv expects %d", fn, xd.c, p->cin);
    long long hp = (long long)xd.h + 2LL * p->pad, wp = (long long)xd.w + 2LL * p->pad;
    if (p->kh > hp || p->kw > wp)
        return fp_fail(FP_EINVAL, "%s: kernel %dx%d larger than padded input %lldx%lld", fn, p->kh, p->kw, hp, wp);
    long long oh = (hp - p->kh) / p->stride + 1, ow = (wp - p->kw) / p->stride + 1;
    long long xe = (long long)xd.n * xd.h * xd.w * xd.c;
    long long M = (long long)xd.n * oh * ow;
    long long ye = M * p->cout;
    long long K = (long long)p->kh * p->kw * p->cin;
    long long we = K * p->cout;
    if (xe > INT_MAX || ye > INT_MAX || we > INT_MAX)
        return fp_fail(FP_EINVAL, "%s: tensor too large (x %lld, y %lld, w %lld elements; max INT_MAX)", fn, xe, ye,
                       we);
    g->n = xd.n; g->h = xd.h; g->w = xd.w; g->cin = xd.c;
    g->oh = (int)oh; g->ow = (int)ow; g->cout = p->cout;
    g->kh = p->kh; g->kw = p->kw; g->s = p->stride; g->pad = p->pad;
    g->M = (int)M;
    g->K = (int)K;
    g->direct = p->kh == 1 && p->kw == 1 && p->stride == 1 && p->pad == 0;
    return FP_OK;
}

fp_dims fp_conv_out_dims(fp_dims in, const fp_conv_params *p)
{
    fp_dims d = {0, 0, 0, 0};
    conv_geom g = {0};
    if (conv_geometry("fp_conv_out_dims", in, p, &g) != FP_OK)
        return d;
    d.n = g.n; d.h = g.oh; d.w = g.ow; d.c = g.cout;
    return d;
}

/* Rows per chunk and a column buffer for them: ws when given, else *tmp (freed by the caller). */
static float *conv_cols(const conv_geom *g, fp_workspace *ws, fp_workspace *tmp, int *rows, int *rc)
{
    size_t limit = ws && ws->limit ? ws->limit : CONV_CHUNK_FLOATS;
    size_t r = limit / (size_t)g->K;
    if (r < 1)
        r = 1;
    if (r > (size_t)g->M)
        r = (size_t)g->M;
    *rows = (int)r;
    fp_workspace *use = ws ? ws : tmp;
    *rc = fp_workspace_reserve(use, r * (size_t)g->K);
    return *rc == FP_OK ? use->buf : NULL;
}

/* Walks output rows r0 .. r0+rows-1 and for every kernel row ky the valid kx range; a kx run is
 * contiguous in NHWC (kw*cin floats), so each (row, ky) is one copy (im2col) or one add (col2im). */
#define CONV_ROW_LOOP(COLT, BODY)                                                                      \
    do {                                                                                               \
        int ohw = g->oh * g->ow;                                                                       \
        int n = r0 / ohw, rem = r0 % ohw, oy = rem / g->ow, ox = rem % g->ow;                          \
        size_t rowlen = (size_t)g->kw * g->cin;                                                        \
        for (int r = 0; r < rows; r++) {                                                               \
            COLT *col = cols + (size_t)r * g->K;                                                       \
            int iy0 = oy * g->s - g->pad, ix0 = ox * g->s - g->pad;                                    \
            int kx_lo = ix0 < 0 ? -ix0 : 0;                                                            \
            int kx_hi = g->w - ix0 < g->kw ? g->w - ix0 : g->kw;                                       \
            for (int ky = 0; ky < g->kh; ky++) {                                                       \
                COLT *c = col + (size_t)ky * rowlen;                                                   \
                int iy = iy0 + ky;                                                                     \
                int valid = iy >= 0 && iy < g->h && kx_hi > kx_lo;                                     \
                size_t lo = valid ? (size_t)kx_lo * g->cin : rowlen;                                   \
                size_t hi = valid ? (size_t)kx_hi * g->cin : rowlen;                                   \
                size_t xoff = valid ? (((size_t)n * g->h + iy) * g->w + (ix0 + kx_lo)) * g->cin : 0;   \
                BODY                                                                                   \
            }                                                                                          \
            if (++ox == g->ow) {                                                                       \
                ox = 0;                                                                                \
                if (++oy == g->oh) {                                                                   \
                    oy = 0;                                                                            \
                    n++;                                                                               \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
    } while (0)

static void im2col(float *restrict cols, const float *restrict x, const conv_geom *g, int r0, int rows)
{
    CONV_ROW_LOOP(float, {
        if (lo)
            memset(c, 0, lo * sizeof(float));
        if (hi > lo)
            memcpy(c + lo, x + xoff, (hi - lo) * sizeof(float));
        if (rowlen > hi)
            memset(c + hi, 0, (rowlen - hi) * sizeof(float));
    });
}

static void col2im_add(float *restrict dx, const float *restrict cols, const conv_geom *g, int r0, int rows)
{
    CONV_ROW_LOOP(const float, {
        (void)rowlen;
        float *restrict d = dx + xoff;
        const float *restrict s = c + lo;
        size_t len = hi - lo;
        for (size_t i = 0; i < len; i++)
            d[i] += s[i];
    });
}

/* Below this many floats of columns per thread a copy loop stays on the caller (pool wake-up cost). */
#define CONV_PAR_MIN_FLOATS ((size_t)1 << 15)

typedef struct {
    float *cols;
    const float *x;
    float *dx;
    const conv_geom *g;
    int r0, rows;            /* the chunk's first row and row count */
} conv_task;

/* Rows are independent: any split of im2col's rows writes the same columns. */
static void im2col_range(void *ctx, size_t b, size_t e)
{
    const conv_task *t = ctx;
    im2col(t->cols + b * (size_t)t->g->K, t->x, t->g, t->r0 + (int)b, (int)(e - b));
}

static void im2col_par(float *cols, const float *x, const conv_geom *g, int r0, int rows)
{
    conv_task t = {cols, x, NULL, g, r0, rows};
    fp_parallel_for((size_t)rows, 1, CONV_PAR_MIN_FLOATS / (size_t)g->K + 1, im2col_range, &t);
}

/* col2im over whole images: rows of different images touch disjoint parts of dx, and the rows of
 * one image are added in the same order as the serial loop, so the result is bit-identical. The
 * range indexes images of the chunk (first and last possibly partial). */
static void col2im_range(void *ctx, size_t b, size_t e)
{
    const conv_task *t = ctx;
    const conv_geom *g = t->g;
    int ohw = g->oh * g->ow;
    int n0 = t->r0 / ohw;
    int lo = (n0 + (int)b) * ohw, hi = (n0 + (int)e) * ohw;
    int cend = t->r0 + t->rows;
    if (lo < t->r0)
        lo = t->r0;
    if (hi > cend)
        hi = cend;
    if (hi > lo)
        col2im_add(t->dx, t->cols + (size_t)(lo - t->r0) * g->K, g, lo, hi - lo);
}

static void col2im_par(float *dx, const float *cols, const conv_geom *g, int r0, int rows)
{
    int ohw = g->oh * g->ow;
    int images = (r0 + rows - 1) / ohw - r0 / ohw + 1;
    conv_task t = {(float *)cols, NULL, dx, g, r0, rows};
    size_t per_image = (size_t)ohw * g->K;
    fp_parallel_for((size_t)images, 1, CONV_PAR_MIN_FLOATS / per_image + 1, col2im_range, &t);
}

/* The three passes share the checks, the direct (1x1) shortcut and the im2col chunk loop; they differ
 * in their GEMMs and in whether a chunk of columns is gathered from x first (forward, weights) or
 * scattered into dx after (data). Tensors: forward out = y, a = x, b = w; data out = dx, a = dy, b = w;
 * weights out = dw, a = dy, b = x. */
typedef enum { CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_WEIGHTS } conv_pass_kind;

static int conv_pass(conv_pass_kind kind, const char *fn, float *out, const float *a, const float *b, fp_dims xd,
                     const fp_conv_params *p, fp_workspace *ws)
{
    conv_geom g = {0};
    int rc = conv_geometry(fn, xd, p, &g);
    if (rc)
        return rc;
    if (!out || !a || !b)
        return fp_fail(FP_EINVAL, "%s: NULL tensor", fn);
    if (g.direct) {
        if (kind == CONV_FORWARD)
            fp_sgemm(0, 1, g.M, g.cout, g.K, 1.0f, a, g.K, b, g.K, 0.0f, out, g.cout);
        else if (kind == CONV_BACKWARD_DATA) /* dx[M, cin] += dy[M, cout] * W[cout, cin] */
            fp_sgemm(0, 0, g.M, g.K, g.cout, 1.0f, a, g.cout, b, g.K, 1.0f, out, g.K);
        else /* dW[cout, cin] += dy^T[cout, M] * x[M, cin] */
            fp_sgemm(1, 0, g.cout, g.K, g.M, 1.0f, a, g.cout, b, g.K, 1.0f, out, g.K);
        return FP_OK;
    }
    fp_workspace tmp = {0};
    int rows;
    float *cols = conv_cols(&g, ws, &tmp, &rows, &rc);
    if (!cols)
        return rc;
    for (int r0 = 0; r0 < g.M; r0 += rows) {
        int nr = g.M - r0 < rows ? g.M - r0 : rows;
        if (kind == CONV_FORWARD) {
            im2col_par(cols, a, &g, r0, nr);
            fp_sgemm(0, 1, nr, g.cout, g.K, 1.0f, cols, g.K, b, g.K, 0.0f, out + (size_t)r0 * g.cout, g.cout);
        } else if (kind == CONV_BACKWARD_DATA) {
            fp_sgemm(0, 0, nr, g.K, g.cout, 1.0f, a + (size_t)r0 * g.cout, g.cout, b, g.K, 0.0f, cols, g.K);
            col2im_par(out, cols, &g, r0, nr);
        } else {
            im2col_par(cols, b, &g, r0, nr);
            fp_sgemm(1, 0, g.cout, g.K, nr, 1.0f, a + (size_t)r0 * g.cout, g.cout, cols, g.K, 1.0f, out, g.K);
        }
    }
    fp_workspace_free(&tmp);
    return FP_OK;
}

int fp_conv_forward(float *y, const float *x, fp_dims xd, const float *w, const fp_conv_params *p,
                    fp_workspace *ws)
{
    return conv_pass(CONV_FORWARD, "fp_conv_forward", y, x, w, xd, p, ws);
}

int fp_conv_backward_data(float *dx, const float *dy, fp_dims xd, const float *w, const fp_conv_params *p,
                          fp_workspace *ws)
{
    return conv_pass(CONV_BACKWARD_DATA, "fp_conv_backward_data", dx, dy, w, xd, p, ws);
}

int fp_conv_backward_weights(float *dw, const float *dy, const float *x, fp_dims xd, const fp_conv_params *p,
                             fp_workspace *ws)
{
    return conv_pass(CONV_BACKWARD_WEIGHTS, "fp_conv_backward_weights", dw, dy, x, xd, p, ws);
}
