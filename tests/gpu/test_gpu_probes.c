/* test_gpu_probes.c — the GPU probes wired into a short CUDA comparison (trainer/run/compare.c): tinynet fp32 vs
 * fp16 on the CUDA backend writes CUPTI kernel rows (classified, only at traced steps, and every cuDNN / cuBLAS
 * kernel attributed to a (layer, phase): they launch through the driver API), NVML device samples naming the
 * arms' runs, and steps whose energy is not NULL, and reports both in info events. Skips with a TAP reason when
 * built without CUDA or when no GPU is usable; the NVML / CUPTI checks skip with their reason when the machine
 * refuses them (recorded as an info event, which is checked). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#ifdef HAVE_CUDA
#include <sqlite3.h>
#include "error.h"
#include "probe/probe.h"
#include "store_testutil.h"
#include "trainer/run/compare.h"

static long long q(const char *db, const char *fmt, long long a)
{
    char sql[512];
    snprintf(sql, sizeof sql, fmt, a);
    return tu_sql_int(db, sql);
}

/* Marks of library kernels in CUPTI's (mangled) kernel names: cuDNN's engines, xmma / CUTLASS / cask
 * convolutions and GEMMs, cuDNN's batchnorm and layout kernels, cuBLASLt's GEMMs (probe/kernel_class.c
 * classes them by the same marks). None of our own kernels (the .cu files of trainer/cuda: k_add,
 * sgd_kernel, ...) has one. */
static const char *const lib_marks[] = {"cudnn", "xmma", "implicit_convolve", "bn_fw", "bn_bw", "nhwc", "nchw",
                                        "cutlass", "cask", "gemm", "gemv", "nvjet", "winograd"};

/* TAP diagnostics: one line per row of sql (column 0 as text, column 1 as a count when there is one). */
static void diag_rows(const char *db, const char *prefix, const char *sql)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            const unsigned char *t = sqlite3_column_text(st, 0);
            if (sqlite3_column_count(st) > 1)
                tap_diag("%s%.160s (x%lld)", prefix, t ? (const char *)t : "?", (long long)sqlite3_column_int64(st, 1));
            else
                tap_diag("%s%.300s", prefix, t ? (const char *)t : "?");
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
}

/* The names of up to 5 distinct kernels of the run without a (layer, phase), and how often; the tracer's
 * events (an activity kind CUPTI refused at a traced step, the trace counts). */
static void diag_trace(const char *db, long long run, const char *arm)
{
    char sql[400], prefix[64];
    snprintf(sql, sizeof sql, "SELECT coalesce(s.value, '?'), count(*) FROM kernels k LEFT JOIN StringIds s ON "
             "s.id = k.shortName WHERE k.run = %lld AND (k.layer IS NULL OR k.phase IS NULL) GROUP BY k.shortName "
             "ORDER BY count(*) DESC LIMIT 5", run);
    snprintf(prefix, sizeof prefix, "%s: no (layer, phase): ", arm);
    diag_rows(db, prefix, sql);
    snprintf(sql, sizeof sql, "SELECT text FROM events WHERE run = %lld AND text LIKE 'kernel trace (CUPTI)%%'", run);
    snprintf(prefix, sizeof prefix, "%s: event: ", arm);
    diag_rows(db, prefix, sql);
}

