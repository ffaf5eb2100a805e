/* compare_eval.c — an arm evaluated in the training loop (compare_internal.h): at the steps its plan marks and
 * after its last, on the same validation batches for every arm (record.c's fp_record_eval), recorded and
 * reported as a progress line. Promise: the evaluation's time and energy are left out of the steps' (a GPU
 * arm's turn energy is read again after it). */
#include "config.h"
#include "error.h"
#include "trainer/run/compare_internal.h"
#include "trainer/run/record.h"

int fp_cmp_has_val(const fp_compare *c)
{
    return fp_dataset_size(c->ds, FP_SPLIT_VAL) > 0;
}

int fp_cmp_evaluate(fp_compare *c, fp_compare_result *res, int i, int64_t step, double t0)
{
    arm_state *a = &c->arms[i];
    fp_compare_arm_result *ar = &res->arms[i];
    int rc = fp_cmp_flush_steps(c, a);   /* a GPU arm's steps so far get their energy; the evaluation's is left out */
    if (rc)
        return rc;
    rc = fp_record_eval(c->store, a->run, a->arm, c->ds, &c->cfg.base, step, &ar->val_loss, &ar->val_top1,
                        &ar->val_top5);
    if (rc)
        return rc;
    if (fp_cmp_defers_steps(c, a))
        a->turn_e0 = fp_cmp_synced_energy_j(c, a);
    fp_cmp_progress_eval(c, res, i, step, t0);
    return FP_OK;
}
