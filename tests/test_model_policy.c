/* test_model_policy.c — the model under the precision policies (fp_model_set_policy) against the
 * PyTorch fp32 fixtures of test_model_reference.c, with tolerances derived from each format's unit
 * roundoff; fp32 bit-identical to the plain model; rounding really happens and is the format's;
 * 16-bit storage halves the saved activations; overflow and the GradScaler; `half` loses updates. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "numfmt.h"
#include "safetensors.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/model.h"

#ifndef FIXTURE_DIR
#define FIXTURE_DIR "tests/fixtures"
#endif

#define NB 4
#define NC 10
#define HW 32

typedef struct {
    const char *file;
    int bottleneck, width;
    fp_st *st;
    float x[NB * HW * HW * 3];
    int labels[NB];
    float logits[NB * NC], loss;
} fixture;

static int load_fixture(fixture *f)
{
    char path[512];
    snprintf(path, sizeof path, "%s/model/%s", FIXTURE_DIR, f->file);
    if (fp_st_open(&f->st, path) != FP_OK)
        return -1;
    static float nchw[NB * 3 * HW * HW];
    float lf[NB];
    int64_t xs[4] = {NB, 3, HW, HW}, ls[1] = {NB}, gs[2] = {NB, NC};
    int rc = fp_st_read_f32(f->st, "input", nchw, xs, 4);
    rc = rc ? rc : fp_st_read_f32(f->st, "labels", lf, ls, 1);
    rc = rc ? rc : fp_st_read_f32(f->st, "logits", f->logits, gs, 2);
    rc = rc ? rc : fp_st_read_f32(f->st, "loss", &f->loss, NULL, 0);
    if (rc)
        return rc;
    for (int b = 0; b < NB; b++)
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < HW; y++)
                for (int xx = 0; xx < HW; xx++)
                    f->x[((b * HW + y) * HW + xx) * 3 + c] = nchw[((b * 3 + c) * HW + y) * HW + xx];
    for (int i = 0; i < NB; i++)
        f->labels[i] = (int)lf[i];
    return 0;
}

static fp_model *make(const fixture *f, const char *policy)
{
    static const int layers[4] = {1, 1, 1, 1};
    fp_model *m = NULL;
    if (fp_resnet_create(&m, f->file, f->bottleneck, layers, f->width, NC, HW, 7))
        return NULL;
    if (fp_model_load_st(m, f->st, 1) || (policy && fp_model_set_policy(m, fp_policy_find(policy)))) {
        fp_model_free(m);
        return NULL;
    }
    return m;
}

/* forward + loss + backward; logits copied out */
static int step(fp_model *m, const fixture *f, float *logits, float *loss, float scale)
{
    const float *lg;
    float dl[NB * NC];
    int rc = fp_model_forward(m, &lg, f->x, NB, FP_MODE_TRAIN);
    if (rc)
        return rc;
    memcpy(logits, lg, sizeof dl);
    rc = fp_softmax_xent(loss, dl, NULL, NULL, lg, f->labels, NB, NC);
    for (int i = 0; i < NB * NC; i++)
        dl[i] *= scale;
    fp_model_zero_grad(m);
    return rc ? rc : fp_model_backward(m, dl);
}

/* the PyTorch gradients, OHWI, in the model's parameter layout */
static float *ref_grads(fp_model *m, const fixture *f)
{
    float *g = calloc(fp_model_num_params(m), sizeof(float)), *tmp = malloc(fp_model_num_params(m) * sizeof(float));
    for (size_t k = 0; k < fp_model_tensor_count(m); k++) {
        const fp_tensor_info *t = fp_model_tensor(m, k);
        if (!t->is_param)
            continue;
        char name[256];
        snprintf(name, sizeof name, "grad.%s", t->name);
        if (fp_st_read_f32(f->st, name, tmp, t->shape, t->rank))
            continue;
        if (t->ohwi)
            fp_oihw_to_ohwi(g + t->offset, tmp, (int)t->shape[0], (int)t->shape[1], (int)t->shape[2],
                            (int)t->shape[3]);
        else
            memcpy(g + t->offset, tmp, t->numel * sizeof(float));
    }
    free(tmp);
    return g;
}

