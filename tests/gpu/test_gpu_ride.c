/* test_gpu_ride.c — the per-layer rounding error of a device arm measured on the GPU (trainer/analysis
 * precision_device.c): resnet18 at 32x32 with its fp32 reference on the CUDA backend, fp_prec_err_compare with
 * the device path (clones on instances of their own, capture and sums on the device) against the host path on the
 * same weights and batch, per policy; the device path's sampled step downloads nothing through the backend table
 * and waits for the reference's stream only to copy its weights; the clones' memory is reported and given back;
 * and a short CUDA comparison (fp32 vs fp16, --error-every 2) stores a finite row for every layer at every
 * measured step, with the info event on the clones' memory. Skips with a TAP reason when built without CUDA or
 * when no GPU is usable. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#ifdef HAVE_CUDA
#include "error.h"
#include "store_testutil.h"
#include "trainer/analysis/analysis.h"
#include "trainer/backend_cuda.h"
#include "trainer/precision.h"
#include "trainer/run/compare.h"

#define NB 8
#define HW 32
#define NC 10

static void batch(float *x, size_t n, uint64_t s)
{
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
    }
}

static int finite_row(const fp_layer_err_t *r)
{
    return isfinite(r->rel_l2) && isfinite(r->max_abs) && isfinite(r->cosine);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Tolerance of a device row against the host path's (same weights, batch and policy; the device's reference is
 * cuDNN's fp32 with FMA math, its low-precision forward cuDNN's / cuBLASLt's with fp32 accumulation, both in
 * other summation orders than the CPU backend's): the figure is the policy's rounding, which both measure, so
 * each layer's rel_l2 within a factor 2 of the host's (or both below 1e-6), cosine within 1e-3, and the median
 * ratio over the layers within [0.8, 1.25]. */
static int within(const fp_layer_err_t *d, const fp_layer_err_t *h, int L, double *median, int *worst)
{
    double *ratio = malloc((size_t)L * sizeof *ratio);
    int ok = ratio != NULL, nr = 0;
    double wr = 1.0;
    *worst = -1;
    for (int l = 0; ok && l < L; l++) {
        if (d[l].rel_l2 < 1e-6 && h[l].rel_l2 < 1e-6)
            continue;
        double r = h[l].rel_l2 > 0 ? d[l].rel_l2 / h[l].rel_l2 : INFINITY;
        ratio[nr++] = r;
        double off = r > 1 ? r : 1 / r;
        if (off > wr) {
            wr = off;
            *worst = l;
        }
        ok &= r >= 0.5 && r <= 2.0 && fabs(d[l].cosine - h[l].cosine) <= 1e-3;
    }
    *median = NAN;
    if (ok && nr > 0) {
        qsort(ratio, (size_t)nr, sizeof *ratio, cmp_double);
        *median = ratio[nr / 2];
        ok &= *median >= 0.8 && *median <= 1.25;
    }
    free(ratio);
    return ok;
}

/* The short comparison: fp32 vs fp16 tinynet on the CUDA backend, the error measured every 2nd step. */
static void compare_run(void)
{
    char *dir = tu_mkdir();
    if (!dir) {
        tap_skip(3, "cannot create a temporary directory");
        return;
    }
    char *db = tu_path(dir, "ride.db");
    fp_compare_config cfg;
    gtu_compare_config(&cfg, db, "synthetic:256", 16, 4, 4, 2);   /* batch 16, 4 steps, eval every 4, turns of 2 */
    cfg.error_every = 2;
    cfg.hist_every = 2;
    cfg.trace_every = 0;
    fp_compare_result res;
    int rc = fp_compare_train(&cfg, &res);
    if (!tap_ok(rc == FP_OK && res.status == FP_RUN_FINISHED && res.nfailed == 0,
                "a 4-step CUDA comparison fp32 vs fp16 with --error-every 2 finishes (%s)", rc ? res.message : "ok")) {
        tap_skip(2, "the comparison failed");
    } else {
        long long r1 = res.arms[1].run_id;
        char sql[512];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM precision_error WHERE run = %lld AND role = 0", r1);
        long long rows = tu_sql_int(db, sql);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM precision_error WHERE run = %lld AND role = 0 AND rel_l2 IS "
                 "NOT NULL AND abs(rel_l2) < 1e300 AND abs(max_abs) < 1e300 AND cosine IS NOT NULL AND rel_l2 > 0",
                 r1);
        long long finite = tu_sql_int(db, sql);
        snprintf(sql, sizeof sql, "SELECT count(DISTINCT step) FROM precision_error WHERE run = %lld", r1);
        long long steps = tu_sql_int(db, sql);
        snprintf(sql, sizeof sql, "SELECT count(DISTINCT layer) FROM precision_error WHERE run = %lld", r1);
        long long layers = tu_sql_int(db, sql);
        tap_ok(steps == 2 && rows == 2 * layers && finite == rows && layers > 5,
               "fp16's rows: every layer (%lld) at both measured steps (%lld), finite and > 0 (%lld of %lld)", layers,
               steps, finite, rows);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE run = %lld AND text LIKE 'rounding error on the "
                 "GPU: clones of the fp32 arm%%'", r1);
        tap_ok(tu_sql_int(db, sql) == 1, "the clones' memory in one info event of fp16's run");
    }
    free(db);
    tu_rmdir(dir);
}

