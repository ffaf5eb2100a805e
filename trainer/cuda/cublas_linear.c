/* cublas_linear.c — the linear layer on cuBLASLt: y = x W^T + b with the bias epilogue, and its
 * backward (dx += dy W, dw += dy^T x, db += column sums of dy as a matmul with a ones vector), for fp32
 * (CUBLAS_COMPUTE_32F, or _FAST_TF32 under the tf32 policy: cuBLASLt converts the unrounded fp32 operands
 * to TF32 itself, cudnn_ops.h) and fp16 / bf16 tensors with fp32 accumulation. Each (kind, shape, dtype,
 * pointer alignment) gets its algorithm once, cached. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/cuda/cudnn_internal.h"

/* Row-major [r, c] is column-major c x r: every product below is written on the column-major views
 * Yc = y^T (out x n), Xc (in x n), Wc (in x out), so no data moves. */
enum { MM_FWD = 0, MM_BWD_DATA, MM_BWD_W, MM_BWD_B };
static const char *const mm_name[4] = {"linear forward", "linear backward data", "linear backward weights",
                                       "linear backward bias"};

#define LT_WORKSPACE_WANT ((size_t)32 << 20)   /* NVIDIA's suggestion for Hopper; capped by the limit */

struct fpc_mm_plan {
    int kind, n, in, out, has_bias;
    fp_dtype dt;
    uint32_t align;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;     /* C and D share one layout (D overwrites C in place) */
    cublasLtMatmulAlgo_t algo;
    size_t ws;
};

static void plan_destroy(fpc_mm_plan *pl)
{
    if (!pl)
        return;
    if (pl->desc)
        cublasLtMatmulDescDestroy(pl->desc);
    if (pl->a)
        cublasLtMatrixLayoutDestroy(pl->a);
    if (pl->b)
        cublasLtMatrixLayoutDestroy(pl->b);
    if (pl->c)
        cublasLtMatrixLayoutDestroy(pl->c);
    free(pl);
}

void fpc_mm_plans_free(fp_cudnn *d)
{
    for (int i = 0; i < d->nmm; i++)
        plan_destroy(d->mms[i]);
    free(d->mms);
    d->mms = NULL;
    d->nmm = d->capmm = 0;
}

/* Largest power of two (<= 256) dividing every address given (NULL counts as perfectly aligned). */
static uint32_t alignment_of(const void *p0, const void *p1, const void *p2, const void *p3)
{
    uintptr_t bits = (uintptr_t)p0 | (uintptr_t)p1 | (uintptr_t)p2 | (uintptr_t)p3 | 256u;
    return (uint32_t)(bits & (~bits + 1));
}

