/* store_writer.c — the run store's writer (store.h): producer-side record functions that copy into
 * the queue, and the one writer thread that drains it into SQLite with prepared statements in
 * batched transactions. Promise: producers never wait for the disk; groups commit whole; a disk or
 * I/O error stops the writer, marks its runs failed when still possible, and is reported. */
#include "store.h"
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config.h"
#include "clock.h"
#include "error.h"
#include "store_db.h"
#include "store_queue.h"

#define QUEUE_INITIAL   (64u * 1024u)          /* records (~8 MB) */
#define QUEUE_MAX       (4u * 1024u * 1024u)   /* hard cap (~500 MB) */
#define POP_BATCH       4096
#define TXN_MAX_ROWS    200000
#define HEARTBEAT_NS    (1000000000LL)
#define COMMIT_NS       ((int64_t)FP_STORE_COMMIT_MS * 1000000LL)

typedef enum { SYNC_SESSION, SYNC_RUN, SYNC_FLUSH, SYNC_FINISH } sync_kind;

struct fp_sync_req {
    sync_kind kind;
    const void *info;           /* fp_session_info_t / fp_run_info_t; FINISH: message */
    int status;                 /* FINISH: fp_run_status */
    int done, rc;
    int64_t id;
    char msg[512];
};

enum {
    ST_BEGIN, ST_COMMIT, ST_KERNEL, ST_STEP, ST_LAYER_TIME, ST_LAYER, ST_HIST, ST_PRECISION, ST_EVAL,
    ST_DEVICE, ST_EVENT, ST_STRING, ST_END_RUN, ST_HEARTBEAT, ST_SESSION, ST_RUN, ST_END_SESSION, ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_COMMIT] = "COMMIT",
    [ST_KERNEL] = "INSERT INTO kernels (run, step, layer, phase, start, end, deviceId, streamId, correlationId,"
                  " gridX, gridY, gridZ, blockX, blockY, blockZ, shortName, demangledName, tensorCore, kernelClass)"
                  " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_STEP] = "INSERT OR REPLACE INTO steps (run, step, loss, loss_scale, skipped, lr, start, end, wall_ns,"
                " samples_per_s, mem_current, mem_peak, energy_j, power_w, cycles, instructions)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_LAYER_TIME] = "INSERT OR REPLACE INTO layer_times (run, step, layer, phase, time_ns, kernels)"
                      " VALUES (?,?,?,?,?,?)",
    [ST_LAYER] = "INSERT OR REPLACE INTO layers (run, layer, name, type, input_shape, output_shape, params,"
                 " fwd_flops, bwd_flops) VALUES (?,?,?,?,?,?,?,?,?)",
    [ST_HIST] = "INSERT OR REPLACE INTO histograms (run, step, layer, role, count, zero, nan, pos_inf, neg_inf,"
                " amax, min_nonzero, mean_abs,"
                " fp16_normal, fp16_subnormal, fp16_underflow, fp16_round_to_max, fp16_overflow,"
                " bf16_normal, bf16_subnormal, bf16_underflow, bf16_round_to_max, bf16_overflow,"
                " e4m3_normal, e4m3_subnormal, e4m3_underflow, e4m3_round_to_max, e4m3_overflow,"
                " e5m2_normal, e5m2_subnormal, e5m2_underflow, e5m2_round_to_max, e5m2_overflow, blob)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_PRECISION] = "INSERT OR REPLACE INTO precision_error (run, ref_run, step, layer, role, rel_l2, max_abs,"
                     " cosine) VALUES (?,?,?,?,?,?,?,?)",
    [ST_EVAL] = "INSERT OR REPLACE INTO evaluations (run, step, split, loss, top1, top5) VALUES (?,?,?,?,?,?)",
    [ST_DEVICE] = "INSERT INTO device_samples (run, timestamp, deviceId, power_w, energy_j, mem_used,"
                  " temperature_c, sm_clock_mhz, mem_clock_mhz) VALUES (?,?,?,?,?,?,?,?,?)",
    [ST_EVENT] = "INSERT INTO events (run, start, step, kind, layer, text) VALUES (?,?,?,?,?,?)",
    [ST_STRING] = "INSERT OR IGNORE INTO StringIds (id, value) VALUES (?,?)",
    [ST_END_RUN] = "UPDATE runs SET status = ?2, failure = ?3, end = ?4, heartbeat = ?4"
                   " WHERE id = ?1 AND status = 'running'",
    [ST_HEARTBEAT] = "UPDATE runs SET heartbeat = ?2 WHERE id = ?1 AND status = 'running'",
    [ST_SESSION] = "INSERT INTO sessions (name, host, start, config, fp16probe_version) VALUES (?,?,?,?,?)",
    [ST_RUN] = "INSERT INTO runs (session, arm, model, policy, ref_run, device, driver_version, cuda_version,"
               " cudnn_version, cupti_version, blas, host, batch_size, image_size, dataset, seed, optimizer,"
               " optimizer_config, config, fp16probe_version, start, status, writer_pid, writer_host, heartbeat)"
               " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'running',?,?,?)",
    [ST_END_SESSION] = "UPDATE sessions SET end = ?2 WHERE id = ?1 AND end IS NULL",
};

typedef struct {
    char *s;
    int64_t id;
} intern_slot_t;

struct fp_store {
    char *path;
    sqlite3 *db;
    sqlite3_stmt *st[ST_COUNT];
    fp_queue_t q;
    pthread_t thread;
    int thread_started;
    /* failure: set once by the writer thread (message first, then the flag with release order) */
    atomic_int failed;
    int fail_code;
    char fail_msg[512];
    /* completion of synchronous requests */
    pthread_mutex_t sync_mu;
    pthread_cond_t sync_cv;
    /* StringIds interning (producer side) */
    pthread_mutex_t intern_mu;
    intern_slot_t *slots;
    size_t nslots, nused;
    int64_t next_string_id;
    /* writer thread only */
    int64_t *runs, *sessions;
    size_t nruns, nsessions;
    int64_t last_heartbeat;
    atomic_ullong written, commits;
};

static atomic_int live_writers;   /* stores open in this process (for the stale-run fix-up) */

/* ---------------------------------------------------------------- binding helpers */

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

static void bind_i64_na(sqlite3_stmt *st, int i, int64_t v)   /* negative: NULL */
{
    if (v < 0)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

static void bind_dbl(sqlite3_stmt *st, int i, double v)   /* NaN: NULL */
{
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

static int run_stmt(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* ---------------------------------------------------------------- applying records (writer thread) */

typedef struct {
    fp_layer_info_t info;
    char data[];
} layer_payload_t;

typedef struct {
    fp_hist_t h;
} hist_payload_t;

static int apply_kernel(fp_store_t *s, const fp_kernel_rec_t *k)
{
    sqlite3_stmt *st = s->st[ST_KERNEL];
    sqlite3_bind_int64(st, 1, k->run);
    sqlite3_bind_int64(st, 2, k->step);
    bind_i64_na(st, 3, k->layer);
    bind_i64_na(st, 4, k->phase);
    sqlite3_bind_int64(st, 5, k->start);
    sqlite3_bind_int64(st, 6, k->end);
    sqlite3_bind_int(st, 7, k->device_id);
    sqlite3_bind_int(st, 8, k->stream_id);
    sqlite3_bind_int64(st, 9, k->correlation_id);
    for (int i = 0; i < 3; i++) {
        sqlite3_bind_int64(st, 10 + i, k->grid[i]);
        sqlite3_bind_int64(st, 13 + i, k->block[i]);
    }
    if (k->short_name > 0)
        sqlite3_bind_int64(st, 16, k->short_name);
    if (k->demangled_name > 0)
        sqlite3_bind_int64(st, 17, k->demangled_name);
    bind_i64_na(st, 18, k->tensor_core);
    if (k->kernel_class >= 1 && k->kernel_class <= 4)   /* ENUM_KERNEL_CLASS ids; else NULL */
        sqlite3_bind_int(st, 19, k->kernel_class);
    return run_stmt(st);
}

static int apply_step(fp_store_t *s, const fp_step_rec_t *r)
{
    sqlite3_stmt *st = s->st[ST_STEP];
    sqlite3_bind_int64(st, 1, r->run);
    sqlite3_bind_int64(st, 2, r->step);
    bind_dbl(st, 3, r->loss);
    bind_dbl(st, 4, r->loss_scale);
    sqlite3_bind_int(st, 5, r->skipped ? 1 : 0);
    bind_dbl(st, 6, r->lr);
    bind_i64_na(st, 7, r->start);
    bind_i64_na(st, 8, r->end);
    bind_i64_na(st, 9, r->wall_ns);
    bind_dbl(st, 10, r->samples_per_s);
    bind_i64_na(st, 11, r->mem_current);
    bind_i64_na(st, 12, r->mem_peak);
    bind_dbl(st, 13, r->energy_j);
    bind_dbl(st, 14, r->power_w);
    bind_i64_na(st, 15, r->cycles > 0 ? r->cycles : -1);
    bind_i64_na(st, 16, r->instructions > 0 ? r->instructions : -1);
    return run_stmt(st);
}

static int apply_layer_time(fp_store_t *s, const fp_layer_time_row_t *r)
{
    sqlite3_stmt *st = s->st[ST_LAYER_TIME];
    sqlite3_bind_int64(st, 1, r->run);
    sqlite3_bind_int64(st, 2, r->step);
    sqlite3_bind_int(st, 3, r->t.layer);
    sqlite3_bind_int(st, 4, r->t.phase);
    sqlite3_bind_int64(st, 5, r->t.time_ns);
    bind_i64_na(st, 6, r->t.kernels);
    return run_stmt(st);
}

static int apply_layer(fp_store_t *s, const fp_layer_info_t *l)
{
    sqlite3_stmt *st = s->st[ST_LAYER];
    sqlite3_bind_int64(st, 1, l->run);
    sqlite3_bind_int(st, 2, l->index);
    bind_text(st, 3, l->name ? l->name : "");
    bind_text(st, 4, l->type);
    bind_text(st, 5, l->input_shape);
    bind_text(st, 6, l->output_shape);
    bind_i64_na(st, 7, l->params);
    bind_i64_na(st, 8, l->fwd_flops);
    bind_i64_na(st, 9, l->bwd_flops);
    return run_stmt(st);
}

static int apply_hist(fp_store_t *s, const fp_rec_t *r)
{
    const fp_hist_t *h = &((const hist_payload_t *)r->u.owned)->h;
    uint8_t blob[FP_HIST_BLOB_MAX_SIZE];
    size_t len = 0;
    if (fp_hist_to_blob(h, blob, sizeof blob, &len) != FP_OK)
        return SQLITE_MISUSE;
    sqlite3_stmt *st = s->st[ST_HIST];
    sqlite3_bind_int64(st, 1, r->a);
    sqlite3_bind_int64(st, 2, r->b);
    sqlite3_bind_int(st, 3, r->i32);
    sqlite3_bind_int(st, 4, r->j32);
    sqlite3_bind_int64(st, 5, (sqlite3_int64)h->count);
    sqlite3_bind_int64(st, 6, (sqlite3_int64)h->zero);
    sqlite3_bind_int64(st, 7, (sqlite3_int64)h->nan);
    sqlite3_bind_int64(st, 8, (sqlite3_int64)h->pos_inf);
    sqlite3_bind_int64(st, 9, (sqlite3_int64)h->neg_inf);
    sqlite3_bind_double(st, 10, h->amax);
    sqlite3_bind_double(st, 11, h->min_nonzero);
    sqlite3_bind_double(st, 12, fp_hist_mean_abs(h));
    /* columns per format in schema order: normal, subnormal, underflow, round_to_max, overflow */
    static const fp_value_class order[5] = {FP_CLASS_NORMAL, FP_CLASS_SUBNORMAL, FP_CLASS_UNDERFLOW,
                                            FP_CLASS_ROUND_TO_MAX, FP_CLASS_OVERFLOW};
    for (int f = 0; f < FP_FMT_COUNT; f++)
        for (int c = 0; c < 5; c++)
            sqlite3_bind_int64(st, 13 + f * 5 + c, (sqlite3_int64)h->cls[f][order[c]]);
    sqlite3_bind_blob(st, 33, blob, (int)len, SQLITE_TRANSIENT);
    return run_stmt(st);
}

static int apply_precision(fp_store_t *s, const fp_precision_rec_t *p)
{
    sqlite3_stmt *st = s->st[ST_PRECISION];
    sqlite3_bind_int64(st, 1, p->run);
    sqlite3_bind_int64(st, 2, p->ref_run);
    sqlite3_bind_int64(st, 3, p->step);
    sqlite3_bind_int(st, 4, p->layer);
    sqlite3_bind_int(st, 5, p->role);
    bind_dbl(st, 6, p->rel_l2);
    bind_dbl(st, 7, p->max_abs);
    bind_dbl(st, 8, p->cosine);
    return run_stmt(st);
}

static int apply_eval(fp_store_t *s, const fp_eval_rec_t *e)
{
    sqlite3_stmt *st = s->st[ST_EVAL];
    sqlite3_bind_int64(st, 1, e->run);
    sqlite3_bind_int64(st, 2, e->step);
    sqlite3_bind_text(st, 3, e->split, (int)strnlen(e->split, sizeof e->split), SQLITE_TRANSIENT);
    bind_dbl(st, 4, e->loss);
    bind_dbl(st, 5, e->top1);
    bind_dbl(st, 6, e->top5);
    return run_stmt(st);
}

static int apply_device(fp_store_t *s, const fp_device_sample_t *d)
{
    sqlite3_stmt *st = s->st[ST_DEVICE];
    sqlite3_bind_int64(st, 1, d->run);
    sqlite3_bind_int64(st, 2, d->timestamp);
    sqlite3_bind_int(st, 3, d->device_id);
    bind_dbl(st, 4, d->power_w);
    bind_dbl(st, 5, d->energy_j);
    bind_i64_na(st, 6, d->mem_used);
    bind_dbl(st, 7, d->temperature_c);
    bind_i64_na(st, 8, d->sm_clock_mhz);
    bind_i64_na(st, 9, d->mem_clock_mhz);
    return run_stmt(st);
}

static int insert_event(fp_store_t *s, int64_t run, int64_t time, int64_t step, int layer, int kind,
                        const char *text)
{
    sqlite3_stmt *st = s->st[ST_EVENT];
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, time);
    bind_i64_na(st, 3, step);
    bind_text(st, 4, fp_event_kind_name((fp_event_kind)kind));
    bind_i64_na(st, 5, layer);
    bind_text(st, 6, text);
    return run_stmt(st);
}

static int end_run(fp_store_t *s, int64_t run, int status, const char *msg, int64_t now)
{
    sqlite3_stmt *st = s->st[ST_END_RUN];
    sqlite3_bind_int64(st, 1, run);
    bind_text(st, 2, fp_run_status_name((fp_run_status)status));
    bind_text(st, 3, msg);
    sqlite3_bind_int64(st, 4, now);
    return run_stmt(st);
}

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
    bind_text(st, 1, in->name);
    bind_text(st, 2, fp_store_hostname());
    sqlite3_bind_int64(st, 3, fp_clock_wall_ns());
    bind_text(st, 4, in->config_json);
    bind_text(st, 5, PACKAGE_VERSION);
    int rc = run_stmt(st);
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
    bind_text(st, 2, in->arm);
    bind_text(st, 3, in->model);
    bind_text(st, 4, in->policy);
    if (in->ref_run > 0)
        sqlite3_bind_int64(st, 5, in->ref_run);
    const char *texts[] = {in->device, in->driver_version, in->cuda_version, in->cudnn_version,
                           in->cupti_version, in->blas, fp_store_hostname()};
    for (int i = 0; i < 7; i++)
        bind_text(st, 6 + i, texts[i]);
    bind_i64_na(st, 13, in->batch_size);
    bind_i64_na(st, 14, in->image_size);
    bind_text(st, 15, in->dataset);
    sqlite3_bind_int64(st, 16, in->seed);
    bind_text(st, 17, in->optimizer);
    bind_text(st, 18, in->optimizer_config);
    bind_text(st, 19, in->config_json);
    bind_text(st, 20, PACKAGE_VERSION);
    sqlite3_bind_int64(st, 21, now);
    sqlite3_bind_int64(st, 22, (sqlite3_int64)getpid());
    bind_text(st, 23, fp_store_hostname());
    sqlite3_bind_int64(st, 24, now);
    int rc = run_stmt(st);
    if (rc == SQLITE_OK) {
        req->id = sqlite3_last_insert_rowid(s->db);
        rc = push_id(&s->runs, &s->nruns, req->id);
    }
    return rc;
}

/* Mark this store's running runs and open sessions as ended (FINISH request, or after a failure). */
static int finish_all(fp_store_t *s, int status, const char *msg)
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
            rc = insert_event(s, s->runs[i], now, -1, -1, FP_EVENT_WARNING, text);
        }
        if (rc == SQLITE_OK)
            rc = end_run(s, s->runs[i], status, msg, now);
    }
    for (size_t i = 0; rc == SQLITE_OK && i < s->nsessions; i++) {
        sqlite3_stmt *st = s->st[ST_END_SESSION];
        sqlite3_bind_int64(st, 1, s->sessions[i]);
        sqlite3_bind_int64(st, 2, now);
        rc = run_stmt(st);
    }
    return rc;
}

