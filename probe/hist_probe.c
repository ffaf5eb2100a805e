/* hist_probe.c — exponent histograms of every layer's tensors at sampling steps (lib/hist.h: fp16,
 * bf16, E4M3, E5M2 at once), written to the store at step_end. Promises: one histogram per (layer,
 * role) per sampling step, weight gradients unscaled, nothing done at other steps, no allocation
 * per step; 16-bit tensors are counted as stored (lib/hist.h fp_hist_add_f16 / _bf16), not widened;
 * a weight gradient under a power-of-two loss scale is unscaled by fp_hist_add_scaled (no copy);
 * a large tensor is cut into up to CHUNKS_MAX chunks (their number and bounds set by its size alone)
 * that the kernels' thread pool (lib/thread_pool.h: its workers are awake right after the
 * layer's own loops) counts each into its own histogram, merged in chunk order: the counts are those
 * of one pass, and sum_abs depends neither on the thread count nor on which thread took which chunk.
 * The tensor hooks may run on two threads at once for distinct layers (probe.h): per-(layer, role)
 * cells, scratch on the stack (the pool serves one caller at a time, the other counts inline), the
 * first error kept atomically. A tensor counted elsewhere (a device: fp_probe_tensor_hist) arrives as a
 * ready histogram and is merged as is: the same counts as its values would give. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "hist.h"
#include "probe/probe.h"
#include "thread_pool.h"

#define UNSCALE_CHUNK 16384             /* floats: in L2, and few enough fp_hist_add calls per tensor */
#define CHUNK_MIN ((size_t)1 << 16)     /* values per chunk at least (fp32 or 16-bit): a call costs ~2-4 us */
#define CHUNKS_MAX 8

enum { K_F32, K_F32_SCALED, K_F32_POW2, K_F16, K_BF16 };

typedef struct {
    int kind;
    const void *x;
    size_t n, chunk;
    float inv;                 /* K_F32_SCALED */
    int log2_div;              /* K_F32_POW2: x / 2^log2_div without a multiply pass */
} job_t;

struct fp_hist_probe {
    int nlayers, every;
    unsigned roles;
    fp_store_t *store;
    int64_t run;
    fp_hist_t *h;              /* [nlayers][FP_ROLE_COUNT] */
    unsigned char *taken;      /* this step */
    unsigned char *valid;      /* the last sampling step */
    int64_t step, last_step;
    int sampling;
    int told, sample_next;     /* fp_hist_probe_sample_next: the caller decides (told), for the next step */
    int status;                /* the first error (atomic) */
};

