/* thread_pool.c — the persistent worker pool behind fp_parallel_for (pthreads, no work stealing).
 * Promises: fixed chunks (same ranges for the same n, align and thread count) claimed in turn by the
 * caller and the workers, one loop at a time (busy pool / nested call: inline), workers sleep between
 * (after a short spin; a longer one while the pool is held). */
#include "thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define POOL_MAX 64
#define CALLER_SPIN 2000   /* pause iterations the caller waits for the workers before sleeping */
#define POOL_SPIN 2000     /* pause iterations a worker waits for the next loop before sleeping */
#define HOLD_SPIN 250000   /* the same while the pool is held (fp_pool_hold): ~5 ms */

static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;   /* held for a whole loop / reconfiguration */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;          /* guards sleeping and waking */
static pthread_cond_t go_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static atomic_int want = 1;          /* threads configured, the caller included */
static int nworkers;                 /* workers running (under call_lock) */
static pthread_t tids[POOL_MAX];
static atomic_int stop;
/* The current loop's chunk counter: generation << 32 | next chunk << 16 | chunk count. A thread owns
 * chunk k of generation g by moving next from k to k + 1 with a CAS; the caller publishes a new
 * generation only once `done` reaches the chunk count, so job is stable for every owner. */
static _Atomic uint64_t claim;
static atomic_uint done;
static int sleepers;                 /* workers waiting on go_cv (under mu) */
static int caller_sleeping;          /* the caller waits on done_cv (under mu) */
static int spin_limit = -1;          /* pause iterations before sleeping (FP_POOL_SPIN) */
static atomic_int held;              /* fp_pool_hold's count */

static struct {
    fp_range_fn fn;
    void *ctx;
    size_t n, align;
} job;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void fp_pool_part(size_t n, size_t align, int t, int i, size_t *begin, size_t *end)
{
    if (align < 1)
        align = 1;
    if (t < 1)
        t = 1;
    size_t units = n / align + (n % align != 0);
    size_t b = units * (size_t)i / (size_t)t * align, e = units * (size_t)(i + 1) / (size_t)t * align;
    *begin = b < n ? b : n;
    *end = e < n ? e : n;
}

int fp_pool_parts(size_t n, size_t min_part)
{
    int t = atomic_load_explicit(&want, memory_order_relaxed);
    if (min_part < 1)
        min_part = 1;
    size_t most = n / min_part;
    if (most < (size_t)t)
        t = most < 1 ? 1 : (int)most;
    return t;
}

/* Pause iterations a thread waits for the pool before sleeping: HOLD_SPIN while the pool is held. */
static int idle_spin(void)
{
    return atomic_load_explicit(&held, memory_order_relaxed) > 0 ? HOLD_SPIN : spin_limit;
}

void fp_pool_hold(int on)
{
    atomic_fetch_add(&held, on ? 1 : -1);
}

int fp_pool_held(void)
{
    return atomic_load(&held);
}

/* Claims and runs chunks of generation g until none is left; returns the chunks run. */
static unsigned run_chunks(uint32_t g)
{
    unsigned ran = 0;
    uint64_t c = atomic_load(&claim);
    for (;;) {
        unsigned next = (unsigned)(c >> 16) & 0xffffu, total = (unsigned)c & 0xffffu;
        if ((uint32_t)(c >> 32) != g || next >= total)
            return ran;
        if (!atomic_compare_exchange_weak(&claim, &c, c + ((uint64_t)1 << 16)))
            continue;
        size_t b, e;
        fp_pool_part(job.n, job.align, (int)total, (int)next, &b, &e);
        if (e > b)
            job.fn(job.ctx, b, e);
        ran++;
        if (atomic_fetch_add(&done, 1) + 1 == total) {
            pthread_mutex_lock(&mu);
            if (caller_sleeping)
                pthread_cond_signal(&done_cv);
            pthread_mutex_unlock(&mu);
        }
        c = atomic_load(&claim);
    }
}

