/* thread_pool.h — one process-wide pool of persistent worker threads for the CPU kernels' loops.
 * Contract: fp_parallel_for splits [0, n) into fixed chunks (same n, align, threads: same ranges), run
 * by the caller and the workers, and returns once all are done; 1 thread (the default) runs inline. */
#ifndef FP_THREAD_POOL_H
#define FP_THREAD_POOL_H

#include <stddef.h>

/* Threads used by fp_parallel_for, the caller included (clamped to [1, 64]); workers are created on
 * first need and kept. Safe to call at any time (waits for a running loop). Returns the count set. */
int fp_pool_set_threads(int threads);
int fp_pool_threads(void);
/* Joins and frees the workers (the count stays; they are re-created on the next parallel loop). */
void fp_pool_shutdown(void);

/* Holds the pool (on != 0) or lets it go (on == 0); holds nest, each one let go exactly once. While
 * held, idle workers and a caller waiting for them spin ~5 ms instead of ~40 us before sleeping: for
 * stretches of many short loops with serial work between them (a step that samples tensors:
 * probe/probe.c), where a sleeping worker costs a wake-up of tens of us per loop and the caller then
 * runs the worker's chunks itself. Spinning burns a core only while no loop runs. */
void fp_pool_hold(int on);
int fp_pool_held(void);   /* the holds in effect (0: none) */

/* fn(ctx, begin, end) over [0, n) in contiguous chunks of at least min_part items (up to 4 per thread;
 * one call when n < 2 * min_part or one thread); every boundary is a multiple of `align` (>= 1). Chunks
 * run concurrently on any thread, so fn must only write what its range owns. When the pool is busy (a loop from another thread, or a nested call), the
 * whole range runs inline on the caller: kernels must give the same result for any partition. */
typedef void (*fp_range_fn)(void *ctx, size_t begin, size_t end);
void fp_parallel_for(size_t n, size_t align, size_t min_part, fp_range_fn fn, void *ctx);

/* The partition fp_parallel_for uses: part i of t over n items with boundaries on `align`. */
void fp_pool_part(size_t n, size_t align, int t, int i, size_t *begin, size_t *end);
/* The number of threads fp_parallel_for would use now (1: inline). */
int fp_pool_parts(size_t n, size_t min_part);

#endif
