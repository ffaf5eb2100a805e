/* cupti_activity.c — kernel-level tracing with the CUPTI Activity API (built only with CUPTI): kernels of
 * the traced steps only, attributed to (layer, phase) through external correlation ids and classed by name.
 * Promises: the activity kinds are enabled from a traced step's begin until its flush at its end and off
 * otherwise; the completion callback only queues buffers (no allocation, all parsing on the trainer thread
 * at a flush) and, once close has detached the tracer, frees them without touching it; dropped records
 * are counted; CUPTI refused or absent -> "unavailable" with the reason, training goes on. */
#include "config.h"
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cupti.h>
#include "error.h"
#include "probe/kernel_class.h"
#include "probe/probe.h"

#define BUF_SIZE ((size_t)8 << 20)   /* record bytes per host buffer: 4-8 MB as CUPTI's samples and kineto */
#define BUF_ALIGN 8                  /* CUPTI's record alignment */
#define CUPTI_DEVICE_BUFFER_BYTES ((size_t)32 << 20)   /* CUPTI's device record buffers (its default ~3 MB) */
#define CUPTI_DEVICE_BUFFER_POOL ((size_t)4)
/* correlation id -> external id, open addressing. With DRIVER records every driver call cuDNN makes inside
 * a layer (attribute queries, launches) has an external correlation: tens of thousands per ResNet-50 step. */
#define CORR_SLOTS ((uint32_t)1 << 18)
#define CORR_MAX (CORR_SLOTS / 4 * 3)   /* load cap: probing stays short; past it, correlations are not kept */
#define NAME_SLOTS 4096
#define EXT_TAG (1ull << 62)   /* marks our external ids */

/* The header CUPTI never sees: it sits just before the record bytes handed to CUPTI, in the same
 * allocation, so the completion callback queues a buffer without allocating. */
typedef struct qbuf {
    size_t valid;
    struct qbuf *next;
} qbuf;
#define QBUF_HDR ((sizeof(qbuf) + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN)

typedef struct {
    uint32_t corr;   /* 0: empty */
    uint64_t ext;
} corr_slot;

typedef struct {
    char *name;
    int64_t id;
} name_slot;

/* The kinds a traced step collects. Only kernel records are stored; API records (RUNTIME, and DRIVER:
 * cuDNN 9's engines and cuBLASLt launch through cuLaunchKernel[Ex]) are discarded but must be on, since
 * CUPTI emits an EXTERNAL_CORRELATION record only along with an API record. */
