/* cupti_activity.c — kernel-level tracing with the CUPTI Activity API (built only with CUPTI):
 * CONCURRENT_KERNEL (never KERNEL, which serialises kernels), MEMCPY, MEMSET, MEMORY2, RUNTIME,
 * EXTERNAL_CORRELATION and OVERHEAD, 8 MB buffers, kernels attributed to (layer, phase) through
 * external correlation ids pushed around every layer of a traced step, each kernel classified by name
 * (probe/kernel_class.h: its class and, from it, the tensorCore flag). Promises: the completion
 * callback only queues buffers (all parsing on the trainer thread at a flush); dropped records are
 * counted; CUPTI refused or absent -> "unavailable" with the reason, training goes on. */
#include "config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cupti.h>
#include "error.h"
#include "probe/kernel_class.h"
#include "probe/probe.h"

#define BUF_SIZE (8u << 20)        /* 4-8 MB as CUPTI's samples and kineto */
#define BUF_ALIGN 8
#define CUPTI_DEVICE_BUFFER_BYTES ((size_t)32 << 20)   /* CUPTI's device record buffers (its default ~3 MB) */
#define CUPTI_DEVICE_BUFFER_POOL ((size_t)4)
#define CORR_SLOTS (1u << 16)      /* correlation id -> external id, open addressing */
#define NAME_SLOTS 4096
#define EXT_TAG (1ull << 62)       /* marks our external ids */

typedef struct qbuf {
    uint8_t *buf;
    size_t valid;
    struct qbuf *next;
} qbuf;

typedef struct {
    uint32_t corr;   /* 0: empty */
    uint64_t ext;
} corr_slot;

typedef struct {
    char *name;
    int64_t id;
} name_slot;

struct fp_cupti {
    fp_store_t *store;
    int64_t run;
    int trace_every;
    int available;
    char reason[256];
    pthread_mutex_t mu;
    qbuf *head, *tail;               /* completed buffers, oldest first */
    uint64_t dropped, kernels;
    size_t dev_buf_bytes, dev_buf_pool;   /* CUPTI's own device buffers as CUPTI reports them (0: unknown) */
    int64_t step;
    int tracing;                     /* the current step is traced */
    int64_t traced_step;             /* step whose kernels the next flush stores; -1 none */
    corr_slot *corr;
    name_slot *names;
    fp_kernel_rec_t *rows;
    size_t nrows, caprows;
    int status;
};

static fp_cupti *g_cupti;   /* CUPTI's buffer callbacks carry no user pointer: one tracer per process */

static const char *cupti_err(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
        s = "CUPTI error";
    return s;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(BUF_ALIGN, BUF_SIZE);
    *size = *buffer ? BUF_SIZE : 0;
    *max_records = 0;   /* as many as fit */
}

/* Only queues the buffer: parsing happens at a flush, on the trainer thread. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    fp_cupti *c = g_cupti;
    qbuf *q = c ? malloc(sizeof *q) : NULL;
    if (!q) {
        free(buffer);
        return;
    }
    q->buf = buffer;
    q->valid = valid;
    q->next = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->tail)
        c->tail->next = q;
    else
        c->head = q;
    c->tail = q;
    pthread_mutex_unlock(&c->mu);
}

static void corr_put(fp_cupti *c, uint32_t corr, uint64_t ext)
{
    if (!corr)
        return;
    for (uint32_t i = (corr * 2654435761u) & (CORR_SLOTS - 1), k = 0; k < CORR_SLOTS; k++, i = (i + 1) & (CORR_SLOTS - 1))
        if (!c->corr[i].corr || c->corr[i].corr == corr) {
            c->corr[i].corr = corr;
            c->corr[i].ext = ext;
            return;
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

/* Parses every queued buffer: correlation records first (they may arrive in another buffer than
 * their kernels), then kernels, kept only when `keep`. Frees the buffers. */
static void drain(fp_cupti *c, int keep)
{
    pthread_mutex_lock(&c->mu);
    qbuf *q = c->head;
    c->head = c->tail = NULL;
    pthread_mutex_unlock(&c->mu);
    if (keep)
        for (qbuf *b = q; b; b = b->next) {
            CUpti_Activity *rec = NULL;
            while (cuptiActivityGetNextRecord(b->buf, b->valid, &rec) == CUPTI_SUCCESS)
                if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
                    const CUpti_ActivityExternalCorrelation *e = (const void *)rec;
                    if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
                        corr_put(c, e->correlationId, e->externalId);
                }
        }
    while (q) {
        if (keep) {
            CUpti_Activity *rec = NULL;
            while (cuptiActivityGetNextRecord(q->buf, q->valid, &rec) == CUPTI_SUCCESS)
                if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                    add_kernel(c, (const CUpti_ActivityKernel10 *)(const void *)rec);
        }
        qbuf *n = q->next;
        free(q->buf);
        free(q);
        q = n;
    }
    if (keep && c->nrows) {
        int rc = c->store ? fp_store_kernels(c->store, c->rows, c->nrows) : FP_OK;
        if (rc && !c->status)
            c->status = rc;
        c->kernels += c->nrows;
    }
    c->nrows = 0;
    if (keep)
        memset(c->corr, 0, CORR_SLOTS * sizeof *c->corr);
}

