/* test_cuda_weight_copy.c — the CUDA backend's 16-bit weight copy (backend_cuda.h): after an SGD step that
 * writes it (kernels.h, as the arm's device optimizer does) it equals the cast of the new fp32 weights bit
 * for bit; conv / linear ops reading it give the same logits bit for bit as casting the weights again; a
 * forward keeps it valid, a host write of the weights (uploaded at the next forward) drops it; an arm step
 * of a 16-bit policy leaves it valid and equal to the cast of its weights. fp16 and bf16. Skips with a TAP
 * reason when built without CUDA or when no GPU is usable. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#ifdef HAVE_CUDA
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dtype.h"
#include "error.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
#include "trainer/model.h"
#include "trainer/run/arm.h"

enum { N = 8, CLASSES = 10, SIZE = 32 };

/* For every parameter tensor of m: its values in the copy (fp_backend_cuda_weight_copy_at, each tensor's
 * values consecutive and 256-byte aligned) equal the cast of its fp32 weights at p, both downloaded. */
static int copy_is_cast(fp_model *m, fp_backend *be, const float *p, fp_dtype dt, const char **first_bad)
{
    const fp_backend_ops *G = fp_backend_cuda();
    size_t np = fp_model_num_params(m);
    float *w = malloc(np * sizeof(float));
    uint16_t *c = malloc(np * sizeof(uint16_t)), *want = malloc(np * sizeof(uint16_t));
    int ok = G->download(be, w, p, np * sizeof(float)) == FP_OK;
    *first_bad = NULL;
    for (size_t i = 0; ok && !*first_bad && i < fp_model_tensor_count(m); i++) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        if (!t->is_param)
            continue;
        const void *at = fp_backend_cuda_weight_copy_at(be, p + t->offset);
        ok = at && ((uintptr_t)at & 255u) == 0 &&
             G->download(be, c, at, t->numel * sizeof(uint16_t)) == FP_OK && G->sync(be) == FP_OK;
        if (ok) {
            fp_narrow_array(want, w + t->offset, t->numel, dt);
            if (memcmp(c, want, t->numel * sizeof(uint16_t)) != 0)
                *first_bad = t->name;
        } else
            *first_bad = t->name;
    }
    free(w);
    free(c);
    free(want);
    return ok && !*first_bad;
}

