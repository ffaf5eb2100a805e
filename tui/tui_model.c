/* tui_model.c — the dashboard's data: one session of a database, read incrementally. Promise: each
 * update reads only what is new since the previous one (steps after the last seen, events after the
 * last id, histograms and precision only when their marks move, the layer table over a bounded
 * window) with short read transactions; long series are kept downsampled, O(buckets) to draw. Every
 * frame is bounded, the first included: a history longer than one frame can read in FP_TUI_BUDGET_MS
 * is read over several frames (in order, FP_TUI_CHUNK steps at a time; m->loading meanwhile), so the
 * figures shown once it is read are those of a single full read. Its series: tui_series.c; the figures derived
 * from it: tui_derived.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "error.h"
#include "lost_updates.h"
#include "step_time.h"
#include "store.h"
#include "store_reader_dist.h"
#include "tui_internal.h"
#include "val_images.h"
#include "wilson.h"

/* ---------------------------------------------------------------- attach */

static void arm_free(fp_tui_arm_t *a)
{
    free(a->walls);
    free(a->skips);
    free(a->losses);
    free(a->lsum);
    free(a->hist);
    free(a->relerr);
}

static void detach(fp_tui_model_t *m)
{
    for (int i = 0; i < m->narms; i++)
        arm_free(&m->arm[i]);
    free(m->layers);
    m->layers = NULL;
    m->nlayers = 0;
    m->narms = 0;
    m->session = 0;
    m->nev = 0;
}

static void arm_init(fp_tui_arm_t *a, const fp_run_row_t *run)
{
    memset(a, 0, sizeof *a);
    a->run = *run;
    a->last_step = -1;
    a->first_start = a->last_end = -1;
    fp_ds_init(&a->loss);
    fp_ds_init(&a->thr);
    fp_ds_init(&a->scale);
    fp_ds_init(&a->skipped);
    fp_ds_init(&a->speedup);
    a->last_loss = a->last_thr = a->last_scale = NAN;
    a->mem_cur = a->mem_peak = a->power_last = NAN;
    a->val_top1 = a->val_loss = NAN;
    a->val_step = -1;
    a->val_images = -1;
    a->val_lo = a->val_hi = NAN;
    a->eval_rows_seen = a->eval_last_seen = -2;
    a->hist_role = -1;
    a->hist_mark = -2;
    a->prec_step = -1;
    a->prec_mark = -2;
    a->lsum_step = -2;
    a->median_ns = NAN;
    a->slowest = -1;
    a->exposed_share = a->comm_share = a->straggler = NAN;
    a->dist_step = -2;
}

/* "steps": N in a JSON text (a plain scan: the configuration is ours). */
static int64_t config_steps(const char *json)
{
    const char *p = json ? strstr(json, "\"steps\"") : NULL;
    if (!p)
        return -1;
    p += 7;
    while (*p == ' ' || *p == ':')
        p++;
    char *end;
    long long v = strtoll(p, &end, 10);
    return end != p && v > 0 ? v : -1;
}

static int read_layers(fp_tui_model_t *m)
{
    fp_layer_row_t *rows;
    size_t n;
    int rc = fp_reader_layers(m->reader, m->arm[0].run.id, &rows, &n);
    if (rc != FP_OK)
        return rc;
    if (n == 0) {
        free(rows);
        return FP_OK;
    }
    int nl = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].layer + 1 > nl)
            nl = rows[i].layer + 1;
    if (nl > 4096)
        nl = 4096;
    fp_layer_row_t *by = calloc((size_t)nl, sizeof *by);
    if (!by) {
        free(rows);
        return fp_fail(FP_ENOMEM, "tui: out of memory");
    }
    for (int l = 0; l < nl; l++) {
        by[l].layer = l;
        snprintf(by[l].name, sizeof by[l].name, "layer %d", l);
    }
    for (size_t i = 0; i < n; i++)
        if (rows[i].layer >= 0 && rows[i].layer < nl)
            by[rows[i].layer] = rows[i];
    free(rows);
    for (int i = 0; i < m->narms; i++) {
        fp_tui_arm_t *a = &m->arm[i];
        a->hist = calloc((size_t)nl, sizeof *a->hist);
        a->relerr = malloc((size_t)nl * sizeof *a->relerr);
        if (!a->hist || !a->relerr) {
            free(by);
            return fp_fail(FP_ENOMEM, "tui: out of memory");
        }
        for (int l = 0; l < nl; l++) {
            a->hist[l].step = -1;
            a->relerr[l] = NAN;
        }
    }
    m->layers = by;
    m->nlayers = nl;
    return FP_OK;
}

