/* test_param_pass_device.c — the parameter pass where the parameters lie (analysis.h fp_param_dev, the backend op
 * update_delta) against the host pass (fp_probe_sample_params) on the CPU: the op's update and counts equal
 * layers.h's definition (fp_lost_update_fraction, new - old) on crafted values (signed zeros, subnormals, Inf,
 * NaN gradients); bad input gets FP_EINVAL naming the op; after real arm steps (tinynet, SGD) under fp32, fp16
 * (AMP) and `half`, the pass through the CPU backend's op gives the host pass's lost-update fractions per layer
 * and overall bit for bit and the same weight / weight-gradient / update histograms (every count, amax,
 * min_nonzero; sum_abs to 1e-12 relative: another summation order); on a model on the CPU backend declared a
 * device (host_memory 0: backend copies with host mirrors), with the host writing the new weights (a stale
 * device copy must be uploaded first), the same, with a hist op in the table (only counts: no download during
 * the pass) and without one (the tensors downloaded). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "data_testutil.h"
#include "error.h"
#include "hist.h"
#include "hist_ref.h"
#include "probe/probe.h"
#include "param_pass_testutil.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/analysis/analysis.h"
#include "trainer/backend.h"
#include "trainer/layers.h"
#include "trainer/model.h"
#include "trainer/run/arm.h"

#define S 32
#define B 8
#define MAXL 64

static fp_tensor flat(float *p, size_t n) { return fp_tensor_of(p, FP_DT_F32, (fp_dims){1, 1, 1, (int)n}); }

/* ---- the op on crafted values */
static void test_op(void)
{
    const fp_backend_ops *cpu = fp_backend_cpu();
    fp_backend *be = NULL;
    cpu->create(&be);
    enum { N = 4099 };
    float *nw = malloc(N * sizeof *nw), *old = malloc(N * sizeof *old), *g = malloc(N * sizeof *g),
          *d = malloc(N * sizeof *d);
    const float specials[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-39f, INFINITY, -INFINITY, NAN, 3e38f, 1.0f};
    uint64_t s = 11;
    for (size_t i = 0; i < N; i++) {
        old[i] = tu_uniform_pm1(&s) * ldexpf(1.0f, (int)(i % 40) - 30);
        g[i] = i % 13 == 0 ? specials[(i / 13) % 10] : tu_uniform_pm1(&s);
        float u = i % 5 == 0 ? 0.0f : i % 7 == 0 ? old[i] * 1e-9f : tu_uniform_pm1(&s) * 1e-3f;   /* lost / moved */
        nw[i] = old[i] - u;
        if (i % 17 == 0)   /* specials in the weights too: -0 == +0, Inf == Inf, NaN never equal */
            old[i] = specials[(i / 17) % 10], nw[i] = i % 34 ? old[i] : -old[i];
    }
    size_t lost = 1, moved = 1;
    int rc = cpu->update_delta(be, flat(d, N), flat(nw, N), flat(old, N), flat(g, N), &lost, &moved);
    int bits = 1;
    for (size_t i = 0; i < N; i++) {
        float want = nw[i] - old[i];
        bits &= memcmp(&want, &d[i], sizeof want) == 0;
    }
    double frac = fp_lost_update_fraction(old, nw, g, N);
    tap_ok(rc == FP_OK && bits && moved > 0 && lost > 0 && lost < moved && (double)lost / (double)moved == frac,
           "update_delta (CPU): d = new - old bit for bit, lost / moved %zu / %zu = fp_lost_update_fraction %g", lost,
           moved, frac);

    /* bad input: FP_EINVAL naming the op */
    fp_tensor h16 = fp_tensor_of(g, FP_DT_F16, (fp_dims){1, 1, 1, N});
    rc = cpu->update_delta(be, flat(d, N), flat(nw, N), flat(old, N), h16, &lost, &moved);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "update_delta"), "a 16-bit gradient: FP_EINVAL (%s)",
           fp_error_message());
    rc = cpu->update_delta(be, flat(d, N), flat(nw, N - 1), flat(old, N), flat(g, N), &lost, &moved);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "update_delta"), "counts that differ: FP_EINVAL (%s)",
           fp_error_message());
    rc = cpu->update_delta(be, flat(d, N), flat(nw, N), flat(old, N), flat(g, N), NULL, &moved);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "update_delta"), "a NULL count: FP_EINVAL (%s)",
           fp_error_message());
    rc = cpu->update_delta(be, flat(old + 1, N - 1), flat(nw, N - 1), flat(old, N - 1), flat(g, N - 1), &lost, &moved);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "update_delta"), "d overlapping old: FP_EINVAL (%s)",
           fp_error_message());
    free(nw);
    free(old);
    free(g);
    free(d);
    cpu->destroy(be);
}

