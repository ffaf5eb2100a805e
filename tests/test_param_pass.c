/* test_param_pass.c — the parameter pass over a two-thread pool (trainer/analysis/param_pass.c) equals the pass
 * on one thread bit for bit: every (layer, role) histogram, counts and sum_abs, and the lost update
 * fractions, on a narrow resnet18; the hist probe's tensor hook called from two threads at once for
 * distinct layers with tensors large enough to be split over the pool gives one thread's
 * histograms; fp_probe_copy_params copies, on one thread or two; the pass riding on the optimizer
 * (fp_probe_sample_params_stepping: the update as the optimizer wrote it) gives the optimizer's values
 * and the pass's figures bit for bit, infinite weights included, for sgd, adamw and adam. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "hist.h"
#include "hist_ref.h"
#include "trainer/analysis/analysis.h"
#include "probe/probe.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/model.h"
#include "thread_pool.h"
#include "trainer/optim.h"

#define MAXL 128

/* A backend that notes which thread handed over each layer's tensors (per-layer slots: safe). */
typedef struct {
    pthread_t who[MAXL];
    int seen[MAXL];
} thr_rec;
static unsigned tr_step_begin(void *self, int64_t step, float ls)
{
    (void)self;
    (void)step;
    (void)ls;
    return FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE);
}
static void tr_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float ls)
{
    (void)role;
    (void)x;
    (void)n;
    (void)ls;
    thr_rec *t = self;
    if (layer >= 0 && layer < MAXL) {
        t->who[layer] = pthread_self();
        t->seen[layer] = 1;
    }
}
static const fp_probe_ops thr_ops = {"threads", tr_step_begin, NULL, NULL, NULL, tr_tensor};

typedef struct {
    fp_hist_probe *hp;
    thr_rec tr;
    double per[MAXL], total;
} pass_t;

/* One sampled step's parameter pass (all roles, the weight roles from the caller) into r. */
static void one_pass(pass_t *r, fp_model *m, const float *old, const float *g, int threads)
{
    int L = fp_model_layer_count(m);
    fp_probe *p = NULL;
    fp_probe_create(&p);
    fp_hist_probe_create(&r->hp, L, 1, 0, NULL, 0);
    fp_hist_probe_attach(r->hp, p);
    memset(&r->tr, 0, sizeof r->tr);
    fp_probe_add(p, &thr_ops, &r->tr);
    fp_probe_caller_roles(p, FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT) | FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD));
    fp_pool_set_threads(threads);
    fp_probe_step_begin(p, 0, 1024.0f);
    r->total = fp_probe_sample_params(p, m, old, g, r->per);
    fp_probe_step_end(p);
    fp_pool_set_threads(1);
    fp_probe_free(p);
}

