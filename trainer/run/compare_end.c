/* compare_end.c — the end of a training loop's run (compare_internal.h), stopped or not: each arm's last
 * evaluation, checkpoint and weights, its run closed finished, interrupted or failed; the result's figures (mean
 * step, the all-reduce's) and the events that sum an arm up (data parallel, the CUDA graph, fusion); the session
 * closed with the run's status. Promises: a stopped arm keeps its checkpoint and weights as they stand; a store that
 * failed fails every arm still running with one message naming the last step; a failure on any rank is the
 * job's. */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include "error.h"
#include "store.h"
#include "trainer/run/compare_internal.h"
#include "trainer/run/step_plan.h"

/* At the run's end (or a stop): arm i's last checkpoint and its weights, when asked for; 1 when that failed
 * (the arm is then marked failed). */
static int keep_arm(fp_compare *c, fp_compare_result *res, int i)
{
    if (c->rank != 0)
        return 0;
    if (!fp_step_plan_for(&c->cfg, c->cfg.base.steps, c->cfg.base.steps).checkpoint && !c->cfg.base.save)
        return 0;
    int rc = fp_cmp_checkpoint(c, i);
    if (rc == FP_OK && c->cfg.base.save)
        rc = fp_model_save(fp_arm_model(c->arms[i].arm), c->cfg.base.save);
    if (rc)
        fp_cmp_arm_fail(c, res, i, fp_error_message());
    return rc != FP_OK;
}

/* The result's figures per arm and the events that sum each arm up. */
static void summarise(fp_compare *c, fp_compare_result *res)
{
    for (int i = 0; i < c->narms; i++) {
        arm_state *a = &c->arms[i];
        fp_compare_arm_result *ar = &res->arms[i];
        ar->mean_step_ms = a->steps_here ? a->step_ms_sum / (double)a->steps_here : NAN;
        if (c->ranks > 1 && a->steps_here) {
            ar->comm_ms = a->comm_ns / 1e6 / (double)a->steps_here;
            ar->exposed_ms = a->exposed_ns / 1e6 / (double)a->steps_here;
            ar->comm_bytes = a->bytes / (double)a->steps_here;
            ar->comm_share = a->compute_ns > 0 ? a->exposed_ns / a->compute_ns : NAN;
            fp_cmp_dist_summary_event(c, res, i);
        }
        /* one info event each, where it applies: the CUDA graph (--cuda-graph), the fused layers, a GPU arm's uploads */
        int (*const line_of[])(const fp_arm *, char *, size_t) = {fp_arm_cuda_graph_line, fp_arm_fusion_line,
                                                                  fp_arm_upload_line};
        char line[300];
        for (size_t k = 0; k < sizeof line_of / sizeof *line_of; k++)
            if (c->store && c->rank == 0 && a->arm && line_of[k](a->arm, line, sizeof line))
                fp_store_event(c->store, a->run, 0, ar->steps_done, -1, FP_EVENT_INFO, line);
    }
}

int fp_cmp_end(fp_compare *c, fp_compare_result *res, int rc, int interrupted, double t0)
{
    const int64_t steps = c->cfg.base.steps;
    if (!rc && c->ranks > 1 && interrupted && !c->dist_failed) {   /* a signal: mpirun stopping the job for a
                                                                 * rank that died fails it, a Ctrl-C does not */
        char m[256];
        if (fp_dist_dead_peer(c->dist, m, sizeof m) >= 0) {
            c->dist_failed = 1;
            snprintf(c->dist_message, sizeof c->dist_message, "%s", m);
        }
    }
    if (!rc && c->dist_failed) {   /* data parallel: one rank's failure is the job's */
        rc = fp_fail(FP_EIO, "%s", c->dist_message);
    }
    if (rc) {   /* the store failed: nothing more can be recorded */
        int64_t done = 0;
        for (int i = 0; i < c->narms; i++)
            done = res->arms[i].steps_done > done ? res->arms[i].steps_done : done;
        snprintf(res->message, sizeof res->message, "training stopped after step %" PRId64 ": %s", done,
                 fp_error_message());
        for (int i = 0; i < c->narms; i++)
            if (res->arms[i].status == FP_RUN_RUNNING) {
                res->arms[i].status = FP_RUN_FAILED;
                snprintf(res->arms[i].message, sizeof res->arms[i].message, "%s", res->message);
            }
    } else if (interrupted) {
        if (fp_store_signalled())
            snprintf(res->message, sizeof res->message, "interrupted by signal %d", fp_store_signalled());
        else
            snprintf(res->message, sizeof res->message, "stopped from the dashboard");
        for (int i = 0; i < c->narms; i++) {
            fp_compare_arm_result *ar = &res->arms[i];
            if (res->arms[i].status != FP_RUN_RUNNING)
                continue;
            if (c->arms[i].active && keep_arm(c, res, i))   /* its checkpoint and weights, as they stand */
                continue;
            ar->status = FP_RUN_INTERRUPTED;
            snprintf(ar->message, sizeof ar->message, "%.200s after step %" PRId64, res->message, ar->steps_done);
            if (c->store)
                fp_store_event(c->store, c->arms[i].run, 0, ar->steps_done, -1, FP_EVENT_INFO, ar->message);
        }
    } else {
        const fp_step_plan last = fp_step_plan_for(&c->cfg, steps, steps);   /* the final evaluation */
        for (int i = 0; i < c->narms && rc == FP_OK; i++) {
            arm_state *a = &c->arms[i];
            if (!a->active)
                continue;
            int64_t done = fp_arm_iteration(a->arm);
            if (last.eval && c->rank == 0 && fp_cmp_has_val(c) && (rc = fp_cmp_evaluate(c, res, i, done, t0))) {
                fp_cmp_arm_failf(c, res, i, "final evaluation: %s", fp_error_message());
                rc = c->store ? fp_store_writer_status(c->store) : FP_OK;
                continue;
            }
            if (keep_arm(c, res, i)) {
                rc = c->store ? fp_store_writer_status(c->store) : FP_OK;
                continue;
            }
            res->arms[i].status = FP_RUN_FINISHED;
            if (c->store)
                fp_store_end_run(c->store, a->run, FP_RUN_FINISHED, NULL);
        }
        if (rc)
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
    }
    summarise(c, res);
    res->status = rc ? FP_RUN_FAILED : interrupted ? FP_RUN_INTERRUPTED
                                                   : res->nfailed == c->narms ? FP_RUN_FAILED : FP_RUN_FINISHED;
    if (!rc && res->status == FP_RUN_FAILED)
        snprintf(res->message, sizeof res->message, "every arm failed");
    if (c->store) {
        int crc = fp_store_close(c->store, res->status == FP_RUN_FAILED ? FP_RUN_FAILED : res->status,
                                 res->message[0] ? res->message : NULL);
        c->store = NULL;
        if (crc && !rc) {
            rc = crc;
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
        }
    }
    if (rc)
        return fp_fail(rc, "%s", res->message);
    if (res->status == FP_RUN_FAILED)
        return fp_fail(FP_EINVAL, "%s", res->message);
    return FP_OK;
}