/* ---- the two passes side by side */

static fp_dataset *ds;
static float images[B * S * S * 3];
static int32_t labels[B];

static fp_batch batch_at(int64_t first) { return dt_batch(ds, first, B, S, images, labels); }

/* Real arm steps under a policy: both passes on the same step, the device one through the CPU backend's op. */
static void test_arm_policy(const char *policy, double *lost_seen)
{
    fp_arm_config c;
    fp_arm_config_default(&c);
    c.model = "tinynet";
    c.policy = policy;
    c.num_classes = 10;
    c.image_size = S;
    c.seed = 7;
    c.lr.base_lr = 1e-3;   /* small steps: `half` loses some */
    fp_arm *a = NULL;
    fp_param_dev *pd = NULL;
    int rc = fp_arm_create(&a, &c);
    fp_model *m = rc ? NULL : fp_arm_model(a);
    rc = rc ? rc : fp_param_dev_create(&pd, m);
    int L = m ? fp_model_layer_count(m) : 0;
    size_t np = m ? fp_model_num_params(m) : 0;
    float *old = malloc((np ? np : 1) * sizeof *old);
    double per_h[MAXL], per_d[MAXL], all_h = NAN, all_d = NAN;
    int ok = rc == FP_OK && L <= MAXL, cells = 0, steps = 0;
    if (rc)
        tap_diag("%s", fp_error_message());
    for (int step = 1; ok && step <= 3; step++) {
        pp_probe_t h, dv;
        float scale = fp_arm_scaler(a)->mode == FP_SCALE_NONE ? 1.0f : fp_arm_scaler(a)->scale;
        pp_probe_open(&h, L, step, scale);
        pp_probe_open(&dv, L, step, scale);
        memcpy(old, fp_model_params(m), np * sizeof *old);
        fp_batch b = batch_at((int64_t)step * B);
        fp_arm_step_result r = {0};
        rc = fp_param_dev_before(pd, m);
        rc = rc ? rc : fp_arm_step(a, &b, &r);
        all_h = fp_probe_sample_params(h.p, m, old, fp_model_grads(m), per_h);
        rc = rc ? rc : fp_param_dev_after(pd, dv.p, m, &all_d, per_d);
        if (rc)
            tap_diag("step %d: %s", step, fp_error_message());
        fp_probe_step_end(h.p);
        fp_probe_step_end(dv.p);
        ok = rc == FP_OK && pp_same_pass(&h, &dv, all_h, all_d, per_h, per_d, L, 1e-12, &cells);
        steps += !r.skipped;
        if (isfinite(all_h) && all_h > *lost_seen)
            *lost_seen = all_h;
        pp_probe_close(&h);
        pp_probe_close(&dv);
    }
    tap_ok(ok && cells > 0 && steps > 0, "%s: 3 arm steps, the pass on the backend (CPU op) = the host pass: %d "
           "histograms, lost updates per layer and overall (last %g) bit for bit", policy, cells, all_h);
    free(old);
    fp_param_dev_free(pd);
    fp_arm_free(a);
}

/* ---- the CPU backend declared a device */

static fp_backend_ops fake;
static int downloads, hists;
static int fake_download(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    downloads++;
    return fp_backend_cpu()->download(be, dst, src, bytes);
}
static int fake_hist(fp_backend *be, fp_hist_t *h, const void *x, fp_dtype dt, size_t n)
{
    (void)be;
    hists++;
    if (dt != FP_DT_F32)
        return fp_fail(FP_EINVAL, "hist (test): fp32 only");
    fp_hist_add(h, x, n);
    return FP_OK;
}

