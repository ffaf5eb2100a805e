/* summary.c — one session's arms compared (summary.h): loads each run through the store reader and
 * derives the end-of-run summary's figures. Promise: what was not measured stays NaN (n/a), never 0;
 * on error nothing is left allocated and the message names the file. */
#include "summary.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "error.h"
#include "formats.h"
#include "step_time.h"
#include "store.h"
#include "units.h"

double fp_median(const double *x, size_t n)
{
    return fp_step_median(x, n);
}

size_t fp_summary_warmup(size_t nsteps, int64_t requested)
{
    return fp_step_warmup(nsteps, requested);   /* lib/step_time.h: the dashboard's too */
}

int fp_policy_format(const char *p)
{
    if (!p)
        return -1;
    if (strncasecmp(p, "fp16", 4) == 0 || strcasecmp(p, "half") == 0)
        return FP_FMT_FP16;
    if (strncasecmp(p, "bf16", 4) == 0)
        return FP_FMT_BF16;
    char low[64];
    size_t i = 0;
    for (; p[i] && i < sizeof low - 1; i++)
        low[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] - 'A' + 'a' : p[i]);
    low[i] = '\0';
    if (strstr(low, "e4m3"))
        return FP_FMT_E4M3;
    if (strstr(low, "e5m2"))
        return FP_FMT_E5M2;
    return -1;
}

static void arm_free(fp_arm_t *a)
{
    free(a->steps);
    free(a->times);
    free(a->layers);
    free(a->numerics);
    free(a->evals);
}

void fp_summary_free(fp_summary_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->narms; i++)
        arm_free(&s->arms[i]);
    free(s->arms);
    memset(s, 0, sizeof *s);
}

const fp_arm_t *fp_summary_arm(const fp_summary_t *s, const char *policy)
{
    for (size_t i = 0; i < s->narms; i++)
        if (strcmp(s->arms[i].run.policy, policy) == 0)
            return &s->arms[i];
    return NULL;
}

const fp_layer_row_t *fp_arm_layer(const fp_arm_t *a, int layer)
{
    for (size_t i = 0; i < a->nlayers; i++)
        if (a->layers[i].layer == layer)
            return &a->layers[i];
    return NULL;
}

int fp_summary_layer_count(const fp_summary_t *s)
{
    int nl = 0;
    for (size_t i = 0; i < s->narms; i++)
        for (size_t k = 0; k < s->arms[i].nlayers; k++)
            if (s->arms[i].layers[k].layer + 1 > nl)
                nl = s->arms[i].layers[k].layer + 1;
    return nl;
}

static const char *layer_name(const fp_arm_t *a, int layer)
{
    const fp_layer_row_t *l = fp_arm_layer(a, layer);
    return l ? l->name : "";
}

/* The FP_SUMMARY_TOP layers with the largest per-layer totals (count > 0), largest first. */
static int top_layers(const fp_arm_t *a, const int64_t *per_layer, int nl, fp_top_layer_t *top)
{
    int k = 0;
    for (int l = 0; l < nl; l++) {
        if (per_layer[l] <= 0)
            continue;
        int pos;
        if (k < FP_SUMMARY_TOP)
            pos = k++;
        else if (per_layer[l] > top[FP_SUMMARY_TOP - 1].count)
            pos = FP_SUMMARY_TOP - 1;
        else
            continue;
        while (pos > 0 && top[pos - 1].count < per_layer[l]) {
            top[pos] = top[pos - 1];
            pos--;
        }
        top[pos].layer = l;
        top[pos].count = per_layer[l];
        snprintf(top[pos].name, sizeof top[pos].name, "%s", layer_name(a, l));
    }
    return k;
}

