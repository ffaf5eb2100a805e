/* clock.c — the project's clocks (clock.h): clock_gettime on CLOCK_MONOTONIC and CLOCK_REALTIME,
 * as int64_t ns, ms or double seconds, and on CLOCK_THREAD_CPUTIME_ID (-1 when it fails). */
#include "clock.h"

static int64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * FP_NS_PER_S + ts.tv_nsec;
}

int64_t fp_clock_mono_ns(void)
{
    return read_ns(CLOCK_MONOTONIC);
}

int64_t fp_clock_mono_ms(void)
{
    return read_ns(CLOCK_MONOTONIC) / FP_NS_PER_MS;
}

double fp_clock_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t fp_clock_wall_ns(void)
{
    return read_ns(CLOCK_REALTIME);
}

int64_t fp_clock_thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * FP_NS_PER_S + ts.tv_nsec;
}

struct timespec fp_clock_timespec(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / FP_NS_PER_S), (long)(ns % FP_NS_PER_S)};
    return ts;
}
