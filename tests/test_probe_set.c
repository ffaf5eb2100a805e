/* test_probe_set.c — the probe set and the model's hooks on tinynet: fan-out to every backend in
 * order, per-layer / per-phase CPU times and kernel counts, the tensor hook at sampling steps only,
 * every layer's tensors with 16-bit activations widened exactly, nothing outside a step; the kernels'
 * pool held exactly through the steps that sample tensors; in-place backends (tensors where they lie). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "probe/probe.h"
#include "tap.h"
#include "thread_pool.h"
#include "trainer/model.h"

#define NB 4
#define HW 32
#define NC 10
#define MAXL 16

typedef struct {
    int begins, ends, steps_begun, steps_ended;
    int layer_calls[MAXL][FP_PHASE_COUNT];
    int tensors[MAXL][FP_ROLE_COUNT];
    size_t tensor_n[MAXL][FP_ROLE_COUNT];
    unsigned mask;
    int order[8], norder;
    int id;
    int *log;
    int *nlog;
} rec_t;

static unsigned r_step_begin(void *self, int64_t step, float ls)
{
    (void)step;
    (void)ls;
    rec_t *r = self;
    r->steps_begun++;
    r->log[(*r->nlog)++] = r->id;
    return r->mask;
}
static void r_step_end(void *self, int64_t step)
{
    (void)step;
    ((rec_t *)self)->steps_ended++;
}
static void r_begin(void *self, int layer, fp_phase ph)
{
    rec_t *r = self;
    r->begins++;
    if (layer < MAXL)
        r->layer_calls[layer][ph]++;
}
static void r_end(void *self, int layer, fp_phase ph)
{
    (void)layer;
    (void)ph;
    ((rec_t *)self)->ends++;
}
static void r_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float ls)
{
    (void)x;
    (void)ls;
    rec_t *r = self;
    if (layer < MAXL) {
        r->tensors[layer][role]++;
        r->tensor_n[layer][role] = n;
    }
}
static const fp_probe_ops rec_ops = {"rec", r_step_begin, r_step_end, r_begin, r_end, r_tensor};

/* checks activations: a copy of each layer's activation as handed over */
typedef struct {
    fp_model *m;
    int ok_widen, seen;
} act_t;
static unsigned a_step_begin(void *self, int64_t step, float ls)
{
    (void)self;
    (void)ls;
    return step % 2 == 0 ? FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION) : 0;
}
static void a_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float ls)
{
    (void)ls;
    act_t *a = self;
    if (role != FP_ROLE_ACTIVATION)
        return;
    a->seen++;
    fp_dtype dt = fp_model_layer_dtype(a->m, layer);
    if (dt != FP_DT_F16)   /* only conv / relu / bn ... outputs in fp16 are checked */
        return;
    /* every value must be an fp16 value exactly: rounding it to fp16 changes nothing */
    float *c = malloc(n * sizeof(float));
    memcpy(c, x, n * sizeof(float));
    fp_round_to_dtype(c, n, FP_DT_F16);
    int same = memcmp(c, x, n * sizeof(float)) == 0;
    /* and equal to the layer's output right now */
    float *o = malloc(n * sizeof(float));
    int cnt = fp_model_layer_output(a->m, layer, o, n, NULL);
    same = same && cnt == (int)n && memcmp(o, x, n * sizeof(float)) == 0;
    /* at least one value is not exactly representable by a coarser grid: it really is widened fp16,
     * not zeros */
    int nonzero = 0;
    for (size_t i = 0; i < n; i++)
        nonzero |= x[i] != 0;
    a->ok_widen += same && nonzero;
    free(c);
    free(o);
}
static const fp_probe_ops act_ops = {"act", a_step_begin, NULL, NULL, NULL, a_tensor};

/* keeps, per layer, where the activation was handed over and a copy of it (fp_model_output_kept) */
typedef struct {
    const float *at[MAXL];
    float *copy[MAXL];
    size_t n[MAXL];
} handed_t;
static unsigned h_step_begin(void *self, int64_t step, float ls)
{
    (void)self;
    (void)step;
    (void)ls;
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}
static void h_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float ls)
{
    (void)ls;
    handed_t *h = self;
    if (role != FP_ROLE_ACTIVATION || layer < 0 || layer >= MAXL)
        return;
    h->at[layer] = x;
    h->n[layer] = n;
    h->copy[layer] = malloc(n * sizeof(float));
    memcpy(h->copy[layer], x, n * sizeof(float));
}
static const fp_probe_ops handed_ops = {"handed", h_step_begin, NULL, NULL, NULL, h_tensor};

