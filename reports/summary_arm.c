/* summary_arm.c — one arm of the summary (summary_internal.h): its rows through the store reader and every
 * figure that needs no other arm (step times, throughput, memory, energy or why not, host CPU, loss, validation,
 * skips, loss scale, overflow, lost updates). Promise: what was not measured stays NaN (n/a) or -1, never 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "error.h"
#include "formats.h"
#include "gate.h"
#include "lost_updates.h"
#include "step_time.h"
#include "store.h"
#include "summary_internal.h"
#include "val_images.h"
#include "wilson.h"

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

int fp_summary_load_arm(fp_reader_t *r, fp_arm_t *a, int64_t warmup_req)
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
        double v = fp_lost_updates_pct(ev[i].text);
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
    if ((rc = fp_val_images_recorded(r, a->run.id, a->val_step, &a->val_images)) != FP_OK)
        return rc;
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
