/* optim.c — SGD / Adam / AdamW over fp32 master weights, mirroring torch 1.13's single-tensor
 * implementations (torch/optim/sgd.py, adam.py, adamw.py) operation by operation in fp32, with
 * the scalar coefficients computed in double and rounded to fp32 where PyTorch does. */
#include "optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "thread_pool.h"

typedef struct {
    char *name;
    float *param;
    const float *grad;
    size_t n;
    int apply_wd;
    float *buf0;    /* SGD: momentum_buffer; Adam/AdamW: exp_avg */
    float *buf1;    /* Adam/AdamW: exp_avg_sq */
} optim_tensor;

struct fp_optim {
    fp_optim_config cfg;
    optim_tensor *t;
    size_t count;
    int64_t step;
    fp_optim_state *state;   /* flat view of every state array, names owned */
    size_t nstate;
    int fused;               /* use the FMA kernels (decided at creation) */
    size_t *offs;            /* offs[i]: first element of tensor i in the flat range; offs[count] total */
    double part_lr;          /* fp_optim_step_begin: the step the parts belong to */
    int part_first;
};

static int want_fma(void);

static const char *const kind_names[FP_OPTIM_KIND_COUNT] = { "sgd", "adam", "adamw" };

const char *fp_optim_name(fp_optim_kind kind)
{
    return (unsigned)kind < FP_OPTIM_KIND_COUNT ? kind_names[kind] : "?";
}

int fp_optim_parse(const char *name, fp_optim_kind *out)
{
    for (int k = 0; k < FP_OPTIM_KIND_COUNT; k++) {
        if (name && strcmp(name, kind_names[k]) == 0) {
            *out = (fp_optim_kind)k;
            return FP_OK;
        }
    }
    return fp_fail(FP_EINVAL, "unknown optimizer '%s' (valid: sgd, adam, adamw)", name ? name : "");
}

void fp_optim_config_default(fp_optim_config *cfg, fp_optim_kind kind)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->eps = 1e-8;
    cfg->weight_decay = kind == FP_OPTIM_ADAMW ? 1e-2 : 0.0;
}

int fp_optim_config_check(const fp_optim_config *cfg)
{
    if (!cfg)
        return fp_fail(FP_EINVAL, "optimizer: no configuration");
    if ((unsigned)cfg->kind >= FP_OPTIM_KIND_COUNT)
        return fp_fail(FP_EINVAL, "optimizer: unknown kind %d (valid: sgd, adam, adamw)", (int)cfg->kind);
    const char *nm = fp_optim_name(cfg->kind);
    /* !(x >= 0) also catches NaN. */
    if (!(cfg->weight_decay >= 0) || isinf(cfg->weight_decay))
        return fp_fail(FP_EINVAL, "optimizer %s: invalid weight_decay value: %g (must be finite and >= 0)",
                       nm, cfg->weight_decay);
    if (cfg->kind == FP_OPTIM_SGD) {
        if (!(cfg->momentum >= 0) || isinf(cfg->momentum))
            return fp_fail(FP_EINVAL, "optimizer sgd: invalid momentum value: %g (must be finite and >= 0)",
                           cfg->momentum);
        if (cfg->nesterov && !(cfg->momentum > 0))
            return fp_fail(FP_EINVAL, "optimizer sgd: nesterov momentum requires a momentum > 0 "
                           "(and zero dampening)");
        return FP_OK;
    }
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1))
        return fp_fail(FP_EINVAL, "optimizer %s: invalid beta parameter at index 0: %g (must be in [0, 1))",
                       nm, cfg->beta1);
    if (!(cfg->beta2 >= 0 && cfg->beta2 < 1))
        return fp_fail(FP_EINVAL, "optimizer %s: invalid beta parameter at index 1: %g (must be in [0, 1))",
                       nm, cfg->beta2);
    if (!(cfg->eps >= 0) || isinf(cfg->eps))
        return fp_fail(FP_EINVAL, "optimizer %s: invalid epsilon value: %g (must be finite and >= 0)",
                       nm, cfg->eps);
    return FP_OK;
}

void fp_optim_free(fp_optim *opt)
{
    if (!opt)
        return;
    for (size_t i = 0; i < opt->count; i++) {
        free(opt->t[i].name);
        free(opt->t[i].buf0);
        free(opt->t[i].buf1);
    }
    for (size_t i = 0; i < opt->nstate; i++)
        free((char *)opt->state[i].name);
    free(opt->state);
    free(opt->t);
    free(opt->offs);
    free(opt);
}

