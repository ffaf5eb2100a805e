/* test_store_concurrency.c — a reader process polls while the writer writes: no SQLITE_BUSY (or any
 * error) reaches it, it sees the run grow, and it never sees half a step (a step row without all of
 * its per-layer time rows). */
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "clock.h"
#include "error.h"
#include "store.h"
#include "store_reader.h"
#include "tap.h"
#include "store_testutil.h"

#define TOTAL 300
#define LAYERS 20

typedef struct {
    int polls, partial, half, errors;
    char first_error[400];
} poll_result_t;

static void note_error(poll_result_t *res, const char *msg)
{
    if (res->errors++ == 0)
        snprintf(res->first_error, sizeof res->first_error, "%s", msg);
}

static void reader_process(const char *path, int fd)
{
    poll_result_t res = {0};
    fp_reader_t *r = NULL;
    sqlite3 *raw = NULL;
    if (fp_reader_open(&r, path) != FP_OK)
        note_error(&res, fp_error_message());
    int64_t until = fp_clock_mono_ms() + 20000, seen = 0;
    while (r && seen < TOTAL && fp_clock_mono_ms() < until) {
        fp_run_row_t *runs;
        size_t n;
        if (fp_reader_runs(r, 0, &runs, &n) != FP_OK) {
            note_error(&res, fp_error_message());
            continue;
        }
        seen = n > 0 ? runs[0].steps : 0;
        free(runs);
        fp_step_row_t *st;
        if (fp_reader_steps_since(r, 1, seen - 10, 0, &st, &n) != FP_OK)
            note_error(&res, fp_error_message());
        else
            free(st);
        /* the consistency check itself: one read transaction on a plain read-only connection */
        if (!raw && sqlite3_open_v2(path, &raw, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK)
            sqlite3_busy_timeout(raw, 5000);
        sqlite3_stmt *q;
        const char *sql = "SELECT count(*), (SELECT count(*) FROM layer_times) FROM steps s WHERE"
                          " (SELECT count(*) FROM layer_times t WHERE t.run = s.run AND t.step = s.step) != 60";
        int rc = sqlite3_prepare_v2(raw, sql, -1, &q, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
            res.half += sqlite3_column_int(q, 0);
            rc = SQLITE_OK;
        }
        if (rc != SQLITE_OK)
            note_error(&res, sqlite3_errmsg(raw));
        sqlite3_finalize(q);
        res.polls++;
        if (seen > 0 && seen < TOTAL)
            res.partial++;
        usleep(2000);
    }
    if (seen != TOTAL)
        note_error(&res, "the reader never saw the last step");
    sqlite3_close(raw);
    fp_reader_close(r);
    ssize_t w = write(fd, &res, sizeof res);
    (void)w;
    _exit(0);
}

int main(void)
{
    char *dir = tu_mkdir();
    if (!dir)
        tap_skip_all("cannot create a scratch directory");
    char *p = tu_path(dir, "live.db");
    fp_store_t *s;
    if (fp_store_open(&s, p) != FP_OK || fp_store_close(s, FP_RUN_FINISHED, NULL) != FP_OK)
        tap_skip_all("cannot create the database");
    int fds[2];
    if (pipe(fds) != 0)
        tap_skip_all("no pipe");
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        close(fds[0]);
        reader_process(p, fds[1]);
    }
    close(fds[1]);
    int rc = fp_store_open(&s, p);
    int64_t session = 0, run = 0;
    fp_session_info_t si = {.name = "live"};
    if (rc == FP_OK)
        rc = fp_store_begin_session(s, &si, &session);
    fp_run_info_t ri = {.session = session, .model = "m", .policy = "fp16", .batch_size = -1, .image_size = -1};
    if (rc == FP_OK)
        rc = fp_store_begin_run(s, &ri, &run);
    fp_layer_time_t lt[LAYERS * 3];
    fp_kernel_rec_t k[LAYERS * 3];
    memset(k, 0, sizeof k);
    for (int step = 0; rc == FP_OK && step < TOTAL; step++) {
        fp_step_rec_t st = {.run = run, .step = step, .loss = 1.0 / (step + 1), .loss_scale = NAN, .lr = 0.1,
                            .start = -1, .end = -1, .wall_ns = -1, .samples_per_s = NAN, .mem_current = -1,
                            .mem_peak = -1, .energy_j = NAN, .power_w = NAN};
        for (int i = 0; i < LAYERS * 3; i++) {
            lt[i] = (fp_layer_time_t){.layer = i / 3, .phase = i % 3, .time_ns = 1000 + i, .kernels = 1};
            k[i].run = run;
            k[i].step = step;
            k[i].layer = i / 3;
            k[i].start = step * 100000 + i * 10;
            k[i].end = k[i].start + 5;
        }
        rc = fp_store_kernels(s, k, LAYERS * 3);
        if (rc == FP_OK)
            rc = fp_store_step(s, &st, lt, LAYERS * 3);
        usleep(3000);
    }
    int crc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    tap_ok(rc == FP_OK && crc == FP_OK, "the writer wrote %d steps of %d layer rows while being read", TOTAL,
           LAYERS * 3);
    poll_result_t res;
    memset(&res, 0, sizeof res);
    ssize_t got = read(fds[0], &res, sizeof res);
    int status;
    waitpid(child, &status, 0);
    tap_ok(got == (ssize_t)sizeof res && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the reader process finished");
    tap_is_int(res.errors, 0, "no error (SQLITE_BUSY or other) reached the reader%s%s", res.errors ? ": " : "",
               res.first_error);
    tap_ok(res.polls > 10 && res.partial > 0, "the reader polled %d times and saw the run grow %d times", res.polls,
           res.partial);
    tap_is_int(res.half, 0, "the reader never saw half a step");
    free(p);
    tu_rmdir(dir);
    return tap_done();
}