static int attach(fp_tui_model_t *m, int64_t session)
{
    detach(m);
    fp_run_row_t *runs;
    size_t n;
    int rc = fp_reader_runs_meta(m->reader, session, &runs, &n);
    if (rc != FP_OK)
        return rc;
    m->session = session;
    m->ref = 0;
    for (size_t i = 0; i < n && m->narms < FP_TUI_MAX_ARMS; i++)
        arm_init(&m->arm[m->narms++], &runs[i]);
    for (int i = 0; i < m->narms; i++)   /* the reference: the arm the others point at, else fp32 */
        if (m->arm[i].run.ref_run <= 0 && strcmp(m->arm[i].run.policy, "fp32") == 0) {
            m->ref = i;
            break;
        }
    for (int i = 0; i < m->narms; i++)
        if (m->arm[i].run.ref_run > 0)
            for (int j = 0; j < m->narms; j++)
                if (m->arm[j].run.id == m->arm[i].run.ref_run)
                    m->ref = j;
    free(runs);
    char *cfg = NULL;
    m->total_steps = -1;
    if (fp_reader_session_config(m->reader, session, &cfg) == FP_OK)
        m->total_steps = config_steps(cfg);
    free(cfg);
    fp_session_row_t *ss;
    size_t ns;
    m->session_name[0] = 0;
    if (fp_reader_sessions(m->reader, &ss, &ns) == FP_OK) {
        for (size_t i = 0; i < ns; i++)
            if (ss[i].id == session)
                snprintf(m->session_name, sizeof m->session_name, "%s", ss[i].name);
        free(ss);
    }
    if (m->narms > 0)
        rc = read_layers(m);
    return rc;
}

int fp_tui_model_open(fp_tui_model_t *m, const char *path, int64_t session)
{
    memset(m, 0, sizeof *m);
    m->session_req = session;
    m->budget_ms = FP_TUI_BUDGET_MS;
    m->marks.max_session = m->marks.max_run = m->marks.max_hist_id = m->marks.max_event_id = -1;
    return fp_reader_open(&m->reader, path);
}

void fp_tui_model_close(fp_tui_model_t *m)
{
    detach(m);
    fp_reader_close(m->reader);
    m->reader = NULL;
}

/* ---------------------------------------------------------------- update */

static int ingest(fp_tui_arm_t *a, const fp_step_row_t *s, size_t n)
{
    size_t need = (size_t)a->nsteps + n;
    if (need > a->rows_cap) {   /* every row's time: the step time is a median over all of them */
        size_t cap = a->rows_cap ? a->rows_cap : 1024;
        while (cap < need)
            cap *= 2;
        int64_t *w = realloc(a->walls, cap * sizeof *w);
        if (w)
            a->walls = w;
        uint8_t *k = w ? realloc(a->skips, cap * sizeof *k) : NULL;
        if (k)
            a->skips = k;
        double *lv = k ? realloc(a->losses, cap * sizeof *lv) : NULL;
        if (!lv)
            return fp_fail(FP_ENOMEM, "dashboard: out of memory");
        a->losses = lv;
        a->rows_cap = cap;
    }
    for (size_t i = 0; i < n; i++, s++) {
        a->walls[a->nsteps] = s->wall_ns;
        a->skips[a->nsteps] = s->skipped != 0;
        a->losses[a->nsteps] = s->loss;
        if (!isnan(s->loss_scale) && s->loss_scale != 1.0)
            a->has_scaler = 1;
        fp_ds_push(&a->loss, s->loss);
        fp_ds_push(&a->thr, s->samples_per_s);
        fp_ds_push(&a->scale, s->loss_scale > 0 ? log2(s->loss_scale) : NAN);
        fp_ds_push(&a->skipped, s->skipped ? 1.0 : 0.0);
        a->skipped_total += s->skipped != 0;
        if (!isnan(s->loss_scale) && !isnan(a->last_scale) && s->loss_scale != a->last_scale)
            a->scale_changes++;
        if (!isnan(s->loss_scale))
            a->last_scale = s->loss_scale;
        if (!isnan(s->loss))
            a->last_loss = s->loss;
        if (!isnan(s->samples_per_s))
            a->last_thr = s->samples_per_s;
        if (s->mem_current >= 0)
            a->mem_cur = (double)s->mem_current;
        if (s->mem_peak >= 0 && (isnan(a->mem_peak) || (double)s->mem_peak > a->mem_peak))
            a->mem_peak = (double)s->mem_peak;
        if (!isnan(s->energy_j)) {
            a->energy_sum += s->energy_j;
            a->energy_steps++;
        }
        if (!isnan(s->power_w))
            a->power_last = s->power_w;
        if (a->first_start < 0 && s->start >= 0)
            a->first_start = s->start;
        if (s->end >= 0)
            a->last_end = s->end;
        a->last_step = s->step;
        a->nsteps++;
    }
    return FP_OK;
}

