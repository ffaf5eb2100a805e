/* test_optim.c — SGD / Adam / AdamW against PyTorch 1.13 (tests/fixtures/optim/optim.safetensors,
 * written by tests/fixtures/make_optim_reference.py): parameters after each of 5 steps, per-tensor
 * weight decay, checkpoint export/import resuming bit-exactly, bad hyperparameters refused, and the
 * step in parts writing each element's update (fp_optim_step_part_delta) equal to the whole step. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "safetensors.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/optim.h"

#ifndef FIXTURE_DIR
#define FIXTURE_DIR "tests/fixtures"
#endif

/* Tolerance, per element: |ours - torch| <= ABS_TOL * min(1, scale) + REL_TOL * |torch|, where
 * scale is the tensor's largest magnitude (initial or expected at this step). Both sides compute
 * in fp32 with the same operation order; on a CPU with FMA our kernels fuse exactly the ops torch's
 * AVX2 kernels fuse, so every value is bit-identical (checked separately below). The portable path
 * (FP_OPTIM_FMA=0, also run here) rounds those ops twice: <= 1 ulp (fp32 epsilon 1.2e-7) per op.
 * REL_TOL = 1e-5 is ~80 ulps, room for those differences to compound over 5 steps, while a
 * wrong formula (a missed bias correction, weight decay on the wrong tensor, a momentum buffer
 * not seeded with the first gradient) is off by far more. ABS_TOL covers values
 * near zero, where results come from cancellation of larger terms (an Adam step of ~lr on a
 * tensor of ~1e-5 leaves values ~1e-6 carrying the rounding of ~1e-3 intermediates); it is scaled
 * down with the tensor's magnitude, since for a tiny tensor 1e-6 would accept anything. */
#define ABS_TOL 1e-6
#define REL_TOL 1e-5

#define MAXP 8
#define MAXC 8

typedef struct {
    char name[32];
    size_t n;
    int wd;
    float *init, *param, *grad;
    double init_max;
} ptensor;

typedef struct {
    char name[48];
    fp_optim_config cfg;
    double lr;
} pconfig;

static fp_st *fx;
static ptensor pt[MAXP];
static int np;
static pconfig cf[MAXC];
static int nc;
static int nsteps;

static float *read_tensor(const char *name, size_t n)
{
    float *d = malloc(n * sizeof *d);
    int64_t shape[1] = { (int64_t)n };
    if (!d || fp_st_read_f32(fx, name, d, shape, 1) != FP_OK) {
        tap_diag("fixture: %s", fp_error_message());
        exit(1);
    }
    return d;
}

static void parse_params(void)
{
    const char *s = fp_st_metadata(fx, "params");
    if (!s) {
        tap_diag("fixture has no 'params' metadata");
        exit(1);
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && np < MAXP; tok = strtok_r(NULL, ",", &save)) {
        ptensor *p = &pt[np];
        unsigned long n;
        if (sscanf(tok, "%31[^:]:%lu:%d", p->name, &n, &p->wd) != 3) {
            tap_diag("bad params entry '%s'", tok);
            exit(1);
        }
        p->n = n;
        char key[64];
        snprintf(key, sizeof key, "init/%.31s", p->name);
        p->init = read_tensor(key, p->n);
        p->param = malloc(p->n * sizeof(float));
        p->grad = malloc(p->n * sizeof(float));
        double mx = 0;
        for (size_t i = 0; i < p->n; i++)
            mx = fmax(mx, fabs(p->init[i]));
        p->init_max = mx;
        np++;
    }
    const char *st = fp_st_metadata(fx, "steps");
    nsteps = st ? atoi(st) : 0;
}

