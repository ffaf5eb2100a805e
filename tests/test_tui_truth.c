/* test_tui_truth.c — the numbers the dashboard shows are the truth (issue 19, dashboard): the newest rows
 * (a final evaluation written after the last step row; Ctrl-L re-reads), one figure for throughput and step
 * time (batch / the median step time), every panel with N arms and a key ('a') for the compared arm, the
 * verdict lines (speedup, loss gap, top-1 gap with its 95% interval, skipped steps, lost updates), the CPU
 * emulation note next to the speedups, '-' for arms without a loss scaler, counts named by their step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "hist.h"
#include "store.h"
#include "store_reader.h"
#include "store_reader_tui.h"
#include "tap.h"
#include "tui_screen_testutil.h"
#include "testutil.h"
#include "tui/tui.h"
#include "tui/tui_internal.h"
#include "wilson.h"

#define STEPS 40
#define MAXA 4

static const char *const POL[MAXA] = {"fp32", "fp16", "half", "bf16"};
static const int64_t WALL[MAXA] = {40000000, 20000000, 32000000, 25000000};   /* speedups 2.00 1.25 1.60 */
static const double LOSS[MAXA] = {2.0, 2.5, 1.9, 2.1};                        /* gaps +0.5 -0.1 +0.1 */
static const double TOP1[MAXA] = {0.5, 0.4375, 0.5, 0.25};
static const int64_t PEAK[MAXA] = {100 << 20, 60 << 20, 50 << 20, 70 << 20};

/* A session of n arms: steps 1..STEPS (fp16 skips steps 5 and 6; its loss scale is 32768, bf16 stores 1 as
 * old files did for arms without a scaler, the others NULL; the last step is 4x as fast as the others, so
 * its own rate is not the arm's), a histogram of layer 0 at step 40, evaluations at step 20 and (unless
 * final_eval is 0: the caller writes it) at step 40, lost-update events (half: 10% and 14%). */
static int write_session(fp_store_t *s, int n, const char *device, int final_eval, int64_t runs[MAXA])
{
    int64_t sess;
    fp_session_info_t si = {"truth", "{\"steps\":40,\"batch\":8,\"eval_batches\":2,\"data\":\"synthetic\"}"};
    int rc = fp_store_begin_session(s, &si, &sess);
    for (int a = 0; rc == FP_OK && a < n; a++) {
        fp_run_info_t ri = {.session = sess, .arm = POL[a], .policy = POL[a], .model = "resnet18",
                            .ref_run = a ? runs[0] : 0, .device = device, .batch_size = 8, .image_size = 32,
                            .dataset = "synthetic", .config_json = si.config_json};
        rc = fp_store_begin_run(s, &ri, &runs[a]);
        for (int l = 0; rc == FP_OK && l < 2; l++) {
            fp_layer_info_t li = {.run = runs[a], .index = l, .name = l ? "fc" : "conv1", .type = "conv2d",
                                  .params = 10, .fwd_flops = 10, .bwd_flops = 20};
            rc = fp_store_layer(s, &li);
        }
    }
    for (int64_t k = 1; rc == FP_OK && k <= STEPS; k++)
        for (int a = 0; rc == FP_OK && a < n; a++) {
            int64_t w = k == STEPS ? WALL[a] / 4 : WALL[a];
            fp_step_rec_t st = {.run = runs[a], .step = k, .loss = LOSS[a], .lr = 0.1,
                                .loss_scale = a == 1 ? 32768 : a == 3 ? 1.0 : NAN, .skipped = a == 1 && (k == 5 || k == 6),
                                .start = k * 1000000000LL, .end = k * 1000000000LL + w, .wall_ns = w,
                                .samples_per_s = 8e9 / (double)w, .mem_current = PEAK[a] / 2, .mem_peak = PEAK[a],
                                .energy_j = NAN, .power_w = NAN};
            fp_layer_time_t lt[2] = {{.layer = 0, .phase = 0, .time_ns = w / 4, .kernels = 1},
                                     {.layer = 1, .phase = 0, .time_ns = w / 8, .kernels = 1}};
            rc = fp_store_step(s, &st, lt, 2);
            if (rc == FP_OK && k == STEPS) {
                fp_hist_t h;
                fp_hist_init(&h);
                float x[4] = {1.0f, 1e-9f, 70000.0f, 0.5f};
                fp_hist_add(&h, x, 4);
                rc = fp_store_hist(s, runs[a], k, 0, FP_ROLE_ACTIVATION, &h);
            }
            if (rc == FP_OK && (k == 20 || k == STEPS) && a >= 1) {
                char txt[160];
                double pct = a == 2 ? (k == 20 ? 10.0 : 14.0) : 0.002;
                snprintf(txt, sizeof txt, "lost updates at step %lld: %g%% of the weights with a nonzero gradient "
                         "did not change", (long long)k, pct);
                rc = fp_store_event(s, runs[a], st.end + 1, k, -1, FP_EVENT_INFO, txt);
            }
            if (rc == FP_OK && k == 20) {
                fp_eval_rec_t ev = {.run = runs[a], .step = 20, .split = "val", .loss = 3, .top1 = 0.125, .top5 = 0.5,
                                    .images = 16};
                rc = fp_store_eval(s, &ev);
            }
        }
    for (int a = 0; rc == FP_OK && final_eval && a < n; a++) {
        fp_eval_rec_t ev = {.run = runs[a], .step = STEPS, .split = "val", .loss = 1, .top1 = TOP1[a], .top5 = 1,
                            .images = 16};
        rc = fp_store_eval(s, &ev);
    }
    return rc;
}