static void batch(float *x, int *labels)
{
    uint64_t s = 99;
    for (size_t i = 0; i < (size_t)NB * HW * HW * 3; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
    }
    for (int i = 0; i < NB; i++)
        labels[i] = i % NC;
}

/* A step some backend wants tensors at holds the kernels' pool until its step_end (probe.c); a step
 * that samples nothing does not; a step begun again, or a set freed mid-step, lets its hold go. */
static unsigned want_mask;
static unsigned w_step_begin(void *self, int64_t step, float ls)
{
    (void)self;
    (void)step;
    (void)ls;
    return want_mask;
}
static void w_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float ls)
{
    (void)self, (void)layer, (void)role, (void)x, (void)n, (void)ls;
}
static const fp_probe_ops want_ops = {"want", w_step_begin, NULL, NULL, NULL, w_tensor};

static void test_pool_hold(void)
{
    fp_probe *p = NULL;
    fp_probe_create(&p);
    fp_probe_add(p, &want_ops, NULL);
    int h0 = fp_pool_held();
    want_mask = 0;
    fp_probe_step_begin(p, 1, 1.0f);
    int none = fp_pool_held() == h0;
    fp_probe_step_end(p);
    want_mask = FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
    fp_probe_step_begin(p, 2, 1.0f);
    int during = fp_pool_held() == h0 + 1;
    fp_probe_step_end(p);
    int after = fp_pool_held() == h0;
    tap_ok(none && during && after, "the pool is held through a sampling step only (none %d, during %d, after %d)",
           none, during, after);
    fp_probe_step_begin(p, 3, 1.0f);
    fp_probe_step_begin(p, 4, 1.0f);   /* no step_end in between */
    int again = fp_pool_held() == h0 + 1;
    fp_probe_free(p);
    tap_ok(again && fp_pool_held() == h0, "a step begun again holds once; a set freed mid-step lets go");
}

/* An in-place backend (fp_probe_add_in_place) gets tensors where the model keeps them, never through its other
 * hooks; the masks tell the model which roles still go as copies. */
typedef struct {
    int calls, host, dt_ok, n_ok, copies;
    const fp_model *m;
} inplace_t;
static void ip_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float ls)
{
    (void)layer, (void)role, (void)x, (void)n, (void)ls;
    ((inplace_t *)self)->copies++;   /* must never happen */
}
static void ip_in_place(void *self, int layer, fp_tensor_role role, const void *x, fp_dtype dt, size_t n, float ls,
                        const fp_probe_mem *mem)
{
    (void)ls;
    inplace_t *t = self;
    if (role != FP_ROLE_ACTIVATION || !x)
        return;
    t->calls++;
    t->host += mem && mem->host == 1 && mem->ops && mem->instance;
    t->dt_ok += dt == fp_model_layer_dtype(t->m, layer);
    const fp_layer_info *li = fp_model_layer(t->m, layer);
    t->n_ok += li && n == (size_t)li->out.h * li->out.w * li->out.c * NB;
}
static const fp_probe_ops ip_ops = {"in_place", w_step_begin, NULL, NULL, NULL, ip_tensor};