/* "optimizer=sgd lr=0.1 momentum=0.9 weight_decay=0.0001 nesterov=0" */
static void parse_config(const char *name, const char *text, pconfig *c)
{
    snprintf(c->name, sizeof c->name, "%s", name);
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", text);
    fp_optim_kind kind = FP_OPTIM_SGD;
    const char *optname = strstr(text, "optimizer=");
    char kname[16] = "";
    if (optname)
        sscanf(optname + 10, "%15s", kname);
    if (fp_optim_parse(kname, &kind) != FP_OK) {
        tap_diag("config %s: %s", name, fp_error_message());
        exit(1);
    }
    fp_optim_config_default(&c->cfg, kind);
    for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            continue;
        *eq = '\0';
        double v = strtod(eq + 1, NULL);
        if (!strcmp(tok, "lr")) c->lr = v;
        else if (!strcmp(tok, "momentum")) c->cfg.momentum = v;
        else if (!strcmp(tok, "weight_decay")) c->cfg.weight_decay = v;
        else if (!strcmp(tok, "nesterov")) c->cfg.nesterov = (int)v;
        else if (!strcmp(tok, "beta1")) c->cfg.beta1 = v;
        else if (!strcmp(tok, "beta2")) c->cfg.beta2 = v;
        else if (!strcmp(tok, "eps")) c->cfg.eps = v;
    }
}

static void parse_configs(void)
{
    size_t m = fp_st_metadata_count(fx);
    for (size_t i = 0; i < m && nc < MAXC; i++) {
        const char *k, *v;
        fp_st_metadata_at(fx, i, &k, &v);
        if (strncmp(k, "config.", 7) == 0)
            parse_config(k + 7, v, &cf[nc++]);
    }
}

static fp_optim *make_optim(const pconfig *c)
{
    fp_optim_param ps[MAXP];
    for (int i = 0; i < np; i++) {
        memcpy(pt[i].param, pt[i].init, pt[i].n * sizeof(float));
        ps[i] = (fp_optim_param){ pt[i].name, pt[i].param, pt[i].grad, pt[i].n, pt[i].wd };
    }
    fp_optim *o = NULL;
    if (fp_optim_new(&o, &c->cfg, ps, (size_t)np) != FP_OK) {
        tap_diag("fp_optim_new(%s): %s", c->name, fp_error_message());
        exit(1);
    }
    return o;
}

static void load_grads(int step)
{
    for (int i = 0; i < np; i++) {
        char key[64];
        snprintf(key, sizeof key, "grad/%d/%.31s", step, pt[i].name);
        int64_t shape[1] = { (int64_t)pt[i].n };
        if (fp_st_read_f32(fx, key, pt[i].grad, shape, 1) != FP_OK) {
            tap_diag("%s", fp_error_message());
            exit(1);
        }
    }
}

/* Compares tensor i with <config>/<step>/<name>; one TAP line. */
static size_t n_inexact;   /* elements not bit-identical in the current pass */

static void check_tensor(const pconfig *c, int step, int i, const char *what)
{
    char key[96];
    snprintf(key, sizeof key, "%.47s/%d/%.31s", c->name, step, pt[i].name);
    float *want = read_tensor(key, pt[i].n);
    double scale = pt[i].init_max;
    for (size_t j = 0; j < pt[i].n; j++)
        scale = fmax(scale, fabs(want[j]));
    const double abs_tol = ABS_TOL * fmin(1.0, scale);
    size_t bad = 0, worst = 0, exact = 0;
    double worst_ratio = 0;
    for (size_t j = 0; j < pt[i].n; j++) {
        double got = pt[i].param[j], w = want[j];
        double tol = abs_tol + REL_TOL * fabs(w);
        double err = fabs(got - w);
        if (!(err <= tol))
            bad++;
        if (got == w)
            exact++;
        if (err / tol > worst_ratio || isnan(err)) {
            worst_ratio = isnan(err) ? INFINITY : err / tol;
            worst = j;
        }
    }
    n_inexact += pt[i].n - exact;
    tap_ok(bad == 0, "%s %s step %d %s[%zu]: %zu/%zu bit-exact, worst err/tol %.3g",
           what, c->name, step, pt[i].name, pt[i].n, exact, pt[i].n, worst_ratio);
    if (bad)
        tap_diag("  %zu elements off; worst [%zu] got %.9g want %.9g", bad, worst,
                 (double)pt[i].param[worst], (double)want[worst]);
    free(want);
}

static void test_against_torch(const char *what)
{
    n_inexact = 0;
    for (int c = 0; c < nc; c++) {
        fp_optim *o = make_optim(&cf[c]);
        for (int k = 1; k <= nsteps; k++) {
            load_grads(k);
            int rc = fp_optim_step(o, cf[c].lr);
            if (rc != FP_OK)
                tap_diag("step: %s", fp_error_message());
            for (int i = 0; i < np; i++)
                check_tensor(&cf[c], k, i, what);
        }
        tap_is_int(fp_optim_get_step(o), nsteps, "%s: step counter", cf[c].name);
        fp_optim_free(o);
    }
}

