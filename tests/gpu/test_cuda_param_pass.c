/* test_cuda_param_pass.c — the parameter pass on the GPU (analysis.h fp_param_dev, the CUDA backend's update_delta
 * op): the op's update and counts equal the CPU backend's on the same tensors bit for bit (signed zeros, fp32
 * subnormals, +-Inf, NaN in weights and gradients; sizes around the block and grid boundaries) and bad input gets
 * FP_EINVAL naming the op; after GPU arm steps (tinynet, SGD) under fp32, fp16 (AMP) and `half`, the pass on the
 * device gives the host pass's (fp_probe_sample_params on the downloaded parameters and gradients) lost-update
 * fractions per layer and overall bit for bit and the same weight / weight-gradient / update histograms (counts,
 * amax, min_nonzero; sum_abs to 1e-9 relative); a short CUDA comparison with histograms says its GPU arms' pass ran
 * on the GPU and records their lost updates (with the pass's time) and update histograms. Skips without a GPU. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "error.h"
#include "hist.h"
#include "hist_ref.h"
#include "probe/probe.h"
#include "param_pass_testutil.h"
#include "store_testutil.h"
#include "trainer/analysis/analysis.h"
#include "trainer/backend_cuda.h"
#include "trainer/model.h"
#include "trainer/run/arm.h"
#include "trainer/run/compare.h"

#define MAXL 64

static fp_tensor flat(void *p, size_t n) { return fp_tensor_of(p, FP_DT_F32, (fp_dims){1, 1, 1, (int)n}); }

/* ---- the op: CUDA against CPU on n values (host arrays uploaded) */
static int op_case(const fp_backend_ops *C, fp_backend *cb, const fp_backend_ops *G, fp_backend *gb, const float *nw,
                   const float *old, const float *g, size_t n, const char *what)
{
    size_t bytes = n * sizeof(float), lc = 0, mc = 0, lg = 1, mg = 1;
    float *dc = malloc(bytes), *dg = malloc(bytes);
    void *x[4] = {NULL, NULL, NULL, NULL};
    int rc = dc && dg ? C->update_delta(cb, flat(dc, n), flat((void *)nw, n), flat((void *)old, n), flat((void *)g, n),
                                        &lc, &mc)
                      : FP_ENOMEM;
    for (int k = 0; k < 4 && !rc; k++)
        rc = G->alloc(gb, &x[k], bytes);
    rc = rc ? rc : G->upload(gb, x[1], nw, bytes);
    rc = rc ? rc : G->upload(gb, x[2], old, bytes);
    rc = rc ? rc : G->upload(gb, x[3], g, bytes);
    rc = rc ? rc : G->update_delta(gb, flat(x[0], n), flat(x[1], n), flat(x[2], n), flat(x[3], n), &lg, &mg);
    rc = rc ? rc : G->download(gb, dg, x[0], bytes);
    rc = rc ? rc : G->sync(gb);
    if (rc)
        tap_diag("%s: %s", what, fp_error_message());
    int same = rc == FP_OK && lc == lg && mc == mg && memcmp(dc, dg, bytes) == 0;
    tap_ok(same, "%s (%zu values): CUDA update_delta = CPU's, d bit for bit, lost / moved %zu / %zu (CPU %zu / %zu)",
           what, n, lg, mg, lc, mc);
    for (int k = 0; k < 4; k++)
        G->free(gb, x[k], bytes);
    free(dc);
    free(dg);
    return same;
}

static void test_op(const fp_backend_ops *C, fp_backend *cb, const fp_backend_ops *G, fp_backend *gb)
{
    enum { N = (1 << 20) + 3 };
    float *nw = malloc(N * sizeof *nw), *old = malloc(N * sizeof *old), *g = malloc(N * sizeof *g);
    const float specials[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-39f, INFINITY, -INFINITY, NAN, 3e38f, 1.0f};
    uint64_t s = 17;
    for (size_t i = 0; i < N; i++) {
        old[i] = tu_uniform_pm1(&s) * ldexpf(1.0f, (int)(i % 60) - 140);   /* subnormal differences among them */
        g[i] = i % 13 == 0 ? specials[(i / 13) % 10] : tu_uniform_pm1(&s);
        float u = i % 5 == 0 ? 0.0f : i % 7 == 0 ? old[i] * 1e-9f : tu_uniform_pm1(&s) * ldexpf(1.0f, -(int)(i % 140));
        nw[i] = old[i] - u;
        if (i % 17 == 0)
            old[i] = specials[(i / 17) % 10], nw[i] = i % 34 ? old[i] : -old[i];
    }
    op_case(C, cb, G, gb, nw, old, g, N, "a million values and specials");
    op_case(C, cb, G, gb, nw + 1, old + 1, g + 1, 1, "one value");
    op_case(C, cb, G, gb, nw + 3, old + 3, g + 3, 255, "a block less one (odd start)");
    op_case(C, cb, G, gb, nw, old, g, 256 * 1024 + 1, "a full grid plus one");
    void *x = NULL;
    size_t lost, moved;
    int rc = G->alloc(gb, &x, 4096 * sizeof(float));
    fp_tensor a = flat(x, 1024), b = flat((float *)x + 1024, 1024), c = flat((float *)x + 2048, 1024),
              h16 = fp_tensor_of((float *)x + 3072, FP_DT_F16, (fp_dims){1, 1, 1, 1024});
    rc = rc ? rc : G->update_delta(gb, a, b, c, h16, &lost, &moved);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "update_delta"), "CUDA: a 16-bit gradient: FP_EINVAL (%s)",
           fp_error_message());
    rc = G->update_delta(gb, a, b, c, flat((float *)x + 3072, 1024), NULL, &moved);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "update_delta"), "CUDA: a NULL count: FP_EINVAL (%s)",
           fp_error_message());
    G->free(gb, x, 4096 * sizeof(float));
    free(nw);
    free(old);
    free(g);
}

