/* store_reader.c — the reader's connection and the run store's sessions and runs (store_reader.h): opening
 * (live or snapshot), each query's read transaction, the statements a reader keeps prepared
 * (store_reader_internal.h), and runs with their derived stale status. Promise: every call is one short read
 * transaction on a read-only connection; nothing is ever written. */
#include "store_reader.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "error.h"
#include "store.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader_internal.h"

/* A reader opened while no writer was active reads the file immutable (no side files), and so does one whose
 * side files could not be used while the WAL was empty (store_db.h); a live one reconnects normally as soon
 * as a writer appears (its -wal file holds frames, or the file changed), before its next query. */
struct fp_reader {
    char *path;
    sqlite3 *db;
    sqlite3_stmt *q[FP_RQ_COUNT];
    int live, immutable;
    struct stat seen;   /* the file when an immutable connection was made */
};

static void disconnect(fp_reader_t *r)
{
    for (int i = 0; i < FP_RQ_COUNT; i++) {
        sqlite3_finalize(r->q[i]);
        r->q[i] = NULL;
    }
    sqlite3_close(r->db);
    r->db = NULL;
}

static int connect(fp_reader_t *r)
{
    if (stat(r->path, &r->seen) != 0)
        memset(&r->seen, 0, sizeof r->seen);
    return fp_store_db_open_ex(r->path, FP_STORE_READ, &r->db, &r->immutable);
}

static int open_mode(fp_reader_t **out, const char *path, int live)
{
    *out = NULL;
    fp_reader_t *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path ? path : "")))
        return free(r), fp_fail(FP_ENOMEM, "reader: out of memory");
    r->live = live;
    int rc = connect(r);
    if (rc != FP_OK) {
        fp_reader_close(r);
        return rc;
    }
    *out = r;
    return FP_OK;
}

int fp_reader_open(fp_reader_t **out, const char *path)
{
    return open_mode(out, path, 1);
}

int fp_reader_open_snapshot(fp_reader_t **out, const char *path)
{
    return open_mode(out, path, 0);
}

void fp_reader_close(fp_reader_t *r)
{
    if (!r)
        return;
    disconnect(r);
    free(r->path);
    free(r);
}

const char *fp_reader_path(const fp_reader_t *r)
{
    return r->path;
}

sqlite3 *fp_reader_db(fp_reader_t *r)
{
    return r->db;
}

int fp_reader_fail(fp_reader_t *r, int rc, const char *doing)
{
    return fp_store_sqlite_fail(r->db, rc, r->path, doing);
}

int fp_reader_begin(fp_reader_t *r)
{
    struct stat now;
    /* a writer appeared: a -wal with frames in it (an empty one may be a failed start's leftover) or the file
     * itself changed (a new writer switching it to WAL mode) */
    if (r->live && r->immutable &&
        (fp_store_wal_size(r->path) > 0 || stat(r->path, &now) != 0 || now.st_size != r->seen.st_size ||
         now.st_mtim.tv_sec != r->seen.st_mtim.tv_sec || now.st_mtim.tv_nsec != r->seen.st_mtim.tv_nsec)) {
        disconnect(r);
        int rc = connect(r);
        if (rc != FP_OK)
            return rc;
    }
    return fp_store_exec(r->db, r->path, "BEGIN", "starting a read");
}

int fp_reader_end(fp_reader_t *r, int rc)
{
    if (rc == FP_OK)
        return fp_store_exec(r->db, r->path, "COMMIT", "ending a read");
    sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int fp_reader_cached(fp_reader_t *r, int which, const char *sql, sqlite3_stmt **st)
{
    if (!r->q[which]) {
        int rc = sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &r->q[which], NULL);
        if (rc != SQLITE_OK)
            return fp_reader_fail(r, rc, "preparing a query");
    }
    sqlite3_reset(r->q[which]);
    sqlite3_clear_bindings(r->q[which]);
    *st = r->q[which];
    return FP_OK;
}

/* ---------------------------------------------------------------- sessions and runs */

