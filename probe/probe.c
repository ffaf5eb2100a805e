/* probe.c — the probe set: fans the trainer's step / layer / tensor calls out to its backends.
 * Promises: calls reach backends in the order they were added; layer and tensor calls outside a
 * step are ignored; a tensor reaches only the backends that asked for its role this step; a 16-bit
 * tensor is widened at most once per call, and only for backends that cannot take it as stored; a ready
 * histogram reaches only backends with a hist hook, and is refused for a role some other backend needs
 * as values; an in-place backend gets tensors only where they lie (fp_probe_tensor_in_place). */
#include <stdlib.h>
#include "error.h"
#include "probe/probe.h"
#include "thread_pool.h"

typedef struct {
    const fp_probe_ops *ops;
    void *self;
    fp_probe_tensor16_fn tensor16;   /* fp_probe_add16; NULL otherwise */
    fp_probe_hist_fn hist;           /* fp_probe_add_hist; NULL otherwise */
    fp_probe_in_place_fn in_place;   /* fp_probe_add_in_place; NULL otherwise (then no other tensor hook) */
    unsigned wants;   /* roles asked for at this step */
} backend_t;

struct fp_probe {
    backend_t b[FP_PROBE_MAX_BACKENDS];
    int nb;
    /* backends with layer hooks, for the per-layer fast path */
    backend_t *lb[FP_PROBE_MAX_BACKENDS], *le[FP_PROBE_MAX_BACKENDS];
    int nlb, nle;
    int in_step;
    int64_t step;
    float loss_scale;
    unsigned wants;
    unsigned wants_values;   /* roles wanted by backends without a hist hook (in-place ones left out) */
    unsigned wants_in_place; /* roles wanted by in-place backends */
    unsigned wants_copies;   /* roles wanted by the others */
    unsigned caller_roles;   /* fp_probe_caller_roles: delivered by the caller, not the model */
    int pool_held;    /* this step samples tensors: the kernels' pool is held until step_end */
    float *wide;      /* fp_probe_tensor_dt: 16-bit tensors widened for backends without tensor16 */
    size_t wide_cap;
};

int fp_probe_create(fp_probe **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return fp_fail(FP_ENOMEM, "probe: out of memory");
    (*out)->step = -1;
    (*out)->loss_scale = 1.0f;
    return FP_OK;
}

/* Lets the kernels' pool go when this set holds it. */
static void release_pool(fp_probe *p)
{
    if (p->pool_held)
        fp_pool_hold(0);
    p->pool_held = 0;
}

void fp_probe_free(fp_probe *p)
{
    if (p) {
        release_pool(p);
        free(p->wide);
    }
    free(p);
}

int fp_probe_add(fp_probe *p, const fp_probe_ops *ops, void *self) { return fp_probe_add_hist(p, ops, NULL, NULL, self); }

int fp_probe_add16(fp_probe *p, const fp_probe_ops *ops, fp_probe_tensor16_fn tensor16, void *self)
{
    return fp_probe_add_hist(p, ops, tensor16, NULL, self);
}

int fp_probe_add_hist(fp_probe *p, const fp_probe_ops *ops, fp_probe_tensor16_fn tensor16, fp_probe_hist_fn hist,
                      void *self)
{
    if (!p || !ops)
        return fp_fail(FP_EINVAL, "probe: add with a NULL %s", p ? "ops table" : "probe");
    if (p->nb == FP_PROBE_MAX_BACKENDS)
        return fp_fail(FP_EINVAL, "probe: more than %d backends", FP_PROBE_MAX_BACKENDS);
    backend_t *b = &p->b[p->nb++];
    b->ops = ops;
    b->self = self;
    b->tensor16 = tensor16;
    b->hist = hist;
    b->in_place = NULL;
    b->wants = 0;
    if (ops->layer_begin)
        p->lb[p->nlb++] = b;
    if (ops->layer_end)
        p->le[p->nle++] = b;
    return FP_OK;
}

