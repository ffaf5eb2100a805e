/* units.h — numbers as people read them in reports, tables and the gate: durations, bytes, ratios,
 * percentages; NaN (not measured) prints as "n/a", never as 0. Results go into a caller's buffer. */
#ifndef FP_REPORTS_UNITS_H
#define FP_REPORTS_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define FP_UNIT_BUF 48
char *fp_fmt_ns(char *buf, double ns);          /* "61.2 ms", "830 us", "1.52 s" */
char *fp_fmt_bytes(char *buf, double bytes);    /* "1.50 GiB"; < 0 or NaN: n/a */
char *fp_fmt_ratio(char *buf, double x);        /* "1.84x" */
char *fp_fmt_num(char *buf, double x, int prec);   /* %.*f, or %.3g for very large / small */
char *fp_fmt_pct(char *buf, double frac);       /* 0.0123 -> "1.23%" */
char *fp_fmt_signed(char *buf, double x, int prec, const char *unit);   /* "+0.012", "-0.3 pt" */

#endif