int fp_reader_sessions(fp_reader_t *r, fp_session_row_t **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    size_t cap = 0;
    sqlite3_stmt *st = NULL;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    int src = sqlite3_prepare_v2(r->db, "SELECT s.id, s.name, s.host, s.start, s.end,"
                                 " (SELECT count(*) FROM runs WHERE session = s.id) FROM sessions s ORDER BY s.id",
                                 -1, &st, NULL);
    while ((src == SQLITE_OK || src == SQLITE_ROW) && (src = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = fp_rows_reserve((void **)rows, &cap, *n, sizeof **rows)) != FP_OK)
            break;
        fp_session_row_t *s = &(*rows)[(*n)++];
        s->id = sqlite3_column_int64(st, 0);
        fp_col_text(st, 1, s->name, sizeof s->name);
        fp_col_text(st, 2, s->host, sizeof s->host);
        s->start = fp_col_i64(st, 3);
        s->end = fp_col_i64(st, 4);
        s->runs = sqlite3_column_int64(st, 5);
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "listing sessions");
    sqlite3_finalize(st);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}

#define RUN_COLUMNS                                                                                        \
    "SELECT id, session, ref_run, arm, model, policy, device, host, dataset, optimizer, batch_size,"       \
    " image_size, seed, start, end, heartbeat, status, failure, writer_pid, writer_host FROM runs"

static int fill_run(fp_reader_t *r, sqlite3_stmt *st, fp_run_row_t *row, int with_steps)
{
    memset(row, 0, sizeof *row);
    row->id = sqlite3_column_int64(st, 0);
    row->session = sqlite3_column_int64(st, 1);
    row->ref_run = fp_col_i64(st, 2);
    char *texts[] = {row->arm, row->model, row->policy, row->device, row->host, row->dataset, row->optimizer};
    size_t caps[] = {sizeof row->arm, sizeof row->model, sizeof row->policy, sizeof row->device,
                     sizeof row->host, sizeof row->dataset, sizeof row->optimizer};
    for (int i = 0; i < 7; i++)
        fp_col_text(st, 3 + i, texts[i], caps[i]);
    row->batch_size = fp_col_i64(st, 10);
    row->image_size = fp_col_i64(st, 11);
    row->seed = sqlite3_column_int64(st, 12);
    row->start = fp_col_i64(st, 13);
    row->end = fp_col_i64(st, 14);
    row->heartbeat = fp_col_i64(st, 15);
    fp_col_text(st, 16, row->status, sizeof row->status);
    fp_col_text(st, 17, row->failure, sizeof row->failure);
    row->stale = fp_run_liveness(row->status, sizeof row->status, row->failure, sizeof row->failure,
                                 sqlite3_column_int64(st, 18), (const char *)sqlite3_column_text(st, 19),
                                 row->heartbeat);
    if (!with_steps) {   /* metadata only: no pass over the run's steps */
        row->steps = row->last_step = -1;
        row->last_loss = NAN;
        return FP_OK;
    }
    sqlite3_stmt *q;
    int rc = fp_reader_cached(r, FP_RQ_RUN_STEPS, "SELECT count(*), max(step) FROM steps WHERE run = ?1", &q);
    if (rc != FP_OK)
        return rc;
    sqlite3_bind_int64(q, 1, row->id);
    int src = sqlite3_step(q);
    if (src != SQLITE_ROW)
        return fp_reader_fail(r, src, "counting steps");
    row->steps = sqlite3_column_int64(q, 0);
    row->last_step = fp_col_i64(q, 1);
    sqlite3_reset(q);
    if ((rc = fp_reader_cached(r, FP_RQ_RUN_LAST, "SELECT loss FROM steps WHERE run = ?1 ORDER BY step DESC LIMIT 1",
                               &q)) != FP_OK)
        return rc;
    sqlite3_bind_int64(q, 1, row->id);
    src = sqlite3_step(q);
    if (src != SQLITE_ROW && src != SQLITE_DONE)
        return fp_reader_fail(r, src, "reading the last loss");
    row->last_loss = src == SQLITE_ROW ? fp_col_dbl(q, 0) : NAN;
    sqlite3_reset(q);
    return FP_OK;
}