static void flush_records(fp_cupti *c, int keep)
{
    cuptiActivityFlushAll(1);   /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: incomplete buffers too */
    size_t d = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &d) == CUPTI_SUCCESS)
        c->dropped += d;
    drain(c, keep);
}

int fp_cupti_open(fp_cupti **out, fp_store_t *store, int64_t run, int trace_every)
{
    fp_cupti *c = calloc(1, sizeof *c);
    *out = c;
    if (!c)
        return fp_fail(FP_ENOMEM, "cupti: out of memory");
    pthread_mutex_init(&c->mu, NULL);
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
    if (g_cupti) {
        snprintf(c->reason, sizeof c->reason, "another CUPTI tracer is open in this process");
        return FP_OK;
    }
    g_cupti = c;
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
        snprintf(c->reason, sizeof c->reason, "cuptiActivityRegisterCallbacks: %s", cupti_err(r));
        g_cupti = NULL;
        return FP_OK;
    }
    /* CUPTI's device-side record buffers: a fixed size and pool, set before any context exists so
     * that they hold for the whole run, then read back (CUPTI may round) and kept for the record */
    size_t sz = sizeof(size_t), bytes = CUPTI_DEVICE_BUFFER_BYTES, pool = CUPTI_DEVICE_BUFFER_POOL;
    cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &bytes);
    sz = sizeof(size_t);
    cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &sz, &pool);
    sz = sizeof(size_t);
    if (cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &c->dev_buf_bytes) != CUPTI_SUCCESS)
        c->dev_buf_bytes = 0;
    sz = sizeof(size_t);
    if (cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &sz, &c->dev_buf_pool) != CUPTI_SUCCESS)
        c->dev_buf_pool = 0;
    r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        snprintf(c->reason, sizeof c->reason, "cuptiActivityEnable(CONCURRENT_KERNEL): %s", cupti_err(r));
        g_cupti = NULL;
        return FP_OK;
    }
    static const CUpti_ActivityKind more[] = {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                              CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_RUNTIME,
                                              CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD};
    for (size_t i = 0; i < sizeof more / sizeof *more; i++)
        cuptiActivityEnable(more[i]);   /* best effort: kernels are what we store */
    c->available = 1;
    return FP_OK;
}

static void disable_all(void)
{
    static const CUpti_ActivityKind all[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                             CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2,
                                             CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                             CUPTI_ACTIVITY_KIND_OVERHEAD};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        cuptiActivityDisable(all[i]);
}

void fp_cupti_close(fp_cupti *c)
{
    if (!c)
        return;
    if (c->available) {
        flush_records(c, c->traced_step >= 0);
        disable_all();
        cuptiActivityFlushAll(1);
        drain(c, 0);
        g_cupti = NULL;
    }
    for (size_t i = 0; c->names && i < NAME_SLOTS; i++)
        free(c->names[i].name);
    free(c->names);
    free(c->corr);
    free(c->rows);
    pthread_mutex_destroy(&c->mu);
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
    c->step = step;
    c->tracing = fp_probe_every(step, c->trace_every);
    if (c->tracing) {   /* drop what earlier, untraced steps left */
        flush_records(c, 0);
        c->traced_step = step;
    }
    return 0;
}

static void cu_step_end(void *self, int64_t step)
{
    (void)step;
    fp_cupti *c = self;
    if (!c->tracing)
        return;
    flush_records(c, 1);   /* the caller synchronised the device at the end of the step */
    c->traced_step = -1;
    c->tracing = 0;
}

static void cu_layer_begin(void *self, int layer, fp_phase phase)
{
    fp_cupti *c = self;
    if (c->tracing)
        cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                               EXT_TAG | ((uint64_t)(layer + 1) << 8) | (uint64_t)phase);
}

static void cu_layer_end(void *self, int layer, fp_phase phase)
{
    (void)layer;
    (void)phase;
    fp_cupti *c = self;
    uint64_t last;
    if (c->tracing)
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

static const fp_probe_ops cupti_ops = {"cupti", cu_step_begin, cu_step_end, cu_layer_begin, cu_layer_end, NULL};

int fp_cupti_attach(fp_cupti *c, fp_probe *p)
{
    if (!c || !c->available)
        return fp_fail(FP_EUNAVAIL, "cupti: %s", fp_cupti_reason(c));
    return fp_probe_add(p, &cupti_ops, c);
}
