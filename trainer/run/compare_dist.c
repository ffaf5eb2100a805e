/* compare_dist.c — a data-parallel comparison's figures (compare_internal.h, base.arm.dist): the 16-bit
 * all-reduce checked against fp32 at the plan's error steps, each step's figures gathered from every rank to
 * rank 0 (which keeps the slowest rank's and records every rank's), and the event that sums an arm's
 * all-reduce up at its end. Promise: a rank that disagrees with rank 0 about a skipped step is an error, not a
 * figure. */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "store.h"
#include "trainer/run/compare_internal.h"
#include "trainer/run/record.h"
#include "trainer/model.h"

/* Data parallel: the next step of arm a also measures its 16-bit all-reduce against fp32 (per layer). */
int fp_cmp_reduce_check_next(arm_state *a)
{
    if (!a->reduce_layers) {
        int nl = fp_model_layer_count(fp_arm_model(a->arm));
        if (!(a->reduce_layers = calloc(nl > 0 ? (size_t)nl : 1, sizeof *a->reduce_layers)))
            return fp_fail(FP_ENOMEM, "out of memory");
    }
    fp_arm_check_reduce_next(a->arm, a->reduce_layers);
    return FP_OK;
}

enum { DIST_FIGS = 5 };   /* per rank and step: total, all-reduce, exposed (ns), bytes, skipped */

/* Data parallel, after arm i's step on every rank: the ranks' step figures gathered to rank 0, which keeps the
 * slowest rank's (the step waits for it) and records every rank's. */
int fp_cmp_dist_step_figures(fp_compare *c, fp_compare_result *res, int i, const fp_arm_step_result *r)
{
    double mine[DIST_FIGS] = {(double)r->total_ns, (double)r->comm_ns, (double)r->comm_exposed_ns,
                              (double)r->comm_bytes, r->skipped}, *all = NULL;
    if (c->rank == 0 && !(all = calloc((size_t)c->ranks * DIST_FIGS, sizeof *all)))
        return fp_fail(FP_ENOMEM, "out of memory");
    int rc = fp_dist_gather_f64(c->dist, mine, DIST_FIGS, all);
    if (rc || c->rank != 0) {
        free(all);
        return rc;
    }
    arm_state *a = &c->arms[i];
    double tot = 0, comm = 0, exp = 0;
    for (int k = 0; k < c->ranks; k++) {
        const double *f = all + (size_t)k * DIST_FIGS;
        tot = f[0] > tot ? f[0] : tot;
        comm = f[1] > comm ? f[1] : comm;
        exp = f[2] > exp ? f[2] : exp;
        if (f[4] != r->skipped)   /* found-inf is reduced: a rank that disagrees is a bug, not a figure */
            rc = fp_fail(FP_EINTERNAL, "rank %d %s step %" PRId64 " that rank 0 %s", k, f[4] ? "skipped" : "took",
                         r->iteration + 1, r->skipped ? "skipped" : "took");
    }
    a->comm_ns += comm;
    a->exposed_ns += exp;
    a->compute_ns += tot;
    a->bytes += mine[3];
    if (!a->rank_ns && !(a->rank_ns = calloc((size_t)c->ranks, sizeof *a->rank_ns)))
        rc = fp_fail(FP_ENOMEM, "out of memory");
    for (int k = 0; a->rank_ns && k < c->ranks; k++)
        a->rank_ns[k] += all[(size_t)k * DIST_FIGS];
    /* every rank's row (dist_steps) and, at a checked step, the all-reduce's rounding (allreduce_error); a store
     * that failed says so in its status, polled after the step */
    if (c->store && a->run > 0) {
        fp_record_rank_step one[8], *rows = c->ranks <= 8 ? one : malloc((size_t)c->ranks * sizeof *rows);
        for (int k = 0; rows && k < c->ranks; k++) {
            const double *f = all + (size_t)k * DIST_FIGS;
            rows[k] = (fp_record_rank_step){.wall_ns = (int64_t)f[0], .comm_ns = (int64_t)f[1],
                                            .exposed_ns = (int64_t)f[2], .bytes = (int64_t)f[3], .skipped = f[4] != 0};
        }
        if (rows)
            fp_record_dist_step(c->store, a->run, r->iteration + 1, rows, c->ranks);
        if (rows != one)
            free(rows);
        fp_record_allreduce_error(c->store, a->run, a->arm, r, a->reduce_layers);
    }
    if (!isnan(r->reduce_rel_l2)) {
        res->arms[i].reduce_rel_l2 = r->reduce_rel_l2;
        a->reduce_step = r->iteration + 1;
        a->reduce_over = r->reduce_overflow;
        a->reduce_under = r->reduce_underflow;
    }
    free(all);
    return rc;
}

/* Data parallel, rank 0, at the end of arm i: one event with the ranks, the global batch, the all-reduce's
 * format, time, exposed share and bytes, each rank's mean step (the straggler) and the last measured 16-bit
 * rounding. */
void fp_cmp_dist_summary_event(fp_compare *c, const fp_compare_result *res, int i)
{
    arm_state *a = &c->arms[i];
    const fp_compare_arm_result *ar = &res->arms[i];
    if (c->ranks < 2 || c->rank != 0 || !c->store || !a->arm || a->steps_here == 0)
        return;
    char text[900];
    size_t len = (size_t)snprintf(text, sizeof text, "data parallel: %d ranks, global batch %d, all-reduce %s "
                                  "%.3f ms/step (exposed %.3f ms, %.1f%% of the step), %.0f bytes/step per rank; "
                                  "mean step per rank:", c->ranks, c->cfg.base.batch * c->ranks,
                                  fp_dtype_name(fp_arm_allreduce_dtype(a->arm)), ar->comm_ms, ar->exposed_ms,
                                  100 * ar->comm_share, ar->comm_bytes);
    for (int k = 0; a->rank_ns && k < c->ranks && len < sizeof text; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, " r%d %.3f ms", k,
                                a->rank_ns[k] / 1e6 / (double)a->steps_here);
    if (a->reduce_step > 0 && len < sizeof text)
        snprintf(text + len, sizeof text - len, "; all-reduce rounding vs fp32 at step %" PRId64 ": rel. L2 %.3g, "
                 "%" PRId64 " overflowed, %" PRId64 " flushed to zero", a->reduce_step, ar->reduce_rel_l2,
                 a->reduce_over, a->reduce_under);
    fp_store_event(c->store, a->run, 0, ar->steps_done, -1, FP_EVENT_INFO, text);
}
