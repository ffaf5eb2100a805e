/* test_arm.c — the arm (trainer/run/arm.c) on tinynet at 32x32, batch 8: an fp32 step is bit-identical to
 * the model's own train step + the optimizer; loss falls when overfitting a batch; the fp16 scaler skips
 * an overflowing step, names the first layer (backward order) and halves the scale; `half` keeps fp16
 * values; NaN loss without a scaler reports divergence; evaluation and memory accounting add up; the
 * forward and update hooks run where they say, and an update hook stepping the optimizer in parts
 * gives the plain step's parameters bit for bit. */
#include "config.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "data_testutil.h"
#include "error.h"
#include "tap.h"
#include "trainer/run/arm.h"
#include "trainer/layers.h"

#define S 32
#define B 8

static fp_dataset *ds;
static float images[B * S * S * 3];
static int32_t labels[B];

static fp_batch batch_at(int64_t first) { return dt_batch(ds, first, B, S, images, labels); }

static void cfg_tiny(fp_arm_config *c, const char *policy)
{
    fp_arm_config_default(c);
    c->model = "tinynet";
    c->policy = policy;
    c->num_classes = 10;
    c->image_size = S;
    c->seed = 7;
}

/* Hooks: the forward one counts its calls; the update one steps the optimizer in 3 parts, backwards. */
static int fwd_calls, upd_calls;
static int count_forward(void *ctx, fp_arm *a, const fp_batch *b)
{
    (void)ctx;
    (void)a;
    (void)b;
    fwd_calls++;
    return FP_OK;
}
static int step_in_parts(void *ctx, fp_arm *a, fp_optim *opt)
{
    (void)ctx;
    (void)a;
    size_t n = fp_optim_size(opt), k = n / 3;
    fp_optim_step_part(opt, 2 * k, n);
    fp_optim_step_part(opt, k, 2 * k);
    fp_optim_step_part(opt, 0, k);
    upd_calls++;
    return FP_OK;
}

static int is_fp16_exact(const float *x, size_t n)
{
    float *t = malloc(n * sizeof *t);
    fp_round_to_dtype_copy(t, x, n, FP_DT_F16);
    int same = memcmp(t, x, n * sizeof *t) == 0;
    free(t);
    return same;
}

