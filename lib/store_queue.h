/* store_queue.h — internal to the run store: the record queue between producers and the writer
 * thread. A mutex-protected ring of fixed-size records that grows by doubling up to a hard cap;
 * a group of records is pushed all-or-nothing and stays contiguous. */
#ifndef FP_STORE_QUEUE_H
#define FP_STORE_QUEUE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "store.h"

typedef enum {
    FP_REC_KERNEL = 1, FP_REC_STEP, FP_REC_LAYER_TIME, FP_REC_LAYER, FP_REC_HIST, FP_REC_PRECISION,
    FP_REC_EVAL, FP_REC_DEVICE, FP_REC_EVENT, FP_REC_STRING, FP_REC_END_RUN, FP_REC_SYNC,
    FP_REC_DIST_STEP, FP_REC_ALLREDUCE_ERROR
} fp_rec_kind;

struct fp_sync_req;   /* store_writer_internal.h: a request a producer waits on */

typedef struct {
    int64_t run, step;
    fp_layer_time_t t;
} fp_layer_time_row_t;

typedef struct {
    uint8_t kind;       /* fp_rec_kind */
    uint8_t more;       /* 1: the next record belongs to the same group (same transaction) */
    int32_t i32;        /* small argument: layer (hist, event), status (end run) */
    int32_t j32;        /* second one: role (hist), kind (event) */
    int64_t a, b, c;    /* run, step, time / id, depending on kind */
    union {
        fp_kernel_rec_t kernel;
        fp_step_rec_t step;
        fp_layer_time_row_t layer_time;
        fp_precision_rec_t precision;
        fp_eval_rec_t eval;
        fp_device_sample_t device;
        fp_dist_step_rec_t dist_step;
        fp_allreduce_error_rec_t allreduce_error;
        void *owned;                 /* malloc'd payload the writer frees (layer, hist, text, string) */
        struct fp_sync_req *sync;    /* owned by the waiting producer */
    } u;
} fp_rec_t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* the writer waits here */
    fp_rec_t *buf;
    size_t cap, max_cap, head, count;
    size_t wake_at;             /* signal the writer once this many records wait */
    int writer_waiting;         /* 0 busy, 1 waiting for a batch, 2 idle: wake on the first record */
    int stop;
    uint64_t pushed, dropped;
} fp_queue_t;

int  fp_queue_init(fp_queue_t *q, size_t initial_cap, size_t max_cap);
void fp_queue_destroy(fp_queue_t *q);   /* frees what is left, including owned payloads */
/* Push n records as one group (all or none). urgent: wake the writer now. Returns FP_OK, or
 * FP_ENOMEM when the cap is reached (the records are counted as dropped, payloads not freed). */
int  fp_queue_push(fp_queue_t *q, const fp_rec_t *recs, size_t n, int urgent);
/* Take up to max records; when none wait, sleep until records are pushed (the first one when idle,
 * else an urgent one or wake_at of them), stop is set, or the monotonic deadline passes
 * (deadline <= 0: do not sleep). */
size_t fp_queue_pop(fp_queue_t *q, fp_rec_t *out, size_t max, int64_t deadline_mono_ns, int idle);
void fp_queue_stop(fp_queue_t *q);      /* wake the writer for good */
int  fp_queue_stopped(fp_queue_t *q);   /* stop set and nothing left */
void fp_rec_free_payload(fp_rec_t *r);

#endif
