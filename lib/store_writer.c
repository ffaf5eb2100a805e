/* store_writer.c — the store's one writer thread (store_writer_internal.h): drains the queue into
 * SQLite in batched transactions (a group commits whole; at least every FP_STORE_COMMIT_MS), beats the
 * runs' heartbeat, wakes producers waiting on a request; another process's lock on the file is waited out
 * (with back-off, for the store's patience: fp_store_status says so meanwhile); a disk or I/O error, or a
 * lock past the patience, stops it for good. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "clock.h"
#include "store_writer_internal.h"

#define POP_BATCH       4096
#define TXN_MAX_ROWS    200000
#define HEARTBEAT_NS    (1000000000LL)
#define COMMIT_NS       ((int64_t)FP_STORE_COMMIT_MS * 1000000LL)

/* What the writer was doing with a record, as the end of "... while <doing>" in an error message. */
static const char *rec_what(const fp_rec_t *r)
{
    static const char *const names[] = {"writing records", "writing kernels", "writing steps",
                                        "writing layer times", "writing layers", "writing histograms",
                                        "writing precision errors", "writing evaluations",
                                        "writing device samples", "writing events", "writing kernel names",
                                        "writing a run's status", "writing sessions and runs"};
    return r->kind <= FP_REC_SYNC ? names[r->kind] : names[0];
}

static int is_busy(int rc)
{
    return (rc & 0xff) == SQLITE_BUSY;
}

/* The writer cannot go on: keep the message (set as the current error by the caller), drop the open
 * transaction, mark the runs failed if the file still takes a small write (after a checkpoint that may
 * free the WAL's space). */
