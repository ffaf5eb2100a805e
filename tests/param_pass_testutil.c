/* param_pass_testutil.c — the parameter-pass tests' probes side by side and their comparison
 * (param_pass_testutil.h). Promise: every difference found is named in a diagnostic, none stops the comparison. */
#include "param_pass_testutil.h"
#include <math.h>
#include "hist.h"
#include "hist_ref.h"
#include "tap.h"

void pp_probe_open(pp_probe_t *t, int L, int64_t step, float scale)
{
    fp_probe_create(&t->p);
    fp_hist_probe_create(&t->hp, L, 1, 0, NULL, 0);
    fp_hist_probe_attach(t->hp, t->p);
    fp_probe_caller_roles(t->p, FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT) | FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD));
    fp_probe_step_begin(t->p, step, scale);
}

void pp_probe_close(pp_probe_t *t)
{
    fp_probe_free(t->p);
    fp_hist_probe_free(t->hp);
}

int pp_same_double(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

int pp_same_pass(const pp_probe_t *h, const pp_probe_t *dv, double all_h, double all_d, const double *per_h,
                 const double *per_d, int L, double sum_abs_tol, int *cells)
{
    int ok = pp_same_double(all_h, all_d);
    if (!ok)
        tap_diag("overall lost fraction: host %.17g, device %.17g", all_h, all_d);
    for (int l = 0; l < L; l++) {
        if (!pp_same_double(per_h[l], per_d[l])) {
            ok = 0;
            tap_diag("layer %d lost fraction: host %.17g, device %.17g", l, per_h[l], per_d[l]);
        }
        const fp_tensor_role roles[] = {FP_ROLE_WEIGHT, FP_ROLE_WEIGHT_GRAD, FP_ROLE_UPDATE};
        for (int r = 0; r < 3; r++) {
            const fp_hist_t *a = fp_hist_probe_get(h->hp, l, roles[r]), *b = fp_hist_probe_get(dv->hp, l, roles[r]);
            if (!a || !b) {
                ok &= !a && !b;
                continue;
            }
            ++*cells;
            if (!tu_hist_same(b, a, sum_abs_tol)) {
                ok = 0;
                tap_diag("layer %d role %d differs (device / host):", l, (int)roles[r]);
                tu_hist_diag(b, a);
            }
        }
    }
    return ok;
}