static int apply(fp_store_t *s, fp_rec_t *r)
{
    switch ((fp_rec_kind)r->kind) {
    case FP_REC_KERNEL: return apply_kernel(s, &r->u.kernel);
    case FP_REC_STEP: return apply_step(s, &r->u.step);
    case FP_REC_LAYER_TIME: return apply_layer_time(s, &r->u.layer_time);
    case FP_REC_LAYER: return apply_layer(s, &((layer_payload_t *)r->u.owned)->info);
    case FP_REC_HIST: return apply_hist(s, r);
    case FP_REC_PRECISION: return apply_precision(s, &r->u.precision);
    case FP_REC_EVAL: return apply_eval(s, &r->u.eval);
    case FP_REC_DEVICE: return apply_device(s, &r->u.device);
    case FP_REC_EVENT: return insert_event(s, r->a, r->c, r->b, r->i32, r->j32, r->u.owned);
    case FP_REC_STRING: {
        sqlite3_stmt *st = s->st[ST_STRING];
        sqlite3_bind_int64(st, 1, r->a);
        bind_text(st, 2, r->u.owned);
        return run_stmt(st);
    }
    case FP_REC_END_RUN: return end_run(s, r->a, r->i32, r->u.owned, fp_clock_wall_ns());
    case FP_REC_SYNC: {
        struct fp_sync_req *req = r->u.sync;
        switch (req->kind) {
        case SYNC_SESSION: return apply_session(s, req);
        case SYNC_RUN: return apply_run(s, req);
        case SYNC_FINISH: return finish_all(s, req->status, req->info);
        case SYNC_FLUSH: return SQLITE_OK;
        }
        return SQLITE_OK;
    }
    }
    return SQLITE_OK;
}

