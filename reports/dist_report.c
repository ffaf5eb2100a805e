/* dist_report.c — the data-parallel figures of a session's arms (dist_report.h: the definitions). Promise:
 * reads only (lib/ readers), counts the same steps as the summary's timing (after the warm-up, not skipped),
 * and labels the scaling efficiency as measured only when a one-rank run of the same configuration exists. */
#include "dist_report.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "gate.h"
#include "units.h"

/* The format the arm's gradients were reduced in: the configuration's "allreduce", or for "default" the
 * gradients' own (fp16 under half, else fp32); a 16-bit wire recorded in allreduce_error wins. */
static void wire_of(const fp_arm_t *a, const char *config, const fp_allreduce_error_row_t *e, size_t ne, char *out)
{
    char v[32] = "";
    fp_json_lookup(config, "allreduce", v, sizeof v);
    if (ne > 0)
        snprintf(out, 8, "%s", e[0].wire);
    else if (!strcmp(v, "fp32") || !strcmp(v, "fp16") || !strcmp(v, "bf16"))
        snprintf(out, 8, "%s", v);
    else
        snprintf(out, 8, "%s", strcmp(a->run.policy, "half") ? "fp32" : "fp16");
}

/* The mean step (ns) of a run's step rows after its warm-up, not skipped; NaN when none. */
static int run_mean_step(fp_reader_t *r, int64_t run, double *mean)
{
    fp_step_row_t *st = NULL;
    size_t n = 0;
    *mean = NAN;
    int rc = fp_reader_steps_since(r, run, 0, 0, &st, &n);
    if (rc != FP_OK)
        return rc;
    double sum = 0;
    size_t k = 0;
    for (size_t i = fp_summary_warmup(n, -1); i < n; i++)
        if (!st[i].skipped && st[i].wall_ns > 0) {
            sum += (double)st[i].wall_ns;
            k++;
        }
    if (k)
        *mean = sum / (double)k;
    free(st);
    return FP_OK;
}

/* The latest finished one-rank run of the arm's model, policy, batch and image size (any session), or -1. */
static int find_baseline(fp_reader_t *r, const fp_arm_t *a, const fp_dist_run_row_t *dr, size_t ndr, int64_t *out)
{
    fp_run_row_t *runs = NULL;
    size_t n = 0;
    *out = -1;
    int rc = fp_reader_runs_meta(r, 0, &runs, &n);
    for (size_t i = 0; rc == FP_OK && i < n; i++) {
        const fp_run_row_t *b = &runs[i];
        int ranked = 0;
        for (size_t k = 0; k < ndr; k++)
            ranked |= dr[k].run == b->id;
        if (ranked || b->id == a->run.id || strcmp(b->status, "finished") || strcmp(b->model, a->run.model) ||
            strcmp(b->policy, a->run.policy) || b->batch_size != a->run.batch_size ||
            b->image_size != a->run.image_size)
            continue;
        fp_run_env_t env;
        char v[32];
        if ((rc = fp_reader_run_env(r, b->id, &env)) != FP_OK)
            break;
        if (fp_json_lookup(env.config, "ranks", v, sizeof v) && strcmp(v, "1"))
            continue;
        *out = b->id;   /* by id: the last match is the latest */
    }
    free(runs);
    return rc;
}