static void test_in_place(fp_model *h, const float *x, const int *labels)
{
    int L = fp_model_layer_count(h);
    fp_probe *p = NULL;
    fp_probe_create(&p);
    inplace_t t = {0, 0, 0, 0, 0, h};
    tap_ok(fp_probe_add_in_place(p, &ip_ops, NULL, &t) == FP_EINVAL, "an in-place backend needs its hook");
    fp_probe_add_in_place(p, &ip_ops, ip_in_place, &t);
    want_mask = FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
    fp_probe_step_begin(p, 0, 1.0f);
    tap_ok(fp_probe_wants_in_place(p) == want_mask && fp_probe_wants_copies(p) == 0 && fp_probe_wants_values(p) == 0 &&
               fp_probe_wants(p) == want_mask, "in place only: wanted in place, no copies, no values");
    float v[4] = {1, 2, 3, 4};
    fp_probe_tensor(p, 0, FP_ROLE_ACTIVATION, v, 4);
    tap_ok(fp_probe_tensor_dt(p, 0, FP_ROLE_ACTIVATION, v, FP_DT_F32, 4) == FP_OK && t.copies == 0 && t.calls == 0,
           "fp_probe_tensor / _dt do not reach an in-place backend");
    fp_probe_step_end(p);
    tap_ok(fp_probe_wants_in_place(p) == 0 && fp_probe_wants_copies(p) == 0, "no wants outside a step");
    act_t a = {h, 0, 0};
    fp_probe_add(p, &act_ops, &a);
    fp_model_set_probe(h, p);
    float loss;
    fp_probe_step_begin(p, 0, 1.0f);
    int masks = fp_probe_wants_in_place(p) == want_mask && fp_probe_wants_copies(p) == want_mask;
    fp_model_train_step(h, &loss, NULL, NULL, x, labels, NB);
    fp_probe_step_end(p);
    tap_ok(masks, "with a copying backend beside it: wanted both ways");
    tap_ok(t.calls == L && t.host == L && t.dt_ok == L && t.n_ok == L && t.copies == 0,
           "a host model hands every activation in place (host memory, as stored, batch counted): %d, %d, %d, %d of "
           "%d; through the other hooks %d", t.calls, t.host, t.dt_ok, t.n_ok, L, t.copies);
    tap_ok(a.seen == L && a.ok_widen == L, "the copying backend still gets every activation widened exactly (%d, %d)",
           a.seen, a.ok_widen);
    fp_model_set_probe(h, NULL);
    fp_probe_free(p);
}

