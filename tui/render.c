/* render.c — one frame of the dashboard into the cell grid: the layout's panels, the header (with the
 * verdict of each compared arm) and footer, the overlays, or a clear message when the terminal is too small
 * or there is nothing to show yet. Promise: the same code draws the terminal and the headless text screens;
 * nothing here reads the database (the model holds what was read); lines shorten rather than cut. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "store.h"
#include "tui_internal.h"

void fp_tui_fmt_ns(char *buf, size_t cap, double ns)
{
    if (isnan(ns) || ns < 0)
        snprintf(buf, cap, "-");
    else if (ns < 1e3)
        snprintf(buf, cap, "%.0fns", ns);
    else if (ns < 1e6)
        snprintf(buf, cap, "%.1fus", ns / 1e3);
    else if (ns < 1e9)
        snprintf(buf, cap, "%.2fms", ns / 1e6);
    else
        snprintf(buf, cap, "%.2fs", ns / 1e9);
}

void fp_tui_fmt_bytes(char *buf, size_t cap, double b)
{
    if (isnan(b) || b < 0)
        snprintf(buf, cap, "n/a");
    else if (b < 1024)
        snprintf(buf, cap, "%.0fB", b);
    else if (b < 1024.0 * 1024)
        snprintf(buf, cap, "%.1fK", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.1fM", b / 1024 / 1024);
    else
        snprintf(buf, cap, "%.2fG", b / 1024 / 1024 / 1024);
}

void fp_tui_fmt_count(char *buf, size_t cap, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "-");
    else if (v < 1e4)
        snprintf(buf, cap, "%.0f", v);
    else if (v < 1e6)
        snprintf(buf, cap, "%.1fk", v / 1e3);
    else if (v < 1e9)
        snprintf(buf, cap, "%.1fM", v / 1e6);
    else
        snprintf(buf, cap, "%.1fG", v / 1e9);
}

void fp_tui_fmt_dur(char *buf, size_t cap, double s)
{
    if (isnan(s) || s < 0 || s > 1e8) {
        snprintf(buf, cap, "--");
        return;
    }
    long t = (long)(s + 0.5);
    snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

const char *fp_tui_role_short(int role)
{
    static const char *const n[FP_ROLE_COUNT] = {"activation", "act grad", "weight", "weight grad", "update"};
    return role >= 0 && role < FP_ROLE_COUNT ? n[role] : "?";
}

const char *fp_tui_fmt_label(int fmt)
{
    static const char *const n[FP_FMT_COUNT] = {"fp16", "bf16", "E4M3", "E5M2"};
    return fmt >= 0 && fmt < FP_FMT_COUNT ? n[fmt] : "?";
}

/* ---------------------------------------------------------------- header and footer */

static const char *arm_state(const fp_tui_arm_t *a, char *buf, size_t cap)
{
    const char *st = a->status.status[0] ? a->status.status : a->run.status;
    if (a->status.stale && strcmp(st, "running") == 0)
        snprintf(buf, cap, "running (stale)");
    else
        snprintf(buf, cap, "%s", st);
    return buf;
}

/* Line 1 at its fullest that fits: the session name goes first, then the image size and the device. */
static void header_title(fp_draw_t *d, fp_rect_t r)
{
    const fp_tui_model_t *m = d->m;
    fp_grid_t *g = d->g;
    int xe = r.x + r.w;
    const fp_run_row_t *r0 = &m->arm[m->ref].run;
    const char *sep = d->ascii ? " | " : " │ ";
    char sess[200], dev[200];
    int lvl;
    for (lvl = 0; lvl < 3; lvl++) {
        int n = 9 + 3 + (int)strlen(r0->model) + 1;
        for (int i = 0; i < m->narms; i++)
            n += (int)strlen(m->arm[i].run.policy) + (i ? 4 : 0);
        snprintf(sess, sizeof sess, "%ssession %lld", sep, (long long)m->session);
        n += fp_utf8_len(sess);
        if (lvl == 0 && m->session_name[0])
            n += (int)strlen(m->session_name) + 3;
        int k = snprintf(dev, sizeof dev, "%s%s", sep, lvl < 2 ? (r0->device[0] ? r0->device : "?") : "");
        if (r0->batch_size > 0 && k < (int)sizeof dev)
            k += snprintf(dev + k, sizeof dev - (size_t)k, "%sbatch %lld", lvl < 2 ? ", " : "", (long long)r0->batch_size);
        if (r0->image_size > 0 && lvl < 1 && k < (int)sizeof dev)
            snprintf(dev + k, sizeof dev - (size_t)k, ", %lldpx", (long long)r0->image_size);
        n += fp_utf8_len(dev);
        if (n <= r.w)
            break;
    }
    int x = fp_grid_text(g, r.x, r.y, xe, FP_C_TITLE | FP_A_BOLD, "fp16probe");
    x = fp_grid_printf(g, x, r.y, xe, FP_A_BOLD, "%s%s ", sep, r0->model);
    for (int i = 0; i < m->narms; i++) {
        if (i)
            x = fp_grid_text(g, x, r.y, xe, 0, " vs ");
        x = fp_grid_text(g, x, r.y, xe, (uint16_t)((FP_C_ARM0 + i) | FP_A_BOLD), m->arm[i].run.policy);
    }
    x = fp_grid_text(g, x, r.y, xe, 0, sess);
    if (lvl == 0 && m->session_name[0])
        x = fp_grid_printf(g, x, r.y, xe, FP_C_DIM, " \"%s\"", m->session_name);
    fp_grid_text(g, x, r.y, xe, 0, dev);
}

