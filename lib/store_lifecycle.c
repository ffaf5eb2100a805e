/* store_lifecycle.c — a store's and its runs' life (store.h): open (runs of dead writers marked
 * interrupted, then statements, names, queue, thread), sessions and runs begun through the writer, their
 * heartbeat, close (running runs and open sessions ended). Promise: begin_* and flush return committed. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config.h"
#include "clock.h"
#include "store_writer_internal.h"

#define QUEUE_INITIAL   (64u * 1024u)          /* records (~8 MB) */
#define QUEUE_MAX       (4u * 1024u * 1024u)   /* hard cap (~500 MB) */

static atomic_int live_writers;   /* stores open in this process (for the stale-run fix-up) */

static int push_id(int64_t **arr, size_t *n, int64_t id)
{
    int64_t *a = realloc(*arr, (*n + 1) * sizeof *a);
    if (!a)
        return SQLITE_NOMEM;
    a[(*n)++] = id;
    *arr = a;
    return SQLITE_OK;
}

static int apply_session(fp_store_t *s, struct fp_sync_req *req)
{
    const fp_session_info_t *in = req->info;
    sqlite3_stmt *st = s->st[ST_SESSION];
    fp_sw_bind_text(st, 1, in->name);
    fp_sw_bind_text(st, 2, fp_store_hostname());
    sqlite3_bind_int64(st, 3, fp_clock_wall_ns());
    fp_sw_bind_text(st, 4, in->config_json);
    fp_sw_bind_text(st, 5, PACKAGE_VERSION);
    int rc = fp_sw_run(st);
    if (rc == SQLITE_OK) {
        req->id = sqlite3_last_insert_rowid(s->db);
        rc = push_id(&s->sessions, &s->nsessions, req->id);
    }
    return rc;
}

static int apply_run(fp_store_t *s, struct fp_sync_req *req)
{
    const fp_run_info_t *in = req->info;
    sqlite3_stmt *st = s->st[ST_RUN];
    int64_t now = fp_clock_wall_ns();
    sqlite3_bind_int64(st, 1, in->session);
    fp_sw_bind_text(st, 2, in->arm);
    fp_sw_bind_text(st, 3, in->model);
    fp_sw_bind_text(st, 4, in->policy);
    if (in->ref_run > 0)
        sqlite3_bind_int64(st, 5, in->ref_run);
    const char *texts[] = {in->device, in->driver_version, in->cuda_version, in->cudnn_version,
                           in->cupti_version, in->blas, fp_store_hostname()};
    for (int i = 0; i < 7; i++)
        fp_sw_bind_text(st, 6 + i, texts[i]);
    fp_sw_bind_i64_na(st, 13, in->batch_size);
    fp_sw_bind_i64_na(st, 14, in->image_size);
    fp_sw_bind_text(st, 15, in->dataset);
    sqlite3_bind_int64(st, 16, in->seed);
    fp_sw_bind_text(st, 17, in->optimizer);
    fp_sw_bind_text(st, 18, in->optimizer_config);
    fp_sw_bind_text(st, 19, in->config_json);
    fp_sw_bind_text(st, 20, PACKAGE_VERSION);
    sqlite3_bind_int64(st, 21, now);
    sqlite3_bind_int64(st, 22, (sqlite3_int64)getpid());
    fp_sw_bind_text(st, 23, fp_store_hostname());
    sqlite3_bind_int64(st, 24, now);
    int rc = fp_sw_run(st);
    if (rc == SQLITE_OK) {
        req->id = sqlite3_last_insert_rowid(s->db);
        rc = push_id(&s->runs, &s->nruns, req->id);
    }
    return rc;
}