/* *first = rc when rc is an error and *first holds none yet (atomic). */
static void keep_first_error(int *first, int rc)
{
    int none = FP_OK;
    if (rc)
        __atomic_compare_exchange_n(first, &none, rc, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void set_status(fp_hist_probe *h, int rc) { keep_first_error(&h->status, rc); }

/* Values [off, off + len) of a job's kind into dst. */
static int add_range(fp_hist_t *dst, const job_t *j, size_t off, size_t len)
{
    switch (j->kind) {
    case K_F16:
        return fp_hist_add_f16(dst, (const uint16_t *)j->x + off, len);
    case K_BF16:
        return fp_hist_add_bf16(dst, (const uint16_t *)j->x + off, len);
    case K_F32_POW2:
        return fp_hist_add_scaled(dst, (const float *)j->x + off, len, j->log2_div);
    case K_F32_SCALED: {
        float tmp[UNSCALE_CHUNK];
        const float *x = (const float *)j->x + off;
        for (size_t i = 0; i < len; i += UNSCALE_CHUNK) {
            size_t c = len - i < UNSCALE_CHUNK ? len - i : UNSCALE_CHUNK;
            for (size_t k = 0; k < c; k++)
                tmp[k] = x[i + k] * j->inv;
            fp_hist_add(dst, tmp, c);
        }
        return FP_OK;
    }
    default:
        return fp_hist_add(dst, (const float *)j->x + off, len);
    }
}

typedef struct {
    const job_t *job;
    fp_hist_t *part;           /* [chunks] */
    int rc;                    /* the first error (atomic) */
} split_t;

/* Chunks [c0, c1) of a split job, each into its own histogram. */
static void count_chunks(void *ctx, size_t c0, size_t c1)
{
    split_t *s = ctx;
    const job_t *j = s->job;
    for (size_t c = c0; c < c1; c++) {
        size_t off = c * j->chunk, len = j->n - off < j->chunk ? j->n - off : j->chunk;
        fp_hist_init(&s->part[c]);
        keep_first_error(&s->rc, add_range(&s->part[c], j, off, len));
    }
}

/* One tensor into hh: a large one in chunks over the pool (fp_parallel_for runs them all here when
 * the pool is busy or has one thread: the same chunks, the same counts). */
static void hist_job(fp_hist_probe *h, fp_hist_t *hh, int kind, const void *x, size_t n, float inv, int log2_div)
{
    job_t j = {kind, x, n, n, inv, log2_div};
    size_t nch = n / CHUNK_MIN < CHUNKS_MAX ? n / CHUNK_MIN : CHUNKS_MAX;
    if (nch < 2) {
        set_status(h, add_range(hh, &j, 0, n));
        return;
    }
    fp_hist_t part[CHUNKS_MAX];
    j.chunk = ((n + nch - 1) / nch + 63) & ~(size_t)63;
    nch = (n + j.chunk - 1) / j.chunk;
    split_t s = {&j, part, FP_OK};
    fp_parallel_for(nch, 1, 1, count_chunks, &s);
    for (size_t c = 0; c < nch; c++)
        fp_hist_merge(hh, &part[c]);
    set_status(h, s.rc);
}

int fp_hist_probe_create(fp_hist_probe **out, int nlayers, int every, unsigned roles, fp_store_t *store, int64_t run)
{
    *out = NULL;
    if (nlayers < 1)
        return fp_fail(FP_EINVAL, "hist probe: %d layers", nlayers);
    fp_hist_probe *h = calloc(1, sizeof *h);
    size_t cells = (size_t)nlayers * FP_ROLE_COUNT;
    if (!h || !(h->h = malloc(cells * sizeof *h->h)) || !(h->taken = calloc(cells, 1)) ||
        !(h->valid = calloc(cells, 1))) {
        fp_hist_probe_free(h);
        return fp_fail(FP_ENOMEM, "hist probe: out of memory");
    }
    h->nlayers = nlayers;
    h->every = every;
    h->roles = roles ? roles & FP_PROBE_ALL_ROLES : FP_PROBE_ALL_ROLES;
    h->store = store;
    h->run = run;
    h->last_step = -1;
    *out = h;
    return FP_OK;
}

void fp_hist_probe_free(fp_hist_probe *h)
{
    if (!h)
        return;
    free(h->h);
    free(h->taken);
    free(h->valid);
    free(h);
}

static unsigned hp_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)loss_scale;
    fp_hist_probe *h = self;
    h->step = step;
    h->sampling = h->told ? h->sample_next : fp_probe_every(step, h->every);
    if (!h->sampling)
        return 0;
    memset(h->taken, 0, (size_t)h->nlayers * FP_ROLE_COUNT);
    return h->roles;
}

/* The histogram of (layer, role) at this sampling step, initialised at its first tensor; NULL when
 * not sampling or out of range. */
static fp_hist_t *hp_cell(fp_hist_probe *h, int layer, fp_tensor_role role)
{
    if (!h->sampling || layer < 0 || layer >= h->nlayers)
        return NULL;
    size_t k = (size_t)layer * FP_ROLE_COUNT + role;
    if (!h->taken[k]) {
        fp_hist_init(&h->h[k]);
        h->taken[k] = 1;
    }
    return &h->h[k];
}

static void hp_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale)
{
    fp_hist_probe *h = self;
    fp_hist_t *hh = hp_cell(h, layer, role);
    if (!hh)
        return;
    int e;
    if (role != FP_ROLE_WEIGHT_GRAD || loss_scale == 1.0f || !(loss_scale > 0) || isinf(loss_scale))
        hist_job(h, hh, K_F32, x, n, 1.0f, 0);
    else if (frexpf(loss_scale, &e) == 0.5f && e - 1 <= FP_HIST_LOG2_DIV_MAX && e - 1 >= -FP_HIST_LOG2_DIV_MAX)
        hist_job(h, hh, K_F32_POW2, x, n, 1.0f, e - 1);   /* GradScaler's scales: powers of two */
    else
        hist_job(h, hh, K_F32_SCALED, x, n, 1.0f / loss_scale, 0);
}

