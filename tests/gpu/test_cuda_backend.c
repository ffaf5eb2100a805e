/* test_cuda_backend.c — the CUDA backend (trainer/backend_cuda.h) against the CPU backend, the numerical
 * reference: same weights, same batch, for fp32 / tf32 / fp16 / bf16, on tinynet and a small ResNet:
 * logits, loss and every parameter gradient agree within the tolerances stated per policy below, and one
 * arm step (SGD with momentum and weight decay on the device, unscale + check) moves the parameters as on
 * the CPU. Skips with a TAP reason when built without CUDA or when no GPU is usable. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/run/arm.h"
#include "trainer/backend_cuda.h"
#include "trainer/model.h"

/* Tolerances per policy (docs/design.md: the CUDA backend agrees with the CPU within stated tolerances).
 * fp32: cuDNN / cuBLAS sum in another order than the CPU's GEMMs (both true fp32, no TF32): loss within
 * 1e-4 relative; logits within 1e-4 of the largest |logit|; each gradient tensor within 1e-3 relative L2.
 * tf32: the CPU rounds every conv / linear operand to TF32 to nearest even, the GPU's TF32 math converts it
 * itself (Hopper truncates the low 13 bits: trainer/cuda/cudnn_ops.h), so each operand may differ by one
 * TF32 ulp (2^-10 relative) at every such layer, in both directions of the step: 10 TF32 ulps (10 * 2^-10) for
 * loss and logits, 30 for gradients (the CPU's own tf32 against its fp32 is 1.1e-3 of the largest logit and
 * 4.4e-4 relative in the loss on resnet-small, 3.1e-2 rel L2 in its worst gradient, conv1's; the gradient
 * check below also allows twice that distance per tensor).
 * fp16 / bf16: 16-bit outputs differ by an ulp where the fp32 sums straddle a rounding boundary, and those
 * differences travel: about 20 ulps of the format (fp16 ulp 2^-11, bf16 2^-8) for loss and logits, 60 for
 * gradients; and, for a tensor whose gradient the format itself moves farther (a batchnorm bias gradient is a
 * sum over the batch that cancels: layer4's bias sums 8 values of 1x1 maps), within twice the distance between
 * the CPU's own low-precision and fp32 gradients of it — two independent roundings of that size are ~1.4x
 * apart, a wrong kernel is ~1 relative apart. The optimizer step: the parameter change (lr * update) within
 * 10x the gradient tolerance. */
typedef struct {
    const char *policy;
    double loss_rel, logit_rel, grad_rel;
} tol_t;
static const tol_t tols[] = {
    {"fp32", 1e-4, 1e-4, 1e-3},
    {"tf32", 10 * 0x1p-10, 10 * 0x1p-10, 30 * 0x1p-10},
    {"fp16", 20 * 0x1p-11, 20 * 0x1p-11, 60 * 0x1p-11},
    {"bf16", 20 * 0x1p-8, 20 * 0x1p-8, 60 * 0x1p-8},
};

enum { N = 8, CLASSES = 10, SIZE = 32 };

static uint32_t rng = 0x9E3779B9u;
static float urand(void) { return tu_uniform32_pm1(&rng); }

static int make_model(fp_model **m, int resnet)
{
    if (resnet) {
        static const int layers[4] = {1, 1, 1, 1};
        return fp_resnet_create(m, "resnet-small", 0, layers, 8, CLASSES, SIZE, 7);
    }
    fp_model_config mc = {"tinynet", CLASSES, SIZE, 16, 7, 0};
    return fp_model_create(m, &mc);
}

