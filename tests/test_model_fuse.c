/* test_model_fuse.c — fused batchnorm (+ add) + relu (backend.h bn_act_*, trainer/model_fuse.c) on the CPU:
 * the op against the unfused ops (fp32 bit for bit; 16-bit within one extra rounding), a hand-built
 * BN -> RELU / BN -> ADD -> RELU model and a small bottleneck ResNet trained with fusion on and off (fp32:
 * losses, gradients, weights, running statistics bit for bit), a sampled step runs unfused, a backend that
 * refuses (at the query, a forward, a backward) leaves the layer unfused with the same results, bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "numfmt.h"
#include "probe/probe.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/backend.h"
#include "trainer/model.h"

static uint64_t rng = 0x5DEECE66DULL;

static fp_tensor t32(float *p, fp_dims d) { return fp_tensor_of(p, FP_DT_F32, d); }
static fp_tensor vec(float *p, int c) { return t32(p, (fp_dims){1, 1, 1, c}); }

/* ---------------------------------------------------------------- the op against the unfused ops */

/* x, z (n*c, random), gamma, beta: the fused forward + backward and the unfused composition in format dt;
 * fp32 must agree bit for bit, 16-bit y within the double rounding of the unfused path. */
static void op_case(const fp_backend_ops *o, fp_backend *be, fp_dtype dt, int with_add)
{
    enum { N = 3, H = 5, W = 4, C = 6, E = N * H * W * C };
    fp_dims d = {N, H, W, C};
    const char *fmt = dt == FP_DT_F32 ? "fp32" : dt == FP_DT_F16 ? "fp16" : "bf16";
    float x32[E], z32[E], dy32[E], g[C], b[C];
    for (int i = 0; i < E; i++) {
        x32[i] = 2.0f * tu_uniform_pm1(&rng) + 0.3f;
        z32[i] = tu_uniform_pm1(&rng);
        dy32[i] = tu_uniform_pm1(&rng);
    }
    for (int c = 0; c < C; c++) {
        g[c] = 1.0f + 0.5f * tu_uniform_pm1(&rng);
        b[c] = 0.2f * tu_uniform_pm1(&rng);
    }
    size_t eb = (size_t)fp_dtype_bytes(dt);
    unsigned char x[E * 4], z[E * 4], dy[E * 4], yf[E * 4], yu[E * 4], dzf[E * 4], dzu[E * 4], dxf[E * 4], dxu[E * 4];
    fp_tensor X = fp_tensor_of(x, dt, d), Z = fp_tensor_of(z, dt, d), DY = fp_tensor_of(dy, dt, d);
    o->cast(be, X, t32(x32, d));
    o->cast(be, Z, t32(z32, d));
    o->cast(be, DY, t32(dy32, d));
    fp_bn_params p = {0.1f, 1e-5f};
    float rmf[C] = {0}, rvf[C], rmu[C] = {0}, rvu[C], svf[2 * C], svu[2 * C];
    float dgf[C] = {0}, dbf[C] = {0}, dgu[C] = {0}, dbu[C] = {0};
    for (int c = 0; c < C; c++)
        rvf[c] = rvu[c] = 1.0f;
    fp_tensor YF = fp_tensor_of(yf, dt, d), YU = fp_tensor_of(yu, dt, d), ZZ = with_add ? Z : (fp_tensor){0};
    int rc = o->bn_act_forward_train(be, YF, vec(svf, 2 * C), vec(rmf, C), vec(rvf, C), X, ZZ, vec(g, C), vec(b, C),
                                     &p, NULL, 0);
    /* unfused: bn into yu, add z, relu (the model's nodes) */
    rc = rc ? rc : o->bn_forward_train(be, YU, vec(svu, 2 * C), vec(rmu, C), vec(rvu, C), X, vec(g, C), vec(b, C), &p);
    float bn32[E];   /* the fp32 batchnorm output, for the 16-bit bound */
    o->cast(be, t32(bn32, d), YU);
    if (with_add)
        rc = rc ? rc : o->add(be, YU, YU, Z);
    rc = rc ? rc : o->relu_forward(be, YU, YU);
    tap_ok(rc == FP_OK, "%s %s: fused and unfused forward run (%s)", fmt, with_add ? "bn+add+relu" : "bn+relu",
           rc ? fp_error_message() : "");
    tap_ok(!memcmp(svf, svu, sizeof svf) && !memcmp(rmf, rmu, sizeof rmf) && !memcmp(rvf, rvu, sizeof rvf),
           "%s: saved and running statistics bit for bit", fmt);
    float a[E], u[E];
    o->cast(be, t32(a, d), YF);
    o->cast(be, t32(u, d), YU);
    if (dt == FP_DT_F32) {
        tap_ok(!memcmp(a, u, sizeof a), "fp32: y bit for bit");
    } else {
        /* unit roundoff r of the format: fused = round(v), unfused = round(round(bn) + z) (or round(bn)
         * relu'd): |difference| <= r*|bn| (the extra rounding) + 2r*|y| (the two final roundings), plus
         * the smallest subnormal; relu can only shrink it */
        double r = dt == FP_DT_F16 ? 0x1p-11 : 0x1p-8, tiny = dt == FP_DT_F16 ? 0x1p-24 : 0x1p-133;
        int bad = 0, differ = 0;
        for (int i = 0; i < E; i++) {
            double bound = r * fabs(bn32[i]) + 2 * r * fabs(u[i]) + tiny;
            bad += fabs((double)a[i] - u[i]) > bound;
            differ += a[i] != u[i];
        }
        tap_ok(bad == 0, "%s: y within one extra rounding of the unfused ops (%d outside, %d differ)", fmt, bad,
               differ);
    }
    /* backward, from the unfused y (so both mask alike): dz and dx with accumulate 1 onto a start value */
    fp_tensor DZF = fp_tensor_of(dzf, dt, d), DZU = fp_tensor_of(dzu, dt, d);
    fp_tensor DXF = fp_tensor_of(dxf, dt, d), DXU = fp_tensor_of(dxu, dt, d);
    float start[E];
    for (int i = 0; i < E; i++)
        start[i] = 0.25f * tu_uniform_pm1(&rng);
    o->cast(be, DZF, t32(start, d));
    o->cast(be, DZU, t32(start, d));
    o->cast(be, DXF, t32(start, d));
    o->cast(be, DXU, t32(start, d));
    rc = o->bn_act_backward(be, DXF, with_add ? DZF : (fp_tensor){0}, vec(dgf, C), vec(dbf, C), DY, YU, X, vec(g, C),
                            vec(b, C), vec(svu, 2 * C), &p, NULL, 0, 1, 1);
    unsigned char gm[E * 4];   /* unfused: relu mask into gm, dz += gm, bn backward of gm */
    fp_tensor GM = fp_tensor_of(gm, dt, d);
    rc = rc ? rc : o->relu_backward(be, GM, DY, YU, 0);
    if (with_add)
        rc = rc ? rc : o->accumulate(be, DZU, GM);
    rc = rc ? rc : o->bn_backward(be, DXU, vec(dgu, C), vec(dbu, C), GM, X, vec(g, C), vec(svu, 2 * C), 1);
    tap_ok(rc == FP_OK && !memcmp(dxf, dxu, E * eb) && !memcmp(dgf, dgu, sizeof dgf) && !memcmp(dbf, dbu, sizeof dbf) &&
               (!with_add || !memcmp(dzf, dzu, E * eb)),
           "%s: backward (dx, dz accumulated, dgamma, dbeta) bit for bit with the unfused ops", fmt);
}

