/* cudnn_conv.c — convolution forward / backward data / backward filter on cuDNN 9's convolution API
 * (cudnn_cnn.h), NHWC tensors and OHWI (KRSC) filters in fp32 / fp16 / bf16. The algorithm of each
 * (shape, dtype, direction) is chosen ONCE — timed (cudnnFind*) or by heuristics (Get*_v7) — within the
 * workspace limit and the math policy, then cached; every layer shares the context's one workspace. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/cuda/cudnn_internal.h"

enum { DIR_FWD = 0, DIR_BWD_DATA = 1, DIR_BWD_FILTER = 2 };
static const char *const dir_name[3] = {"conv forward", "conv backward data", "conv backward filter"};

struct fpc_conv_plan {
    fp_dims xd, yd;
    fp_conv_params p;
    fp_dtype dt;
    cudnnTensorDescriptor_t xdesc, ydesc;
    cudnnFilterDescriptor_t wdesc;
    cudnnConvolutionDescriptor_t cdesc[3];   /* one per direction: each carries its chosen math type */
    int planned[3];
    int algo[3];
    size_t ws[3];
};

/* One candidate of any direction (the three cuDNN perf structs share these fields). */
typedef struct {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnMathType_t math;
} candidate;

/* Is a candidate measured with math type m usable for tensors of dtype dt under the context's policy?
 * Never ALLOW_CONVERSION (it down-converts fp32 to fp16, which no policy means). fp32 tensors under the
 * fp32 policy: not TENSOR_OP (DEFAULT_MATH permits TF32 on sm_80+, so such candidates run with FMA_MATH,
 * see run_math); under tf32 any other. 16-bit tensors: any other. */
static int math_allowed(const fp_cudnn *d, fp_dtype dt, cudnnMathType_t m)
{
    if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        return 0;
    if (dt == FP_DT_F32 && d->cfg.math != FP_DT_TF32)
        return m != CUDNN_TENSOR_OP_MATH;
    return 1;
}

/* The math type a chosen candidate runs with: FMA for fp32 tensors under the fp32 policy whatever
 * cuDNN reported (as PyTorch does with allow_tf32 off), else the one it was measured with. */
static cudnnMathType_t run_math(const fp_cudnn *d, fp_dtype dt, cudnnMathType_t measured)
{
    return dt == FP_DT_F32 && d->cfg.math != FP_DT_TF32 ? CUDNN_FMA_MATH : measured;
}

/* The math type asked of the heuristics: TF32 tensor-op math for fp32 tensors under tf32 (cuDNN converts the
 * unrounded fp32 operands itself, cudnn_ops.h), FMA under fp32, tensor ops for 16-bit tensors. */
static cudnnMathType_t policy_math(const fp_cudnn *d, fp_dtype dt)
{
    if (dt == FP_DT_F32)
        return d->cfg.math == FP_DT_TF32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    return CUDNN_TENSOR_OP_MATH;
}

static void plan_destroy(fpc_conv_plan *pl)
{
    if (!pl)
        return;
    if (pl->xdesc)
        cudnnDestroyTensorDescriptor(pl->xdesc);
    if (pl->ydesc)
        cudnnDestroyTensorDescriptor(pl->ydesc);
    if (pl->wdesc)
        cudnnDestroyFilterDescriptor(pl->wdesc);
    for (int i = 0; i < 3; i++)
        if (pl->cdesc[i])
            cudnnDestroyConvolutionDescriptor(pl->cdesc[i]);
    free(pl);
}

void fpc_conv_plans_free(fp_cudnn *d)
{
    for (int i = 0; i < d->nconv; i++)
        plan_destroy(d->convs[i]);
    free(d->convs);
    d->convs = NULL;
    d->nconv = d->capconv = 0;
}

static int same_key(const fpc_conv_plan *pl, fp_dims xd, const fp_conv_params *p, fp_dtype dt)
{
    return pl->dt == dt && pl->xd.n == xd.n && pl->xd.h == xd.h && pl->xd.w == xd.w && pl->xd.c == xd.c &&
           pl->p.cin == p->cin && pl->p.cout == p->cout && pl->p.kh == p->kh && pl->p.kw == p->kw &&
           pl->p.stride == p->stride && pl->p.pad == p->pad;
}