static int load_arm(fp_reader_t *r, fp_arm_t *a, int64_t warmup_req)
{
    int rc = fp_reader_steps_since(r, a->run.id, INT64_MIN, 0, &a->steps, &a->nsteps);
    if (rc == FP_OK)
        rc = fp_reader_layers(r, a->run.id, &a->layers, &a->nlayers);
    if (rc == FP_OK)
        rc = fp_reader_layer_numerics(r, a->run.id, &a->numerics, &a->nnumerics);
    if (rc == FP_OK)
        rc = fp_reader_evaluations(r, a->run.id, &a->evals, &a->nevals);
    fp_event_row_t *ev = NULL;
    size_t nev = 0;
    if (rc == FP_OK)
        rc = fp_reader_events(r, a->run.id, FP_EVENT_NAN, 0, &ev, &nev);
    free(ev);
    if (rc != FP_OK)
        return rc;
    a->nan_events = (int64_t)nev;
    a->fmt = fp_policy_format(a->run.policy);
    a->fmt_shown = a->fmt >= 0 ? a->fmt : FP_FMT_FP16;
    a->warmup = fp_summary_warmup(a->nsteps, warmup_req);
    a->times = malloc((a->nsteps ? a->nsteps : 1) * sizeof *a->times);
    double *tput = malloc((a->nsteps ? a->nsteps : 1) * sizeof *tput);
    if (!a->times || !tput) {
        free(tput);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    size_t ntput = 0;
    double esum = 0, mem = NAN;
    a->final_loss_scale = NAN;
    size_t en = 0;
    for (size_t i = 0; i < a->nsteps; i++) {
        const fp_step_row_t *st = &a->steps[i];
        a->skipped += st->skipped != 0;
        if (st->mem_peak >= 0)
            mem = isnan(mem) ? (double)st->mem_peak : fmax(mem, (double)st->mem_peak);
        if (!isnan(st->loss_scale))
            a->final_loss_scale = st->loss_scale;
        if (i < a->warmup || st->skipped)
            continue;
        if (fp_step_timed(i, a->warmup, st->skipped, st->wall_ns))   /* lib/step_time.h */
            a->times[a->ntimes++] = (double)st->wall_ns;
        if (isfinite(st->samples_per_s))
            tput[ntput++] = st->samples_per_s;
        if (isfinite(st->energy_j))
            esum += st->energy_j, en++;
    }
    a->skip_rate = a->nsteps ? (double)a->skipped / (double)a->nsteps : NAN;
    a->median_ns = fp_median(a->times, a->ntimes);
    a->samples_per_s = ntput ? fp_median(tput, ntput)
                             : (a->run.batch_size > 0 && a->median_ns > 0 ? a->run.batch_size * 1e9 / a->median_ns : NAN);
    free(tput);
    a->mem_peak = mem;
    a->energy_per_step = en ? esum / (double)en : NAN;
    /* final loss: the last unskipped steps */
    size_t want = a->nsteps / 20, got = 0;
    want = want < 1 ? 1 : want > 50 ? 50 : want;
    double lsum = 0;
    size_t lused = 0;
    for (size_t i = a->nsteps; i-- > 0 && got < want;) {
        if (a->steps[i].skipped)
            continue;
        got++;
        if (isfinite(a->steps[i].loss))
            lsum += a->steps[i].loss, lused++;
    }
    a->final_loss = lused ? lsum / (double)lused : NAN;
    a->val_step = -1;
    a->val_top1 = a->val_top5 = a->val_loss = NAN;
    for (size_t i = 0; i < a->nevals; i++)
        if (strcmp(a->evals[i].split, "val") == 0) {
            a->val_step = a->evals[i].step;
            a->val_top1 = a->evals[i].top1;
            a->val_top5 = a->evals[i].top5;
            a->val_loss = a->evals[i].loss;
        }
    /* an evaluation always has a loss: NULL here is the NaN the writer could not store */
    a->val_nonfinite = a->val_step >= 0 && !isfinite(a->val_loss);
    /* numerics: per layer, overflow / underflow in the shown format over every role */
    int nl = 0;
    for (size_t i = 0; i < a->nnumerics; i++)
        nl = a->numerics[i].layer + 1 > nl ? a->numerics[i].layer + 1 : nl;
    int64_t *over = calloc((size_t)nl + 1, sizeof *over), *under = calloc((size_t)nl + 1, sizeof *under);
    if (!over || !under) {
        free(over);
        free(under);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < a->nnumerics; i++) {
        const fp_layer_numerics_t *x = &a->numerics[i];
        if (x->layer < 0)
            continue;
        over[x->layer] += x->overflow[a->fmt_shown];
        under[x->layer] += x->underflow[a->fmt_shown];
        if (x->role == FP_ROLE_ACTIVATION || x->role == FP_ROLE_WEIGHT) {
            if (a->fmt >= 0)
                a->fwd_overflow += x->overflow[a->fmt];
            a->fwd_nonfinite += x->nan + x->inf;
        }
    }
    a->ntop_over = top_layers(a, over, nl, a->top_over);
    a->ntop_under = top_layers(a, under, nl, a->top_under);
    free(over);
    free(under);
    return FP_OK;
}

int fp_summary_load(fp_reader_t *r, int64_t session, int64_t warmup, fp_summary_t *s)
{
    memset(s, 0, sizeof *s);
    const char *path = fp_reader_path(r);
    fp_session_row_t *sessions;
    size_t ns;
    int rc = fp_reader_sessions(r, &sessions, &ns);
    if (rc != FP_OK)
        return rc;
    int found = 0;
    for (size_t i = 0; i < ns; i++)
        if (session > 0 ? sessions[i].id == session : 1) {
            s->session = sessions[i];   /* the latest when session <= 0 (ordered by id) */
            found = 1;
        }
    free(sessions);
    if (!found)
        return session > 0 ? fp_fail(FP_EINVAL, "%s: no session %lld", path, (long long)session)
                           : fp_fail(FP_EINVAL, "%s: no sessions", path);
    fp_run_row_t *runs;
    size_t nr;
    if ((rc = fp_reader_runs(r, s->session.id, &runs, &nr)) != FP_OK)
        return rc;
    if (nr == 0) {
        free(runs);
        return fp_fail(FP_EINVAL, "%s: session %lld has no runs", path, (long long)s->session.id);
    }
    for (size_t i = 1; i < nr; i++)
        if (strcmp(runs[i].model, runs[0].model) != 0) {
            rc = fp_fail(FP_EINVAL, "%s: session %lld mixes models (%s, %s); a comparison needs one model", path,
                         (long long)s->session.id, runs[0].model, runs[i].model);
            free(runs);
            return rc;
        }
    snprintf(s->model, sizeof s->model, "%s", runs[0].model);
    s->arms = calloc(nr, sizeof *s->arms);
    if (!s->arms) {
        free(runs);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    s->narms = nr;
    for (size_t i = 0; i < nr; i++)
        s->arms[i].run = runs[i];
    free(runs);
    /* the reference arm */
    size_t ref = SIZE_MAX;
    for (size_t i = 0; i < nr && ref == SIZE_MAX; i++)
        for (size_t j = 0; j < nr; j++)
            if (s->arms[j].run.ref_run == s->arms[i].run.id && i != j)
                ref = i;
    for (size_t i = 0; i < nr && ref == SIZE_MAX; i++)
        if (strcmp(s->arms[i].run.policy, "fp32") == 0)
            ref = i;
    s->ref = ref == SIZE_MAX ? 0 : ref;
    s->arms[s->ref].is_ref = 1;
    size_t total_steps = 0;
    for (size_t i = 0; i < nr && rc == FP_OK; i++) {
        rc = load_arm(r, &s->arms[i], warmup);
        total_steps += s->arms[i].nsteps;
    }
    if (rc == FP_OK && total_steps == 0)
        rc = fp_fail(FP_EINVAL, "%s: session %lld is empty (no steps recorded)", path, (long long)s->session.id);
    if (rc != FP_OK) {
        fp_summary_free(s);
        return rc;
    }
    const fp_arm_t *R = &s->arms[s->ref];
    for (size_t i = 0; i < nr; i++) {
        fp_arm_t *a = &s->arms[i];
        a->speedup = fp_step_speedup(R->median_ns, a->median_ns);
        a->mem_ratio = a->mem_peak / R->mem_peak;
        a->energy_ratio = a->energy_per_step / R->energy_per_step;
        a->loss_gap = a->final_loss - R->final_loss;
        a->top1_gap = 100.0 * (a->val_top1 - R->val_top1);
    }
    return FP_OK;
}

char *fp_summary_fmt_val_top1(char *buf, const fp_arm_t *a)
{
    if (a->val_nonfinite) {
        snprintf(buf, FP_UNIT_BUF, "non-finite");
        return buf;
    }
    return fp_fmt_pct(buf, a->val_top1);
}

int fp_summary_val_note(const fp_arm_t *a, char *buf, size_t n)
{
    if (n)
        buf[0] = 0;
    if (!a->val_nonfinite)
        return 0;
    char pct[FP_UNIT_BUF];
    snprintf(buf, n, "%s: validation at step %lld is non-finite (loss %s): top-1 %s counts NaN predictions as wrong",
             a->run.policy, (long long)a->val_step, isnan(a->val_loss) ? "nan" : a->val_loss > 0 ? "inf" : "-inf",
             fp_fmt_pct(pct, a->val_top1));
    return 1;
}

int fp_summary_run_kernels(fp_reader_t *r, int64_t run, fp_kernel_sum_t **k, size_t *n, fp_kernel_flag_t **fl,
                           size_t *nf)
{
    *k = NULL;
    *fl = NULL;
    *n = *nf = 0;
    int rc = fp_reader_kernel_summary(r, run, 0, INT64_MAX, k, n);
    if (rc == FP_OK)
        rc = fp_reader_kernel_flags(r, run, fl, nf);
    return rc;
}

int fp_kernel_flag_of(const fp_kernel_flag_t *fl, size_t nf, const char *name)
{
    int tc = -1;
    for (size_t q = 0; q < nf; q++)
        if (strcmp(fl[q].name, name) == 0)
            tc = fl[q].tensor_core;
    return tc;
}