static void test_bad_input(const fp_backend_ops *o, fp_backend *be)
{
    float x[2 * 4], y[2 * 4], g[4] = {1, 1, 1, 1}, b[4] = {0}, sv[8];
    fp_dims d = {2, 1, 1, 4};
    fp_bn_params p = {0.1f, 1e-5f};
    memset(x, 0, sizeof x);
    int rc = o->bn_act_forward_train(be, t32(y, d), vec(sv, 8), (fp_tensor){0}, (fp_tensor){0}, t32(x, d),
                                     t32(x, (fp_dims){2, 1, 1, 3}), vec(g, 4), vec(b, 4), &p, NULL, 0);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "bn_act_forward_train"),
           "forward with z of other dims -> FP_EINVAL naming the op (%s)", fp_error_message());
    uint16_t h[8];
    rc = o->bn_act_forward_train(be, fp_tensor_of(h, FP_DT_F16, d), vec(sv, 8), (fp_tensor){0}, (fp_tensor){0},
                                 t32(x, d), (fp_tensor){0}, vec(g, 4), vec(b, 4), &p, NULL, 0);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "bn_act_forward_train"),
           "forward with y of another format -> FP_EINVAL (%s)", fp_error_message());
    rc = o->bn_act_forward_train(be, t32(y, d), vec(sv, 8), (fp_tensor){0}, (fp_tensor){0}, t32(x, d), (fp_tensor){0},
                                 vec(g, 4), vec(b, 4), &p, NULL, 64);
    tap_ok(rc == FP_EINVAL, "forward with reserve_bytes but no reserve -> FP_EINVAL (%s)", fp_error_message());
    rc = o->bn_act_backward(be, t32(y, d), (fp_tensor){0}, vec(g, 4), vec(b, 4), t32(x, d), (fp_tensor){0}, t32(x, d),
                            vec(g, 4), vec(b, 4), vec(sv, 8), &p, NULL, 0, 0, 0);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "bn_act_backward"),
           "backward without y -> FP_EINVAL naming the op (%s)", fp_error_message());
    rc = o->bn_act_backward(be, t32(y, d), (fp_tensor){0}, vec(g, 4), vec(b, 4), t32(x, d), t32(x, d), t32(x, d),
                            vec(g, 3), vec(b, 4), vec(sv, 8), &p, NULL, 0, 0, 0);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "bn_act_backward"),
           "backward with gamma of 3 channels for 4 -> FP_EINVAL (%s)", fp_error_message());
}