/* Runs 3 steps, exports state into plain arrays, rebuilds a fresh optimizer, imports, runs the
 * remaining steps: the parameters must equal a continuous run bit for bit (and torch's). */
static void test_resume(const pconfig *c)
{
    const int split = 3;
    float *cont[MAXP];
    fp_optim *o = make_optim(c);
    for (int k = 1; k <= nsteps; k++) {
        load_grads(k);
        fp_optim_step(o, c->lr);
    }
    for (int i = 0; i < np; i++) {
        cont[i] = malloc(pt[i].n * sizeof(float));
        memcpy(cont[i], pt[i].param, pt[i].n * sizeof(float));
    }
    fp_optim_free(o);

    o = make_optim(c);
    for (int k = 1; k <= split; k++) {
        load_grads(k);
        fp_optim_step(o, c->lr);
    }
    size_t ns = fp_optim_state_count(o);
    size_t want_ns = c->cfg.kind == FP_OPTIM_SGD ? (c->cfg.momentum != 0 ? (size_t)np : 0) : 2 * (size_t)np;
    tap_is_uint(ns, want_ns, "%s: %zu state arrays", c->name, want_ns);
    char (*names)[64] = calloc(ns + 1, 64);
    float **saved = calloc(ns + 1, sizeof *saved);
    size_t *sizes = calloc(ns + 1, sizeof *sizes);
    for (size_t s = 0; s < ns; s++) {
        fp_optim_state e;
        fp_optim_state_at(o, s, &e);
        snprintf(names[s], 64, "%s", e.name);
        sizes[s] = e.n;
        saved[s] = malloc((e.n ? e.n : 1) * sizeof(float));
        memcpy(saved[s], e.data, e.n * sizeof(float));
    }
    if (ns > 0) {
        char want_name[64];
        snprintf(want_name, sizeof want_name, "%s.%s", pt[0].name,
                 c->cfg.kind == FP_OPTIM_SGD ? "momentum_buffer" : "exp_avg");
        tap_is_str(names[0], want_name, "%s: state entry 0 is named as PyTorch's state_dict", c->name);
    }
    int64_t saved_step = fp_optim_get_step(o);
    float *saved_params[MAXP];
    for (int i = 0; i < np; i++) {
        saved_params[i] = malloc(pt[i].n * sizeof(float));
        memcpy(saved_params[i], pt[i].param, pt[i].n * sizeof(float));
    }
    fp_optim_free(o);

    o = make_optim(c);    /* fresh: zero state, step 0 */
    for (int i = 0; i < np; i++)
        memcpy(pt[i].param, saved_params[i], pt[i].n * sizeof(float));
    int rc = fp_optim_set_step(o, saved_step);
    for (size_t s = 0; s < ns && rc == FP_OK; s++)
        rc = fp_optim_state_load(o, names[s], saved[s], sizes[s]);
    tap_ok(rc == FP_OK, "%s: state imported (%s)", c->name, rc ? fp_error_message() : "ok");
    for (int k = split + 1; k <= nsteps; k++) {
        load_grads(k);
        fp_optim_step(o, c->lr);
    }
    int same = 1;
    for (int i = 0; i < np; i++)
        same &= memcmp(cont[i], pt[i].param, pt[i].n * sizeof(float)) == 0;
    tap_ok(same, "%s: resumed after step %d equals the continuous run bit for bit", c->name, split);
    for (int i = 0; i < np; i++)
        check_tensor(c, nsteps, i, "resumed");

    if (ns > 0) {
        rc = fp_optim_state_load(o, names[0], saved[0], sizes[0] + 1);
        tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), names[0]),
               "%s: wrong-size state refused: %s", c->name, fp_error_message());
    }
    rc = fp_optim_state_load(o, "nope.exp_avg", saved[0], 1);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "nope.exp_avg"),
           "%s: unknown state name refused: %s", c->name, fp_error_message());
    fp_optim_free(o);
    for (size_t s = 0; s < ns; s++)
        free(saved[s]);
    for (int i = 0; i < np; i++) {
        free(cont[i]);
        free(saved_params[i]);
    }
    free(saved);
    free(sizes);
    free(names);
}