static void *worker_main(void *arg)
{
    uint32_t seen = (uint32_t)(uintptr_t)arg;   /* the generation current when the worker started */
    for (;;) {
        uint32_t g = (uint32_t)(atomic_load(&claim) >> 32);
        for (int s = idle_spin(); g == seen && s > 0 && !atomic_load_explicit(&stop, memory_order_relaxed); s--) {
            cpu_relax();
            g = (uint32_t)(atomic_load(&claim) >> 32);
        }
        if (g == seen) {
            pthread_mutex_lock(&mu);
            sleepers++;
            while ((g = (uint32_t)(atomic_load(&claim) >> 32)) == seen && !atomic_load(&stop))
                pthread_cond_wait(&go_cv, &mu);
            sleepers--;
            pthread_mutex_unlock(&mu);
        }
        if (atomic_load(&stop))
            return NULL;
        seen = g;
        run_chunks(g);
    }
}

/* Under call_lock. */
static void stop_workers(void)
{
    if (!nworkers)
        return;
    pthread_mutex_lock(&mu);
    atomic_store(&stop, 1);
    pthread_cond_broadcast(&go_cv);
    pthread_mutex_unlock(&mu);
    for (int i = 1; i <= nworkers; i++)
        pthread_join(tids[i], NULL);
    nworkers = 0;
    atomic_store(&stop, 0);
}

/* Under call_lock: makes `count` workers run (fewer when pthread_create fails); returns the count. */
static int start_workers(int count)
{
    if (spin_limit < 0) {
        const char *env = getenv("FP_POOL_SPIN");
        /* Default POOL_SPIN (~40 us): the loops of a step (GEMM blocks, batchnorm, elementwise, the
         * probes' histogram chunks) mostly follow one another closer than that, and a sleeping worker
         * costs a futex wake-up (tens of us on a VM) per loop; longer spins only burn a core the
         * caller's serial code between loops could use. */
        spin_limit = env ? atoi(env) : POOL_SPIN;
        if (spin_limit < 0)
            spin_limit = 0;
    }
    if (nworkers > count)
        stop_workers();
    while (nworkers < count) {
        int idx = nworkers + 1;
        uintptr_t g = (uintptr_t)(uint32_t)(atomic_load(&claim) >> 32);
        if (pthread_create(&tids[idx], NULL, worker_main, (void *)g) != 0)
            break;
        nworkers++;
    }
    return nworkers;
}

int fp_pool_set_threads(int threads)
{
    if (threads < 1)
        threads = 1;
    if (threads > POOL_MAX)
        threads = POOL_MAX;
    pthread_mutex_lock(&call_lock);
    atomic_store(&want, threads);
    if (nworkers > threads - 1)
        stop_workers();
    pthread_mutex_unlock(&call_lock);
    return threads;
}

int fp_pool_threads(void)
{
    return atomic_load(&want);
}

void fp_pool_shutdown(void)
{
    pthread_mutex_lock(&call_lock);
    stop_workers();
    pthread_mutex_unlock(&call_lock);
}

void fp_parallel_for(size_t n, size_t align, size_t min_part, fp_range_fn fn, void *ctx)
{
    if (n == 0)
        return;
    int t = fp_pool_parts(n, min_part);
    if (t <= 1 || pthread_mutex_trylock(&call_lock) != 0) {
        fn(ctx, 0, n);
        return;
    }
    int w = start_workers(atomic_load(&want) - 1);
    if (t > w + 1)
        t = w + 1;
    if (t <= 1) {
        pthread_mutex_unlock(&call_lock);
        fn(ctx, 0, n);
        return;
    }
    /* More chunks than threads, so a late or descheduled worker leaves its share to the others. */
    size_t most = n / (min_part < 1 ? 1 : min_part);
    unsigned total = (unsigned)(4 * t);
    if (most < total)
        total = most < (size_t)t ? (unsigned)t : (unsigned)most;
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.align = align < 1 ? 1 : align;
    atomic_store(&done, 0);
    uint32_t g = (uint32_t)(atomic_load(&claim) >> 32) + 1;
    pthread_mutex_lock(&mu);
    atomic_store(&claim, (uint64_t)g << 32 | total);
    if (sleepers)
        pthread_cond_broadcast(&go_cv);
    pthread_mutex_unlock(&mu);
    run_chunks(g);
    for (int s = CALLER_SPIN + idle_spin(); atomic_load(&done) < total && s > 0; s--)
        cpu_relax();
    if (atomic_load(&done) < total) {
        pthread_mutex_lock(&mu);
        caller_sleeping = 1;
        while (atomic_load(&done) < total)
            pthread_cond_wait(&done_cv, &mu);
        caller_sleeping = 0;
        pthread_mutex_unlock(&mu);
    }
    pthread_mutex_unlock(&call_lock);
}