/* ---------------------------------------------------------------- models, fusion on vs off */

/* conv -> bn1 -> relu1 -> conv -> bn2 -> add(bn2, relu1) -> relu2 -> conv: one chain of each kind. */
static fp_model *hand_built(void)
{
    fp_model *m = NULL;
    if (fp_model_build_begin(&m, "fuse_hand", 8, 8, 3) != FP_OK)
        return NULL;
    int v = fp_model_add_conv(m, "c1", 0, 4, 3, 1, 1);
    int r1 = fp_model_add_relu(m, "relu1", fp_model_add_bn(m, "bn1", v));
    int b2 = fp_model_add_bn(m, "bn2", fp_model_add_conv(m, "c2", r1, 4, 3, 1, 1));
    int r2 = fp_model_add_relu(m, "relu2", fp_model_add_add(m, "add", b2, r1));
    fp_model_add_conv(m, "c3", r2, 5, 1, 1, 0);
    if (fp_model_build_finish(m) != FP_OK) {
        tap_diag("hand-built model: %s", fp_error_message());
        fp_model_free(m);
        return NULL;
    }
    fp_model_init_params(m, 11);
    return m;
}

static fp_model *small_resnet(void)
{
    static const int layers[4] = {1, 1, 1, 1};
    fp_model *m = NULL;
    if (fp_resnet_create(&m, "resnet_b1111_w4", 1, layers, 4, 4, 32, 7) != FP_OK)
        tap_diag("resnet: %s", fp_error_message());
    return m;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* The steps' losses (or the summed logits of the hand-built model) of a fresh model under policy with
 * fusion `on`; its weights, gradients and buffers are left in the model. */
static fp_model *train(fp_model *(*make)(void), const char *policy, int on, int steps, int batch, double *loss,
                       int *fused)
{
    fp_model *m = make();
    if (!m)
        return NULL;
    if (fp_model_set_policy(m, fp_policy_find(policy)) != FP_OK) {
        fp_model_free(m);
        return NULL;
    }
    fp_model_set_fusion(m, on);
    const fp_layer_info *in = fp_model_layer(m, 0);
    size_t per = (size_t)in->in.h * in->in.w * in->in.c;
    uint64_t s = 77;
    float *x = malloc(per * batch * sizeof(float));
    int classes = fp_model_layer(m, fp_model_layer_count(m) - 1)->out.c;
    size_t outn = (size_t)batch * fp_model_layer(m, fp_model_layer_count(m) - 1)->out.h *
                  fp_model_layer(m, fp_model_layer_count(m) - 1)->out.w * classes;
    float *dl = malloc(outn * sizeof(float));
    int labels[16];
    *fused = -1;
    for (int st = 0; st < steps && m; st++) {
        for (size_t i = 0; i < per * batch; i++)
            x[i] = tu_uniform_pm1(&s);
        for (size_t i = 0; i < outn; i++)
            dl[i] = 0.01f * tu_uniform_pm1(&s);
        for (int i = 0; i < batch; i++)
            labels[i] = (int)(tu_uniform_pm1(&s) * 1000 + 1000) % classes;
        fp_model_zero_grad(m);
        float l = 0;
        int rc;
        if (strcmp(fp_model_name(m), "fuse_hand") == 0) {   /* no classifier: a given output gradient */
            const float *lg;
            rc = fp_model_forward(m, &lg, x, batch, FP_MODE_TRAIN);
            for (size_t i = 0; !rc && i < outn; i++)
                l += lg[i] * dl[i];
            rc = rc ? rc : fp_model_backward(m, dl);
        } else {
            rc = fp_model_train_step(m, &l, NULL, NULL, x, labels, batch);
        }
        int ran = 0;
        fp_model_fusion(m, &ran, NULL);
        *fused = ran;
        loss[st] = l;
        if (rc) {
            tap_diag("step %d: %s", st, fp_error_message());
            fp_model_free(m);
            m = NULL;
            break;
        }
        if (st + 1 < steps) {   /* plain SGD on the fp32 master weights */
            float *p = fp_model_params(m);
            const float *g = fp_model_grads(m);
            for (size_t i = 0; i < fp_model_num_params(m); i++)
                p[i] -= 0.05f * g[i];
        }
    }
    free(x);
    free(dl);
    return m;
}

static void compare_models(fp_model *(*make)(void), const char *what, const char *policy, int want_chains)
{
    /* fp32: 3 SGD steps; 16-bit: one step (SGD on a batch of 4 through batchnorm over 4 values per channel
     * in the last stage amplifies any difference, the unfused fp16 arm's against fp32's as well) */
    enum { STEPS = 3 };
    int fp32 = strcmp(policy, "fp32") == 0, steps = fp32 ? STEPS : 1;
    double la[STEPS] = {0}, lb[STEPS] = {0};
    int fa = 0, fb = 0;
    fp_model *a = train(make, policy, 0, steps, 4, la, &fa), *b = train(make, policy, 1, steps, 4, lb, &fb);
    if (!a || !b) {
        tap_ok(0, "%s %s: both models train", what, policy);
        tap_skip(2, "no model");
        fp_model_free(a);
        fp_model_free(b);
        return;
    }
    tap_ok(fa == 0 && fb == want_chains && fp_model_fusion(b, NULL, NULL) == want_chains,
           "%s %s: %d chains fused with fusion on (%d), none off (%d)", what, policy, want_chains, fb, fa);
    if (fp32) {
        tap_ok(!memcmp(la, lb, sizeof la), "%s fp32: %d steps' losses bit for bit (%.9g %.9g)", what, STEPS,
               la[STEPS - 1], lb[STEPS - 1]);
        tap_ok(same_bits(fp_model_grads(a), fp_model_grads(b), fp_model_num_params(a)) &&
                   same_bits(fp_model_params(a), fp_model_params(b), fp_model_num_params(a)) &&
                   same_bits(fp_model_buffers(a), fp_model_buffers(b), fp_model_num_buffers(a)),
               "%s fp32: gradients, weights and running statistics bit for bit", what);
    } else {
        /* one extra rounding per fused layer (relative 2^-11 fp16, 2^-8 bf16), grown through ~50 layers and
         * batchnorm over few values: stated bounds 2^-7 (fp16) and 2^-4 (bf16) relative on the loss */
        double tol = strcmp(policy, "bf16") == 0 ? 0x1p-4 : 0x1p-7;
        double worst = fabs(la[0] - lb[0]) / (fabs(la[0]) > 1e-6 ? fabs(la[0]) : 1e-6);
        tap_ok(worst <= tol, "%s %s: losses within %g relative (%.3g)", what, policy, tol, worst);
        double gd = 0, gn = 0;
        for (size_t i = 0; i < fp_model_num_params(a); i++) {
            double d = (double)fp_model_grads(a)[i] - fp_model_grads(b)[i];
            gd += d * d;
            gn += (double)fp_model_grads(a)[i] * fp_model_grads(a)[i];
        }
        tap_ok(sqrt(gd) <= 8 * tol * sqrt(gn) + 1e-12, "%s %s: last gradients within %g rel. L2 (%.3g)", what,
               policy, 8 * tol, gn > 0 ? sqrt(gd / gn) : 0.0);
    }
    fp_model_free(a);
    fp_model_free(b);
}

/* ---------------------------------------------------------------- a sampled step runs unfused */

static int probe_neg = -1;
static unsigned want_act(void *self, int64_t step, float s)
{
    (void)self, (void)step, (void)s;
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}
static void got(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float s)
{
    (void)self, (void)s;
    if (layer == 4 && role == FP_ROLE_ACTIVATION) {   /* bn2 */
        probe_neg = 0;
        for (size_t i = 0; i < n; i++)
            probe_neg += x[i] < 0;
    }
}

/* Layer hooks counted per layer and phase (forward, backward data) at a step that samples nothing. */
static int pairs[16][2], open_now;
static unsigned want_none(void *self, int64_t step, float s)
{
    (void)self, (void)step, (void)s;
    return 0;
}
static void lb(void *self, int layer, fp_phase ph)
{
    (void)self;
    open_now += (layer < 16 && (ph == FP_PHASE_FORWARD || ph == FP_PHASE_BACKWARD_DATA)) ? 1 : 0;
}
static void le(void *self, int layer, fp_phase ph)
{
    (void)self;
    if (layer < 16 && (ph == FP_PHASE_FORWARD || ph == FP_PHASE_BACKWARD_DATA)) {
        pairs[layer][ph == FP_PHASE_FORWARD ? 0 : 1]++;
        open_now--;
    }
}

static void test_hooks_when_fused(void)
{
    fp_model *m = hand_built();
    fp_probe *p = NULL;
    static const fp_probe_ops ops = {.name = "count", .step_begin = want_none, .layer_begin = lb, .layer_end = le};
    if (!m || fp_probe_create(&p) || fp_probe_add(p, &ops, NULL)) {
        tap_ok(0, "hand-built model and a counting probe");
        fp_model_free(m);
        fp_probe_free(p);
        return;
    }
    fp_model_set_fusion(m, 1);
    fp_model_set_probe(m, p);
    float x[2 * 8 * 8 * 3], dl[2 * 8 * 8 * 5];
    uint64_t s = 5;
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        x[i] = tu_uniform_pm1(&s);
    for (size_t i = 0; i < sizeof dl / sizeof *dl; i++)
        dl[i] = tu_uniform_pm1(&s);
    fp_probe_step_begin(p, 1, 1.0f);
    int rc = fp_model_forward(m, NULL, x, 2, FP_MODE_TRAIN);
    int ran = 0;
    fp_model_fusion(m, &ran, NULL);
    rc = rc ? rc : fp_model_backward(m, dl);
    fp_probe_step_end(p);
    int all = 1, nl = fp_model_layer_count(m);
    for (int i = 0; i < nl; i++)   /* c1 (0) takes the model input: no data gradient, no backward pair */
        all &= pairs[i][0] == 1 && pairs[i][1] == (i == 0 ? 0 : 1);
    tap_ok(rc == FP_OK && ran == 2 && all && open_now == 0,
           "a fused step still gives every layer one forward and one backward-data hook pair (%d layers)", nl);
    fp_model_set_probe(m, NULL);
    fp_probe_free(p);
    fp_model_free(m);
}

static void test_sampled(void)
{
    fp_model *m = hand_built();
    if (!m) {
        tap_ok(0, "hand-built model");
        tap_skip(3, "no model");
        return;
    }
    fp_model_set_fusion(m, 1);
    float x[2 * 8 * 8 * 3], out[2 * 8 * 8 * 4];
    uint64_t s = 9;
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        x[i] = tu_uniform_pm1(&s);
    int ran = -1;
    int rc = fp_model_forward(m, NULL, x, 2, FP_MODE_TRAIN);
    fp_model_fusion(m, &ran, NULL);
    int lo = fp_model_layer_output(m, 4, out, sizeof out / sizeof *out, NULL);
    tap_ok(rc == FP_OK && ran == 2 && lo == FP_EINVAL && strstr(fp_error_message(), "bn2"),
           "unsampled TRAIN forward fuses 2 chains; bn2's output is refused (%s)", fp_error_message());
    fp_probe *p = NULL;
    static const fp_probe_ops ops = {.name = "t", .step_begin = want_act, .tensor = got};
    fp_probe_create(&p);
    fp_probe_add(p, &ops, NULL);
    fp_model_set_probe(m, p);
    fp_probe_step_begin(p, 1, 1.0f);
    rc = fp_model_forward(m, NULL, x, 2, FP_MODE_TRAIN);
    fp_model_fusion(m, &ran, NULL);
    lo = fp_model_layer_output(m, 4, out, sizeof out / sizeof *out, NULL);
    fp_probe_step_end(p);
    tap_ok(rc == FP_OK && ran == 0 && lo == 2 * 8 * 8 * 4, "a sampled step runs unfused: bn2's output is there");
    tap_ok(probe_neg > 0, "the probe saw bn2's own output, not relu'd (%d negative values)", probe_neg);
    fp_model_set_probe(m, NULL);
    fp_probe_free(p);
    fp_model_free(m);
}

/* ---------------------------------------------------------------- a backend that refuses (the model's fallback) */

/* The CPU backend's table with refusals: the query refuses chains with an add; the forward refuses its call
 * number refuse_fwd, the backward its call number refuse_bwd (1-based; 0: never), each with FP_EUNAVAIL. */
static fp_backend_ops refusing;
static int fwd_calls, bwd_calls, refuse_fwd, refuse_bwd;

static int q_refuse_add(fp_backend *be, size_t *bytes, fp_tensor x, int with_add)
{
    if (with_add)
        return fp_fail(FP_EUNAVAIL, "bn_act_query: not with an add here");
    return fp_backend_cpu()->bn_act_query(be, bytes, x, with_add);
}
static int fwd_refusing(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor rm, fp_tensor rv, fp_tensor x,
                        fp_tensor z, fp_tensor g, fp_tensor b, const fp_bn_params *p, void *r, size_t rb)
{
    if (++fwd_calls == refuse_fwd)
        return fp_fail(FP_EUNAVAIL, "bn_act_forward_train: refused");
    return fp_backend_cpu()->bn_act_forward_train(be, y, save, rm, rv, x, z, g, b, p, r, rb);
}
static int bwd_refusing(fp_backend *be, fp_tensor dx, fp_tensor dz, fp_tensor dg, fp_tensor db, fp_tensor dy,
                        fp_tensor y, fp_tensor x, fp_tensor g, fp_tensor b, fp_tensor save, const fp_bn_params *p,
                        void *r, size_t rb, int ax, int az)
{
    if (++bwd_calls == refuse_bwd)
        return fp_fail(FP_EUNAVAIL, "bn_act_backward: refused");
    return fp_backend_cpu()->bn_act_backward(be, dx, dz, dg, db, dy, y, x, g, b, save, p, r, rb, ax, az);
}

static fp_model *hand_built_refusing(void)
{
    fp_model *m = hand_built();
    if (m && fp_model_set_backend(m, &refusing, NULL) != FP_OK) {
        tap_diag("refusing backend: %s", fp_error_message());
        fp_model_free(m);
        return NULL;
    }
    return m;
}

static void test_refusals(void)
{
    refusing = *fp_backend_cpu();
    refusing.bn_act_query = q_refuse_add;
    refusing.bn_act_forward_train = fwd_refusing;
    refusing.bn_act_backward = bwd_refusing;
    static const struct { int fwd, bwd; const char *what; } cases[] = {
        {0, 1, "the add chain refused at the query, the other's first backward refused"},
        {1, 0, "the add chain refused at the query, the other's first forward refused"}};
    for (int k = 0; k < 2; k++) {
        enum { STEPS = 3 };
        double la[STEPS] = {0}, lb[STEPS] = {0};
        int fa = 0, fb = 0;
        fwd_calls = bwd_calls = 0;
        refuse_fwd = cases[k].fwd;
        refuse_bwd = cases[k].bwd;
        fp_model *a = train(hand_built, "fp32", 0, STEPS, 4, la, &fa);
        fp_model *b = train(hand_built_refusing, "fp32", 1, STEPS, 4, lb, &fb);
        int found = b ? fp_model_fusion(b, NULL, NULL) : -1;
        tap_ok(a && b && found == 0 && fb == 0 && fwd_calls == 1 && bwd_calls == (refuse_bwd ? 1 : 0),
               "%s: afterwards nothing fuses (%d chains, %d ran; %d forward, %d backward calls)", cases[k].what, found,
               fb, fwd_calls, bwd_calls);
        tap_ok(a && b && !memcmp(la, lb, sizeof la) &&
                   same_bits(fp_model_grads(a), fp_model_grads(b), fp_model_num_params(a)) &&
                   same_bits(fp_model_params(a), fp_model_params(b), fp_model_num_params(a)),
               "%s: losses, gradients and weights still the unfused ones bit for bit", cases[k].what);
        fp_model_free(a);
        fp_model_free(b);
    }
}

int main(void)
{
    const fp_backend_ops *o = fp_backend_cpu();
    fp_backend *be = NULL;
    if (o->create(&be) != FP_OK)
        return tap_ok(0, "cpu backend"), tap_done();
    static const fp_dtype dts[3] = {FP_DT_F32, FP_DT_F16, FP_DT_BF16};
    for (int k = 0; k < 3; k++)
        for (int a = 0; a < 2; a++)
            op_case(o, be, dts[k], a);
    test_bad_input(o, be);
    o->destroy(be);
    static const char *const pols[3] = {"fp32", "fp16", "bf16"};
    for (int k = 0; k < 3; k++) {
        compare_models(hand_built, "hand-built", pols[k], 2);
        compare_models(small_resnet, "resnet b1111 w4", pols[k], 13);
    }
    test_sampled();
    test_hooks_when_fused();
    test_refusals();
    return tap_done();
}