int fp_probe_add_in_place(fp_probe *p, const fp_probe_ops *ops, fp_probe_in_place_fn in_place, void *self)
{
    if (!in_place)
        return fp_fail(FP_EINVAL, "probe: in-place backend without its hook");
    int rc = fp_probe_add_hist(p, ops, NULL, NULL, self);
    if (!rc)
        p->b[p->nb - 1].in_place = in_place;
    return rc;
}

int fp_probe_backend_count(const fp_probe *p) { return p ? p->nb : 0; }

int fp_probe_every(int64_t step, int every) { return every > 0 && step >= 0 && step % every == 0; }

void fp_probe_step_begin(fp_probe *p, int64_t step, float loss_scale)
{
    if (!p)
        return;
    release_pool(p);   /* a step begun again without its step_end */
    p->in_step = 1;
    p->step = step;
    p->loss_scale = loss_scale;
    p->wants = p->wants_values = p->wants_in_place = p->wants_copies = 0;
    for (int i = 0; i < p->nb; i++) {
        backend_t *b = &p->b[i];
        b->wants = b->ops->step_begin ? b->ops->step_begin(b->self, step, loss_scale) & FP_PROBE_ALL_ROLES : 0;
        if (!b->ops->tensor && !b->tensor16 && !b->in_place)
            b->wants = 0;
        p->wants |= b->wants;
        if (b->in_place) {
            p->wants_in_place |= b->wants;
            continue;
        }
        p->wants_copies |= b->wants;
        if (!b->hist)
            p->wants_values |= b->wants;
    }
    if (p->wants) {   /* the histograms' and the rounding error's many short loops: no worker wake-ups */
        fp_pool_hold(1);
        p->pool_held = 1;
    }
}

void fp_probe_step_end(fp_probe *p)
{
    if (!p || !p->in_step)
        return;
    for (int i = 0; i < p->nb; i++)
        if (p->b[i].ops->step_end)
            p->b[i].ops->step_end(p->b[i].self, p->step);
    p->in_step = 0;
    p->wants = p->wants_values = p->wants_in_place = p->wants_copies = 0;
    p->step = -1;
    release_pool(p);
}

void fp_probe_set_loss_scale(fp_probe *p, float loss_scale)
{
    if (p)
        p->loss_scale = loss_scale;
}

int64_t fp_probe_current_step(const fp_probe *p) { return p && p->in_step ? p->step : -1; }
float fp_probe_loss_scale(const fp_probe *p) { return p ? p->loss_scale : 1.0f; }

void fp_probe_layer_begin(fp_probe *p, int layer, fp_phase phase)
{
    if (!p || !p->in_step)
        return;
    for (int i = 0; i < p->nlb; i++)
        p->lb[i]->ops->layer_begin(p->lb[i]->self, layer, phase);
}

void fp_probe_layer_end(fp_probe *p, int layer, fp_phase phase)
{
    if (!p || !p->in_step)
        return;
    for (int i = p->nle - 1; i >= 0; i--)   /* reverse order: ranges nest properly */
        p->le[i]->ops->layer_end(p->le[i]->self, layer, phase);
}

unsigned fp_probe_wants(const fp_probe *p) { return p && p->in_step ? p->wants & ~p->caller_roles : 0; }
unsigned fp_probe_wants_all(const fp_probe *p) { return p && p->in_step ? p->wants : 0; }

unsigned fp_probe_wants_in_place(const fp_probe *p)
{
    return p && p->in_step ? p->wants_in_place & ~p->caller_roles : 0;
}

unsigned fp_probe_wants_copies(const fp_probe *p)
{
    return p && p->in_step ? p->wants_copies & ~p->caller_roles : 0;
}

void fp_probe_tensor_in_place(fp_probe *p, int layer, fp_tensor_role role, const void *x, fp_dtype dt, size_t n,
                              const fp_probe_mem *mem)
{
    if (!p || !p->in_step || (unsigned)role >= FP_ROLE_COUNT || !(p->wants_in_place & FP_PROBE_ROLE_BIT(role)))
        return;
    for (int i = 0; i < p->nb; i++)
        if ((p->b[i].wants & FP_PROBE_ROLE_BIT(role)) && p->b[i].in_place)
            p->b[i].in_place(p->b[i].self, layer, role, x, dt, n, p->loss_scale, mem);
}