/* Mark this store's running runs and open sessions as ended (FINISH request, or after a failure). */
int fp_sw_finish_all(fp_store_t *s, int status, const char *msg)
{
    int64_t now = fp_clock_wall_ns();
    uint64_t dropped;
    pthread_mutex_lock(&s->q.mu);
    dropped = s->q.dropped;
    pthread_mutex_unlock(&s->q.mu);
    int rc = SQLITE_OK;
    for (size_t i = 0; rc == SQLITE_OK && i < s->nruns; i++) {
        if (dropped > 0 && status != FP_RUN_FAILED) {
            char text[160];
            snprintf(text, sizeof text, "%llu records dropped: the writer queue was full",
                     (unsigned long long)dropped);
            rc = fp_sw_insert_event(s, s->runs[i], now, -1, -1, FP_EVENT_WARNING, text);
        }
        if (rc == SQLITE_OK)
            rc = fp_sw_end_run(s, s->runs[i], status, msg, now);
    }
    for (size_t i = 0; rc == SQLITE_OK && i < s->nsessions; i++) {
        sqlite3_stmt *st = s->st[ST_END_SESSION];
        sqlite3_bind_int64(st, 1, s->sessions[i]);
        sqlite3_bind_int64(st, 2, now);
        rc = fp_sw_run(st);
    }
    return rc;
}

int fp_sw_apply_sync(fp_store_t *s, struct fp_sync_req *req)
{
    switch (req->kind) {
    case SYNC_SESSION: return apply_session(s, req);
    case SYNC_RUN: return apply_run(s, req);
    case SYNC_FINISH: return fp_sw_finish_all(s, req->status, req->info);
    case SYNC_FLUSH: return SQLITE_OK;
    }
    return SQLITE_OK;
}

int fp_sw_heartbeat(fp_store_t *s, int64_t now_mono)
{
    int64_t now = fp_clock_wall_ns();
    int rc = SQLITE_OK;
    for (size_t i = 0; rc == SQLITE_OK && i < s->nruns; i++) {
        sqlite3_bind_int64(s->st[ST_HEARTBEAT], 1, s->runs[i]);
        sqlite3_bind_int64(s->st[ST_HEARTBEAT], 2, now);
        rc = fp_sw_run(s->st[ST_HEARTBEAT]);
    }
    s->last_heartbeat = now_mono;
    return rc;
}

/* Runs left 'running' by a writer process of this host that no longer exists: interrupted. */
static int fix_up_stale_runs(sqlite3 *db, const char *path)
{
    sqlite3_stmt *sel = NULL, *upd = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT id, writer_pid, writer_host FROM runs WHERE status = 'running'", -1,
                                &sel, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "UPDATE runs SET status = 'interrupted', end = coalesce(heartbeat, start),"
                                " failure = ?2 WHERE id = ?1 AND status = 'running'", -1, &upd, NULL);
    int own_gone = atomic_load(&live_writers) == 0;   /* no other store of ours is writing */
    while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(sel)) == SQLITE_ROW) {
        int64_t pid = sqlite3_column_int64(sel, 1);
        const char *host = (const char *)sqlite3_column_text(sel, 2);
        int gone = fp_store_writer_gone(pid, host) ||
                   (own_gone && pid == getpid() && host && strcmp(host, fp_store_hostname()) == 0);
        if (!gone)
            continue;
        char msg[128];
        snprintf(msg, sizeof msg, "writer process %lld ended without closing the run", (long long)pid);
        sqlite3_bind_int64(upd, 1, sqlite3_column_int64(sel, 0));
        sqlite3_bind_text(upd, 2, msg, -1, SQLITE_TRANSIENT);
        rc = fp_sw_run(upd);
    }
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    sqlite3_finalize(sel);
    sqlite3_finalize(upd);
    return rc == SQLITE_OK ? FP_OK : fp_store_sqlite_fail(db, rc, path, "marking stale runs interrupted");
}

static void free_store(fp_store_t *s)
{
    fp_sw_finalize(s);
    if (s->db)
        sqlite3_close(s->db);
    fp_sw_free_strings(s);
    if (s->q.buf)
        fp_queue_destroy(&s->q);
    pthread_mutex_destroy(&s->sync_mu);
    pthread_cond_destroy(&s->sync_cv);
    pthread_mutex_destroy(&s->intern_mu);
    free(s->runs);
    free(s->sessions);
    free(s->path);
    free(s);
}

