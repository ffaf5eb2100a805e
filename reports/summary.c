/* summary.c — one session's arms compared (summary.h): loads each run through the store reader and
 * derives the end-of-run summary's figures. Promise: what was not measured stays NaN (n/a), never 0;
 * on error nothing is left allocated and the message names the file. */
#include "summary.h"
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "error.h"
#include "formats.h"
#include "gate.h"
#include "step_time.h"
#include "store.h"
#include "units.h"
#include "wilson.h"

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

/* Whether a run's device names a GPU ("cuda: NAME"; older rows: a GPU's name, a CPU arm the CPU's model name). */
static int gpu_device(const char *d)
{
    if (strncasecmp(d, "cpu", 3) == 0)   /* the trainer writes "cpu: <model>" / "cuda: <GPU name>" */
        return 0;
    if (strncasecmp(d, "cuda", 4) == 0)
        return 1;
    static const char *const gpu[] = {"nvidia", "cuda", "gpu", "tesla", "geforce", "quadro", "radeon", "rtx"};
    for (const char *p = d; *p; p++)
        for (size_t i = 0; i < sizeof gpu / sizeof *gpu; i++)
            if (strncasecmp(p, gpu[i], strlen(gpu[i])) == 0)
                return 1;
    return 0;
}

/* Why an arm has no energy figure, when no event recorded it: for a CPU arm recorded on this host, what the
 * host shows now (RAPL's powercap zone and perf_event_paranoid); else that nothing recorded why. */