/* Line 2: each arm's step and status (once for all when they agree), elapsed and ETA. */
static void header_progress(fp_draw_t *d, fp_rect_t r)
{
    const fp_tui_model_t *m = d->m;
    fp_grid_t *g = d->g;
    int xe = r.x + r.w, y = r.y + 1;
    int64_t first = -1, last = -1, done_steps = 0;
    int running = 0, same = 1;
    char st0[32], tot[32] = "";
    arm_state(&m->arm[0], st0, sizeof st0);
    if (m->total_steps > 0)
        snprintf(tot, sizeof tot, "/%lld", (long long)m->total_steps);
    for (int i = 0; i < m->narms; i++) {
        const fp_tui_arm_t *a = &m->arm[i];
        char st[32];
        arm_state(a, st, sizeof st);
        same &= strcmp(st, st0) == 0 && a->last_step == m->arm[0].last_step && strcmp(st, "failed") != 0;
        if (a->first_start >= 0 && (first < 0 || a->first_start < first))
            first = a->first_start;
        if (a->last_end > last)
            last = a->last_end;
        if (a->last_step > done_steps)
            done_steps = a->last_step;
        running |= strcmp(st, "running") == 0;
    }
    int x = r.x;
    if (same && m->narms > 1) {   /* steps are 1-based: the number done */
        int bad = strcmp(st0, "interrupted") == 0 || m->arm[0].status.stale;
        x = fp_grid_printf(g, x, y, xe, FP_A_BOLD, "%d arms", m->narms);
        x = fp_grid_printf(g, x, y, xe, 0, " step %lld%s ", (long long)m->arm[0].last_step, tot);
        x = fp_grid_text(g, x, y, xe, bad ? FP_C_BAD | FP_A_BOLD : strcmp(st0, "finished") == 0 ? FP_C_GOOD : FP_C_WARN,
                         st0);
        x = fp_grid_text(g, x, y, xe, 0, "  ");
    } else {
        for (int i = 0; i < m->narms; i++) {
            const fp_tui_arm_t *a = &m->arm[i];
            char st[32];
            arm_state(a, st, sizeof st);
            int bad = strcmp(st, "failed") == 0 || strcmp(st, "interrupted") == 0 || a->status.stale;
            x = fp_grid_text(g, x, y, xe, (uint16_t)((FP_C_ARM0 + i) | FP_A_BOLD), a->run.arm[0] ? a->run.arm : a->run.policy);
            x = fp_grid_printf(g, x, y, xe, 0, m->narms > 2 ? " %lld%s " : " step %lld%s ", (long long)a->last_step, tot);
            x = fp_grid_text(g, x, y, xe, bad ? FP_C_BAD | FP_A_BOLD : strcmp(st, "finished") == 0 ? FP_C_GOOD : FP_C_WARN, st);
            if (strcmp(st, "failed") == 0 && a->status.failure[0])
                x = fp_grid_printf(g, x, y, xe, FP_C_BAD, " (%s)", a->status.failure);
            x = fp_grid_text(g, x, y, xe, 0, "  ");
        }
    }
    char el[32], eta[32] = "--";
    double elapsed = first >= 0 && last >= first ? (double)(last - first) / 1e9 : NAN;
    fp_tui_fmt_dur(el, sizeof el, elapsed);
    if (!running)
        snprintf(eta, sizeof eta, "ended");
    else if (m->total_steps > 0 && done_steps > 0 && !isnan(elapsed))
        fp_tui_fmt_dur(eta, sizeof eta, elapsed / (double)done_steps * (double)(m->total_steps - done_steps));
    fp_grid_printf(g, x, y, xe, FP_C_DIM, "elapsed %s  ETA %s", el, eta);
}