static int create_plan(fp_cudnn *d, int kind, int n, int in, int out, fp_dtype dt, int has_bias, uint32_t align,
                       const void *bias, fpc_mm_plan **outp)
{
    const char *op = mm_name[kind];
    cudaDataType_t ty;
    if (fpc_cuda_type(dt, &ty) != 0)
        return fpc_fail_arg(d, op, "not a storage dtype");
    fpc_mm_plan *pl = calloc(1, sizeof *pl);
    if (!pl)
        return fp_fail(FP_ENOMEM, "cublasLt %s: out of memory", op);
    pl->kind = kind;
    pl->n = n;
    pl->in = in;
    pl->out = out;
    pl->has_bias = has_bias;
    pl->dt = dt;
    pl->align = align;
    cublasComputeType_t compute = dt == FP_DT_F32 && d->cfg.math == FP_DT_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                              : CUBLAS_COMPUTE_32F;
    int32_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    /* (stored rows, cols, ld) of A, B and C/D, column-major. */
    uint64_t ar, ac, br, bc, cr, cc;
    switch (kind) {
    case MM_FWD:      /* Yc[out x n] = Wc^T * Xc */
        ta = CUBLAS_OP_T;
        ar = (uint64_t)in; ac = (uint64_t)out; br = (uint64_t)in; bc = (uint64_t)n; cr = (uint64_t)out; cc = (uint64_t)n;
        break;
    case MM_BWD_DATA: /* dXc[in x n] += Wc * dYc */
        ar = (uint64_t)in; ac = (uint64_t)out; br = (uint64_t)out; bc = (uint64_t)n; cr = (uint64_t)in; cc = (uint64_t)n;
        break;
    case MM_BWD_W:    /* dWc[in x out] += Xc * dYc^T */
        tb = CUBLAS_OP_T;
        ar = (uint64_t)in; ac = (uint64_t)n; br = (uint64_t)out; bc = (uint64_t)n; cr = (uint64_t)in; cc = (uint64_t)out;
        break;
    default:          /* db[out x 1] += dYc * ones[n x 1] */
        ar = (uint64_t)out; ac = (uint64_t)n; br = (uint64_t)n; bc = 1; cr = (uint64_t)out; cc = 1;
        break;
    }
    int rc = FP_OK;
    cublasStatus_t s;
    cublasLtMatmulPreference_t pref = NULL;
#define LT_TRY(call) do { if ((s = (call)) != CUBLAS_STATUS_SUCCESS) { rc = fpc_fail_cublas(d, s, op); goto done; } } while (0)
    LT_TRY(cublasLtMatmulDescCreate(&pl->desc, compute, CUDA_R_32F));
    LT_TRY(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_TRY(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (kind == MM_FWD && has_bias) {
        /* Bias of D's row count (out), broadcast over the columns (the batch); its type defaults to D's. */
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        LT_TRY(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LT_TRY(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    LT_TRY(cublasLtMatrixLayoutCreate(&pl->a, ty, ar, ac, (int64_t)ar));
    LT_TRY(cublasLtMatrixLayoutCreate(&pl->b, ty, br, bc, (int64_t)br));
    LT_TRY(cublasLtMatrixLayoutCreate(&pl->c, ty, cr, cc, (int64_t)cr));
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws_max = LT_WORKSPACE_WANT;
    if (d->cfg.workspace_limit && d->cfg.workspace_limit < ws_max)
        ws_max = d->cfg.workspace_limit;
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_max, sizeof ws_max));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof align));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align));
    cublasLtMatmulHeuristicResult_t res[4];
    int got = 0;
    LT_TRY(cublasLtMatmulAlgoGetHeuristic(d->lt, pl->desc, pl->a, pl->b, pl->c, pl->c, pref, 4, res, &got));
    int pick = -1;
    for (int i = 0; i < got && pick < 0; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS)
            pick = i;
    if (pick < 0) {
        rc = fp_fail(FP_EUNAVAIL, "cublasLt %s [%s]: no algorithm for %s n %d in %d out %d (alignment %u)", op,
                     d->label[0] ? d->label : "-", fpc_dtype_name(dt), n, in, out, (unsigned)align);
        goto done;
    }
    pl->algo = res[pick].algo;
    pl->ws = res[pick].workspaceSize;
#undef LT_TRY
    if (d->nmm == d->capmm) {
        int cap = d->capmm ? d->capmm * 2 : 8;
        fpc_mm_plan **np = realloc(d->mms, (size_t)cap * sizeof *np);
        if (!np) {
            rc = fp_fail(FP_ENOMEM, "cublasLt %s: out of memory", op);
            goto done;
        }
        d->mms = np;
        d->capmm = cap;
    }
    d->mms[d->nmm++] = pl;
    fpc_workspace_note(d, pl->ws);
    *outp = pl;
done:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (rc != FP_OK)
        plan_destroy(pl);
    return rc;
}

static int get_plan(fp_cudnn *d, int kind, int n, int in, int out, fp_dtype dt, int has_bias, uint32_t align,
                    const void *bias, fpc_mm_plan **outp)
{
    for (int i = 0; i < d->nmm; i++) {
        fpc_mm_plan *pl = d->mms[i];
        /* A plan made for stricter alignment does not serve a less aligned call. */
        if (pl->kind == kind && pl->n == n && pl->in == in && pl->out == out && pl->dt == dt &&
            pl->has_bias == has_bias && pl->align <= align) {
            *outp = pl;
            return FP_OK;
        }
    }
    return create_plan(d, kind, n, in, out, dt, has_bias, align, bias, outp);
}

