/* store_records.c — the producers' record functions (store.h): each copies its record (and any text
 * or histogram into one owned payload) into the queue and returns at once. Promise: never waits for the
 * disk; once the writer has failed, returns its error and queues nothing. */
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "store_writer_internal.h"

static int push(fp_store_t *s, const fp_rec_t *r, size_t n)
{
    int rc = fp_sw_failed_rc(s);
    return rc != FP_OK ? rc : fp_queue_push(&s->q, r, n, 0);
}

/* Push one record carrying an owned payload; the payload is freed when it cannot be queued. */
int fp_sw_push_owned(fp_store_t *s, fp_rec_t *r)
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
    return fp_sw_push_owned(s, &r);
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
    return fp_sw_push_owned(s, &r);
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

/* n records of one kind as one group (one transaction), record i carrying a copy of items[i] (size sz, the
 * kind's member of fp_rec_t.u); up to 16 on the stack, more through the heap. `what` names them for the
 * out-of-memory message. */
static int push_group(fp_store_t *s, fp_rec_kind kind, const void *items, size_t sz, size_t n, const char *what)
{
    fp_rec_t one[16], *recs = n <= 16 ? one : malloc(n * sizeof *recs);
    if (!recs)
        return fp_fail(FP_ENOMEM, "store: out of memory queueing %s", what);
    memset(recs, 0, (n ? n : 1) * sizeof *recs);
    for (size_t i = 0; i < n; i++) {
        recs[i].kind = (uint8_t)kind;
        recs[i].more = i + 1 < n;
        memcpy(&recs[i].u, (const char *)items + i * sz, sz);
    }
    int rc = n ? push(s, recs, n) : FP_OK;
    if (recs != one)
        free(recs);
    return rc;
}

int fp_store_dist_steps(fp_store_t *s, const fp_dist_step_rec_t *d, size_t n)
{
    if (n > 0 && !d)
        return fp_fail(FP_EINVAL, "store: dist steps: missing argument");
    return push_group(s, FP_REC_DIST_STEP, d, sizeof *d, n, "a data-parallel step");
}

int fp_store_allreduce_error(fp_store_t *s, const fp_allreduce_error_rec_t *e, size_t n)
{
    if (n > 0 && !e)
        return fp_fail(FP_EINVAL, "store: allreduce error: missing argument");
    for (size_t i = 0; i < n; i++)
        if (strncmp(e[i].wire, "fp16", sizeof e[i].wire) != 0 && strncmp(e[i].wire, "bf16", sizeof e[i].wire) != 0)
            return fp_fail(FP_EINVAL, "store: allreduce error: wire format '%.8s' is not fp16 or bf16", e[i].wire);
    return push_group(s, FP_REC_ALLREDUCE_ERROR, e, sizeof *e, n, "all-reduce errors");
}

int fp_store_event(fp_store_t *s, int64_t run, int64_t time_ns, int64_t step, int layer, fp_event_kind kind,
                   const char *text)
{
    fp_rec_t r = {.kind = FP_REC_EVENT, .i32 = layer, .j32 = (int32_t)kind, .a = run, .b = step,
                  .c = time_ns > 0 ? time_ns : fp_clock_wall_ns()};
    r.u.owned = dup_or_null(text);
    if (text && !r.u.owned)
        return fp_fail(FP_ENOMEM, "store: out of memory queueing an event");
    return fp_sw_push_owned(s, &r);
}

int fp_store_end_run(fp_store_t *s, int64_t run, fp_run_status status, const char *message)
{
    fp_rec_t r = {.kind = FP_REC_END_RUN, .i32 = (int32_t)status, .a = run};
    r.u.owned = dup_or_null(message);
    if (message && !r.u.owned)
        return fp_fail(FP_ENOMEM, "store: out of memory queueing a run status");
    return fp_sw_push_owned(s, &r);
}