static void test_fake_device(const char *policy, int with_hist)
{
    fake = *fp_backend_cpu();
    fake.name = "cpu-as-device";
    fake.host_memory = 0;
    fake.download = fake_download;
    fake.hist = with_hist ? fake_hist : NULL;
    fp_model_config mc = {"tinynet", 10, S, 16, 3, 0};
    fp_model *m = NULL;
    fp_param_dev *pd = NULL;
    int rc = fp_model_create(&m, &mc);
    if (!rc) {
        fp_policy pol = *fp_policy_find(policy);
        rc = fp_model_set_policy(m, &pol);
    }
    rc = rc ? rc : fp_model_set_backend(m, &fake, NULL);
    rc = rc ? rc : fp_param_dev_create(&pd, m);
    int L = m ? fp_model_layer_count(m) : 0;
    size_t np = m ? fp_model_num_params(m) : 0;
    float *old = malloc((np ? np : 1) * sizeof *old);
    double per_h[MAXL], per_d[MAXL], all_h = NAN, all_d = NAN;
    int ok = rc == FP_OK && L <= MAXL, cells = 0, pass_downloads = 0, pass_hists = 0;
    if (rc)
        tap_diag("%s", fp_error_message());
    for (int step = 1; ok && step <= 2; step++) {
        fp_batch b = batch_at((int64_t)step * B);
        float loss;
        rc = fp_param_dev_before(pd, m);   /* the device copy first: nothing read from the host mirror */
        fp_model_zero_grad(m);
        rc = rc ? rc : fp_model_train_step(m, &loss, NULL, NULL, b.images, b.labels, B);
        float *p = rc ? NULL : fp_model_params(m);   /* downloads: the old values */
        const float *g = p ? fp_model_grads(m) : NULL;
        if (!p || !g) {
            ok = 0;
            break;
        }
        memcpy(old, p, np * sizeof *old);
        for (size_t i = 0; i < np; i++)   /* the host writes the new weights: the device copy is stale */
            p[i] -= (i % 3 ? 1e-6f : 0.05f) * g[i];
        pp_probe_t h, dv;
        pp_probe_open(&h, L, step, 1.0f);
        pp_probe_open(&dv, L, step, 1.0f);
        int d0 = downloads, h0 = hists;
        rc = fp_param_dev_after(pd, dv.p, m, &all_d, per_d);   /* uploads the host's weights first */
        pass_downloads += downloads - d0;
        pass_hists += hists - h0;
        all_h = fp_probe_sample_params(h.p, m, old, fp_model_grads(m), per_h);
        if (rc)
            tap_diag("step %d: %s", step, fp_error_message());
        fp_probe_step_end(h.p);
        fp_probe_step_end(dv.p);
        ok = rc == FP_OK && pp_same_pass(&h, &dv, all_h, all_d, per_h, per_d, L, 1e-12, &cells);
        pp_probe_close(&h);
        pp_probe_close(&dv);
    }
    tap_ok(ok && cells > 0 && isfinite(all_h) && all_h > 0 && all_h < 1,
           "%s on a device model, %s: the host's new weights uploaded, the pass = the host pass (%d histograms, lost "
           "%g)", policy, with_hist ? "hist op" : "no hist op", cells, all_h);
    if (with_hist)
        tap_ok(ok && pass_downloads == 0 && pass_hists == cells, "... only counts came back: %d downloads, %d device "
               "histograms for %d", pass_downloads, pass_hists, cells);
    else
        tap_ok(ok && pass_downloads == cells, "... without a hist op each tensor is downloaded once: %d downloads for "
               "%d histograms", pass_downloads, cells);

    /* misuse: after without before, another model's pass, a backend without the op */
    rc = m ? fp_param_dev_after(pd, NULL, m, &all_d, NULL) : FP_EINTERNAL;
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "without before"), "after without before: FP_EINVAL (%s)",
           fp_error_message());
    free(old);
    fp_param_dev_free(pd);
    fp_model_free(m);
}

static void test_no_op(void)
{
    fp_backend_ops none = *fp_backend_cpu();
    none.update_delta = NULL;
    fp_model_config mc = {"tinynet", 10, S, 16, 3, 0};
    fp_model *m = NULL, *other = NULL;
    fp_param_dev *pd = NULL;
    int rc = fp_model_create(&m, &mc);
    rc = rc ? rc : fp_model_set_backend(m, &none, NULL);
    rc = rc ? rc : (fp_param_dev_create(&pd, m) == FP_EUNAVAIL && strstr(fp_error_message(), "update_delta") ?
                    FP_OK : FP_EINTERNAL);
    tap_ok(rc == FP_OK && !pd, "a backend without update_delta: FP_EUNAVAIL naming the op (%s)", fp_error_message());
    rc = fp_model_create(&other, &mc);
    rc = rc ? rc : fp_param_dev_create(&pd, other);
    rc = rc ? rc : fp_param_dev_before(pd, m);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "not made for"), "another model's pass: FP_EINVAL (%s)",
           fp_error_message());
    fp_param_dev_free(pd);
    fp_model_free(other);
    fp_model_free(m);
}

int main(void)
{
    fp_data_opts o;
    fp_data_opts_default(&o);
    o.image_size = S;
    if (fp_dataset_open(&ds, "synthetic:200", &o))
        tap_skip_all("cannot open the synthetic dataset");
    tap_plan(5 + 4 + 3 * 3 + 2);
    test_op();
    double lost_half = 0, lost_any = 0;
    test_arm_policy("fp32", &lost_any);
    test_arm_policy("fp16", &lost_any);
    test_arm_policy("half", &lost_half);
    tap_ok(lost_half > 0, "`half` lost updates (most %g): the comparison saw some", lost_half);
    test_fake_device("fp32", 1);
    test_fake_device("fp32", 0);
    test_fake_device("fp16", 1);
    test_no_op();
    fp_dataset_close(ds);
    return tap_done();
}