static char *str_dup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static char *join_name(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *d = malloc(la + lb + 2);
    if (d) {
        memcpy(d, a, la);
        d[la] = '.';
        memcpy(d + la + 1, b, lb + 1);
    }
    return d;
}

static float *zeros(size_t n)
{
    return calloc(n ? n : 1, sizeof(float));
}

static int add_state(fp_optim *opt, const char *tensor, const char *what, float *data, size_t n)
{
    char *name = join_name(tensor, what);
    if (!name)
        return fp_fail(FP_ENOMEM, "optimizer: out of memory");
    opt->state[opt->nstate].name = name;
    opt->state[opt->nstate].data = data;
    opt->state[opt->nstate].n = n;
    opt->nstate++;
    return FP_OK;
}

int fp_optim_new(fp_optim **out, const fp_optim_config *cfg, const fp_optim_param *params,
                 size_t count)
{
    int rc;
    if (!out)
        return fp_fail(FP_EINVAL, "optimizer: no output pointer");
    *out = NULL;
    if ((rc = fp_optim_config_check(cfg)) != FP_OK)
        return rc;
    const char *nm = fp_optim_name(cfg->kind);
    if (count == 0 || !params)
        return fp_fail(FP_EINVAL, "optimizer %s: got an empty parameter list", nm);
    for (size_t i = 0; i < count; i++) {
        if (params[i].n > 0 && (!params[i].param || !params[i].grad))
            return fp_fail(FP_EINVAL, "optimizer %s: tensor %zu ('%s') has a NULL %s", nm, i,
                           params[i].name ? params[i].name : "", params[i].param ? "grad" : "param");
        if (params[i].name && !params[i].name[0])
            return fp_fail(FP_EINVAL, "optimizer %s: tensor %zu has an empty name", nm, i);
        for (size_t j = 0; j < i; j++) {
            if (params[i].n > 0 && params[j].param == params[i].param)
                return fp_fail(FP_EINVAL, "optimizer %s: tensors %zu and %zu are the same parameter",
                               nm, j, i);
            if (params[i].name && params[j].name && strcmp(params[i].name, params[j].name) == 0)
                return fp_fail(FP_EINVAL, "optimizer %s: two tensors are called '%s'", nm, params[i].name);
        }
    }

    fp_optim *opt = calloc(1, sizeof *opt);
    if (!opt)
        return fp_fail(FP_ENOMEM, "optimizer: out of memory");
    opt->cfg = *cfg;
    opt->fused = want_fma();
    opt->t = calloc(count, sizeof *opt->t);
    opt->state = calloc(2 * count, sizeof *opt->state);
    opt->offs = calloc(count + 1, sizeof *opt->offs);
    if (!opt->t || !opt->state || !opt->offs) {
        fp_optim_free(opt);
        return fp_fail(FP_ENOMEM, "optimizer: out of memory");
    }
    int has_momentum = cfg->kind == FP_OPTIM_SGD && cfg->momentum != 0;
    int is_adam = cfg->kind != FP_OPTIM_SGD;
    for (size_t i = 0; i < count; i++) {
        optim_tensor *t = &opt->t[i];
        opt->count = i + 1;
        char idx[32];
        snprintf(idx, sizeof idx, "%zu", i);
        t->name = str_dup(params[i].name ? params[i].name : idx);
        t->param = params[i].param;
        t->grad = params[i].grad;
        t->n = params[i].n;
        t->apply_wd = params[i].apply_weight_decay != 0;
        opt->offs[i + 1] = opt->offs[i] + t->n;
        if (!t->name)
            goto nomem;
        if (has_momentum || is_adam) {
            if (!(t->buf0 = zeros(t->n)))
                goto nomem;
            if ((rc = add_state(opt, t->name, is_adam ? "exp_avg" : "momentum_buffer", t->buf0, t->n)))
                goto fail;
        }
        if (is_adam) {
            if (!(t->buf1 = zeros(t->n)))
                goto nomem;
            if ((rc = add_state(opt, t->name, "exp_avg_sq", t->buf1, t->n)))
                goto fail;
        }
    }
    *out = opt;
    return FP_OK;
nomem:
    rc = fp_fail(FP_ENOMEM, "optimizer: out of memory");
fail:
    fp_optim_free(opt);
    return rc;
}