/* The per-step and per-rank figures from the rows of the counted steps. */
static int rank_figures(fp_dist_arm_t *d, const fp_dist_step_row_t *row, size_t n)
{
    int nr = d->ranks;
    double *sw = calloc((size_t)nr, sizeof *sw), *sc = calloc((size_t)nr, sizeof *sc);
    double *sm = calloc((size_t)nr, sizeof *sm), *se = calloc((size_t)nr, sizeof *se);
    double *sb = calloc((size_t)nr, sizeof *sb);
    int64_t *cnt = calloc((size_t)nr, sizeof *cnt), *nb = calloc((size_t)nr, sizeof *nb);
    int64_t *mx = calloc((size_t)nr, sizeof *mx);
    d->ranks_rows = calloc((size_t)nr, sizeof *d->ranks_rows);
    int rc = FP_OK;
    if (!sw || !sc || !sm || !se || !sb || !cnt || !nb || !mx || !d->ranks_rows) {
        rc = fp_fail(FP_ENOMEM, "out of memory");
        goto out;
    }
    double tot_wall = 0, tot_comm = 0, tot_exp = 0, tot_compute = 0, tot_bytes = 0, job = 0;
    int64_t nrow = 0, nbytes = 0, ncomm = 0;
    for (size_t i = 0; i < n; i++) {
        const fp_dist_step_row_t *x = &row[i];
        if (x->rank < 0 || x->rank >= nr || x->wall_ns <= 0 || x->comm_ns < 0 || x->exposed_ns < 0)
            continue;
        int k = x->rank;
        cnt[k]++;
        sw[k] += (double)x->wall_ns;
        sc[k] += (double)(x->compute_ns >= 0 ? x->compute_ns : 0);
        sm[k] += (double)x->comm_ns;
        se[k] += (double)x->exposed_ns;
        mx[k] = x->wall_ns > mx[k] ? x->wall_ns : mx[k];
        if (x->bytes >= 0) {
            sb[k] += (double)x->bytes;
            nb[k]++;
        }
        tot_wall += (double)x->wall_ns;
        tot_comm += (double)x->comm_ns;
        tot_exp += (double)x->exposed_ns;
        tot_compute += (double)(x->compute_ns >= 0 ? x->compute_ns : 0);
        ncomm++;
        if (x->bytes >= 0) {
            tot_bytes += (double)x->bytes;
            nbytes++;
        }
        nrow++;
    }
    double fastest = INFINITY, slowest = -1;
    for (int k = 0; k < nr; k++) {
        fp_dist_rank_row_t *q = &d->ranks_rows[k];
        q->rank = k;
        q->steps = cnt[k];
        q->mean_wall_ns = cnt[k] ? sw[k] / (double)cnt[k] : NAN;
        q->mean_compute_ns = cnt[k] ? sc[k] / (double)cnt[k] : NAN;
        q->mean_comm_ns = cnt[k] ? sm[k] / (double)cnt[k] : NAN;
        q->mean_exposed_ns = cnt[k] ? se[k] / (double)cnt[k] : NAN;
        q->mean_bytes = nb[k] ? sb[k] / (double)nb[k] : NAN;
        q->max_wall_ns = cnt[k] ? mx[k] : -1;
        q->vs_fastest = NAN;
        if (cnt[k] && q->mean_wall_ns < fastest)
            fastest = q->mean_wall_ns;
        if (cnt[k] && q->mean_wall_ns > slowest) {
            slowest = q->mean_wall_ns;
            d->slowest = k;
        }
    }
    d->nranks_rows = (size_t)nr;
    int fast = -1;
    for (int k = 0; k < nr; k++)
        if (d->ranks_rows[k].steps && isfinite(fastest)) {
            d->ranks_rows[k].vs_fastest = d->ranks_rows[k].mean_wall_ns / fastest;
            if (fast < 0 && d->ranks_rows[k].mean_wall_ns == fastest)
                fast = k;
        }
    d->straggler = d->slowest >= 0 ? d->ranks_rows[d->slowest].vs_fastest : NAN;
    /* per step: the job's step, the exposed share over the ranks, the straggler's step / the fastest's */
    d->share_per_step = calloc(n ? n : 1, sizeof *d->share_per_step);
    d->straggler_per_step = calloc(n ? n : 1, sizeof *d->straggler_per_step);
    if (!d->share_per_step || !d->straggler_per_step) {
        rc = fp_fail(FP_ENOMEM, "out of memory");
        goto out;
    }
    int64_t njob = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double w = 0, e = 0, mxw = 0, ws = NAN, wf = NAN;
        int ok = 1, seen = 0;
        for (; j < n && row[j].step == row[i].step; j++) {
            const fp_dist_step_row_t *x = &row[j];
            if (x->wall_ns <= 0 || x->exposed_ns < 0) {
                ok = 0;
                continue;
            }
            seen++;
            w += (double)x->wall_ns;
            e += (double)x->exposed_ns;
            mxw = (double)x->wall_ns > mxw ? (double)x->wall_ns : mxw;
            if (x->rank == d->slowest)
                ws = (double)x->wall_ns;
            if (x->rank == fast)
                wf = (double)x->wall_ns;
        }
        if (ok && seen == nr) {
            job += mxw;
            njob++;
            d->share_per_step[d->nper_step] = e / w;
            d->straggler_per_step[d->nper_step++] = ws / wf;
        }
        i = j;
    }
    d->steps = njob;
    d->job_step_ns = njob ? job / (double)njob : NAN;
    d->images_per_s = njob && d->global_batch > 0 ? (double)d->global_batch / (d->job_step_ns / 1e9) : NAN;
    d->exposed_share = tot_wall > 0 ? tot_exp / tot_wall : NAN;
    d->comm_share = tot_wall > 0 ? tot_comm / tot_wall : NAN;
    d->comm_ns = ncomm ? tot_comm / (double)ncomm : NAN;
    d->exposed_ns = ncomm ? tot_exp / (double)ncomm : NAN;
    d->bytes = nbytes ? tot_bytes / (double)nbytes : NAN;
    if (nrow && njob && d->job_step_ns > 0) {   /* the estimate, replaced below by a measured efficiency */
        d->efficiency = tot_compute / (double)nrow / d->job_step_ns;
        d->efficiency_measured = 0;
    }