static void energy_reason(fp_arm_t *a)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    if (!a->emulated || !a->run.host[0] || strcmp(host, a->run.host) != 0) {
        snprintf(a->energy_why, sizeof a->energy_why, "%s", a->emulated ? "no RAPL reading recorded"
                                                                        : "no NVML energy reading recorded");
        return;
    }
    const char *zone = getenv("FP_POWERCAP_ZONE");   /* tests point this elsewhere */
    if (!zone)
        zone = "/sys/class/powercap/intel-rapl:0/energy_uj";
    int rapl = access(zone, R_OK) == 0;
    char par[16] = "?";
    const char *pp = getenv("FP_PERF_PARANOID_FILE");
    FILE *f = fopen(pp ? pp : "/proc/sys/kernel/perf_event_paranoid", "r");
    if (f) {
        if (!fgets(par, sizeof par, f))
            snprintf(par, sizeof par, "?");
        par[strcspn(par, "\n")] = 0;
        fclose(f);
    }
    snprintf(a->energy_why, sizeof a->energy_why, "%s, perf_event_paranoid=%s (this host, now)",
             rapl ? "RAPL readable now but not recorded" : access(zone, F_OK) == 0 ? "RAPL zone not readable (root only)"
                                                                                 : "no RAPL",
             par);
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
    const size_t cap = a->nsteps ? a->nsteps : 1;
    a->times = malloc(cap * sizeof *a->times);
    double *tput = malloc(cap * sizeof *tput), *host = malloc(2 * cap * sizeof *host), *share = host + cap;
    if (!a->times || !tput || !host) {
        free(tput);
        free(host);
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
        if (!isnan(st->loss_scale) && st->loss_scale != 1.0)
            a->has_scaler = 1;
        if (i < a->warmup || st->skipped)
            continue;
        if (fp_step_timed(i, a->warmup, st->skipped, st->wall_ns)) {   /* lib/step_time.h */
            a->times[a->ntimes++] = (double)st->wall_ns;
            if (st->host_cpu_ns > 0) {   /* host CPU over the same steps; NULL (-1): not measured */
                host[a->nhost_cpu] = (double)st->host_cpu_ns;
                share[a->nhost_cpu++] = (double)st->host_cpu_ns / (double)st->wall_ns;
            }
        }
        if (isfinite(st->samples_per_s))
            tput[ntput++] = st->samples_per_s;
        if (isfinite(st->energy_j))
            esum += st->energy_j, en++;
    }
    if (!a->has_scaler)
        a->final_loss_scale = NAN;   /* no loss scaler: "-", never 1 */
    a->skip_rate = a->nsteps ? (double)a->skipped / (double)a->nsteps : NAN;
    a->median_ns = fp_median(a->times, a->ntimes);
    a->samples_per_s = ntput ? fp_median(tput, ntput)
                             : (a->run.batch_size > 0 && a->median_ns > 0 ? a->run.batch_size * 1e9 / a->median_ns : NAN);
    free(tput);
    a->host_cpu_ns = fp_median(host, a->nhost_cpu);
    a->host_cpu_share = fp_median(share, a->nhost_cpu);
    free(host);
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
    /* numerics: the forward overflow here; the per-role accounting once the reference is known (account) */
    for (size_t i = 0; i < a->nnumerics; i++) {
        const fp_layer_numerics_t *x = &a->numerics[i];
        if (x->layer < 0)
            continue;
        if (x->samples > a->hist_steps)
            a->hist_steps = x->samples;
        if (x->role == FP_ROLE_ACTIVATION || x->role == FP_ROLE_WEIGHT) {
            if (a->fmt >= 0)
                a->fwd_overflow += x->overflow[a->fmt];
            a->fwd_nonfinite += x->nan + x->inf;
        }
    }
    a->master_fp32 = strcasecmp(a->run.policy, "half") != 0;
    a->emulated = !gpu_device(a->run.device);
    /* lost updates: the parameter pass's events */
    a->lost_pct = a->lost_max = NAN;
    ev = NULL;
    nev = 0;
    if ((rc = fp_reader_events(r, a->run.id, FP_EVENT_INFO, 0, &ev, &nev)) != FP_OK)
        return rc;
    double lsum2 = 0;
    static const char ehead[] = "energy unavailable: ";
    for (size_t i = 0; i < nev; i++)
        if (strncmp(ev[i].text, ehead, sizeof ehead - 1) == 0)
            snprintf(a->energy_why, sizeof a->energy_why, "%s", ev[i].text + sizeof ehead - 1);
    for (size_t i = 0; i < nev; i++) {
        double v = fp_gate_lost_pct(ev[i].text);
        if (isnan(v))
            continue;
        lsum2 += v;
        a->lost_max = a->lost_samples ? fmax(a->lost_max, v) : v;
        a->lost_samples++;
    }
    free(ev);
    if (a->lost_samples)
        a->lost_pct = lsum2 / a->lost_samples;
    if (isnan(a->energy_per_step) && !a->energy_why[0])
        energy_reason(a);
    else if (!isnan(a->energy_per_step))
        a->energy_why[0] = 0;
    /* the last validation's size and its 95% interval */
    a->val_images = -1;
    fp_eval_images_t *im = NULL;
    size_t nim = 0;
    if ((rc = fp_reader_eval_images(r, a->run.id, &im, &nim)) != FP_OK)
        return rc;
    for (size_t i = 0; i < nim; i++)
        if (im[i].step == a->val_step && strcmp(im[i].split, "val") == 0 && im[i].images > 0)
            a->val_images = im[i].images;
    free(im);
    if (a->val_images < 0 && a->val_step >= 0) {   /* else the run's configuration (the gate's rule) */
        fp_run_env_t *env = calloc(1, sizeof *env);
        if (!env)
            return fp_fail(FP_ENOMEM, "out of memory");
        char why[192] = "";
        if ((rc = fp_reader_run_env(r, a->run.id, env)) == FP_OK)
            a->val_images = fp_gate_eval_images_from_config(env->config, why, sizeof why);
        /* "the whole cifar10:DIR validation split" assumes CIFAR-10's 10,000 test images: a directory of
         * another size (the digits check's 300) would get a false interval, so unknown here */
        if (strstr(why, "whole cifar10"))
            a->val_images = -1;
        free(env);
        if (rc != FP_OK)
            return rc;
    }
    fp_wilson95(a->val_top1, a->val_images, &a->val_top1_lo, &a->val_top1_hi);
    return FP_OK;
}