static int no_run(fp_reader_t *r, int64_t run);

static int query_runs(fp_reader_t *r, const char *sql, int64_t arg, int with_steps, fp_run_row_t **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    size_t cap = 0;
    sqlite3_stmt *st = NULL;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    int src = sqlite3_prepare_v2(r->db, sql, -1, &st, NULL);
    if (src == SQLITE_OK)
        sqlite3_bind_int64(st, 1, arg);
    while ((src == SQLITE_OK || src == SQLITE_ROW) && (src = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = fp_rows_reserve((void **)rows, &cap, *n, sizeof **rows)) != FP_OK)
            break;
        if ((rc = fill_run(r, st, &(*rows)[*n], with_steps)) != FP_OK)
            break;
        (*n)++;
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "listing runs");
    sqlite3_finalize(st);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}

static int runs_of(fp_reader_t *r, int64_t session, int with_steps, fp_run_row_t **rows, size_t *n)
{
    if (session > 0)
        return query_runs(r, RUN_COLUMNS " WHERE session = ?1 ORDER BY id", session, with_steps, rows, n);
    return query_runs(r, RUN_COLUMNS " WHERE ?1 = ?1 ORDER BY id", 0, with_steps, rows, n);
}

int fp_reader_runs(fp_reader_t *r, int64_t session, fp_run_row_t **rows, size_t *n)
{
    return runs_of(r, session, 1, rows, n);
}

int fp_reader_runs_meta(fp_reader_t *r, int64_t session, fp_run_row_t **rows, size_t *n)
{
    return runs_of(r, session, 0, rows, n);
}

int fp_reader_run(fp_reader_t *r, int64_t run, fp_run_row_t *row)
{
    fp_run_row_t *rows;
    size_t n;
    int rc = query_runs(r, RUN_COLUMNS " WHERE id = ?1", run, 1, &rows, &n);
    if (rc != FP_OK)
        return rc;
    if (n == 0)
        rc = no_run(r, run);
    else
        *row = rows[0];
    free(rows);
    return rc;
}

/* A run the runs table did not give back: absent, or a damaged page hid it (a lookup by id can miss a row
 * on a corrupt page without SQLite noticing, where ls's full scan says "corrupt"). PRAGMA quick_check of
 * the runs table (small) tells them apart: FP_EFORMAT naming the corruption, else FP_EINVAL "no run N". */
static int no_run(fp_reader_t *r, int64_t run)
{
    sqlite3_stmt *st = NULL;
    char why[200] = "";
    int src = sqlite3_prepare_v2(r->db, "PRAGMA quick_check(runs)", -1, &st, NULL);
    if (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        if (m && strcmp(m, "ok") != 0) {
            static const char head[] = "*** in database main ***";
            if (strncmp(m, head, sizeof head - 1) == 0)
                m += sizeof head - 1;
            m += strspn(m, " \r\n");
            snprintf(why, sizeof why, "%s", m);
        }
    }
    sqlite3_finalize(st);
    if (why[0] || (src != SQLITE_ROW && (src & 0xff) == SQLITE_CORRUPT)) {
        for (char *p = why; *p; p++)   /* one line */
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        return fp_fail(FP_EFORMAT, "%s: the database is corrupt while looking up run %lld (%s)", r->path,
                       (long long)run, why[0] ? why : "database disk image is malformed");
    }
    return fp_fail(FP_EINVAL, "%s: no run %lld", r->path, (long long)run);
}

int fp_reader_check_run(fp_reader_t *r, int64_t run)
{
    sqlite3_stmt *st;
    int src = sqlite3_prepare_v2(r->db, "SELECT 1 FROM runs WHERE id = ?1", -1, &st, NULL);
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        src = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (src == SQLITE_ROW)
        return FP_OK;
    if (src == SQLITE_DONE)
        return no_run(r, run);
    return fp_reader_fail(r, src, "looking up a run");
}
