/* gate_config.c — is a baseline comparable with the candidate (gate.h)? The configuration keys the gate
 * compares, a lenient reader of the configuration JSON the trainer writes (fractions, booleans and null
 * included, which lib/json_min.h refuses), and the list of differences. Promise: every difference is
 * named once, with both values; what neither side recorded is not a difference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "error.h"
#include "gate.h"

static const char *const key_names[FP_GK_COUNT + 1] = {
    "model", "policy", "batch", "image_size", "data", "steps", "optimizer", "lr", "device", "version",
    "baseline_run"};

const char *fp_gate_key_name(int key)
{
    return key >= 0 && key <= FP_GK_COUNT ? key_names[key] : "?";
}

const char *fp_gate_key_list(void)
{
    return "model, policy, batch, image_size, data, steps, optimizer, lr, device, version";
}

int fp_gate_key_parse(const char *name)
{
    char low[32];
    size_t i = 0;
    for (; name[i] && i < sizeof low - 1; i++)
        low[i] = name[i] == '-' ? '_' : (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    low[i] = '\0';
    if (name[i])
        return -1;
    if (strcmp(low, "policies") == 0 || strcmp(low, "precision") == 0)
        return FP_GK_POLICY;
    for (int k = 0; k < FP_GK_COUNT; k++)
        if (strcmp(low, key_names[k]) == 0)
            return k;
    return -1;
}

/* ---------------------------------------------------------------- lenient JSON */

