/* clock.h — the project's clocks, in one place: monotonic time for durations and deadlines of
 * condition variables set to CLOCK_MONOTONIC, wall-clock (CLOCK_REALTIME) time for what the store
 * records, the calling thread's CPU time. Promise: the first two never fail (clock_gettime on these
 * clocks cannot fail on POSIX); the thread's CPU time says -1 where it cannot be had; ns are int64_t. */
#ifndef FP_CLOCK_H
#define FP_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic time (CLOCK_MONOTONIC): for durations only; its origin is arbitrary. */
int64_t fp_clock_mono_ns(void);
int64_t fp_clock_mono_ms(void);   /* fp_clock_mono_ns() / 1e6, truncated */
double fp_clock_mono_s(void);     /* seconds, with ns resolution */

/* Wall-clock time (CLOCK_REALTIME): ns since the Unix epoch, as the store records it. */
int64_t fp_clock_wall_ns(void);

/* The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID): user + system time this thread has run, not
 * its waits, nor other threads' (a thread pool's workers); its origin is arbitrary, so for differences
 * only. -1 where the system has no such clock. */
int64_t fp_clock_thread_cpu_ns(void);

/* ns (on either clock) as a timespec, e.g. the absolute deadline of pthread_cond_timedwait:
 * fp_clock_timespec(fp_clock_wall_ns() + 50 * FP_NS_PER_MS). ns must not be negative. */
struct timespec fp_clock_timespec(int64_t ns);

#define FP_NS_PER_S 1000000000LL
#define FP_NS_PER_MS 1000000LL

#endif