static int write_db(const char *path, int n, const char *device)
{
    fp_store_t *s;
    int64_t runs[MAXA];
    int rc = fp_store_open(&s, path);
    if (rc != FP_OK)
        return rc;
    rc = write_session(s, n, device, 1, runs);
    int rc2 = fp_store_close(s, FP_RUN_FINISHED, NULL);
    return rc ? rc : rc2;
}

/* The text of a panel's rectangle in a grid (rows joined by '\n'). */
static void rect_text(const fp_grid_t *g, fp_rect_t r, char *out, size_t cap)
{
    size_t n = 0;
    for (int y = r.y; y < r.y + r.h; y++) {
        for (int x = r.x; x < r.x + r.w && n + 6 < cap; x++)
            for (const char *c = g->cells[y * g->w + x].ch; *c && n + 6 < cap; c++)
                out[n++] = *c;
        out[n++] = '\n';
    }
    out[n] = 0;
}

/* Render the model at w x h with the ui and the layout the dashboard makes. */
static void frame(fp_grid_t *g, fp_layout_t *l, const fp_tui_model_t *m, fp_tui_ui_t *ui, int w, int h)
{
    fp_grid_free(g);
    fp_grid_init(g, w, h, 1);
    fp_tui_layout_hdr(l, w, h, fp_tui_header_lines(m, w));
    fp_tui_render(g, m, ui, l, FP_TUI_CHART_ASCII, 1);
}

