/* dist_report.h — the data-parallel figures of a session's arms (issue 23's display part), as `report
 * --summary`, the HTML and CSV reports and the gate show them, read from dist_steps / allreduce_error and the
 * runs' configuration JSON (docs/schema.md). Every figure says what it is; NaN (not measured) prints as n/a.
 *
 * Definitions (the steps after the arm's warm-up, summary.h, whose rows are not skipped):
 *  - job step: per step, the slowest rank's wall_ns (every rank waits for it at the all-reduce); its mean;
 *  - images/s of the job: global batch / mean job step;
 *  - exposed share: sum of exposed_ns / sum of wall_ns over every rank and step; comm share: comm_ns / wall_ns
 *    the same way (comm may overlap compute, so it can exceed the exposed share);
 *  - straggler: the slowest rank's mean wall_ns / the fastest rank's;
 *  - scaling efficiency (measured): images/s of the job / (ranks x images/s of a one-rank run of the same model,
 *    policy, per-rank batch and image size, in any session of the same file: the latest finished one; its mean
 *    step after its warm-up);
 *  - scaling efficiency estimate (communication-bound), shown only without such a run: mean compute_ns (wall -
 *    exposed) over ranks and steps / mean job step: what N ranks reach against N x one rank if a rank's compute
 *    equals a lone process's step;
 *  - the all-reduce's rounding: rel. L2 of the whole gradient (layer -1) at the sampled steps, mean and largest,
 *    the layer with the largest mean rel. L2, and the summed values that overflowed / underflowed (totals). */
#ifndef FP_REPORTS_DIST_REPORT_H
#define FP_REPORTS_DIST_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "store_reader.h"
#include "store_reader_dist.h"
#include "summary.h"

typedef struct {
    int ranks;                   /* 0: the arm trained alone (nothing else is set) */
    int64_t global_batch;        /* the configuration's, else ranks x batch */
    char allreduce[8];           /* the format the gradients were reduced in: fp32, fp16, bf16 */
    int64_t steps;               /* steps counted (after warm-up, not skipped) */
    double job_step_ns, images_per_s;
    double exposed_share, comm_share;      /* fractions */
    double comm_ns, exposed_ns;            /* means per rank and step */
    double bytes;                /* mean bytes per step per rank */
    fp_dist_rank_row_t *ranks_rows;        /* per rank over the counted steps (vs_fastest: the straggler ratio) */
    size_t nranks_rows;
    int slowest;                 /* rank with the largest mean step; -1 none */
    double straggler;            /* its mean step / the fastest rank's; NaN none */
    double *share_per_step, *straggler_per_step;   /* per counted step: exposed / wall over the ranks, the slowest
                                    rank's (by mean) wall / the fastest's; for the gate's tests */
    size_t nper_step;
    double efficiency;           /* NaN: neither measured nor estimated */
    int efficiency_measured;     /* 1: against baseline_run; 0: the communication-bound estimate */
    int64_t baseline_run;        /* the one-rank run; -1 none */
    double baseline_step_ns;     /* its mean step */
    int64_t baseline_batch;
    /* the all-reduce's rounding (16-bit formats only) */
    char wire[8];                /* "" when not measured */
    int64_t err_steps;
    double rel_l2_mean, rel_l2_max;
    int64_t overflow, underflow; /* totals over the sampled steps; -1 not counted */
    int worst_layer;             /* -1 none */
    char worst_layer_name[64];
    double worst_layer_rel_l2;   /* its mean over the sampled steps */
} fp_dist_arm_t;

typedef struct {
    fp_dist_arm_t *arms;         /* parallel to the summary's arms */
    size_t narms;
    int any;                     /* 1: some arm trained on ranks */
} fp_dist_summary_t;

/* Read the data-parallel figures of every arm of s (loaded from r). An arm without rows has ranks 0. */
int fp_dist_summary_load(fp_reader_t *r, const fp_summary_t *s, fp_dist_summary_t *d);
void fp_dist_summary_free(fp_dist_summary_t *d);
/* The data-parallel section of `report --summary` (nothing when no arm trained on ranks). */
void fp_dist_print(FILE *f, const fp_summary_t *s, const fp_dist_summary_t *d);
/* "scaling efficiency 93.1% (vs one-rank run 7)" / "scaling efficiency estimate 81.0% (communication-bound:
 * compute / job step; no one-rank run in the file)" / "scaling efficiency n/a". */
void fp_dist_fmt_efficiency(char *buf, size_t cap, const fp_dist_arm_t *a);
/* The arm of s that reduced in `wire` ("fp32" or 16-bit: "fp16"/"bf16" when wire is "16"), first match; -1. */
int fp_dist_arm_with(const fp_dist_summary_t *d, const char *wire);

#endif