static const struct {
    CUpti_ActivityKind kind;
    const char *name;
    int needed;   /* 2: no trace without it; 1: kernels carry no layer without it; 0: not used for the rows */
} kinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", 2},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME", 1},
    {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER", 1},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", 1},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", 0},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", 0},
    {CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2", 0},
    {CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD", 0},
};
#define NKINDS (sizeof kinds / sizeof *kinds)

struct fp_cupti {
    fp_store_t *store;
    int64_t run;
    int trace_every;
    int available;
    char reason[256];
    qbuf *head, *tail;   /* completed buffers, oldest first; under g_mu */
    uint64_t dropped, kernels;
    size_t dev_buf_bytes, dev_buf_pool;   /* CUPTI's own device buffers as CUPTI reports them (0: unknown) */
    int tracing;                 /* the current step is traced: the kinds are on */
    int64_t traced_step;         /* step whose kernels the next flush stores; -1 none */
    unsigned enabled;            /* bit i: kinds[i] enabled by us */
    int depth;                   /* external ids pushed and not yet popped */
    unsigned warned;             /* bit i: enabling kinds[i] failed and an event said so */
    corr_slot *corr;
    uint32_t ncorr;
    name_slot *names;
    fp_kernel_rec_t *rows;
    size_t nrows, caprows;
    int status;
};

/* CUPTI's buffer callbacks carry no user pointer: one tracer per process. g_mu guards g_cupti and the
 * queue of the tracer it names; close clears g_cupti under it before freeing, so a callback that comes
 * late (or after close) finds NULL and frees its buffer. The callbacks stay registered for the process
 * (CUPTI has no unregistering short of cuptiFinalize): they are registered once. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static fp_cupti *g_cupti;
static int g_registered;   /* trainer thread only */

static const char *cupti_err(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
        s = "CUPTI error";
    return s;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *p = aligned_alloc(BUF_ALIGN, QBUF_HDR + BUF_SIZE);   /* a multiple of BUF_ALIGN */
    *buffer = p ? p + QBUF_HDR : NULL;   /* NULL: CUPTI drops records and counts them */
    *size = p ? BUF_SIZE : 0;
    *max_records = 0;   /* as many as fit */
}

/* Only queues the buffer (parsing happens at a flush, on the trainer thread); with no tracer, frees it. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    if (!buffer)
        return;
    qbuf *q = (qbuf *)(void *)(buffer - QBUF_HDR);
    q->valid = valid;
    q->next = NULL;
    pthread_mutex_lock(&g_mu);
    fp_cupti *c = g_cupti;
    if (c) {
        if (c->tail)
            c->tail->next = q;
        else
            c->head = q;
        c->tail = q;
    }
    pthread_mutex_unlock(&g_mu);
    if (!c)
        free(q);
}

static void corr_put(fp_cupti *c, uint32_t corr, uint64_t ext)
{
    if (!corr)
        return;
    for (uint32_t i = (corr * 2654435761u) & (CORR_SLOTS - 1), k = 0; k < CORR_SLOTS; k++, i = (i + 1) & (CORR_SLOTS - 1)) {
        if (c->corr[i].corr == corr) {
            c->corr[i].ext = ext;
            return;
        }
        if (!c->corr[i].corr) {
            if (c->ncorr >= CORR_MAX)
                return;
            c->corr[i].corr = corr;
            c->corr[i].ext = ext;
            c->ncorr++;
            return;
        }
    }
}

static int corr_get(const fp_cupti *c, uint32_t corr, uint64_t *ext)
{
    for (uint32_t i = (corr * 2654435761u) & (CORR_SLOTS - 1), k = 0; k < CORR_SLOTS; k++, i = (i + 1) & (CORR_SLOTS - 1)) {
        if (!c->corr[i].corr)
            return 0;
        if (c->corr[i].corr == corr) {
            *ext = c->corr[i].ext;
            return 1;
        }
    }
    return 0;
}

static int64_t name_id(fp_cupti *c, const char *name)
{
    if (!name || !c->store)
        return 0;
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    for (uint32_t i = h & (NAME_SLOTS - 1), k = 0; k < NAME_SLOTS; k++, i = (i + 1) & (NAME_SLOTS - 1)) {
        if (c->names[i].name && strcmp(c->names[i].name, name) == 0)
            return c->names[i].id;
        if (!c->names[i].name) {
            int64_t id = fp_store_intern(c->store, name);
            if (id <= 0)
                return 0;
            c->names[i].name = strdup(name);
            c->names[i].id = c->names[i].name ? id : 0;
            return id;
        }
    }
    int64_t id = fp_store_intern(c->store, name);   /* table full: uncached */
    return id > 0 ? id : 0;
}

static void add_kernel(fp_cupti *c, const CUpti_ActivityKernel10 *k)
{
    if (k->start == 0 && k->end == 0) {   /* CUPTI had no device buffer space for its timestamps */
        c->dropped++;
        return;
    }
    if (c->nrows == c->caprows) {
        size_t nc = c->caprows ? 2 * c->caprows : 1024;
        void *p = realloc(c->rows, nc * sizeof *c->rows);
        if (!p)
            return;
        c->rows = p;
        c->caprows = nc;
    }
    fp_kernel_rec_t *r = &c->rows[c->nrows++];
    memset(r, 0, sizeof *r);
    r->run = c->run;
    r->step = c->traced_step;
    r->start = (int64_t)k->start;
    r->end = (int64_t)k->end;
    r->short_name = r->demangled_name = name_id(c, k->name);
    r->layer = -1;
    r->phase = -1;
    uint64_t ext;
    if (corr_get(c, k->correlationId, &ext) && (ext & EXT_TAG)) {
        r->layer = (int32_t)((ext & ~EXT_TAG) >> 8) - 1;
        r->phase = (int32_t)(ext & 0xff);
    }
    r->device_id = (int32_t)k->deviceId;
    r->stream_id = (int32_t)k->streamId;
    r->correlation_id = k->correlationId;
    r->grid[0] = (uint32_t)k->gridX;
    r->grid[1] = (uint32_t)k->gridY;
    r->grid[2] = (uint32_t)k->gridZ;
    r->block[0] = (uint32_t)k->blockX;
    r->block[1] = (uint32_t)k->blockY;
    r->block[2] = (uint32_t)k->blockZ;
    r->kernel_class = (int32_t)fp_kernel_classify(k->name);
    r->tensor_core = fp_kernel_class_tensor_core((fp_kernel_class)r->kernel_class);
}

