/* test_compare_busy.c — the training loop while another process holds its database (issue 21 #3), on tinynet
 * at 32x32, batch 8, as `train` (one arm): a child process with its own SQLite connection takes BEGIN
 * EXCLUSIVE on the run's database at the loop's 5th step.
 *  - Held briefly (1.5 s, within the store's patience): waited out; the run finishes with every one of its
 *    40 steps recorded and is stored as finished.
 *  - Held until the store gives up (its patience, store.h): the loop stops by itself at once (it used to
 *    train on, skipping ahead a turn per step, and end with the failure reported late); the comparison fails
 *    (FP_EIO) with one line naming the lock; while it waited the progress said so; once the lock is gone the
 *    file passes PRAGMA integrity_check and the steps committed before the lock are readable. A watchdog
 *    stops the run after CAP_S seconds so that a loop that never notices ends the test as a failure instead
 *    of hanging it. */
#include "config.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "clock.h"
#include "error.h"
#include "store_testutil.h"
#include "tap.h"
#include "trainer/run/compare.h"

#define LOCK_AT 5      /* the step after which the lock is taken */
#define CAP_S 150      /* the watchdog: longer than any give-up the store may have (5 s busy timeout, back-off) */

static char dir[64];

/* ---- the run ---- */
typedef struct {
    tu_lock_holder *hd;
    fp_compare *cmp;
    int locked;                 /* 1 once the child holds the lock */
    double lock_t, last_step_t; /* mono seconds: the lock taken, the last step reported */
    int64_t last_step;
    double max_wait_s, patience_s;   /* the longest wait progress reported, and the store's patience */
    atomic_int done;            /* the run returned: the watchdog leaves */
    atomic_int watchdog_fired;
} run_ctx;

static void progress(const fp_compare_progress *p, void *user)
{
    run_ctx *x = user;
    if (p->is_eval || p->failed)
        return;
    x->last_step = p->step;
    x->last_step_t = fp_clock_mono_s();
    if (p->store_wait_s > x->max_wait_s) {
        x->max_wait_s = p->store_wait_s;
        x->patience_s = p->store_patience_s;
    }
    if (p->step == LOCK_AT && !x->locked) {
        x->locked = tu_lock_holder_lock(x->hd) ? 1 : -1;
        x->lock_t = fp_clock_mono_s();
    }
}

static void *watchdog(void *arg)
{
    run_ctx *x = arg;
    double t0 = fp_clock_mono_s();
    while (!atomic_load(&x->done) && fp_clock_mono_s() - t0 < CAP_S)
        usleep(100000);
    if (!atomic_load(&x->done)) {
        atomic_store(&x->watchdog_fired, 1);
        fp_compare_request_stop(x->cmp);
    }
    return NULL;
}

static void cfg_one(fp_compare_config *c, const char *db, int64_t steps)
{
    fp_compare_config_default_train(c);
    c->base.arm.model = "tinynet";
    c->base.arm.image_size = 32;
    c->base.arm.seed = 3;
    c->base.arm.threads = 1;
    c->base.data = "synthetic:100";
    c->base.batch = 8;
    c->base.steps = steps;
    c->base.loader_threads = 1;
    c->base.eval_batches = 2;
    c->base.db = db;
    c->precision = "fp32";
    c->hist_every = 0;
    c->progress = progress;
    c->progress_interval_s = 0;   /* every step */
}

/* Runs cfg with the holder armed; returns fp_compare_run's code. */
static int run(fp_compare_config *cfg, run_ctx *x, fp_compare_result *res)
{
    cfg->progress_user = x;
    int rc = fp_compare_open(&x->cmp, cfg, res);
    if (rc)
        return rc;
    pthread_t th;
    int wd = pthread_create(&th, NULL, watchdog, x) == 0;
    rc = fp_compare_run(x->cmp, res);
    atomic_store(&x->done, 1);
    if (wd)
        pthread_join(th, NULL);
    fp_compare_close(x->cmp);
    return rc;
}

