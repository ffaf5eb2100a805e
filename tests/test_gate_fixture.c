/* test_gate_fixture.c — writes recorded gate sessions (tests/gate_testutil.h) for tests/test_gate_cli.sh.
 * usage: test_gate_fixture FILE MODE [SEED]; modes: base / same (healthy fp32 + fp16, 300 steps), slow
 * (both arms 10% slower per image), few (10 steps), quickstart (the quick start's session: 80 steps, 5
 * calibration skips, a 3.12-point drop on 128 images), acc (accuracy 70% -> 54.7%), fp32only (one arm),
 * resnet18 (another model), batch32, lr1000, interrupted (the fp16 run interrupted).
 * Exit 0 on success, 1 with a message, 2 on usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "gate_testutil.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_gate_fixture FILE MODE [SEED]\n");
        return 2;
    }
    const char *mode = argv[2];
    gt_session_t g;
    gt_default(&g, argv[1], argc > 3 ? strtoull(argv[3], NULL, 10) : 1);
    if (strcmp(mode, "slow") == 0) {
        g.arms[0].median_ns *= 1.10;
        g.arms[1].median_ns *= 1.10;
    } else if (strcmp(mode, "few") == 0) {
        g.steps = 10;
        g.arms[1].probe_at = 0;
    } else if (strcmp(mode, "quickstart") == 0) {
        gt_quickstart(&g);
        g.arms[0].correct = 69;   /* 53.91% */
        g.arms[1].correct = 65;   /* 50.78% */
    } else if (strcmp(mode, "acc") == 0) {
        g.arms[0].correct = 560;
        g.arms[1].correct = 556;
    } else if (strcmp(mode, "fp32only") == 0) {
        g.narms = 1;
    } else if (strcmp(mode, "resnet18") == 0) {
        g.model = "resnet18";
    } else if (strcmp(mode, "batch32") == 0) {
        g.batch = 32;
        g.eval_batches = 32;
    } else if (strcmp(mode, "lr1000") == 0) {
        g.lr *= 1000;
    } else if (strcmp(mode, "interrupted") == 0) {
        g.arms[1].status = "interrupted";
    } else if (strcmp(mode, "base") != 0 && strcmp(mode, "same") != 0) {
        fprintf(stderr, "test_gate_fixture: unknown mode '%s'\n", mode);
        return 2;
    }
    if (gt_write(&g) != FP_OK) {
        fprintf(stderr, "test_gate_fixture: %s: %s\n", argv[1], fp_error_message());
        return 1;
    }
    return 0;
}