int fp_summary_role_matters(const fp_arm_t *a, int role, int overflow)
{
    if (overflow && role == FP_ROLE_ACTIVATION)   /* a forward value past the format's range: Inf downstream */
        return 1;
    /* activations stay out: their zeros are mostly ReLU's, whose pattern differs between arms as their
     * weights drift, so the difference against the reference measures that more than flushing */
    if (role == FP_ROLE_ACTIVATION_GRAD || role == FP_ROLE_WEIGHT_GRAD)
        return 1;
    return (role == FP_ROLE_WEIGHT || role == FP_ROLE_UPDATE) && !a->master_fp32;
}

/* The reference arm's row for (layer, role), or NULL. */
static const fp_layer_numerics_t *ref_row(const fp_arm_t *R, int layer, int role)
{
    for (size_t i = 0; R && i < R->nnumerics; i++)
        if (R->numerics[i].layer == layer && R->numerics[i].role == role)
            return &R->numerics[i];
    return NULL;
}

/* Per role and layer overflow / underflow in the shown format, the flushed zeros of a low-precision arm
 * against the reference R, the per-role tops and the headline over the roles that matter. */
static int account(fp_arm_t *a, const fp_arm_t *R)
{
    int nl = 0;
    for (size_t i = 0; i < a->nnumerics; i++)
        nl = a->numerics[i].layer + 1 > nl ? a->numerics[i].layer + 1 : nl;
    size_t cells = (size_t)(nl + 1) * FP_SUMMARY_ROLES;
    int64_t *over = calloc(cells, sizeof *over), *under = calloc(cells, sizeof *under);
    int64_t *hover = calloc((size_t)nl + 1, sizeof *hover), *hunder = calloc((size_t)nl + 1, sizeof *hunder);
    if (!over || !under || !hover || !hunder) {
        free(over), free(under), free(hover), free(hunder);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < a->nnumerics; i++) {
        const fp_layer_numerics_t *x = &a->numerics[i];
        if (x->layer < 0 || x->role < 0 || x->role >= FP_SUMMARY_ROLES)
            continue;
        int64_t o = x->overflow[a->fmt_shown], u = x->underflow[a->fmt_shown], fl = 0;
        const fp_layer_numerics_t *y = a->fmt >= 0 && R && R != a && R->fmt < 0 ? ref_row(R, x->layer, x->role) : NULL;
        if (y && y->samples > 0 && x->samples > 0) {
            double extra = (double)x->zero - (double)y->zero * (double)x->samples / (double)y->samples;
            fl = extra > 0 ? (int64_t)llround(extra) : 0;
        }
        u += fl;
        a->flushed_role[x->role] += fl;
        a->over_role[x->role] += o;
        a->under_role[x->role] += u;
        over[(size_t)x->role * (size_t)(nl + 1) + (size_t)x->layer] += o;
        under[(size_t)x->role * (size_t)(nl + 1) + (size_t)x->layer] += u;
        if (fp_summary_role_matters(a, x->role, 1))
            hover[x->layer] += o;
        if (fp_summary_role_matters(a, x->role, 0))
            hunder[x->layer] += u;
    }
    for (int role = 0; role < FP_SUMMARY_ROLES; role++) {
        a->ntop_over_role[role] = top_layers(a, over + (size_t)role * (size_t)(nl + 1), nl, a->top_over_role[role]);
        a->ntop_under_role[role] = top_layers(a, under + (size_t)role * (size_t)(nl + 1), nl, a->top_under_role[role]);
    }
    a->ntop_over = top_layers(a, hover, nl, a->top_over);
    a->ntop_under = top_layers(a, hunder, nl, a->top_under);
    free(over), free(under), free(hover), free(hunder);
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
    for (size_t i = 0; i < nr && rc == FP_OK; i++)
        rc = account(&s->arms[i], R);
    if (rc != FP_OK) {
        fp_summary_free(s);
        return rc;
    }
    for (size_t i = 0; i < nr; i++) {
        fp_arm_t *a = &s->arms[i];
        a->speedup = fp_step_speedup(R->median_ns, a->median_ns);
        a->mem_ratio = a->mem_peak / R->mem_peak;
        a->energy_ratio = a->energy_per_step / R->energy_per_step;
        a->loss_gap = a->final_loss - R->final_loss;
        a->top1_gap = 100.0 * (a->val_top1 - R->val_top1);
        /* a gap smaller than its uncertainty: the two 95% intervals overlap (unknown sizes: not claimed) */
        a->top1_gap_within = !a->is_ref && isfinite(a->val_top1_lo) && isfinite(R->val_top1_lo) &&
                             a->val_top1_lo <= R->val_top1_hi && R->val_top1_lo <= a->val_top1_hi;
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

char *fp_summary_fmt_loss_scale(char *buf, const fp_arm_t *a)
{
    if (!a->has_scaler || isnan(a->final_loss_scale))
        snprintf(buf, FP_UNIT_BUF, "-");
    else
        snprintf(buf, FP_UNIT_BUF, "%g", a->final_loss_scale);
    return buf;
}

const char *fp_summary_speed_note(const fp_arm_t *a)
{
    return a->emulated ? "emulated on the CPU: speed not representative" : "";
}

char *fp_summary_fmt_host_cpu(char *buf, const fp_arm_t *a)
{
    if (!a->nhost_cpu || !isfinite(a->host_cpu_ns)) {
        snprintf(buf, FP_UNIT_BUF, "n/a (not recorded)");
        return buf;
    }
    char t[FP_UNIT_BUF], p[FP_UNIT_BUF];
    snprintf(buf, FP_UNIT_BUF, "%s (%s of the step)", fp_fmt_ns(t, a->host_cpu_ns), fp_fmt_pct(p, a->host_cpu_share));
    return buf;
}

const char *fp_summary_host_cpu_note(const fp_arm_t *a)
{
    return a->emulated ? "CPU backend: includes the training thread's own compute"
                       : "GPU: the host's own work, the wait for the device left out (it sleeps)";
}

static const char *const role_names[FP_SUMMARY_ROLES] = {"activations", "activation gradients", "weights",
                                                         "weight gradients", "updates"};

static void print_tops(FILE *f, const fp_top_layer_t *t, int n)
{
    if (n == 0)
        fprintf(f, " none");
    for (int k = 0; k < n; k++)
        fprintf(f, "%s %s (%" PRId64 ")", k ? "," : "", t[k].name, t[k].count);
}

/* Host CPU per step, per arm, with what it holds on the arm's device; one line when no arm recorded it. */
static void print_host_cpu(FILE *f, const fp_summary_t *s)
{
    int any = 0;
    for (size_t i = 0; i < s->narms; i++)
        any |= s->arms[i].nhost_cpu > 0;
    if (!any) {
        fprintf(f, "  %-22s n/a (not recorded)\n", "host CPU / step");
        return;
    }
    fprintf(f, "  host CPU / step (the training thread's CPU time, median over the timed steps; share of the step's "
               "wall time)\n");
    char b[FP_UNIT_BUF];
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fprintf(f, "    %-12s %s", a->run.policy, fp_summary_fmt_host_cpu(b, a));
        if (a->nhost_cpu)
            fprintf(f, "; %s", fp_summary_host_cpu_note(a));
        fprintf(f, "\n");
    }
}

void fp_summary_print_precision(FILE *f, const fp_summary_t *s)
{
    int any = 0;
    int64_t nsteps = 0;
    for (size_t i = 0; i < s->narms; i++) {
        any |= s->arms[i].nnumerics > 0;
        nsteps = s->arms[i].hist_steps > nsteps ? s->arms[i].hist_steps : nsteps;
    }
    for (int over = 1; over >= 0; over--) {
        const char *what = over ? "most overflow" : "most underflow";
        if (!any) {
            fprintf(f, "  %-22s n/a (no histograms sampled)\n", what);
            continue;
        }
        fprintf(f, "  %s (sums over %" PRId64 " sampled steps; %sactivation and weight gradients, and weights and "
                   "updates of arms without fp32 master weights)\n", what, nsteps, over ? "activations, " : "");
        for (size_t i = 0; i < s->narms; i++) {
            const fp_arm_t *a = &s->arms[i];
            fprintf(f, "    %-12s", a->run.policy);
            if (a->nnumerics == 0) {
                fprintf(f, " n/a (no histograms sampled)\n");
                continue;
            }
            print_tops(f, over ? a->top_over : a->top_under, over ? a->ntop_over : a->ntop_under);
            if (a->fmt < 0)
                fprintf(f, "   [would be, in %s]", a->fmt_shown == 0 ? "fp16" : "its format");
            fprintf(f, "\n");
            /* per role: the total, and of underflow the zeros flushed beyond the reference's */
            fprintf(f, "    %-12s", "");
            int first = 1;
            for (int role = 0; role < FP_SUMMARY_ROLES; role++) {
                int64_t v = over ? a->over_role[role] : a->under_role[role];
                int matters = fp_summary_role_matters(a, role, over);
                if (!matters && v == 0)
                    continue;
                fprintf(f, "%s%s %" PRId64, first ? " " : "; ", role_names[role], v);
                if (!over && a->flushed_role[role] > 0)
                    fprintf(f, " (%" PRId64 " flushed to zero: zeros beyond %s's)", a->flushed_role[role],
                            s->arms[s->ref].run.policy);
                if (!matters)
                    fprintf(f, role == FP_ROLE_ACTIVATION ? " [not in the headline]"
                                                          : " [fp32 master weights: not in the headline]");
                first = 0;
            }
            fprintf(f, "\n");
        }
    }
    fprintf(f, "  lost updates (%% of the weights with a nonzero gradient left unchanged, mean over sampled steps)\n");
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fprintf(f, "    %-12s", a->run.policy);
        if (a->lost_samples == 0)
            fprintf(f, " n/a (not measured)\n");
        else
            fprintf(f, " %.4g%% (max %.4g%%, over %d sampled steps)\n", a->lost_pct, a->lost_max, a->lost_samples);
    }
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        if (a->is_ref || isnan(a->top1_gap))
            continue;
        if (a->val_images > 0)
            fprintf(f, "  %s: val top-1 %.2f%% (95%% CI %.2f..%.2f%%, n=%" PRId64 "), gap %+.2f pt%s\n", a->run.policy,
                    100 * a->val_top1, 100 * a->val_top1_lo, 100 * a->val_top1_hi, a->val_images, a->top1_gap,
                    a->top1_gap_within ? ": within the uncertainty (no difference shown)" : "");
        else
            fprintf(f, "  %s: top-1 gap %+.2f pt: sample size not recorded, no interval\n", a->run.policy, a->top1_gap);
    }
    for (size_t i = 0; i < s->narms; i++)
        if (s->arms[i].energy_why[0])
            fprintf(f, "  %s: energy n/a: %s\n", s->arms[i].run.policy, s->arms[i].energy_why);
    for (size_t i = 0; i < s->narms; i++)
        if (s->arms[i].emulated) {
            fprintf(f, "  speedups: %s\n", fp_summary_speed_note(&s->arms[i]));
            break;
        }
    print_host_cpu(f, s);
    fprintf(f, "  %s\n", FP_SUMMARY_LOSS_MEANING);
}
