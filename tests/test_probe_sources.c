/* test_probe_sources.c — the measuring backends that may be unavailable: RAPL on a fake powercap tree
 * (package zones only, psys and sub-zones skipped, wraparound through max_energy_range_uj, unreadable
 * -> NaN), perf counters (available or a reason, never 0), NVML with a missing library, CUPTI / NVTX
 * stand-ins, process memory, and the tensor-core kernel-name heuristic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "error.h"
#include "probe/probe.h"
#include "tap.h"
#include "testutil.h"

static void put(const char *dir, const char *zone, const char *file, const char *text)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, zone);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s/%s", dir, zone, file);
    tu_write_file(p, text, strlen(text));
}

int main(void)
{
    /* ---- RAPL on a fake tree ---- */
    char *dir = tu_mkdir();
    put(dir, "intel-rapl:0", "name", "package-0\n");
    put(dir, "intel-rapl:0", "energy_uj", "1000000\n");
    put(dir, "intel-rapl:0", "max_energy_range_uj", "2000000\n");
    put(dir, "intel-rapl:1", "name", "psys\n");
    put(dir, "intel-rapl:1", "energy_uj", "5000000\n");
    put(dir, "intel-rapl:0:0", "name", "core\n");
    put(dir, "intel-rapl:0:0", "energy_uj", "700000\n");
    put(dir, "intel-rapl-mmio:0", "name", "package-0\n");
    put(dir, "intel-rapl-mmio:0", "energy_uj", "3\n");
    fp_rapl *r = NULL;
    tap_ok(fp_rapl_open(&r, dir) == FP_OK && fp_rapl_available(r), "rapl: fake tree available (%s)", fp_rapl_reason(r));
    tap_is_int(fp_rapl_zone_count(r), 1, "rapl: one package zone (psys, sub-zones, mmio skipped)");
    tap_is_double(fp_rapl_energy_j(r), 0.0, 0, 0, "rapl: 0 J at open");
    put(dir, "intel-rapl:0", "energy_uj", "1500000\n");
    tap_is_double(fp_rapl_energy_j(r), 0.5, 1e-12, 0, "rapl: +0.5 J");
    put(dir, "intel-rapl:0", "energy_uj", "250000\n");   /* wrapped: 1.5 -> 2.0 (max) -> 0.25 */
    tap_is_double(fp_rapl_energy_j(r), 1.25, 1e-12, 0, "rapl: wraparound unwrapped with max_energy_range_uj");
    /* per-step figures through the probe set */
    fp_probe *p = NULL;
    fp_probe_create(&p);
    tap_ok(fp_rapl_attach(r, p) == FP_OK, "rapl: attached");
    tap_ok(isnan(fp_rapl_step_j(r)), "rapl: no step yet -> NaN");
    fp_probe_step_begin(p, 0, 1);
    put(dir, "intel-rapl:0", "energy_uj", "450000\n");
    fp_probe_step_end(p);
    tap_is_double(fp_rapl_step_j(r), 0.2, 1e-12, 0, "rapl: energy of the step");
    /* unreadable counter -> unavailable (chmod does not bind root: remove it instead) */
    char zp[1024];
    snprintf(zp, sizeof zp, "%s/intel-rapl:0/energy_uj", dir);
    remove(zp);
    tap_ok(isnan(fp_rapl_energy_j(r)), "rapl: counter gone -> NaN, not 0");
    fp_rapl_close(r);
    fp_rapl *r2 = NULL;
    fp_rapl_open(&r2, dir);
    tap_ok(!fp_rapl_available(r2) && strstr(fp_rapl_reason(r2), "energy_uj") && isnan(fp_rapl_energy_j(r2)),
           "rapl: unreadable tree -> unavailable: %s", fp_rapl_reason(r2));
    tap_ok(fp_rapl_attach(r2, p) == FP_EUNAVAIL && isnan(fp_rapl_step_j(r2)), "rapl: unavailable cannot attach, NaN");
    fp_rapl_close(r2);
    fp_rapl *r3 = NULL;
    fp_rapl_open(&r3, "/nonexistent/powercap");
    tap_ok(!fp_rapl_available(r3) && fp_rapl_reason(r3)[0], "rapl: missing root -> unavailable: %s", fp_rapl_reason(r3));
    fp_rapl_close(r3);
    fp_rapl *r4 = NULL;   /* the real machine: available or a reason, never a zero pretending */
    fp_rapl_open(&r4, NULL);
    double e = fp_rapl_energy_j(r4);
    tap_ok(fp_rapl_available(r4) ? !isnan(e) : (isnan(e) && fp_rapl_reason(r4)[0]), "rapl: this machine: %s",
           fp_rapl_available(r4) ? "available" : fp_rapl_reason(r4));
    fp_rapl_close(r4);
    tu_rmdir(dir);

    /* ---- perf counters ---- */
    fp_perf *pc = NULL;
    tap_ok(fp_perf_open(&pc) == FP_OK && pc, "perf: opened (available or not)");
    int64_t cyc = 0, ins = 0;
    if (fp_perf_available(pc)) {
        fp_perf_attach(pc, p);
        fp_probe_step_begin(p, 1, 1);
        volatile double s = 0;
        for (int i = 0; i < 1000000; i++)
            s += i * 0.5;
        fp_probe_step_end(p);
        fp_perf_step(pc, &cyc, &ins);
        tap_ok(cyc > 0 && ins > 0, "perf: step counts %lld cycles, %lld instructions", (long long)cyc, (long long)ins);
    } else {
        int rc = fp_perf_read(pc, &cyc, &ins);
        tap_ok(rc == FP_EUNAVAIL && cyc == -1 && ins == -1 && fp_perf_reason(pc)[0],
               "perf: unavailable -> -1 (NULL), never 0: %s", fp_perf_reason(pc));
    }
    tap_ok(fp_perf_available(pc) || fp_perf_attach(pc, p) == FP_EUNAVAIL, "perf: unavailable cannot attach");
    fp_perf_close(pc);

    /* ---- NVML: a missing library ---- */
    fp_nvml *nv = NULL;
    tap_ok(fp_nvml_open(&nv, "libnvidia-ml-does-not-exist.so.1", 0) == FP_OK && !fp_nvml_available(nv),
           "nvml: missing library -> unavailable");
    tap_ok(strstr(fp_nvml_reason(nv), "cannot load") != NULL, "nvml: reason says why: %s", fp_nvml_reason(nv));
    fp_device_sample_t ds;
    tap_ok(isnan(fp_nvml_energy_j(nv)) && fp_nvml_sample(nv, &ds) == FP_EUNAVAIL && isnan(ds.power_w) &&
               ds.mem_used == -1 && ds.sm_clock_mhz == -1 && isnan(ds.temperature_c),
           "nvml: readings NaN / -1, never 0");
    tap_ok(fp_nvml_start_sampler(nv, NULL, 1, 10) == FP_EUNAVAIL, "nvml: no sampler when unavailable");
    fp_nvml_close(nv);
    nv = NULL;
    fp_nvml_open(&nv, NULL, 0);   /* the real library: absent here, or a GPU machine */
    tap_ok(fp_nvml_available(nv) ? fp_nvml_device_name(nv)[0] != 0 : fp_nvml_reason(nv)[0] != 0, "nvml: this machine: %s",
           fp_nvml_available(nv) ? fp_nvml_device_name(nv) : fp_nvml_reason(nv));
    fp_nvml_close(nv);

    /* ---- CUPTI / NVTX: without a GPU they say unavailable, and never break the probe set ---- */
    fp_cupti *cu = NULL;
    tap_ok(fp_cupti_open(&cu, NULL, 1, 10) == FP_OK, "cupti: open returns");
    if (!fp_cupti_available(cu))
        tap_ok(fp_cupti_attach(cu, p) == FP_EUNAVAIL && fp_cupti_reason(cu)[0], "cupti: unavailable: %s",
               fp_cupti_reason(cu));
    else
        tap_ok(fp_cupti_attach(cu, p) == FP_OK, "cupti: available and attached");
    fp_cupti_close(cu);
    tap_ok(fp_nvtx_compiled() == 0 || fp_nvtx_compiled() == 1, "nvtx: compiled=%d", fp_nvtx_compiled());

    /* ---- process memory ---- */
    int64_t rss = fp_process_rss_bytes(), peak = fp_process_peak_rss_bytes();
    tap_ok(rss > 0 && peak >= rss / 2, "process rss %lld, peak %lld", (long long)rss, (long long)peak);

    fp_probe_free(p);
    return tap_done();
}