/* The verdict, from line 3: a title line (the reference, and the note that CPU speedups are emulated), then
 * per compared arm what the tool is asked: speedup ('*': measured on the CPU), final-loss gap, top-1 gap with
 * the arm's 95% interval ("n.s.": within the uncertainty), skipped steps, lost updates (mean % over the
 * sampled steps). Columns aligned; labels shortened before anything is cut. */
static void header_verdict(fp_draw_t *d, fp_rect_t r)
{
    const fp_tui_model_t *m = d->m;
    fp_grid_t *g = d->g;
    int xe = r.x + r.w, y = r.y + 2, ye = r.y + r.h;
    if (m->narms < 2 || y >= ye)
        return;
    enum { SP, LG, TG, SK, LU, NF };
    char f[FP_TUI_MAX_ARMS][NF][48];
    int wd[NF] = {0}, nw = 0, emu = 0, ns = 0, lost_n = 0;
    for (int i = 0; i < m->narms; i++) {
        int k = (int)strlen(m->arm[i].run.policy);
        nw = k > nw ? k : nw;
        emu |= fp_tui_arm_emulated(&m->arm[i]);
        if (i == m->ref)
            continue;
        fp_tui_verdict_t v;
        fp_tui_verdict(m, i, &v);
        snprintf(f[i][SP], 48, "-");
        snprintf(f[i][LG], 48, "-");
        snprintf(f[i][TG], 48, "n/a");
        snprintf(f[i][LU], 48, "-");
        if (!isnan(v.speedup))
            snprintf(f[i][SP], 48, "%.2fx%s", v.speedup, fp_tui_arm_emulated(&m->arm[i]) ? "*" : "");
        if (!isnan(v.loss_gap))
            snprintf(f[i][LG], 48, "%+.3f", v.loss_gap);
        if (!isnan(v.top1_gap)) {
            int k2 = snprintf(f[i][TG], 48, "%+.1fpt", v.top1_gap);
            if (!isnan(v.top1_lo))
                snprintf(f[i][TG] + k2, 48 - (size_t)k2, " [%.0f-%.0f%%]%s", 100 * v.top1_lo, 100 * v.top1_hi,
                         v.within ? " n.s." : "");
        }
        ns |= v.within;
        snprintf(f[i][SK], 48, "%lld", (long long)v.skipped);
        if (!isnan(v.lost_pct))
            snprintf(f[i][LU], 48, "%.3g%%", v.lost_pct);
        lost_n = v.lost_n > lost_n ? v.lost_n : lost_n;
        for (int c = 0; c < NF; c++)
            wd[c] = (int)strlen(f[i][c]) > wd[c] ? (int)strlen(f[i][c]) : wd[c];
    }
    static const char *const lab[2][NF] = {{"", "  loss ", "  top-1 ", "  skipped ", "  lost upd "},
                                           {"", " loss ", " top1 ", " skip ", " lost "}};
    int set = 0, tot = 0;
    for (; set < 2; set++) {
        tot = nw + 1;
        for (int c = 0; c < NF; c++)
            tot += (int)strlen(lab[set][c]) + wd[c];
        if (tot <= r.w)
            break;
    }
    set = set > 1 ? 1 : set;
    /* the title line */
    char t1[256];
    int k = snprintf(t1, sizeof t1, "vs %s:", m->arm[m->ref].run.policy);
    int x = fp_grid_text(g, r.x, y, xe, FP_A_BOLD, t1);
    if (emu)
        x = fp_grid_text(g, x, y, xe, FP_C_WARN, " * " FP_TUI_EMULATED_NOTE);
    const char *extra[2] = {ns ? "  n.s.: gap within the uncertainty" : "",
                            lost_n > 1 ? "  lost upd: mean of sampled steps" : ""};
    for (int e = 0; e < 2; e++)
        if (extra[e][0] && x + fp_utf8_len(extra[e]) <= xe)
            x = fp_grid_text(g, x, y, xe, FP_C_DIM, extra[e]);
    (void)k;
    y++;
    for (int i = 0; i < m->narms && y < ye; i++) {
        if (i == m->ref)
            continue;
        fp_tui_verdict_t v;
        fp_tui_verdict(m, i, &v);
        x = fp_grid_printf(g, r.x, y, xe, (uint16_t)((FP_C_ARM0 + i) | FP_A_BOLD), "%-*s", nw, m->arm[i].run.policy);
        x = fp_grid_printf(g, x, y, xe, !(v.speedup >= 1) ? FP_C_BAD : v.speedup >= 1.2 ? FP_C_GOOD : 0, " %*s",
                           wd[SP], f[i][SP]);
        x = fp_grid_printf(g, x, y, xe, FP_C_DIM, "%s", lab[set][LG]);
        x = fp_grid_printf(g, x, y, xe, 0, "%*s", wd[LG], f[i][LG]);
        x = fp_grid_printf(g, x, y, xe, FP_C_DIM, "%s", lab[set][TG]);
        x = fp_grid_printf(g, x, y, xe, v.within ? FP_C_DIM : 0, "%-*s", wd[TG], f[i][TG]);
        x = fp_grid_printf(g, x, y, xe, FP_C_DIM, "%s", lab[set][SK]);
        x = fp_grid_printf(g, x, y, xe, v.skipped > 0 ? FP_C_WARN : 0, "%*s", wd[SK], f[i][SK]);
        x = fp_grid_printf(g, x, y, xe, FP_C_DIM, "%s", lab[set][LU]);
        fp_grid_printf(g, x, y, xe, 0, "%*s", wd[LU], f[i][LU]);
        y++;
    }
}

