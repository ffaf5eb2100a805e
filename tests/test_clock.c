/* test_clock.c — lib/clock.h: the monotonic clock never goes back and its three units agree, the
 * wall clock is near time(NULL), fp_clock_timespec splits ns exactly. */
#include <time.h>
#include "clock.h"
#include "tap.h"

int main(void)
{
    int64_t a = fp_clock_mono_ns(), b = fp_clock_mono_ns();
    tap_ok(a > 0 && b >= a, "monotonic ns never goes back (%lld then %lld)", (long long)a, (long long)b);
    int64_t ms = fp_clock_mono_ms();
    double s = fp_clock_mono_s();
    int64_t c = fp_clock_mono_ns();
    tap_ok(ms >= b / FP_NS_PER_MS && ms <= c / FP_NS_PER_MS, "ms lies between the ns readings around it");
    tap_ok(s * 1e9 >= (double)b - 1e3 && s * 1e9 <= (double)c + 1e3, "seconds agree with ns (within 1 us of rounding)");
    time_t t = time(NULL);
    int64_t w = fp_clock_wall_ns();
    tap_ok(w / FP_NS_PER_S >= (int64_t)t - 1 && w / FP_NS_PER_S <= (int64_t)t + 1, "wall ns is within 1 s of time(NULL)");
    struct timespec ts = fp_clock_timespec(12 * FP_NS_PER_S + 345);
    tap_ok(ts.tv_sec == 12 && ts.tv_nsec == 345, "timespec of 12 s + 345 ns");
    return tap_done();
}