static void add_event(fp_tui_model_t *m, int arm, const fp_tui_event_t *e)
{
    fp_tui_ev_t *v = &m->events[m->nev++ % FP_TUI_EVENTS];
    v->step = e->step;
    v->arm = arm;
    v->kind = e->kind;
    v->layer = e->layer;
    snprintf(v->text, sizeof v->text, "%s", e->text);
}

/* "key": N (an integer) in a JSON text, -1 when absent (a plain scan: the configuration is ours). */
static int64_t config_int(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p)
        return -1;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    char *end;
    long long v = strtoll(p, &end, 10);
    return end != p && v >= 0 ? v : -1;
}

/* Images of a validation when the store has no count: the run's configuration, by the gate's rule
 * (reports/gate_load.c: eval_batches x batch, capped by the split's size where it is known: synthetic
 * 10,000, synthetic:N max(N / 5, 10); the whole split of a directory: unknown). -1: unknown. */
static int64_t config_val_images(const char *cfg)
{
    int64_t batches = config_int(cfg, "eval_batches"), batch = config_int(cfg, "batch"), split = -1;
    const char *d = cfg ? strstr(cfg, "\"data\"") : NULL;
    if (d) {
        d += 6;
        while (*d == ' ' || *d == ':')
            d++;
        if (strncmp(d, "\"synthetic\"", 11) == 0) {
            split = 10000;
        } else if (strncmp(d, "\"synthetic:", 11) == 0) {
            long long n = strtoll(d + 11, NULL, 10);
            split = n >= 10 ? (n / 5 > 10 ? n / 5 : 10) : -1;
        }
    }
    if (batches > 0 && batch > 0)
        return split > 0 && split < batches * batch ? split : batches * batch;
    return batches == 0 ? split : -1;
}

static int read_evals(fp_tui_model_t *m, fp_tui_arm_t *a)
{
    fp_reader_t *r = m->reader;
    fp_eval_row_t *ev;
    size_t ne;
    int rc = fp_reader_evaluations(r, a->run.id, &ev, &ne);
    if (rc != FP_OK)
        return rc;
    int64_t step = a->val_step;
    for (size_t k = 0; k < ne; k++)   /* in step order: the newest wins */
        if (strcmp(ev[k].split, "val") == 0 || strcmp(ev[k].split, "validation") == 0) {
            a->val_top1 = ev[k].top1;
            a->val_loss = ev[k].loss;
            a->val_step = ev[k].step;
        }
    free(ev);
    if (a->val_step == step && a->val_images >= 0)
        return FP_OK;
    /* the new validation's size: the store's count, else the configuration's */
    if ((rc = fp_val_images_recorded(r, a->run.id, a->val_step, &a->val_images)) != FP_OK)
        return rc;
    if (a->val_images < 0 && a->val_step >= 0) {
        fp_run_env_t *env = calloc(1, sizeof *env);
        if (!env)
            return fp_fail(FP_ENOMEM, "dashboard: out of memory");
        if ((rc = fp_reader_run_env(r, a->run.id, env)) == FP_OK)
            a->val_images = config_val_images(env->config);
        free(env);
        if (rc != FP_OK)
            return rc;
    }
    fp_wilson95(a->val_top1, a->val_images, &a->val_lo, &a->val_hi);
    return FP_OK;
}