int main(void)
{
    test_pool_hold();
    static float x[NB * HW * HW * 3];
    int labels[NB];
    batch(x, labels);
    fp_model_config cfg = {"tinynet", NC, HW, 16, 1, 0};
    fp_model *m = NULL;
    if (fp_model_create(&m, &cfg) != FP_OK) {
        tap_diag("%s", fp_error_message());
        return 1;
    }
    int L = fp_model_layer_count(m);
    tap_ok(L == 9 && L <= MAXL, "tinynet has 9 layers (%d)", L);

    /* ---- fan-out and order ---- */
    fp_probe *p = NULL;
    fp_probe_create(&p);
    int log[64], nlog = 0;
    rec_t r1, r2;
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    r1.id = 1;
    r2.id = 2;
    r1.log = r2.log = log;
    r1.nlog = r2.nlog = &nlog;
    r1.mask = FP_PROBE_ALL_ROLES;
    r2.mask = 0;
    fp_cpu_timer *t = NULL;
    tap_ok(fp_cpu_timer_create(&t, L) == FP_OK, "cpu timer created");
    tap_ok(fp_probe_add(p, &rec_ops, &r1) == FP_OK && fp_probe_add(p, &rec_ops, &r2) == FP_OK &&
               fp_cpu_timer_attach(t, p) == FP_OK,
           "three backends added");
    tap_is_int(fp_probe_backend_count(p), 3, "backend count");
    tap_ok(fp_probe_add(p, NULL, NULL) == FP_EINVAL, "NULL ops refused");
    fp_model_set_probe(m, p);

    /* outside a step: ignored */
    float loss;
    fp_model_train_step(m, &loss, NULL, NULL, x, labels, NB);
    tap_ok(r1.begins == 0 && r1.tensors[0][0] == 0, "layer and tensor calls outside a step are ignored");

    fp_probe_step_begin(p, 0, 1.0f);
    tap_ok(fp_model_train_step(m, &loss, NULL, NULL, x, labels, NB) == FP_OK, "train step with probes");
    fp_probe_step_end(p);
    tap_ok(nlog == 2 && log[0] == 1 && log[1] == 2, "step_begin reaches backends in order");
    tap_ok(r1.steps_ended == 1 && r2.steps_ended == 1, "step_end fans out");
    tap_ok(r1.begins == r1.ends && r1.begins == r2.begins && r1.begins > 0, "layer begin/end balanced, fanned out (%d)",
           r1.begins);
    /* phases: forward once per layer; conv/linear backward_weights; backward_data for all but conv1 */
    int ok = 1;
    for (int l = 0; l < L; l++) {
        fp_layer_type ty = fp_model_layer(m, l)->type;
        int mm = ty == FP_LAYER_CONV || ty == FP_LAYER_LINEAR;
        ok &= r1.layer_calls[l][FP_PHASE_FORWARD] == 1;
        ok &= r1.layer_calls[l][FP_PHASE_BACKWARD_WEIGHTS] == mm;
        ok &= r1.layer_calls[l][FP_PHASE_BACKWARD_DATA] == (l == 0 ? 0 : 1);
    }
    tap_ok(ok, "each layer: one forward, backward_weights for conv/linear, backward_data except conv1");
    /* tensors: every layer's activation, activation_grad; weight/grad for layers with params */
    ok = 1;
    for (int l = 0; l < L; l++) {
        size_t pc;
        fp_model_layer_params(m, l, NULL, &pc);
        ok &= r1.tensors[l][FP_ROLE_ACTIVATION] == 1 && r1.tensors[l][FP_ROLE_ACTIVATION_GRAD] == 1;
        ok &= r1.tensors[l][FP_ROLE_WEIGHT] == (pc > 0) && r1.tensors[l][FP_ROLE_WEIGHT_GRAD] == (pc > 0);
        if (pc)
            ok &= r1.tensor_n[l][FP_ROLE_WEIGHT] == pc;
        const fp_layer_info *li = fp_model_layer(m, l);
        ok &= r1.tensor_n[l][FP_ROLE_ACTIVATION] == (size_t)li->out.h * li->out.w * li->out.c * NB;
    }
    tap_ok(ok, "the tensor hook saw every layer's activation, activation grad, weight and weight grad");
    int r2_any = 0;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < FP_ROLE_COUNT; k++)
            r2_any |= r2.tensors[l][k];
    tap_ok(!r2_any, "a backend asking for no roles gets no tensors");

    /* cpu timer table */
    const fp_layer_time_t *rows;
    size_t nr = fp_cpu_timer_rows(t, &rows);
    int expect_rows = 0;
    for (int l = 0; l < L; l++)
        for (int ph = 0; ph < FP_PHASE_COUNT; ph++)
            expect_rows += r1.layer_calls[l][ph] > 0;
    tap_is_int((long long)nr, expect_rows, "one timer row per (layer, phase) that ran");
    ok = 1;
    for (size_t i = 0; i < nr; i++)
        ok &= rows[i].time_ns > 0 && rows[i].kernels == r1.layer_calls[rows[i].layer][rows[i].phase];
    tap_ok(ok, "every row: time > 0 and kernels = layer calls");
    tap_ok(fp_cpu_timer_step_ns(t) >= fp_cpu_timer_phase_ns(t, -1) && fp_cpu_timer_phase_ns(t, -1) > 0,
           "step time covers the layer times");

    /* two calls of one layer in one step accumulate */
    fp_probe_step_begin(p, 1, 1.0f);
    fp_model_train_step(m, &loss, NULL, NULL, x, labels, NB);
    fp_model_train_step(m, &loss, NULL, NULL, x, labels, NB);
    fp_probe_step_end(p);
    nr = fp_cpu_timer_rows(t, &rows);
    ok = nr > 0;
    for (size_t i = 0; i < nr; i++)
        ok &= rows[i].kernels == 2;
    tap_ok(ok, "two passes in one step: kernel count 2 on every row");

    /* non-sampling step: no tensors */
    memset(r1.tensors, 0, sizeof r1.tensors);
    r1.mask = 0;
    fp_probe_step_begin(p, 2, 1.0f);
    tap_is_uint(fp_probe_wants(p), 0, "no roles wanted at a non-sampling step");
    fp_model_train_step(m, &loss, NULL, NULL, x, labels, NB);
    fp_probe_step_end(p);
    int any = 0;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < FP_ROLE_COUNT; k++)
            any |= r1.tensors[l][k];
    tap_ok(!any, "no tensors at a non-sampling step");

    /* NULL probe: the model runs as before */
    fp_model_set_probe(m, NULL);
    tap_ok(fp_model_train_step(m, &loss, NULL, NULL, x, labels, NB) == FP_OK, "NULL probe");
    fp_probe_step_begin(NULL, 0, 1);
    fp_probe_layer_begin(NULL, 0, FP_PHASE_FORWARD);
    fp_probe_tensor(NULL, 0, FP_ROLE_ACTIVATION, x, 1);
    fp_probe_step_end(NULL);
    tap_ok(fp_probe_wants(NULL) == 0, "NULL probe calls are no-ops");

    /* ---- outputs kept in place after a TRAIN forward (fp_model_output_kept) ---- */
    {
        handed_t hd;
        memset(&hd, 0, sizeof hd);
        fp_probe *pk = NULL;
        fp_probe_create(&pk);
        fp_probe_add(pk, &handed_ops, &hd);
        fp_model_set_probe(m, pk);
        fp_probe_step_begin(pk, 0, 1.0f);
        fp_model_forward_loss(m, &loss, NULL, NULL, x, labels, NB, 1.0f);
        int kept = 0, kept_same = 0, over = 0;
        for (int l = 0; l < L; l++) {
            int same = hd.at[l] && memcmp(hd.at[l], hd.copy[l], hd.n[l] * sizeof(float)) == 0;
            if (fp_model_output_kept(m, l)) {
                kept++;
                kept_same += same;
            } else {
                over += !same;
            }
        }
        tap_ok(kept > 0 && kept < L && kept_same == kept,
               "kept outputs are where the forward handed them over, unchanged after it (%d of %d layers)", kept, L);
        tap_ok(over > 0, "and an output not kept was written over (%d layers)", over);
        fp_model_backward_loss(m);
        fp_probe_step_end(pk);
        tap_ok(!fp_model_output_kept(m, -1) && !fp_model_output_kept(m, L) && !fp_model_output_kept(NULL, 0),
               "fp_model_output_kept: 0 outside the layers");
        fp_model_set_probe(m, NULL);
        fp_probe_free(pk);
        for (int l = 0; l < L; l++)
            free(hd.copy[l]);
    }

    /* ---- fp16: activations widened exactly ---- */
    fp_model *h = NULL;
    fp_model_create(&h, &cfg);
    fp_model_set_policy(h, fp_policy_find("fp16"));
    fp_probe *ph = NULL;
    fp_probe_create(&ph);
    act_t a = {h, 0, 0};
    fp_probe_add(ph, &act_ops, &a);
    fp_model_set_probe(h, ph);
    fp_probe_step_begin(ph, 0, 65536.0f);
    tap_is_double(fp_probe_loss_scale(ph), 65536.0, 0, 0, "loss scale in effect");
    fp_model_train_step_scaled(h, &loss, NULL, NULL, x, labels, NB, 65536.0f);
    fp_probe_step_end(ph);
    int n16 = 0;
    for (int l = 0; l < L; l++)
        n16 += fp_model_layer_dtype(h, l) == FP_DT_F16;
    tap_is_int(a.seen, L, "fp16: every layer's activation seen");
    /* handed over right after the layer ran: an in-place relu has not overwritten it yet */
    tap_ok(n16 == L && a.ok_widen == n16, "fp16: activations are exact fp16 values equal to the stored outputs (%d of %d)",
           a.ok_widen, n16);
    a.seen = 0;
    fp_probe_step_begin(ph, 1, 1.0f);
    fp_model_train_step(h, &loss, NULL, NULL, x, labels, NB);
    fp_probe_step_end(ph);
    tap_is_int(a.seen, 0, "fp16: none at a non-sampling step");
    tap_ok(fp_probe_every(0, 10) && fp_probe_every(20, 10) && !fp_probe_every(5, 10) && !fp_probe_every(0, 0),
           "fp_probe_every");
    test_in_place(h, x, labels);

    fp_probe_free(ph);
    fp_model_free(h);
    fp_cpu_timer_free(t);
    fp_probe_free(p);
    fp_model_free(m);
    return tap_done();
}