int fp_cudnn_linear_plan(fp_cudnn *d, int n, int in, int out, fp_dtype dt, int has_bias)
{
    if (!d)
        return fp_fail(FP_EINVAL, "cublasLt linear plan: NULL context");
    if (n <= 0 || in <= 0 || out <= 0)
        return fpc_fail_arg(d, "linear plan", "non-positive n, in or out");
    fpc_mm_plan *pl;
    int rc = FP_OK;
    /* Planned for cudaMalloc'd (256-byte aligned) buffers; other alignments get their own plan later. */
    for (int kind = MM_FWD; rc == FP_OK && kind <= MM_BWD_B; kind++)
        if (kind != MM_BWD_B || has_bias)
            rc = get_plan(d, kind, n, in, out, dt, kind == MM_FWD && has_bias, 256, NULL, &pl);
    return rc;
}

static int run(fp_cudnn *d, fpc_mm_plan *pl, const void *A, const void *B, void *CD, float beta, const void *bias)
{
    const char *op = mm_name[pl->kind];
    int rc = fpc_workspace_ensure(d, pl->ws, op);
    if (rc != FP_OK)
        return rc;
    if (pl->kind == MM_FWD && pl->has_bias)
        FPC_LT(d, cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), op);
    const float alpha = 1.0f;
    FPC_LT(d, cublasLtMatmul(d->lt, pl->desc, &alpha, A, pl->a, B, pl->b, &beta, CD, pl->c, CD, pl->c, &pl->algo,
                             d->ws, pl->ws, d->stream), op);
    return FP_OK;
}

/* dims {n, 1, 1, f}: the features of a [n, f] matrix; -1 when the tensor is not such a matrix. */
static int features(const fp_dtensor *t, int n)
{
    return t->dims.n == n && t->dims.h == 1 && t->dims.w == 1 ? t->dims.c : -1;
}

int fp_cudnn_linear_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x, const fp_dtensor *w,
                            const fp_dtensor *b)
{
    const char *op = mm_name[MM_FWD];
    int rc;
    if ((rc = fpc_check_tensor(d, y, op, "y")) != FP_OK || (rc = fpc_check_tensor(d, x, op, "x")) != FP_OK ||
        (rc = fpc_check_tensor(d, w, op, "w")) != FP_OK || (rc = fpc_same_dtype(d, op, x, y)) != FP_OK ||
        (rc = fpc_same_dtype(d, op, x, w)) != FP_OK)
        return rc;
    int n = x->dims.n, in = features(x, n), out = w->dims.n;
    if (in < 0 || features(w, out) != in || features(y, n) != out)
        return fpc_fail_arg(d, op, "shapes must be x {n,1,1,in}, w {out,1,1,in}, y {n,1,1,out}");
    if (b) {
        if ((rc = fpc_check_tensor(d, b, op, "b")) != FP_OK || (rc = fpc_same_dtype(d, op, x, b)) != FP_OK)
            return rc;
        if (features(b, 1) != out)
            return fpc_fail_arg(d, op, "bias must be {1,1,1,out}");
    }
    const void *bias = b ? b->data : NULL;
    fpc_mm_plan *pl;
    if ((rc = get_plan(d, MM_FWD, n, in, out, x->dtype, b != NULL, alignment_of(w->data, x->data, y->data, bias),
                       bias, &pl)) != FP_OK)
        return rc;
    return run(d, pl, w->data, x->data, y->data, 0.0f, bias);
}

