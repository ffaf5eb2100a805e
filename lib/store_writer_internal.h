/* store_writer_internal.h — internal to the run store's writer (store_writer.c: the thread;
 * store_statements.c: SQL; store_rows.c: records to rows; store_records.c: producers; store_lifecycle.c:
 * open / close, sessions, runs; store_intern.c: StringIds): the store itself and what those files share. */
#ifndef FP_STORE_WRITER_INTERNAL_H
#define FP_STORE_WRITER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>
#include "error.h"
#include "store.h"
#include "store_db.h"
#include "store_queue.h"

/* Waiting out another process's lock (store_writer.c): each attempt lets SQLite's busy handler wait up to
 * FP_STORE_LOCK_SLICE_MS, then the writer sleeps FP_STORE_LOCK_RETRY_MIN_MS doubling to _MAX_MS between
 * attempts, until FP_STORE_LOCK_PATIENCE_MS (store.h; fp_store_set_lock_patience) have passed. */
#define FP_STORE_LOCK_SLICE_MS 250
#define FP_STORE_LOCK_RETRY_MIN_MS 50
#define FP_STORE_LOCK_RETRY_MAX_MS 1000

/* A request a producer waits on (begin_session, begin_run, flush, close): queued as an FP_REC_SYNC
 * record, applied by the writer thread, completed when its transaction commits. */
typedef enum { SYNC_SESSION, SYNC_RUN, SYNC_FLUSH, SYNC_FINISH } sync_kind;

struct fp_sync_req {
    sync_kind kind;
    const void *info;           /* fp_session_info_t / fp_run_info_t; FINISH: message */
    int status;                 /* FINISH: fp_run_status */
    int done, rc;
    int64_t id;
    char msg[512];
};

/* The prepared statements (store_statements.c), indexes of fp_store.st. */
enum {
    ST_BEGIN, ST_COMMIT, ST_KERNEL, ST_STEP, ST_LAYER_TIME, ST_LAYER, ST_HIST, ST_PRECISION, ST_EVAL,
    ST_DEVICE, ST_EVENT, ST_STRING, ST_END_RUN, ST_HEARTBEAT, ST_SESSION, ST_RUN, ST_END_SESSION, ST_DIST_STEP,
    ST_ALLREDUCE_ERROR, ST_COUNT
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
    int runs_unmarked;          /* 1: failed before this store's runs could be marked failed */
    /* another process's lock: the writer's wait (mono ns it began, 0: not waiting) and its patience */
    _Atomic int64_t lock_since_ns, lock_patience_ns;
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

/* Owned payloads of FP_REC_LAYER (the info, its strings copied after it) and FP_REC_HIST. */
typedef struct {
    fp_layer_info_t info;
    char data[];
} layer_payload_t;

typedef struct {
    fp_hist_t h;
} hist_payload_t;

/* ---- statements and binding (store_statements.c) ---- */
int fp_sw_prepare(fp_store_t *s);                  /* all of s->st; FP_OK or a message naming the file */
void fp_sw_finalize(fp_store_t *s);
void fp_sw_bind_text(sqlite3_stmt *st, int i, const char *s);      /* NULL: NULL */
void fp_sw_bind_i64_na(sqlite3_stmt *st, int i, int64_t v);        /* negative: NULL */
void fp_sw_bind_dbl(sqlite3_stmt *st, int i, double v);            /* NaN: NULL */
/* Step, reset and clear the bindings; SQLITE_OK (done or a row) or the error. */
int fp_sw_run(sqlite3_stmt *st);

/* ---- rows (store_rows.c), on the writer thread; SQLite codes ---- */
int fp_sw_apply(fp_store_t *s, fp_rec_t *r);       /* one queued record */
int fp_sw_insert_event(fp_store_t *s, int64_t run, int64_t time, int64_t step, int layer, int kind,
                       const char *text);
int fp_sw_end_run(fp_store_t *s, int64_t run, int status, const char *msg, int64_t now);

/* ---- the writer thread (store_writer.c) ---- */
void *fp_sw_thread_main(void *store);
/* FP_OK while the writer is healthy; else its error, set as the current error. */
int fp_sw_failed_rc(fp_store_t *s);

/* ---- lifecycle (store_lifecycle.c), on the writer thread; SQLite codes ---- */
int fp_sw_apply_sync(fp_store_t *s, struct fp_sync_req *req);
/* Mark this store's running runs and open sessions as ended (FINISH request, or after a failure). */
int fp_sw_finish_all(fp_store_t *s, int status, const char *msg);
int fp_sw_heartbeat(fp_store_t *s, int64_t now_mono);

/* ---- producers (store_records.c) ---- */
/* Push one record carrying an owned payload; the payload is freed when it cannot be queued. */
int fp_sw_push_owned(fp_store_t *s, fp_rec_t *r);

/* ---- StringIds (store_intern.c) ---- */
int fp_sw_load_strings(fp_store_t *s);             /* when the store opens */
void fp_sw_free_strings(fp_store_t *s);

#endif