/* depth: conv / linear layers on the longest path (the main branch) */
static int depth_of(fp_model *m)
{
    int d = 0;
    for (int i = 0; i < fp_model_layer_count(m); i++) {
        const fp_layer_info *li = fp_model_layer(m, i);
        if ((li->type == FP_LAYER_CONV && !strstr(li->name, "downsample")) || li->type == FP_LAYER_LINEAR)
            d++;
    }
    return d;
}

typedef struct {
    double logits, loss, grads, grad_worst;
} errs;

/* The fp32 model's own sensitivity: weights perturbed by a relative u (random signs) -> relative L2
 * change of the logits and of the gradients, divided by u: an empirical condition number kappa.
 * Batch-4 batchnorm over 1x1 maps (the last stage at 32x32) makes the backward ill-conditioned, and
 * no format can do better than kappa * u there. */
static void sensitivity(fixture *f, double u, double *kf, double *kb)
{
    fp_model *a = make(f, NULL), *b = make(f, NULL);
    size_t np = fp_model_num_params(b);
    float *p = fp_model_params(b);
    unsigned s = 99;
    for (size_t i = 0; i < np; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] *= (float)(1.0 + ((s >> 31) ? u : -u));
    }
    float la[NB * NC], lb[NB * NC], l;
    step(a, f, la, &l, 1.0f);
    step(b, f, lb, &l, 1.0f);
    *kf = tu_rel_l2(lb, la, NB * NC) / u;
    *kb = tu_rel_l2(fp_model_grads(b), fp_model_grads(a), np) / u;
    fp_model_free(a);
    fp_model_free(b);
}

/* One step under the policy, with PyTorch's GradScaler when the policy has one: start at 2^16,
 * skip and halve while unscale_and_check finds Inf / NaN. Returns the scale used. */
static float scaled_step(fp_model *m, fixture *f, float *logits, float *loss, int *rc)
{
    fp_grad_scaler gs;
    fp_grad_scaler_init(&gs, fp_model_policy(m)->scaling);
    for (int tries = 0; tries < 40; tries++) {
        *rc = step(m, f, logits, loss, gs.scale);
        int found = fp_unscale_and_check(fp_model_grads(m), fp_model_num_params(m), 1.0f / gs.scale);
        if (*rc || !found)
            return gs.scale;
        fp_grad_scaler_update(&gs, found);
    }
    *rc = -1;
    return gs.scale;
}

