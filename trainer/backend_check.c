/* backend_check.c — backend_check.h: the argument checks every backend runs before an op. */
#include "error.h"
#include "trainer/backend_check.h"

#define TRY(expr) do { int rc_ = (expr); if (rc_) return rc_; } while (0)

int fp_backend_want(int ok, const char *op, const char *what)
{
    return ok ? FP_OK : fp_fail(FP_EINVAL, "%s: %s", op, what);
}

int fp_backend_check(const char *op, const char *name, const fp_tensor *t, unsigned mask, int may_skip)
{
    if (!t->p)
        return may_skip ? FP_OK : fp_fail(FP_EINVAL, "%s: %s is NULL", op, name);
    unsigned bit = t->dt == FP_DT_F32 ? 1u : t->dt == FP_DT_F16 ? 2u : t->dt == FP_DT_BF16 ? 4u : 0u;
    if (!(bit & mask))
        return fp_fail(FP_EINVAL, "%s: %s has dtype %s, not accepted here", op, name, fp_dtype_name(t->dt));
    if (fp_tensor_count(t) == 0)
        return fp_fail(FP_EINVAL, "%s: %s has bad dims %dx%dx%dx%d", op, name, t->d.n, t->d.h, t->d.w, t->d.c);
    return FP_OK;
}

int fp_backend_same_dims(const char *op, const char *an, const fp_tensor *a, const char *bn, const fp_tensor *b)
{
    if (a->d.n != b->d.n || a->d.h != b->d.h || a->d.w != b->d.w || a->d.c != b->d.c)
        return fp_fail(FP_EINVAL, "%s: %s %dx%dx%dx%d and %s %dx%dx%dx%d differ", op, an, a->d.n, a->d.h, a->d.w,
                       a->d.c, bn, b->d.n, b->d.h, b->d.w, b->d.c);
    return FP_OK;
}

int fp_backend_check_compute(const char *op, fp_dtype compute)
{
    if ((unsigned)compute > FP_DT_BF16)
        return fp_fail(FP_EINVAL, "%s: bad compute dtype %d", op, (int)compute);
    return FP_OK;
}