/* Parses every queued buffer: correlation records first (they may arrive in another buffer than their
 * kernels), then kernels, kept only when `keep` (API, memory and overhead records are skipped). Frees the
 * buffers. Never called with g_mu held. */
static void drain(fp_cupti *c, int keep)
{
    pthread_mutex_lock(&g_mu);
    qbuf *q = c->head;
    c->head = c->tail = NULL;
    pthread_mutex_unlock(&g_mu);
    if (keep)
        for (qbuf *b = q; b; b = b->next) {
            CUpti_Activity *rec = NULL;
            while (cuptiActivityGetNextRecord((uint8_t *)b + QBUF_HDR, b->valid, &rec) == CUPTI_SUCCESS)
                if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
                    const CUpti_ActivityExternalCorrelation *e = (const void *)rec;
                    if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
                        corr_put(c, e->correlationId, e->externalId);
                }
        }
    while (q) {
        if (keep) {
            CUpti_Activity *rec = NULL;
            while (cuptiActivityGetNextRecord((uint8_t *)q + QBUF_HDR, q->valid, &rec) == CUPTI_SUCCESS)
                if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                    add_kernel(c, (const CUpti_ActivityKernel10 *)(const void *)rec);
        }
        qbuf *n = q->next;
        free(q);   /* the allocation buffer_requested made */
        q = n;
    }
    if (keep && c->nrows) {
        int rc = c->store ? fp_store_kernels(c->store, c->rows, c->nrows) : FP_OK;
        if (rc && !c->status)
            c->status = rc;
        c->kernels += c->nrows;
    }
    c->nrows = 0;
    if (c->ncorr) {
        memset(c->corr, 0, CORR_SLOTS * sizeof *c->corr);
        c->ncorr = 0;
    }
}

/* Hands every buffer CUPTI holds, complete or not, to the completion callback (which returns before
 * cuptiActivityFlushAll does), then parses them. */
static void flush_records(fp_cupti *c, int keep)
{
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    size_t d = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &d) == CUPTI_SUCCESS)   /* NULL: the global queue */
        c->dropped += d;
    drain(c, keep);
}

static void event(fp_cupti *c, int64_t step, fp_event_kind kind, const char *text)
{
    if (c->store && c->run > 0)
        fp_store_event(c->store, c->run, 0, step, -1, kind, text);
}

/* Turns the kinds on for a traced step: 0 when CONCURRENT_KERNEL would not (nothing is then on). A kind
 * that fails is said once in an event of the run. */
static int enable_kinds(fp_cupti *c, int64_t step)
{
    char text[512];
    for (size_t i = 0; i < NKINDS; i++) {
        CUptiResult r = cuptiActivityEnable(kinds[i].kind);
        if (r == CUPTI_SUCCESS) {
            c->enabled |= 1u << i;
            continue;
        }
        static const char *const effect[] = {"", "; kernels may carry no layer", "; such steps are not traced"};
        if (!(c->warned & (1u << i))) {   /* once per kind */
            c->warned |= 1u << i;
            snprintf(text, sizeof text, "kernel trace (CUPTI): cuptiActivityEnable(%s) at step %" PRId64 ": %s%s",
                     kinds[i].name, step, cupti_err(r), effect[kinds[i].needed]);
            event(c, step, kinds[i].needed ? FP_EVENT_WARNING : FP_EVENT_INFO, text);
        }
        if (kinds[i].needed == 2) {
            for (size_t j = 0; j < NKINDS; j++)
                if (c->enabled & (1u << j))
                    cuptiActivityDisable(kinds[j].kind);
            c->enabled = 0;
            return 0;
        }
    }
    return 1;
}