void fp_probe_caller_roles(fp_probe *p, unsigned roles)
{
    if (p)
        p->caller_roles = roles & FP_PROBE_ALL_ROLES;
}

void fp_probe_tensor(fp_probe *p, int layer, fp_tensor_role role, const float *x, size_t n)
{
    if (!p || !p->in_step || (unsigned)role >= FP_ROLE_COUNT || !(p->wants & FP_PROBE_ROLE_BIT(role)))
        return;
    for (int i = 0; i < p->nb; i++)
        if ((p->b[i].wants & FP_PROBE_ROLE_BIT(role)) && p->b[i].ops->tensor && !p->b[i].in_place)
            p->b[i].ops->tensor(p->b[i].self, layer, role, x, n, p->loss_scale);
}

int fp_probe_tensor_dt(fp_probe *p, int layer, fp_tensor_role role, const void *x, fp_dtype dt, size_t n)
{
    if (dt == FP_DT_F32) {
        fp_probe_tensor(p, layer, role, x, n);
        return FP_OK;
    }
    if (dt != FP_DT_F16 && dt != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "probe: tensor of storage type %d", (int)dt);
    if (!p || !p->in_step || (unsigned)role >= FP_ROLE_COUNT || !(p->wants & FP_PROBE_ROLE_BIT(role)))
        return FP_OK;
    unsigned bit = FP_PROBE_ROLE_BIT(role);
    int widened = 0, rc = FP_OK;
    for (int i = 0; i < p->nb; i++) {
        backend_t *b = &p->b[i];
        if (!(b->wants & bit) || b->in_place)
            continue;
        if (b->tensor16) {
            b->tensor16(b->self, layer, role, x, dt, n, p->loss_scale);
            continue;
        }
        if (!b->ops->tensor)
            continue;
        if (!widened) {
            if (n > p->wide_cap) {
                float *w = realloc(p->wide, n * sizeof *w);
                if (!w) {
                    rc = fp_fail(FP_ENOMEM, "probe: out of memory widening a tensor of %zu values", n);
                    continue;
                }
                p->wide = w;
                p->wide_cap = n;
            }
            fp_widen_array(p->wide, x, n, dt);
            widened = 1;
        }
        b->ops->tensor(b->self, layer, role, p->wide, n, p->loss_scale);
    }
    return rc;
}

/* The roles that must travel as values, the caller's own included. */
static unsigned values_needed(const fp_probe *p)
{
    const unsigned wg = FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD);
    return p->wants_values | (p->loss_scale != 1.0f ? p->wants & wg : 0);
}

unsigned fp_probe_wants_values(const fp_probe *p)
{
    return p && p->in_step ? values_needed(p) & p->wants & ~p->caller_roles : 0;
}

unsigned fp_probe_wants_values_all(const fp_probe *p) { return p && p->in_step ? values_needed(p) & p->wants : 0; }

int fp_probe_tensor_hist(fp_probe *p, int layer, fp_tensor_role role, const fp_hist_t *h)
{
    if (!h)
        return fp_fail(FP_EINVAL, "probe: ready histogram of layer %d is NULL", layer);
    if (!p || !p->in_step || (unsigned)role >= FP_ROLE_COUNT || !(p->wants & FP_PROBE_ROLE_BIT(role)))
        return FP_OK;
    const unsigned bit = FP_PROBE_ROLE_BIT(role);
    if (values_needed(p) & bit)
        return fp_fail(FP_EINVAL, "probe: layer %d role %d is needed as values this step, not as a histogram", layer,
                       (int)role);
    for (int i = 0; i < p->nb; i++)
        if ((p->b[i].wants & bit) && p->b[i].hist)
            p->b[i].hist(p->b[i].self, layer, role, h, p->loss_scale);
    return FP_OK;
}
