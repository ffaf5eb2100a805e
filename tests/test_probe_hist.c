/* test_probe_hist.c — histograms at sampling steps: every (layer, role) of tinynet sampled at the
 * steps of the period and none between, weight gradients unscaled, rows in a temporary store whose
 * per-format class columns agree with the blob, the update role, and large tensors (in chunks over
 * the kernels' pool at 1..3 threads; 16-bit ones counted as stored) giving the counts of one
 * fp_hist_add pass, and the same histogram, sum_abs included, at every thread count; ready histograms
 * (fp_probe_tensor_hist, what a device hands instead of values) recorded as the values would be, and
 * refused for the roles that must travel as values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "hist.h"
#include "numfmt.h"
#include "trainer/analysis/analysis.h"
#include "probe/probe.h"
#include "store_reader.h"
#include "store_testutil.h"
#include "hist_ref.h"
#include "tap.h"
#include "testutil.h"
#include "thread_pool.h"
#include "trainer/model.h"

#define NB 4
#define HW 32
#define NC 10

/* counts, amax, min equal; sum_abs to 1e-9 relative */
static int same_counts(const fp_hist_t *a, const fp_hist_t *b) { return tu_hist_same(a, b, 1e-9); }

static void test_large_tensors(void)
{
    size_t n = ((size_t)1 << 21) + 77;   /* the most chunks, the last one short */
    float *f = malloc(n * sizeof *f), *w = malloc(n * sizeof *w), *wb = malloc(n * sizeof *wb);
    uint16_t *h16 = malloc(n * sizeof *h16), *b16 = malloc(n * sizeof *b16);
    uint64_t s = 11;
    for (size_t i = 0; i < n; i++) {
        f[i] = tu_uniform_pm1(&s) * ldexpf(1.0f, (int)(i % 37) - 20);
        h16[i] = fp_f32_to_f16(i % 3 ? f[i] : 0.0f);
        w[i] = fp_f16_to_f32(h16[i]);
        b16[i] = fp_f32_to_bf16(f[i]);
        wb[i] = fp_bf16_to_f32(b16[i]);
    }
    fp_hist_t first[3][4];   /* rep 0 at one thread: weight, weight grad, fp16, bf16 */
    for (int threads = 1; threads <= 3; threads++) {
        fp_pool_set_threads(threads);
        fp_hist_probe *hp = NULL;
        fp_probe *p = NULL;
        fp_hist_probe_create(&hp, 3, 1, 0, NULL, 0);
        fp_probe_create(&p);
        fp_hist_probe_attach(hp, p);
        int same_all = 1;
        for (int rep = 0; rep < 3; rep++) {
            float scale = rep < 2 ? 256.0f : 1000.0f;   /* a GradScaler power of two (no copy), then any scale */
            fp_probe_step_begin(p, rep, scale);
            fp_probe_tensor(p, 0, FP_ROLE_WEIGHT, f, n);
            fp_probe_tensor(p, 0, FP_ROLE_WEIGHT_GRAD, f, n);
            tap_is_int(fp_probe_tensor_dt(p, 1, FP_ROLE_ACTIVATION, h16, FP_DT_F16, n), FP_OK,
                       "16-bit tensor handed over");
            fp_probe_tensor_dt(p, 2, FP_ROLE_ACTIVATION, b16, FP_DT_BF16, n);
            fp_probe_step_end(p);
            fp_hist_t want, want_g, want16, wantb;
            fp_hist_init(&want);
            fp_hist_init(&want_g);
            fp_hist_init(&want16);
            fp_hist_init(&wantb);
            fp_hist_add(&want, f, n);
            float *g = malloc(n * sizeof *g);
            for (size_t i = 0; i < n; i++)   /* unscaled as fp_unscale_and_check does: times 1/scale */
                g[i] = f[i] * (1.0f / scale);
            fp_hist_add(&want_g, g, n);
            free(g);
            fp_hist_add(&want16, w, n);
            fp_hist_add(&wantb, wb, n);
            const fp_hist_t *got[4] = {fp_hist_probe_get(hp, 0, FP_ROLE_WEIGHT),
                                       fp_hist_probe_get(hp, 0, FP_ROLE_WEIGHT_GRAD),
                                       fp_hist_probe_get(hp, 1, FP_ROLE_ACTIVATION),
                                       fp_hist_probe_get(hp, 2, FP_ROLE_ACTIVATION)};
            tap_ok(same_counts(got[0], &want), "%d threads: large fp32 tensor: one pass's histogram", threads);
            tap_ok(same_counts(got[1], &want_g), "%d threads: large weight gradient: unscaled (scale %g)", threads,
                   scale);
            tap_ok(same_counts(got[2], &want16), "%d threads: large fp16 tensor: as widened + fp_hist_add", threads);
            tap_ok(same_counts(got[3], &wantb), "%d threads: large bf16 tensor: as widened + fp_hist_add", threads);
            for (int k = 0; k < 4; k++) {
                if (threads == 1)
                    first[rep][k] = *got[k];
                else
                    same_all &= memcmp(&first[rep][k], got[k], sizeof *got[k]) == 0;
            }
        }
        if (threads > 1)
            tap_ok(same_all, "%d threads: every histogram bit for bit the one-thread one (sum_abs included)", threads);
        tap_is_int(fp_hist_probe_status(hp), FP_OK, "no error");
        fp_hist_probe_free(hp);
        fp_probe_free(p);
    }
    fp_pool_set_threads(1);
    fp_pool_shutdown();   /* the workers' thread-local count tables go with them (leak checkers) */
    free(f);
    free(w);
    free(wb);
    free(h16);
    free(b16);
}