static int new_plan(fp_cudnn *d, fp_dims xd, const fp_conv_params *p, fp_dtype dt, fpc_conv_plan **out)
{
    const char *op = "conv plan";
    cudnnDataType_t ct;
    if (fpc_cudnn_type(dt, &ct) != 0)
        return fp_fail(FP_EINVAL, "cudnn conv plan [%s]: dtype %s is not a storage type", d->label[0] ? d->label : "-",
                       fpc_dtype_name(dt));
    fp_dims yd = fp_conv_out_dims(xd, p);
    if (yd.n <= 0 || xd.c != p->cin)
        return fp_fail(FP_EINVAL, "cudnn conv plan [%s]: invalid convolution: input %dx%dx%dx%d, cin %d cout %d "
                       "k %dx%d stride %d pad %d", d->label[0] ? d->label : "-", xd.n, xd.h, xd.w, xd.c, p->cin,
                       p->cout, p->kh, p->kw, p->stride, p->pad);
    fpc_conv_plan *pl = calloc(1, sizeof *pl);
    if (!pl)
        return fp_fail(FP_ENOMEM, "cudnn conv plan: out of memory");
    pl->xd = xd;
    pl->yd = yd;
    pl->p = *p;
    pl->dt = dt;
    for (int i = 0; i < 3; i++)
        pl->algo[i] = -1;
    int rc = FP_OK;
    cudnnStatus_t s;
#define PLAN_TRY(call) do { if ((s = (call)) != CUDNN_STATUS_SUCCESS) { rc = fpc_fail_cudnn(d, s, op); goto fail; } } while (0)
    PLAN_TRY(cudnnCreateTensorDescriptor(&pl->xdesc));
    PLAN_TRY(cudnnCreateTensorDescriptor(&pl->ydesc));
    PLAN_TRY(cudnnCreateFilterDescriptor(&pl->wdesc));
    PLAN_TRY(cudnnSetTensor4dDescriptor(pl->xdesc, CUDNN_TENSOR_NHWC, ct, xd.n, xd.c, xd.h, xd.w));
    PLAN_TRY(cudnnSetTensor4dDescriptor(pl->ydesc, CUDNN_TENSOR_NHWC, ct, yd.n, yd.c, yd.h, yd.w));
    /* Filter k, c, h, w in NHWC format = KRSC = OHWI, the CPU kernel's weight layout. */
    PLAN_TRY(cudnnSetFilter4dDescriptor(pl->wdesc, ct, CUDNN_TENSOR_NHWC, p->cout, p->cin, p->kh, p->kw));
    for (int i = 0; i < 3; i++) {
        PLAN_TRY(cudnnCreateConvolutionDescriptor(&pl->cdesc[i]));
        /* Cross-correlation (as PyTorch and the CPU kernel); fp32 accumulation for every dtype
         * (PSEUDO_HALF / PSEUDO_BFLOAT16 configurations for 16-bit tensors). */
        PLAN_TRY(cudnnSetConvolution2dDescriptor(pl->cdesc[i], p->pad, p->pad, p->stride, p->stride, 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        PLAN_TRY(cudnnSetConvolutionMathType(pl->cdesc[i], policy_math(d, dt)));
    }
    /* Sanity: cuDNN's output dims agree with fp_conv_out_dims (floor division, as PyTorch). */
    int on, oc, oh, ow;
    PLAN_TRY(cudnnGetConvolution2dForwardOutputDim(pl->cdesc[0], pl->xdesc, pl->wdesc, &on, &oc, &oh, &ow));
    if (on != yd.n || oc != yd.c || oh != yd.h || ow != yd.w) {
        rc = fp_fail(FP_EINTERNAL, "cudnn conv plan [%s]: cuDNN output %dx%dx%dx%d differs from %dx%dx%dx%d",
                     d->label[0] ? d->label : "-", on, oh, ow, oc, yd.n, yd.h, yd.w, yd.c);
        goto fail;
    }
#undef PLAN_TRY
    if (d->nconv == d->capconv) {
        int cap = d->capconv ? d->capconv * 2 : 16;
        fpc_conv_plan **n = realloc(d->convs, (size_t)cap * sizeof *n);
        if (!n) {
            rc = fp_fail(FP_ENOMEM, "cudnn conv plan: out of memory");
            goto fail;
        }
        d->convs = n;
        d->capconv = cap;
    }
    d->convs[d->nconv++] = pl;
    *out = pl;
    return FP_OK;
fail:
    plan_destroy(pl);
    return rc;
}

static int find_plan(fp_cudnn *d, fp_dims xd, const fp_conv_params *p, fp_dtype dt, fpc_conv_plan **out)
{
    for (int i = 0; i < d->nconv; i++)
        if (same_key(d->convs[i], xd, p, dt)) {
            *out = d->convs[i];
            return FP_OK;
        }
    return new_plan(d, xd, p, dt, out);
}

/* Ask cuDNN for the candidates of one direction, best first. */
#define MAX_CAND 32
static int candidates(fp_cudnn *d, fpc_conv_plan *pl, int dir, candidate *out, int *count)
{
    const char *op = dir_name[dir];
    int bench = d->cfg.search == FP_CONV_SEARCH_BENCHMARK;
    int n = 0, maxc = 0;
    *count = 0;
    if (dir == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_CAND];
        FPC_DNN(d, cudnnGetConvolutionForwardAlgorithmMaxCount(d->dnn, &maxc), op);
        maxc = maxc > MAX_CAND ? MAX_CAND : maxc;
        if (bench)
            FPC_DNN(d, cudnnFindConvolutionForwardAlgorithm(d->dnn, pl->xdesc, pl->wdesc, pl->cdesc[dir], pl->ydesc,
                                                            maxc, &n, perf), op);
        else
            FPC_DNN(d, cudnnGetConvolutionForwardAlgorithm_v7(d->dnn, pl->xdesc, pl->wdesc, pl->cdesc[dir],
                                                              pl->ydesc, maxc, &n, perf), op);
        for (int i = 0; i < n; i++)
            out[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].memory, perf[i].mathType};
    } else if (dir == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_CAND];
        FPC_DNN(d, cudnnGetConvolutionBackwardDataAlgorithmMaxCount(d->dnn, &maxc), op);
        maxc = maxc > MAX_CAND ? MAX_CAND : maxc;
        if (bench)
            FPC_DNN(d, cudnnFindConvolutionBackwardDataAlgorithm(d->dnn, pl->wdesc, pl->ydesc, pl->cdesc[dir],
                                                                 pl->xdesc, maxc, &n, perf), op);
        else
            FPC_DNN(d, cudnnGetConvolutionBackwardDataAlgorithm_v7(d->dnn, pl->wdesc, pl->ydesc, pl->cdesc[dir],
                                                                   pl->xdesc, maxc, &n, perf), op);
        for (int i = 0; i < n; i++)
            out[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].memory, perf[i].mathType};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_CAND];
        FPC_DNN(d, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(d->dnn, &maxc), op);
        maxc = maxc > MAX_CAND ? MAX_CAND : maxc;
        if (bench)
            FPC_DNN(d, cudnnFindConvolutionBackwardFilterAlgorithm(d->dnn, pl->xdesc, pl->ydesc, pl->cdesc[dir],
                                                                   pl->wdesc, maxc, &n, perf), op);
        else
            FPC_DNN(d, cudnnGetConvolutionBackwardFilterAlgorithm_v7(d->dnn, pl->xdesc, pl->ydesc, pl->cdesc[dir],
                                                                     pl->wdesc, maxc, &n, perf), op);
        for (int i = 0; i < n; i++)
            out[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].memory, perf[i].mathType};
    }
    *count = n;
    return FP_OK;
}