out:
    free(sw), free(sc), free(sm), free(se), free(sb), free(cnt), free(nb), free(mx);
    return rc;
}

static int rounding(fp_reader_t *r, const fp_arm_t *a, fp_dist_arm_t *d, const fp_allreduce_error_row_t *e,
                    size_t ne)
{
    (void)r;
    double sum = 0, mx = NAN;
    int64_t k = 0;
    d->overflow = d->underflow = -1;
    int nl = 0;
    for (size_t i = 0; i < ne; i++)
        nl = e[i].layer + 1 > nl ? e[i].layer + 1 : nl;
    double *ls = calloc(nl ? (size_t)nl : 1, sizeof *ls);
    int64_t *lc = calloc(nl ? (size_t)nl : 1, sizeof *lc);
    if (!ls || !lc) {
        free(ls), free(lc);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < ne; i++) {
        if (e[i].layer < 0) {
            if (isfinite(e[i].rel_l2)) {
                sum += e[i].rel_l2;
                mx = isnan(mx) || e[i].rel_l2 > mx ? e[i].rel_l2 : mx;
                k++;
            }
            if (e[i].overflow >= 0)
                d->overflow = (d->overflow < 0 ? 0 : d->overflow) + e[i].overflow;
            if (e[i].underflow >= 0)
                d->underflow = (d->underflow < 0 ? 0 : d->underflow) + e[i].underflow;
        } else if (isfinite(e[i].rel_l2)) {
            ls[e[i].layer] += e[i].rel_l2;
            lc[e[i].layer]++;
        }
    }
    d->err_steps = k;
    d->rel_l2_mean = k ? sum / (double)k : NAN;
    d->rel_l2_max = mx;
    d->worst_layer = -1;
    d->worst_layer_rel_l2 = NAN;
    for (int l = 0; l < nl; l++)
        if (lc[l] && (d->worst_layer < 0 || ls[l] / (double)lc[l] > d->worst_layer_rel_l2)) {
            d->worst_layer = l;
            d->worst_layer_rel_l2 = ls[l] / (double)lc[l];
        }
    if (d->worst_layer >= 0) {
        const fp_layer_row_t *L = fp_arm_layer(a, d->worst_layer);
        snprintf(d->worst_layer_name, sizeof d->worst_layer_name, "%s", L ? L->name : "");
    }
    if (ne)
        snprintf(d->wire, sizeof d->wire, "%s", e[0].wire);
    free(ls), free(lc);
    return FP_OK;
}