/* PyTorch's AVX2 CPU kernels compute `a.add_(b, alpha=s)` as one fused multiply-add, fma(b, s, a),
 * and addcmul_'s `self + value * t1 * t2` is contracted by its compiler to fma(value * t1, t2, self);
 * mul_, sqrt, div and addcdiv_ round op by op. The kernels below do the same: FMA(b, s, a) marks
 * the fused ops, every other expression is rounded op by op (contraction is switched off, so the
 * compiler fuses nothing else). On a CPU with FMA the results are bit-identical to torch 1.13's;
 * on the portable path (no FMA, or FP_OPTIM_FMA=0) the fused ops round twice, <= 1 ulp per op.
 * Scalars are Python doubles in torch; its kernels round them to fp32, as here. */
#define SGD_KERNEL(fname, FMA, attrs)                                                             \
    attrs static void fname(float *restrict p, const float *restrict g, float *restrict buf,       \
                            size_t n, int use_wd, float wd, float mom, int nesterov, float alpha,  \
                            int first, float *restrict delta)                                      \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            float d = g[i], p0 = p[i];                                                             \
            if (use_wd)                                /* d_p = d_p.add(param, alpha=wd) */        \
                d = FMA(p0, wd, d);                                                                \
            if (buf) {                                                                             \
                /* first: buf = clone(d_p); else buf.mul_(momentum).add_(d_p, alpha=1) */          \
                float b = first ? d : buf[i] * mom + d;                                            \
                buf[i] = b;                                                                        \
                d = nesterov ? FMA(b, mom, d) : b;     /* d_p.add(buf, alpha=momentum) */          \
            }                                                                                      \
            float p1 = FMA(d, alpha, p0);              /* param.add_(d_p, alpha=-lr) */            \
            p[i] = p1;                                                                             \
            if (delta)                                 /* fp_optim_step_part_delta */              \
                delta[i] = p1 - p0;                                                                \
        }                                                                                          \
    }

/* grad = grad.add(param, alpha=wd) (Adam) or param.mul_(1 - lr * wd) (AdamW);
 * exp_avg.mul_(b1).add_(grad, alpha=1 - b1); exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1 - b2);
 * denom = (exp_avg_sq.sqrt() / sqrt(1 - b2^t)).add_(eps); param.addcdiv_(exp_avg, denom,
 * value=-lr / (1 - b1^t)), addcmul and addcdiv evaluated left to right as torch's kernels do. */
#define ADAM_KERNEL(fname, FMA, attrs)                                                             \
    attrs static void fname(float *restrict p, const float *restrict g, float *restrict m,         \
                            float *restrict v, size_t n, int use_l2, int use_decoupled, float wd,  \
                            float decay, float b1, float omb1, float b2, float omb2,               \
                            float bc2_sqrt, float eps, float neg_step_size, float *restrict delta) \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            float gi = g[i];                                                                       \
            float pi = p[i];                                                                       \
            if (use_l2)                                                                            \
                gi = FMA(pi, wd, gi);                                                              \
            if (use_decoupled)                                                                     \
                pi = pi * decay;                                                                   \
            float mi = FMA(gi, omb1, m[i] * b1);                                                   \
            float vi = v[i] * b2;                                                                  \
            vi = FMA(gi, omb2 * gi, vi);                                                           \
            float denom = sqrtf(vi) / bc2_sqrt + eps;                                              \
            m[i] = mi;                                                                             \
            v[i] = vi;                                                                             \
            float p1 = pi + neg_step_size * mi / denom;                                            \
            if (delta)                                 /* fp_optim_step_part_delta */              \
                delta[i] = p1 - p[i];                                                              \
            p[i] = p1;                                                                             \
        }                                                                                          \
    }