/* 16-bit tensors as stored: counted per bit pattern (fp_hist_add_f16 / _bf16), no widening; a
 * scaled 16-bit weight gradient (no policy stores one today) is widened and unscaled in chunks. */
static void hp_tensor16(void *self, int layer, fp_tensor_role role, const uint16_t *x, fp_dtype dt, size_t n,
                        float loss_scale)
{
    fp_hist_probe *h = self;
    fp_hist_t *hh = hp_cell(h, layer, role);
    if (!hh)
        return;
    if (role == FP_ROLE_WEIGHT_GRAD && loss_scale != 1.0f && loss_scale > 0) {
        float inv = 1.0f / loss_scale, tmp[UNSCALE_CHUNK];
        for (size_t i = 0; i < n; i += UNSCALE_CHUNK) {
            size_t c = n - i < UNSCALE_CHUNK ? n - i : UNSCALE_CHUNK;
            fp_widen_array(tmp, x + i, c, dt);
            for (size_t j = 0; j < c; j++)
                tmp[j] *= inv;
            fp_hist_add(hh, tmp, c);
        }
        return;
    }
    hist_job(h, hh, dt == FP_DT_BF16 ? K_BF16 : K_F16, x, n, 1.0f, 0);
}

/* A ready histogram (probe.h fp_probe_tensor_hist): the values as held. The probe set hands a weight
 * gradient this way only at loss scale 1 (nothing to unscale); anything else is refused, not guessed. */
static void hp_hist(void *self, int layer, fp_tensor_role role, const fp_hist_t *src, float loss_scale)
{
    fp_hist_probe *h = self;
    fp_hist_t *hh = hp_cell(h, layer, role);
    if (!hh)
        return;
    if (role == FP_ROLE_WEIGHT_GRAD && loss_scale != 1.0f) {
        set_status(h, fp_fail(FP_EINVAL, "hist probe: a ready histogram of layer %d's weight gradient at loss "
                                         "scale %g cannot be unscaled", layer, (double)loss_scale));
        return;
    }
    fp_hist_merge(hh, src);
}

static void hp_step_end(void *self, int64_t step)
{
    fp_hist_probe *h = self;
    if (!h->sampling)
        return;
    size_t cells = (size_t)h->nlayers * FP_ROLE_COUNT;
    memcpy(h->valid, h->taken, cells);
    h->last_step = step;
    h->sampling = 0;
    if (!h->store)
        return;
    for (size_t k = 0; k < cells; k++) {
        if (!h->taken[k])
            continue;
        set_status(h, fp_store_hist(h->store, h->run, step, (int)(k / FP_ROLE_COUNT),
                                    (fp_tensor_role)(k % FP_ROLE_COUNT), &h->h[k]));
    }
}

static const fp_probe_ops hist_ops = {"hist", hp_step_begin, hp_step_end, NULL, NULL, hp_tensor};

int fp_hist_probe_attach(fp_hist_probe *h, fp_probe *p) { return fp_probe_add_hist(p, &hist_ops, hp_tensor16, hp_hist, h); }

void fp_hist_probe_sample_next(fp_hist_probe *h, int sample)
{
    h->told = 1;
    h->sample_next = sample != 0;
}

const fp_hist_t *fp_hist_probe_get(const fp_hist_probe *h, int layer, fp_tensor_role role)
{
    if (!h || layer < 0 || layer >= h->nlayers || (unsigned)role >= FP_ROLE_COUNT)
        return NULL;
    size_t k = (size_t)layer * FP_ROLE_COUNT + role;
    return h->valid[k] ? &h->h[k] : NULL;
}

int64_t fp_hist_probe_last_step(const fp_hist_probe *h) { return h ? h->last_step : -1; }
int fp_hist_probe_status(const fp_hist_probe *h) { return h ? __atomic_load_n(&h->status, __ATOMIC_RELAXED) : FP_OK; }