int fp_store_open(fp_store_t **out, const char *path)
{
    *out = NULL;
    fp_store_t *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path ? path : "")))
        return free(s), fp_fail(FP_ENOMEM, "store: out of memory");
    pthread_mutex_init(&s->sync_mu, NULL);
    pthread_cond_init(&s->sync_cv, NULL);
    pthread_mutex_init(&s->intern_mu, NULL);
    atomic_store(&s->lock_patience_ns, (int64_t)FP_STORE_LOCK_PATIENCE_MS * 1000000);
    int rc = fp_store_db_open(path, FP_STORE_WRITE, &s->db);
    if (rc == FP_OK)
        rc = fix_up_stale_runs(s->db, path);
    if (rc == FP_OK)
        rc = fp_sw_prepare(s);
    if (rc == FP_OK)
        rc = fp_sw_load_strings(s);
    if (rc == FP_OK)
        rc = fp_queue_init(&s->q, QUEUE_INITIAL, QUEUE_MAX);
    if (rc == FP_OK)   /* from here a lock is waited out by the writer itself, a slice at a time */
        sqlite3_busy_timeout(s->db, FP_STORE_LOCK_SLICE_MS);
    if (rc == FP_OK && pthread_create(&s->thread, NULL, fp_sw_thread_main, s) != 0)
        rc = fp_fail(FP_EINTERNAL, "%s: cannot start the writer thread", path);
    if (rc != FP_OK) {
        free_store(s);
        return rc;
    }
    s->thread_started = 1;
    atomic_fetch_add(&live_writers, 1);
    *out = s;
    return FP_OK;
}

static int sync_request(fp_store_t *s, sync_kind kind, const void *info, int status, int64_t *id)
{
    int rc = fp_sw_failed_rc(s);
    if (rc != FP_OK)
        return rc;
    struct fp_sync_req req = {.kind = kind, .info = info, .status = status};
    fp_rec_t r = {.kind = FP_REC_SYNC};
    r.u.sync = &req;
    if ((rc = fp_queue_push(&s->q, &r, 1, 1)) != FP_OK)
        return rc;
    pthread_mutex_lock(&s->sync_mu);
    while (!req.done)
        pthread_cond_wait(&s->sync_cv, &s->sync_mu);
    pthread_mutex_unlock(&s->sync_mu);
    if (req.rc != FP_OK)
        return fp_fail(req.rc, "%s", req.msg);
    if (id)
        *id = req.id;
    return FP_OK;
}

/* After the writer thread gave up without marking its runs: one more try, on this thread, waiting a second
 * for the lock, so that the runs read 'failed' with the writer's message rather than 'running' (else
 * readers show them interrupted once this process is gone). */
static void mark_failed_late(fp_store_t *s)
{
    sqlite3_busy_timeout(s->db, 1000);
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return;
    if (fp_sw_finish_all(s, FP_RUN_FAILED, s->fail_msg) == SQLITE_OK &&
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
        s->runs_unmarked = 0;
    else
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

int fp_store_close(fp_store_t *s, fp_run_status status, const char *message)
{
    if (!s)
        return FP_OK;
    int rc = sync_request(s, SYNC_FINISH, message, status == FP_RUN_RUNNING ? FP_RUN_FINISHED : status, NULL);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", fp_error_message());
    fp_queue_stop(&s->q);
    pthread_join(s->thread, NULL);
    atomic_fetch_sub(&live_writers, 1);
    if (s->runs_unmarked)   /* the writer gave up (a lock that outlasted its patience): mark the runs now if it can */
        mark_failed_late(s);
    if (rc == FP_OK)
        rc = fp_sw_failed_rc(s);
    else
        fp_fail(rc, "%s", msg);
    free_store(s);
    return rc;
}

int fp_store_begin_session(fp_store_t *s, const fp_session_info_t *info, int64_t *id)
{
    if (!info || !id)
        return fp_fail(FP_EINVAL, "store: begin_session: missing argument");
    return sync_request(s, SYNC_SESSION, info, 0, id);
}

int fp_store_begin_run(fp_store_t *s, const fp_run_info_t *info, int64_t *id)
{
    if (!info || !id || !info->model || !info->policy)
        return fp_fail(FP_EINVAL, "store: begin_run: model and policy are required");
    return sync_request(s, SYNC_RUN, info, 0, id);
}

int fp_store_flush(fp_store_t *s)
{
    return sync_request(s, SYNC_FLUSH, NULL, 0, NULL);
}