/* The data-parallel line, under the verdict: the ranks, per arm the exposed all-reduce share of the ranks' step
 * time (and the all-reduce's whole share), and the slowest rank against the fastest (the straggler). */
static void header_dist(fp_draw_t *d, fp_rect_t r)
{
    const fp_tui_model_t *m = d->m;
    fp_grid_t *g = d->g;
    int xe = r.x + r.w, y = r.y + fp_tui_header_lines(m, r.w) - 1;
    if (!fp_tui_any_ranks(m) || y >= r.y + r.h)
        return;
    int ranks = 0;
    for (int i = 0; i < m->narms; i++)
        ranks = m->arm[i].ranks > ranks ? m->arm[i].ranks : ranks;
    int x = fp_grid_printf(g, r.x, y, xe, FP_A_BOLD, "data parallel: %d ranks", ranks);
    x = fp_grid_text(g, x, y, xe, FP_C_DIM, "  comm share (exposed / all-reduce of step), slowest rank:");
    for (int i = 0; i < m->narms; i++) {
        const fp_tui_arm_t *a = &m->arm[i];
        x = fp_grid_printf(g, x, y, xe, (uint16_t)((FP_C_ARM0 + i) | FP_A_BOLD), "  %s", a->run.policy);
        if (!a->ranks) {
            x = fp_grid_text(g, x, y, xe, FP_C_DIM, " alone");
            continue;
        }
        char ex[16] = "n/a", al[16] = "n/a", st[48] = "";
        if (!isnan(a->exposed_share))
            snprintf(ex, sizeof ex, "%.1f%%", 100 * a->exposed_share);
        if (!isnan(a->comm_share))
            snprintf(al, sizeof al, "%.1f%%", 100 * a->comm_share);
        if (a->slowest >= 0 && !isnan(a->straggler))
            snprintf(st, sizeof st, " r%d %.2fx", a->slowest, a->straggler);
        x = fp_grid_printf(g, x, y, xe, 0, " %s/%s", ex, al);
        x = fp_grid_printf(g, x, y, xe, a->straggler >= 1.1 ? FP_C_WARN : 0, "%s", st);
    }
}

void fp_panel_header(fp_draw_t *d, fp_rect_t r)
{
    const fp_tui_model_t *m = d->m;
    fp_grid_t *g = d->g;
    int xe = r.x + r.w;
    if (m->narms == 0) {
        int x = fp_grid_text(g, r.x, r.y, xe, FP_C_TITLE | FP_A_BOLD, "fp16probe");
        fp_grid_text(g, x, r.y, xe, 0, d->ascii ? " | dashboard" : " │ dashboard");
        return;
    }
    header_title(d, r);
    header_progress(d, r);
    header_verdict(d, r);
    header_dist(d, r);
}

