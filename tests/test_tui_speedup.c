/* test_tui_speedup.c — the dashboard's speedup is compare's summary's (issue 21 #10): one definition in
 * lib/step_time.h (median wall time of the step rows after the warm-up, skipped ones left out; reference
 * over arm). On a session where the old ones disagreed — fp32 10 ms a step; fp16 2 ms for its first 600
 * steps, 20 ms for its last 200, and every 7th step skipped at 1 ms — the summary's speedup and the one the
 * dashboard shows (model and headless frame) are the same, 5.00x (the dashboard's median of the last 256
 * steps said 0.50x). Also: the warm-up rule and the median (selection, not sort) against a sorted copy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "reports/summary.h"
#include "store.h"
#include "store_reader.h"
#include "store_testutil.h"
#include "tap.h"
#include "tui/tui.h"
#include "tui/tui_internal.h"
#if __has_include("step_time.h")
#include "step_time.h"
#define HAVE_STEP_TIME 1
#endif

#define STEPS 800

static int64_t wall16(int64_t k)
{
    if (k % 7 == 0)
        return 1000000;   /* skipped steps are quick: left out of the step time */
    return k <= 600 ? 2000000 : 20000000;
}

static int write_session(const char *path)
{
    fp_store_t *s;
    int rc = fp_store_open(&s, path);
    if (rc)
        return rc;
    fp_session_info_t si = {"speedup", "{\"steps\":800}"};
    int64_t sess, runs[2];
    rc = fp_store_begin_session(s, &si, &sess);
    for (int a = 0; rc == FP_OK && a < 2; a++) {
        fp_run_info_t ri = {0};
        ri.session = sess;
        ri.arm = ri.policy = a ? "fp16" : "fp32";
        ri.model = "resnet50";
        ri.ref_run = a ? runs[0] : 0;
        ri.batch_size = 32;
        ri.image_size = 64;
        rc = fp_store_begin_run(s, &ri, &runs[a]);
    }
    for (int64_t k = 1; rc == FP_OK && k <= STEPS; k++)
        for (int a = 0; rc == FP_OK && a < 2; a++) {
            int64_t w = a ? wall16(k) : 10000000;
            fp_step_rec_t st = {.run = runs[a], .step = k, .loss = 2.0, .loss_scale = a ? 65536 : 1, .lr = 0.1,
                                .skipped = a && k % 7 == 0, .start = k * 100000000, .end = k * 100000000 + w,
                                .wall_ns = w, .samples_per_s = 32e9 / (double)w, .mem_current = -1, .mem_peak = -1,
                                .energy_j = NAN, .power_w = NAN};
            rc = fp_store_step(s, &st, NULL, 0);
        }
    int rc2 = fp_store_close(s, FP_RUN_FINISHED, NULL);
    return rc ? rc : rc2;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    char *dir = tu_mkdir();
    if (!dir)
        tap_skip_all("cannot create a temporary directory");
#ifdef HAVE_STEP_TIME
    tap_ok(fp_step_warmup(0, -1) == 0 && fp_step_warmup(3, -1) == 3 && fp_step_warmup(10, -1) == 5 &&
               fp_step_warmup(60, -1) == 6 && fp_step_warmup(5000, -1) == 100 && fp_step_warmup(50, 7) == 7 &&
               fp_step_warmup(5, 7) == 5,
           "warm-up: 10%% of the rows, 5..100, never more than there are; a request overrides");
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (size_t n = 1; n <= 300; n++) {
        double *v = malloc(n * sizeof *v), *c = malloc(n * sizeof *c);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            v[i] = (double)(x % (n % 3 ? 1000 : 5));   /* some with many ties */
        }
        memcpy(c, v, n * sizeof *c);
        qsort(c, n, sizeof *c, cmp_dbl);
        double want = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
        bad += fp_step_median(v, n) != want;
        free(v);
        free(c);
    }
    tap_ok(bad == 0 && isnan(fp_step_median(NULL, 0)), "median by selection = median of a sorted copy, n = 1..300 "
           "(%d differ)", bad);
    tap_ok(isnan(fp_step_speedup(NAN, 1)) && isnan(fp_step_speedup(1, 0)) && fp_step_speedup(10, 2) == 5,
           "speedup: reference / arm; NaN without a time");
#endif
    char *db = tu_path(dir, "speedup.db");
    int rc = write_session(db);
    tap_ok(rc == FP_OK, "session written: fp32 and fp16, %d steps each (%s)", STEPS, rc ? fp_error_message() : "ok");
    fp_reader_t *r = NULL;
    fp_summary_t s;
    rc = fp_reader_open_snapshot(&r, db);
    if (rc == FP_OK)
        rc = fp_summary_load(r, 0, -1, &s);
    fp_reader_close(r);
    const fp_arm_t *a16 = rc == FP_OK ? fp_summary_arm(&s, "fp16") : NULL;
    double summary = a16 ? a16->speedup : NAN;
    tap_ok(a16 && fabs(summary - 5.0) < 1e-9, "the summary's speedup: 5.00x (got %.4f)", summary);

    fp_tui_model_t m;
    double tui = NAN;
    rc = fp_tui_model_open(&m, db, 0);
    if (rc == FP_OK)
        rc = fp_tui_model_update(&m, FP_ROLE_ACTIVATION);
    if (rc == FP_OK)
        rc = fp_tui_model_settle(&m, FP_ROLE_ACTIVATION);
    if (rc == FP_OK && m.narms == 2) {
        int low = fp_tui_model_low(&m);
        tui = fp_tui_arm_median_wall(&m.arm[m.ref]) / fp_tui_arm_median_wall(&m.arm[low]);
    }
    fp_tui_model_close(&m);
    tap_ok(tui == summary, "the dashboard's speedup is the summary's: %.4f vs %.4f", tui, summary);
    fp_tui_options o;
    fp_tui_options_init(&o);
    o.db_path = db;
    o.ascii = 1;
    char *text = NULL;
    rc = fp_tui_render_text(&o, 120, 40, NULL, &text);
    tap_ok(rc == FP_OK && text && strstr(text, "speedup 5.00x"), "the headless frame's title says speedup 5.00x");
    if (text && !strstr(text, "speedup 5.00x")) {
        char *t = strstr(text, "speedup");
        tap_diag("frame: %.40s", t ? t : "(no speedup)");
    }
    free(text);
    if (a16)
        fp_summary_free(&s);
    free(db);
    tu_rmdir(dir);
    return tap_done();
}