static void expect_einval(const fp_optim_config *cfg, const char *what, const char *needle)
{
    float p[3] = { 1, 2, 3 }, g[3] = { 1, 1, 1 };
    fp_optim_param ps = { "w", p, g, 3, 1 };
    fp_optim *o = NULL;
    fp_error_clear();
    int rc = fp_optim_new(&o, cfg, &ps, 1);
    tap_ok(rc == FP_EINVAL && o == NULL && strstr(fp_error_message(), needle),
           "refused: %s -> \"%s\"", what, fp_error_message());
    fp_optim_free(o);
}

static void test_bad_input(void)
{
    fp_optim_config c;

    fp_optim_config_default(&c, FP_OPTIM_SGD);
    c.momentum = -0.1;
    expect_einval(&c, "sgd momentum < 0", "momentum");
    c.momentum = NAN;
    expect_einval(&c, "sgd momentum NaN", "momentum");
    c.momentum = 0;
    c.nesterov = 1;
    expect_einval(&c, "sgd nesterov without momentum", "nesterov");
    c.nesterov = 0;
    c.weight_decay = -1e-4;
    expect_einval(&c, "sgd weight decay < 0", "weight_decay");
    c.weight_decay = NAN;
    expect_einval(&c, "sgd weight decay NaN", "weight_decay");

    fp_optim_config_default(&c, FP_OPTIM_ADAM);
    c.beta1 = 1.0;
    expect_einval(&c, "adam beta1 = 1", "beta parameter at index 0");
    c.beta1 = -0.1;
    expect_einval(&c, "adam beta1 < 0", "beta parameter at index 0");
    c.beta1 = 0.9;
    c.beta2 = NAN;
    expect_einval(&c, "adam beta2 NaN", "beta parameter at index 1");
    c.beta2 = 1.5;
    expect_einval(&c, "adam beta2 > 1", "beta parameter at index 1");
    c.beta2 = 0.999;
    c.eps = NAN;
    expect_einval(&c, "adam eps NaN", "epsilon");
    c.eps = -1e-8;
    expect_einval(&c, "adam eps < 0", "epsilon");
    fp_optim_config_default(&c, FP_OPTIM_ADAMW);
    c.weight_decay = NAN;
    expect_einval(&c, "adamw weight decay NaN", "weight_decay");
    c.weight_decay = 0.01;
    c.kind = (fp_optim_kind)7;
    expect_einval(&c, "unknown kind", "sgd, adam, adamw");

    /* lr checked at each step; a refused step changes nothing. */
    fp_optim_config_default(&c, FP_OPTIM_ADAM);
    float p[3] = { 1, 2, 3 }, g[3] = { 1, 1, 1 };
    fp_optim_param ps = { "w", p, g, 3, 1 };
    fp_optim *o = NULL;
    fp_optim_new(&o, &c, &ps, 1);
    int rc = fp_optim_step(o, -0.1);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "learning rate"), "refused: lr < 0 -> \"%s\"",
           fp_error_message());
    rc = fp_optim_step(o, NAN);
    tap_ok(rc == FP_EINVAL, "refused: lr NaN -> \"%s\"", fp_error_message());
    rc = fp_optim_step(o, INFINITY);
    tap_ok(rc == FP_EINVAL, "refused: lr inf");
    tap_ok(p[0] == 1 && p[1] == 2 && p[2] == 3 && fp_optim_get_step(o) == 0,
           "refused steps left params and step counter alone");
    tap_ok(fp_optim_step(o, 0.0) == FP_OK && p[0] == 1, "lr 0 is a valid no-op update");
    tap_ok(fp_optim_set_step(o, -1) == FP_EINVAL, "negative step counter refused");
    fp_optim_free(o);

    /* parameter lists */
    fp_optim_config_default(&c, FP_OPTIM_SGD);
    o = NULL;
    tap_ok(fp_optim_new(&o, &c, &ps, 0) == FP_EINVAL && strstr(fp_error_message(), "empty"),
           "empty parameter list refused: %s", fp_error_message());
    fp_optim_param two[2] = { { "a", p, g, 3, 1 }, { "b", p, g, 3, 1 } };
    tap_ok(fp_optim_new(&o, &c, two, 2) == FP_EINVAL && strstr(fp_error_message(), "same parameter"),
           "same parameter twice refused: %s", fp_error_message());
    float q[3];
    fp_optim_param dup[2] = { { "a", p, g, 3, 1 }, { "a", q, g, 3, 1 } };
    tap_ok(fp_optim_new(&o, &c, dup, 2) == FP_EINVAL && strstr(fp_error_message(), "'a'"),
           "duplicate name refused: %s", fp_error_message());
    fp_optim_param nul = { "w", p, NULL, 3, 1 };
    tap_ok(fp_optim_new(&o, &c, &nul, 1) == FP_EINVAL && strstr(fp_error_message(), "NULL grad"),
           "NULL grad refused: %s", fp_error_message());

    /* names */
    fp_optim_kind k;
    tap_ok(fp_optim_parse("adamw", &k) == FP_OK && k == FP_OPTIM_ADAMW, "parse adamw");
    tap_ok(fp_optim_parse("sgd", &k) == FP_OK && k == FP_OPTIM_SGD, "parse sgd");
    rc = fp_optim_parse("lamb", &k);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "'lamb'") &&
           strstr(fp_error_message(), "sgd, adam, adamw"), "unknown optimizer lists choices: %s",
           fp_error_message());
    tap_is_str(fp_optim_name(FP_OPTIM_ADAM), "adam", "name of adam");
}