static int integrity_ok(const char *db)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    int ok = sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
             sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
             sqlite3_step(st) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
    sqlite3_finalize(st);
    sqlite3_close(h);
    return ok;
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/fp16probe-busy-XXXXXX", "/tmp");
    if (!mkdtemp(dir))
        tap_skip_all("cannot create a temporary directory");
    signal(SIGPIPE, SIG_IGN);
    char db[128];

    /* ---- a lock held 1.5 s: waited out, nothing lost ---- */
    snprintf(db, sizeof db, "%s/short.db", dir);
    tu_lock_holder hd;
    run_ctx x = {.hd = &hd};
    fp_compare_config cfg;
    fp_compare_result res;
    cfg_one(&cfg, db, 40);
    int rc = tu_lock_holder_start(&hd, db, 1500);
    if (rc)
        tap_skip_all("cannot fork the lock holder");
    rc = run(&cfg, &x, &res);
    tu_lock_holder_end(&hd);
    tap_ok(x.locked == 1, "another connection held BEGIN EXCLUSIVE from step %d", LOCK_AT);
    tap_ok(rc == FP_OK && res.status == FP_RUN_FINISHED && res.arms[0].steps_done == 40,
           "a 1.5 s lock is waited out: the run finishes its 40 steps (%s)", rc ? res.message : "ok");
    tap_ok(tu_sql_int(db, "SELECT count(*) FROM steps") == 40 &&
               tu_sql_int(db, "SELECT count(*) FROM runs WHERE status = 'finished'") == 1,
           "... every step is recorded and the run is stored as finished (%lld steps)",
           tu_sql_int(db, "SELECT count(*) FROM steps"));

    /* ---- a lock held until the store gives up: the loop stops, one line says why ---- */
    snprintf(db, sizeof db, "%s/long.db", dir);
    run_ctx y = {.hd = &hd};
    cfg_one(&cfg, db, INT64_C(1) << 30);
    if (tu_lock_holder_start(&hd, db, -1))
        tap_skip_all("cannot fork the lock holder");
    rc = run(&cfg, &y, &res);
    double end_t = fp_clock_mono_s();
    int still_locked = tu_lock_holder_holding(&hd);   /* the child holds it until told: the run gave up while it was held */
    tu_lock_holder_end(&hd);
    tap_ok(y.locked == 1, "another connection held BEGIN EXCLUSIVE from step %d on", LOCK_AT);
    tap_ok(!atomic_load(&y.watchdog_fired) && still_locked,
           "the loop stopped by itself while the lock was held, %.1f s after it was taken (watchdog at %d s)",
           end_t - y.lock_t, CAP_S);
    tap_ok(rc == FP_EIO && res.status == FP_RUN_FAILED && res.arms[0].status == FP_RUN_FAILED,
           "the run failed (rc %d, status %d)", rc, (int)res.status);
    tap_ok(strstr(res.message, "locked") && !strchr(res.message, '\n') && strstr(res.arms[0].message, "locked"),
           "one line naming the lock: %s", res.message);
    tap_ok(y.last_step_t - y.lock_t < 60 && res.arms[0].steps_done - y.last_step <= 1,
           "training stopped %.1f s after the lock was taken, at step %lld (the last step reported)",
           y.last_step_t - y.lock_t, (long long)y.last_step);
    tap_ok(y.max_wait_s > 1 && y.patience_s > 0 && y.max_wait_s <= y.patience_s + 1,
           "meanwhile the progress said recording waited for the lock (up to %.1f s of %.0f)", y.max_wait_s,
           y.patience_s);
    tap_ok(integrity_ok(db), "once the lock is gone the database passes PRAGMA integrity_check");
    long long kept = tu_sql_int(db, "SELECT count(*) FROM steps");
    tap_ok(kept >= LOCK_AT - 1 && kept <= res.arms[0].steps_done,
           "the steps committed before the lock are readable (%lld of %lld)", kept,
           (long long)res.arms[0].steps_done);

    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