/* Logits, loss and gradients of one policy on one model: CPU model vs a clone moved onto CUDA. */
static void compare_model(int resnet, const tol_t *t, const float *x, const int *labels)
{
    const char *name = resnet ? "resnet-small" : "tinynet";
    fp_model *c = NULL, *g = NULL, *ref32 = NULL;
    int rc = make_model(&c, resnet);
    rc = rc ? rc : fp_model_clone(&g, c);
    if (!rc && strcmp(t->policy, "fp32") != 0)
        rc = fp_model_clone(&ref32, c);   /* stays on the CPU in fp32 */
    rc = rc ? rc : fp_model_set_backend(g, fp_backend_cuda(), NULL);
    rc = rc ? rc : fp_model_set_policy(c, fp_policy_find(t->policy));
    rc = rc ? rc : fp_model_set_policy(g, fp_policy_find(t->policy));
    if (!tap_ok(rc == FP_OK, "%s %s: CPU model and its CUDA clone ready (%s)", name, t->policy,
                rc ? fp_error_message() : "ok")) {
        tap_skip(4, "no model");
        fp_model_free(c);
        fp_model_free(g);
        fp_model_free(ref32);
        return;
    }
    const float *lc = NULL, *lg = NULL;
    float *keep = malloc(N * CLASSES * sizeof(float));
    rc = fp_model_forward(c, &lc, x, N, FP_MODE_EVAL);
    if (!rc)
        memcpy(keep, lc, N * CLASSES * sizeof(float));
    rc = rc ? rc : fp_model_forward(g, &lg, x, N, FP_MODE_EVAL);
    double amax = 0, dmax = 0;
    for (int i = 0; !rc && i < N * CLASSES; i++) {
        amax = fmax(amax, fabs(keep[i]));
        dmax = fmax(dmax, fabs((double)keep[i] - lg[i]));
    }
    tap_ok(!rc && dmax <= t->logit_rel * amax, "%s %s: eval logits agree (max diff %.3g <= %.3g x max |logit| %.3g)",
           name, t->policy, dmax, t->logit_rel, amax);
    float loss_c = NAN, loss_g = NAN;
    fp_model_zero_grad(c);
    fp_model_zero_grad(g);
    rc = fp_model_train_step(c, &loss_c, NULL, NULL, x, labels, N);
    rc = rc ? rc : fp_model_train_step(g, &loss_g, NULL, NULL, x, labels, N);
    tap_ok(!rc && fabs((double)loss_g - loss_c) <= t->loss_rel * fabs(loss_c),
           "%s %s: training loss agrees (cpu %.7g, cuda %.7g, relative tolerance %.3g)", name, t->policy, loss_c,
           loss_g, t->loss_rel);
    const float *gc = fp_model_grads(c), *gg = fp_model_grads(g), *g32 = NULL;
    if (!rc && ref32) {   /* the CPU's fp32 gradients: how far the format itself moves each tensor */
        float loss32;
        fp_model_zero_grad(ref32);
        rc = fp_model_train_step(ref32, &loss32, NULL, NULL, x, labels, N);
        g32 = rc ? NULL : fp_model_grads(ref32);
    }
    double worst = 0, worst_e = 0, worst_tol = t->grad_rel;
    const char *worst_name = "-";
    for (size_t i = 0; !rc && gc && gg && i < fp_model_tensor_count(c); i++) {
        const fp_tensor_info *ti = fp_model_tensor(c, i);
        if (!ti->is_param)
            continue;
        double e = tu_rel_l2(gg + ti->offset, gc + ti->offset, ti->numel);
        double tol = t->grad_rel;
        if (g32)
            tol = fmax(tol, 2 * tu_rel_l2(gc + ti->offset, g32 + ti->offset, ti->numel));
        if (!(e / tol <= worst)) {
            worst = e / tol;
            worst_e = e;
            worst_tol = tol;
            worst_name = ti->name;
        }
    }
    tap_ok(!rc && gc && gg && worst <= 1, "%s %s: every parameter gradient agrees (worst %s: rel L2 %.3g <= %.3g)",
           name, t->policy, worst_name, worst_e, worst_tol);
    for (size_t i = 0; g32 && i < fp_model_tensor_count(c); i++) {   /* the worst one against fp32, both ways */
        const fp_tensor_info *ti = fp_model_tensor(c, i);
        if (ti->is_param && strcmp(ti->name, worst_name) == 0)
            tap_diag("%s %s: %s: cuda vs cpu fp32 %.3g, cpu %s vs cpu fp32 %.3g", name, t->policy, ti->name,
                     tu_rel_l2(gg + ti->offset, g32 + ti->offset, ti->numel), t->policy,
                     tu_rel_l2(gc + ti->offset, g32 + ti->offset, ti->numel));
    }
    const float *bc = fp_model_buffers(c), *bg = fp_model_buffers(g);
    double be = bc && bg ? tu_rel_l2(bg, bc, fp_model_num_buffers(c)) : INFINITY;
    tap_ok(!rc && be <= t->logit_rel, "%s %s: running statistics after two train forwards agree (rel L2 %.3g)", name,
           t->policy, be);
    if (rc)
        tap_diag("%s", fp_error_message());
    free(keep);
    fp_model_free(c);
    fp_model_free(g);
    fp_model_free(ref32);
}