int fp_backend_conv_check(const char *op, const fp_tensor *x, const fp_tensor *y, const fp_tensor *w,
                          const fp_conv_params *p, unsigned wmask, fp_dtype compute)
{
    TRY(fp_backend_want(p != NULL, op, "NULL params"));
    TRY(fp_backend_check(op, "x", x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check(op, "y", y, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check(op, "w", w, wmask, 0));
    TRY(fp_backend_check_compute(op, compute));
    fp_dims od = fp_conv_out_dims(x->d, p);
    TRY(fp_backend_want(od.n != 0 && x->d.c == p->cin, op, "params do not fit x"));
    TRY(fp_backend_want(y->d.n == x->d.n && y->d.h == od.h && y->d.w == od.w && y->d.c == p->cout, op,
                         "y is not the convolution's output shape"));
    TRY(fp_backend_want(w->d.n == p->cout && w->d.h == p->kh && w->d.w == p->kw && w->d.c == p->cin, op,
                         "w is not {cout, kh, kw, cin}"));
    return FP_OK;
}

int fp_backend_vec_check(const char *op, const char *name, const fp_tensor *t, int c, int may_skip)
{
    TRY(fp_backend_check(op, name, t, FP_BACKEND_F32, may_skip));
    if (t->p && (t->d.n != 1 || t->d.h != 1 || t->d.w != 1 || t->d.c != c))
        return fp_fail(FP_EINVAL, "%s: %s is not {1, 1, 1, %d}", op, name, c);
    return FP_OK;
}

int fp_backend_bn_check(const char *op, const fp_tensor *y, const fp_tensor *x, const fp_tensor *gamma,
                        const fp_tensor *beta, const fp_tensor *rm, const fp_tensor *rv, int stats_may_skip,
                        const fp_bn_params *p)
{
    TRY(fp_backend_want(p != NULL, op, "NULL params"));
    TRY(fp_backend_check(op, "x", x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check(op, "y", y, FP_BACKEND_ANY, 0));
    TRY(fp_backend_same_dims(op, "y", y, "x", x));
    TRY(fp_backend_vec_check(op, "gamma", gamma, x->d.c, 0));
    TRY(fp_backend_vec_check(op, "beta", beta, x->d.c, 0));
    TRY(fp_backend_vec_check(op, "running_mean", rm, x->d.c, stats_may_skip));
    return fp_backend_vec_check(op, "running_var", rv, x->d.c, stats_may_skip);
}

int fp_backend_bn_backward_check(const char *op, const fp_tensor *dx, const fp_tensor *dgamma,
                                 const fp_tensor *dbeta, const fp_tensor *dy, const fp_tensor *x,
                                 const fp_tensor *gamma, const fp_tensor *save)
{
    TRY(fp_backend_check(op, "dy", dy, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check(op, "x", x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_same_dims(op, "dy", dy, "x", x));
    TRY(fp_backend_check(op, "dx", dx, FP_BACKEND_ANY, 1));
    if (dx->p)
        TRY(fp_backend_same_dims(op, "dx", dx, "x", x));
    TRY(fp_backend_vec_check(op, "dgamma", dgamma, x->d.c, 1));
    TRY(fp_backend_vec_check(op, "dbeta", dbeta, x->d.c, 1));
    TRY(fp_backend_vec_check(op, "gamma", gamma, x->d.c, 0));
    return fp_backend_vec_check(op, "save", save, 2 * x->d.c, 0);
}

/* A tensor of x's shape and format (may be skipped when may_skip). */
static int like_x(const char *op, const char *name, const fp_tensor *t, const fp_tensor *x, int may_skip)
{
    TRY(fp_backend_check(op, name, t, FP_BACKEND_ANY, may_skip));
    if (!t->p)
        return FP_OK;
    TRY(fp_backend_same_dims(op, name, t, "x", x));
    return fp_backend_want(t->dt == x->dt, op, name[0] == 'd' ? "gradients and x of different formats"
                                                                : "x, z and y of different formats");
}

int fp_backend_bn_act_check(const char *op, const fp_tensor *y, const fp_tensor *x, const fp_tensor *z,
                            const fp_tensor *gamma, const fp_tensor *beta, const fp_tensor *rm, const fp_tensor *rv,
                            const fp_tensor *save, const fp_bn_params *p, size_t reserve_bytes, const void *reserve)
{
    TRY(fp_backend_bn_check(op, y, x, gamma, beta, rm, rv, 1, p));
    TRY(like_x(op, "y", y, x, 0));
    TRY(like_x(op, "z", z, x, 1));
    TRY(fp_backend_vec_check(op, "save", save, 2 * x->d.c, 0));
    TRY(fp_backend_want(x->d.n * (long long)x->d.h * x->d.w > 1, op, "needs more than one value per channel"));
    return fp_backend_want(!reserve_bytes || reserve, op, "NULL reserve with reserve_bytes > 0");
}

int fp_backend_bn_act_backward_check(const char *op, const fp_tensor *dx, const fp_tensor *dz,
                                     const fp_tensor *dgamma, const fp_tensor *dbeta, const fp_tensor *dy,
                                     const fp_tensor *y, const fp_tensor *x, const fp_tensor *gamma,
                                     const fp_tensor *beta, const fp_tensor *save, const fp_bn_params *p,
                                     size_t reserve_bytes, const void *reserve)
{
    TRY(fp_backend_want(p != NULL, op, "NULL params"));
    TRY(fp_backend_bn_backward_check(op, dx, dgamma, dbeta, dy, x, gamma, save));
    TRY(like_x(op, "y", y, x, 0));
    TRY(like_x(op, "dy", dy, x, 0));
    TRY(like_x(op, "dx", dx, x, 1));
    TRY(like_x(op, "dz", dz, x, 1));
    TRY(fp_backend_vec_check(op, "beta", beta, x->d.c, 0));
    return fp_backend_want(!reserve_bytes || reserve, op, "NULL reserve with reserve_bytes > 0");
}

int fp_backend_pool_check(const char *op, const fp_tensor *x, const fp_tensor *y, const fp_pool_params *p)
{
    TRY(fp_backend_want(p != NULL, op, "NULL params"));
    TRY(fp_backend_check(op, "x", x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check(op, "y", y, FP_BACKEND_ANY, 0));
    fp_dims od = fp_pool_out_dims(x->d, p);
    TRY(fp_backend_want(od.n != 0, op, "params do not fit x"));
    return fp_backend_want(y->d.n == x->d.n && y->d.h == od.h && y->d.w == od.w && y->d.c == x->d.c, op,
                           "y is not the pooling's output shape");
}

int fp_backend_avg_check(const char *op, const fp_tensor *x, const fp_tensor *y)
{
    TRY(fp_backend_check(op, "x", x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check(op, "y", y, FP_BACKEND_ANY, 0));
    return fp_backend_want(y->d.n == x->d.n && y->d.h == 1 && y->d.w == 1 && y->d.c == x->d.c, op,
                           "y is not {n, 1, 1, c}");
}

int fp_backend_linear_check(const char *op, const fp_tensor *x, const fp_tensor *y, const fp_tensor *w,
                            const fp_tensor *b, unsigned wmask, fp_dtype compute)
{
    TRY(fp_backend_check(op, "x", x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check(op, "y", y, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check(op, "w", w, wmask, 0));
    TRY(fp_backend_check(op, "b", b, wmask, 1));
    TRY(fp_backend_check_compute(op, compute));
    size_t in = fp_tensor_count(x) / (size_t)x->d.n;
    TRY(fp_backend_want(y->d.n == x->d.n && y->d.h == 1 && y->d.w == 1, op, "y is not {n, 1, 1, out}"));
    TRY(fp_backend_want(w->d.n == y->d.c && w->d.h == 1 && w->d.w == 1 && (size_t)w->d.c == in, op,
                        "w is not {out, 1, 1, in}"));
    return fp_backend_want(!b->p || (b->d.n == 1 && b->d.h == 1 && b->d.w == 1 && b->d.c == y->d.c), op,
                           "b is not {1, 1, 1, out}");
}

static int apart(const fp_tensor *a, const fp_tensor *b)
{
    const char *pa = a->p, *pb = b->p;
    size_t na = fp_tensor_count(a) * (size_t)fp_dtype_bytes(a->dt);
    size_t nb = fp_tensor_count(b) * (size_t)fp_dtype_bytes(b->dt);
    return pa + na <= pb || pb + nb <= pa;
}

int fp_backend_update_check(const char *op, const fp_tensor *d, const fp_tensor *nw, const fp_tensor *old,
                            const fp_tensor *g, const size_t *lost, const size_t *moved)
{
    TRY(fp_backend_want(lost && moved, op, "NULL count"));
    TRY(fp_backend_check(op, "d", d, FP_BACKEND_F32, 0));
    TRY(fp_backend_check(op, "new", nw, FP_BACKEND_F32, 0));
    TRY(fp_backend_check(op, "old", old, FP_BACKEND_F32, 0));
    TRY(fp_backend_check(op, "g", g, FP_BACKEND_F32, 0));
    size_t n = fp_tensor_count(d);
    TRY(fp_backend_want(fp_tensor_count(nw) == n && fp_tensor_count(old) == n && fp_tensor_count(g) == n, op,
                        "d, new, old and g differ in count"));
    return fp_backend_want(apart(d, nw) && apart(d, old) && apart(d, g), op, "d overlaps an input");
}
