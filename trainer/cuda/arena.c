/* arena.c — the per-arm device arena (arena.h): a sorted list of chunks (offset, size, free) over one
 * block, first-fit allocation with splitting, coalescing on release, current / peak byte counts.
 * Promise: the bookkeeping never reads or writes the block, so the same code serves a cudaMalloc'd
 * block and a host block in the CPU tests; cudaMalloc (never managed memory) only in new_device. */
#include "config.h"
#include "trainer/cuda/arena.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct {
    size_t off, size;
    int free;
} chunk_t;

struct fp_arena {
    char name[64];
    unsigned char *base;   /* first usable byte (aligned) */
    void *owned;           /* the cudaMalloc'd block, freed with the arena; NULL when the caller's */
    size_t size, in_use, peak, live;
    chunk_t *c;            /* sorted by offset, covering [0, size) without gaps */
    size_t n, cap;
};

char *fp_arena_format_bytes(size_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0 || v == (double)(uint64_t)v)
        snprintf(buf, cap, "%.0f %s", v, units[u]);
    else {
        snprintf(buf, cap, "%.1f %s", v, units[u]);
        char *dot = strstr(buf, ".0 ");   /* "40.0 GiB" from rounding: drop the ".0" */
        if (dot)
            memmove(dot, dot + 2, strlen(dot + 2) + 1);
    }
    return buf;
}

static int grow(fp_arena *a)
{
    if (a->n < a->cap)
        return FP_OK;
    size_t nc = a->cap ? 2 * a->cap : 64;
    chunk_t *c = realloc(a->c, nc * sizeof *c);
    if (!c)
        return fp_fail(FP_ENOMEM, "arena %s: out of host memory for its bookkeeping", a->name);
    a->c = c;
    a->cap = nc;
    return FP_OK;
}

int fp_arena_new_over(fp_arena **out, void *block, size_t size, const char *name)
{
    if (!out || !block)
        return fp_fail(FP_EINVAL, "fp_arena_new_over: NULL %s", out ? "block" : "output");
    *out = NULL;
    fp_arena *a = calloc(1, sizeof *a);
    if (!a)
        return fp_fail(FP_ENOMEM, "arena: out of host memory");
    snprintf(a->name, sizeof a->name, "%s", name && *name ? name : "(unnamed)");
    uintptr_t p = (uintptr_t)block, q = (p + FP_ARENA_ALIGN - 1) & ~(uintptr_t)(FP_ARENA_ALIGN - 1);
    size_t skip = (size_t)(q - p);
    a->base = (unsigned char *)q;
    a->size = size > skip ? (size - skip) & ~(size_t)(FP_ARENA_ALIGN - 1) : 0;
    if (a->size) {
        if (grow(a) != FP_OK) {
            free(a);
            return FP_ENOMEM;
        }
        a->c[0] = (chunk_t){0, a->size, 1};
        a->n = 1;
    }
    *out = a;
    return FP_OK;
}

int fp_arena_new_device(fp_arena **out, size_t size, const char *name)
{
    if (!out)
        return fp_fail(FP_EINVAL, "fp_arena_new_device: NULL output");
    *out = NULL;
#ifdef HAVE_CUDA
    char sz[32];
    void *block = NULL;
    cudaError_t err = cudaMalloc(&block, size);
    if (err != cudaSuccess) {
        cudaGetLastError();   /* an allocation failure is not sticky: clear it for the next caller */
        /* out of memory is FP_ENOMEM; no driver / no device / anything else: the GPU is unavailable */
        return fp_fail(err == cudaErrorMemoryAllocation ? FP_ENOMEM : FP_EUNAVAIL,
                       "arena %s: cudaMalloc of %zu bytes (%s) failed: %s", name ? name : "(unnamed)", size,
                       fp_arena_format_bytes(size, sz, sizeof sz), cudaGetErrorString(err));
    }
    int rc = fp_arena_new_over(out, block, size, name);
    if (rc != FP_OK) {
        cudaFree(block);
        return rc;
    }
    (*out)->owned = block;
    return FP_OK;
#else
    (void)size;
    return fp_fail(FP_EUNAVAIL, "arena %s: built without CUDA", name ? name : "(unnamed)");
#endif
}

void fp_arena_free_all(fp_arena *a)
{
    if (!a)
        return;
#ifdef HAVE_CUDA
    if (a->owned)
        cudaFree(a->owned);
#endif
    free(a->c);
    free(a);
}

