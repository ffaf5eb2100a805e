/* units.c — human-readable numbers (units.h). Promise: NaN always reads "n/a". */
#include "units.h"
#include <math.h>
#include <stdio.h>

char *fp_fmt_ns(char *buf, double ns)
{
    if (isnan(ns) || ns < 0)
        snprintf(buf, FP_UNIT_BUF, "n/a");
    else if (ns >= 1e9)
        snprintf(buf, FP_UNIT_BUF, "%.3g s", ns / 1e9);
    else if (ns >= 1e6)
        snprintf(buf, FP_UNIT_BUF, "%.3g ms", ns / 1e6);
    else if (ns >= 1e3)
        snprintf(buf, FP_UNIT_BUF, "%.3g us", ns / 1e3);
    else
        snprintf(buf, FP_UNIT_BUF, "%.0f ns", ns);
    return buf;
}

char *fp_fmt_bytes(char *buf, double b)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (isnan(b) || b < 0) {
        snprintf(buf, FP_UNIT_BUF, "n/a");
        return buf;
    }
    int i = 0;
    while (b >= 1024 && i < 4)
        b /= 1024, i++;
    snprintf(buf, FP_UNIT_BUF, i ? "%.2f %s" : "%.0f %s", b, u[i]);
    return buf;
}

char *fp_fmt_ratio(char *buf, double x)
{
    if (!isfinite(x))
        snprintf(buf, FP_UNIT_BUF, "n/a");
    else
        snprintf(buf, FP_UNIT_BUF, "%.2fx", x);
    return buf;
}

char *fp_fmt_num(char *buf, double x, int prec)
{
    if (isnan(x))
        snprintf(buf, FP_UNIT_BUF, "n/a");
    else if (x != 0 && (fabs(x) >= 1e7 || fabs(x) < 1e-3))
        snprintf(buf, FP_UNIT_BUF, "%.3g", x);
    else
        snprintf(buf, FP_UNIT_BUF, "%.*f", prec, x);
    return buf;
}

char *fp_fmt_pct(char *buf, double frac)
{
    if (isnan(frac))
        snprintf(buf, FP_UNIT_BUF, "n/a");
    else
        snprintf(buf, FP_UNIT_BUF, "%.2f%%", 100.0 * frac);
    return buf;
}

char *fp_fmt_signed(char *buf, double x, int prec, const char *unit)
{
    if (isnan(x))
        snprintf(buf, FP_UNIT_BUF, "n/a");
    else
        snprintf(buf, FP_UNIT_BUF, "%+.*f%s%s", prec, x, unit && *unit ? " " : "", unit ? unit : "");
    return buf;
}
