/* param_pass_testutil.h — the parameter-pass tests' two probes side by side: one for the host pass
 * (fp_probe_sample_params), one for the pass where the parameters lie (fp_param_dev), each with a histogram probe
 * taking every role of one step, and the check that both recorded the same figures. */
#ifndef FP_PARAM_PASS_TESTUTIL_H
#define FP_PARAM_PASS_TESTUTIL_H

#include <stdint.h>
#include "probe/probe.h"

typedef struct {
    fp_probe *p;
    fp_hist_probe *hp;
} pp_probe_t;

/* A probe over L layers at `step` with loss scale `scale`, histogramming weights and weight gradients for the
 * caller (the pass adds updates); fp_probe_step_end(t->p) completes its histograms. */
void pp_probe_open(pp_probe_t *t, int L, int64_t step, float scale);
void pp_probe_close(pp_probe_t *t);
/* a == b, or both NaN. */
int pp_same_double(double a, double b);
/* The host pass's figures (h, all_h, per_h) against the device pass's (dv, all_d, per_d): the overall and every
 * layer's lost-update fraction bit for bit, and each layer's weight, weight-gradient and update histograms
 * (every count, amax and min_nonzero exact; sum_abs to sum_abs_tol relative: another summation order). Each
 * difference is a TAP diagnostic; *cells counts the histograms compared. */
int pp_same_pass(const pp_probe_t *h, const pp_probe_t *dv, double all_h, double all_d, const double *per_h,
                 const double *per_d, int L, double sum_abs_tol, int *cells);

#endif
