/* summary_internal.h — what loading a summary shares, internal to reports/summary*.c: one arm read and
 * derived on its own (summary_arm.c), then its numerics against the reference arm (summary_numerics.c);
 * summary.c loads the session and puts them in order (summary.h fp_summary_load). */
#ifndef FP_REPORTS_SUMMARY_INTERNAL_H
#define FP_REPORTS_SUMMARY_INTERNAL_H

#include <stdint.h>
#include "store_reader.h"
#include "summary.h"

/* Reads arm a's rows (a->run set) and derives every figure that needs no other arm; warmup_req < 0: the
 * default rule. FP_OK or the reader's error (what was allocated stays in a, for fp_summary_free). */
int fp_summary_load_arm(fp_reader_t *r, fp_arm_t *a, int64_t warmup_req);
/* Per role and layer overflow / underflow in the shown format, the flushed zeros of a low-precision arm
 * against the reference R, the per-role tops and the headline over the roles that matter. FP_OK or
 * FP_ENOMEM. */
int fp_summary_account(fp_arm_t *a, const fp_arm_t *R);

#endif
