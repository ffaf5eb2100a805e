/* report_csv.c — the report's views as RFC 4180 CSV (report.h): summary, steps, layers, histograms,
 * kernels, ranks (data parallel: per arm and rank), one file each, every arm of the session in one file with `arm` and `run` columns.
 * Promise: a header row, CRLF line ends, fields quoted exactly when needed (quotes doubled), NaN /
 * not measured as an empty field, reals printed so they read back exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dist_report.h"
#include "error.h"
#include "formats.h"
#include "report.h"
#include "store.h"

static const char *const views[FP_REPORT_CSV_VIEWS] = {"summary", "steps", "layers", "histograms", "kernels",
                                                               "ranks"};

const char *fp_report_csv_view(int i)
{
    return i >= 0 && i < FP_REPORT_CSV_VIEWS ? views[i] : NULL;
}

void fp_csv_field(FILE *f, const char *s)
{
    if (!s)
        return;
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void sep(FILE *f)
{
    fputc(',', f);
}

static void real(FILE *f, double v)
{
    sep(f);
    if (!isfinite(v)) {
        if (!isnan(v))
            fputs(v > 0 ? "inf" : "-inf", f);
        return;
    }
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

static void integer(FILE *f, long long v, int na_when_negative)
{
    sep(f);
    if (!(na_when_negative && v < 0))
        fprintf(f, "%lld", v);
}

static void text(FILE *f, const char *s)
{
    sep(f);
    fp_csv_field(f, s);
}

static void header(FILE *f, const char *cols)
{
    fputs(cols, f);
    fputs("\r\n", f);
}

static void arm_cols(FILE *f, const fp_arm_t *a)
{
    fp_csv_field(f, a->run.arm[0] ? a->run.arm : a->run.policy);
    integer(f, a->run.id, 0);
}

static void eol(FILE *f)
{
    fputs("\r\n", f);
}

/* The data-parallel columns of summary.csv (dist_report.h's definitions); an arm trained alone: ranks 1, the
 * rest empty. */
#define DIST_COLS ",ranks,global_batch,allreduce,job_images_per_s,job_step_ns,exposed_share,allreduce_share," \
                  "allreduce_bytes_per_step_per_rank,allreduce_ns,exposed_ns,straggler_rank,straggler_ratio," \
                  "scaling_efficiency,scaling_efficiency_kind,scaling_baseline_run,allreduce_rel_l2_mean," \
                  "allreduce_rel_l2_max,allreduce_overflow,allreduce_underflow"
static void dist_cols(FILE *f, const fp_dist_arm_t *d)
{
    if (!d || !d->ranks) {
        integer(f, 1, 0);
        for (int i = 0; i < 18; i++)
            sep(f);
        return;
    }
    integer(f, d->ranks, 0);
    integer(f, (long long)d->global_batch, 1);
    text(f, d->allreduce);
    real(f, d->images_per_s);
    real(f, d->job_step_ns);
    real(f, d->exposed_share);
    real(f, d->comm_share);
    real(f, d->bytes);
    real(f, d->comm_ns);
    real(f, d->exposed_ns);
    integer(f, d->slowest, 1);
    real(f, d->straggler);
    real(f, d->efficiency);
    text(f, isnan(d->efficiency) ? "" : d->efficiency_measured ? "measured" : "estimate_communication_bound");
    integer(f, (long long)d->baseline_run, 1);
    real(f, d->rel_l2_mean);
    real(f, d->rel_l2_max);
    integer(f, (long long)d->overflow, 1);
    integer(f, (long long)d->underflow, 1);
}