/* The data-parallel figures of an arm (store_reader_dist.h's per-rank means over every recorded step). */
static int read_dist(fp_reader_t *r, fp_tui_arm_t *a)
{
    fp_dist_rank_row_t *rk = NULL;
    size_t n = 0;
    int rc = fp_reader_dist_ranks(r, a->run.id, &rk, &n);
    if (rc != FP_OK)
        return rc;
    double wall = 0, exp = 0, comm = 0, mx = -1;
    a->ranks = 0;
    a->slowest = -1;
    a->straggler = NAN;
    for (size_t k = 0; k < n; k++) {
        a->ranks = rk[k].rank + 1 > a->ranks ? rk[k].rank + 1 : a->ranks;
        if (!(rk[k].mean_wall_ns > 0))
            continue;
        double s = (double)rk[k].steps;
        wall += s * rk[k].mean_wall_ns;
        exp += isnan(rk[k].mean_exposed_ns) ? 0 : s * rk[k].mean_exposed_ns;
        comm += isnan(rk[k].mean_comm_ns) ? 0 : s * rk[k].mean_comm_ns;
        if (rk[k].mean_wall_ns > mx) {
            mx = rk[k].mean_wall_ns;
            a->slowest = rk[k].rank;
            a->straggler = rk[k].vs_fastest;
        }
    }
    a->exposed_share = wall > 0 ? exp / wall : NAN;
    a->comm_share = wall > 0 ? comm / wall : NAN;
    a->dist_step = a->last_step;
    free(rk);
    return FP_OK;
}

static int update_arm(fp_tui_model_t *m, int i, int role, int hist_moved, double deadline)
{
    fp_tui_arm_t *a = &m->arm[i];
    fp_reader_t *r = m->reader;
    int rc = fp_reader_tui_run_status(r, a->run.id, &a->status);
    if (rc != FP_OK)
        return rc;
    int moved = 0;
    while (a->status.last_step > a->last_step) {   /* only the new steps, in chunks, within the budget */
        if (moved && fp_clock_mono_s() * 1e3 >= deadline)
            break;   /* the rest next frame (one chunk per arm per frame at least: progress) */
        fp_step_row_t *rows;
        size_t n;
        if ((rc = fp_reader_steps_since(r, a->run.id, a->last_step, FP_TUI_CHUNK, &rows, &n)) != FP_OK)
            return rc;
        rc = ingest(a, rows, n);
        free(rows);
        if (rc != FP_OK)
            return rc;
        moved = 1;
        if (n == 0)
            break;
    }
    int behind = a->status.last_step > a->last_step;
    m->loading |= behind;
    if (a->median_rows != a->nsteps) {   /* the step time as the summary has it (lib/step_time.h) */
        a->median_ns = fp_step_median_ns(a->walls, a->skips, (size_t)a->nsteps, -1);
        a->median_rows = a->nsteps;
    }
    /* the evaluations by their own mark: the final one is written after the last step row */
    if (m->force || a->status.eval_rows != a->eval_rows_seen || a->status.eval_last_step != a->eval_last_seen) {
        if ((rc = read_evals(m, a)) != FP_OK)
            return rc;
        a->eval_rows_seen = a->status.eval_rows;
        a->eval_last_seen = a->status.eval_last_step;
    }
    if (m->nlayers > 0 && a->last_step >= 0 && (a->lsum_step != a->last_step || m->force) && !behind) {   /* read once caught up */
        free(a->lsum);
        a->lsum = NULL;
        a->nlsum = 0;
        int64_t lo = a->last_step - FP_TUI_WINDOW + 1;
        if ((rc = fp_reader_layer_summary(r, a->run.id, lo < 0 ? 0 : lo, a->last_step, &a->lsum, &a->nlsum)) != FP_OK)
            return rc;
        a->lsum_step = a->last_step;
    }
    if (m->nlayers > 0 && (hist_moved || a->hist_role != role || m->force)) {
        if ((rc = fp_reader_tui_hist_latest(r, a->run.id, role, m->nlayers, a->hist)) != FP_OK)
            return rc;
        a->hist_role = role;
    }
    /* precision rows of a sampled step may follow its step row: re-read when the histograms move too */
    if (m->nlayers > 0 && a->run.ref_run > 0 && (moved || hist_moved || a->prec_mark != role || m->force)) {
        if ((rc = fp_reader_tui_precision_latest(r, a->run.id, role, m->nlayers, a->relerr, &a->prec_step)) != FP_OK)
            return rc;
        a->prec_mark = role;
    }
    if (a->dist_step != a->last_step && !behind && (rc = read_dist(r, a)) != FP_OK)
        return rc;
    return FP_OK;
}

