/* store_reader.c — the run store's queries (store_reader.h): sessions and runs (with derived
 * stale status), steps since k, per-layer aggregates, histograms, kernel summaries. Promise: every
 * call is one short read transaction on a read-only connection; nothing is ever written. */
#include "store_reader.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "error.h"
#include "store.h"
#include "store_columns.h"
#include "store_db.h"

enum { Q_STEPS_SINCE, Q_LAYER_TIMES, Q_LAYERS, Q_RUN_STEPS, Q_RUN_LAST, Q_COUNT };

static const char *const query_sql[Q_COUNT] = {
    [Q_STEPS_SINCE] = "SELECT step, loss, loss_scale, lr, samples_per_s, energy_j, power_w, skipped, start, end,"
                      " wall_ns, mem_current, mem_peak, host_cpu_ns FROM steps WHERE run = ?1 AND step > ?2"
                      " ORDER BY step LIMIT ?3",
    [Q_LAYER_TIMES] = "SELECT layer, phase, time_ns, kernels FROM layer_times"
                      " WHERE run = ?1 AND step BETWEEN ?2 AND ?3",
    [Q_LAYERS] = "SELECT layer, name, type FROM layers WHERE run = ?1",
    [Q_RUN_STEPS] = "SELECT count(*), max(step) FROM steps WHERE run = ?1",
    [Q_RUN_LAST] = "SELECT loss FROM steps WHERE run = ?1 ORDER BY step DESC LIMIT 1",
};

/* A reader opened while no writer was active reads the file immutable (no side files), and so does one whose
 * side files could not be used while the WAL was empty (store_db.h); a live one reconnects normally as soon
 * as a writer appears (its -wal file holds frames, or the file changed), before its next query. */
struct fp_reader {
    char *path;
    sqlite3 *db;
    sqlite3_stmt *q[Q_COUNT];
    int live, immutable;
    struct stat seen;   /* the file when an immutable connection was made */
};

static void disconnect(fp_reader_t *r)
{
    for (int i = 0; i < Q_COUNT; i++) {
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

/* A cached statement, reset and with its bindings cleared. */
static int cached(fp_reader_t *r, int which, sqlite3_stmt **st)
{
    if (!r->q[which]) {
        int rc = sqlite3_prepare_v3(r->db, query_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &r->q[which], NULL);
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
    int rc = cached(r, Q_RUN_STEPS, &q);
    if (rc != FP_OK)
        return rc;
    sqlite3_bind_int64(q, 1, row->id);
    int src = sqlite3_step(q);
    if (src != SQLITE_ROW)
        return fp_reader_fail(r, src, "counting steps");
    row->steps = sqlite3_column_int64(q, 0);
    row->last_step = fp_col_i64(q, 1);
    sqlite3_reset(q);
    if ((rc = cached(r, Q_RUN_LAST, &q)) != FP_OK)
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

/* ---------------------------------------------------------------- steps */

int fp_reader_steps_since(fp_reader_t *r, int64_t run, int64_t after_step, size_t limit, fp_step_row_t **rows,
                          size_t *n)
{
    *rows = NULL;
    *n = 0;
    size_t cap = 0;
    sqlite3_stmt *st;
    int rc = fp_reader_begin(r);
    if (rc == FP_OK)
        rc = cached(r, Q_STEPS_SINCE, &st);
    if (rc != FP_OK)
        return fp_reader_end(r, rc);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, after_step);
    sqlite3_bind_int64(st, 3, limit ? (sqlite3_int64)limit : -1);
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = fp_rows_reserve((void **)rows, &cap, *n, sizeof **rows)) != FP_OK)
            break;
        fp_step_row_t *s = &(*rows)[(*n)++];
        s->step = sqlite3_column_int64(st, 0);
        s->loss = fp_col_dbl(st, 1);
        s->loss_scale = fp_col_dbl(st, 2);
        s->lr = fp_col_dbl(st, 3);
        s->samples_per_s = fp_col_dbl(st, 4);
        s->energy_j = fp_col_dbl(st, 5);
        s->power_w = fp_col_dbl(st, 6);
        s->skipped = sqlite3_column_int(st, 7);
        s->start = fp_col_i64(st, 8);
        s->end = fp_col_i64(st, 9);
        s->wall_ns = fp_col_i64(st, 10);
        s->mem_current = fp_col_i64(st, 11);
        s->mem_peak = fp_col_i64(st, 12);
        s->host_cpu_ns = fp_col_i64(st, 13);
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading steps");
    sqlite3_reset(st);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}

/* ---------------------------------------------------------------- grouped statistics */

typedef struct {
    int64_t group, value;
} gv_t;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int64_t count, sum, min, max;
    double mean, median, stddev;
} stats_t;

