/* test_report_fixture.c — writes generated sessions (report_testutil.h) for tests/test_report_cli.sh.
 * usage: test_report_fixture FILE MODE [SEED]; modes: full (the realistic resnet50 fp32 + fp16
 * session), base / same / slow (gate sessions: baseline, same distribution, 10% slower), few (10
 * steps), fp32only (one arm), vgg (another model), empty (a session with runs but no steps), hostcpu
 * (known host CPU times per step: host_cpu_session below says which figures they give).
 * Exit 0 on success, 1 with a message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "report_testutil.h"
#include "store.h"

/* Three arms of 20 steps (warm-up 5 by the default rule), with host CPU times whose summary figures are known
 * (tests/test_report_cli.sh checks them):
 *  - fp32 (CPU): wall 10 ms; host CPU 50 ms in the warm-up (left out), then 1..15 ms: median 8 ms, share 0.8;
 *  - fp16 (GPU): wall 5 ms; host CPU 0.2 ms x row, except row 10 (skipped, 30 ms: left out) and row 11 (not
 *    measured: left out, never 0): the median of the 13 others is row 13's, 2.6 ms, share 0.52;
 *  - bf16 (CPU): no host CPU recorded (a step row as a file from before schema version 6 has it). */
static int host_cpu_session(const char *path)
{
    static const char *const pol[3] = {"fp32", "fp16", "bf16"};
    static const char *const dev[3] = {"cpu: Test CPU", "cuda: NVIDIA H200", "cpu: Test CPU"};
    static const int64_t wall[3] = {10000000, 5000000, 6000000};
    fp_store_t *st;
    int rc = fp_store_open(&st, path);
    if (rc != FP_OK)
        return rc;
    int64_t session = 0, runs[3] = {0, 0, 0};
    fp_session_info_t si = {.name = "host cpu", .config_json = "{}"};
    rc = fp_store_begin_session(st, &si, &session);
    for (int i = 0; rc == FP_OK && i < 3; i++) {
        fp_run_info_t ri = {.session = session, .arm = pol[i], .model = "resnet18", .policy = pol[i],
                            .ref_run = i ? runs[0] : 0, .device = dev[i], .batch_size = 8, .image_size = 32,
                            .seed = 1, .optimizer = "sgd", .config_json = "{}"};
        rc = fp_store_begin_run(st, &ri, &runs[i]);
    }
    for (int64_t k = 0; rc == FP_OK && k < 20; k++)
        for (int i = 0; rc == FP_OK && i < 3; i++) {
            int64_t host = -1;
            int skipped = 0;
            if (i == 0)
                host = k < 5 ? 50000000 : (k - 4) * 1000000;
            else if (i == 1)
                host = k < 5 ? 40000000 : k == 10 ? 30000000 : k == 11 ? -1 : k * 200000;
            if (i == 1 && k == 10)
                skipped = 1;
            fp_step_rec_t s = {.run = runs[i], .step = k + 1, .loss = 2.0 - 0.01 * (double)k, .lr = 0.1,
                               .loss_scale = i == 1 ? 65536 : NAN, .skipped = skipped, .start = -1, .end = -1,
                               .wall_ns = wall[i], .samples_per_s = 8e9 / (double)wall[i], .mem_current = -1,
                               .mem_peak = -1, .energy_j = NAN, .power_w = NAN, .host_cpu_ns = host};
            rc = fp_store_step(st, &s, NULL, 0);
        }
    int rc2 = fp_store_close(st, FP_RUN_FINISHED, NULL);
    return rc ? rc : rc2;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_report_fixture FILE MODE [SEED]\n");
        return 2;
    }
    const char *path = argv[1], *mode = argv[2];
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    int rc;
    if (strcmp(mode, "full") == 0) {
        rt_session_spec_t s;
        rt_default_spec(&s, path);
        s.seed = seed;
        int64_t runs[2];
        rc = rt_write_session(&s, runs);
    } else if (strcmp(mode, "hostcpu") == 0) {
        rc = host_cpu_session(path);
    } else if (strcmp(mode, "empty") == 0) {
        fp_store_t *st;
        rc = fp_store_open(&st, path);
        if (rc == FP_OK) {
            int64_t session, run;
            fp_session_info_t si = {.name = "empty", .config_json = "{}"};
            rc = fp_store_begin_session(st, &si, &session);
            fp_run_info_t ri = {.session = session, .arm = "fp32", .model = "resnet50", .policy = "fp32",
                                .batch_size = -1, .image_size = -1};
            if (rc == FP_OK)
                rc = fp_store_begin_run(st, &ri, &run);
            int rc2 = fp_store_close(st, FP_RUN_FINISHED, NULL);
            rc = rc ? rc : rc2;
        }
    } else {
        rt_gate_spec_t g;
        rt_default_gate(&g, path, seed);
        if (strcmp(mode, "slow") == 0)
            g.slowdown = 1.10;
        else if (strcmp(mode, "few") == 0)
            g.steps = 10;
        else if (strcmp(mode, "fp32only") == 0)
            g.policies = "fp32";
        else if (strcmp(mode, "vgg") == 0)
            g.model = "vgg16";
        else if (strcmp(mode, "base") != 0 && strcmp(mode, "same") != 0) {
            fprintf(stderr, "test_report_fixture: unknown mode '%s'\n", mode);
            return 2;
        }
        rc = rt_write_gate(&g);
    }
    if (rc != FP_OK) {
        fprintf(stderr, "test_report_fixture: %s: %s\n", path, fp_error_message());
        return 1;
    }
    return 0;
}