/* ---------------------------------------------------------------- the writer thread */

static const char *rec_what(const fp_rec_t *r)
{
    static const char *const names[] = {"", "kernels", "steps", "layer times", "layers", "histograms",
                                        "precision errors", "evaluations", "device samples", "events",
                                        "kernel names", "run status", "sessions/runs"};
    return r->kind <= FP_REC_SYNC ? names[r->kind] : "records";
}

static int heartbeat(fp_store_t *s, int64_t now_mono)
{
    int64_t now = fp_clock_wall_ns();
    int rc = SQLITE_OK;
    for (size_t i = 0; rc == SQLITE_OK && i < s->nruns; i++) {
        sqlite3_bind_int64(s->st[ST_HEARTBEAT], 1, s->runs[i]);
        sqlite3_bind_int64(s->st[ST_HEARTBEAT], 2, now);
        rc = run_stmt(s->st[ST_HEARTBEAT]);
    }
    s->last_heartbeat = now_mono;
    return rc;
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
        if (finish_all(s, FP_RUN_FAILED, s->fail_msg) == SQLITE_OK &&
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

static void *writer_main(void *arg)
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
                    rc = run_stmt(s->st[ST_BEGIN]);
                    in_txn = rc == SQLITE_OK;
                    txn_start = fp_clock_mono_ns();
                    rows = 0;
                }
                if (rc == SQLITE_OK)
                    rc = apply(s, r);
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
            int rc = now - s->last_heartbeat >= HEARTBEAT_NS ? heartbeat(s, now) : SQLITE_OK;
            if (rc == SQLITE_OK)
                rc = run_stmt(s->st[ST_COMMIT]);
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
            int rc = run_stmt(s->st[ST_BEGIN]);
            if (rc == SQLITE_OK)
                rc = heartbeat(s, now);
            if (rc == SQLITE_OK)
                rc = run_stmt(s->st[ST_COMMIT]);
            if (rc != SQLITE_OK)
                fail(s, rc, "updating the heartbeat");
        }
        if (stopping && !in_txn)
            break;
    }
    free(batch);
    return NULL;
}

