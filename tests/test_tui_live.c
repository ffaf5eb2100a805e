/* test_tui_live.c — the dashboard reading a database that is being written: a child process records
 * 40 steps of two arms (about 25 ms apart) while the parent updates the model and renders frames.
 * Checks: no error ever, step counts only grow, each step read once, the last frame has all 40. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "error.h"
#include "store_testutil.h"
#include "tap.h"
#include "tui/tui_internal.h"
#include "tui_testutil.h"

#define LIVE_STEPS 40

static int writer(const char *path)
{
    fp_store_t *s;
    int64_t runs[2];
    if (fp_store_open(&s, path) != FP_OK || tt_begin(s, runs, LIVE_STEPS) != FP_OK)
        return 1;
    for (int64_t k = 1; k <= LIVE_STEPS; k++) {   /* 1-based, as the trainer */
        if (tt_record_step(s, runs, k) != FP_OK)
            return 1;
        struct timespec ts = {0, 25000000};
        nanosleep(&ts, NULL);
    }
    return fp_store_close(s, FP_RUN_FINISHED, NULL) == FP_OK ? 0 : 1;
}

int main(void)
{
    tap_plan(6);
    char *dir = tu_mkdir();
    char *db = tu_path(dir, "live.db");
    /* the file exists (empty) before the writer starts, as when a dashboard attaches early */
    fp_store_t *s0;
    if (fp_store_open(&s0, db) != FP_OK || fp_store_close(s0, FP_RUN_FINISHED, NULL) != FP_OK)
        return 1;
    pid_t pid = fork();
    if (pid == 0)
        _exit(writer(db));
    fp_tui_model_t m;
    int rc = fp_tui_model_open(&m, db, 0);
    int errors = 0, shrank = 0, frames = 0, seen_partial = 0, status = -1;
    int64_t prev = 0;
    fp_grid_t g;
    fp_grid_init(&g, 120, 40, 0);
    fp_layout_t l;
    fp_tui_layout(&l, 120, 40);
    fp_tui_ui_t ui;
    fp_tui_ui_init(&ui);
    for (int i = 0; rc == FP_OK && i < 400; i++) {
        if (fp_tui_model_update(&m, ui.role) != FP_OK) {
            tap_diag("update: %s", fp_error_message());
            errors++;
        }
        fp_tui_render(&g, &m, &ui, &l, FP_TUI_CHART_BRAILLE, 0);
        frames++;
        int64_t n = m.narms ? m.arm[0].nsteps : 0;
        shrank += n < prev;
        seen_partial |= n > 0 && n < LIVE_STEPS;
        prev = n;
        if (status < 0 && waitpid(pid, &status, WNOHANG) == pid) {
            fp_tui_model_update(&m, ui.role);
            break;
        }
        if (status >= 0)
            break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (status < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    tap_ok(rc == FP_OK && WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer finished (%d frames)", frames);
    tap_is_int(errors, 0, "no reader error while the file was written");
    tap_is_int(shrank, 0, "step counts only grow");
    tap_ok(seen_partial, "frames saw the run part-way (numbers update)");
    tap_ok(m.narms == 2 && m.arm[0].nsteps == LIVE_STEPS && m.arm[1].nsteps == LIVE_STEPS &&
               m.arm[0].last_step == LIVE_STEPS,
           "every step read exactly once (%lld, %lld)", m.narms ? (long long)m.arm[0].nsteps : -1LL,
           m.narms > 1 ? (long long)m.arm[1].nsteps : -1LL);
    char *t = fp_grid_to_text(&g);
    fp_tui_render(&g, &m, &ui, &l, FP_TUI_CHART_BRAILLE, 0);
    free(t);
    t = fp_grid_to_text(&g);
    tap_ok(t && strstr(t, "step 40/40") && strstr(t, "speedup 2.00x"), "last frame: all steps and the speedup");
    free(t);
    fp_grid_free(&g);
    fp_tui_model_close(&m);
    free(db);
    tu_rmdir(dir);
    return tap_done();
}