/* An unnamed tensor's state is named by its index; a tensor with n == 0 is fine. */
static void test_misc(void)
{
    fp_optim_config c;
    fp_optim_config_default(&c, FP_OPTIM_SGD);
    c.momentum = 0.9;
    float p[2] = { 1, 1 }, g[2] = { 0.5f, 0.5f }, p2[2] = { 1, 1 }, g2[2] = { 1, 1 };
    fp_optim_param ps[2] = { { NULL, NULL, NULL, 0, 1 }, { NULL, p, g, 2, 0 } };
    fp_optim *o = NULL;
    int rc = fp_optim_new(&o, &c, ps, 2);
    tap_ok(rc == FP_OK, "empty tensor accepted");
    fp_optim_state e;
    fp_optim_state_at(o, 1, &e);
    tap_is_str(e.name, "1.momentum_buffer", "unnamed tensor's state named by index");
    tap_ok(fp_optim_state_at(o, 2, &e) == FP_EINVAL, "state index out of range refused");
    fp_optim_step(o, 0.1);                          /* buf = g; p -= 0.1 * g */
    fp_optim_step(o, 0.1);                          /* buf = 0.9 g + g */
    tap_is_double(p[0], 1.0 - 0.1 * 0.5 - 0.1 * 0.95, 1e-7, 0, "momentum by hand (tol 1e-7: fp32)");
    tap_ok(fp_optim_rebind(o, 1, p2, g2) == FP_OK, "rebind");
    fp_optim_step(o, 0.1);                          /* buf = 0.9 * 0.95 + 1 = 1.855 */
    tap_is_double(p2[0], 1.0 - 0.1 * 1.855, 1e-7, 0, "rebind keeps the state (tol 1e-7: fp32)");
    tap_ok(fp_optim_rebind(o, 5, p2, g2) == FP_EINVAL, "rebind out of range refused");
    fp_optim_free(o);
    fp_optim_free(NULL);

    fp_optim_config_default(&c, FP_OPTIM_ADAMW);
    tap_is_double(c.weight_decay, 1e-2, 0, 0, "AdamW default weight decay 1e-2");
    fp_optim_config_default(&c, FP_OPTIM_ADAM);
    tap_is_double(c.weight_decay, 0, 0, 0, "Adam default weight decay 0");
}

/* fp_optim_step_part_delta over uneven parts (one across the two tensors' border, one clamped past the
 * end): the parameters and state of fp_optim_step bit for bit, and delta = new - old as landed (0 where
 * a tiny update is lost to rounding), for every kind, two steps (the second with state). */