/* ---------------------------------------------------------------- open / close */

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
        rc = run_stmt(upd);
    }
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    sqlite3_finalize(sel);
    sqlite3_finalize(upd);
    return rc == SQLITE_OK ? FP_OK : fp_store_sqlite_fail(db, rc, path, "marking stale runs interrupted");
}

static int load_strings(fp_store_t *s);

static void free_store(fp_store_t *s)
{
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->st[i]);
    if (s->db)
        sqlite3_close(s->db);
    for (size_t i = 0; i < s->nslots; i++)
        free(s->slots[i].s);
    free(s->slots);
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
    int rc = fp_store_db_open(path, FP_STORE_WRITE, &s->db);
    if (rc == FP_OK)
        rc = fix_up_stale_runs(s->db, path);
    for (int i = 0; rc == FP_OK && i < ST_COUNT; i++) {
        int src = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
        if (src != SQLITE_OK)
            rc = fp_store_sqlite_fail(s->db, src, path, "preparing statements");
    }
    if (rc == FP_OK)
        rc = load_strings(s);
    if (rc == FP_OK)
        rc = fp_queue_init(&s->q, QUEUE_INITIAL, QUEUE_MAX);
    if (rc == FP_OK && pthread_create(&s->thread, NULL, writer_main, s) != 0)
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