/* SELECT what FROM the run's library kernels (k: kernels, s: their names) [AND cond]. */
static long long qlib(const char *db, const char *what, long long run, const char *cond)
{
    char marks[1024], sql[2048];
    size_t len = 0;
    for (size_t i = 0; i < sizeof lib_marks / sizeof *lib_marks; i++)
        len += (size_t)snprintf(marks + len, sizeof marks - len, "%ss.value LIKE '%%%s%%'", i ? " OR " : "",
                                lib_marks[i]);
    snprintf(sql, sizeof sql, "SELECT %s FROM kernels k JOIN StringIds s ON s.id = k.shortName WHERE k.run = %lld "
             "AND (%s)%s%s", what, run, marks, cond ? " AND " : "", cond ? cond : "");
    return tu_sql_int(db, sql);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    char *dir = tu_mkdir();
    if (!dir)
        tap_skip_all("cannot create a temporary directory");
    char *db = tu_path(dir, "gpu.db");

    /* what this machine allows, asked the way compare_open.c asks (CUPTI is opened by the comparison itself) */
    fp_nvml *nv = NULL;
    fp_nvml_open(&nv, NULL, 0);
    int have_nvml = fp_nvml_available(nv);
    char nvml_reason[256];
    snprintf(nvml_reason, sizeof nvml_reason, "NVML unavailable: %s", fp_nvml_reason(nv));
    fp_nvml_close(nv);

    tap_plan(11);
    fp_compare_config cfg;
    gtu_compare_config(&cfg, db, "synthetic:512", 32, 12, 6, 3);   /* batch 32, 12 steps, eval every 6, turns of 3 */
    cfg.trace_every = 2;   /* steps 2, 4, ..., 12 traced (steps count from 1) */
    fp_compare_result res;
    int rc = fp_compare_train(&cfg, &res);
    if (!tap_ok(rc == FP_OK && res.status == FP_RUN_FINISHED && res.nfailed == 0,
                "a 12-step CUDA comparison fp32 vs fp16 finishes (%s)", rc ? res.message : "ok")) {
        tap_skip(10, "the comparison failed");
        return tap_done();
    }
    long long r0 = res.arms[0].run_id, r1 = res.arms[1].run_id;

    /* CUPTI */
    long long unavailable = q(db, "SELECT count(*) FROM events WHERE run = %lld AND kind = 'info' AND text LIKE "
                                  "'kernel trace (CUPTI): unavailable:%%'", r0);
    if (unavailable > 0) {
        tap_ok(q(db, "SELECT count(*) FROM steps WHERE run = %lld", r0) == 12,
               "CUPTI refused: recorded as unavailable, training went on (12 steps)");
        tap_skip(5, "CUPTI unavailable on this machine (see the run's info event)");
        diag_trace(db, r0, "fp32");
    } else {
        long long k0 = q(db, "SELECT count(*) FROM kernels WHERE run = %lld", r0);
        long long k1 = q(db, "SELECT count(*) FROM kernels WHERE run = %lld", r1);
        tap_ok(k0 > 0 && k1 > 0, "kernel rows under both runs (fp32 %lld, fp16 %lld)", k0, k1);
        long long classed = q(db, "SELECT count(*) FROM kernels WHERE run = %lld AND kernelClass IS NOT NULL", r1);
        long long in_layer = q(db, "SELECT count(*) FROM kernels WHERE run = %lld AND layer >= 0 AND phase >= 0", r1);
        tap_ok(classed == k1 && in_layer > 0, "fp16's kernels all classified (%lld of %lld), %lld attributed to a "
               "(layer, phase)", classed, k1, in_layer);
        /* cuDNN and cuBLASLt launch through the driver API: without DRIVER records their kernels get no layer */
        int lib_ok = 1;
        char lib_msg[256] = "";
        size_t ml = 0;
        for (int a = 0; a < 2; a++) {
            long long run = a ? r1 : r0;
            long long n = qlib(db, "count(*)", run, NULL);
            long long attributed = qlib(db, "count(*)", run, "k.layer >= 0 AND k.phase >= 0");
            lib_ok &= n > 0 && attributed == n;
            ml += (size_t)snprintf(lib_msg + ml, sizeof lib_msg - ml, "%s%s %lld of %lld", a ? ", " : "",
                                   a ? "fp16" : "fp32", attributed, n);
        }
        tap_ok(lib_ok, "every cuDNN / cuBLAS kernel carries a layer and a phase (%s)", lib_msg);
        long long phases0 = qlib(db, "count(DISTINCT k.phase)", r0, "k.phase >= 0");
        long long phases1 = qlib(db, "count(DISTINCT k.phase)", r1, "k.phase >= 0");
        long long fwd1 = qlib(db, "count(*)", r1, "k.phase = 0");
        tap_ok(phases0 >= 2 && phases1 >= 2 && fwd1 > 0, "library kernels in the forward and a backward phase "
               "(distinct phases: fp32 %lld, fp16 %lld)", phases0, phases1);
        long long odd = q(db, "SELECT count(*) FROM kernels WHERE run = %lld AND step %% 2 = 1", r0);
        long long traced0 = q(db, "SELECT count(DISTINCT step) FROM kernels WHERE run = %lld", r0);
        long long traced1 = q(db, "SELECT count(DISTINCT step) FROM kernels WHERE run = %lld", r1);
        tap_ok(odd == 0 && traced0 == 6 && traced1 == 6, "only traced steps have kernel rows, and each of them does "
               "(rows at odd steps %lld; traced steps with rows: fp32 %lld, fp16 %lld of 6)", odd, traced0, traced1);
        tap_ok(q(db, "SELECT count(*) FROM events WHERE run = %lld AND text LIKE '%%kernel rows%%records dropped%%'",
                 r0) == 1, "the run's trace counts (kernel rows, dropped records, CUPTI buffers) in one info event");
        for (int a = 0; a < 2; a++) {   /* how much of the GPU time the layers account for */
            long long run = a ? r1 : r0;
            long long all = q(db, "SELECT coalesce(sum(end - start), 0) FROM kernels WHERE run = %lld", run);
            long long in = q(db, "SELECT coalesce(sum(end - start), 0) FROM kernels WHERE run = %lld AND layer >= 0 "
                                 "AND phase >= 0", run);
            long long n = q(db, "SELECT count(*) FROM kernels WHERE run = %lld", run);
            long long nin = q(db, "SELECT count(*) FROM kernels WHERE run = %lld AND layer >= 0 AND phase >= 0", run);
            tap_diag("%s: %.1f%% of kernel time (%lld of %lld ns) and %lld of %lld kernels attributed to a (layer, "
                     "phase)", a ? "fp16" : "fp32", all > 0 ? 100.0 * (double)in / (double)all : 0.0, in, all, nin, n);
            diag_trace(db, run, a ? "fp16" : "fp32");
        }
    }

    /* NVML */
    if (!have_nvml) {
        tap_ok(q(db, "SELECT count(*) FROM events WHERE run = %lld AND text LIKE 'GPU energy (NVML): unavailable:%%'",
                 r0) == 1, "NVML refused: recorded as unavailable (%s)", nvml_reason);
        tap_skip(3, nvml_reason);
    } else {
        long long s0 = q(db, "SELECT count(*) FROM device_samples WHERE run = %lld", r0);
        long long s1 = q(db, "SELECT count(*) FROM device_samples WHERE run = %lld", r1);
        char sql[200];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM device_samples WHERE run NOT IN (%lld, %lld)", r0, r1);
        long long stray = tu_sql_int(db, sql);
        tap_ok(s0 + s1 > 0 && stray == 0, "device samples name the arms' runs (fp32 %lld, fp16 %lld, others %lld)",
               s0, s1, stray);
        long long null0 = q(db, "SELECT count(*) FROM steps WHERE run = %lld AND energy_j IS NULL", r0);
        long long null1 = q(db, "SELECT count(*) FROM steps WHERE run = %lld AND energy_j IS NULL", r1);
        tap_ok(null0 == 0 && null1 == 0 && q(db, "SELECT count(*) FROM steps WHERE run = %lld", r1) == 12,
               "every step row has its energy (NULL: fp32 %lld, fp16 %lld)", null0, null1);
        /* the counter is in mJ and a turn takes some milliseconds: a turn may count 0 J, never less */
        tap_ok(q(db, "SELECT count(*) FROM steps WHERE run > %lld AND energy_j < 0", 0) == 0 &&
                   q(db, "SELECT count(*) FROM steps WHERE energy_j > 0", 0) > 0,
               "step energy is >= 0 everywhere and > 0 somewhere");
        tap_ok(q(db, "SELECT count(*) FROM steps WHERE run = %lld AND energy_j IS NOT NULL AND power_w IS NULL", r1) == 0,
               "power is filled wherever energy is");
    }
    free(db);
    if (tu_rmdir(dir) != 0)
        tap_diag("could not remove the scratch directory");
    return tap_done();
#endif
}
