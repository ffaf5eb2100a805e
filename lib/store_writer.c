/* store_writer.c — the store's one writer thread (store_writer_internal.h): drains the queue into
 * SQLite in batched transactions (a group commits whole; at least every FP_STORE_COMMIT_MS), beats the
 * runs' heartbeat, wakes producers waiting on a request; a disk or I/O error stops it for good. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "clock.h"
#include "store_writer_internal.h"

#define POP_BATCH       4096
#define TXN_MAX_ROWS    200000
#define HEARTBEAT_NS    (1000000000LL)
#define COMMIT_NS       ((int64_t)FP_STORE_COMMIT_MS * 1000000LL)

static const char *rec_what(const fp_rec_t *r)
{
    static const char *const names[] = {"", "kernels", "steps", "layer times", "layers", "histograms",
                                        "precision errors", "evaluations", "device samples", "events",
                                        "kernel names", "run status", "sessions/runs"};
    return r->kind <= FP_REC_SYNC ? names[r->kind] : "records";
}

/* The writer cannot go on: keep the message, drop the open transaction, mark the runs failed if the
 * file still takes a small write (after a checkpoint that may free the WAL's space). */
static void fail(fp_store_t *s, int rc, const char *doing)
{
    fp_store_sqlite_fail(s->db, rc, s->path, doing);
    snprintf(s->fail_msg, sizeof s->fail_msg, "%s", fp_error_message());
    s->fail_code = (rc & 0xff) == SQLITE_NOMEM ? FP_ENOMEM : FP_EIO;
    atomic_store_explicit(&s->failed, 1, memory_order_release);
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (attempt == 1)
            sqlite3_exec(s->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
        if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
            continue;
        if (fp_sw_finish_all(s, FP_RUN_FAILED, s->fail_msg) == SQLITE_OK &&
            sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
            break;
        if (!sqlite3_get_autocommit(s->db))
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    }
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
                if (!in_txn) {
                    rc = fp_sw_run(s->st[ST_BEGIN]);
                    in_txn = rc == SQLITE_OK;
                    txn_start = fp_clock_mono_ns();
                    rows = 0;
                }
                if (rc == SQLITE_OK)
                    rc = fp_sw_apply(s, r);
                if (rc != SQLITE_OK) {
                    fail(s, rc, rc == SQLITE_MISUSE ? "encoding a histogram" : rec_what(r));
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
            if (rc == SQLITE_OK)
                rc = fp_sw_run(s->st[ST_COMMIT]);
            in_txn = 0;
            if (rc != SQLITE_OK) {
                fail(s, rc, "committing");
                complete(s, pending, &npending, s->fail_code);
                continue;
            }
            atomic_fetch_add(&s->written, rows);
            atomic_fetch_add(&s->commits, 1);
            complete(s, pending, &npending, FP_OK);
        } else if (!in_txn && n == 0 && s->nruns > 0 && now - s->last_heartbeat >= HEARTBEAT_NS) {
            int rc = fp_sw_run(s->st[ST_BEGIN]);
            if (rc == SQLITE_OK)
                rc = fp_sw_heartbeat(s, now);
            if (rc == SQLITE_OK)
                rc = fp_sw_run(s->st[ST_COMMIT]);
            if (rc != SQLITE_OK)
                fail(s, rc, "updating the heartbeat");
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
