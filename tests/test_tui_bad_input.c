/* test_tui_bad_input.c — the dashboard on bad input: an empty database, a session with one arm, a
 * failed session, an interrupted one, a missing file, a session that does not exist, no TERM, and a
 * terminal too small. Each gives a clear message (in the screen or as the error), never garbage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store.h"
#include "store_testutil.h"
#include "tap.h"
#include "tui/tui.h"
#include "tui_testutil.h"

static int render(const char *db, int64_t session, int w, int h, char **t)
{
    fp_tui_options o;
    fp_tui_options_init(&o);
    o.db_path = db;
    o.session = session;
    o.ascii = 1;
    return fp_tui_render_text(&o, w, h, "", t);
}

int main(void)
{
    tap_plan(14);
    char *dir = tu_mkdir();
    char *empty = tu_path(dir, "empty.db"), *one = tu_path(dir, "one.db"), *failed = tu_path(dir, "failed.db"),
         *intr = tu_path(dir, "intr.db"), *missing = tu_path(dir, "missing.db");
    fp_store_t *s;
    if (fp_store_open(&s, empty) != FP_OK || fp_store_close(s, FP_RUN_FINISHED, NULL) != FP_OK)
        return tap_diag("%s", fp_error_message()), 1;
    char *t = NULL;
    tap_is_int(render(empty, 0, 80, 24, &t), FP_OK, "empty database renders");
    tap_ok(t && strstr(t, "no sessions recorded yet"), "empty database: a clear message in the screen");
    free(t);

    tt_opts_t o1 = {.arms = 1, .status = FP_RUN_FINISHED};
    tt_write_fixture(one, &o1);
    t = NULL;
    tap_is_int(render(one, 0, 80, 24, &t), FP_OK, "one-arm session renders");
    tap_ok(t && strstr(t, "fp32 step 120/120 finished") && !strstr(t, "speedup") && strstr(t, "layer3.2.conv2"),
           "one arm: its numbers, no speedup");
    free(t);

    tt_opts_t of = {.arms = 2, .status = FP_RUN_FAILED, .failure = "loss is NaN"};
    tt_write_fixture(failed, &of);
    t = NULL;
    tap_is_int(render(failed, 0, 100, 30, &t), FP_OK, "failed session renders");
    tap_ok(t && strstr(t, "failed (loss is NaN)") && strstr(t, "finished"), "failed arm shown with its message");
    free(t);

    tt_opts_t oi = {.arms = 2, .status = FP_RUN_INTERRUPTED};
    tt_write_fixture(intr, &oi);
    t = NULL;
    tap_is_int(render(intr, 0, 120, 30, &t), FP_OK, "interrupted session renders");
    tap_ok(t && strstr(t, "interrupted") && strstr(t, "ETA ended"), "interrupted shown, no ETA");
    free(t);

    t = NULL;
    int rc = render(missing, 0, 80, 24, &t);
    tap_ok(rc != FP_OK && strstr(fp_error_message(), "missing.db") && !tu_exists(missing),
           "missing file: an error naming it, nothing created (%s)", fp_error_message());
    rc = render(one, 99, 80, 24, &t);
    tap_ok(rc != FP_OK && strstr(fp_error_message(), "no session 99"), "unknown session: %s", fp_error_message());

    t = NULL;
    tap_is_int(render(one, 0, 40, 10, &t), FP_OK, "40x10 renders");
    tap_ok(t && strstr(t, "terminal too small: 40x10") && strstr(t, "need 80x24"), "too small: a clear message");
    free(t);

    unsetenv("TERM");
    fp_tui_options o;
    fp_tui_options_init(&o);
    o.db_path = one;
    rc = fp_tui_run(&o);
    tap_is_int(rc, FP_EUNAVAIL, "no TERM: fp_tui_run refuses");
    tap_ok(strstr(fp_error_message(), "TERM is not set") != NULL, "no TERM: %s", fp_error_message());
    free(empty);
    free(one);
    free(failed);
    free(intr);
    free(missing);
    tu_rmdir(dir);
    return tap_done();
}