static int v_summary(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    fp_dist_summary_t ds;
    int rc = fp_dist_summary_load(r, s, &ds);
    if (rc != FP_OK)
        return rc;
    header(f, "arm,run,policy,reference,status,steps,warmup,median_step_ns,speedup,samples_per_s,mem_peak_bytes,"
              "mem_ratio,energy_per_step_j,energy_ratio,final_loss,loss_gap,val_top1,top1_gap_pt,skipped_steps,"
              "skip_rate,final_loss_scale,fwd_overflow,fwd_nonfinite,nan_events,hist_sampled_steps,underflow,"
              "underflow_flushed,overflow,lost_updates_pct,lost_updates_max_pct,lost_updates_sampled_steps,"
              "val_images,val_top1_ci95_lo,val_top1_ci95_hi,top1_gap_within_uncertainty,emulated_on_cpu,"
              "host_cpu_ms_per_step,host_cpu_share" DIST_COLS);
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        arm_cols(f, a);
        text(f, a->run.policy);
        integer(f, a->is_ref, 0);
        text(f, a->run.status);
        integer(f, (long long)a->nsteps, 0);
        integer(f, (long long)a->warmup, 0);
        real(f, a->median_ns);
        real(f, a->speedup);
        real(f, a->samples_per_s);
        real(f, a->mem_peak);
        real(f, a->mem_ratio);
        real(f, a->energy_per_step);
        real(f, a->energy_ratio);
        real(f, a->final_loss);
        real(f, a->loss_gap);
        real(f, a->val_top1);
        real(f, a->top1_gap);
        integer(f, a->skipped, 0);
        real(f, a->skip_rate);
        if (a->has_scaler)
            real(f, a->final_loss_scale);
        else
            text(f, "-");   /* no loss scaler (issue 19): never 1 */
        integer(f, a->fwd_overflow, 0);
        integer(f, a->fwd_nonfinite, 0);
        integer(f, a->nan_events, 0);
        /* issue 19: sums over hist_sampled_steps of the roles that matter (summary.h), lost updates, accuracy */
        long long under = 0, flushed = 0, over = 0;
        for (int role = 0; role < FP_SUMMARY_ROLES; role++) {
            if (fp_summary_role_matters(a, role, 0)) {
                under += a->under_role[role];
                flushed += a->flushed_role[role];
            }
            if (fp_summary_role_matters(a, role, 1))
                over += a->over_role[role];
        }
        integer(f, (long long)a->hist_steps, 0);
        integer(f, under, 0);
        integer(f, flushed, 0);
        integer(f, over, 0);
        real(f, a->lost_pct);
        real(f, a->lost_max);
        integer(f, a->lost_samples, 0);
        integer(f, (long long)a->val_images, 1);
        real(f, a->val_top1_lo);
        real(f, a->val_top1_hi);
        integer(f, a->top1_gap_within, 0);
        integer(f, a->emulated, 0);
        real(f, a->host_cpu_ns / 1e6);   /* median over the timed steps; empty: not recorded */
        real(f, a->host_cpu_share);
        dist_cols(f, &ds.arms[i]);
        eol(f);
    }
    fp_dist_summary_free(&ds);
    return FP_OK;
}

/* Data parallel: each rank's means over the counted steps (after warm-up, not skipped) and its mean step
 * against the fastest rank's; no rows for arms trained alone. */
static int v_ranks(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    fp_dist_summary_t ds;
    int rc = fp_dist_summary_load(r, s, &ds);
    if (rc != FP_OK)
        return rc;
    header(f, "arm,run,rank,ranks,steps,mean_step_ns,mean_compute_ns,mean_allreduce_ns,mean_exposed_ns,mean_bytes,"
              "max_step_ns,vs_fastest,straggler");
    for (size_t i = 0; i < s->narms; i++) {
        const fp_dist_arm_t *d = &ds.arms[i];
        for (size_t k = 0; k < d->nranks_rows; k++) {
            const fp_dist_rank_row_t *q = &d->ranks_rows[k];
            arm_cols(f, &s->arms[i]);
            integer(f, q->rank, 0);
            integer(f, d->ranks, 0);
            integer(f, (long long)q->steps, 0);
            real(f, q->mean_wall_ns);
            real(f, q->mean_compute_ns);
            real(f, q->mean_comm_ns);
            real(f, q->mean_exposed_ns);
            real(f, q->mean_bytes);
            integer(f, (long long)q->max_wall_ns, 1);
            real(f, q->vs_fastest);
            integer(f, q->rank == d->slowest, 0);
            eol(f);
        }
    }
    fp_dist_summary_free(&ds);
    return FP_OK;
}