#define FMA_FUSED(b, s, a) fmaf((b), (s), (a))
#define FMA_SPLIT(b, s, a) ((a) + (s) * (b))
#define NO_CONTRACT __attribute__((optimize("fp-contract=off")))

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(__clang__)
#define HAVE_FMA_PATH 1
SGD_KERNEL(sgd_fma, FMA_FUSED, __attribute__((target("fma"))) NO_CONTRACT)
ADAM_KERNEL(adam_fma, FMA_FUSED, __attribute__((target("fma"))) NO_CONTRACT)
#else
#define HAVE_FMA_PATH 0
#endif
#if defined(__GNUC__) && !defined(__clang__)
SGD_KERNEL(sgd_plain, FMA_SPLIT, NO_CONTRACT)
ADAM_KERNEL(adam_plain, FMA_SPLIT, NO_CONTRACT)
#else
SGD_KERNEL(sgd_plain, FMA_SPLIT, )
ADAM_KERNEL(adam_plain, FMA_SPLIT, )
#endif

/* The fused path when the CPU has FMA, unless the environment says FP_OPTIM_FMA=0. */
static int want_fma(void)
{
#if HAVE_FMA_PATH
    const char *env = getenv("FP_OPTIM_FMA");
    if (env && strcmp(env, "0") == 0)
        return 0;
    return __builtin_cpu_supports("fma") ? 1 : 0;
#else
    return 0;
#endif
}

/* The update of elements [b, b + n) of tensor t (elements are independent: any split gives the same
 * values). */
static void sgd_tensor(const fp_optim_config *cfg, optim_tensor *t, size_t b, size_t n, double lr, int first,
                       int fused, float *delta)
{
    const int use_wd = t->apply_wd && cfg->weight_decay != 0;
    const float wd = (float)cfg->weight_decay, mom = (float)cfg->momentum, alpha = (float)-lr;
    (void)fused;
#if HAVE_FMA_PATH
    if (fused) {
        sgd_fma(t->param + b, t->grad + b, t->buf0 ? t->buf0 + b : NULL, n, use_wd, wd, mom, cfg->nesterov, alpha,
                first, delta);
        return;
    }
#endif
    sgd_plain(t->param + b, t->grad + b, t->buf0 ? t->buf0 + b : NULL, n, use_wd, wd, mom, cfg->nesterov, alpha,
              first, delta);
}

static void adam_tensor(const fp_optim_config *cfg, optim_tensor *t, size_t b, size_t n, double lr, double step,
                        int fused, float *delta)
{
    const int adamw = cfg->kind == FP_OPTIM_ADAMW;
    const int use_l2 = !adamw && t->apply_wd && cfg->weight_decay != 0;
    const int use_decoupled = adamw && t->apply_wd;
    const double bc1 = 1.0 - pow(cfg->beta1, step);
    const double bc2 = 1.0 - pow(cfg->beta2, step);
    const float neg_step_size = (float)-(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float wd = (float)cfg->weight_decay;
    const float decay = (float)(1.0 - lr * cfg->weight_decay);
    const float b1 = (float)cfg->beta1, omb1 = (float)(1.0 - cfg->beta1);
    const float b2 = (float)cfg->beta2, omb2 = (float)(1.0 - cfg->beta2);
    const float eps = (float)cfg->eps;
    (void)fused;
#if HAVE_FMA_PATH
    if (fused) {
        adam_fma(t->param + b, t->grad + b, t->buf0 + b, t->buf1 + b, n, use_l2, use_decoupled, wd, decay, b1, omb1,
                 b2, omb2, bc2_sqrt, eps, neg_step_size, delta);
        return;
    }
#endif
    adam_plain(t->param + b, t->grad + b, t->buf0 + b, t->buf1 + b, n, use_l2, use_decoupled, wd, decay, b1, omb1,
               b2, omb2, bc2_sqrt, eps, neg_step_size, delta);
}

/* Elements [b, e) of the flat range over all tensors, tensor by tensor in order, with the step
 * fp_optim_step_begin counted; each element's update into delta[element - b] unless delta is NULL. */
static void step_elems(fp_optim *opt, size_t b, size_t e, float *delta)
{
    const size_t *offs = opt->offs;
    size_t lo = 0, hi = opt->count;   /* the tensor holding b: the last i with offs[i] <= b */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (offs[mid] <= b)
            lo = mid;
        else
            hi = mid;
    }
    for (size_t i = lo; i < opt->count && offs[i] < e; i++) {
        size_t s0 = b > offs[i] ? b - offs[i] : 0;
        size_t s1 = (e < offs[i + 1] ? e : offs[i + 1]) - offs[i];
        if (s1 <= s0)
            continue;
        float *dt = delta ? delta + (offs[i] + s0 - b) : NULL;
        if (opt->cfg.kind == FP_OPTIM_SGD)
            sgd_tensor(&opt->cfg, &opt->t[i], s0, s1 - s0, opt->part_lr, opt->part_first, opt->fused, dt);
        else
            adam_tensor(&opt->cfg, &opt->t[i], s0, s1 - s0, opt->part_lr, (double)opt->step, opt->fused, dt);
    }
}