/* A value-only backend wanting activations (no hist hook): activations must travel as values. */
static unsigned act_only_begin(void *self, int64_t step, float scale)
{
    (void)self, (void)step, (void)scale;
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}
static void act_only_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float scale)
{
    (void)layer, (void)role, (void)x, (void)scale;
    *(size_t *)self += n;
}
static const fp_probe_ops act_only_ops = {"act-only", act_only_begin, NULL, NULL, NULL, act_only_tensor};

/* fp_probe_tensor_hist: the hist probe fed ready histograms (as the CUDA backend's hist op makes them)
 * records what it records from the values; wants_values names what must still come as values. */
static void test_ready_histograms(void)
{
    enum { N = 70001 };
    float *f = malloc(N * sizeof *f);
    uint16_t *h16 = malloc(N * sizeof *h16), *b16 = malloc(N * sizeof *b16);
    uint64_t s = 23;
    const uint32_t special[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x00000001u, 0x80000000u, 0u, 0x007FFFFFu};
    for (size_t i = 0; i < N; i++) {
        f[i] = i % 97 < 7 ? tu_u2f(special[i % 97]) : tu_u2f((uint32_t)tu_splitmix64(&s));
        h16[i] = (uint16_t)tu_splitmix64(&s);   /* every fp16 pattern class: subnormals, Inf, NaN, zeros */
        b16[i] = (uint16_t)tu_splitmix64(&s);
    }
    fp_probe *pv = NULL, *ph = NULL;
    fp_hist_probe *hv = NULL, *hh = NULL;
    fp_probe_create(&pv);
    fp_probe_create(&ph);
    fp_hist_probe_create(&hv, 4, 1, 0, NULL, 0);
    fp_hist_probe_create(&hh, 4, 1, 0, NULL, 0);
    fp_hist_probe_attach(hv, pv);
    fp_hist_probe_attach(hh, ph);
    const unsigned wg = FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD), act = FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
    tap_is_uint(fp_probe_wants_values(ph), 0, "outside a step nothing is wanted as values");
    fp_hist_t hf, h1, hb;
    fp_hist_init(&hf);
    fp_hist_init(&h1);
    fp_hist_init(&hb);
    fp_hist_add(&hf, f, N);
    fp_hist_add_f16(&h1, h16, N);
    fp_hist_add_bf16(&hb, b16, N);
    tap_is_int(fp_probe_tensor_hist(ph, 0, FP_ROLE_ACTIVATION, &hf), FP_OK, "outside a step: ignored");
    for (int step = 0; step < 2; step++) {
        float scale = step ? 1.0f : 1024.0f;
        fp_probe_step_begin(pv, step, scale);
        fp_probe_step_begin(ph, step, scale);
        tap_is_uint(fp_probe_wants_values(ph), step ? 0 : wg,
                    "scale %g: values needed only for the weight gradient at a scale != 1", scale);
        fp_probe_tensor_dt(pv, 0, FP_ROLE_ACTIVATION, f, FP_DT_F32, N);
        fp_probe_tensor_dt(pv, 1, FP_ROLE_ACTIVATION_GRAD, h16, FP_DT_F16, N);
        fp_probe_tensor_dt(pv, 2, FP_ROLE_ACTIVATION, b16, FP_DT_BF16, N);
        fp_probe_tensor_dt(pv, 3, FP_ROLE_WEIGHT_GRAD, f, FP_DT_F32, N);
        int rc = fp_probe_tensor_hist(ph, 0, FP_ROLE_ACTIVATION, &hf);
        rc |= fp_probe_tensor_hist(ph, 1, FP_ROLE_ACTIVATION_GRAD, &h1);
        rc |= fp_probe_tensor_hist(ph, 2, FP_ROLE_ACTIVATION, &hb);
        tap_is_int(rc, FP_OK, "scale %g: ready histograms of fp32 / fp16 / bf16 tensors taken", scale);
        int wrc = fp_probe_tensor_hist(ph, 3, FP_ROLE_WEIGHT_GRAD, &hf);
        if (step == 0)
            fp_probe_tensor_dt(ph, 3, FP_ROLE_WEIGHT_GRAD, f, FP_DT_F32, N);   /* the caller's fallback */
        tap_is_int(wrc, step ? FP_OK : FP_EINVAL, "scale %g: weight gradient as a histogram %s", scale,
                   step ? "taken" : "refused (it cannot be unscaled)");
        fp_probe_step_end(pv);
        fp_probe_step_end(ph);
        int same = 1;
        for (int l = 0; l < 4; l++) {
            fp_tensor_role r = l == 1 ? FP_ROLE_ACTIVATION_GRAD : l == 3 ? FP_ROLE_WEIGHT_GRAD : FP_ROLE_ACTIVATION;
            const fp_hist_t *a = fp_hist_probe_get(hv, l, r), *b = fp_hist_probe_get(hh, l, r);
            if (!a || !b || !same_counts(b, a)) {
                same = 0;
                if (a && b)
                    tu_hist_diag(b, a);
            }
        }
        tap_ok(same, "scale %g: every histogram from ready counts = the one from the values", scale);
    }
    tap_is_int(fp_hist_probe_status(hh), FP_OK, "no error kept by the probe fed histograms");
    /* a backend without a hist hook makes its roles travel as values; the caller's roles are left out */
    size_t seen = 0;
    fp_probe_add(ph, &act_only_ops, &seen);
    fp_probe_step_begin(ph, 2, 1.0f);
    tap_is_uint(fp_probe_wants_values(ph), act, "a value-only backend's role must travel as values");
    tap_is_int(fp_probe_tensor_hist(ph, 0, FP_ROLE_ACTIVATION, &hf), FP_EINVAL, "its role refused as a histogram");
    tap_is_int(fp_probe_tensor_hist(ph, 1, FP_ROLE_ACTIVATION_GRAD, &h1), FP_OK, "other roles still taken");
    tap_is_int(fp_probe_tensor_hist(ph, 1, FP_ROLE_ACTIVATION_GRAD, NULL), FP_EINVAL, "NULL histogram refused");
    fp_probe_caller_roles(ph, act);
    tap_is_uint(fp_probe_wants_values(ph), 0, "caller roles are not asked of the model");
    fp_probe_step_end(ph);
    tap_is_uint(seen, 0, "the value-only backend got nothing from histograms");
    fp_hist_probe_free(hv);
    fp_hist_probe_free(hh);
    fp_probe_free(pv);
    fp_probe_free(ph);
    free(f);
    free(h16);
    free(b16);
}

