/* test_store_crash.c — the writer's process dies or is stopped: kill -9 mid-run (the file opens,
 * committed steps are whole, the run shows interrupted and is fixed up on the next writer open),
 * SIGINT with the handlers installed (everything flushed, run interrupted), and a write failure
 * from a file-size limit (clear error to the producer, earlier data readable, run failed). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "error.h"
#include "store.h"
#include "store_reader.h"
#include "tap.h"
#include "store_testutil.h"

#define LAYERS 16

static char *dir;

/* Start a session and a run, then write steps 0.. until stop() says so; after step `tell` is
 * committed, its number is written to fd. Returns the number of steps queued. */
static long write_steps(fp_store_t *s, int fd, long tell, int (*stop)(long step), int64_t *run)
{
    int64_t session;
    fp_session_info_t si = {.name = "crash"};
    if (fp_store_begin_session(s, &si, &session) != FP_OK)
        return -1;
    fp_run_info_t ri = {.session = session, .model = "m", .policy = "fp16", .batch_size = -1, .image_size = -1};
    if (fp_store_begin_run(s, &ri, run) != FP_OK)
        return -1;
    fp_layer_time_t lt[LAYERS * 3];
    long step;
    for (step = 0; !stop(step); step++) {
        fp_step_rec_t st = {.run = *run, .step = step, .loss = 1.0 / (double)(step + 1), .loss_scale = NAN,
                            .lr = 0.1, .start = -1, .end = -1, .wall_ns = -1, .samples_per_s = NAN,
                            .mem_current = -1, .mem_peak = -1, .energy_j = NAN, .power_w = NAN};
        for (int i = 0; i < LAYERS * 3; i++)
            lt[i] = (fp_layer_time_t){.layer = i / 3, .phase = i % 3, .time_ns = 1000 + i, .kernels = 2};
        if (fp_store_step(s, &st, lt, LAYERS * 3) != FP_OK)
            break;
        if (step == tell && fp_store_flush(s) == FP_OK) {
            ssize_t w = write(fd, &step, sizeof step);
            (void)w;
        }
        usleep(500);
    }
    return step;
}

static int never(long step)
{
    (void)step;
    return 0;
}

static int on_signal(long step)
{
    (void)step;
    return fp_store_signalled() != 0;
}

static long read_long(int fd)
{
    long v = -1;
    ssize_t got = read(fd, &v, sizeof v);
    return got == (ssize_t)sizeof v ? v : -1;
}

/* A pipe (fds) and a child process, stdout flushed first so the child does not repeat buffered TAP lines:
 * fork's result, or -1 (nothing left open) when the pipe or the fork failed. */
static pid_t fork_with_pipe(int fds[2])
{
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        close(fds[0]);
        close(fds[1]);
    }
    return child;
}

/* Waits for the child and closes the pipe; the child's wait status. */
static int reap(pid_t child, int fds[2])
{
    int status;
    waitpid(child, &status, 0);
    close(fds[0]);
    close(fds[1]);
    return status;
}

/* Steps whose per-layer rows are not all there (must be 0). */
static long long half_steps(const char *path)
{
    return tu_sql_int(path, "SELECT count(*) FROM steps s WHERE (SELECT count(*) FROM layer_times t"
                            " WHERE t.run = s.run AND t.step = s.step) != 48");
}

static void test_kill9(void)
{
    char *p = tu_path(dir, "killed.db");
    int fds[2];
    pid_t child = fork_with_pipe(fds);
    if (child < 0)
        return;
    if (child == 0) {
        fp_store_t *s;
        int64_t run;
        if (fp_store_open(&s, p) == FP_OK)
            write_steps(s, fds[1], 50, never, &run);
        _exit(3);
    }
    long told = read_long(fds[0]);
    usleep(200000);
    kill(child, SIGKILL);
    int status = reap(child, fds);
    tap_ok(told == 50 && WIFSIGNALED(status), "the writing child was killed with SIGKILL after step 50 was committed");
    fp_reader_t *r;
    int rc = fp_reader_open(&r, p);
    tap_is_int(rc, FP_OK, "the file opens afterwards (%s)", fp_error_message());
    fp_run_row_t row;
    memset(&row, 0, sizeof row);
    if (rc == FP_OK) {
        rc = fp_reader_run(r, 1, &row);
        fp_reader_close(r);
    }
    tap_ok(rc == FP_OK && row.steps >= 51 && row.last_step == row.steps - 1,
           "every committed step is there (%lld steps)", (long long)row.steps);
    tap_ok(strcmp(row.status, "interrupted") == 0 && row.stale, "readers show the run as interrupted (%s)",
           row.status);
    tap_is_int(half_steps(p), 0, "no half steps");
    tap_ok(tu_sql_int(p, "SELECT count(*) FROM pragma_quick_check WHERE quick_check = 'ok'") == 1,
           "the file passes quick_check");
    fp_store_t *s;
    rc = fp_store_open(&s, p);
    if (rc == FP_OK)
        rc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    tap_is_int(rc, FP_OK, "a new writer opens it");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM runs WHERE status = 'interrupted' AND failure LIKE"
                             " 'writer process % ended without closing the run' AND end IS NOT NULL"), 1,
               "and the run is fixed up to interrupted in the file");
    free(p);
}