static void step_range(void *ctx, size_t b, size_t e) { step_elems(ctx, b, e, NULL); }

int fp_optim_step_begin(fp_optim *opt, double lr)
{
    if (!opt)
        return fp_fail(FP_EINVAL, "optimizer: NULL optimizer");
    if (!(lr >= 0) || isinf(lr))
        return fp_fail(FP_EINVAL, "optimizer %s: invalid learning rate: %g (must be finite and >= 0)",
                       fp_optim_name(opt->cfg.kind), lr);
    opt->part_lr = lr;
    opt->part_first = opt->step == 0;
    opt->step++;
    return FP_OK;
}

size_t fp_optim_size(const fp_optim *opt) { return opt->offs[opt->count]; }

void fp_optim_step_part(fp_optim *opt, size_t b, size_t e) { fp_optim_step_part_delta(opt, b, e, NULL); }

void fp_optim_step_part_delta(fp_optim *opt, size_t b, size_t e, float *delta)
{
    size_t n = fp_optim_size(opt);
    step_elems(opt, b < n ? b : n, e < n ? e : n, delta);
}

int fp_optim_laid_out_from(const fp_optim *opt, const float *base)
{
    for (size_t i = 0; i < opt->count; i++)
        if (opt->t[i].n && opt->t[i].param != base + opt->offs[i])
            return 0;
    return 1;
}

int fp_optim_step(fp_optim *opt, double lr)
{
    int rc = fp_optim_step_begin(opt, lr);
    if (rc)
        return rc;
    /* All tensors as one flat range split across the thread pool (64-byte aligned parts). */
    fp_parallel_for(fp_optim_size(opt), 16, (size_t)1 << 16, step_range, opt);
    return FP_OK;
}

int fp_optim_rebind(fp_optim *opt, size_t i, float *param, const float *grad)
{
    if (!opt || i >= opt->count)
        return fp_fail(FP_EINVAL, "optimizer: no tensor %zu to rebind", i);
    if (opt->t[i].n > 0 && (!param || !grad))
        return fp_fail(FP_EINVAL, "optimizer: tensor '%s' rebound to a NULL pointer", opt->t[i].name);
    opt->t[i].param = param;
    opt->t[i].grad = grad;
    return FP_OK;
}

const fp_optim_config *fp_optim_get_config(const fp_optim *opt)
{
    return &opt->cfg;
}

size_t fp_optim_param_count(const fp_optim *opt)
{
    return opt->count;
}

int64_t fp_optim_get_step(const fp_optim *opt)
{
    return opt->step;
}

int fp_optim_set_step(fp_optim *opt, int64_t step)
{
    if (step < 0)
        return fp_fail(FP_EINVAL, "optimizer: invalid step counter %lld (must be >= 0)", (long long)step);
    opt->step = step;
    return FP_OK;
}

size_t fp_optim_state_count(const fp_optim *opt)
{
    return opt->nstate;
}

int fp_optim_state_at(const fp_optim *opt, size_t i, fp_optim_state *out)
{
    if (i >= opt->nstate)
        return fp_fail(FP_EINVAL, "optimizer: no state entry %zu (there are %zu)", i, opt->nstate);
    *out = opt->state[i];
    return FP_OK;
}

int fp_optim_state_load(fp_optim *opt, const char *name, const float *data, size_t n)
{
    for (size_t i = 0; i < opt->nstate; i++) {
        if (strcmp(opt->state[i].name, name) != 0)
            continue;
        if (n != opt->state[i].n)
            return fp_fail(FP_EFORMAT, "optimizer %s: state '%s' has %zu values, expected %zu",
                           fp_optim_name(opt->cfg.kind), name, n, opt->state[i].n);
        if (n)
            memcpy(opt->state[i].data, data, n * sizeof(float));
        return FP_OK;
    }
    return fp_fail(FP_EFORMAT, "optimizer %s: no state called '%s'", fp_optim_name(opt->cfg.kind), name);
}