static void check_policy(fixture *f, const char *policy, double u, double k_fwd, double k_bwd, errs *out)
{
    fp_model *m = make(f, policy);
    tap_ok(m != NULL, "%s %s: build, load, set policy (%s)", f->file, policy, m ? "ok" : fp_error_message());
    if (!m)
        return;
    float logits[NB * NC], loss;
    int rc;
    float scale = scaled_step(m, f, logits, &loss, &rc);
    tap_ok(rc == FP_OK, "%s %s: forward + backward (loss scale %g)", f->file, policy, scale);
    double L = depth_of(m), sq = sqrt(L), kf, kb;
    sensitivity(f, u, &kf, &kb);
    kf = fmax(kf, 1.0);
    kb = fmax(kb, 1.0);
    errs e = {tu_rel_l2(logits, f->logits, NB * NC), fabs(loss - f->loss) / f->loss, 0, 0};
    float *ref = ref_grads(m, f);
    e.grads = tu_rel_l2(fp_model_grads(m), ref, fp_model_num_params(m));
    free(ref);
    /* Error model: a conv / linear rounds its inputs (and, 16-bit, its output) with relative error
     * <= u each; independent roundings add in quadrature over the L layers of the path, and the
     * network amplifies a relative perturbation u of its weights by kappa (measured above, >= 1). So
     * the logits' relative L2 error <= k_fwd * kappa_f * u * sqrt(L) (k_fwd: roundings per layer,
     * with margin); the loss, a smooth function of the logits, gets the same bound; the gradients
     * (backward rounds dy, x, dx and dW again) <= k_bwd * kappa_b * u * sqrt(L). */
    double tf = k_fwd * kf * u * sq, tb = k_bwd * kb * u * sq;
    tap_ok(e.logits <= tf, "%s %s: logits rel L2 %.3g <= %g * kappa %.2g * u * sqrt(L) = %.3g (u = %g, L = %g)",
           f->file, policy, e.logits, k_fwd, kf, tf, u, L);
    tap_ok(e.loss <= tf, "%s %s: loss %.6f vs %.6f, rel %.3g <= %.3g", f->file, policy, loss, f->loss, e.loss, tf);
    tap_ok(e.grads <= tb, "%s %s: all gradients rel L2 %.3g <= %g * kappa %.3g * u * sqrt(L) = %.3g", f->file,
           policy, e.grads, k_bwd, kb, tb);
    *out = e;
    fp_model_free(m);
}

/* fp32 policy: bit-identical to the model that never saw a policy, also after a round trip */
static void check_fp32_identity(fixture *f)
{
    fp_model *a = make(f, NULL), *b = make(f, "fp16");
    if (!a || !b) {
        tap_ok(0, "build");
        return;
    }
    float la[NB * NC], lb[NB * NC], loss_a, loss_b;
    step(b, f, lb, &loss_b, 1.0f);   /* plans and scratch of fp16 first */
    int rc = fp_model_set_policy(b, fp_policy_find("fp32"));
    rc |= fp_model_load_st(b, f->st, 1);   /* the fp16 TRAIN forward moved the running statistics */
    rc |= step(a, f, la, &loss_a, 1.0f) | step(b, f, lb, &loss_b, 1.0f);
    size_t np = fp_model_num_params(a);
    tap_ok(rc == 0 && memcmp(la, lb, sizeof la) == 0 && loss_a == loss_b &&
               memcmp(fp_model_grads(a), fp_model_grads(b), np * sizeof(float)) == 0 &&
               memcmp(fp_model_buffers(a), fp_model_buffers(b), fp_model_num_buffers(a) * sizeof(float)) == 0,
           "%s: fp32 policy (after fp16) bit-identical to the plain model: logits, loss, gradients, running stats",
           f->file);
    fp_model_mem ma, mb;
    fp_model_memory(a, &ma);
    fp_model_memory(b, &mb);
    tap_ok(ma.saved == mb.saved && mb.weight_copy == 0, "%s: fp32 policy: same saved bytes, no weight copy", f->file);
    fp_model_free(a);
    fp_model_free(b);
}

/* rounding really happens and is the format's: every layer output stored in fp16; logits differ
 * from fp32; conv1's stored output is bit for bit fp16(conv(fp16(x), fp16(w))) in fp32 accumulation */
