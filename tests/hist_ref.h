/* hist_ref.h — an independent reference for lib/hist.h, written with double comparisons against the
 * format limits (no bit tricks), for the histogram tests to compare every kernel with, and the
 * comparison of two histograms with its diagnostics. */
#ifndef FP_TESTS_HIST_REF_H
#define FP_TESTS_HIST_REF_H

#include <stddef.h>
#include "hist.h"

/* The class of a finite nonzero |x| = ax in format fi, by hist.h's definitions. */
int tu_ref_class(double ax, const fp_format_info_t *fi);
/* The histogram of x[0..n) from scratch (h is initialised): counts, binades (frexp), classes, amax,
 * min_nonzero, and sum_abs summed in long double. */
void tu_ref_hist(fp_hist_t *h, const float *x, size_t n);
/* 1 when every field of got equals want's, sum_abs within rel_tol relative (0: identical). */
int tu_hist_same(const fp_hist_t *got, const fp_hist_t *want, double rel_tol);
/* TAP diagnostics naming every field where got differs from want. */
void tu_hist_diag(const fp_hist_t *got, const fp_hist_t *want);

#endif