static int workspace_size(fp_cudnn *d, fpc_conv_plan *pl, int dir, int algo, size_t *bytes)
{
    const char *op = dir_name[dir];
    if (dir == DIR_FWD)
        FPC_DNN(d, cudnnGetConvolutionForwardWorkspaceSize(d->dnn, pl->xdesc, pl->wdesc, pl->cdesc[dir], pl->ydesc,
                                                           (cudnnConvolutionFwdAlgo_t)algo, bytes), op);
    else if (dir == DIR_BWD_DATA)
        FPC_DNN(d, cudnnGetConvolutionBackwardDataWorkspaceSize(d->dnn, pl->wdesc, pl->ydesc, pl->cdesc[dir],
                                                                pl->xdesc, (cudnnConvolutionBwdDataAlgo_t)algo,
                                                                bytes), op);
    else
        FPC_DNN(d, cudnnGetConvolutionBackwardFilterWorkspaceSize(d->dnn, pl->xdesc, pl->ydesc, pl->cdesc[dir],
                                                                  pl->wdesc, (cudnnConvolutionBwdFilterAlgo_t)algo,
                                                                  bytes), op);
    return FP_OK;
}

static int plan_direction(fp_cudnn *d, fpc_conv_plan *pl, int dir)
{
    if (pl->planned[dir])
        return FP_OK;
    candidate cand[MAX_CAND];
    int n = 0;
    int rc = candidates(d, pl, dir, cand, &n);
    if (rc != FP_OK)
        return rc;
    size_t limit = d->cfg.workspace_limit ? d->cfg.workspace_limit : (size_t)-1;
    for (int i = 0; i < n; i++) {
        if (cand[i].status != CUDNN_STATUS_SUCCESS || cand[i].memory > limit || !math_allowed(d, pl->dt, cand[i].math))
            continue;
        /* cuDNN may report another math type than the descriptor asked for: set the one to run with. */
        FPC_DNN(d, cudnnSetConvolutionMathType(pl->cdesc[dir], run_math(d, pl->dt, cand[i].math)), dir_name[dir]);
        size_t ws = 0;
        if ((rc = workspace_size(d, pl, dir, cand[i].algo, &ws)) != FP_OK)
            return rc;
        if (ws > limit)
            continue;
        pl->algo[dir] = cand[i].algo;
        pl->ws[dir] = ws;
        pl->planned[dir] = 1;
        fpc_workspace_note(d, ws);
        return FP_OK;
    }
    return fp_fail(FP_EUNAVAIL, "cudnn %s [%s]: no algorithm for %s input %dx%dx%dx%d k %dx%d stride %d pad %d "
                   "cout %d within the workspace limit of %zu bytes and the %s math policy (%d candidates)",
                   dir_name[dir], d->label[0] ? d->label : "-", fpc_dtype_name(pl->dt), pl->xd.n, pl->xd.h, pl->xd.w,
                   pl->xd.c, pl->p.kh, pl->p.kw, pl->p.stride, pl->p.pad, pl->p.cout, d->cfg.workspace_limit,
                   fpc_dtype_name(d->cfg.math), n);
}

