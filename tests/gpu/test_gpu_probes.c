/* test_gpu_probes.c — the GPU probes wired into a short CUDA comparison (trainer/compare.c): tinynet fp32 vs
 * fp16 on the CUDA backend writes CUPTI kernel rows (classified, attributed to layers, under each arm's run),
 * NVML device samples naming the arms' runs, and steps whose energy is not NULL, and reports both in info
 * events. Skips with a TAP reason when built without CUDA or when no GPU is usable; the NVML / CUPTI checks
 * skip with their reason when the machine refuses them (recorded as an info event, which is checked). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu/require_gpu.h"
#include "tap.h"
#ifdef HAVE_CUDA
#include "error.h"
#include "probe/probe.h"
#include "store_testutil.h"
#include "trainer/backend_cuda.h"
#include "trainer/compare.h"

static long long q(const char *db, const char *fmt, long long a)
{
    char sql[512];
    snprintf(sql, sizeof sql, fmt, a);
    return tu_sql_int(db, sql);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/fp16probe-gpuprobes-XXXXXX");
    if (!mkdtemp(dir))
        tap_skip_all("cannot create a temporary directory");
    char db[128];
    snprintf(db, sizeof db, "%s/gpu.db", dir);

    /* what this machine allows, asked the way compare.c asks (CUPTI is opened by the comparison itself) */
    fp_nvml *nv = NULL;
    fp_nvml_open(&nv, NULL, 0);
    int have_nvml = fp_nvml_available(nv);
    char nvml_reason[256];
    snprintf(nvml_reason, sizeof nvml_reason, "NVML unavailable: %s", fp_nvml_reason(nv));
    fp_nvml_close(nv);

    tap_plan(9);
    fp_compare_config cfg;
    fp_compare_config_default(&cfg);
    cfg.base.arm.model = "tinynet";
    cfg.base.arm.image_size = 32;
    cfg.base.arm.seed = 5;
    cfg.base.arm.backend = fp_backend_cuda();
    fp_lr_schedule_default(&cfg.base.arm.lr, FP_LR_CONSTANT, 0.01);
    cfg.base.data = "synthetic:512";
    cfg.base.batch = 32;
    cfg.base.steps = 12;
    cfg.base.loader_threads = 1;
    cfg.base.eval_batches = 1;
    cfg.base.eval_every = 6;
    cfg.base.db = db;
    cfg.precision = "fp32,fp16";
    cfg.turn = 3;
    cfg.trace_every = 2;   /* steps 0, 2, 4, ... traced */
    fp_compare_result res;
    int rc = fp_compare_train(&cfg, &res);
    if (!tap_ok(rc == FP_OK && res.status == FP_RUN_FINISHED && res.nfailed == 0,
                "a 12-step CUDA comparison fp32 vs fp16 finishes (%s)", rc ? res.message : "ok")) {
        tap_skip(8, "the comparison failed");
        return tap_done();
    }
    long long r0 = res.arms[0].run_id, r1 = res.arms[1].run_id;

    /* CUPTI */
    long long unavailable = q(db, "SELECT count(*) FROM events WHERE run = %lld AND kind = 'info' AND text LIKE "
                                  "'kernel trace (CUPTI): unavailable:%%'", r0);
    if (unavailable > 0) {
        tap_ok(q(db, "SELECT count(*) FROM steps WHERE run = %lld", r0) == 12,
               "CUPTI refused: recorded as unavailable, training went on (12 steps)");
        tap_skip(3, "CUPTI unavailable on this machine (see the run's info event)");
    } else {
        long long k0 = q(db, "SELECT count(*) FROM kernels WHERE run = %lld", r0);
        long long k1 = q(db, "SELECT count(*) FROM kernels WHERE run = %lld", r1);
        tap_ok(k0 > 0 && k1 > 0, "kernel rows under both runs (fp32 %lld, fp16 %lld)", k0, k1);
        long long classed = q(db, "SELECT count(*) FROM kernels WHERE run = %lld AND kernelClass IS NOT NULL", r1);
        long long in_layer = q(db, "SELECT count(*) FROM kernels WHERE run = %lld AND layer >= 0 AND phase >= 0", r1);
        tap_ok(classed == k1 && in_layer > 0, "fp16's kernels all classified (%lld of %lld), %lld attributed to a "
               "(layer, phase)", classed, k1, in_layer);
        long long odd = q(db, "SELECT count(*) FROM kernels WHERE run = %lld AND step %% 2 = 1", r0);
        tap_ok(odd == 0, "only traced steps (every 2nd) have kernel rows (%lld rows at odd steps)", odd);
        tap_ok(q(db, "SELECT count(*) FROM events WHERE run = %lld AND text LIKE '%%kernel rows%%records dropped%%'",
                 r0) == 1, "the run's trace counts (kernel rows, dropped records, CUPTI buffers) in one info event");
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
    char rm[160];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
#endif
}