static void check_rounding(fixture *f)
{
    fp_model *m = make(f, "fp16"), *r = make(f, NULL);
    float lm[NB * NC], lr[NB * NC], l1, l2;
    step(m, f, lm, &l1, 1.0f);
    step(r, f, lr, &l2, 1.0f);
    tap_ok(memcmp(lm, lr, sizeof lm) != 0, "%s fp16: logits differ from fp32 (rel L2 %.3g)", f->file,
           tu_rel_l2(lm, lr, NB * NC));
    int all16 = 1, repr = 1;
    float *buf = NULL;
    for (int i = 0; i < fp_model_layer_count(m); i++) {
        fp_dtype d;
        int cnt = fp_model_layer_output(m, i, NULL, 0, &d);
        buf = realloc(buf, (size_t)cnt * sizeof(float));
        fp_model_layer_output(m, i, buf, (size_t)cnt, &d);
        all16 &= d == FP_DT_F16;
        for (int k = 0; k < cnt; k++)
            repr &= fp_f16_to_f32(fp_f32_to_f16(buf[k])) == buf[k] || isnan(buf[k]);
    }
    tap_ok(all16 && repr, "%s fp16: all %d layer outputs stored as fp16, every value fp16-representable", f->file,
           fp_model_layer_count(m));
    /* conv1 by hand */
    const fp_layer_info *c1 = fp_model_layer(m, 0);
    const fp_tensor_info *wt = fp_model_find_tensor(m, "conv1.weight");
    size_t nx = (size_t)NB * HW * HW * 3, ny = (size_t)NB * c1->out.h * c1->out.w * c1->out.c;
    float *xr = malloc(nx * sizeof(float)), *wr = malloc(wt->numel * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    fp_round_to_dtype_copy(xr, f->x, nx, FP_DT_F16);
    fp_round_to_dtype_copy(wr, fp_model_tensor_data(m, wt), wt->numel, FP_DT_F16);
    fp_conv_params cp = {3, c1->out.c, c1->k, c1->k, c1->stride, c1->pad};
    fp_dims xd = {NB, HW, HW, 3};
    fp_conv_forward(y, xr, xd, wr, &cp, NULL);
    fp_round_to_dtype(y, ny, FP_DT_F16);
    fp_model_layer_output(m, 0, got, ny, NULL);
    tap_ok(memcmp(y, got, ny * sizeof(float)) == 0, "%s fp16: conv1 output = fp16(conv(fp16 x, fp16 w)) bit for bit",
           f->file);
    free(xr);
    free(wr);
    free(y);
    free(got);
    free(buf);
    fp_model_free(m);
    fp_model_free(r);
}

/* 16-bit storage: the activations saved for backward take about half the bytes of fp32 (the input
 * image, BN mean / invstd and max-pool argmax stay 4 bytes) */
static void check_memory(void)
{
    fp_model_config cfg = {"resnet18", 10, 64, 16, 3, 0};
    fp_model *a, *b;
    if (fp_model_create(&a, &cfg) || fp_model_create(&b, &cfg)) {
        tap_ok(0, "build resnet18");
        return;
    }
    fp_model_set_policy(b, fp_policy_find("fp16"));
    size_t nx = (size_t)4 * 64 * 64 * 3;
    float *x = calloc(nx, sizeof(float));
    int labels[4] = {1, 2, 3, 4};
    float loss;
    fp_model_train_step(a, &loss, NULL, NULL, x, labels, 4);
    fp_model_train_step(b, &loss, NULL, NULL, x, labels, 4);
    fp_model_mem ma, mb;
    fp_model_memory(a, &ma);
    fp_model_memory(b, &mb);
    double rs = (double)mb.saved / ma.saved, rp = (double)mb.activations_peak / ma.activations_peak;
    double rg = (double)mb.act_grads_peak / ma.act_grads_peak;
    tap_ok(rs >= 0.5 && rs <= 0.6, "resnet18 64px batch 4: saved activations fp16 / fp32 = %.3f (%zu / %zu) in [0.5, 0.6]",
           rs, mb.saved, ma.saved);
    tap_ok(rp >= 0.5 && rp <= 0.6, "activation arenas peak fp16 / fp32 = %.3f in [0.5, 0.6]", rp);
    tap_ok(rg >= 0.5 && rg <= 0.6, "activation gradients peak fp16 / fp32 = %.3f in [0.5, 0.6]", rg);
    tap_ok(mb.weight_copy == fp_model_num_params(b) * sizeof(float) && mb.casts > 0 && ma.casts == 0 &&
               mb.params == ma.params,
           "fp16: weight copy %zu bytes and cast scratch %zu bytes reported; parameters stay fp32 (%zu bytes)",
           mb.weight_copy, mb.casts, mb.params);
    free(x);
    fp_model_free(a);
    fp_model_free(b);
}

/* overflow: fp16 without scaling overflows to Inf on large activations; a huge loss scale overflows
 * the fp16 gradients, fp_unscale_and_check finds it and the scaler halves the scale (step skipped);
 * at a normal scale nothing overflows and the unscaled gradients match the unscaled run */
static void check_overflow(fixture *f)
{
    fp_model *m = make(f, "fp16-noscale");
    float lg[NB * NC], loss;
    const fp_tensor_info *w = fp_model_find_tensor(m, "conv1.weight");
    float *wd = fp_model_tensor_data(m, w);
    for (size_t i = 0; i < w->numel; i++)
        wd[i] *= 3e4f;
    step(m, f, lg, &loss, 1.0f);
    float c1[NB * HW * HW * 8];   /* conv1 of width <= 8 at stride 2: NB*16*16*width values */
    fp_dtype d;
    int cnt = fp_model_layer_output(m, 0, c1, sizeof c1 / sizeof c1[0], &d);
    int ninf = 0;
    for (int i = 0; i < cnt; i++)
        ninf += isinf(c1[i]) != 0;
    int nonfinite = 0;
    for (int i = 0; i < NB * NC; i++)
        nonfinite += !isfinite(lg[i]);
    tap_ok(ninf > 0 && (nonfinite > 0 || !isfinite(loss)),
           "%s fp16-noscale, conv1 weights x3e4: %d conv1 outputs overflow to Inf, %d logits non-finite, loss %g",
           f->file, ninf, nonfinite, loss);
    fp_model_free(m);

    m = make(f, "fp16");
    fp_model *u = make(f, "fp16");
    size_t np = fp_model_num_params(m);
    fp_grad_scaler s;
    fp_grad_scaler_init(&s, FP_SCALE_DYNAMIC);
    s.scale = 0x1p40f;
    step(m, f, lg, &loss, s.scale);
    int found = fp_unscale_and_check(fp_model_grads(m), np, 1.0f / s.scale);
    int skipped = found;   /* the caller skips optimizer.step() */
    int changed = fp_grad_scaler_update(&s, found);
    tap_ok(found && skipped && changed && s.scale == 0x1p39f,
           "%s fp16, scale 2^40: gradients overflow, unscale_and_check reports it, scale halves to 2^39", f->file);
    /* PyTorch's start, 2^16: the scaler skips and halves until the scaled gradients fit in fp16 */
    int skips = 0;
    float used = scaled_step(m, f, lg, &loss, &found);
    for (float sc = 65536.0f; sc > used; sc *= 0.5f)
        skips++;
    step(m, f, lg, &loss, used);
    found = fp_unscale_and_check(fp_model_grads(m), np, 1.0f / used);
    step(u, f, lg, &loss, 1.0f);
    double e = tu_rel_l2(fp_model_grads(m), fp_model_grads(u), np);
    /* scaled and unscaled fp16 runs differ only by the roundings of small gradients (scaling by a
     * power of two is exact where nothing under- or overflows): rel L2 <= 8 u sqrt(L), u = 2^-11 */
    double tol = 8 * 0x1p-11 * sqrt(depth_of(m));
    tap_ok(!found && used >= 1024.0f && e <= tol,
           "%s fp16: scaler from 2^16 settles at %g after %d skipped steps; at that scale no overflow, unscaled "
           "gradients vs the unscaled run rel L2 %.3g <= %.3g", f->file, used, skips, e, tol);
    fp_model_free(m);
    fp_model_free(u);
}

/* `half`: fp16 master weights lose updates below half an ulp that fp32 master weights keep */
static void check_half(fixture *f)
{
    fp_model *m = make(f, "half");
    if (!m) {
        tap_ok(0, "half: build");
        return;
    }
    size_t np = fp_model_num_params(m);
    float *p = fp_model_params(m), *g = fp_model_grads(m);
    int repr = 1;
    for (size_t i = 0; i < np; i++)
        repr &= fp_f16_to_f32(fp_f32_to_f16(p[i])) == p[i];
    tap_ok(repr, "half: set_policy rounds the parameters to fp16 (model.half())");
    float *master = malloc(np * sizeof(float)), *p0 = malloc(np * sizeof(float));
    memcpy(master, p, np * sizeof(float));
    memcpy(p0, p, np * sizeof(float));
    const float lr = 1e-4f;
    float lg[NB * NC], loss;
    int grepr = 1;
    for (int it = 0; it < 3; it++) {
        step(m, f, lg, &loss, 1.0f);
        for (size_t i = 0; i < np; i++) {
            grepr &= fp_f16_to_f32(fp_f32_to_f16(g[i])) == g[i];
            master[i] -= lr * g[i];        /* fp32 master weights (as fp16 with a scaler) */
            p[i] -= lr * g[i];             /* fp16 weights: the update rounded away when < ulp/2 */
        }
        fp_round_to_dtype(p, np, FP_DT_F16);
    }
    size_t lost = 0, moved = 0, nz = 0;
    for (size_t i = 0; i < np; i++) {
        if (g[i] == 0)
            continue;
        nz++;
        lost += p[i] == p0[i] && master[i] != p0[i];
        moved += master[i] != p0[i];
    }
    tap_ok(grepr, "half: parameter gradients are fp16 values");
    tap_ok(lost > 0 && moved > lost, "half: 3 SGD steps lr 1e-4: %zu of %zu weights with nonzero gradient unchanged in "
           "fp16 while fp32 master weights moved (%zu moved)", lost, nz, moved);
    free(master);
    free(p0);
    fp_model_free(m);
}

int main(void)
{
    fixture fx[2] = {{.file = "resnet_basic_w8.safetensors", .bottleneck = 0, .width = 8},
                     {.file = "resnet_bottleneck_w4.safetensors", .bottleneck = 1, .width = 4}};
    for (int i = 0; i < 2; i++) {
        fixture *f = &fx[i];
        if (load_fixture(f)) {
            tap_ok(0, "fixture %s: %s", f->file, fp_error_message());
            continue;
        }
        check_fp32_identity(f);
        /* u: unit roundoff (half the epsilon): tf32 and fp16 2^-11 (10-bit mantissa), bf16 2^-8.
         * tf32 rounds only the conv / linear inputs, fp16 also every stored activation and gradient,
         * bf16 the same with 8x the u: the constants k are the same for fp16 and bf16, smaller for
         * tf32 (fewer roundings). */
        errs et, eh, eb;
        errs en;
        check_policy(f, "tf32", 0x1p-11, 1, 1, &et);
        check_policy(f, "fp16", 0x1p-11, 2, 2, &eh);
        check_policy(f, "bf16", 0x1p-8, 2, 2, &eb);
        check_policy(f, "fp16-noscale", 0x1p-11, 2, 2, &en);
        /* The tolerances are ordered by construction (k * u: tf32 1 * 2^-11 < fp16 2 * 2^-11 < bf16 2 *
         * 2^-8); the measured logits follow. The gradients follow on the well-conditioned BasicBlock
         * fixture; on the bottleneck one (kappa ~ 400) they are dominated by the conditioning. */
        int grads_ordered = i == 1 || (et.grads < eh.grads && eh.grads < eb.grads);
        tap_ok(et.logits < eh.logits && eh.logits < eb.logits && grads_ordered,
               "%s: error order tf32 < fp16 < bf16 (logits %.2g < %.2g < %.2g; gradients %.2g, %.2g, %.2g)", f->file,
               et.logits, eh.logits, eb.logits, et.grads, eh.grads, eb.grads);
        check_rounding(f);
        check_overflow(f);
        check_half(f);
        fp_st_close(f->st);
    }
    check_memory();
    return tap_done();
}