static int v_steps(FILE *f, const fp_summary_t *s)
{
    header(f, "arm,run,step,loss,loss_scale,skipped,lr,wall_ns,samples_per_s,mem_current,mem_peak,energy_j,power_w");
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        for (size_t k = 0; k < a->nsteps; k++) {
            const fp_step_row_t *st = &a->steps[k];
            arm_cols(f, a);
            integer(f, st->step, 0);
            real(f, st->loss);
            real(f, st->loss_scale);
            integer(f, st->skipped, 0);
            real(f, st->lr);
            integer(f, st->wall_ns, 1);
            real(f, st->samples_per_s);
            integer(f, st->mem_current, 1);
            integer(f, st->mem_peak, 1);
            real(f, st->energy_j);
            real(f, st->power_w);
            eol(f);
        }
    }
    return FP_OK;
}

static int v_layers(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    header(f, "arm,run,layer,name,type,forward_ns,backward_data_ns,backward_weights_ns,total_ns,share,speedup,"
              "format,overflow,underflow,nonfinite");
    /* per arm, per layer: the three phase medians */
    int nl = fp_summary_layer_count(s);
    size_t cells = s->narms * (size_t)(nl > 0 ? nl : 1) * FP_PHASE_COUNT;
    double *ph = malloc(cells * sizeof *ph);
    double *tot = calloc(s->narms, sizeof *tot);
    if (!ph || !tot) {
        free(ph);
        free(tot);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    for (size_t c = 0; c < cells; c++)
        ph[c] = NAN;
    int rc = FP_OK;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        if (a->warmup >= a->nsteps)
            continue;
        fp_layer_sum_t *rows;
        size_t n;
        if ((rc = fp_reader_layer_summary(r, a->run.id, a->steps[a->warmup].step, INT64_MAX, &rows, &n)) != FP_OK)
            break;
        for (size_t k = 0; k < n; k++)
            if (rows[k].layer >= 0 && rows[k].layer < nl && rows[k].phase >= 0 && rows[k].phase < FP_PHASE_COUNT) {
                ph[(i * (size_t)nl + (size_t)rows[k].layer) * FP_PHASE_COUNT + (size_t)rows[k].phase] = rows[k].median_ns;
                tot[i] += rows[k].median_ns;
            }
        free(rows);
    }
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        for (size_t k = 0; k < a->nlayers; k++) {
            const fp_layer_row_t *L = &a->layers[k];
            if (L->layer < 0 || L->layer >= nl)
                continue;
            double sum = 0, rsum = 0;
            int any = 0, rany = 0;
            arm_cols(f, a);
            integer(f, L->layer, 0);
            text(f, L->name);
            text(f, L->type);
            for (int p = 0; p < FP_PHASE_COUNT; p++) {
                double v = ph[(i * (size_t)nl + (size_t)L->layer) * FP_PHASE_COUNT + (size_t)p];
                double rv = ph[(s->ref * (size_t)nl + (size_t)L->layer) * FP_PHASE_COUNT + (size_t)p];
                real(f, v);
                if (!isnan(v))
                    sum += v, any = 1;
                if (!isnan(rv))
                    rsum += rv, rany = 1;
            }
            real(f, any ? sum : NAN);
            real(f, any && tot[i] > 0 ? sum / tot[i] : NAN);
            real(f, any && rany ? rsum / sum : NAN);
            text(f, fp_format_info((fp_format)a->fmt_shown)->name);
            int64_t over = 0, under = 0, nf = 0;
            int seen = 0;
            for (size_t q = 0; q < a->nnumerics; q++)
                if (a->numerics[q].layer == L->layer) {
                    seen = 1;
                    over += a->numerics[q].overflow[a->fmt_shown];
                    under += a->numerics[q].underflow[a->fmt_shown];
                    nf += a->numerics[q].nan + a->numerics[q].inf;
                }
            integer(f, seen ? over : -1, 1);
            integer(f, seen ? under : -1, 1);
            integer(f, seen ? nf : -1, 1);
            eol(f);
        }
    }
    free(ph);
    free(tot);
    return rc;
}