static int load_arm(fp_reader_t *r, const fp_arm_t *a, const fp_dist_run_row_t *dr, size_t ndr, fp_dist_arm_t *d)
{
    memset(d, 0, sizeof *d);
    d->slowest = d->worst_layer = -1;
    d->baseline_run = -1;
    d->efficiency = d->straggler = d->baseline_step_ns = NAN;
    const fp_dist_run_row_t *me = NULL;
    for (size_t k = 0; k < ndr; k++)
        if (dr[k].run == a->run.id)
            me = &dr[k];
    if (!me)
        return FP_OK;
    d->ranks = me->ranks;
    fp_run_env_t env;
    int rc = fp_reader_run_env(r, a->run.id, &env);
    if (rc != FP_OK)
        return rc;
    char v[32];
    d->global_batch = (int64_t)d->ranks * a->run.batch_size;
    if (fp_json_lookup(env.config, "global_batch", v, sizeof v))
        d->global_batch = strtoll(v, NULL, 10);
    fp_allreduce_error_row_t *e = NULL;
    size_t ne = 0;
    if ((rc = fp_reader_allreduce_error(r, a->run.id, &e, &ne)) != FP_OK)
        return rc;
    wire_of(a, env.config, e, ne, d->allreduce);
    rc = rounding(r, a, d, e, ne);
    free(e);
    if (rc != FP_OK)
        return rc;
    /* the counted steps: after the warm-up, not skipped (the summary's timing rows) */
    fp_dist_step_row_t *rows = NULL;
    size_t n = 0;
    int64_t from = a->warmup < a->nsteps ? a->steps[a->warmup].step : 0;
    if ((rc = fp_reader_dist_steps(r, a->run.id, from, -1, &rows, &n)) != FP_OK)
        return rc;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!rows[i].skipped)
            rows[m++] = rows[i];
    rc = rank_figures(d, rows, m);
    free(rows);
    if (rc != FP_OK)
        return rc;
    int64_t base;
    if ((rc = find_baseline(r, a, dr, ndr, &base)) != FP_OK)
        return rc;
    double t1;
    if (base >= 0 && (rc = run_mean_step(r, base, &t1)) == FP_OK && t1 > 0 && d->images_per_s > 0) {
        d->baseline_run = base;
        d->baseline_step_ns = t1;
        d->baseline_batch = a->run.batch_size;
        d->efficiency = d->images_per_s / ((double)d->ranks * (double)a->run.batch_size / (t1 / 1e9));
        d->efficiency_measured = 1;
    }
    return rc;
}