static void test_part_delta(fp_optim_kind kind, const char *what)
{
    enum { N0 = 1000, N1 = 537, N = N0 + N1 };
    float p[2][N], g[N], old[N], delta[N + 7];
    uint64_t s = 99;
    for (int i = 0; i < N; i++) {
        p[0][i] = p[1][i] = i % 17 == 0 ? 1e6f : tu_uniform_pm1(&s);   /* 1e6: updates below half an ulp */
        g[i] = i % 11 == 0 ? 0.0f : tu_uniform_pm1(&s) * 1e-3f;
    }
    fp_optim_config c;
    fp_optim_config_default(&c, kind);
    if (kind == FP_OPTIM_SGD) {
        c.momentum = 0.9;
        c.nesterov = 1;
        c.weight_decay = 5e-4;
    }
    fp_optim *o[2];
    for (int k = 0; k < 2; k++) {
        fp_optim_param ps[2] = {{"a", p[k], g, N0, 1}, {"b", p[k] + N0, g + N0, N1, 0}};
        fp_optim_new(&o[k], &c, ps, 2);
    }
    int same = 1, delta_ok = 1, lost = 0;
    for (int step = 0; step < 2; step++) {
        fp_optim_step(o[0], 1e-3);
        memcpy(old, p[1], sizeof old);
        fp_optim_step_begin(o[1], 1e-3);
        const size_t cut[4] = {0, 700, 1200, N + 7};
        for (int j = 0; j < 3; j++)
            fp_optim_step_part_delta(o[1], cut[j], cut[j + 1], delta + cut[j]);
        same &= memcmp(p[0], p[1], sizeof p[0]) == 0;
        for (int i = 0; i < N; i++) {
            float d = p[1][i] - old[i];
            delta_ok &= memcmp(&d, &delta[i], sizeof d) == 0;
            lost += g[i] != 0.0f && delta[i] == 0.0f;
        }
    }
    for (size_t i = 0; same && i < fp_optim_state_count(o[0]); i++) {
        fp_optim_state a, b;
        fp_optim_state_at(o[0], i, &a);
        fp_optim_state_at(o[1], i, &b);
        same &= a.n == b.n && memcmp(a.data, b.data, a.n * sizeof(float)) == 0;
    }
    tap_ok(same, "%s: the step in parts with its updates gives fp_optim_step's parameters and state", what);
    tap_ok(delta_ok && lost > 0, "%s: each update is new - old as landed, bit for bit (%d lost to rounding)", what,
           lost);
    fp_optim_free(o[0]);
    fp_optim_free(o[1]);
}

int main(void)
{
    test_part_delta(FP_OPTIM_SGD, "sgd");
    test_part_delta(FP_OPTIM_ADAM, "adam");
    test_part_delta(FP_OPTIM_ADAMW, "adamw");
    char path[4200];
    snprintf(path, sizeof path, "%s/optim/optim.safetensors", FIXTURE_DIR);
    if (fp_st_open(&fx, path) != FP_OK) {
        tap_diag("%s", fp_error_message());
        tap_ok(0, "open fixture %s", path);
        return tap_done();
    }
    parse_params();
    parse_configs();
    tap_ok(np >= 3 && nc == 6 && nsteps == 5, "fixture: %d tensors, %d configurations, %d steps", np, nc,
           nsteps);

    /* The fused (FMA) path, when the CPU has one: bit-identical to torch. */
    test_against_torch("torch");
    /* (The fixture comes from torch's AVX2/AVX-512 kernels; its DEFAULT kernels fuse nothing.) */
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_cpu_supports("fma"))
#else
    if (0)
#endif
        tap_is_uint(n_inexact, 0, "FMA path: every value of every step bit-identical to torch");
    else
        tap_skip(1, "CPU without FMA: bit-identity not expected");
    /* The portable path: within tolerance. */
    setenv("FP_OPTIM_FMA", "0", 1);
    test_against_torch("torch/portable");
    tap_diag("portable path: %zu values not bit-identical (within tolerance)", n_inexact);
    unsetenv("FP_OPTIM_FMA");
    for (int c = 0; c < nc; c++)
        if (strcmp(cf[c].name, "sgd") != 0)
            test_resume(&cf[c]);
    test_resume(&cf[0]);
    test_bad_input();
    test_misc();

    for (int i = 0; i < np; i++) {
        free(pt[i].init);
        free(pt[i].param);
        free(pt[i].grad);
    }
    fp_st_close(fx);
    return tap_done();
}