#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    tap_plan(19);
    fp_model_config mc = {"resnet18", NC, HW, 16, 11, 0};
    fp_model *ref = NULL;
    fp_backend *be = NULL;
    int rc = fp_model_create(&ref, &mc);
    rc = rc ? rc : fp_backend_cuda_create_sized(&be, (size_t)1 << 30, "fp32 arm");
    rc = rc ? rc : fp_model_set_backend(ref, fp_backend_cuda(), be);
    if (!tap_ok(rc == FP_OK, "resnet18 32x32 fp32 on the CUDA backend (%s)", rc ? fp_error_message() : "ok")) {
        tap_skip(18, "no reference model");
        return tap_done();
    }
    int L = fp_model_layer_count(ref);
    size_t nx = (size_t)NB * HW * HW * 3;
    float *x = malloc(nx * sizeof *x);
    int labels[NB];
    batch(x, nx, 7);
    for (int i = 0; i < NB; i++)
        labels[i] = i % NC;
    float loss = 0;   /* one training step: its running statistics and stream as an arm leaves them */
    tap_ok(fp_model_train_step(ref, &loss, NULL, NULL, x, labels, NB) == FP_OK && isfinite(loss),
           "a training step of the reference on the device (loss %.4f)", loss);
    batch(x, nx, 8);

    const char *pols[3] = {"fp16", "bf16", "half"};
    for (int p = 0; p < 3; p++) {
        const fp_policy *pol = fp_policy_find(pols[p]);
        fp_prec_err *ph = NULL, *pd = NULL;
        size_t share0 = fp_backend_cuda_arena_share(1);
        rc = fp_prec_err_create(&ph, ref, pol);
        rc = rc ? rc : fp_prec_err_create(&pd, ref, pol);
        if (!rc) {
            fp_prec_err_set_subbatch(ph, 4);
            fp_prec_err_set_subbatch(pd, 4);
            fp_prec_err_use_device(pd, 1);
        }
        int hrc = rc ? rc : fp_prec_err_compare(ph, ref, x, NB, 5);
        int drc = rc ? rc : fp_prec_err_compare(pd, ref, x, NB, 5);   /* the first: makes the clones */
        long long dn0 = 0, db0 = 0, dn1 = 0, db1 = 0, w0 = fp_backend_cuda_host_waits(be);
        fp_backend_cuda_downloads(&dn0, &db0);
        int drc2 = drc ? drc : fp_prec_err_compare(pd, ref, x, NB, 6);   /* a sampled step with clones made */
        fp_backend_cuda_downloads(&dn1, &db1);
        long long w1 = fp_backend_cuda_host_waits(be);
        int nh = 0, nd = 0;
        const fp_layer_err_t *rh = fp_prec_err_rows(ph, &nh), *rd = fp_prec_err_rows(pd, &nd);
        if (!tap_ok(hrc == FP_OK && drc == FP_OK && drc2 == FP_OK && nh == L && nd == L,
                    "%s: host and device comparisons of %d layers (%s)", pols[p], L,
                    hrc || drc || drc2 ? fp_error_message() : "ok")) {
            tap_skip(p == 0 ? 5 : 2, "the comparison failed");
        } else {
            int fin = 0;
            for (int l = 0; l < L; l++)
                fin += finite_row(&rd[l]) && rd[l].rel_l2 > 0;
            tap_ok(fin == L && fp_prec_err_last_step(pd) == 6, "%s: a finite row > 0 for every layer on the device "
                   "(%d of %d), at step 6", pols[p], fin, L);
            double med;
            int worst;
            int ok = within(rd, rh, L, &med, &worst);
            tap_ok(ok, "%s: device rows within the stated tolerance of the host path's (median rel_l2 ratio %.3f; "
                   "worst layer %d: device %.3e, host %.3e)", pols[p], med, worst, worst >= 0 ? rd[worst].rel_l2 : 0,
                   worst >= 0 ? rh[worst].rel_l2 : 0);
            for (int l = 0; l < L; l += L / 4 > 0 ? L / 4 : 1)
                tap_diag("%s layer %d %s: rel_l2 device %.4e host %.4e; cosine %.8f / %.8f; max_abs %.3e / %.3e",
                         pols[p], l, fp_model_layer(ref, l)->name, rd[l].rel_l2, rh[l].rel_l2, rd[l].cosine,
                         rh[l].cosine, rd[l].max_abs, rh[l].max_abs);
            if (p == 0) {
                tap_ok(dn1 == dn0 && db1 == db0, "fp16: the device path's sampled step downloads nothing through the "
                       "backend table (%lld downloads, %lld bytes)", dn1 - dn0, db1 - db0);
                tap_ok(w1 - w0 <= 2, "fp16: it waits for the reference's stream at most twice (the weight copies): %lld",
                       w1 - w0);
                size_t peak = 0, ws = 0, arenas = fp_prec_err_device_memory(pd, &peak, &ws);
                tap_ok(arenas > 0 && peak > 0 && peak <= arenas, "fp16: the clones' memory is reported (arenas %.1f "
                       "MiB, %.1f MiB in use at most, cuDNN workspaces %.1f MiB)", (double)arenas / 1048576.0,
                       (double)peak / 1048576.0, (double)ws / 1048576.0);
            }
        }
        fp_prec_err_free(ph);
        fp_prec_err_free(pd);
        /* the clones' memory is given back with the analysis; the first policies may load kernels for good, so
         * the last one (half: fp16 kernels, loaded by then) is checked, with 64 MiB for cuDNN's own caches */
        size_t share1 = fp_backend_cuda_arena_share(1);
        tap_diag("%s: 90%% of the free device memory before %.1f MiB, after the analysis was freed %.1f MiB", pols[p],
                 (double)share0 / 1048576.0, (double)share1 / 1048576.0);
        if (p == 2)
            tap_ok(share1 + ((size_t)64 << 20) >= share0, "the clones' device memory is given back (free before "
                   "%.1f MiB, after %.1f MiB, times 0.9)", (double)share0 / 1048576.0, (double)share1 / 1048576.0);
    }

    /* fp32 against itself on the GPU: two fp32 clones with FMA math */
    fp_prec_err *p32 = NULL;
    rc = fp_prec_err_create(&p32, ref, fp_policy_find("fp32"));
    if (!rc) {
        fp_prec_err_use_device(p32, 1);
        rc = fp_prec_err_compare(p32, ref, x, NB, 7);
    }
    int n32 = 0;
    const fp_layer_err_t *r32 = rc ? NULL : fp_prec_err_rows(p32, &n32);
    double worst32 = 0;
    for (int l = 0; r32 && l < n32; l++)
        worst32 = r32[l].rel_l2 > worst32 || isnan(r32[l].rel_l2) ? r32[l].rel_l2 : worst32;
    tap_ok(r32 && n32 == L && worst32 < 1e-5, "fp32 clone against the fp32 clone on the GPU: rel_l2 < 1e-5 on every "
           "layer (worst %.3e)", worst32);
    fp_prec_err_free(p32);
    free(x);
    fp_model_free(ref);

    compare_run();
#endif
    return tap_done();
}