/* Per group 0..ngroups-1 of the (group, value) pairs: count, sum, min, max, mean, median, sample
 * standard deviation. */
static int group_stats(const gv_t *v, size_t n, size_t ngroups, stats_t *out)
{
    size_t *off = calloc(ngroups + 1, sizeof *off);
    int64_t *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!off || !sorted) {
        free(off);
        free(sorted);
        return fp_fail(FP_ENOMEM, "reader: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        off[v[i].group + 1]++;
    for (size_t g = 0; g < ngroups; g++)
        off[g + 1] += off[g];
    size_t *fill = malloc((ngroups ? ngroups : 1) * sizeof *fill);
    if (!fill) {
        free(off);
        free(sorted);
        return fp_fail(FP_ENOMEM, "reader: out of memory");
    }
    memcpy(fill, off, ngroups * sizeof *fill);
    for (size_t i = 0; i < n; i++)
        sorted[fill[v[i].group]++] = v[i].value;
    for (size_t g = 0; g < ngroups; g++) {
        int64_t *x = sorted + off[g];
        size_t m = off[g + 1] - off[g];
        stats_t *s = &out[g];
        memset(s, 0, sizeof *s);
        s->count = (int64_t)m;
        if (m == 0)
            continue;
        qsort(x, m, sizeof *x, cmp_i64);
        double sum = 0;
        for (size_t i = 0; i < m; i++)
            sum += (double)x[i];
        s->sum = 0;
        for (size_t i = 0; i < m; i++)
            s->sum += x[i];
        s->mean = sum / (double)m;
        double ss = 0;
        for (size_t i = 0; i < m; i++)
            ss += ((double)x[i] - s->mean) * ((double)x[i] - s->mean);
        s->stddev = m > 1 ? sqrt(ss / (double)(m - 1)) : 0.0;
        s->min = x[0];
        s->max = x[m - 1];
        s->median = m % 2 ? (double)x[m / 2] : ((double)x[m / 2 - 1] + (double)x[m / 2]) / 2.0;
    }
    free(fill);
    free(off);
    free(sorted);
    return FP_OK;
}

int fp_reader_layer_summary(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi, fp_layer_sum_t **rows,
                            size_t *n)
{
    *rows = NULL;
    *n = 0;
    gv_t *v = NULL;
    int64_t *kern_sum = NULL, *kern_n = NULL;
    stats_t *stats = NULL;
    size_t nv = 0, cap = 0, ngroups = 0;
    sqlite3_stmt *st;
    int src = SQLITE_DONE, rc = fp_reader_begin(r);
    if (rc == FP_OK)
        rc = cached(r, Q_LAYER_TIMES, &st);
    if (rc != FP_OK)
        return fp_reader_end(r, rc);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, step_lo);
    sqlite3_bind_int64(st, 3, step_hi);
    int max_layer = -1;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        int layer = sqlite3_column_int(st, 0), phase = sqlite3_column_int(st, 1);
        if (layer < 0 || phase < 0 || phase >= FP_PHASE_COUNT)
            continue;
        if ((rc = fp_rows_reserve((void **)&v, &cap, nv, sizeof *v)) != FP_OK)
            break;
        v[nv].group = (int64_t)layer * FP_PHASE_COUNT + phase;
        v[nv++].value = sqlite3_column_int64(st, 2);
        if (layer > max_layer)
            max_layer = layer;
        if ((size_t)(layer + 1) * FP_PHASE_COUNT > ngroups) {   /* kernel counts per group */
            size_t ng = (size_t)(layer + 1) * FP_PHASE_COUNT * 2;
            int64_t *a = realloc(kern_sum, ng * sizeof *a), *b = a ? realloc(kern_n, ng * sizeof *b) : NULL;
            if (a)
                kern_sum = a;
            if (!a || !b) {
                rc = fp_fail(FP_ENOMEM, "reader: out of memory");
                break;
            }
            kern_n = b;
            memset(kern_sum + ngroups, 0, (ng - ngroups) * sizeof *a);
            memset(kern_n + ngroups, 0, (ng - ngroups) * sizeof *b);
            ngroups = ng;
        }
        if (sqlite3_column_type(st, 3) != SQLITE_NULL) {
            kern_sum[v[nv - 1].group] += sqlite3_column_int64(st, 3);
            kern_n[v[nv - 1].group]++;
        }
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading layer times");
    sqlite3_reset(st);
    size_t used = (size_t)(max_layer + 1) * FP_PHASE_COUNT;
    if (rc == FP_OK && used > 0) {
        stats = malloc(used * sizeof *stats);
        *rows = calloc(used, sizeof **rows);
        if (!stats || !*rows)
            rc = fp_fail(FP_ENOMEM, "reader: out of memory");
        else
            rc = group_stats(v, nv, used, stats);
    }
    for (size_t g = 0; rc == FP_OK && g < used; g++) {
        if (stats[g].count == 0)
            continue;
        fp_layer_sum_t *o = &(*rows)[(*n)++];
        o->layer = (int)(g / FP_PHASE_COUNT);
        o->phase = (int)(g % FP_PHASE_COUNT);
        o->steps = stats[g].count;
        o->mean_ns = stats[g].mean;
        o->median_ns = stats[g].median;
        o->stddev_ns = stats[g].stddev;
        o->min_ns = stats[g].min;
        o->max_ns = stats[g].max;
        o->mean_kernels = kern_n[g] ? (double)kern_sum[g] / (double)kern_n[g] : NAN;
    }
    if (rc == FP_OK && *n > 0 && (rc = cached(r, Q_LAYERS, &st)) == FP_OK) {   /* names */
        sqlite3_bind_int64(st, 1, run);
        while ((src = sqlite3_step(st)) == SQLITE_ROW) {
            int layer = sqlite3_column_int(st, 0);
            for (size_t i = 0; i < *n; i++)
                if ((*rows)[i].layer == layer) {
                    fp_col_text(st, 1, (*rows)[i].name, sizeof (*rows)[i].name);
                    fp_col_text(st, 2, (*rows)[i].type, sizeof (*rows)[i].type);
                }
        }
        if (src != SQLITE_DONE)
            rc = fp_reader_fail(r, src, "reading layer names");
        sqlite3_reset(st);
    }
    free(v);
    free(kern_sum);
    free(kern_n);
    free(stats);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}