int fp_dist_summary_load(fp_reader_t *r, const fp_summary_t *s, fp_dist_summary_t *d)
{
    memset(d, 0, sizeof *d);
    fp_dist_run_row_t *dr = NULL;
    size_t ndr = 0;
    int rc = fp_reader_dist_runs(r, 0, &dr, &ndr);
    if (rc != FP_OK)
        return rc;
    d->arms = calloc(s->narms ? s->narms : 1, sizeof *d->arms);
    if (!d->arms) {
        free(dr);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    d->narms = s->narms;
    for (size_t i = 0; i < s->narms && rc == FP_OK; i++) {
        rc = load_arm(r, &s->arms[i], dr, ndr, &d->arms[i]);
        d->any |= d->arms[i].ranks > 0;
    }
    free(dr);
    if (rc != FP_OK)
        fp_dist_summary_free(d);
    return rc;
}

void fp_dist_summary_free(fp_dist_summary_t *d)
{
    for (size_t i = 0; d->arms && i < d->narms; i++) {
        free(d->arms[i].ranks_rows);
        free(d->arms[i].share_per_step);
        free(d->arms[i].straggler_per_step);
    }
    free(d->arms);
    memset(d, 0, sizeof *d);
}

void fp_dist_fmt_efficiency(char *buf, size_t cap, const fp_dist_arm_t *a)
{
    char p[FP_UNIT_BUF];
    if (isnan(a->efficiency))
        snprintf(buf, cap, "scaling efficiency n/a");
    else if (a->efficiency_measured)
        snprintf(buf, cap, "scaling efficiency %s (vs %d x one-rank run %lld)", fp_fmt_pct(p, a->efficiency), a->ranks,
                 (long long)a->baseline_run);
    else
        snprintf(buf, cap, "scaling efficiency estimate %s (communication-bound: compute / job step; no one-rank run "
                 "in the file)", fp_fmt_pct(p, a->efficiency));
}

int fp_dist_arm_with(const fp_dist_summary_t *d, const char *wire)
{
    for (size_t i = 0; i < d->narms; i++) {
        const char *w = d->arms[i].allreduce;
        if (d->arms[i].ranks > 0 && (!strcmp(wire, "16") ? strcmp(w, "fp32") != 0 : !strcmp(w, wire)))
            return (int)i;
    }
    return -1;
}

void fp_dist_print(FILE *f, const fp_summary_t *s, const fp_dist_summary_t *d)
{
    if (!d->any)
        return;
    char b1[FP_UNIT_BUF], b2[FP_UNIT_BUF], b3[FP_UNIT_BUF], b4[FP_UNIT_BUF], b5[FP_UNIT_BUF], eff[200];
    fprintf(f, "  data parallel (steps after warm-up, not skipped; job step = the slowest rank's per step)\n");
    for (size_t i = 0; i < d->narms; i++) {
        const fp_dist_arm_t *a = &d->arms[i];
        const char *pol = s->arms[i].run.policy;
        if (!a->ranks) {
            fprintf(f, "    %-12s trained alone (no ranks)\n", pol);
            continue;
        }
        fprintf(f, "    %-12s %d ranks, global batch %lld, %s images/s (job step %s), all-reduce %s %s/step per "
                   "rank\n", pol, a->ranks, (long long)a->global_batch, fp_fmt_num(b1, a->images_per_s, 1),
                fp_fmt_ns(b2, a->job_step_ns), a->allreduce, fp_fmt_bytes(b3, a->bytes));
        fprintf(f, "    %-12s communication share: exposed %s of wall (%s/step), all-reduce %s of wall (%s/step)\n", "",
                fp_fmt_pct(b1, a->exposed_share), fp_fmt_ns(b2, a->exposed_ns), fp_fmt_pct(b3, a->comm_share),
                fp_fmt_ns(b4, a->comm_ns));
        fp_dist_fmt_efficiency(eff, sizeof eff, a);
        fprintf(f, "    %-12s %s\n", "", eff);
        fprintf(f, "    %-12s mean step per rank:", "");
        for (size_t k = 0; k < a->nranks_rows; k++)
            fprintf(f, " r%d %s (%s)", a->ranks_rows[k].rank, fp_fmt_ns(b1, a->ranks_rows[k].mean_wall_ns),
                    fp_fmt_ratio(b2, a->ranks_rows[k].vs_fastest));
        if (a->slowest >= 0)
            fprintf(f, "; straggler rank %d: %s the fastest", a->slowest, fp_fmt_ratio(b1, a->straggler));
        fprintf(f, "\n");
        if (a->wire[0]) {
            fprintf(f, "    %-12s all-reduce rounding (%s vs fp32, %lld sampled steps): rel. L2 mean %s max %s",
                    "", a->wire, (long long)a->err_steps, fp_fmt_num(b1, a->rel_l2_mean, 6),
                    fp_fmt_num(b2, a->rel_l2_max, 6));
            if (a->worst_layer >= 0)
                fprintf(f, ", worst layer %d %s %s", a->worst_layer, a->worst_layer_name,
                        fp_fmt_num(b3, a->worst_layer_rel_l2, 6));
            if (a->overflow >= 0)
                fprintf(f, ", summed values overflowed %lld, underflowed %lld", (long long)a->overflow,
                        (long long)a->underflow);
            fprintf(f, "\n");
        } else {
            fprintf(f, "    %-12s all-reduce rounding: none (reduced in %s)\n", "", a->allreduce);
        }
    }
    int i16 = fp_dist_arm_with(d, "16"), i32 = fp_dist_arm_with(d, "fp32");
    if (i16 >= 0 && i32 >= 0) {
        const fp_dist_arm_t *h = &d->arms[i16], *w = &d->arms[i32];
        char b6[FP_UNIT_BUF], b7[FP_UNIT_BUF];
        fprintf(f, "  all-reduce %s (%s) vs fp32 (%s): bytes/step per rank %s vs %s (%s), all-reduce %s vs %s (%s), "
                   "exposed %s vs %s\n", h->allreduce, s->arms[i16].run.policy, s->arms[i32].run.policy,
                fp_fmt_bytes(b1, h->bytes), fp_fmt_bytes(b2, w->bytes), fp_fmt_ratio(b3, h->bytes / w->bytes),
                fp_fmt_ns(b4, h->comm_ns), fp_fmt_ns(b5, w->comm_ns), fp_fmt_ratio(eff, h->comm_ns / w->comm_ns),
                fp_fmt_ns(b6, h->exposed_ns), fp_fmt_ns(b7, w->exposed_ns));
    }
}