int main(void)
{
    fp_data_opts o;
    fp_data_opts_default(&o);
    o.image_size = S;
    if (fp_dataset_open(&ds, "synthetic:200", &o)) {
        tap_skip_all("cannot open the synthetic dataset");
    }
    fp_arm_config c;
    fp_arm *a = NULL;

    /* bad choices list the valid ones */
    cfg_tiny(&c, "fp17");
    tap_ok(fp_arm_create(&a, &c) == FP_EINVAL && strstr(fp_error_message(), "fp16-noscale"),
           "unknown policy: FP_EINVAL listing the policies (%s)", fp_error_message());
    cfg_tiny(&c, "fp32");
    c.model = "resnet19";
    tap_ok(fp_arm_create(&a, &c) == FP_EINVAL && strstr(fp_error_message(), "resnet18"),
           "unknown model: FP_EINVAL listing the models (%s)", fp_error_message());
    cfg_tiny(&c, "fp32");
    c.weights = "/nonexistent/w.safetensors";
    tap_ok(fp_arm_create(&a, &c) < 0 && strstr(fp_error_message(), "/nonexistent/w.safetensors"),
           "missing weights file: error names it (%s)", fp_error_message());

    /* fp32: one arm step == zero_grad + fp_model_train_step + fp_optim_step, bit for bit */
    cfg_tiny(&c, "fp32");
    tap_ok(fp_arm_create(&a, &c) == FP_OK, "create tinynet fp32 arm");
    fp_model_config mc = {"tinynet", 10, S, 0, 7, 0};
    fp_model *m = NULL;
    fp_model_create(&m, &mc);
    size_t np = fp_model_num_params(m);
    tap_ok(np == fp_model_num_params(fp_arm_model(a)) &&
               memcmp(fp_model_params(m), fp_model_params(fp_arm_model(a)), np * 4) == 0,
           "same seed, same initial parameters");
    fp_optim_param *ps = calloc(fp_model_tensor_count(m), sizeof *ps);
    size_t k = 0;
    for (size_t i = 0; i < fp_model_tensor_count(m); i++) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        if (t->is_param)
            ps[k++] = (fp_optim_param){t->name, fp_model_tensor_data(m, t), fp_model_tensor_grad(m, t), t->numel, 1};
    }
    fp_optim *opt = NULL;
    fp_optim_new(&opt, &c.optim, ps, k);
    int same = 1;
    fp_arm_step_result r;
    for (int s = 0; s < 3; s++) {
        fp_batch b = batch_at(s * B);
        float loss = 0;
        fp_model_zero_grad(m);
        fp_model_train_step(m, &loss, NULL, NULL, b.images, (const int *)b.labels, B);
        fp_optim_step(opt, 0.1);
        if (fp_arm_step(a, &b, &r) || r.loss != loss || r.skipped || r.scale != 1.0f || r.lr != 0.1)
            same = 0;
    }
    tap_ok(same && memcmp(fp_model_params(m), fp_model_params(fp_arm_model(a)), np * 4) == 0,
           "3 fp32 arm steps are bit-identical to model train step + SGD");
    tap_is_int(fp_arm_iteration(a), 3, "iteration counts the steps");
    fp_arm_mem mem;
    fp_arm_memory(a, &mem);
    tap_ok(mem.optim_state == np * 4 && mem.current >= mem.model.params + mem.model.grads + mem.optim_state &&
               mem.peak >= mem.current && mem.model.activations > 0,
           "memory: momentum state %zu bytes, current %zu <= peak %zu", mem.optim_state, mem.current, mem.peak);
    free(ps);
    fp_optim_free(opt);
    fp_model_free(m);

    /* overfitting one batch: the loss falls */
    fp_batch b0 = batch_at(100);
    float first = NAN, last = NAN;
    for (int s = 0; s < 25; s++) {
        fp_arm_step(a, &b0, &r);
        if (s == 0)
            first = r.loss;
        last = r.loss;
    }
    tap_ok(last < 0.5f * first, "overfitting one batch: loss %.4f -> %.4f", first, last);

    /* evaluation */
    fp_arm_eval_acc acc;
    int rc = fp_arm_evaluate(a, ds, FP_SPLIT_VAL, 16, 1, 0, &acc);
    double vl, t1, t5;
    fp_arm_eval_result(&acc, &vl, &t1, &t5);
    tap_ok(rc == FP_OK && acc.n == 40 && acc.batches == 3 && isfinite(vl) && t1 >= 0 && t5 >= t1 && t5 <= 1,
           "evaluate the 40 validation images (3 batches): loss %.3f top-1 %.3f top-5 %.3f", vl, t1, t5);
    rc = fp_arm_evaluate(a, ds, FP_SPLIT_VAL, 16, 0, 2, &acc);
    tap_ok(rc == FP_OK && acc.n == 32 && acc.batches == 2, "max_batches 2 evaluates 32 images");
    fp_arm_free(a);

    /* schedules: the step's lr is the schedule's */
    cfg_tiny(&c, "fp32");
    fp_lr_schedule_default(&c.lr, FP_LR_COSINE, 0.05);
    c.lr.t_max = 4;
    c.lr.warmup_steps = 2;
    fp_arm_create(&a, &c);
    int lr_ok = 1;
    for (int s = 0; s < 5; s++) {
        fp_batch b = batch_at(s * B);
        fp_arm_step(a, &b, &r);
        lr_ok &= r.lr == fp_lr_at(&c.lr, s) && r.iteration == s;
    }
    tap_ok(lr_ok, "warmup + cosine: each step uses fp_lr_at(t)");
    fp_arm_free(a);

    /* fp16 with an absurd initial scale: the gradient overflows, the step is skipped */
    cfg_tiny(&c, "fp16");
    c.init_scale = 0x1p100f;
    tap_ok(fp_arm_create(&a, &c) == FP_OK, "create tinynet fp16 arm with scale 2^100");
    float *before = malloc(np * 4);
    memcpy(before, fp_model_params(fp_arm_model(a)), np * 4);
    fp_batch b = batch_at(0);
    rc = fp_arm_step(a, &b, &r);
    const fp_tensor_info *fcb = fp_model_find_tensor(fp_arm_model(a), "fc.bias");
    tap_ok(rc == FP_OK && r.skipped && r.loss_finite, "fp16: overflowing gradient -> step skipped, loss finite");
    tap_ok(fcb && r.nonfinite_layer == fcb->layer && r.nonfinite_tensor && strcmp(r.nonfinite_tensor, "fc.bias") == 0,
           "first non-finite gradient in backward order: fc (%s)", r.nonfinite_tensor ? r.nonfinite_tensor : "none");
    tap_ok(r.scale == 0x1p100f && r.next_scale == 0x1p99f && r.scale_changed, "scale halved: 2^100 -> 2^99");
    tap_ok(memcmp(before, fp_model_params(fp_arm_model(a)), np * 4) == 0 && fp_optim_get_step(fp_arm_optim(a)) == 0,
           "skipped: parameters unchanged, optimizer step counter 0");
    tap_is_int(fp_arm_iteration(a), 1, "a skipped step still advances the iteration (scheduler.step())");
    fp_arm_free(a);
    free(before);

    /* fp16 with the default scale trains normally */
    cfg_tiny(&c, "fp16");
    fp_arm_create(&a, &c);
    int ok16 = 1;
    for (int s = 0; s < 3; s++) {
        fp_batch bb = batch_at(s * B);
        ok16 &= fp_arm_step(a, &bb, &r) == FP_OK && !r.skipped && r.loss_finite && r.scale == 65536.0f;
    }
    tap_ok(ok16, "fp16 default scaler: 3 clean steps at scale 65536");
    fp_arm_free(a);

    /* half: weights and optimizer state stay fp16 values */
    cfg_tiny(&c, "half");
    fp_arm_create(&a, &c);
    for (int s = 0; s < 2; s++) {
        fp_batch bb = batch_at(s * B);
        fp_arm_step(a, &bb, &r);
    }
    fp_optim_state st;
    fp_optim_state_at(fp_arm_optim(a), 0, &st);
    tap_ok(is_fp16_exact(fp_model_params(fp_arm_model(a)), np) && is_fp16_exact(st.data, st.n),
           "half: parameters and momentum are fp16-representable after steps");
    fp_arm_memory(a, &mem);
    tap_ok(mem.optim_state == np * 2, "half: optimizer state counted at 2 bytes (%zu)", mem.optim_state);
    fp_arm_free(a);

    /* NaN loss without a scaler: diverged, nothing updated, no crash */
    const char *pols[2] = {"fp32", "fp16-noscale"};
    for (int p = 0; p < 2; p++) {
        cfg_tiny(&c, pols[p]);
        fp_lr_schedule_default(&c.lr, FP_LR_CONSTANT, 1e10);
        fp_arm_create(&a, &c);
        int steps = 0, div = 0;
        for (; steps < 10 && !div; steps++) {
            fp_batch bb = batch_at(steps * B);
            if (fp_arm_step(a, &bb, &r))
                break;
            div = r.diverged;
        }
        tap_ok(div && !r.loss_finite && fp_arm_iteration(a) == steps - 1,
               "%s, lr 1e10: diverged at step %d (loss %g), the diverged step not counted", pols[p], steps, r.loss);
        fp_arm_free(a);
    }

    /* hooks: an arm stepping in parts through its update hook = a plain arm, bit for bit */
    fp_arm *h = NULL;
    cfg_tiny(&c, "fp32");
    fp_arm_create(&a, &c);
    fp_arm_create(&h, &c);
    fp_arm_set_forward_hook(h, count_forward, NULL);
    int hooked_ok = 1;
    for (int s = 0; s < 3; s++) {
        fp_batch bb = batch_at(s * B);
        fp_arm_step(a, &bb, &r);
        if (s != 1)   /* the update hook for one step only at a time */
            hooked_ok &= fp_arm_set_update_hook(h, step_in_parts, NULL) == FP_OK;
        fp_arm_step(h, &bb, &r);
    }
    size_t nph = fp_model_num_params(fp_arm_model(h));
    tap_ok(hooked_ok && fwd_calls == 3 && upd_calls == 2, "forward hook every step (%d), update hook once per setting (%d)",
           fwd_calls, upd_calls);
    tap_ok(memcmp(fp_model_params(fp_arm_model(a)), fp_model_params(fp_arm_model(h)), nph * sizeof(float)) == 0,
           "the update hook stepping in parts gives the plain arm's parameters bit for bit");
    fp_arm_free(a);
    fp_arm_free(h);
    cfg_tiny(&c, "half");
    fp_arm_create(&h, &c);
    tap_is_int(fp_arm_set_update_hook(h, step_in_parts, NULL), FP_EINVAL, "half: no update hook (%s)",
               fp_error_message());
    fp_arm_free(h);

    fp_dataset_close(ds);
    return tap_done();
}