/* A device vector of at least n ones in dtype dt (for the bias gradient). */
static int ensure_ones(fp_cudnn *d, int n, fp_dtype dt, const char *op)
{
    if (d->ones && d->ones_n >= (size_t)n && d->ones_dt == dt)
        return FP_OK;
    size_t bytes = (size_t)n * (size_t)fp_dtype_bytes(dt);
    void *host = malloc(bytes);
    if (!host)
        return fp_fail(FP_ENOMEM, "cublasLt %s: out of memory", op);
    if (dt == FP_DT_F32) {
        float *f = host;
        for (int i = 0; i < n; i++)
            f[i] = 1.0f;
    } else {
        uint16_t *h = host, one = dt == FP_DT_F16 ? 0x3C00u : 0x3F80u;   /* 1.0 in binary16 / bfloat16 */
        for (int i = 0; i < n; i++)
            h[i] = one;
    }
    if (d->ones)
        cudaFree(d->ones);
    d->ones = NULL;
    d->ones_n = 0;
    cudaError_t e = cudaMalloc(&d->ones, bytes);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(d->ones, host, bytes, cudaMemcpyHostToDevice, d->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(d->stream);   /* host buffer freed below */
    free(host);
    if (e != cudaSuccess) {
        if (d->ones)
            cudaFree(d->ones);
        d->ones = NULL;
        return fpc_fail_cuda(d, e, op);
    }
    d->ones_n = (size_t)n;
    d->ones_dt = dt;
    return FP_OK;
}

int fp_cudnn_linear_backward(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dw, const fp_dtensor *db,
                             const fp_dtensor *dy, const fp_dtensor *x, const fp_dtensor *w)
{
    return fp_cudnn_linear_backward_beta(d, dx, dw, db, dy, x, w, 1.0f);
}

int fp_cudnn_linear_backward_beta(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dw, const fp_dtensor *db,
                                  const fp_dtensor *dy, const fp_dtensor *x, const fp_dtensor *w, float beta)
{
    const char *op = "linear backward";
    int rc;
    if ((rc = fpc_check_tensor(d, dy, op, "dy")) != FP_OK || (rc = fpc_check_tensor(d, x, op, "x")) != FP_OK ||
        (rc = fpc_check_tensor(d, w, op, "w")) != FP_OK || (rc = fpc_same_dtype(d, op, dy, x)) != FP_OK ||
        (rc = fpc_same_dtype(d, op, dy, w)) != FP_OK)
        return rc;
    int n = x->dims.n, in = features(x, n), out = w->dims.n;
    if (in < 0 || features(w, out) != in || features(dy, n) != out)
        return fpc_fail_arg(d, op, "shapes must be x {n,1,1,in}, w {out,1,1,in}, dy {n,1,1,out}");
    const fp_dtensor *outs[3] = {dx, dw, db};
    const char *names[3] = {"dx", "dw", "db"};
    const fp_dims want[3] = {x->dims, w->dims, {1, 1, 1, out}};
    for (int i = 0; i < 3; i++) {
        if (!outs[i])
            continue;
        if ((rc = fpc_check_tensor(d, outs[i], op, names[i])) != FP_OK || (rc = fpc_same_dtype(d, op, dy, outs[i])) != FP_OK ||
            (rc = fpc_same_dims(d, op, outs[i]->dims, want[i], names[i])) != FP_OK)
            return rc;
    }
    fpc_mm_plan *pl;
    if (dx) {
        if ((rc = get_plan(d, MM_BWD_DATA, n, in, out, dy->dtype, 0, alignment_of(w->data, dy->data, dx->data, NULL),
                           NULL, &pl)) != FP_OK ||
            (rc = run(d, pl, w->data, dy->data, dx->data, beta, NULL)) != FP_OK)
            return rc;
    }
    if (dw) {
        if ((rc = get_plan(d, MM_BWD_W, n, in, out, dy->dtype, 0, alignment_of(x->data, dy->data, dw->data, NULL),
                           NULL, &pl)) != FP_OK ||
            (rc = run(d, pl, x->data, dy->data, dw->data, beta, NULL)) != FP_OK)
            return rc;
    }
    if (db) {
        if ((rc = ensure_ones(d, n, dy->dtype, mm_name[MM_BWD_B])) != FP_OK ||
            (rc = get_plan(d, MM_BWD_B, n, in, out, dy->dtype, 0, alignment_of(dy->data, d->ones, db->data, NULL), NULL,
                           &pl)) != FP_OK ||
            (rc = run(d, pl, dy->data, d->ones, db->data, beta, NULL)) != FP_OK)
            return rc;
    }
    return FP_OK;
}
