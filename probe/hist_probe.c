/* hist_probe.c — exponent histograms of every layer's tensors at sampling steps (lib/hist.h: fp16,
 * bf16, E4M3, E5M2 at once), written to the store at step_end. Promises: one histogram per (layer,
 * role) per sampling step, weight gradients unscaled, nothing done at other steps, no allocation
 * per step. */
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "probe/probe.h"

#define UNSCALE_CHUNK 4096

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
    int status;
    float tmp[UNSCALE_CHUNK];
};

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
    h->sampling = fp_probe_every(step, h->every);
    if (!h->sampling)
        return 0;
    memset(h->taken, 0, (size_t)h->nlayers * FP_ROLE_COUNT);
    return h->roles;
}

static void hp_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale)
{
    fp_hist_probe *h = self;
    if (!h->sampling || layer < 0 || layer >= h->nlayers)
        return;
    size_t k = (size_t)layer * FP_ROLE_COUNT + role;
    fp_hist_t *hh = &h->h[k];
    if (!h->taken[k]) {
        fp_hist_init(hh);
        h->taken[k] = 1;
    }
    if (role == FP_ROLE_WEIGHT_GRAD && loss_scale != 1.0f && loss_scale > 0) {
        float inv = 1.0f / loss_scale;
        for (size_t i = 0; i < n; i += UNSCALE_CHUNK) {
            size_t c = n - i < UNSCALE_CHUNK ? n - i : UNSCALE_CHUNK;
            for (size_t j = 0; j < c; j++)
                h->tmp[j] = x[i + j] * inv;
            fp_hist_add(hh, h->tmp, c);
        }
        return;
    }
    fp_hist_add(hh, x, n);
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
        int rc = fp_store_hist(h->store, h->run, step, (int)(k / FP_ROLE_COUNT), (fp_tensor_role)(k % FP_ROLE_COUNT),
                               &h->h[k]);
        if (rc && !h->status)
            h->status = rc;
    }
}

static const fp_probe_ops hist_ops = {"hist", hp_step_begin, hp_step_end, NULL, NULL, hp_tensor};

int fp_hist_probe_attach(fp_hist_probe *h, fp_probe *p) { return fp_probe_add(p, &hist_ops, h); }

const fp_hist_t *fp_hist_probe_get(const fp_hist_probe *h, int layer, fp_tensor_role role)
{
    if (!h || layer < 0 || layer >= h->nlayers || (unsigned)role >= FP_ROLE_COUNT)
        return NULL;
    size_t k = (size_t)layer * FP_ROLE_COUNT + role;
    return h->valid[k] ? &h->h[k] : NULL;
}

int64_t fp_hist_probe_last_step(const fp_hist_probe *h) { return h ? h->last_step : -1; }
int fp_hist_probe_status(const fp_hist_probe *h) { return h ? h->status : FP_OK; }