/* One arm step on each backend from the same weights and batch: the parameter change agrees. */
static void compare_step(const tol_t *t, float *x, int *labels)
{
    fp_arm_config ac;
    gtu_arm_config(&ac, "tinynet", CLASSES, SIZE, 16, 11, t->policy, 0);
    ac.backend = NULL;   /* the CPU arm first: the same configuration on the CPU backend */
    fp_arm *cpu = NULL, *gpu = NULL;
    int rc = fp_arm_create(&cpu, &ac);
    ac.backend = fp_backend_cuda();
    rc = rc ? rc : fp_arm_create(&gpu, &ac);
    if (!tap_ok(rc == FP_OK && fp_arm_on_device(gpu), "%s: CPU and CUDA arms created (%s)", t->policy,
                rc ? fp_error_message() : "ok")) {
        tap_skip(1, "no arms");
        fp_arm_free(cpu);
        fp_arm_free(gpu);
        return;
    }
    size_t np = fp_model_num_params(fp_arm_model(cpu));
    float *p0 = malloc(np * sizeof(float)), *dc = malloc(np * sizeof(float)), *dg = malloc(np * sizeof(float));
    memcpy(p0, fp_model_params(fp_arm_model(cpu)), np * sizeof(float));
    fp_batch b = {N, SIZE, x, labels, 0, 0};
    fp_arm_step_result rcpu, rgpu;
    for (int s = 0; s < 2 && !rc; s++) {   /* two steps: the momentum buffer's first and second use */
        rc = fp_arm_step(cpu, &b, &rcpu);
        rc = rc ? rc : fp_arm_step(gpu, &b, &rgpu);
    }
    const float *pc = fp_model_params(fp_arm_model(cpu)), *pg = fp_model_params(fp_arm_model(gpu));
    for (size_t i = 0; !rc && pc && pg && i < np; i++) {
        dc[i] = pc[i] - p0[i];
        dg[i] = pg[i] - p0[i];
    }
    double e = !rc && pc && pg ? tu_rel_l2(dg, dc, np) : INFINITY;
    tap_ok(e <= 10 * t->grad_rel && rcpu.skipped == rgpu.skipped,
           "%s: two arm steps (SGD momentum 0.9, weight decay 5e-4) move the parameters alike (rel L2 of the change %.3g <= %.3g)",
           t->policy, e, 10 * t->grad_rel);
    if (rc)
        tap_diag("%s", fp_error_message());
    free(p0);
    free(dc);
    free(dg);
    fp_arm_free(cpu);
    fp_arm_free(gpu);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    int npol = (int)(sizeof tols / sizeof *tols);
    tap_plan(npol * (2 * 5 + 2));
    float *x = malloc((size_t)N * SIZE * SIZE * 3 * sizeof(float));
    int labels[N];
    for (size_t i = 0; i < (size_t)N * SIZE * SIZE * 3; i++)
        x[i] = urand();
    for (int i = 0; i < N; i++)
        labels[i] = (i * 7 + 3) % CLASSES;
    for (int p = 0; p < npol; p++) {
        compare_model(0, &tols[p], x, labels);
        compare_model(1, &tols[p], x, labels);
        compare_step(&tols[p], x, labels);
    }
    free(x);
#endif
    return tap_done();
}