int fp_tui_model_update(fp_tui_model_t *m, int role)
{
    double t0 = fp_clock_mono_s() * 1e3;
    m->loading = 0;
    fp_tui_marks_t mk;
    int rc = fp_reader_tui_marks(m->reader, &mk);
    if (rc != FP_OK)
        return rc;
    if (m->session == 0 || (m->session_req <= 0 && mk.max_session > m->session)) {
        int64_t want = m->session_req > 0 ? m->session_req : mk.max_session;
        if (want <= 0) {
            snprintf(m->note, sizeof m->note, "%s: no sessions recorded yet (waiting for a training to start)",
                     fp_reader_path(m->reader));
            m->marks = mk;
            m->frames++;
            return FP_OK;
        }
        if (m->session_req > 0 && mk.max_session < want)
            return fp_fail(FP_EINVAL, "%s: no session %lld", fp_reader_path(m->reader), (long long)want);
        if ((rc = attach(m, want)) != FP_OK)
            return rc;
        m->marks.max_hist_id = m->marks.max_event_id = -1;
    }
    if (m->narms > 0 && m->narms < FP_TUI_MAX_ARMS && mk.max_run != m->marks.max_run) {   /* an arm appeared */
        fp_run_row_t *runs;
        size_t n;
        if ((rc = fp_reader_runs_meta(m->reader, m->session, &runs, &n)) != FP_OK)
            return rc;
        free(runs);
        if ((int)n > m->narms) {
            if ((rc = attach(m, m->session)) != FP_OK)
                return rc;
            m->marks.max_hist_id = m->marks.max_event_id = -1;
        }
    }
    if (m->narms == 0) {   /* a session whose runs are not there yet */
        fp_run_row_t *runs;
        size_t n;
        if ((rc = fp_reader_runs_meta(m->reader, m->session, &runs, &n)) != FP_OK)
            return rc;
        free(runs);
        if (n > 0 && (rc = attach(m, m->session)) != FP_OK)
            return rc;
        if (m->narms == 0) {
            snprintf(m->note, sizeof m->note, "session %lld has no runs yet (waiting)", (long long)m->session);
            m->frames++;
            return FP_OK;
        }
    }
    m->note[0] = 0;
    if (m->nlayers == 0 && (rc = read_layers(m)) != FP_OK)
        return rc;
    int hist_moved = mk.max_hist_id != m->marks.max_hist_id;
    int ev_moved = mk.max_event_id != m->marks.max_event_id;
    double deadline = t0 + m->budget_ms;
    for (int i = 0; i < m->narms; i++) {   /* the reference first */
        int k = i == 0 ? m->ref : (i <= m->ref ? i - 1 : i);
        if ((rc = update_arm(m, k, role, hist_moved, deadline)) != FP_OK)
            return rc;
    }
    if (ev_moved) {
        for (int i = 0; i < m->narms; i++) {
            fp_tui_arm_t *a = &m->arm[i];
            fp_tui_event_t *ev;
            size_t n;
            if ((rc = fp_reader_tui_events_since(m->reader, a->run.id, a->event_id, 0, &ev, &n)) != FP_OK)
                return rc;
            for (size_t k = 0; k < n; k++) {
                add_event(m, i, &ev[k]);
                a->event_id = ev[k].id;
                double v = fp_lost_updates_pct(ev[k].text);   /* lib/lost_updates.h: the reports' reading */
                if (!isnan(v)) {
                    a->lost_sum += v;
                    a->lost_max = a->lost_n ? fmax(a->lost_max, v) : v;
                    a->lost_n++;
                }
            }
            free(ev);
        }
    }
    for (int i = 0; i < m->narms; i++)
        if (i != m->ref)
            fp_ds_ratio(&m->arm[i].speedup, &m->arm[i].thr, &m->arm[m->ref].thr);
    m->marks = mk;
    m->frames++;
    m->force = 0;
    return FP_OK;
}

int fp_tui_model_settle(fp_tui_model_t *m, int role)
{
    int rc = FP_OK;
    while (rc == FP_OK && m->loading)
        rc = fp_tui_model_update(m, role);
    return rc;
}
