/* arena.h — one device block per training arm (a single cudaMalloc, never managed memory) carved into
 * 256-byte-aligned sub-allocations, with current / peak accounting and out-of-memory errors that say
 * who asked for how much. The bookkeeping works over any block (fp_arena_new_over), so it is tested
 * on the CPU with a host block; fp_arena_new_device adds the cudaMalloc. Not thread-safe. */
#ifndef FP_CUDA_ARENA_H
#define FP_CUDA_ARENA_H

#include <stddef.h>

#define FP_ARENA_ALIGN 256   /* every sub-allocation starts on a multiple of this (cudaMalloc's own) */

typedef struct fp_arena fp_arena;

/* Bookkeeping over block[0 .. size) (host or device memory; the arena never touches the bytes):
 * the usable part starts at the first FP_ARENA_ALIGN boundary. name (copied) names the arena in
 * messages ("fp16 arm"). The block stays the caller's. FP_EINVAL for a NULL block / out, FP_ENOMEM. */
int fp_arena_new_over(fp_arena **out, void *block, size_t size, const char *name);

/* One cudaMalloc of size bytes, owned by the arena (freed by fp_arena_free_all). When it fails, a
 * message naming the arena, the size and the CUDA error, with FP_ENOMEM for out of device memory and
 * FP_EUNAVAIL for any other CUDA error (no driver, no device) and in a build without CUDA. */
int fp_arena_new_device(fp_arena **out, size_t size, const char *name);

/* Releases the bookkeeping and, for a device arena, the block. NULL is fine. */
void fp_arena_free_all(fp_arena *a);

/* A sub-allocation of bytes (rounded up to FP_ARENA_ALIGN; 0 gives one unit) for `what` (a tensor
 * or layer name, used only in the message). First fit in address order. On failure: FP_ENOMEM and
 * "<what>: out of device memory asking for <bytes> bytes (arena <name>: 40 GiB, 39.9 GiB in use,
 * largest free block 12 MiB)"; *out is NULL. */
int fp_arena_alloc(fp_arena *a, size_t bytes, const char *what, void **out);

/* Returns p (from fp_arena_alloc on this arena) to the free space, merging it with free
 * neighbours. NULL is a no-op; anything else not live here is FP_EINVAL (double free included). */
int fp_arena_release(fp_arena *a, void *p);

size_t fp_arena_size(const fp_arena *a);       /* usable bytes */
size_t fp_arena_in_use(const fp_arena *a);     /* bytes of live sub-allocations (rounded sizes) */
size_t fp_arena_peak(const fp_arena *a);       /* most bytes in use since creation / reset_peak */
size_t fp_arena_live(const fp_arena *a);       /* number of live sub-allocations */
size_t fp_arena_largest_free(const fp_arena *a);
void fp_arena_reset_peak(fp_arena *a);         /* peak = in use */
void *fp_arena_base(const fp_arena *a);        /* first usable byte */

/* "40 GiB", "39.9 GiB", "512 B": bytes in binary units, one decimal when not whole; buf of cap
 * bytes; returns buf. */
char *fp_arena_format_bytes(size_t bytes, char *buf, size_t cap);

#endif
