/* tap.h — a small Test Anything Protocol helper for fp16probe's test programs.
 * plan / ok / is_int / is_double (absolute + relative tolerance) / skip / diag; tap_done() returns
 * the process exit status: 0 only when every planned test ran and passed. */
#ifndef FP_TAP_H
#define FP_TAP_H

#include <stdint.h>

void tap_plan(int n);                          /* "1..n"; call once, first (or use tap_done_testing) */
void tap_skip_all(const char *reason);         /* "1..0 # SKIP reason" and exit(0) */
int  tap_ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int  tap_is_int(long long got, long long want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int  tap_is_uint(unsigned long long got, unsigned long long want, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Passes when |got - want| <= abs_tol + rel_tol * |want| (NaN equals NaN, Inf equals same Inf). */
int  tap_is_double(double got, double want, double abs_tol, double rel_tol, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int  tap_is_str(const char *got, const char *want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tap_skip(int count, const char *reason);  /* count "ok N # SKIP reason" lines */
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int  tap_done(void);                           /* exit status; prints the plan when none was given */

#endif