static void give_up(fp_store_t *s, int code, int locked)
{
    snprintf(s->fail_msg, sizeof s->fail_msg, "%s", fp_error_message());
    s->fail_code = code;
    atomic_store_explicit(&s->failed, 1, memory_order_release);
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->runs_unmarked = 1;   /* until the runs are marked failed (here, or by fp_store_close) */
    if (locked)
        return;   /* the lock is still held: fp_store_close tries again once the thread is done */
    for (int attempt = 0; attempt < 2; attempt++) {
        if (attempt == 1)
            sqlite3_exec(s->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
        if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
            continue;
        if (fp_sw_finish_all(s, FP_RUN_FAILED, s->fail_msg) == SQLITE_OK &&
            sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) {
            s->runs_unmarked = 0;
            break;
        }
        if (!sqlite3_get_autocommit(s->db))
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    }
}

static void fail(fp_store_t *s, int rc, const char *doing)
{
    fp_store_sqlite_fail(s->db, rc, s->path, doing);
    give_up(s, (rc & 0xff) == SQLITE_NOMEM ? FP_ENOMEM : FP_EIO, is_busy(rc));
}

/* Run BEGIN IMMEDIATE or COMMIT (st), waiting out another process's lock on the file: retried with back-off
 * (FP_STORE_LOCK_RETRY_MIN_MS doubling to FP_STORE_LOCK_RETRY_MAX_MS) for up to the store's patience, with
 * lock_since telling fp_store_status that the writer waits. A wait of a second or more is said in a warning
 * event on each of this store's runs once the lock is had (the records waited in the queue: nothing lost).
 * Past the patience: SQLITE_BUSY, and *waited_ns says how long it waited. */
static int run_waiting(fp_store_t *s, sqlite3_stmt *st, const char *doing, int64_t *waited_ns)
{
    *waited_ns = 0;
    int rc = fp_sw_run(st);
    if (!is_busy(rc))
        return rc;
    int64_t t0 = fp_clock_mono_ns(), patience = atomic_load(&s->lock_patience_ns);
    int64_t delay = (int64_t)FP_STORE_LOCK_RETRY_MIN_MS * 1000000;
    atomic_store(&s->lock_since_ns, t0);
    while (is_busy(rc)) {
        int64_t left = t0 + patience - fp_clock_mono_ns();
        if (left <= 0)
            break;
        int64_t nap = delay < left ? delay : left;
        usleep((useconds_t)(nap / 1000));
        delay = delay * 2 < (int64_t)FP_STORE_LOCK_RETRY_MAX_MS * 1000000 ? delay * 2
                                                                          : (int64_t)FP_STORE_LOCK_RETRY_MAX_MS * 1000000;
        rc = fp_sw_run(st);
    }
    *waited_ns = fp_clock_mono_ns() - t0;
    atomic_store(&s->lock_since_ns, 0);
    if (rc == SQLITE_OK && *waited_ns >= 1000000000LL && st == s->st[ST_BEGIN]) {
        char text[200];
        snprintf(text, sizeof text, "recording waited %.1f s for a lock another process held on the database "
                 "(while %s); nothing was lost", (double)*waited_ns / 1e9, doing);
        int64_t now = fp_clock_wall_ns();
        for (size_t i = 0; rc == SQLITE_OK && i < s->nruns; i++)
            rc = fp_sw_insert_event(s, s->runs[i], now, -1, -1, FP_EVENT_WARNING, text);
    }
    return rc;
}

/* fail() for run_waiting's result: a lock that outlasted the patience says how long it was waited for. */
static void fail_waiting(fp_store_t *s, int rc, const char *doing, int64_t waited_ns)
{
    if (!is_busy(rc) || waited_ns <= 0) {
        fail(s, rc, doing);
        return;
    }
    fp_fail(FP_EIO, "%s: the database stayed locked by another process for %.0f s while %s; recording stopped",
            s->path, (double)waited_ns / 1e9, doing);
    give_up(s, FP_EIO, 1);
}

static void complete(fp_store_t *s, struct fp_sync_req **pending, size_t *npending, int rc)
{
    if (*npending == 0)
        return;
    pthread_mutex_lock(&s->sync_mu);
    for (size_t i = 0; i < *npending; i++) {
        pending[i]->rc = rc;
        if (rc != FP_OK)
            snprintf(pending[i]->msg, sizeof pending[i]->msg, "%s", s->fail_msg);
        pending[i]->done = 1;
    }
    pthread_cond_broadcast(&s->sync_cv);
    pthread_mutex_unlock(&s->sync_mu);
    *npending = 0;
}

void *fp_sw_thread_main(void *arg)
{
    fp_store_t *s = arg;
    fp_rec_t *batch = malloc(POP_BATCH * sizeof *batch);
    struct fp_sync_req *pending[POP_BATCH];
    size_t npending = 0, rows = 0;
    int in_txn = 0, in_group = 0;
    int64_t txn_start = 0;
    if (!batch) {
        snprintf(s->fail_msg, sizeof s->fail_msg, "%s: out of memory starting the writer", s->path);
        s->fail_code = FP_ENOMEM;
        atomic_store_explicit(&s->failed, 1, memory_order_release);
    }
    for (;;) {
        int failed = atomic_load_explicit(&s->failed, memory_order_relaxed);
        if (failed && !batch) {   /* cannot even hold a batch: wait for the stop, then leave */
            while (!fp_queue_stopped(&s->q))
                usleep(10000);
            break;
        }
        int64_t now = fp_clock_mono_ns();
        int64_t deadline = in_group ? 0 : in_txn ? txn_start + COMMIT_NS : now + HEARTBEAT_NS;
        size_t n = fp_queue_pop(&s->q, batch, POP_BATCH, deadline, !in_txn);
        for (size_t i = 0; i < n; i++) {
            fp_rec_t *r = &batch[i];
            if (!atomic_load_explicit(&s->failed, memory_order_relaxed)) {
                int rc = SQLITE_OK;
                int64_t waited = 0;
                if (!in_txn) {
                    rc = run_waiting(s, s->st[ST_BEGIN], rec_what(r), &waited);
                    in_txn = rc == SQLITE_OK;
                    txn_start = fp_clock_mono_ns();
                    rows = 0;
                }
                if (rc == SQLITE_OK)
                    rc = fp_sw_apply(s, r);
                if (rc != SQLITE_OK) {
                    fail_waiting(s, rc, rc == SQLITE_MISUSE ? "encoding a histogram" : rec_what(r), waited);
                    in_txn = in_group = 0;
                } else {
                    in_group = r->more;
                    rows++;
                }
            }
            if (r->kind == FP_REC_SYNC)
                pending[npending++] = r->u.sync;
            fp_rec_free_payload(r);
        }
        if (atomic_load_explicit(&s->failed, memory_order_relaxed)) {
            complete(s, pending, &npending, s->fail_code);
            if (fp_queue_stopped(&s->q))
                break;
            continue;
        }
        now = fp_clock_mono_ns();
        int stopping = fp_queue_stopped(&s->q);
        if (in_txn && !in_group &&
            (n == 0 || npending > 0 || stopping || rows >= TXN_MAX_ROWS || now - txn_start >= COMMIT_NS)) {
            int rc = now - s->last_heartbeat >= HEARTBEAT_NS ? fp_sw_heartbeat(s, now) : SQLITE_OK;
            int64_t waited = 0;
            if (rc == SQLITE_OK)
                rc = run_waiting(s, s->st[ST_COMMIT], "committing", &waited);
            in_txn = 0;
            if (rc != SQLITE_OK) {
                fail_waiting(s, rc, "committing", waited);
                complete(s, pending, &npending, s->fail_code);
                continue;
            }
            atomic_fetch_add(&s->written, rows);
            atomic_fetch_add(&s->commits, 1);
            complete(s, pending, &npending, FP_OK);
        } else if (!in_txn && n == 0 && s->nruns > 0 && now - s->last_heartbeat >= HEARTBEAT_NS) {
            int64_t waited = 0;
            int rc = run_waiting(s, s->st[ST_BEGIN], "updating the heartbeat", &waited);
            if (rc == SQLITE_OK)
                rc = fp_sw_heartbeat(s, fp_clock_mono_ns());
            if (rc == SQLITE_OK)
                rc = run_waiting(s, s->st[ST_COMMIT], "updating the heartbeat", &waited);
            if (rc != SQLITE_OK)
                fail_waiting(s, rc, "updating the heartbeat", waited);
        }
        if (stopping && !in_txn)
            break;
    }
    free(batch);
    return NULL;
}

int fp_sw_failed_rc(fp_store_t *s)
{
    if (!atomic_load_explicit(&s->failed, memory_order_acquire))
        return FP_OK;
    return fp_fail(s->fail_code, "%s", s->fail_msg);
}

int fp_store_writer_status(fp_store_t *s)
{
    return fp_sw_failed_rc(s);
}

int fp_store_status(fp_store_t *s, fp_store_status_t *st)
{
    memset(st, 0, sizeof *st);
    st->patience_s = (double)atomic_load(&s->lock_patience_ns) / 1e9;
    if (atomic_load_explicit(&s->failed, memory_order_acquire)) {
        st->state = FP_STORE_FAILED;
        st->code = fp_sw_failed_rc(s);
        snprintf(st->message, sizeof st->message, "%s", s->fail_msg);
        return st->code;
    }
    int64_t since = atomic_load(&s->lock_since_ns);
    if (since > 0) {
        st->state = FP_STORE_WAITING;
        st->waiting_s = (double)(fp_clock_mono_ns() - since) / 1e9;
        snprintf(st->message, sizeof st->message, "%s: waiting for a lock another process holds on the database "
                 "(%.1f s so far; recording stops after %.0f s)", s->path, st->waiting_s, st->patience_s);
    }
    return FP_OK;
}

void fp_store_set_lock_patience(fp_store_t *s, int64_t ms)
{
    if (s)
        atomic_store(&s->lock_patience_ns, (ms > 0 ? ms : 0) * 1000000);
}

void fp_store_get_stats(fp_store_t *s, fp_store_stats_t *st)
{
    pthread_mutex_lock(&s->q.mu);
    st->queued = s->q.pushed;
    st->dropped = s->q.dropped;
    st->queue_capacity = s->q.cap;
    pthread_mutex_unlock(&s->q.mu);
    st->written = atomic_load(&s->written);
    st->commits = atomic_load(&s->commits);
}