static int same_double(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static void test_pass(void)
{
    fp_model_config cfg = {"resnet18", 10, 32, 16, 7, 0};   /* ~0.7M parameters, layers of up to 3 pieces */
    fp_model *m = NULL;
    if (fp_model_create(&m, &cfg) != FP_OK) {
        tap_diag("%s", fp_error_message());
        tap_ok(0, "model");
        return;
    }
    int L = fp_model_layer_count(m);
    size_t np = fp_model_num_params(m);
    float *w = fp_model_params(m), *g = fp_model_grads(m), *old = malloc(np * sizeof *old);
    uint64_t s = 3;
    memcpy(old, w, np * sizeof *old);
    for (size_t i = 0; i < np; i++) {   /* zeros, a few non-finite, tiny (lost) and ordinary updates */
        float u = tu_uniform_pm1(&s);
        g[i] = i % 11 == 0 ? 0.0f : i % 997 == 0 ? INFINITY : u * ldexpf(1.0f, (int)(i % 29) - 20);
        if (isfinite(g[i]))
            w[i] -= 0.01f * g[i];
    }
    pass_t one, two;
    one_pass(&one, m, old, g, 1);
    one_pass(&two, m, old, g, 2);
    int same = L <= MAXL && same_double(one.total, two.total), cells = 0, threads_one = 1;
    for (int l = 0; l < L && l < MAXL; l++) {
        same &= same_double(one.per[l], two.per[l]);
        for (int r = FP_ROLE_WEIGHT; r <= FP_ROLE_UPDATE; r++) {
            const fp_hist_t *a = fp_hist_probe_get(one.hp, l, (fp_tensor_role)r);
            const fp_hist_t *b = fp_hist_probe_get(two.hp, l, (fp_tensor_role)r);
            if (!a || !b) {
                same &= !a && !b;
                continue;
            }
            cells++;
            if (!tu_hist_same(b, a, 0)) {   /* exact: sum_abs included */
                same = 0;
                tap_diag("layer %d role %d differs (two threads / one):", l, r);
                tu_hist_diag(b, a);
            }
        }
        if (one.tr.seen[l] && one.tr.seen[0])
            threads_one &= pthread_equal(one.tr.who[l], one.tr.who[0]) != 0;
    }
    tap_ok(same && cells > 0, "two threads = one thread bit for bit: %d histograms, per-layer and total lost "
           "updates (%g)", cells, one.total);
    tap_ok(threads_one, "one pool thread: every layer on the calling thread");
    fp_hist_probe_free(one.hp);
    fp_hist_probe_free(two.hp);
    free(old);
    fp_model_free(m);
}

/* ---- the hist probe's hook from two threads at once, tensors big enough to be split over the pool */

#define BIG (((size_t)1 << 20) + 5)
typedef struct {
    fp_probe *p;
    int layer;
    const float *x;
} call_t;
static void *call_main(void *arg)
{
    call_t *c = arg;
    for (int r = FP_ROLE_WEIGHT; r <= FP_ROLE_UPDATE; r++)
        fp_probe_tensor(c->p, c->layer, (fp_tensor_role)r, c->x, BIG);
    fp_hist_thread_release();   /* this thread's histogram tables */
    return NULL;
}

static void test_concurrent_hook(void)
{
    float *x[2] = {malloc(BIG * sizeof(float)), malloc(BIG * sizeof(float))};
    uint64_t s = 17;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < BIG; i++)
            x[k][i] = tu_uniform_pm1(&s) * ldexpf(1.0f, (int)(i % 41) - 25);
    fp_hist_probe *hp[2] = {NULL, NULL};
    fp_probe *p[2] = {NULL, NULL};
    fp_pool_set_threads(2);   /* one caller gets the pool, the other counts alone: the same chunks */
    for (int k = 0; k < 2; k++) {   /* k 0: one thread after the other; k 1: both at once */
        fp_probe_create(&p[k]);
        fp_hist_probe_create(&hp[k], 2, 1, 0, NULL, 0);
        fp_hist_probe_attach(hp[k], p[k]);
        fp_probe_step_begin(p[k], 0, 1000.0f);   /* weight_grad through the scaled path */
        call_t c[2] = {{p[k], 0, x[0]}, {p[k], 1, x[1]}};
        pthread_t th;
        int started = k == 1 && pthread_create(&th, NULL, call_main, &c[1]) == 0;
        call_main(&c[0]);
        if (started)
            pthread_join(th, NULL);
        else
            call_main(&c[1]);
        fp_probe_step_end(p[k]);
    }
    int same = 1;
    for (int l = 0; l < 2; l++)
        for (int r = FP_ROLE_WEIGHT; r <= FP_ROLE_UPDATE; r++) {
            const fp_hist_t *a = fp_hist_probe_get(hp[0], l, (fp_tensor_role)r);
            const fp_hist_t *b = fp_hist_probe_get(hp[1], l, (fp_tensor_role)r);
            same &= a && b && tu_hist_same(b, a, 0);   /* fixed chunks: sum_abs exact too */
        }
    fp_pool_set_threads(1);
    tap_ok(same && fp_hist_probe_status(hp[1]) == FP_OK, "hist probe: two layers' tensors at once from two threads "
           "= one after the other");
    for (int k = 0; k < 2; k++) {
        fp_hist_probe_free(hp[k]);
        fp_probe_free(p[k]);
        free(x[k]);
    }
}

static void test_copy(void)
{
    size_t n = ((size_t)1 << 21) + 7;   /* above the split size, odd */
    float *src = malloc(n * sizeof *src), *dst = malloc(n * sizeof *dst);
    for (size_t i = 0; i < n; i++)
        src[i] = (float)i * 0.5f;
    int ok = 1;
    for (int t = 1; t <= 2; t++) {
        fp_pool_set_threads(t);
        memset(dst, 0xFF, n * sizeof *dst);
        fp_probe_copy_params(dst, src, n);
        ok &= memcmp(dst, src, n * sizeof *dst) == 0;
        memset(dst, 0xFF, n * sizeof *dst);
        fp_probe_copy_params(dst, src, 1000);   /* small: one memcpy */
        ok &= memcmp(dst, src, 1000 * sizeof *dst) == 0 && tu_f2u(dst[1000]) == 0xFFFFFFFFu;
        fp_pool_set_threads(1);
    }
    tap_ok(ok, "fp_probe_copy_params = memcpy, one thread and two, large and small");
    free(src);
    free(dst);
}

/* ---- the pass riding on the optimizer: the same parameters, optimizer state and figures */

static fp_optim *optim_over(fp_model *m, const fp_optim_config *cfg)
{
    size_t nt = fp_model_tensor_count(m), np = 0;
    fp_optim_param *ps = calloc(nt, sizeof *ps);
    for (size_t i = 0; i < nt; i++) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        if (!t->is_param)
            continue;
        ps[np++] = (fp_optim_param){t->name, fp_model_tensor_data(m, t), fp_model_tensor_grad(m, t), t->numel, 1};
    }
    fp_optim *o = NULL;
    if (fp_optim_new(&o, cfg, ps, np))
        tap_diag("%s", fp_error_message());
    free(ps);
    return o;
}

