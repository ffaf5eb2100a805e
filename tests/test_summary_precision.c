/* test_summary_precision.c — issue 19's precision accounting in the summary (reports/summary.h): a recorded
 * session of fp32, fp16 (loss-scaled, fp32 master weights), half (no master weights) and fp16-noscale arms
 * of two layers, histograms at 3 sampled steps:
 *  - the low-precision arms flushed the fp32 arm's would-be underflowing activation gradients to zero: their
 *    underflow counts them (before: "underflow: none" for half and fp16-noscale);
 *  - fp16's updates (applied to fp32 master weights) underflow massively: not in the headline (before: they
 *    were), while half's weights / updates are;
 *  - lost-update events reach the summary (before: only the events table);
 *  - counts say over how many sampled steps they are summed;
 *  - CPU arms carry the emulation note; fp32 / half / fp16-noscale show "-" for the loss scale (before: 1);
 *  - accuracy has a sample size and a Wilson interval; a gap inside it is said to be. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "error.h"
#include "hist.h"
#include "store.h"
#include "store_reader.h"
#include "reports/report.h"
#include "reports/summary.h"
#include "wilson.h"
#include "tap.h"

#define N 1000
#define STEPS 30
#define SAMPLED 3

static int hist_of(fp_store_t *st, int64_t run, int64_t step, int layer, int role, const float *x, size_t n)
{
    fp_hist_t h;
    fp_hist_init(&h);
    fp_hist_add(&h, x, n);
    return fp_store_hist(st, run, step, layer, (fp_tensor_role)role, &h);
}

static int write_session(const char *path, int64_t runs[4])
{
    static const char *pol[4] = {"fp32", "fp16", "half", "fp16-noscale"};
    fp_store_t *st;
    int rc = fp_store_open(&st, path);
    if (rc)
        return rc;
    int64_t session;
    fp_session_info_t si = {.name = "precision", .config_json = "{}"};
    rc = fp_store_begin_session(st, &si, &session);
    for (int i = 0; rc == FP_OK && i < 4; i++) {
        fp_run_info_t ri = {.session = session, .arm = pol[i], .model = "resnet18", .policy = pol[i],
                            .ref_run = i ? runs[0] : 0, .device = "cpu: AMD Ryzen 7 with Radeon Graphics",
                            .batch_size = 8, .image_size = 32, .seed = 1, .optimizer = "sgd",
                            .config_json = "{\"data\": \"synthetic:2000\", \"eval_batches\": 0, \"batch\": 8}"};
        rc = fp_store_begin_run(st, &ri, &runs[i]);
        static const char *names[2] = {"conv1", "fc"};
        for (int l = 0; rc == FP_OK && l < 2; l++) {
            fp_layer_info_t li = {.run = runs[i], .index = l, .name = names[l], .type = l ? "linear" : "conv2d",
                                  .input_shape = "", .output_shape = "", .params = 100, .fwd_flops = -1,
                                  .bwd_flops = -1};
            rc = fp_store_layer(st, &li);
        }
    }
    float g32[N], glow[N], upd[N], w[N];
    for (int k = 0; k < N; k++) {
        g32[k] = k % 4 == 0 ? 1e-9f : k % 4 == 1 ? 0.0f : 0.01f;   /* 250 would-be fp16 underflows, 250 zeros */
        glow[k] = k % 4 == 0 ? 0.0f : g32[k];                       /* flushed */
        upd[k] = k % 2 ? 1e-10f : 1e-3f;                            /* 500 tiny updates */
        w[k] = 0.5f;
    }
    for (int64_t step = 0; rc == FP_OK && step < STEPS; step++)
        for (int i = 0; rc == FP_OK && i < 4; i++) {
            fp_step_rec_t s = {.run = runs[i], .step = step, .loss = 2.0 - step * 0.01, .lr = 0.1,
                               .loss_scale = i == 1 ? 65536 : i == 0 ? NAN : 1.0, .start = -1, .end = -1,
                               .wall_ns = 1000000 * (i ? 2 : 1), .samples_per_s = NAN, .mem_current = -1,
                               .mem_peak = -1, .energy_j = NAN, .power_w = NAN};
            rc = fp_store_step(st, &s, NULL, 0);
            if (rc == FP_OK && step % 10 == 9) {   /* 3 sampled steps */
                for (int l = 0; rc == FP_OK && l < 2; l++) {
                    rc = hist_of(st, runs[i], step, l, FP_ROLE_ACTIVATION_GRAD, i == 0 || i == 1 ? g32 : glow, N);
                    if (rc == FP_OK)
                        rc = hist_of(st, runs[i], step, l, FP_ROLE_WEIGHT, w, N);
                    if (rc == FP_OK)   /* half's updates are fp16 already: the tiny ones flushed */
                        rc = hist_of(st, runs[i], step, l, FP_ROLE_UPDATE, i == 2 ? glow : upd, N);
                }
                if (rc == FP_OK && i) {
                    char text[160];
                    snprintf(text, sizeof text, "lost updates at step %lld: %g%% of the weights with a nonzero "
                             "gradient did not change", (long long)step, i == 2 ? 22.8 : 0.004);
                    rc = fp_store_event(st, runs[i], 0, step, -1, FP_EVENT_INFO, text);
                }
            }
            if (rc == FP_OK && step == STEPS - 1) {
                fp_eval_rec_t ev = {.run = runs[i], .step = step, .split = "val", .loss = 1.0,
                                    .top1 = i == 1 ? 0.51 : 0.50, .top5 = 0.9};
                rc = fp_store_eval(st, &ev);
            }
        }
    int rc2 = fp_store_close(st, FP_RUN_FINISHED, NULL);
    return rc ? rc : rc2;
}

