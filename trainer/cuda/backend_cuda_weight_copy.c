/* backend_cuda_weight_copy.c — the CUDA backend's 16-bit weight copy (backend_cuda.h fp_backend_cuda_weight_copy):
 * the cast of the weights the optimizer writes once per step, read by conv / linear instead of casting per call.
 * Promise: a view is given only while the copy equals the cast of the weights; any other write to them drops it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/cuda/backend_cuda_internal.h"

static int overlaps(const void *a, size_t abytes, const void *b, size_t bbytes)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return a && b && abytes && bbytes && x < y + bbytes && y < x + abytes;
}

/* [p, p + bytes) lies inside the n floats at base, at a whole float: *off gets its offset in floats. */
static int inside(const void *p, size_t bytes, const float *base, size_t n, size_t *off)
{
    uintptr_t x = (uintptr_t)p, b = (uintptr_t)base, all = n * sizeof(float);
    if (!p || !base || x < b || (x - b) % sizeof(float) || bytes > all || x - b > all - bytes)
        return 0;
    *off = (x - b) / sizeof(float);
    return 1;
}

static int wc_hit(const fp_backend *be, const void *p, size_t bytes)
{
    size_t all = be->wc.n * sizeof(float);
    return overlaps(p, bytes, be->wc.w, all) || overlaps(p, bytes, be->wc.master, all);
}

void fp_bcu_wc_touch(fp_backend *be, const void *p, size_t bytes)
{
    if (be->wc.valid && wc_hit(be, p, bytes))
        be->wc.valid = 0;
}

/* The tensor holding float offset off: its index (nseg when none). */
static size_t wc_seg(const fp_backend *be, size_t off)
{
    size_t lo = 0, hi = be->wc.nseg;   /* the last start <= off */
    if (off >= be->wc.n || !hi)
        return be->wc.nseg;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (be->wc.start[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    return be->wc.start[lo] <= off ? lo : be->wc.nseg;
}

static size_t wc_seg_end(const fp_backend *be, size_t k)
{
    return k + 1 < be->wc.nseg ? be->wc.start[k + 1] : be->wc.n;
}

int fp_bcu_wc_view(fp_backend *be, const fp_tensor *t, fp_dtype rd, fp_dtensor *o)
{
    size_t off, cnt = fp_tensor_count(t), k;
    if (!be->wc.valid || t->dt != FP_DT_F32 || rd != be->wc.dt ||
        !inside(t->p, cnt * sizeof(float), be->wc.w, be->wc.n, &off) || (k = wc_seg(be, off)) == be->wc.nseg ||
        off + cnt > wc_seg_end(be, k))
        return 0;
    o->data = (char *)be->wc.copy + (be->wc.pos[k] + (off - be->wc.start[k])) * sizeof(uint16_t);
    o->dtype = rd;
    o->dims = t->d;
    return 1;
}

static void wc_drop(fp_backend *be)
{
    void *c = be->wc.copy;
    size_t n = be->wc.copy_n;
    free(be->wc.start);
    free(be->wc.pos);
    memset(&be->wc, 0, sizeof be->wc);
    fp_bcu_free(be, c, n * sizeof(uint16_t));
}

/* fp_bcu_free is about to give back bytes at p: when they hold weights or master weights, the copy goes with them. */
void fp_bcu_wc_freed(fp_backend *be, const void *p, size_t bytes)
{
    if (be->wc.copy && wc_hit(be, p, bytes))   /* its weights go: the copy with them */
        wc_drop(be);
}

/* The round op writes bytes of fp32 from src into dst in format `to`: the copy stays valid only when that rounds the
 * master weights in place, or into the weights at the same offset, to the copy's format. */
void fp_bcu_wc_round(fp_backend *be, const void *dst, const void *src, size_t bytes, fp_dtype to)
{
    size_t os, od;
    if (be->wc.valid && wc_hit(be, dst, bytes)) {   /* the copy casts the same after these two only */
        int keep = to == be->wc.dt && inside(src, bytes, be->wc.master, be->wc.n, &os) &&
                   (dst == src || (inside(dst, bytes, be->wc.w, be->wc.n, &od) && od == os));
        if (!keep)
            be->wc.valid = 0;
    }
}

int fp_backend_cuda_weight_copy(fp_backend *be, const float *w, const float *master, size_t n, fp_dtype dt,
                                const size_t *starts, size_t nstarts)
{
    if (w && (!master || !n || !fp_bcu_is16(dt) || !starts || !nstarts || starts[0] != 0))
        return fp_fail(FP_EINVAL, "cuda backend: a weight copy needs weights, master weights, n > 0, fp16 or bf16 "
                       "and its tensors' offsets from 0");
    for (size_t i = 1; w && i < nstarts; i++)
        if (starts[i] <= starts[i - 1] || starts[i] >= n)
            return fp_fail(FP_EINVAL, "cuda backend: weight copy tensor %zu at %zu after %zu of %zu values", i,
                           starts[i], starts[i - 1], n);
    if (w && w == be->wc.w && master == be->wc.master && n == be->wc.n && dt == be->wc.dt && nstarts == be->wc.nseg &&
        memcmp(starts, be->wc.start, nstarts * sizeof *starts) == 0)
        return FP_OK;
    wc_drop(be);
    if (!w)
        return FP_OK;
    size_t *st = malloc(nstarts * sizeof *st), *pos = malloc(nstarts * sizeof *pos), at = 0;
    if (!st || !pos) {
        free(st);
        free(pos);
        return fp_fail(FP_ENOMEM, "cuda backend: out of memory");
    }
    for (size_t i = 0; i < nstarts; i++) {   /* each tensor on FP_BCU_WC_ALIGN values */
        st[i] = starts[i];
        pos[i] = at;
        size_t len = (i + 1 < nstarts ? starts[i + 1] : n) - starts[i];
        at += (len + FP_BCU_WC_ALIGN - 1) / FP_BCU_WC_ALIGN * FP_BCU_WC_ALIGN;
    }
    void *c = NULL;
    int rc = fp_bcu_alloc(be, &c, at * sizeof(uint16_t));
    if (rc) {
        free(st);
        free(pos);
        return rc;
    }
    be->wc.w = w;
    be->wc.master = master;
    be->wc.n = n;
    be->wc.dt = dt;
    be->wc.nseg = nstarts;
    be->wc.start = st;
    be->wc.pos = pos;
    be->wc.copy_n = at;
    be->wc.copy = c;
    be->wc.valid = 0;
    return FP_OK;
}

void *fp_backend_cuda_weight_copy_at(fp_backend *be, const float *master_at)
{
    size_t off, k;
    if (!be->wc.copy || !inside(master_at, sizeof(float), be->wc.master, be->wc.n, &off) ||
        (k = wc_seg(be, off)) == be->wc.nseg)
        return NULL;
    return (char *)be->wc.copy + (be->wc.pos[k] + (off - be->wc.start[k])) * sizeof(uint16_t);
}

void *fp_backend_cuda_weight_copy_of(fp_backend *be, const float *master, fp_dtype *dt)
{
    if (!be->wc.copy || !master || master != be->wc.master)
        return NULL;
    if (dt)
        *dt = be->wc.dt;
    return be->wc.copy;
}

void fp_backend_cuda_weight_copy_written(fp_backend *be) { be->wc.valid = be->wc.copy != NULL; }

void fp_backend_cuda_weight_copy_invalidate(fp_backend *be) { be->wc.valid = 0; }

int fp_backend_cuda_weight_copy_valid(const fp_backend *be) { return be->wc.valid; }