static void disable_kinds(fp_cupti *c)
{
    for (size_t i = 0; i < NKINDS; i++)
        if (c->enabled & (1u << i))
            cuptiActivityDisable(kinds[i].kind);
    c->enabled = 0;
}

/* Ends a traced step: pops what its layers left pushed, flushes and stores its kernels, turns the kinds off. */
static void end_trace(fp_cupti *c)
{
    uint64_t last;
    for (; c->depth > 0; c->depth--)
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
    flush_records(c, 1);
    disable_kinds(c);
    c->traced_step = -1;
    c->tracing = 0;
}

int fp_cupti_open(fp_cupti **out, fp_store_t *store, int64_t run, int trace_every)
{
    fp_cupti *c = calloc(1, sizeof *c);
    *out = c;
    if (!c)
        return fp_fail(FP_ENOMEM, "cupti: out of memory");
    c->store = store;
    c->run = run;
    c->trace_every = trace_every;
    c->traced_step = -1;
    c->corr = calloc(CORR_SLOTS, sizeof *c->corr);
    c->names = calloc(NAME_SLOTS, sizeof *c->names);
    if (!c->corr || !c->names) {
        snprintf(c->reason, sizeof c->reason, "out of memory");
        return fp_fail(FP_ENOMEM, "cupti: out of memory");
    }
    pthread_mutex_lock(&g_mu);
    int taken = g_cupti != NULL;
    if (!taken)
        g_cupti = c;
    pthread_mutex_unlock(&g_mu);
    if (taken) {
        snprintf(c->reason, sizeof c->reason, "another CUPTI tracer is open in this process");
        return FP_OK;
    }
    CUptiResult r = CUPTI_SUCCESS;
    if (!g_registered) {
        /* CUPTI's device-side record buffers: a fixed size and pool, set before any context exists so
         * that they hold for the whole run, then read back (CUPTI may round) and kept for the record */
        size_t sz = sizeof(size_t), bytes = CUPTI_DEVICE_BUFFER_BYTES, pool = CUPTI_DEVICE_BUFFER_POOL;
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &bytes);
        sz = sizeof(size_t);
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &sz, &pool);
        r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        g_registered = r == CUPTI_SUCCESS;
    }
    if (r != CUPTI_SUCCESS) {
        snprintf(c->reason, sizeof c->reason, "cuptiActivityRegisterCallbacks: %s", cupti_err(r));
    } else {
        size_t sz = sizeof(size_t);
        if (cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &c->dev_buf_bytes) != CUPTI_SUCCESS)
            c->dev_buf_bytes = 0;
        sz = sizeof(size_t);
        if (cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &sz, &c->dev_buf_pool) !=
            CUPTI_SUCCESS)
            c->dev_buf_pool = 0;
        /* asked once now, so that a refusal (another profiler attached, ...) is "unavailable" from the
         * start; off again until a traced step */
        r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        if (r != CUPTI_SUCCESS)
            snprintf(c->reason, sizeof c->reason, "cuptiActivityEnable(CONCURRENT_KERNEL): %s", cupti_err(r));
        else
            cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    }
    if (r != CUPTI_SUCCESS) {
        pthread_mutex_lock(&g_mu);
        g_cupti = NULL;
        pthread_mutex_unlock(&g_mu);
        return FP_OK;
    }
    c->available = 1;
    return FP_OK;
}