void fp_panel_footer(fp_draw_t *d, fp_rect_t r)
{
    fp_grid_t *g = d->g;
    fp_tui_ui_t *ui = d->ui;
    int xe = r.x + r.w;
    for (int i = r.x; i < xe; i++)
        fp_grid_put(g, i, r.y, FP_A_REV, " ");
    if (ui->confirm) {
        fp_grid_text(g, r.x, r.y, xe, FP_C_BAD | FP_A_REV | FP_A_BOLD,
                     " Stop the training? The session is flushed and marked interrupted. (y/n) ");
        return;
    }
    static const char *const focus[FP_FOCUS_COUNT] = {"layers", "histogram", "events"};
    const char *dn = d->ascii ? "v" : "▼", *up = d->ascii ? "^" : "▲";
    int cmp = fp_tui_cmp_arm(d->m, ui);
    const char *arm = cmp >= 0 && d->m->narms > 0 ? d->m->arm[cmp].run.policy : "-";
    char t[256];
    for (int v = 0; v < 3; v++) {   /* the fullest that fits */
        snprintf(t, sizeof t, v == 0   ? " q quit  ? help  a arm:%s  Tab:%s  s sort:%s%s  r role:%s  f fmt:%s  Enter detail"
                              : v == 1 ? " q quit ? help a:%s Tab:%s s sort:%s%s r role:%s f fmt:%s"
                                       : " q ? a:%s Tab:%s sort:%s%s role:%s fmt:%s",
                 arm, focus[ui->focus], fp_tui_col_name(ui->sort_col), ui->sort_desc ? dn : up,
                 fp_tui_role_short(ui->role), fp_tui_fmt_label(ui->fmt));
        if (fp_utf8_len(t) <= r.w)
            break;
    }
    fp_grid_text(g, r.x, r.y, xe, FP_A_REV, t);
}

/* ---------------------------------------------------------------- the frame */

static void centered(fp_grid_t *g, int y, uint16_t attr, const char *s)
{
    int n = fp_utf8_len(s);
    int x = (g->w - n) / 2;
    fp_grid_text(g, x < 0 ? 0 : x, y, g->w, attr, s);
}

void fp_tui_render(fp_grid_t *g, const fp_tui_model_t *m, fp_tui_ui_t *ui, const fp_layout_t *l, int chart,
                   int ascii)
{
    fp_grid_clear(g);
    fp_draw_t d = {.g = g, .m = m, .ui = ui, .chart = chart, .ascii = ascii};
    if (l->too_small) {   /* a clear message, short lines, centred, never garbage */
        char a[64], b[64];
        snprintf(a, sizeof a, "terminal too small: %dx%d", l->w, l->h);
        snprintf(b, sizeof b, "need %dx%d", FP_TUI_MIN_W, FP_TUI_MIN_H);
        int y = g->h / 2 - 1;
        centered(g, y < 0 ? 0 : y, FP_C_WARN | FP_A_BOLD, a);
        centered(g, y + 1, 0, b);
        centered(g, y + 2, FP_C_DIM, "enlarge it, or q");
        return;
    }
    fp_panel_header(&d, l->p[FP_P_HEADER]);
    fp_panel_footer(&d, l->p[FP_P_FOOTER]);
    if (m->note[0] || m->narms == 0) {
        centered(g, g->h / 2 - 1, FP_C_WARN | FP_A_BOLD, m->note[0] ? m->note : "waiting for data");
        centered(g, g->h / 2 + 1, FP_C_DIM, "the dashboard follows the file; q quits");
        return;
    }
    fp_tui_sort_layers(m, ui);
    fp_panel_loss(&d, l->p[FP_P_LOSS]);
    fp_panel_thr(&d, l->p[FP_P_THR]);
    fp_panel_mem(&d, l->p[FP_P_MEM]);
    fp_panel_scale(&d, l->p[FP_P_SCALE]);
    fp_panel_layers(&d, l->p[FP_P_LAYERS]);
    fp_panel_hist(&d, l->p[FP_P_HIST]);
    fp_panel_events(&d, l->p[FP_P_EVENTS]);
    if (ui->detail)
        fp_panel_detail(&d, g->w, g->h);
    if (ui->help)
        fp_panel_help(&d, g->w, g->h);
}