size_t fp_arena_largest_free(const fp_arena *a)
{
    size_t m = 0;
    for (size_t i = 0; a && i < a->n; i++)
        if (a->c[i].free && a->c[i].size > m)
            m = a->c[i].size;
    return m;
}

int fp_arena_alloc(fp_arena *a, size_t bytes, const char *what, void **out)
{
    if (!a || !out)
        return fp_fail(FP_EINVAL, "fp_arena_alloc: NULL %s", a ? "output" : "arena");
    *out = NULL;
    const char *who = what && *what ? what : "(unnamed)";
    size_t need = bytes ? bytes : 1;
    if (need > SIZE_MAX - (FP_ARENA_ALIGN - 1))
        need = SIZE_MAX;   /* cannot be satisfied: reported below */
    else
        need = (need + FP_ARENA_ALIGN - 1) & ~(size_t)(FP_ARENA_ALIGN - 1);
    size_t i = 0;
    while (i < a->n && !(a->c[i].free && a->c[i].size >= need))
        i++;
    if (i == a->n) {
        char s1[32], s2[32], s3[32];
        return fp_fail(FP_ENOMEM, "%s: out of device memory asking for %zu bytes (arena %s: %s, %s in use, "
                       "largest free block %s)", who, bytes, a->name, fp_arena_format_bytes(a->size, s1, sizeof s1),
                       fp_arena_format_bytes(a->in_use, s2, sizeof s2),
                       fp_arena_format_bytes(fp_arena_largest_free(a), s3, sizeof s3));
    }
    if (a->c[i].size > need) {   /* split: the rest stays free after it */
        int rc = grow(a);
        if (rc != FP_OK)
            return rc;
        memmove(&a->c[i + 2], &a->c[i + 1], (a->n - i - 1) * sizeof *a->c);
        a->c[i + 1] = (chunk_t){a->c[i].off + need, a->c[i].size - need, 1};
        a->c[i].size = need;
        a->n++;
    }
    a->c[i].free = 0;
    a->in_use += need;
    a->live++;
    if (a->in_use > a->peak)
        a->peak = a->in_use;
    *out = a->base + a->c[i].off;
    return FP_OK;
}

int fp_arena_release(fp_arena *a, void *p)
{
    if (!p)
        return FP_OK;
    if (!a)
        return fp_fail(FP_EINVAL, "fp_arena_release: NULL arena");
    unsigned char *q = p;
    if (q < a->base || q >= a->base + a->size)
        return fp_fail(FP_EINVAL, "arena %s: release of %p, which is not in the arena", a->name, p);
    size_t off = (size_t)(q - a->base), lo = 0, hi = a->n;
    while (hi - lo > 1) {   /* the last chunk with c.off <= off */
        size_t mid = lo + (hi - lo) / 2;
        if (a->c[mid].off <= off)
            lo = mid;
        else
            hi = mid;
    }
    size_t i = lo;
    if (a->c[i].off != off || a->c[i].free)
        return fp_fail(FP_EINVAL, "arena %s: release of %p, which is not a live allocation (offset %zu%s)", a->name, p,
                       off, a->c[i].off == off ? ", already released" : "");
    a->c[i].free = 1;
    a->in_use -= a->c[i].size;
    a->live--;
    if (i + 1 < a->n && a->c[i + 1].free) {   /* merge with the next */
        a->c[i].size += a->c[i + 1].size;
        memmove(&a->c[i + 1], &a->c[i + 2], (a->n - i - 2) * sizeof *a->c);
        a->n--;
    }
    if (i > 0 && a->c[i - 1].free) {   /* and the previous */
        a->c[i - 1].size += a->c[i].size;
        memmove(&a->c[i], &a->c[i + 1], (a->n - i - 1) * sizeof *a->c);
        a->n--;
    }
    return FP_OK;
}

size_t fp_arena_size(const fp_arena *a) { return a ? a->size : 0; }
size_t fp_arena_in_use(const fp_arena *a) { return a ? a->in_use : 0; }
size_t fp_arena_peak(const fp_arena *a) { return a ? a->peak : 0; }
size_t fp_arena_live(const fp_arena *a) { return a ? a->live : 0; }
void fp_arena_reset_peak(fp_arena *a)
{
    if (a)
        a->peak = a->in_use;
}
void *fp_arena_base(const fp_arena *a) { return a ? a->base : NULL; }