static int has(const char *hay, const char *needle)
{
    return strstr(hay, needle) != NULL;
}

int main(void)
{
    char dir[] = "/tmp/test_summary_precisionXXXXXX", path[256];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/runs.db", dir);
    int64_t runs[4];
    tap_ok(write_session(path, runs) == FP_OK, "session written");
    char par[300];
    snprintf(par, sizeof par, "%s/paranoid", dir);
    FILE *pf = fopen(par, "w");
    fputs("2\n", pf);
    fclose(pf);
    setenv("FP_PERF_PARANOID_FILE", par, 1);
    setenv("FP_POWERCAP_ZONE", "/nonexistent/energy_uj", 1);
    fp_reader_t *r;
    fp_summary_t s;
    tap_ok(fp_reader_open_snapshot(&r, path) == FP_OK && fp_summary_load(r, 0, -1, &s) == FP_OK, "summary loads");
    fp_reader_close(r);
    const fp_arm_t *f32 = fp_summary_arm(&s, "fp32"), *f16 = fp_summary_arm(&s, "fp16"),
                   *half = fp_summary_arm(&s, "half"), *nos = fp_summary_arm(&s, "fp16-noscale");
    /* 1. flushed values count as underflow: 250 per layer and sampled step */
    tap_ok(nos->flushed_role[FP_ROLE_ACTIVATION_GRAD] == 2 * SAMPLED * 250 &&
               nos->under_role[FP_ROLE_ACTIVATION_GRAD] == 2 * SAMPLED * 250 && nos->ntop_under == 2,
           "fp16-noscale: flushed activation gradients are underflow (%lld)",
           (long long)nos->under_role[FP_ROLE_ACTIVATION_GRAD]);
    tap_ok(half->under_role[FP_ROLE_ACTIVATION_GRAD] == 2 * SAMPLED * 250 && half->ntop_under == 2,
           "half: flushed activation gradients are underflow");
    tap_ok(f32->under_role[FP_ROLE_ACTIVATION_GRAD] == 2 * SAMPLED * 250 && f32->flushed_role[1] == 0,
           "fp32: its would-be underflow, nothing flushed");
    tap_ok(f16->flushed_role[FP_ROLE_ACTIVATION_GRAD] == 0, "fp16 (values kept): nothing flushed");
    /* 2. the headline: fp16's update underflow (fp32 master weights) stays out; half's flushed updates in */
    tap_ok(f16->under_role[FP_ROLE_UPDATE] == 2 * SAMPLED * 500 && f16->ntop_under == 2 &&
               f16->top_under[0].count == SAMPLED * 250,
           "fp16: the headline counts gradients, not updates on fp32 master weights (%lld)",
           (long long)(f16->ntop_under ? f16->top_under[0].count : -1));
    tap_ok(!fp_summary_role_matters(f16, FP_ROLE_UPDATE, 0) && fp_summary_role_matters(half, FP_ROLE_UPDATE, 0) &&
               half->top_under[0].count == SAMPLED * 250 + SAMPLED * 500,
           "half: updates (no master weights) are in the headline (%lld)", (long long)half->top_under[0].count);
    tap_ok(f32->hist_steps == SAMPLED, "counts over %d sampled steps", SAMPLED);
    /* 3. lost updates */
    tap_ok(half->lost_samples == SAMPLED && fabs(half->lost_pct - 22.8) < 1e-9 && f32->lost_samples == 0 &&
               isnan(f32->lost_pct),
           "lost updates reach the summary");
    /* 5, 6. notes, loss scale, accuracy */
    tap_ok(f16->emulated && !strcmp(fp_summary_speed_note(f16), "emulated on the CPU: speed not representative"),
           "a CPU arm: emulated");
    tap_ok(has(f16->energy_why, "no RAPL") && has(f16->energy_why, "perf_event_paranoid=2"),
           "energy n/a says why: %s", f16->energy_why);
    char b[64];
    tap_ok(!strcmp(fp_summary_fmt_loss_scale(b, f32), "-") && !strcmp(fp_summary_fmt_loss_scale(b, half), "-") &&
               !strcmp(fp_summary_fmt_loss_scale(b, nos), "-") && !strcmp(fp_summary_fmt_loss_scale(b, f16), "65536"),
           "loss scale: '-' without a scaler");
    tap_ok(f16->val_images == 400 && f16->val_top1_lo < 0.51 && f16->val_top1_hi > 0.51 && f16->top1_gap_within,
           "accuracy: n=%lld, 95%% interval %.3f..%.3f, gap within it", (long long)f16->val_images, f16->val_top1_lo,
           f16->val_top1_hi);
    double lo, hi;
    fp_wilson95(0.5, 100, &lo, &hi);
    tap_ok(fabs(lo - 0.4038) < 1e-3 && fabs(hi - 0.5962) < 1e-3, "Wilson 95%% of 50/100: %.4f..%.4f", lo, hi);
    /* the printed summary */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fp_summary_print_precision(f, &s);
    fclose(f);
    tap_ok(has(buf, "sums over 3 sampled steps") && has(buf, "flushed to zero") && has(buf, "22.8%") &&
               has(buf, "emulated on the CPU: speed not representative") && has(buf, "95% CI") &&
               has(buf, "within the uncertainty") && has(buf, "final train loss: mean of the last") &&
               has(buf, "energy n/a: no RAPL"),
           "the printed summary says it");
    fputs(buf, stderr);
    free(buf);
    /* the HTML summary and summary.csv say the same */
    tap_ok(fp_reader_open_snapshot(&r, path) == FP_OK, "reader for the reports");
    f = open_memstream(&buf, &len);
    int hrc = fp_report_html(f, r, &s, "runs.db");
    fclose(f);
    tap_ok(hrc == FP_OK && has(buf, "lost updates") && has(buf, "22.8% (max 22.8%, 3 sampled steps)") &&
               has(buf, "emulated on the CPU: speed not representative") && has(buf, "Sums over 3 sampled steps") &&
               has(buf, "flushed to zero") && has(buf, "95% CI") && has(buf, "within the uncertainty") &&
               has(buf, "final train loss: mean of the last"),
           "HTML summary: lost updates, sampled steps, flushed underflow, emulation, interval");
    tap_ok(!has(buf, "final loss scale 1.") && !has(buf, "final loss scale 1;"), "HTML: no loss scale 1 for an arm without a scaler");
    free(buf);
    f = open_memstream(&buf, &len);
    int crc = fp_report_csv(f, 0, r, &s);
    fclose(f);
    /* columns: final_loss_scale is 21st; the fp32 row (first data row) has "-" there */
    char *row1 = buf ? strstr(buf, "\r\n") : NULL;
    int col = 0, dash = 0;
    for (char *p = row1 ? row1 + 2 : NULL, *q = p; p && *q && *q != '\r'; q++)
        if (*q == ',' && ++col == 20)
            dash = q[1] == '-' && q[2] == ',';
    tap_ok(crc == FP_OK && has(buf, "lost_updates_pct") && has(buf, "hist_sampled_steps") &&
               has(buf, "underflow_flushed") && has(buf, "val_top1_ci95_lo") && has(buf, ",22.8,") && dash,
           "summary.csv: lost updates, sampled steps, flushed underflow, interval; '-' loss scale");
    free(buf);
    /* the Chrome trace: a loss-scale counter only for the arm with a scaler (fp16: one per step) */
    f = open_memstream(&buf, &len);
    fp_trace_opts_t to = {0};
    int trc = fp_trace_chrome(f, r, &s, &to);
    fclose(f);
    int counters = 0;
    for (char *p = buf; p && (p = strstr(p, "\"loss scale\"")); p++)
        counters++;
    tap_ok(trc == FP_OK && counters == STEPS, "trace: %d loss-scale counters (fp16's %d steps only)", counters, STEPS);
    free(buf);
    fp_reader_close(r);
    /* ls says which loss it shows */
    const char *top = getenv("top_builddir");
    char cmd[600], line[512];
    snprintf(cmd, sizeof cmd, "%s/fp16probe", top ? top : ".");
    if (access(cmd, X_OK) == 0) {
        snprintf(cmd, sizeof cmd, "'%s/fp16probe' ls --db '%s'", top ? top : ".", path);
        FILE *p = popen(cmd, "r");
        int said = 0;
        while (p && fgets(line, sizeof line, p))
            said |= has(line, "loss: of the last step") && has(line, "mean of the last");
        if (p)
            pclose(p);
        tap_ok(said, "ls: says its loss is the last step's, the report's the mean of the last steps");
        snprintf(cmd, sizeof cmd, "'%s/fp16probe' report --db '%s' --summary", top ? top : ".", path);
        p = popen(cmd, "r");
        int flushed = 0, lost = 0, steps = 0;
        while (p && fgets(line, sizeof line, p)) {
            flushed |= has(line, "flushed to zero");
            lost |= has(line, "half") && has(line, "22.8%");
            steps |= has(line, "sums over 3 sampled steps");
        }
        tap_ok(p && pclose(p) == 0 && flushed && lost && steps, "report --summary prints the precision summary");
    } else {
        tap_skip(2, "no fp16probe binary (top_builddir)");
    }
    fp_summary_free(&s);
    unlink(path);
    char side[300];
    snprintf(side, sizeof side, "%s-wal", path), unlink(side);
    snprintf(side, sizeof side, "%s-shm", path), unlink(side);
    unlink(par);
    rmdir(dir);
    return tap_done();
}