static int v_histograms(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    fputs("arm,run,step,layer,name,role,count,zero,nan,inf,amax,min_nonzero,mean_abs", f);
    for (int k = 0; k < FP_FMT_COUNT; k++)
        for (int c = 0; c < FP_CLASS_COUNT; c++)
            fprintf(f, ",%s_%s", fp_format_info((fp_format)k)->name, fp_value_class_name((fp_value_class)c));
    eol(f);
    int rc = FP_OK;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        for (int role = 0; rc == FP_OK && role < FP_ROLE_COUNT; role++) {
            fp_hist_row_t *h;
            size_t n;
            if ((rc = fp_reader_histograms_role(r, a->run.id, role, -1, &h, &n)) != FP_OK)
                break;
            for (size_t k = 0; k < n; k++) {
                const fp_hist_t *x = &h[k].hist;
                const fp_layer_row_t *L = fp_arm_layer(a, h[k].layer);
                arm_cols(f, a);
                integer(f, h[k].step, 0);
                integer(f, h[k].layer, 0);
                text(f, L ? L->name : "");
                text(f, fp_tensor_role_name((fp_tensor_role)role));
                integer(f, (long long)x->count, 0);
                integer(f, (long long)x->zero, 0);
                integer(f, (long long)x->nan, 0);
                integer(f, (long long)(x->pos_inf + x->neg_inf), 0);
                real(f, x->amax);
                real(f, x->min_nonzero);
                real(f, fp_hist_mean_abs(x));
                for (int fm = 0; fm < FP_FMT_COUNT; fm++)
                    for (int c = 0; c < FP_CLASS_COUNT; c++)
                        integer(f, (long long)x->cls[fm][c], 0);
                eol(f);
            }
            free(h);
        }
    }
    return rc;
}

static int v_kernels(FILE *f, fp_reader_t *r, const fp_summary_t *s)
{
    header(f, "arm,run,time_pct,total_ns,instances,avg_ns,med_ns,min_ns,max_ns,stddev_ns,tensor_core,name");
    int rc = FP_OK;
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fp_run_kernels_t rk;
        rc = fp_summary_run_kernels(r, a->run.id, &rk);
        for (size_t j = 0; rc == FP_OK && j < rk.n; j++) {
            arm_cols(f, a);
            real(f, rk.k[j].time_pct);
            integer(f, rk.k[j].total_ns, 0);
            integer(f, rk.k[j].instances, 0);
            real(f, rk.k[j].avg_ns);
            real(f, rk.k[j].med_ns);
            integer(f, rk.k[j].min_ns, 0);
            integer(f, rk.k[j].max_ns, 0);
            real(f, rk.k[j].stddev_ns);
            integer(f, fp_run_kernels_tc(&rk, j), 1);
            text(f, rk.k[j].name);
            eol(f);
        }
        fp_run_kernels_free(&rk);
    }
    return rc;
}

int fp_report_csv(FILE *f, int view, fp_reader_t *r, const fp_summary_t *s)
{
    switch (view) {
    case 0: return v_summary(f, r, s);
    case 1: return v_steps(f, s);
    case 2: return v_layers(f, r, s);
    case 3: return v_histograms(f, r, s);
    case 4: return v_kernels(f, r, s);
    case 5: return v_ranks(f, r, s);
    default: return fp_fail(FP_EINVAL, "no CSV view %d", view);
    }
}