static void test_sigint(void)
{
    char *p = tu_path(dir, "sigint.db");
    int fds[2];
    pid_t child = fork_with_pipe(fds);
    if (child < 0)
        return;
    if (child == 0) {
        fp_store_t *s;
        int64_t run;
        fp_store_install_signal_handlers();
        if (fp_store_open(&s, p) != FP_OK)
            _exit(3);
        long steps = write_steps(s, fds[1], 20, on_signal, &run);
        char msg[64];
        snprintf(msg, sizeof msg, "interrupted by signal %d", fp_store_signalled());
        int rc = fp_store_close(s, FP_RUN_INTERRUPTED, msg);
        ssize_t w = write(fds[1], &steps, sizeof steps);
        (void)w;
        _exit(rc == FP_OK ? 0 : 4);
    }
    long told = read_long(fds[0]);
    usleep(100000);
    kill(child, SIGINT);
    long steps = read_long(fds[0]);
    int status = reap(child, fds);
    tap_ok(told == 20 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "SIGINT: the child stopped cleanly and closed its store");
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM steps WHERE run = 1");
    tap_is_int(tu_sql_int(p, sql), steps, "every step queued before the signal was flushed (%ld)", steps);
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM runs WHERE status = 'interrupted' AND failure ="
                             " 'interrupted by signal 2'"), 1, "the run is marked interrupted by signal 2");
    tap_is_int(half_steps(p), 0, "no half steps");
    free(p);
}

static void test_write_failure(void)
{
    char *p = tu_path(dir, "full.db");
    int fds[2];
    pid_t child = fork_with_pipe(fds);
    if (child < 0)
        return;
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);
        fp_store_t *s;
        int64_t run;
        if (fp_store_open(&s, p) != FP_OK)
            _exit(3);
        struct rlimit rl = {512 * 1024, 512 * 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        long steps = write_steps(s, fds[1], 10, never, &run);   /* stops at the first refused record */
        char msg[512];
        int st = fp_store_writer_status(s);
        snprintf(msg, sizeof msg, "%s", st != FP_OK ? fp_error_message() : "");
        int rc = fp_store_close(s, FP_RUN_FINISHED, NULL);
        ssize_t w = write(fds[1], &steps, sizeof steps);
        w = write(fds[1], msg, sizeof msg);
        (void)w;
        _exit(st != FP_OK && rc == st ? 0 : 4);
    }
    long told = read_long(fds[0]);
    long steps = read_long(fds[0]);
    char msg[512] = "";
    ssize_t got = read(fds[0], msg, sizeof msg);
    (void)got;
    int status = reap(child, fds);
    tap_ok(told == 10 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "file-size limit: the producer got an error after %ld steps and close returned it", steps);
    tap_ok(strstr(msg, p) && (strstr(msg, "disk is full") || strstr(msg, "I/O error")) && !strchr(msg, '\n'),
           "the error is one clear line naming the file (%s)", msg);
    fp_reader_t *r;
    fp_run_row_t row;
    memset(&row, 0, sizeof row);
    int rc = fp_reader_open(&r, p);
    if (rc == FP_OK) {
        rc = fp_reader_run(r, 1, &row);
        fp_reader_close(r);
    }
    tap_ok(rc == FP_OK && row.steps >= 11 && row.steps < steps, "what was committed before stays readable (%lld steps)",
           (long long)row.steps);
    tap_ok(strcmp(row.status, "failed") == 0 && strstr(row.failure, "full.db"), "the run is marked failed (%s: %s)",
           row.status, row.failure);
    tap_is_int(half_steps(p), 0, "no half steps");
    free(p);
}

int main(void)
{
    dir = tu_mkdir();
    if (!dir)
        tap_skip_all("cannot create a scratch directory");
    test_kill9();
    test_sigint();
    test_write_failure();
    tu_rmdir(dir);
    return tap_done();
}