int main(void)
{
    char *dir = tu_mkdir();
    if (!dir)
        tap_skip_all("cannot create a temporary directory");
    char *db3 = tu_path(dir, "three.db"), *db4 = tu_path(dir, "four.db"), *dbg = tu_path(dir, "gpu.db"),
         *dbl = tu_path(dir, "live.db");
    if (write_db(db3, 3, "cpu: test CPU") != FP_OK || write_db(db4, 4, "cpu: test CPU") != FP_OK ||
        write_db(dbg, 2, "cuda: NVIDIA H100") != FP_OK) {
        tap_diag("fixture: %s", fp_error_message());
        return 1;
    }

    /* 1. the final evaluation, written after the last step row, is shown (it stayed at step 20's) */
    fp_store_t *s;
    int64_t runs[MAXA];
    int rc = fp_store_open(&s, dbl);
    if (rc == FP_OK)
        rc = write_session(s, 2, "cpu: test CPU", 0, runs);
    if (rc == FP_OK)
        rc = fp_store_flush(s);
    fp_tui_model_t m;
    fp_tui_ui_t ui;
    fp_tui_ui_init(&ui);
    if (rc == FP_OK && (rc = fp_tui_model_open(&m, dbl, 0)) == FP_OK)
        rc = fp_tui_model_settle(&m, ui.role) == FP_OK ? fp_tui_model_update(&m, ui.role) : rc;
    tap_ok(rc == FP_OK && m.narms == 2 && m.arm[1].val_step == 20 && m.arm[1].val_top1 == 0.125,
           "before the final evaluation: step 20's top-1 (12.5%%)");
    for (int a = 0; rc == FP_OK && a < 2; a++) {
        fp_eval_rec_t ev = {.run = runs[a], .step = STEPS, .split = "val", .loss = 1, .top1 = TOP1[a], .top5 = 1,
                            .images = 16};
        rc = fp_store_eval(s, &ev);
    }
    if (rc == FP_OK)
        rc = fp_store_flush(s);
    if (rc == FP_OK)
        rc = fp_tui_model_update(&m, ui.role);
    tap_ok(rc == FP_OK && m.arm[0].val_step == STEPS && m.arm[1].val_step == STEPS && m.arm[1].val_top1 == TOP1[1],
           "the final evaluation, written after the last step row, is read (fp16 val step %lld, top-1 %g)",
           (long long)m.arm[1].val_step, m.arm[1].val_top1);
    fp_grid_t g = {0};
    fp_layout_t l;
    char buf[16384];
    frame(&g, &l, &m, &ui, 200, 50);
    rect_text(&g, l.p[FP_P_LOSS], buf, sizeof buf);
    tap_ok(ts_has(buf, "val 43.8%") && ts_has(buf, "val 50.0%"), "the loss panel shows the final top-1 of both arms");
    /* Ctrl-L re-reads what is not appended: a model whose evaluation went stale comes back */
    m.arm[1].val_top1 = NAN;
    m.arm[1].val_step = -1;
    int act = fp_tui_key(&ui, FP_KEY_REDRAW, 0);
    if (act == FP_ACT_REDRAW_ALL)
        m.force = 1;
    rc = fp_tui_model_update(&m, ui.role);
    tap_ok(act == FP_ACT_REDRAW_ALL && rc == FP_OK && m.arm[1].val_step == STEPS && m.arm[1].val_top1 == TOP1[1],
           "Ctrl-L: the next update re-reads the evaluations");
    fp_tui_model_close(&m);
    fp_store_close(s, FP_RUN_FINISHED, NULL);

    /* 2. throughput and step time: one figure (batch 8 / 40 ms = 200/s; the last step's own rate 800/s) */
    char *t = ts_screen(db3, 200, 50, "", 1);
    tap_ok(ts_has(ts_line_with(t, "40.00ms"), "fp32 200/s 40.00ms") && ts_has(t, "fp16 400/s 20.00ms") &&
               ts_has(t, "half 250/s 32.00ms") && !strstr(t, "800/s"),
           "throughput is batch / the median step time: %s", ts_line_with(t, "40.00ms"));

    /* 3. three arms: the loss-scale panel, the memory panel, the compared arm and its key */
    if ((rc = fp_tui_model_open(&m, db3, 0)) == FP_OK)
        rc = fp_tui_model_settle(&m, ui.role) == FP_OK ? fp_tui_model_update(&m, ui.role) : rc;
    fp_tui_ui_init(&ui);
    frame(&g, &l, &m, &ui, 80, 24);
    rect_text(&g, l.p[FP_P_SCALE], buf, sizeof buf);
    tap_ok(rc == FP_OK && ts_has(buf, "loss scale fp16") && !strstr(buf, "loss scale half") && ts_has(buf, "fp16 32768") &&
               ts_has(buf, "fp32 -") && ts_has(buf, "half -"),
           "80x24, 3 arms: the loss-scale panel is fp16's; every arm's scale, '-' without a scaler:\n%s", buf);
    rect_text(&g, l.p[FP_P_MEM], buf, sizeof buf);
    tap_ok(ts_has(buf, "fp32") && ts_has(buf, "fp16") && ts_has(buf, "half") && ts_has(buf, "100.0M") && ts_has(buf, "60.0M") &&
               ts_has(buf, "50.0M"),
           "80x24, 3 arms: the memory panel lists every arm's peak:\n%s", buf);
    rect_text(&g, l.p[FP_P_LAYERS], buf, sizeof buf);
    char thr[4096];
    rect_text(&g, l.p[FP_P_THR], thr, sizeof thr);
    tap_ok(ts_has(buf, "layers fp16 vs fp32") && ts_has(thr, "fp16 speedup 2.00x"),
           "the compared arm is fp16 (the first low-precision arm): the table and the speedup name it");
    fp_tui_key(&ui, 'a', 0);
    frame(&g, &l, &m, &ui, 80, 24);
    rect_text(&g, l.p[FP_P_LAYERS], buf, sizeof buf);
    rect_text(&g, l.p[FP_P_THR], thr, sizeof thr);
    tap_ok(ts_has(buf, "layers half vs fp32") && ts_has(thr, "half speedup 1.25x"),
           "'a': the compared arm is half: the table and the throughput title follow");
    frame(&g, &l, &m, &ui, 200, 50);
    rect_text(&g, l.p[FP_P_LAYERS], buf, sizeof buf);
    tap_ok(ts_has(buf, "F half") && !strstr(buf, "F fp16"), "200x50 after 'a': the table's columns are half's");
    fp_tui_key(&ui, 'a', 0);
    int back = fp_tui_cmp_arm(&m, &ui);
    fp_tui_key(&ui, 'A', 0);
    tap_ok(back == 1 && fp_tui_cmp_arm(&m, &ui) == 2, "'a' cycles the arms other than fp32; 'A' goes back");
    fp_tui_model_close(&m);

    /* 4. the verdict: per arm against fp32, with the emulation note next to the speedups */
    free(t);
    t = ts_screen(db4, 80, 24, "", 1);
    double lo, hi;
    fp_wilson95(TOP1[2], 16, &lo, &hi);
    char ci[64];
    snprintf(ci, sizeof ci, "[%.0f-%.0f%%] n.s.", 100 * lo, 100 * hi);
    const char *h16 = ts_line_with(t, "fp16 2.00x*");
    tap_ok(ts_has(h16, "+0.500") && ts_has(h16, "-6.2pt") && ts_has(h16, " 2 ") && ts_has(h16, "0.002%"),
           "verdict fp16: speedup 2.00x*, loss gap +0.500, top-1 -6.2pt, skipped 2, lost 0.002%%: %s", h16);
    const char *hh = ts_line_with(t, "half 1.25x*");
    tap_ok(ts_has(hh, "-0.100") && ts_has(hh, "+0.0pt") && ts_has(hh, ci) && ts_has(hh, "12%"),
           "verdict half: loss gap -0.100, top-1 +0.0pt %s, lost updates the mean of 10%% and 14%%: %s", ci, hh);
    tap_ok(ts_has(ts_line_with(t, "bf16 1.60x*"), "+0.100") && ts_has(ts_line_with(t, "bf16 1.60x*"), "-25.0pt"),
           "verdict bf16: 1.60x*, +0.100, -25.0pt");
    tap_ok(ts_has(ts_line_with(t, "vs fp32"), "* emulated on the CPU: speed not representative") &&
               ts_has(ts_line_with(t, "throughput"), "speedup 2.00x*"),
           "CPU: the note next to the speedups, '*' on each");
    free(t);
    t = ts_screen(dbg, 80, 24, "", 1);
    tap_ok(!strstr(t, "emulated") && ts_has(t, "fp16 2.00x ") && !strstr(t, "2.00x*"), "GPU (cuda: ...): no note, no '*'");

    /* 5. four arms at 80x24 and 120x40: every panel lists every arm, nothing cut */
    if ((rc = fp_tui_model_open(&m, db4, 0)) == FP_OK)
        rc = fp_tui_model_settle(&m, ui.role) == FP_OK ? fp_tui_model_update(&m, ui.role) : rc;
    fp_tui_ui_init(&ui);
    static const int sz[2][2] = {{80, 24}, {120, 40}};
    for (int k = 0; k < 2; k++) {
        frame(&g, &l, &m, &ui, sz[k][0], sz[k][1]);
        int ok = rc == FP_OK;
        static const int panels[4] = {FP_P_LOSS, FP_P_THR, FP_P_MEM, FP_P_SCALE};
        static const char *const pn[4] = {"loss", "throughput", "memory", "loss scale"};
        for (int p = 0; p < 4; p++) {
            rect_text(&g, l.p[panels[p]], buf, sizeof buf);
            for (int a = 0; a < 4; a++)
                if (!strstr(buf, POL[a])) {
                    tap_diag("%dx%d: %s panel lacks %s:\n%s", sz[k][0], sz[k][1], pn[p], POL[a], buf);
                    ok = 0;
                }
        }
        rect_text(&g, l.p[FP_P_LOSS], buf, sizeof buf);   /* each arm's validation accuracy stays */
        int npct = 0;
        for (const char *p = buf; (p = strchr(p, '%')); p++)
            npct++;
        if (npct < 4) {
            tap_diag("%dx%d: loss panel shows %d of 4 validation accuracies:\n%s", sz[k][0], sz[k][1], npct, buf);
            ok = 0;
        }
        rect_text(&g, l.p[FP_P_THR], buf, sizeof buf);   /* each arm's step time whole: 40ms 20ms 32ms 25ms */
        ok &= ts_has(buf, "40") && ts_has(buf, "20") && ts_has(buf, "32") && ts_has(buf, "25");
        rect_text(&g, l.p[FP_P_HEADER], buf, sizeof buf);
        ok &= ts_has(buf, "12%") && ts_has(buf, "bf16") && ts_has(buf, "lost");
        rect_text(&g, l.p[FP_P_SCALE], buf, sizeof buf);
        ok &= ts_has(buf, "bf16 -");   /* a stored 1 (old files) is no loss scaler */
        tap_ok(ok, "%dx%d, 4 arms: loss, throughput, memory and loss-scale panels list every arm (the loss panel with "
                   "its validation accuracy); the verdict lines are whole", sz[k][0], sz[k][1]);
    }
    frame(&g, &l, &m, &ui, 80, 24);
    rect_text(&g, l.p[FP_P_LAYERS], buf, sizeof buf);
    tap_ok(ts_has(buf, "counts: step 40"), "the layer table says which sampled step its counts are");
    fp_tui_model_close(&m);

    /* an event longer than a screen line: cut, and it says so */
    char *dbe = tu_path(dir, "long.db"), longtxt[301];
    memset(longtxt, 'x', 300);
    longtxt[300] = '\0';
    fp_store_t *se;
    int64_t erun[MAXA];
    int erc = fp_store_open(&se, dbe);
    erc = erc ? erc : write_session(se, 1, "cpu", 1, erun);
    erc = erc ? erc : fp_store_event(se, erun[0], 1, 1, -1, FP_EVENT_INFO, longtxt);
    if (se)
        erc = fp_store_close(se, FP_RUN_FINISHED, NULL) ? FP_EIO : erc;
    fp_reader_t *rd = NULL;
    fp_tui_event_t *ev = NULL;
    size_t nev = 0;
    erc = erc ? rc : fp_reader_open(&rd, dbe);
    erc = erc ? rc : fp_reader_tui_events_since(rd, erun[0], 0, 100, &ev, &nev);
    const char *cut = NULL;
    for (size_t i = 0; erc == FP_OK && i < nev; i++)
        if (ev[i].text[0] == 'x')
            cut = ev[i].text;
    tap_ok(cut && strlen(cut) == sizeof ev->text - 1 && strcmp(cut + strlen(cut) - 3, "...") == 0,
           "a 300-character event reaches the dashboard cut to one line, ending in \"...\" (%s)",
           erc ? fp_error_message() : cut ? "cut" : "not found");
    free(ev);
    fp_reader_close(rd);
    free(dbe);
    fp_grid_free(&g);
    free(t);
    free(db3);
    free(db4);
    free(dbg);
    free(dbl);
    tu_rmdir(dir);
    return tap_done();
}
