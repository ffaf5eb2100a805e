/* test_tui_dist.c — the dashboard's data-parallel line (issue 23), headless: a session of two arms on 2 ranks
 * written through the store writer with known dist_steps rows shows "data parallel: 2 ranks", each arm's exposed
 * and all-reduce share of the ranks' step time and its slowest rank against the fastest; the header grows by
 * that line only; a session trained alone shows none. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store.h"
#include "tap.h"
#include "tui_screen_testutil.h"
#include "testutil.h"
#include "tui/tui.h"
#include "tui/tui_internal.h"

#define MS 1000000LL

/* Two arms (fp32, fp16), 10 steps; ranks 2: rank 0 steps 10 ms, rank 1 slow_ms; both 1 ms exposed, 3 ms of
 * all-reduce (shares over the ranks: 2 / (10 + slow), 6 / (10 + slow)). ranks 0: alone. */
static int write_session(const char *path, int ranks, int slow_ms)
{
    fp_store_t *s;
    int rc = fp_store_open(&s, path);
    if (rc)
        return rc;
    fp_session_info_t si = {"dp", "{\"steps\":10}"};
    int64_t session = 0, runs[2] = {0, 0};
    rc = fp_store_begin_session(s, &si, &session);
    const char *pol[2] = {"fp32", "fp16"};
    for (int a = 0; a < 2 && !rc; a++) {
        fp_run_info_t ri = {.session = session, .arm = pol[a], .model = "tinynet", .policy = pol[a],
                            .ref_run = a ? runs[0] : 0, .batch_size = 4, .image_size = 32, .seed = 1,
                            .device = "cpu: test"};
        rc = fp_store_begin_run(s, &ri, &runs[a]);
    }
    for (int64_t step = 1; step <= 10 && !rc; step++)
        for (int a = 0; a < 2 && !rc; a++) {
            fp_step_rec_t st = {.run = runs[a], .step = step, .loss = 2.0, .loss_scale = NAN, .lr = 0.1, .start = -1,
                                .end = -1, .wall_ns = 10 * MS, .samples_per_s = NAN, .mem_current = -1,
                                .mem_peak = -1, .energy_j = NAN, .power_w = NAN};
            rc = fp_store_step(s, &st, NULL, 0);
            for (int k = 0; k < ranks && !rc; k++) {
                fp_dist_step_rec_t d = {.run = runs[a], .step = step, .rank = k, .wall_ns = k ? slow_ms * MS : 10 * MS,
                                        .comm_ns = 3 * MS, .exposed_ns = 1 * MS, .bytes = 1000};
                rc = fp_store_dist_steps(s, &d, 1);
            }
        }
    int crc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    return rc ? rc : crc;
}

/* The line of t that starts with prefix (malloc'd), or NULL. */
static char *line_of(const char *t, const char *prefix)
{
    for (const char *p = t; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix))) {
            size_t n = strcspn(p, "\n");
            char *l = malloc(n + 1);
            memcpy(l, p, n);
            l[n] = '\0';
            return l;
        }
    return NULL;
}

int main(void)
{
    char *dir = tu_mkdir();
    if (!dir)
        tap_skip_all("no temporary directory");
    char *dp = tu_path(dir, "dp.db"), *one = tu_path(dir, "one.db");
    tap_is_int(write_session(dp, 2, 15) == FP_OK && write_session(one, 0, 0) == FP_OK, 1, "sessions written");

    char *t = ts_screen(dp, 160, 30, "", 1), *l = t ? line_of(t, "data parallel:") : NULL;
    tap_ok(l != NULL, "a 2-rank session: a data-parallel line in the header (%s)", l ? l : "none");
    /* shares over the ranks: exposed 2 / 25 = 8.0%, all-reduce 6 / 25 = 24.0%; rank 1 at 15 / 10 = 1.50x */
    tap_ok(l && strstr(l, "data parallel: 2 ranks") && strstr(l, "fp32 8.0%/24.0% r1 1.50x") &&
               strstr(l, "fp16 8.0%/24.0% r1 1.50x"),
           "per arm: exposed / all-reduce share of the ranks' step time, the slowest rank against the fastest");
    char *v = t ? line_of(t, "fp16 ") : NULL;
    tap_ok(v && strstr(t, v) < strstr(t, "data parallel:"), "the line follows the verdict");
    free(l);
    free(v);
    free(t);

    t = ts_screen(one, 160, 30, "", 1);
    tap_ok(t && *t && !strstr(t, "data parallel") && !strstr(t, "ranks"), "a session trained alone: no such line");
    free(t);

    fp_tui_model_t m;
    int rc = fp_tui_model_open(&m, dp, 0);
    rc = rc ? rc : fp_tui_model_update(&m, 0);   /* the first read, then the rest */
    rc = rc ? rc : fp_tui_model_settle(&m, 0);
    tap_ok(rc == FP_OK && fp_tui_any_ranks(&m) && fp_tui_header_lines(&m, 160) == 2 + 1 + 1 + 1 &&
               m.arm[0].ranks == 2 && m.arm[0].slowest == 1 && fabs(m.arm[0].straggler - 1.5) < 1e-12 &&
               fabs(m.arm[0].exposed_share - 0.08) < 1e-12 && fabs(m.arm[0].comm_share - 0.24) < 1e-12,
           "the model: ranks, shares, the straggler; the header has one line more");
    if (rc == FP_OK)
        fp_tui_model_close(&m);
    rc = fp_tui_model_open(&m, one, 0);
    rc = rc ? rc : fp_tui_model_update(&m, 0);
    rc = rc ? rc : fp_tui_model_settle(&m, 0);
    tap_ok(rc == FP_OK && !fp_tui_any_ranks(&m) && fp_tui_header_lines(&m, 160) == 2 + 1 + 1,
           "alone: no ranks, the header as before");
    if (rc == FP_OK)
        fp_tui_model_close(&m);
    free(dp);
    free(one);
    tu_rmdir(dir);
    return tap_done();
}