static void model_copy(const char *policy, const float *x, const int *labels)
{
    fp_model_config mc = {"tinynet", CLASSES, SIZE, 16, 7, 0};
    fp_model *m = NULL;
    int rc = fp_model_create(&m, &mc);
    rc = rc ? rc : fp_model_set_backend(m, fp_backend_cuda(), NULL);
    rc = rc ? rc : fp_model_set_policy(m, fp_policy_find(policy));
    fp_dtype want_dt = fp_policy_find(policy)->compute;
    float loss = 0;
    if (!rc) {
        fp_model_zero_grad(m);
        rc = fp_model_train_step(m, &loss, NULL, NULL, x, labels, N);
    }
    fp_backend *be = rc ? NULL : fp_model_backend(m);
    float *p = rc ? NULL : fp_model_backend_params(m), *g = rc ? NULL : fp_model_backend_grads(m);
    fp_dtype dt = FP_DT_F32;
    void *low = p ? fp_backend_cuda_weight_copy_of(be, p, &dt) : NULL;
    if (!tap_ok(!rc && low && dt == want_dt && !fp_backend_cuda_weight_copy_valid(be),
                "%s: handing the device weights out registers a %s copy, not yet valid%s", policy, fp_dtype_name(want_dt),
                rc ? fp_error_message() : "")) {
        tap_skip(3, "no weight copy");
        fp_model_free(m);
        return;
    }
    size_t nt = fp_model_tensor_count(m), ns = 0;
    fp_cuda_segment *segs = calloc(nt, sizeof *segs);
    for (size_t i = 0; i < nt; i++) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        if (t->is_param)
            segs[ns++] = (fp_cuda_segment){p + t->offset, g + t->offset, NULL,
                                           fp_backend_cuda_weight_copy_at(be, p + t->offset), t->numel, 1};
    }
    rc = fp_cuda_sgd_step(segs, ns, 0.05, 0.0, 5e-4, 0, 1, dt, fp_backend_cuda_stream(be));
    free(segs);
    if (!rc)
        fp_backend_cuda_weight_copy_written(be);
    const char *bad = NULL;
    tap_ok(!rc && fp_backend_cuda_weight_copy_valid(be) && copy_is_cast(m, be, p, dt, &bad),
           "%s: after the SGD step the copy is the cast of the new fp32 weights, bit for bit, each tensor 256-byte "
           "aligned (%zu values)%s%s", policy, fp_model_num_params(m), bad ? "; differs: " : "", bad ? bad : "");

    /* The same logits reading the copy as casting the weights again (the forward keeps it valid). */
    float *l1 = malloc(N * CLASSES * sizeof(float)), *l2 = malloc(N * CLASSES * sizeof(float));
    const float *lg = NULL;
    rc = fp_model_forward(m, &lg, x, N, FP_MODE_EVAL);
    if (!rc)
        memcpy(l1, lg, N * CLASSES * sizeof(float));
    int kept = !rc && fp_backend_cuda_weight_copy_valid(be);
    fp_backend_cuda_weight_copy_invalidate(be);
    rc = rc ? rc : fp_model_forward(m, &lg, x, N, FP_MODE_EVAL);
    if (!rc)
        memcpy(l2, lg, N * CLASSES * sizeof(float));
    tap_ok(!rc && kept && memcmp(l1, l2, N * CLASSES * sizeof(float)) == 0,
           "%s: eval logits reading the copy equal those casting the weights, bit for bit; the forward kept it valid%s",
           policy, rc ? fp_error_message() : "");
    fp_backend_cuda_weight_copy_written(be);   /* valid again (nothing wrote the weights since the step) */

    /* A host write of the weights: uploaded at the next forward, the copy is dropped from use. */
    float *hp = fp_model_params(m);
    if (hp)
        hp[0] += 1.0f;
    rc = !hp ? FP_EINTERNAL : fp_model_forward(m, &lg, x, N, FP_MODE_EVAL);
    tap_ok(!rc && !fp_backend_cuda_weight_copy_valid(be), "%s: a host write of the weights invalidates the copy%s",
           policy, rc ? fp_error_message() : "");
    free(l1);
    free(l2);
    fp_model_free(m);
}

/* An arm of the policy on the GPU: after a step (its optimizer writes the copy) the copy is valid and the
 * cast of its weights. */
static void arm_copy(const char *policy, float *x, int *labels)
{
    fp_arm_config ac;
    gtu_arm_config(&ac, "tinynet", CLASSES, SIZE, 16, 11, policy, 0);
    fp_arm *a = NULL;
    int rc = fp_arm_create(&a, &ac);
    fp_batch b = {N, SIZE, x, labels, 0, 0};
    fp_arm_step_result r;
    for (int s = 0; s < 2 && !rc; s++)
        rc = fp_arm_step(a, &b, &r);
    fp_model *m = rc ? NULL : fp_arm_model(a);
    fp_backend *be = m ? fp_model_backend(m) : NULL;
    /* the master weights the copy is registered for: asking marks the copy stale, the next update writes it */
    const float *p = be ? fp_model_backend_params(m) : NULL;
    int tries = 0;
    do   /* until a step updates (the scaler may skip the first ones) */
        rc = rc ? rc : fp_arm_step(a, &b, &r);
    while (!rc && r.skipped && ++tries < 8);
    fp_dtype dt = FP_DT_F32;
    int valid = be && fp_backend_cuda_weight_copy_valid(be);
    const char *bad = NULL;
    void *low = be && p ? fp_backend_cuda_weight_copy_of(be, p, &dt) : NULL;
    tap_ok(!rc && !r.skipped && valid && low && copy_is_cast(m, be, p, dt, &bad),
           "%s arm: after a step its optimizer has written the %s copy, the cast of the weights bit for bit%s", policy,
           fp_dtype_name(dt), rc ? fp_error_message() : !valid ? " (not valid: trainer/run/arm_device_optim.c writes it)" : "");
    fp_arm_free(a);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    tap_plan(2 * (4 + 1));
    float *x = gtu_images((size_t)N * SIZE * SIZE * 3, 0x51ED270Bu);
    int *labels = gtu_labels(N, CLASSES);
    const char *pols[2] = {"fp16", "bf16"};
    for (int k = 0; k < 2; k++) {
        model_copy(pols[k], x, labels);
        arm_copy(pols[k], x, labels);
    }
    free(x);
    free(labels);
#endif
    return tap_done();
}