/* ---- the device pass against the host pass after GPU arm steps */

static void test_arm(const char *policy, const float *x, const int *lab)
{
    enum { S = 32, NB = 8 };
    fp_arm_config ac;
    gtu_arm_config(&ac, "tinynet", 10, S, 0, 7, policy, (size_t)256 << 20);
    ac.lr.base_lr = 1e-3;   /* small steps: `half` loses some */
    fp_arm *a = NULL;
    fp_param_dev *pd = NULL;
    int rc = fp_arm_create(&a, &ac);
    fp_model *m = rc ? NULL : fp_arm_model(a);
    rc = rc ? rc : fp_param_dev_create(&pd, m);
    int L = m ? fp_model_layer_count(m) : 0, ok = rc == FP_OK && L <= MAXL, cells = 0;
    size_t np = m ? fp_model_num_params(m) : 0;
    float *old = malloc((np ? np : 1) * sizeof *old);
    double per_h[MAXL], per_d[MAXL], all_h = NAN, all_d = NAN;
    if (rc)
        tap_diag("%s", fp_error_message());
    for (int step = 1; ok && step <= 3; step++) {
        const fp_backend_ops *o = fp_model_backend_ops(m);
        const float *w = fp_model_backend_params_view(m);   /* the old values, the mirrors left alone */
        rc = w ? o->download(fp_model_backend(m), old, w, np * sizeof *old) : FP_EINTERNAL;
        rc = rc ? rc : o->sync(fp_model_backend(m));
        rc = rc ? rc : fp_param_dev_before(pd, m);
        fp_batch b = gtu_batch(x, lab, NB, S, step);
        fp_arm_step_result r = {0};
        rc = rc ? rc : fp_arm_step(a, &b, &r);
        float scale = r.scale;
        pp_probe_t h, dv;
        pp_probe_open(&h, L, step, scale);
        pp_probe_open(&dv, L, step, scale);
        rc = rc ? rc : fp_param_dev_after(pd, dv.p, m, &all_d, per_d);   /* first: nothing downloaded yet */
        const float *g = rc ? NULL : fp_model_grads(m);
        if (g)
            all_h = fp_probe_sample_params(h.p, m, old, g, per_h);
        fp_probe_step_end(h.p);
        fp_probe_step_end(dv.p);
        if (rc || !g)
            tap_diag("step %d: %s", step, fp_error_message());
        ok = rc == FP_OK && g && pp_same_pass(&h, &dv, all_h, all_d, per_h, per_d, L, 1e-9, &cells);
        if (!ok)
            tap_diag("step %d: lost overall host %.17g device %.17g", step, all_h, all_d);
        pp_probe_close(&h);
        pp_probe_close(&dv);
    }
    tap_ok(ok && cells > 0, "%s: 3 GPU arm steps, the pass on the device = the host pass (%d histograms, lost "
           "updates per layer and overall bit for bit, last %g)", policy, cells, all_h);
    free(old);
    fp_param_dev_free(pd);
    fp_arm_free(a);
}

/* ---- wired into a comparison */
static void test_compare(void)
{
    char db[256];
    snprintf(db, sizeof db, "/tmp/fp16probe-param-pass-%d.db", (int)getpid());
    remove(db);
    fp_compare_config cfg;
    gtu_compare_config(&cfg, db, "synthetic:256", 16, 6, 6, 3);
    cfg.hist_every = 2;
    fp_compare_result res;
    int rc = fp_compare_train(&cfg, &res);
    if (!tap_ok(rc == FP_OK && res.status == FP_RUN_FINISHED && res.nfailed == 0,
                "a 6-step CUDA comparison with histograms every 2 steps finishes (%s)", rc ? res.message : "ok")) {
        tap_skip(2, "the comparison failed");
        return;
    }
    char sql[400];
    int on_gpu = 1, lost = 1, upd = 1;
    for (int k = 0; k < 2; k++) {
        long long run = res.arms[k].run_id;
        snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE run = %lld AND text LIKE 'parameter pass%%on the "
                 "GPU%%'", run);
        on_gpu &= tu_sql_int(db, sql) == 1;
        snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE run = %lld AND text LIKE 'lost updates at step%%"
                 "the parameter pass on the GPU took %% ms outside the step'", run);
        lost &= tu_sql_int(db, sql) >= 1;
        snprintf(sql, sizeof sql, "SELECT count(*) FROM histograms WHERE run = %lld AND role = %d", run,
                 (int)FP_ROLE_UPDATE);
        upd &= tu_sql_int(db, sql) > 0;
    }
    tap_ok(on_gpu, "both arms' runs say their parameter pass ran on the GPU (info event)");
    tap_ok(lost && upd, "... and record lost updates (events with the pass's time) and update histograms at the "
           "histogram steps");
    remove(db);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    const fp_backend_ops *C, *G;
    fp_backend *cb, *gb;
    if (gtu_backends_or_fail(&C, &cb, &G, &gb, (size_t)256 << 20, "param pass test"))
        return tap_done();
    tap_plan(4 + 2 + 3 + 3);
    test_op(C, cb, G, gb);
    G->destroy(gb);
    C->destroy(cb);
    float *x = gtu_images((size_t)8 * 4 * 32 * 32 * 3, 5);
    int *lab = gtu_labels(8 * 4, 10);
    test_arm("fp32", x, lab);
    test_arm("fp16", x, lab);
    test_arm("half", x, lab);
    free(x);
    free(lab);
    test_compare();
    fp_hist_thread_release();
#endif
    return tap_done();
}