/* ---------------------------------------------------------------- histograms */

int fp_reader_histograms(fp_reader_t *r, int64_t run, int layer, int64_t step, fp_hist_row_t **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    int src = sqlite3_prepare_v2(r->db,
                                 "SELECT step, role, blob FROM histograms WHERE run = ?1 AND layer = ?2 AND step ="
                                 " (SELECT max(step) FROM histograms WHERE run = ?1 AND layer = ?2 AND step <= ?3)"
                                 " ORDER BY role", -1, &st, NULL);
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int(st, 2, layer);
        sqlite3_bind_int64(st, 3, step < 0 ? INT64_MAX : step);
    }
    size_t cap = 0;
    while ((src == SQLITE_OK || src == SQLITE_ROW) && (src = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = fp_rows_reserve((void **)rows, &cap, *n, sizeof **rows)) != FP_OK)
            break;
        fp_hist_row_t *h = &(*rows)[*n];
        h->step = sqlite3_column_int64(st, 0);
        h->layer = layer;
        h->role = sqlite3_column_int(st, 1);
        const void *blob = sqlite3_column_blob(st, 2);
        int len = sqlite3_column_bytes(st, 2);
        if ((rc = fp_hist_from_blob(&h->hist, blob, (size_t)len)) != FP_OK) {
            rc = fp_fail(rc, "%s: histogram of run %lld layer %d step %lld: %s", r->path, (long long)run, layer,
                         (long long)h->step, fp_error_message());
            break;
        }
        (*n)++;
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading histograms");
    sqlite3_finalize(st);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}

/* ---------------------------------------------------------------- kernel summary */