int fp_cudnn_conv_plan(fp_cudnn *d, fp_dims xd, const fp_conv_params *p, fp_dtype dt, unsigned dirs)
{
    if (!d || !p)
        return fp_fail(FP_EINVAL, "cudnn conv plan: NULL argument");
    fpc_conv_plan *pl;
    int rc = find_plan(d, xd, p, dt, &pl);
    for (int dir = 0; rc == FP_OK && dir < 3; dir++)
        if (dirs & (1u << dir))
            rc = plan_direction(d, pl, dir);
    return rc;
}

int fp_cudnn_conv_algos(fp_cudnn *d, fp_dims xd, const fp_conv_params *p, fp_dtype dt, int algo[3])
{
    if (!d || !p || !algo)
        return fp_fail(FP_EINVAL, "cudnn conv algos: NULL argument");
    for (int i = 0; i < d->nconv; i++)
        if (same_key(d->convs[i], xd, p, dt)) {
            memcpy(algo, d->convs[i]->algo, sizeof d->convs[i]->algo);
            return FP_OK;
        }
    return fp_fail(FP_EINVAL, "cudnn conv algos: shape not planned");
}

/* Checks common to the three directions: `a` has the input's dims (x or dx), `b` the output's (y or
 * dy), `w` the filter's; one dtype. Plans the direction on first use and makes the workspace fit. */