int main(void)
{
    test_ready_histograms();
    test_large_tensors();
    static float x[NB * HW * HW * 3];
    int labels[NB];
    uint64_t s = 5;
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        x[i] = tu_uniform_pm1(&s);
    for (int i = 0; i < NB; i++)
        labels[i] = i;
    fp_model_config cfg = {"tinynet", NC, HW, 16, 1, 0};
    fp_model *m = NULL;
    fp_model_create(&m, &cfg);
    fp_model_set_policy(m, fp_policy_find("fp16"));
    int L = fp_model_layer_count(m);

    char *dir = tu_mkdir();
    char *db = tu_path(dir, "h.db");
    fp_store_t *st = NULL;
    int64_t sess = 0, run = 0;
    tap_ok(fp_store_open(&st, db) == FP_OK, "store opened");
    fp_session_info_t si = {"probe hist test", NULL};
    fp_store_begin_session(st, &si, &sess);
    fp_run_info_t ri = {0};
    ri.session = sess;
    ri.arm = "fp16";
    ri.model = "tinynet";
    ri.policy = "fp16";
    ri.batch_size = NB;
    ri.image_size = HW;
    ri.seed = 1;
    tap_ok(fp_store_begin_run(st, &ri, &run) == FP_OK, "run begun");

    fp_probe *p = NULL;
    fp_probe_create(&p);
    fp_hist_probe *hp = NULL;
    tap_ok(fp_hist_probe_create(&hp, L, 3, 0, st, run) == FP_OK && fp_hist_probe_attach(hp, p) == FP_OK,
           "hist probe every 3 steps");
    fp_model_set_probe(m, p);
    float *old = malloc(fp_model_num_params(m) * sizeof(float));
    float scale = 1024.0f;
    size_t wg_nonfinite = 0;
    /* p2 gets the weight roles from the caller's one pass after the optimizer (fp_probe_caller_roles):
     * its histograms must equal those the model hands p during forward / backward */
    fp_probe *p2 = NULL;
    fp_hist_probe *hp2 = NULL;
    fp_probe_create(&p2);
    fp_hist_probe_create(&hp2, L, 3, 0, NULL, 0);
    fp_hist_probe_attach(hp2, p2);
    const unsigned wroles = FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT) | FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD);
    fp_probe_caller_roles(p2, wroles);
    int same_params = 1, wants_ok = 1;
    for (int step = 0; step < 5; step++) {
        fp_probe_step_begin(p, step, scale);
        fp_probe_step_begin(p2, step, scale);
        if (step % 3 == 0)
            wants_ok &= !(fp_probe_wants(p2) & wroles) && (fp_probe_wants_all(p2) & wroles) == wroles &&
                        (fp_probe_wants(p) & wroles) == wroles;
        fp_model_zero_grad(m);
        float loss;
        fp_model_train_step_scaled(m, &loss, NULL, NULL, x, labels, NB, scale);
        memcpy(old, fp_model_params(m), fp_model_num_params(m) * sizeof(float));
        fp_unscale_and_check(fp_model_grads(m), fp_model_num_params(m), 1.0f / scale);
        float *w = fp_model_params(m), *g = fp_model_grads(m);
        for (size_t i = 0; i < fp_model_num_params(m); i++)   /* plain SGD, lr 0.01 */
            w[i] -= 0.01f * g[i];
        fp_probe_sample_params(p, m, old, fp_model_grads(m), NULL);
        fp_probe_sample_params(p2, m, old, fp_model_grads(m), NULL);
        fp_probe_step_end(p2);
        if (step % 3 == 0)
            for (int l = 0; l < L; l++)
                for (int r = FP_ROLE_WEIGHT; r <= FP_ROLE_UPDATE; r++) {
                    const fp_hist_t *a = fp_hist_probe_get(hp2, l, (fp_tensor_role)r);
                    size_t pc;
                    fp_model_layer_params(m, l, NULL, &pc);
                    same_params &= pc ? a != NULL : a == NULL;
                }
        if (step == 3) {   /* compare the unscaled weight-gradient histogram with the real gradient */
            fp_hist_t ref;
            fp_hist_init(&ref);
            size_t off, cnt;
            fp_model_layer_params(m, 8, &off, &cnt);
            fp_hist_add(&ref, g + off, cnt);
            fp_probe_step_end(p);
            const fp_hist_t *got = fp_hist_probe_get(hp, 8, FP_ROLE_WEIGHT_GRAD);
            tap_ok(got && got->count == cnt && got->amax == ref.amax &&
                       memcmp(got->binade, ref.binade, sizeof ref.binade) == 0,
                   "weight gradient recorded unscaled (fc: amax %g = %g)", got ? got->amax : -1.0, ref.amax);
            wg_nonfinite = got ? got->nan + got->pos_inf + got->neg_inf : 1;
            continue;
        }
        fp_probe_step_end(p);
        if (step == 0) {
            int all = 1;
            for (int l = 0; l < L; l++) {
                size_t pc;
                fp_model_layer_params(m, l, NULL, &pc);
                for (int r = 0; r < FP_ROLE_COUNT; r++) {
                    int has_params_role = r == FP_ROLE_WEIGHT || r == FP_ROLE_WEIGHT_GRAD || r == FP_ROLE_UPDATE;
                    const fp_hist_t *h = fp_hist_probe_get(hp, l, (fp_tensor_role)r);
                    all &= (h != NULL) == (!has_params_role || pc > 0);
                    if (h && r == FP_ROLE_ACTIVATION) {
                        const fp_layer_info *li = fp_model_layer(m, l);
                        all &= h->count == (uint64_t)li->out.h * li->out.w * li->out.c * NB;
                    }
                }
            }
            tap_ok(all, "step 0: a histogram for every layer and role that applies");
            /* fp16 activations hold no value the fp16 classes call overflow / underflow */
            const fp_hist_t *a = fp_hist_probe_get(hp, 0, FP_ROLE_ACTIVATION);
            tap_ok(a && a->cls[FP_FMT_FP16][FP_CLASS_OVERFLOW] == 0 && a->cls[FP_FMT_FP16][FP_CLASS_UNDERFLOW] == 0,
                   "fp16 activations: no fp16 overflow / underflow class");
        }
    }
    tap_is_int(wg_nonfinite, 0, "no non-finite weight gradient");
    for (int l = 0; l < L; l++)   /* the last sampling step (3) of both */
        for (int r = FP_ROLE_WEIGHT; r <= FP_ROLE_UPDATE; r++) {
            const fp_hist_t *a = fp_hist_probe_get(hp, l, (fp_tensor_role)r), *b = fp_hist_probe_get(hp2, l, (fp_tensor_role)r);
            same_params &= (a == NULL) == (b == NULL) && (!a || (same_counts(a, b) && a->amax == b->amax));
        }
    tap_ok(wants_ok, "caller roles: left out of what the model is asked for, still wanted by the probe");
    tap_ok(same_params, "weights, unscaled weight gradients and updates from the caller's pass = the model's");
    fp_hist_probe_free(hp2);
    fp_probe_free(p2);
    tap_is_int(fp_hist_probe_last_step(hp), 3, "last sampling step is 3 (period 3, steps 0..4)");
    tap_ok(fp_store_flush(st) == FP_OK && fp_hist_probe_status(hp) == FP_OK, "store flushed");
    char q[512];
    snprintf(q, sizeof q, "SELECT COUNT(DISTINCT step) FROM histograms WHERE run=%lld", (long long)run);
    tap_is_int(tu_sql_int(db, q), 2, "histograms stored at steps 0 and 3 only");
    int nparam_layers = 0;
    for (int l = 0; l < L; l++) {
        size_t pc;
        fp_model_layer_params(m, l, NULL, &pc);
        nparam_layers += pc > 0;
    }
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM histograms WHERE run=%lld AND step=0", (long long)run);
    tap_is_int(tu_sql_int(db, q), 2 * L + 3 * nparam_layers, "rows: 2 per layer + 3 per layer with parameters");
    /* class columns equal the blob's counts and the histogram's */
    const fp_hist_t *h3 = fp_hist_probe_get(hp, 4, FP_ROLE_ACTIVATION);
    snprintf(q, sizeof q,
             "SELECT fp16_normal + fp16_subnormal + fp16_underflow + fp16_round_to_max + fp16_overflow + zero + nan + "
             "pos_inf + neg_inf FROM histograms WHERE run=%lld AND step=3 AND layer=4 AND role=0",
             (long long)run);
    long long total = tu_sql_int(db, q);
    tap_is_int(total, (long long)h3->count, "class counts + zero/nan/inf = count (%lld)", total);
    snprintf(q, sizeof q, "SELECT fp16_subnormal FROM histograms WHERE run=%lld AND step=3 AND layer=4 AND role=0",
             (long long)run);
    tap_is_int(tu_sql_int(db, q), (long long)h3->cls[FP_FMT_FP16][FP_CLASS_SUBNORMAL], "fp16_subnormal column");
    uint64_t h3count = h3->count;
    fp_probe_free(p);
    fp_hist_probe_free(hp);
    fp_store_close(st, FP_RUN_FINISHED, NULL);
    /* the blob (decoded by the reader) agrees with the class columns and with the probe's histogram */
    fp_reader_t *rd = NULL;
    fp_hist_row_t *rows = NULL;
    size_t nrows = 0;
    int ok = fp_reader_open(&rd, db) == FP_OK && fp_reader_histograms(rd, run, 4, 3, &rows, &nrows) == FP_OK;
    const fp_hist_t *bh = NULL;
    for (size_t i = 0; ok && i < nrows; i++)
        if (rows[i].role == FP_ROLE_ACTIVATION && rows[i].step == 3)
            bh = &rows[i].hist;
    tap_ok(bh != NULL, "blob of layer 4 activation at step 3 read back");
    if (bh) {
        snprintf(q, sizeof q, "SELECT e5m2_underflow * 1000003 + bf16_normal FROM histograms WHERE run=%lld AND step=3 "
                 "AND layer=4 AND role=0", (long long)run);
        tap_is_int(tu_sql_int(db, q),
                   (long long)(bh->cls[FP_FMT_E5M2][FP_CLASS_UNDERFLOW] * 1000003 + bh->cls[FP_FMT_BF16][FP_CLASS_NORMAL]),
                   "blob class counts = columns");
        tap_is_uint(bh->count, h3count, "blob count = probe's count");
    } else {
        tap_skip(2, "no blob");
    }
    free(rows);
    fp_reader_close(rd);
    free(old);
    free(db);
    tu_rmdir(dir);
    fp_model_free(m);
    return tap_done();
}