static int cmp_total_desc(const void *a, const void *b)
{
    const fp_kernel_sum_t *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns < y->total_ns ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* Double the name-id -> group table and re-enter the ngroups names of name_of. */
static int rehash(int64_t **slot_id, int64_t **slot_group, size_t *nslots, const int64_t *name_of, size_t ngroups)
{
    size_t ns = *nslots * 2;
    int64_t *ids = malloc(ns * sizeof *ids), *groups = malloc(ns * sizeof *groups);
    if (!ids || !groups) {
        free(ids);
        free(groups);
        return fp_fail(FP_ENOMEM, "reader: out of memory");
    }
    for (size_t i = 0; i < ns; i++)
        ids[i] = -1;
    for (size_t g = 0; g < ngroups; g++) {
        size_t h = (size_t)((uint64_t)name_of[g] * 0x9E3779B97F4A7C15ULL) & (ns - 1);
        while (ids[h] != -1)
            h = (h + 1) & (ns - 1);
        ids[h] = name_of[g];
        groups[h] = (int64_t)g;
    }
    free(*slot_id);
    free(*slot_group);
    *slot_id = ids;
    *slot_group = groups;
    *nslots = ns;
    return FP_OK;
}

int fp_reader_kernel_summary(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi, fp_kernel_sum_t **rows,
                             size_t *n)
{
    *rows = NULL;
    *n = 0;
    gv_t *v = NULL;
    int64_t *name_of = NULL;      /* group -> StringIds id */
    int64_t *slot_id = NULL;      /* open addressing: name id -> group */
    int64_t *slot_group = NULL;
    size_t nv = 0, cap = 0, ngroups = 0, gcap = 0, nslots = 1024;
    stats_t *stats = NULL;
    sqlite3_stmt *st = NULL;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    slot_id = malloc(nslots * sizeof *slot_id);
    slot_group = malloc(nslots * sizeof *slot_group);
    if (!slot_id || !slot_group)
        rc = fp_fail(FP_ENOMEM, "reader: out of memory");
    else
        for (size_t i = 0; i < nslots; i++)
            slot_id[i] = -1;
    int src = rc == FP_OK ? sqlite3_prepare_v2(r->db,
                                               "SELECT coalesce(demangledName, shortName, 0), end - start FROM kernels"
                                               " WHERE run = ?1 AND step BETWEEN ?2 AND ?3", -1, &st, NULL)
                          : SQLITE_DONE;
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, step_lo);
        sqlite3_bind_int64(st, 3, step_hi);
    }
    while (rc == FP_OK && (src == SQLITE_OK || src == SQLITE_ROW) && (src = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        size_t h = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ULL) & (nslots - 1);
        while (slot_id[h] != -1 && slot_id[h] != id)
            h = (h + 1) & (nslots - 1);
        if (slot_id[h] == -1) {
            if ((ngroups + 1) * 2 > nslots) {   /* keep the table at most half full */
                if ((rc = rehash(&slot_id, &slot_group, &nslots, name_of, ngroups)) != FP_OK)
                    break;
                h = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ULL) & (nslots - 1);
                while (slot_id[h] != -1)
                    h = (h + 1) & (nslots - 1);
            }
            if ((rc = fp_rows_reserve((void **)&name_of, &gcap, ngroups, sizeof *name_of)) != FP_OK)
                break;
            slot_id[h] = id;
            slot_group[h] = (int64_t)ngroups;
            name_of[ngroups++] = id;
        }
        if ((rc = fp_rows_reserve((void **)&v, &cap, nv, sizeof *v)) != FP_OK)
            break;
        v[nv].group = slot_group[h];
        v[nv++].value = sqlite3_column_int64(st, 1);
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading kernels");
    sqlite3_finalize(st);
    st = NULL;
    if (rc == FP_OK && ngroups > 0) {
        stats = malloc(ngroups * sizeof *stats);
        *rows = calloc(ngroups, sizeof **rows);
        if (!stats || !*rows)
            rc = fp_fail(FP_ENOMEM, "reader: out of memory");
        else
            rc = group_stats(v, nv, ngroups, stats);
    }
    if (rc == FP_OK && ngroups > 0) {
        src = sqlite3_prepare_v2(r->db, "SELECT value FROM StringIds WHERE id = ?1", -1, &st, NULL);
        if (src != SQLITE_OK)
            rc = fp_reader_fail(r, src, "reading kernel names");
    }
    int64_t grand = 0;
    for (size_t g = 0; rc == FP_OK && g < ngroups; g++)
        grand += stats[g].sum;
    for (size_t g = 0; rc == FP_OK && g < ngroups; g++) {
        fp_kernel_sum_t *o = &(*rows)[g];
        o->total_ns = stats[g].sum;
        o->instances = stats[g].count;
        o->avg_ns = stats[g].mean;
        o->med_ns = stats[g].median;
        o->min_ns = stats[g].min;
        o->max_ns = stats[g].max;
        o->stddev_ns = stats[g].stddev;
        o->time_pct = grand > 0 ? 100.0 * (double)o->total_ns / (double)grand : 0.0;
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, name_of[g]);
        src = sqlite3_step(st);
        if (src == SQLITE_ROW)
            fp_col_text(st, 0, o->name, sizeof o->name);
        else if (src == SQLITE_DONE)
            snprintf(o->name, sizeof o->name, "(unnamed)");
        else
            rc = fp_reader_fail(r, src, "reading kernel names");
    }
    sqlite3_finalize(st);
    if (rc == FP_OK) {
        *n = ngroups;
        if (*n > 1)   /* no rows: *rows may be NULL, which qsort must not be given */
            qsort(*rows, *n, sizeof **rows, cmp_total_desc);
    }
    free(v);
    free(name_of);
    free(slot_id);
    free(slot_group);
    free(stats);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}
