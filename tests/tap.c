/* tap.c — implementation of tap.h: prints TAP 13 lines to stdout, diagnostics to stdout as "# ".
 * Promise: a failed check prints what was expected and what was got; tap_done() is non-zero on any
 * failure or when the number of tests run differs from the plan. */
#include "tap.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int planned = -1;
static int run_count;
static int failed_count;

void tap_plan(int n)
{
    planned = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

void tap_skip_all(const char *reason)
{
    printf("1..0 # SKIP %s\n", reason);
    fflush(stdout);
    exit(0);
}

static int report(int cond, const char *fmt, va_list ap)
{
    run_count++;
    if (!cond)
        failed_count++;
    printf("%sok %d - ", cond ? "" : "not ", run_count);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    return cond;
}

int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = report(cond, fmt, ap);
    va_end(ap);
    return r;
}

int tap_is_int(long long got, long long want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = report(got == want, fmt, ap);
    va_end(ap);
    if (!r)
        tap_diag("  got: %lld, expected: %lld", got, want);
    return r;
}

int tap_is_uint(unsigned long long got, unsigned long long want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = report(got == want, fmt, ap);
    va_end(ap);
    if (!r)
        tap_diag("  got: %llu (0x%llx), expected: %llu (0x%llx)", got, got, want, want);
    return r;
}

int tap_is_double(double got, double want, double abs_tol, double rel_tol, const char *fmt, ...)
{
    int cond;
    if (isnan(want))
        cond = isnan(got);
    else if (isinf(want))
        cond = got == want;
    else
        cond = fabs(got - want) <= abs_tol + rel_tol * fabs(want);
    va_list ap;
    va_start(ap, fmt);
    int r = report(cond, fmt, ap);
    va_end(ap);
    if (!r)
        tap_diag("  got: %.17g, expected: %.17g (abs tol %g, rel tol %g)", got, want, abs_tol, rel_tol);
    return r;
}

int tap_is_str(const char *got, const char *want, const char *fmt, ...)
{
    int cond = (got == NULL && want == NULL) || (got && want && strcmp(got, want) == 0);
    va_list ap;
    va_start(ap, fmt);
    int r = report(cond, fmt, ap);
    va_end(ap);
    if (!r)
        tap_diag("  got: '%s', expected: '%s'", got ? got : "(null)", want ? want : "(null)");
    return r;
}

void tap_skip(int count, const char *reason)
{
    for (int i = 0; i < count; i++) {
        run_count++;
        printf("ok %d # SKIP %s\n", run_count, reason);
    }
    fflush(stdout);
}

void tap_diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stdout);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    fflush(stdout);
}

int tap_done(void)
{
    if (planned < 0) {
        printf("1..%d\n", run_count);
        planned = run_count;
    } else if (planned != run_count) {
        tap_diag("planned %d tests but ran %d", planned, run_count);
        return 1;
    }
    if (failed_count)
        tap_diag("%d of %d tests failed", failed_count, run_count);
    return failed_count ? 1 : 0;
}
