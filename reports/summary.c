/* summary.c — one session's arms compared (summary.h): its runs loaded (each arm: summary_arm.c, numerics:
 * summary_numerics.c), the reference arm and the ratios and gaps against it, lookups. Promise: what was not
 * measured stays NaN (n/a), never 0; on error nothing is left allocated and the message names the file. */
#include "summary.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "error.h"
#include "formats.h"
#include "step_time.h"
#include "summary_internal.h"

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
        rc = fp_summary_load_arm(r, &s->arms[i], warmup);
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
        rc = fp_summary_account(&s->arms[i], R);
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
