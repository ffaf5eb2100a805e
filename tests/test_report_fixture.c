/* test_report_fixture.c — writes generated sessions (report_testutil.h) for tests/test_report_cli.sh.
 * usage: test_report_fixture FILE MODE [SEED]; modes: full (the realistic resnet50 fp32 + fp16
 * session), base / same / slow (gate sessions: baseline, same distribution, 10% slower), few (10
 * steps), fp32only (one arm), vgg (another model), empty (a session with runs but no steps).
 * Exit 0 on success, 1 with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "report_testutil.h"
#include "store.h"

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