static void test_stepping(fp_optim_kind kind, const char *what)
{
    fp_model_config mc = {"resnet18", 10, 32, 16, 5, 0};
    fp_model *m[2] = {NULL, NULL};
    fp_model_create(&m[0], &mc);
    fp_model_clone(&m[1], m[0]);
    fp_optim_config oc;
    fp_optim_config_default(&oc, kind);
    if (kind == FP_OPTIM_SGD) {
        oc.momentum = 0.9;
        oc.weight_decay = 5e-4;
        oc.nesterov = 1;
    }
    fp_optim *o[2] = {optim_over(m[0], &oc), optim_over(m[1], &oc)};
    int L = fp_model_layer_count(m[0]);
    size_t np = fp_model_num_params(m[0]);
    tap_ok(o[0] && o[1] && fp_probe_params_steppable(m[1], o[1]), "%s: the model's layers and optimizer are steppable",
           what);
    float *old = malloc(np * sizeof *old);
    pass_t r[2];
    for (int step = 0; step < 2; step++) {   /* the second with optimizer state */
        uint64_t s = 11 + (uint64_t)step;
        for (int k = 0; k < 2; k++) {
            float *g = fp_model_grads(m[k]);
            s = 11 + (uint64_t)step;
            for (size_t i = 0; i < np; i++) {
                float u = tu_uniform_pm1(&s);
                g[i] = i % 13 == 0 ? 0.0f : u * ldexpf(1.0f, (int)(i % 31) - 24);
            }
        }
        if (step == 0) {
            fp_optim_step(o[0], 0.05);
            fp_optim_step(o[1], 0.05);
            continue;
        }
        for (int k = 0; k < 2; k++) {   /* infinite weights: NaN after sgd's weight decay, unchanged by adam */
            fp_model_params(m[k])[3] = INFINITY;
            fp_model_params(m[k])[7] = -INFINITY;
        }
        for (int k = 0; k < 2; k++) {
            fp_probe *p = NULL;
            fp_probe_create(&p);
            fp_hist_probe_create(&r[k].hp, L, 1, 0, NULL, 0);
            fp_hist_probe_attach(r[k].hp, p);
            fp_probe_caller_roles(p, FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT) | FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD));
            fp_probe_step_begin(p, 1, 1.0f);
            if (k == 0) {   /* the copy, the step, the pass */
                memcpy(old, fp_model_params(m[0]), np * sizeof *old);
                fp_optim_step(o[0], 0.05);
                r[k].total = fp_probe_sample_params(p, m[0], old, fp_model_grads(m[0]), r[k].per);
            } else {        /* the pass riding on the step */
                fp_optim_step_begin(o[1], 0.05);
                r[k].total = fp_probe_sample_params_stepping(p, m[1], o[1], fp_model_grads(m[1]), r[k].per);
            }
            fp_probe_step_end(p);
            fp_probe_free(p);
        }
    }
    tap_ok(memcmp(fp_model_params(m[0]), fp_model_params(m[1]), np * sizeof(float)) == 0,
           "%s: riding on the pass, the optimizer gives the same parameters bit for bit", what);
    int same_state = fp_optim_state_count(o[0]) == fp_optim_state_count(o[1]);
    for (size_t i = 0; same_state && i < fp_optim_state_count(o[0]); i++) {
        fp_optim_state a, b;
        fp_optim_state_at(o[0], i, &a);
        fp_optim_state_at(o[1], i, &b);
        same_state &= a.n == b.n && memcmp(a.data, b.data, a.n * sizeof(float)) == 0;
    }
    tap_ok(same_state && fp_optim_get_step(o[0]) == fp_optim_get_step(o[1]), "%s: the same optimizer state", what);
    int same = same_double(r[0].total, r[1].total), cells = 0;
    for (int l = 0; l < L && l < MAXL; l++) {
        same &= same_double(r[0].per[l], r[1].per[l]);
        for (int role = FP_ROLE_WEIGHT; role <= FP_ROLE_UPDATE; role++) {
            const fp_hist_t *a = fp_hist_probe_get(r[0].hp, l, (fp_tensor_role)role);
            const fp_hist_t *b = fp_hist_probe_get(r[1].hp, l, (fp_tensor_role)role);
            if (!a || !b) {
                same &= !a && !b;
                continue;
            }
            cells++;
            same &= tu_hist_same(b, a, 0);
        }
    }
    tap_ok(same && cells > 0, "%s: the same %d histograms (sum_abs included) and lost updates (%g)", what, cells,
           r[0].total);
    for (int k = 0; k < 2; k++) {
        fp_hist_probe_free(r[k].hp);
        fp_optim_free(o[k]);
        fp_model_free(m[k]);
    }
    free(old);
}

int main(void)
{
    test_pass();
    test_concurrent_hook();
    test_copy();
    test_stepping(FP_OPTIM_SGD, "sgd, nesterov momentum, weight decay");
    test_stepping(FP_OPTIM_ADAMW, "adamw");
    test_stepping(FP_OPTIM_ADAM, "adam");
    fp_hist_thread_release();
    return tap_done();
}