static int failed_rc(fp_store_t *s)
{
    if (!atomic_load_explicit(&s->failed, memory_order_acquire))
        return FP_OK;
    return fp_fail(s->fail_code, "%s", s->fail_msg);
}

static int sync_request(fp_store_t *s, sync_kind kind, const void *info, int status, int64_t *id)
{
    int rc = failed_rc(s);
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
    if (rc == FP_OK)
        rc = failed_rc(s);
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

int fp_store_writer_status(fp_store_t *s)
{
    return failed_rc(s);
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

/* ---------------------------------------------------------------- producer side */

static int push(fp_store_t *s, const fp_rec_t *r, size_t n)
{
    int rc = failed_rc(s);
    return rc != FP_OK ? rc : fp_queue_push(&s->q, r, n, 0);
}

/* Push one record carrying an owned payload; the payload is freed when it cannot be queued. */
static int push_owned(fp_store_t *s, fp_rec_t *r)
{
    int rc = push(s, r, 1);
    if (rc != FP_OK)
        fp_rec_free_payload(r);
    return rc;
}

static char *dup_or_null(const char *t)
{
    return t ? strdup(t) : NULL;
}

int fp_store_kernels(fp_store_t *s, const fp_kernel_rec_t *k, size_t n)
{
    fp_rec_t chunk[128];
    for (size_t done = 0; done < n;) {
        size_t m = n - done < 128 ? n - done : 128;
        for (size_t i = 0; i < m; i++) {
            chunk[i].kind = FP_REC_KERNEL;
            chunk[i].more = 0;
            chunk[i].u.kernel = k[done + i];
        }
        int rc = push(s, chunk, m);
        if (rc != FP_OK)
            return rc;
        done += m;
    }
    return FP_OK;
}

int fp_store_step(fp_store_t *s, const fp_step_rec_t *step, const fp_layer_time_t *times, size_t n)
{
    if (!step || (n > 0 && !times))
        return fp_fail(FP_EINVAL, "store: step: missing argument");
    fp_rec_t one[1 + 64], *recs = n < 64 ? one : malloc((n + 1) * sizeof *recs);
    if (!recs)
        return fp_fail(FP_ENOMEM, "store: out of memory queueing a step");
    memset(recs, 0, (n + 1) * sizeof *recs);
    recs[0].kind = FP_REC_STEP;
    recs[0].more = n > 0;
    recs[0].u.step = *step;
    for (size_t i = 0; i < n; i++) {
        fp_rec_t *r = &recs[1 + i];
        r->kind = FP_REC_LAYER_TIME;
        r->more = i + 1 < n;
        r->u.layer_time.run = step->run;
        r->u.layer_time.step = step->step;
        r->u.layer_time.t = times[i];
    }
    int rc = push(s, recs, n + 1);
    if (recs != one)
        free(recs);
    return rc;
}

int fp_store_layer(fp_store_t *s, const fp_layer_info_t *l)
{
    if (!l)
        return fp_fail(FP_EINVAL, "store: layer: missing argument");
    const char *src[4] = {l->name, l->type, l->input_shape, l->output_shape};
    size_t len = 0;
    for (int i = 0; i < 4; i++)
        len += src[i] ? strlen(src[i]) + 1 : 0;
    layer_payload_t *p = malloc(sizeof *p + len);
    if (!p)
        return fp_fail(FP_ENOMEM, "store: out of memory queueing a layer");
    p->info = *l;
    const char **dst[4] = {&p->info.name, &p->info.type, &p->info.input_shape, &p->info.output_shape};
    char *at = p->data;
    for (int i = 0; i < 4; i++) {
        *dst[i] = NULL;
        if (src[i]) {
            size_t m = strlen(src[i]) + 1;
            memcpy(at, src[i], m);
            *dst[i] = at;
            at += m;
        }
    }
    fp_rec_t r = {.kind = FP_REC_LAYER};
    r.u.owned = p;
    return push_owned(s, &r);
}

int fp_store_hist(fp_store_t *s, int64_t run, int64_t step, int layer, fp_tensor_role role, const fp_hist_t *h)
{
    if (!h || (unsigned)role >= FP_ROLE_COUNT)
        return fp_fail(FP_EINVAL, "store: hist: bad argument");
    hist_payload_t *p = malloc(sizeof *p);
    if (!p)
        return fp_fail(FP_ENOMEM, "store: out of memory queueing a histogram");
    p->h = *h;
    fp_rec_t r = {.kind = FP_REC_HIST, .i32 = layer, .j32 = (int32_t)role, .a = run, .b = step};
    r.u.owned = p;
    return push_owned(s, &r);
}

int fp_store_precision(fp_store_t *s, const fp_precision_rec_t *p)
{
    fp_rec_t r = {.kind = FP_REC_PRECISION};
    r.u.precision = *p;
    return push(s, &r, 1);
}

int fp_store_eval(fp_store_t *s, const fp_eval_rec_t *e)
{
    fp_rec_t r = {.kind = FP_REC_EVAL};
    r.u.eval = *e;
    return push(s, &r, 1);
}

int fp_store_device_sample(fp_store_t *s, const fp_device_sample_t *d)
{
    fp_rec_t r = {.kind = FP_REC_DEVICE};
    r.u.device = *d;
    return push(s, &r, 1);
}

int fp_store_event(fp_store_t *s, int64_t run, int64_t time_ns, int64_t step, int layer, fp_event_kind kind,
                   const char *text)
{
    fp_rec_t r = {.kind = FP_REC_EVENT, .i32 = layer, .j32 = (int32_t)kind, .a = run, .b = step,
                  .c = time_ns > 0 ? time_ns : fp_clock_wall_ns()};
    r.u.owned = dup_or_null(text);
    if (text && !r.u.owned)
        return fp_fail(FP_ENOMEM, "store: out of memory queueing an event");
    return push_owned(s, &r);
}

int fp_store_end_run(fp_store_t *s, int64_t run, fp_run_status status, const char *message)
{
    fp_rec_t r = {.kind = FP_REC_END_RUN, .i32 = (int32_t)status, .a = run};
    r.u.owned = dup_or_null(message);
    if (message && !r.u.owned)
        return fp_fail(FP_ENOMEM, "store: out of memory queueing a run status");
    return push_owned(s, &r);
}

/* ---------------------------------------------------------------- StringIds interning */

static uint64_t hash_str(const char *t)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *t; t++)
        h = (h ^ (unsigned char)*t) * 1099511628211ULL;
    return h;
}

