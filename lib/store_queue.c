/* store_queue.c — the producer -> writer record queue of store_queue.h. Promise: a push costs one
 * uncontended lock and a copy; it never waits for the writer (growing the ring instead), and a group
 * is never split by the cap: either all of it is queued or all of it is counted as dropped. */
#include "store_queue.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "clock.h"
#include "error.h"

int fp_queue_init(fp_queue_t *q, size_t initial_cap, size_t max_cap)
{
    memset(q, 0, sizeof *q);
    q->buf = malloc(initial_cap * sizeof *q->buf);
    if (!q->buf)
        return fp_fail(FP_ENOMEM, "store: cannot allocate a queue of %zu records", initial_cap);
    q->cap = initial_cap;
    q->max_cap = max_cap < initial_cap ? initial_cap : max_cap;
    q->wake_at = initial_cap / 8;
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    return FP_OK;
}

void fp_rec_free_payload(fp_rec_t *r)
{
    switch (r->kind) {
    case FP_REC_LAYER: case FP_REC_HIST: case FP_REC_EVENT: case FP_REC_STRING: case FP_REC_END_RUN:
        free(r->u.owned);
        r->u.owned = NULL;
        break;
    default:
        break;
    }
}

void fp_queue_destroy(fp_queue_t *q)
{
    for (size_t i = 0; i < q->count; i++)
        fp_rec_free_payload(&q->buf[(q->head + i) % q->cap]);
    free(q->buf);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    memset(q, 0, sizeof *q);
}

/* Double the ring (unwrapping it) until n more records fit; 0 when the cap forbids it. */
static int grow(fp_queue_t *q, size_t n)
{
    size_t cap = q->cap;
    while (q->count + n > cap) {
        if (cap >= q->max_cap)
            return 0;
        cap = cap * 2 > q->max_cap ? q->max_cap : cap * 2;
    }
    if (cap == q->cap)
        return 1;
    fp_rec_t *nb = malloc(cap * sizeof *nb);
    if (!nb)
        return 0;
    size_t first = q->cap - q->head < q->count ? q->cap - q->head : q->count;
    memcpy(nb, q->buf + q->head, first * sizeof *nb);
    memcpy(nb + first, q->buf, (q->count - first) * sizeof *nb);
    free(q->buf);
    q->buf = nb;
    q->cap = cap;
    q->head = 0;
    q->wake_at = cap / 8;
    return 1;
}

int fp_queue_push(fp_queue_t *q, const fp_rec_t *recs, size_t n, int urgent)
{
    pthread_mutex_lock(&q->mu);
    if (q->count + n > q->cap && !grow(q, n)) {
        q->dropped += n;
        pthread_mutex_unlock(&q->mu);
        return fp_fail(FP_ENOMEM, "store: record queue full (%zu records); %zu dropped", q->cap, n);
    }
    size_t tail = (q->head + q->count) % q->cap;
    size_t first = q->cap - tail < n ? q->cap - tail : n;
    memcpy(q->buf + tail, recs, first * sizeof *recs);
    memcpy(q->buf, recs + first, (n - first) * sizeof *recs);
    q->count += n;
    q->pushed += n;
    if (q->writer_waiting == 2 || (q->writer_waiting && (urgent || q->count >= q->wake_at))) {
        q->writer_waiting = 0;   /* one signal per wait */
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return FP_OK;
}

size_t fp_queue_pop(fp_queue_t *q, fp_rec_t *out, size_t max, int64_t deadline_mono_ns, int idle)
{
    pthread_mutex_lock(&q->mu);
    if (q->count == 0 && !q->stop && deadline_mono_ns > 0) {
        struct timespec ts = fp_clock_timespec(deadline_mono_ns);
        q->writer_waiting = idle ? 2 : 1;
        while (q->count == 0 && !q->stop)
            if (pthread_cond_timedwait(&q->cv, &q->mu, &ts) == ETIMEDOUT)
                break;
        q->writer_waiting = 0;
    }
    size_t n = q->count < max ? q->count : max;
    size_t first = q->cap - q->head < n ? q->cap - q->head : n;
    memcpy(out, q->buf + q->head, first * sizeof *out);
    memcpy(out + first, q->buf, (n - first) * sizeof *out);
    q->head = (q->head + n) % q->cap;
    q->count -= n;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void fp_queue_stop(fp_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

int fp_queue_stopped(fp_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    int r = q->stop && q->count == 0;
    pthread_mutex_unlock(&q->mu);
    return r;
}