void fp_cupti_close(fp_cupti *c)
{
    if (!c)
        return;
    if (c->available) {
        /* 1. flush: what a traced step left is stored */
        if (c->tracing)
            end_trace(c);   /* flushes, stores, disables */
        else
            flush_records(c, 0);
        /* 2. every kind off, then what CUPTI still held comes back to us and is dropped */
        for (size_t i = 0; i < NKINDS; i++)
            cuptiActivityDisable(kinds[i].kind);
        c->enabled = 0;
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        /* 3. detach: a callback from now on frees its buffer without touching c */
        pthread_mutex_lock(&g_mu);
        if (g_cupti == c)
            g_cupti = NULL;
        pthread_mutex_unlock(&g_mu);
        drain(c, 0);
    }
    /* 4. free */
    for (size_t i = 0; c->names && i < NAME_SLOTS; i++)
        free(c->names[i].name);
    free(c->names);
    free(c->corr);
    free(c->rows);
    free(c);
}

int fp_cupti_available(const fp_cupti *c) { return c && c->available; }
const char *fp_cupti_reason(const fp_cupti *c) { return !c ? "no CUPTI" : c->available ? "" : c->reason; }
uint64_t fp_cupti_dropped(const fp_cupti *c) { return c ? c->dropped : 0; }

void fp_cupti_device_buffers(const fp_cupti *c, size_t *bytes, size_t *pool)
{
    if (bytes)
        *bytes = c && c->available ? c->dev_buf_bytes : 0;
    if (pool)
        *pool = c && c->available ? c->dev_buf_pool : 0;
}
uint64_t fp_cupti_kernels(const fp_cupti *c) { return c ? c->kernels : 0; }
int64_t fp_cupti_run(const fp_cupti *c) { return c ? c->run : 0; }

int fp_cupti_set_run(fp_cupti *c, fp_store_t *store, int64_t run)
{
    if (!c || !c->available)
        return fp_fail(FP_EUNAVAIL, "cupti: %s", fp_cupti_reason(c));
    flush_records(c, c->traced_step >= 0);   /* what is queued belongs to the previous run */
    if (store != c->store) {   /* name ids are per store */
        for (size_t i = 0; i < NAME_SLOTS; i++) {
            free(c->names[i].name);
            c->names[i].name = NULL;
            c->names[i].id = 0;
        }
        c->store = store;
    }
    c->run = run;
    return c->status;
}

int fp_cupti_flush(fp_cupti *c)
{
    if (!c || !c->available)
        return fp_fail(FP_EUNAVAIL, "cupti: %s", fp_cupti_reason(c));
    flush_records(c, c->traced_step >= 0);
    return c->status;
}

static unsigned cu_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)loss_scale;
    fp_cupti *c = self;
    if (c->tracing)   /* a traced step begun again without its step_end: store what it has */
        end_trace(c);
    if (!fp_probe_every(step, c->trace_every))
        return 0;
    flush_records(c, 0);   /* drop what came after the last traced step's flush */
    if (enable_kinds(c, step)) {
        c->tracing = 1;
        c->traced_step = step;
    }
    return 0;
}

static void cu_step_end(void *self, int64_t step)
{
    (void)step;
    fp_cupti *c = self;
    if (c->tracing)
        end_trace(c);   /* the caller synchronised the device at the end of the step */
}

static void cu_layer_begin(void *self, int layer, fp_phase phase)
{
    fp_cupti *c = self;
    if (c->tracing && cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                                             EXT_TAG | ((uint64_t)(layer + 1) << 8) |
                                                                 (uint64_t)phase) == CUPTI_SUCCESS)
        c->depth++;
}

static void cu_layer_end(void *self, int layer, fp_phase phase)
{
    (void)layer;
    (void)phase;
    fp_cupti *c = self;
    uint64_t last;
    if (c->tracing && c->depth > 0) {
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
        c->depth--;
    }
}

static const fp_probe_ops cupti_ops = {"cupti", cu_step_begin, cu_step_end, cu_layer_begin, cu_layer_end, NULL};

int fp_cupti_attach(fp_cupti *c, fp_probe *p)
{
    if (!c || !c->available)
        return fp_fail(FP_EUNAVAIL, "cupti: %s", fp_cupti_reason(c));
    return fp_probe_add(p, &cupti_ops, c);
}
