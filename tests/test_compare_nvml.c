/* test_compare_nvml.c — NVML as the comparison uses it, against a stand-in library
 * (tests/test_compare_fake_nvml.c): the device found by PCI bus id (or not), the energy counter in joules,
 * and the background sampler re-targeted from one run to another while it runs (fp_nvml_set_run), every
 * sample landing under one of the two runs and both runs getting samples. Skips when the stand-in cannot be loaded. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "probe/probe.h"
#include "store.h"
#include "store_testutil.h"
#include "tap.h"

#ifndef FAKE_NVML
#define FAKE_NVML "tests/.libs/libfake_nvml.so"
#endif

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(void)
{
    fp_nvml *nv = NULL;
    if (fp_nvml_open(&nv, FAKE_NVML, 0) != FP_OK || !fp_nvml_available(nv)) {
        char why[400];
        snprintf(why, sizeof why, "stand-in NVML not loadable: %s", fp_nvml_reason(nv));
        fp_nvml_close(nv);
        tap_skip_all(why);
    }
    tap_plan(8);
    fp_nvml *bus = NULL;
    fp_nvml_open_bus(&bus, FAKE_NVML, "0000:65:00.0", 3);
    tap_ok(fp_nvml_available(bus) && strcmp(fp_nvml_device_name(bus), "Fake GPU") == 0,
           "by PCI bus id: the device at 0000:65:00.0 (the index, 3, not used)");
    fp_nvml_close(bus);
    fp_nvml_open_bus(&bus, FAKE_NVML, "0000:01:00.0", 0);
    tap_ok(!fp_nvml_available(bus) && strstr(fp_nvml_reason(bus), "0000:01:00.0"),
           "no device at that bus id: unavailable, the reason names it (%s)", fp_nvml_reason(bus));
    fp_nvml_close(bus);
    tap_ok(strcmp(fp_nvml_device_name(nv), "Fake GPU") == 0 && strcmp(fp_nvml_driver_version(nv), "999.1") == 0,
           "device and driver named (%s, %s)", fp_nvml_device_name(nv), fp_nvml_driver_version(nv));
    double e0 = fp_nvml_energy_j(nv), e1 = fp_nvml_energy_j(nv);
    tap_is_double(e1 - e0, 0.007, 1e-9, 0, "energy counter in joules: two reads differ by the stand-in's 7 mJ");

    char *dir = tu_mkdir();
    if (!dir) {
        tap_skip(4, "cannot create a temporary directory");
        fp_nvml_close(nv);
        return tap_done();
    }
    char *db = tu_path(dir, "nvml.db");
    fp_store_t *s = NULL;
    int64_t runs[2] = {0, 0};
    int rc = fp_store_open(&s, db);
    rc = rc ? rc : tu_record_fixture(s, 1, 1, runs);
    /* the fixture writes device samples of its own: count ours from here by timestamp */
    long long before = rc ? 0 : (fp_store_flush(s), tu_sql_int(db, "SELECT count(*) FROM device_samples"));
    rc = rc ? rc : fp_nvml_start_sampler(nv, s, runs[0], 5);
    tap_ok(rc == FP_OK && fp_nvml_run(nv) == runs[0], "sampler started under run %lld (%s)", (long long)runs[0],
           rc ? fp_error_message() : "ok");
    /* turns: the run switches back and forth while the sampler runs */
    for (int k = 0; rc == FP_OK && k < 20; k++) {
        fp_nvml_set_run(nv, runs[k % 2]);
        sleep_ms(12);
    }
    fp_nvml_stop_sampler(nv);
    uint64_t taken = fp_nvml_samples_taken(nv);
    if (s)
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM device_samples WHERE run NOT IN (%lld, %lld)", (long long)runs[0],
             (long long)runs[1]);
    long long stray = tu_sql_int(db, sql);
    long long all = tu_sql_int(db, "SELECT count(*) FROM device_samples") - before;
    tap_ok(rc == FP_OK && taken > 0 && all == (long long)taken && stray == 0,
           "every sample stored under one of the two runs (%llu taken, %lld stored, %lld elsewhere)",
           (unsigned long long)taken, all, stray);
    /* 20 turns of 12 ms at 5 ms a sample: each run's ten turns hold samples; at least one each is a loose bound
     * that only fails when re-targeting does not reach the sampler */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM device_samples WHERE run = %lld AND power_w = 250", (long long)runs[1]);
    long long r1 = tu_sql_int(db, sql);
    tap_ok(r1 > 0, "the second run got samples after re-targeting (%lld), power 250 W as the stand-in reads", r1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM device_samples WHERE run = %lld AND sm_clock_mhz = 1500 AND "
             "energy_j > 1000", (long long)runs[0]);
    tap_ok(tu_sql_int(db, sql) > 0, "the first run's samples carry clocks and the energy counter (J)");
    fp_nvml_close(nv);
    free(db);
    if (tu_rmdir(dir) != 0)
        tap_diag("could not remove the scratch directory");
    return tap_done();
}
