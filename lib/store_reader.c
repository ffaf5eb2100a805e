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

int fp_reader_cached(fp_reader_t *r, int slot, const char *sql, sqlite3_stmt **st)
{
    if (!r->q[slot]) {
        int rc = sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &r->q[slot], NULL);
        if (rc != SQLITE_OK)
            return fp_reader_fail(r, rc, "preparing a query");
    }
    sqlite3_reset(r->q[slot]);
    sqlite3_clear_bindings(r->q[slot]);
    *st = r->q[slot];
    return FP_OK;
}

/* ---------------------------------------------------------------- sessions and runs */

static const fp_col_t session_cols[] = {
    FP_COL(fp_session_row_t, id, FP_COL_I64),       FP_COL(fp_session_row_t, name, FP_COL_TEXT),
    FP_COL(fp_session_row_t, host, FP_COL_TEXT),    FP_COL(fp_session_row_t, start, FP_COL_I64_NA),
    FP_COL(fp_session_row_t, end, FP_COL_I64_NA),   FP_COL(fp_session_row_t, runs, FP_COL_I64),
};

int fp_reader_sessions(fp_reader_t *r, fp_session_row_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT s.id, s.name, s.host, s.start, s.end,"
                                 " (SELECT count(*) FROM runs WHERE session = s.id) FROM sessions s ORDER BY s.id",
                                 FP_COLS(session_cols), NULL, "listing sessions", FP_RQ_NONE};
    return fp_reader_collect(r, &q, NULL, 0, 0, sizeof **rows, (void **)rows, n);
}

#define RUN_COLUMNS                                                                                        \
    "SELECT id, session, ref_run, arm, model, policy, device, host, dataset, optimizer, batch_size,"       \
    " image_size, seed, start, end, heartbeat, status, failure, writer_pid, writer_host FROM runs"

/* Columns 0..17 of RUN_COLUMNS; 18 and 19, the writer's pid and host, are fill_run_meta's. */
static const fp_col_t run_cols[] = {
    FP_COL(fp_run_row_t, id, FP_COL_I64),              FP_COL(fp_run_row_t, session, FP_COL_I64),
    FP_COL(fp_run_row_t, ref_run, FP_COL_I64_NA),      FP_COL(fp_run_row_t, arm, FP_COL_TEXT),
    FP_COL(fp_run_row_t, model, FP_COL_TEXT),          FP_COL(fp_run_row_t, policy, FP_COL_TEXT),
    FP_COL(fp_run_row_t, device, FP_COL_TEXT),         FP_COL(fp_run_row_t, host, FP_COL_TEXT),
    FP_COL(fp_run_row_t, dataset, FP_COL_TEXT),        FP_COL(fp_run_row_t, optimizer, FP_COL_TEXT),
    FP_COL(fp_run_row_t, batch_size, FP_COL_I64_NA),   FP_COL(fp_run_row_t, image_size, FP_COL_I64_NA),
    FP_COL(fp_run_row_t, seed, FP_COL_I64),            FP_COL(fp_run_row_t, start, FP_COL_I64_NA),
    FP_COL(fp_run_row_t, end, FP_COL_I64_NA),          FP_COL(fp_run_row_t, heartbeat, FP_COL_I64_NA),
    FP_COL(fp_run_row_t, status, FP_COL_TEXT),         FP_COL(fp_run_row_t, failure, FP_COL_TEXT),
};

/* The derived status; metadata only: no pass over the run's steps. */
static int fill_run_meta(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_run_row_t *row = elem;
    row->stale = fp_run_liveness(row->status, sizeof row->status, row->failure, sizeof row->failure,
                                 sqlite3_column_int64(st, 18), (const char *)sqlite3_column_text(st, 19),
                                 row->heartbeat);
    row->steps = row->last_step = -1;
    row->last_loss = NAN;
    return FP_OK;
}

/* The derived status and the run's steps: how many, the last, its loss. */
static int fill_run(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    fp_run_row_t *row = elem;
    fill_run_meta(st, elem, r);
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
    const fp_query_t q = {sql, FP_COLS(run_cols), with_steps ? fill_run : fill_run_meta, "listing runs", FP_RQ_NONE};
    return fp_reader_collect(r, &q, &arg, 1, 0, sizeof **rows, (void **)rows, n);
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