static const char *ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* p at '"': just past the closing quote, or NULL. */
static const char *skip_string(const char *p)
{
    for (p++; *p; p++) {
        if (*p == '\\') {
            if (!*++p)
                return NULL;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

static const char *skip_value(const char *p, int depth)
{
    p = ws(p);
    if (*p == '"')
        return skip_string(p);
    if (*p == '{' || *p == '[') {
        if (depth > 64)
            return NULL;
        char close = *p == '{' ? '}' : ']';
        p = ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (close == '}') {
                if (*p != '"' || !(p = skip_string(p)))
                    return NULL;
                p = ws(p);
                if (*p++ != ':')
                    return NULL;
            }
            if (!(p = skip_value(p, depth + 1)))
                return NULL;
            p = ws(p);
            if (*p == ',')
                p = ws(p + 1);
            else if (*p == close)
                return p + 1;
            else
                return NULL;
        }
    }
    const char *s = p;
    while (*p && !strchr(",}] \t\r\n", *p))
        p++;
    return p > s ? p : NULL;
}

typedef int (*member_fn)(void *ctx, const char *key, size_t klen, const char *val, size_t vlen);

/* Call fn for every member of the object at json (stops when fn returns non-zero; returns that). */
static int members(const char *json, member_fn fn, void *ctx)
{
    const char *p = ws(json ? json : "");
    if (*p != '{')
        return 0;
    p = ws(p + 1);
    while (*p == '"') {
        const char *k = p + 1, *e = skip_string(p);
        if (!e)
            return 0;
        p = ws(e);
        if (*p++ != ':')
            return 0;
        const char *v = ws(p), *ve = skip_value(v, 0);
        if (!ve)
            return 0;
        int r = fn(ctx, k, (size_t)(e - 1 - k), v, (size_t)(ve - v));
        if (r)
            return r;
        p = ws(ve);
        if (*p != ',')
            break;
        p = ws(p + 1);
    }
    return 0;
}

static void copy_value(char *out, size_t cap, const char *v, size_t vlen)
{
    if (vlen >= 2 && v[0] == '"')   /* unquoted */
        v++, vlen -= 2;
    if (vlen >= cap)
        vlen = cap - 1;
    memcpy(out, v, vlen);
    out[vlen] = '\0';
}

typedef struct {
    const char *key;
    char *out;
    size_t cap;
} lookup_t;

static int lookup_fn(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    lookup_t *l = ctx;
    if (strlen(l->key) != klen || memcmp(l->key, key, klen) != 0)
        return 0;
    copy_value(l->out, l->cap, val, vlen);
    return 1;
}

int fp_json_lookup(const char *json, const char *key, char *out, size_t cap)
{
    if (cap)
        out[0] = '\0';
    lookup_t l = {key, out, cap};
    return cap ? members(json, lookup_fn, &l) : 0;
}

/* ---------------------------------------------------------------- differences */

typedef struct {
    fp_gate_result_t *res;
    size_t cap;
    unsigned allow;
    int rc;
} diffs_t;

/* A value for people: numbers as %.6g (0.025, not 0.025000000000000001), text as is. */
static void shown(char *out, size_t cap, const char *v)
{
    char *end;
    double x = strtod(v, &end);
    if (*v && !*end && isfinite(x))
        snprintf(out, cap, "%.6g", x);
    else
        snprintf(out, cap, "%s", v);
}

static void add_diff(diffs_t *d, int key, const char *what, const char *base, const char *cand)
{
    if (d->rc != FP_OK)
        return;
    for (size_t i = 0; i < d->res->ndiffs; i++)
        if (strcmp(d->res->diffs[i].what, what) == 0)
            return;   /* named once, though every arm differs */
    if (d->res->ndiffs == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 8;
        fp_gate_diff_t *p = realloc(d->res->diffs, nc * sizeof *p);
        if (!p) {
            d->rc = fp_fail(FP_ENOMEM, "out of memory");
            return;
        }
        d->res->diffs = p;
        d->cap = nc;
    }
    fp_gate_diff_t *x = &d->res->diffs[d->res->ndiffs++];
    memset(x, 0, sizeof *x);
    x->key = key;
    x->allowed = key < FP_GK_COUNT && (d->allow >> key & 1);
    snprintf(x->what, sizeof x->what, "%s", what);
    shown(x->base, sizeof x->base, base);
    shown(x->cand, sizeof x->cand, cand);
}

/* Values equal as numbers (relative 1e-9) when both are numbers, else as text. */
static int same_value(const char *a, const char *b)
{
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (*a && *b && !*ea && !*eb)
        return x == y || fabs(x - y) <= 1e-9 * fmax(fabs(x), fabs(y));
    return strcmp(a, b) == 0;
}

static void cmp_text(diffs_t *d, int key, const char *what, const char *base, const char *cand)
{
    if (*base && *cand && !same_value(base, cand))
        add_diff(d, key, what, base, cand);
}

static void cmp_int(diffs_t *d, int key, const char *what, int64_t base, int64_t cand)
{
    if (base >= 0 && cand >= 0 && base != cand) {
        char b[32], c[32];
        snprintf(b, sizeof b, "%lld", (long long)base);
        snprintf(c, sizeof c, "%lld", (long long)cand);
        add_diff(d, key, what, b, c);
    }
}

/* The policies of a session in order, "fp32,fp16". */
static void policy_list(const fp_summary_t *s, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t i = 0; i < s->narms; i++) {
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", i ? "," : "", s->arms[i].run.policy);
    }
}

static int same_policy_set(const fp_summary_t *a, const fp_summary_t *b)
{
    for (size_t i = 0; i < a->narms; i++)
        if (!fp_summary_arm(b, a->arms[i].run.policy))
            return 0;
    for (size_t i = 0; i < b->narms; i++)
        if (!fp_summary_arm(a, b->arms[i].run.policy))
            return 0;
    return 1;
}

typedef struct {
    diffs_t *d;
    const char *other;   /* the other side's optimizer_config */
    int base_first;      /* 1: iterating the baseline's members */
} opt_ctx_t;

/* One member of an optimizer_config against the other side's (lr apart: its own key). */
static int opt_member(void *ctx, const char *key, size_t klen, const char *val, size_t vlen)
{
    opt_ctx_t *c = ctx;
    char k[48], v[96], w[96];
    if (klen >= sizeof k)
        return 0;
    memcpy(k, key, klen);
    k[klen] = '\0';
    copy_value(v, sizeof v, val, vlen);
    int has = fp_json_lookup(c->other, k, w, sizeof w);
    int key_id = strcmp(k, "lr") == 0 ? FP_GK_LR : FP_GK_OPTIMIZER;
    if (!has)
        snprintf(w, sizeof w, "(none)");
    if (!has || !same_value(v, w))
        add_diff(c->d, key_id, k, c->base_first ? v : w, c->base_first ? w : v);
    return 0;
}

static void cmp_arm(diffs_t *d, const fp_arm_t *b, const fp_gate_extra_t *xb, const fp_arm_t *c,
                    const fp_gate_extra_t *xc)
{
    if (strcmp(b->run.status, "finished") != 0 || b->run.stale) {
        char what[48], why[400];
        snprintf(what, sizeof what, "baseline %s run", c->run.policy);
        snprintf(why, sizeof why, "run %lld %s%s%s", (long long)b->run.id, b->run.status,
                 b->run.failure[0] ? ": " : "", b->run.failure);
        add_diff(d, FP_GK_BASELINE_RUN, what, why, "finished runs only");
    }
    cmp_int(d, FP_GK_BATCH, "batch", b->run.batch_size, c->run.batch_size);
    cmp_int(d, FP_GK_IMAGE_SIZE, "image_size", b->run.image_size, c->run.image_size);
    cmp_text(d, FP_GK_DEVICE, "device", b->run.device, c->run.device);
    cmp_text(d, FP_GK_OPTIMIZER, "optimizer", b->run.optimizer, c->run.optimizer);
    if (!xb || !xc) {
        cmp_text(d, FP_GK_DATA, "data", b->run.dataset, c->run.dataset);
        return;
    }
    char vb[160], vc[160];
    int hb = fp_json_lookup(xb->env.config, "data", vb, sizeof vb), hc = fp_json_lookup(xc->env.config, "data", vc,
                                                                                          sizeof vc);
    if (hb && hc)
        cmp_text(d, FP_GK_DATA, "data", vb, vc);
    else
        cmp_text(d, FP_GK_DATA, "data", b->run.dataset, c->run.dataset);
    static const char *const data_keys[] = {"classes", "augment"};
    for (size_t i = 0; i < sizeof data_keys / sizeof *data_keys; i++)
        if (fp_json_lookup(xb->env.config, data_keys[i], vb, sizeof vb) &&
            fp_json_lookup(xc->env.config, data_keys[i], vc, sizeof vc))
            cmp_text(d, FP_GK_DATA, data_keys[i], vb, vc);
    if (fp_json_lookup(xb->env.config, "steps", vb, sizeof vb) && fp_json_lookup(xc->env.config, "steps", vc, sizeof vc))
        cmp_text(d, FP_GK_STEPS, "steps", vb, vc);
    if (fp_json_lookup(xb->env.config, "threads", vb, sizeof vb) &&
        fp_json_lookup(xc->env.config, "threads", vc, sizeof vc))
        cmp_text(d, FP_GK_DEVICE, "threads", vb, vc);   /* the device's share the run had */
    if (xb->env.optimizer_config[0] && xc->env.optimizer_config[0]) {
        opt_ctx_t ob = {d, xc->env.optimizer_config, 1}, oc = {d, xb->env.optimizer_config, 0};
        members(xb->env.optimizer_config, opt_member, &ob);
        members(xc->env.optimizer_config, opt_member, &oc);
    }
    cmp_text(d, FP_GK_VERSION, "version", xb->env.fp16probe_version, xc->env.fp16probe_version);
}

int fp_gate_compare_config(const fp_gate_side_t *base, const fp_gate_side_t *cand, unsigned allow,
                           fp_gate_result_t *res)
{
    diffs_t d = {res, 0, allow, FP_OK};
    cmp_text(&d, FP_GK_MODEL, "model", base->s.model, cand->s.model);
    if (!same_policy_set(&base->s, &cand->s)) {
        char b[96], c[96];
        policy_list(&base->s, b, sizeof b);
        policy_list(&cand->s, c, sizeof c);
        add_diff(&d, FP_GK_POLICY, "policies", b, c);
    }
    for (size_t i = 0; i < cand->s.narms; i++) {
        const fp_arm_t *c = &cand->s.arms[i];
        const fp_arm_t *b = fp_summary_arm(&base->s, c->run.policy);
        if (!b)
            continue;
        size_t bi = (size_t)(b - base->s.arms);
        cmp_arm(&d, b, base->x ? &base->x[bi] : NULL, c, cand->x ? &cand->x[i] : NULL);
    }
    return d.rc;
}