static int prepare(fp_cudnn *d, int dir, const fp_dtensor *a, const fp_dtensor *b, const fp_dtensor *w,
                   const fp_conv_params *p, fpc_conv_plan **out)
{
    const char *op = dir_name[dir];
    int rc;
    if (!p)
        return fp_fail(FP_EINVAL, "cudnn %s: NULL params", op);
    if ((rc = fpc_check_tensor(d, a, op, dir == DIR_BWD_DATA ? "dx" : "x")) != FP_OK ||
        (rc = fpc_check_tensor(d, b, op, dir == DIR_FWD ? "y" : "dy")) != FP_OK ||
        (rc = fpc_check_tensor(d, w, op, dir == DIR_BWD_FILTER ? "dw" : "w")) != FP_OK ||
        (rc = fpc_same_dtype(d, op, a, b)) != FP_OK || (rc = fpc_same_dtype(d, op, a, w)) != FP_OK)
        return rc;
    fp_dims yd = fp_conv_out_dims(a->dims, p);
    fp_dims wd = {p->cout, p->kh, p->kw, p->cin};
    if (yd.n <= 0 || a->dims.c != p->cin)
        return fpc_fail_arg(d, op, "invalid convolution parameters for the input dims");
    if ((rc = fpc_same_dims(d, op, b->dims, yd, dir == DIR_FWD ? "y" : "dy")) != FP_OK ||
        (rc = fpc_same_dims(d, op, w->dims, wd, "weights (OHWI)")) != FP_OK)
        return rc;
    fpc_conv_plan *pl;
    if ((rc = find_plan(d, a->dims, p, a->dtype, &pl)) != FP_OK || (rc = plan_direction(d, pl, dir)) != FP_OK ||
        (rc = fpc_workspace_ensure(d, pl->ws[dir], op)) != FP_OK)
        return rc;
    *out = pl;
    return FP_OK;
}

int fp_cudnn_conv_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x, const fp_dtensor *w,
                          const fp_conv_params *p)
{
    fpc_conv_plan *pl;
    int rc = prepare(d, DIR_FWD, x, y, w, p, &pl);
    if (rc != FP_OK)
        return rc;
    const float one = 1.0f, zero = 0.0f;
    FPC_DNN(d, cudnnConvolutionForward(d->dnn, &one, pl->xdesc, x->data, pl->wdesc, w->data, pl->cdesc[DIR_FWD],
                                       (cudnnConvolutionFwdAlgo_t)pl->algo[DIR_FWD], d->ws, pl->ws[DIR_FWD], &zero,
                                       pl->ydesc, y->data), dir_name[DIR_FWD]);
    return FP_OK;
}

int fp_cudnn_conv_backward_data_beta(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy, const fp_dtensor *w,
                                     const fp_conv_params *p, float beta)
{
    fpc_conv_plan *pl;
    int rc = prepare(d, DIR_BWD_DATA, dx, dy, w, p, &pl);
    if (rc != FP_OK)
        return rc;
    const float one = 1.0f;   /* alpha; beta 1: dx += (layers.h: backward accumulates), 0: dx = */
    FPC_DNN(d, cudnnConvolutionBackwardData(d->dnn, &one, pl->wdesc, w->data, pl->ydesc, dy->data,
                                            pl->cdesc[DIR_BWD_DATA], (cudnnConvolutionBwdDataAlgo_t)pl->algo[DIR_BWD_DATA],
                                            d->ws, pl->ws[DIR_BWD_DATA], &beta, pl->xdesc, dx->data),
            dir_name[DIR_BWD_DATA]);
    return FP_OK;
}

int fp_cudnn_conv_backward_data(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy, const fp_dtensor *w,
                                const fp_conv_params *p)
{
    return fp_cudnn_conv_backward_data_beta(d, dx, dy, w, p, 1.0f);
}

int fp_cudnn_conv_backward_filter_beta(fp_cudnn *d, const fp_dtensor *dw, const fp_dtensor *dy, const fp_dtensor *x,
                                       const fp_conv_params *p, float beta)
{
    fpc_conv_plan *pl;
    int rc = prepare(d, DIR_BWD_FILTER, x, dy, dw, p, &pl);
    if (rc != FP_OK)
        return rc;
    const float one = 1.0f;   /* alpha; beta 1: dw +=, 0: dw = */
    FPC_DNN(d, cudnnConvolutionBackwardFilter(d->dnn, &one, pl->xdesc, x->data, pl->ydesc, dy->data,
                                              pl->cdesc[DIR_BWD_FILTER],
                                              (cudnnConvolutionBwdFilterAlgo_t)pl->algo[DIR_BWD_FILTER], d->ws,
                                              pl->ws[DIR_BWD_FILTER], &beta, pl->wdesc, dw->data),
            dir_name[DIR_BWD_FILTER]);
    return FP_OK;
}

int fp_cudnn_conv_backward_filter(fp_cudnn *d, const fp_dtensor *dw, const fp_dtensor *dy, const fp_dtensor *x,
                                  const fp_conv_params *p)
{
    return fp_cudnn_conv_backward_filter_beta(d, dw, dy, x, p, 1.0f);
}