static intern_slot_t *find_slot(intern_slot_t *slots, size_t nslots, const char *t)
{
    size_t i = (size_t)hash_str(t) & (nslots - 1);
    while (slots[i].s && strcmp(slots[i].s, t) != 0)
        i = (i + 1) & (nslots - 1);
    return &slots[i];
}

/* Insert (taking ownership of t) with the table at most half full. */
static int intern_insert(fp_store_t *s, char *t, int64_t id)
{
    if ((s->nused + 1) * 2 > s->nslots) {
        size_t n = s->nslots ? s->nslots * 2 : 256;
        intern_slot_t *ns = calloc(n, sizeof *ns);
        if (!ns)
            return FP_ENOMEM;
        for (size_t i = 0; i < s->nslots; i++)
            if (s->slots[i].s)
                *find_slot(ns, n, s->slots[i].s) = s->slots[i];
        free(s->slots);
        s->slots = ns;
        s->nslots = n;
    }
    intern_slot_t *slot = find_slot(s->slots, s->nslots, t);
    slot->s = t;
    slot->id = id;
    s->nused++;
    return FP_OK;
}

static int load_strings(fp_store_t *s)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "SELECT id, value FROM StringIds", -1, &st, NULL);
    s->next_string_id = 1;
    while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        char *t = strdup((const char *)sqlite3_column_text(st, 1));
        if (!t || intern_insert(s, t, id) != FP_OK) {
            free(t);
            sqlite3_finalize(st);
            return fp_fail(FP_ENOMEM, "%s: out of memory loading kernel names", s->path);
        }
        if (id >= s->next_string_id)
            s->next_string_id = id + 1;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? FP_OK : fp_store_sqlite_fail(s->db, rc, s->path, "loading kernel names");
}

int64_t fp_store_intern(fp_store_t *s, const char *name)
{
    if (!name)
        return fp_fail(FP_EINVAL, "store: intern: no name");
    int rc = failed_rc(s);
    if (rc != FP_OK)
        return rc;
    pthread_mutex_lock(&s->intern_mu);
    intern_slot_t *slot = s->nslots ? find_slot(s->slots, s->nslots, name) : NULL;
    int64_t id;
    if (slot && slot->s) {
        id = slot->id;
    } else {
        char *mine = strdup(name), *queued = strdup(name);
        id = s->next_string_id;
        fp_rec_t r = {.kind = FP_REC_STRING, .a = id};
        r.u.owned = queued;
        if (!mine || !queued || intern_insert(s, mine, id) != FP_OK) {
            free(mine);
            free(queued);
            id = fp_fail(FP_ENOMEM, "store: out of memory interning a name");
        } else {
            s->next_string_id++;
            if ((rc = push_owned(s, &r)) != FP_OK)
                id = rc;   /* the name stays known; its StringIds row is lost with the queue */
        }
    }
    pthread_mutex_unlock(&s->intern_mu);
    return id;
}
