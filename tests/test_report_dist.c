/* test_report_dist.c — the data-parallel figures of the report and the gate (reports/dist_report.h, issue 23),
 * on sessions written through the store writer with known rows: per arm the ranks, global batch, images/s of
 * the job, exposed and all-reduce shares, bytes, format, the straggler, the all-reduce's rounding; the scaling
 * efficiency labelled an estimate without a one-rank run and measured with one; the summary text, summary.csv's
 * and ranks.csv's columns, the HTML section; the gate's comm_share_vs_base / straggler_vs_base: PASS on equal
 * sessions, FAIL on a rise, NOT_COMPARABLE on other rank counts (a lone session's one rank included), the rank counts
 * of both sides stated in the comparable check, the labels, the JSON and the table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "reports/dist_report.h"
#include "reports/gate.h"
#include "reports/report.h"
#include "store.h"
#include "tap.h"
#include "testutil.h"

#define STEPS 30
#define MS 1000000LL

typedef struct {
    int ranks;                   /* 0: the arms train alone */
    int64_t slow_ns;             /* rank 1's step (rank 0: 8 ms compute + exposed) */
    int64_t exposed_ns;          /* per rank and step (comm: 1.5 x) */
    int64_t alone_ns;            /* the step of a lone arm */
} spec_t;

/* One session of two arms, fp32 and half, per-rank batch 4, 30 steps, step 20 skipped; data parallel: rank 0
 * steps 8 ms + exposed, rank 1 slow_ns (+ 0..0.2 ms by step: no ties), bytes 4000 (fp32) / 2000 (half), the
 * half arm's all-reduce rounding at steps 10, 20, 30. */
static int write_session(const char *path, const spec_t *sp, int64_t runs[2])
{
    fp_store_t *s;
    int rc = fp_store_open(&s, path);
    if (rc)
        return rc;
    char cfg[256] = "{\"batch\":4}";
    if (sp->ranks)
        snprintf(cfg, sizeof cfg, "{\"batch\":4,\"ranks\":%d,\"global_batch\":%d,\"allreduce\":\"default\"}",
                 sp->ranks, 4 * sp->ranks);
    fp_session_info_t si = {"dist", cfg};
    int64_t session = 0;
    rc = fp_store_begin_session(s, &si, &session);
    const char *pol[2] = {"fp32", "half"};
    for (int a = 0; a < 2 && !rc; a++) {
        fp_run_info_t ri = {.session = session, .arm = pol[a], .model = "tinynet", .policy = pol[a],
                            .ref_run = a ? runs[0] : 0, .batch_size = 4, .image_size = 32, .seed = 1,
                            .device = "cpu: test", .config_json = cfg};
        rc = fp_store_begin_run(s, &ri, &runs[a]);
        for (int l = 0; l < 2 && !rc; l++) {
            fp_layer_info_t li = {.run = runs[a], .index = l, .name = l ? "fc" : "conv1",
                                  .type = l ? "linear" : "conv2d",
                                  .params = 100, .fwd_flops = -1, .bwd_flops = -1};
            rc = fp_store_layer(s, &li);
        }
    }
    for (int64_t step = 1; step <= STEPS && !rc; step++)
        for (int a = 0; a < 2 && !rc; a++) {
            int64_t jitter = (step * 7 % 11) * 20000;
            int64_t w0 = 8 * MS + sp->exposed_ns + jitter, w1 = sp->slow_ns + jitter;
            fp_step_rec_t st = {.run = runs[a], .step = step, .loss = 2.0 - 0.01 * (double)step, .loss_scale = NAN,
                                .lr = 0.1, .skipped = step == 20, .start = -1, .end = -1,
                                .wall_ns = sp->ranks ? w0 : sp->alone_ns + jitter, .samples_per_s = NAN,
                                .mem_current = -1, .mem_peak = -1, .energy_j = NAN, .power_w = NAN};
            rc = fp_store_step(s, &st, NULL, 0);
            if (rc || !sp->ranks)
                continue;
            fp_dist_step_rec_t d[8];
            for (int k = 0; k < sp->ranks && k < 8; k++)
                d[k] = (fp_dist_step_rec_t){.run = runs[a], .step = step, .rank = k, .skipped = step == 20,
                                            .wall_ns = k == 1 ? w1 : w0, .comm_ns = sp->exposed_ns * 3 / 2,
                                            .exposed_ns = sp->exposed_ns, .bytes = a ? 2000 : 4000};
            rc = fp_store_dist_steps(s, d, (size_t)sp->ranks);
            if (!rc && a == 1 && step % 10 == 0) {
                fp_allreduce_error_rec_t e[3] = {
                    {.run = runs[1], .step = step, .layer = -1, .wire = "fp16", .rel_l2 = 1e-4 * (double)(step / 10),
                     .overflow = 1, .underflow = 2},
                    {.run = runs[1], .step = step, .layer = 0, .wire = "fp16", .rel_l2 = 5e-5, .overflow = -1,
                     .underflow = -1},
                    {.run = runs[1], .step = step, .layer = 1, .wire = "fp16", .rel_l2 = 4e-4, .overflow = -1,
                     .underflow = -1}};
                rc = fp_store_allreduce_error(s, e, 3);
            }
        }
    int crc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    return rc ? rc : crc;
}

static int load(const char *path, int64_t session, fp_summary_t *sm, fp_dist_summary_t *ds, fp_reader_t **r)
{
    int rc = fp_reader_open(r, path);
    if (rc)
        return rc;
    if ((rc = fp_summary_load(*r, session, -1, sm)) != FP_OK)
        return rc;
    return fp_dist_summary_load(*r, sm, ds);
}

/* What f writes into a malloc'd string. */
static char *capture_print(const fp_summary_t *sm, const fp_dist_summary_t *ds)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fp_dist_print(f, sm, ds);
    fclose(f);
    return buf;
}

static char *capture_csv(int view, fp_reader_t *r, const fp_summary_t *sm)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fp_report_csv(f, view, r, sm);
    fclose(f);
    return buf;
}

/* Field `col` (by header name) of data row `row` (1-based) of a CSV without quoted fields. */
static double csv_num(const char *csv, int row, const char *col, char *text, size_t cap)
{
    const char *line = csv;
    int idx = -1, i = 0;
    for (const char *p = csv; *p && *p != '\r'; i++) {
        size_t n = strcspn(p, ",\r");
        if (n == strlen(col) && !strncmp(p, col, n))
            idx = i;
        p += n + (p[n] == ',');
    }
    for (int k = 0; k < row && line; k++)
        line = (line = strchr(line, '\n')) ? line + 1 : NULL;
    if (idx < 0 || !line)
        return NAN;
    for (int k = 0; k < idx; k++)
        line += strcspn(line, ",\r") + 1;
    size_t n = strcspn(line, ",\r");
    if (text)
        snprintf(text, cap, "%.*s", (int)(n < cap ? n : cap - 1), line);
    return n ? strtod(line, NULL) : NAN;
}

/* The `comparable` check of gating cand against base: its status, figures into fig (480 bytes); the JSON and the
 * table as malloc'd strings into *json / *table when not NULL. -1 when the gate fails. */
static int comparable_figures(const fp_gate_side_t *base, const fp_gate_side_t *cand, const fp_gate_opts_t *o,
                              char *fig, char **json, char **table)
{
    fp_gate_result_t res;
    int st = -1;
    fig[0] = '\0';
    if (fp_gate_run(base, cand, o, &res) != FP_OK)
        return -1;
    for (size_t i = 0; i < res.n; i++)
        if (!strcmp(res.checks[i].name, "comparable")) {
            st = (int)res.checks[i].status;
            snprintf(fig, 480, "%s", res.checks[i].figures);
        }
    for (int k = 0; k < 2; k++) {
        char **out = k ? table : json;
        size_t len = 0;
        FILE *f = out ? open_memstream(out, &len) : NULL;
        if (f && k)
            fp_gate_print_table(f, &res);
        else if (f)
            fp_gate_json(f, &res);
        if (f)
            fclose(f);
    }
    fp_gate_result_free(&res);
    return st;
}

int main(void)
{
    char *dir = tu_mkdir();
    if (!dir)
        tap_skip_all("no temporary directory");
    char *p = tu_path(dir, "dp.db");
    int64_t runs[2];
    spec_t two = {.ranks = 2, .slow_ns = 12 * MS, .exposed_ns = 2 * MS};
    tap_is_int(write_session(p, &two, runs), FP_OK, "a 2-rank session written");

    fp_reader_t *r = NULL;
    fp_summary_t sm;
    fp_dist_summary_t ds;
    int rc = load(p, 1, &sm, &ds, &r);
    tap_is_int(rc, FP_OK, "summary and data-parallel figures load (%s)", rc ? fp_error_message() : "ok");
    if (rc)
        return tap_done();
    const fp_dist_arm_t *f32 = &ds.arms[0], *h = &ds.arms[1];
    /* after warm-up (5 rows) and without step 20: 24 steps; rank 0 10 ms + j, rank 1 12 ms + j */
    double jm = 0;
    int nj = 0;
    for (int64_t st = 6; st <= STEPS; st++)
        if (st != 20) {
            jm += (double)((st * 7 % 11) * 20000);
            nj++;
        }
    jm /= nj;
    tap_ok(ds.any && f32->ranks == 2 && h->ranks == 2 && f32->global_batch == 8, "2 ranks, global batch 8");
    tap_is_int(f32->steps, 24, "24 steps counted: after the warm-up, not the skipped one");
    tap_is_double(f32->job_step_ns, 12e6 + jm, 1, 0, "job step: the slowest rank's, per step");
    tap_is_double(f32->images_per_s, 8 / ((12e6 + jm) / 1e9), 0, 1e-9, "images/s of the job: global batch / job step");
    tap_is_double(f32->exposed_share, 4e6 / (22e6 + 2 * jm), 0, 1e-9, "exposed share: exposed / wall over the ranks");
    tap_is_double(f32->comm_share, 6e6 / (22e6 + 2 * jm), 0, 1e-9, "all-reduce share: comm / wall over the ranks");
    tap_ok(!strcmp(f32->allreduce, "fp32") && !strcmp(h->allreduce, "fp16"),
           "the all-reduce format: default is fp32 under fp32, fp16 under half (%s, %s)", f32->allreduce, h->allreduce);
    tap_ok(f32->bytes == 4000 && h->bytes == 2000, "bytes per step per rank");
    tap_ok(f32->slowest == 1 && fabs(f32->straggler - (12e6 + jm) / (10e6 + jm)) < 1e-9 &&
               fabs(f32->ranks_rows[0].vs_fastest - 1) < 1e-12,
           "the straggler: rank 1 at %.4fx the fastest", f32->straggler);
    tap_ok(!f32->efficiency_measured && fabs(f32->efficiency - (9e6 + jm) / (12e6 + jm)) < 1e-9,
           "without a one-rank run: the communication-bound estimate, mean compute / job step (%.4f)", f32->efficiency);
    tap_ok(!strcmp(h->wire, "fp16") && h->err_steps == 3 && fabs(h->rel_l2_mean - 2e-4) < 1e-12 &&
               fabs(h->rel_l2_max - 3e-4) < 1e-12 && h->overflow == 3 && h->underflow == 6 && h->worst_layer == 1 &&
               !strcmp(h->worst_layer_name, "fc") && !f32->wire[0],
           "the all-reduce's rounding: rel. L2 mean / max, totals, the worst layer; none for an fp32 all-reduce");
    char *txt = capture_print(&sm, &ds);
    tap_ok(txt && strstr(txt, "scaling efficiency estimate ") &&
               strstr(txt, "(communication-bound: compute / job step") &&
               !strstr(txt, "scaling efficiency 7") && strstr(txt, "straggler rank 1: 1.2") &&
               strstr(txt, "all-reduce fp16 (half) vs fp32 (fp32): bytes/step per rank 1.95 KiB vs 3.91 KiB (0.50x)") &&
               strstr(txt, "summed values overflowed 3, underflowed 6"),
           "the summary text labels the estimate, names the straggler, puts fp16 and fp32 side by side");
    if (txt && !strstr(txt, "estimate"))
        tap_diag("%s", txt);
    free(txt);
    char *csv = capture_csv(0, r, &sm), v[64];
    tap_ok(csv && csv_num(csv, 1, "ranks", NULL, 0) == 2 &&
               csv_num(csv, 2, "allreduce_bytes_per_step_per_rank", NULL, 0) == 2000 &&
               fabs(csv_num(csv, 1, "exposed_share", NULL, 0) - f32->exposed_share) < 1e-12 &&
               (csv_num(csv, 1, "scaling_efficiency_kind", v, sizeof v), !strcmp(v, "estimate_communication_bound")) &&
               fabs(csv_num(csv, 2, "allreduce_rel_l2_max", NULL, 0) - 3e-4) < 1e-15,
           "summary.csv: the data-parallel columns");
    free(csv);
    csv = capture_csv(5, r, &sm);
    tap_ok(csv && !strncmp(csv, "arm,run,rank,ranks,steps,mean_step_ns", 37) && csv_num(csv, 2, "rank", NULL, 0) == 1 &&
               csv_num(csv, 2, "straggler", NULL, 0) == 1 && csv_num(csv, 1, "straggler", NULL, 0) == 0 &&
               fabs(csv_num(csv, 2, "mean_step_ns", NULL, 0) - (12e6 + jm)) < 1e-3 &&
               csv_num(csv, 4, "mean_bytes", NULL, 0) == 2000,
           "ranks.csv: one row per arm and rank, the straggler marked");
    free(csv);
    char *html = NULL;
    size_t hl = 0;
    FILE *hf = open_memstream(&html, &hl);
    rc = fp_report_html(hf, r, &sm, "dp.db");
    fclose(hf);
    tap_ok(rc == FP_OK && strstr(html, "<section id=\"data-parallel\">") && strstr(html, "href=\"#data-parallel\"") &&
               strstr(html, "id=\"dist-wire-table\"") &&
               strstr(html, "<tr class=\"straggler\"><td>fp32</td><td class=\"n\">1<") &&
               strstr(html, "id=\"allreduce-error-table\"") && strstr(html, "scaling efficiency estimate"),
           "the HTML: a data-parallel section, the side-by-side table, the straggler's row, the all-reduce rounding");
    free(html);
    fp_dist_summary_free(&ds);
    fp_summary_free(&sm);
    fp_reader_close(r);

    /* a one-rank run of the same configuration in the same file: the efficiency is measured */
    spec_t alone = {.ranks = 0, .alone_ns = 8 * MS};
    int64_t runs1[2];
    tap_is_int(write_session(p, &alone, runs1), FP_OK, "a one-rank session appended");
    rc = load(p, 1, &sm, &ds, &r);
    if (rc == FP_OK) {
        double t1 = 8e6 + jm;   /* its mean step after its warm-up */
        tap_ok(ds.arms[0].efficiency_measured && ds.arms[0].baseline_run == runs1[0] &&
                   fabs(ds.arms[0].efficiency - (8 / ((12e6 + jm) / 1e9)) / (2 * 4 / (t1 / 1e9))) < 1e-9 &&
                   ds.arms[1].baseline_run == runs1[1],
               "with it: images/s of the job / (2 x a lone run's), vs run %lld (%.4f)",
               (long long)ds.arms[0].baseline_run, ds.arms[0].efficiency);
        char eff[200];
        fp_dist_fmt_efficiency(eff, sizeof eff, &ds.arms[0]);
        tap_ok(strstr(eff, "scaling efficiency ") == eff && !strstr(eff, "estimate"), "labelled measured: %s", eff);
        fp_dist_summary_free(&ds);
        fp_summary_free(&sm);
        fp_reader_close(r);
    } else {
        tap_skip(2, "no summary");
    }

    /* the gate */
    char *pa = tu_path(dir, "base.db"), *pb = tu_path(dir, "worse.db"), *pc = tu_path(dir, "four.db");
    spec_t worse = {.ranks = 2, .slow_ns = 20 * MS, .exposed_ns = 5 * MS}, four = two;
    four.ranks = 4;
    rc = write_session(pa, &two, runs);
    rc = rc ? rc : write_session(pb, &worse, runs);
    rc = rc ? rc : write_session(pc, &four, runs);
    tap_is_int(rc, FP_OK, "gate sessions written");
    fp_gate_side_t A, B, C;
    rc = fp_gate_load(pa, 0, -1, &A);
    rc = rc ? rc : fp_gate_load(pb, 0, -1, &B);
    rc = rc ? rc : fp_gate_load(pc, 0, -1, &C);
    fp_gate_opts_t o;
    fp_gate_defaults(&o);
    struct { const fp_gate_side_t *base, *cand; const char *what; fp_check_status want; } cases[] = {
        {&A, &A, "the same session", FP_CHECK_PASS},
        {&A, &B, "exposed 2 -> 5 ms, straggler 1.2x -> 1.5x", FP_CHECK_FAIL},
        {&A, &C, "2 ranks vs 4", FP_CHECK_NOT_COMPARABLE},
    };
    for (size_t k = 0; k < 3; k++) {
        fp_gate_result_t res;
        int got[2] = {-1, -1}, n = 0;
        if (rc == FP_OK && fp_gate_run(cases[k].base, cases[k].cand, &o, &res) == FP_OK) {
            for (size_t i = 0; i < res.n; i++) {
                int comm = !strcmp(res.checks[i].kind, "comm_share_vs_base");
                if ((comm || !strcmp(res.checks[i].kind, "straggler_vs_base")) && !strcmp(res.checks[i].arm, "fp32")) {
                    got[!comm] = (int)res.checks[i].status;
                    n++;
                    tap_diag("%s: %s", res.checks[i].name, res.checks[i].figures);
                }
            }
            fp_gate_result_free(&res);
        }
        tap_ok(n == 2 && got[0] == (int)cases[k].want && got[1] == (int)cases[k].want,
               "gate, %s: comm_share_vs_base %s, straggler_vs_base %s", cases[k].what,
               fp_check_status_name((fp_check_status)got[0]), fp_check_status_name((fp_check_status)got[1]));
    }
    /* the rank counts where sessions are compared: the labels, the comparable check, the JSON */
    tap_ok(rc == FP_OK && strstr(A.label, "(tinynet: fp32, half; 2 ranks)") && strstr(C.label, "; 4 ranks)"),
           "gate: a side's label ends with its ranks (%s)", rc == FP_OK ? A.label : "-");
    char fig[480], *json = NULL, *table = NULL;
    tap_ok(rc == FP_OK && comparable_figures(&A, &A, &o, fig, NULL, NULL) == FP_CHECK_PASS &&
               strstr(fig, "version match; ranks 2 vs 2 (baseline vs candidate)") && !strstr(fig, "not comparable"),
           "gate, the same 2-rank session: comparable, stating the ranks (%s)", fig);
    tap_ok(rc == FP_OK && comparable_figures(&A, &C, &o, fig, &json, &table) == FP_CHECK_PASS &&
               strstr(fig, "; ranks 2 vs 4 (baseline vs candidate): comm_share_vs_base and straggler_vs_base are not "
                           "comparable"),
           "gate, 2 ranks vs 4: the comparable check states both rank counts (%s)", fig);
    tap_ok(json && strstr(json, "\"ranks\": {\"baseline\": 2, \"candidate\": 4}") && table &&
               strstr(table, "\nbaseline:  ") && strstr(table, "half; 2 ranks)\n") && strstr(table, "half; 4 ranks)\n"),
           "... and so do the JSON (ranks) and the table's sides");
    free(json);
    free(table);
    fp_gate_result_t res;
    int none = 1, one_vs_two = 0;
    fp_gate_side_t D;
    char *pd = tu_path(dir, "alone.db");
    spec_t al2 = {.ranks = 0, .alone_ns = 8 * MS};
    fig[0] = '\0';
    if (rc == FP_OK && write_session(pd, &al2, runs) == FP_OK && fp_gate_load(pd, 0, -1, &D) == FP_OK) {
        if (fp_gate_run(&D, &D, &o, &res) == FP_OK) {
            for (size_t i = 0; i < res.n; i++) {
                none &= !strstr(res.checks[i].kind, "comm_share") && !strstr(res.checks[i].kind, "straggler");
                none &= strcmp(res.checks[i].kind, "comparable") || !strstr(res.checks[i].figures, "ranks");
            }
            none &= !strstr(D.label, "ranks");
            fp_gate_result_free(&res);
        }
        if (comparable_figures(&D, &A, &o, fig, &json, NULL) == FP_CHECK_PASS &&
            strstr(fig, "; ranks 1 vs 2 (baseline vs candidate): comm_share_vs_base and straggler_vs_base are not "
                        "comparable") &&
            json && strstr(json, "\"ranks\": {\"baseline\": 1, \"candidate\": 2}") &&
            fp_gate_run(&D, &A, &o, &res) == FP_OK) {
            for (size_t i = 0; i < res.n; i++)
                if (strstr(res.checks[i].kind, "_vs_base") && (strstr(res.checks[i].kind, "comm_share") ||
                                                               strstr(res.checks[i].kind, "straggler")))
                    one_vs_two += res.checks[i].status == FP_CHECK_NOT_COMPARABLE &&
                                  strstr(res.checks[i].figures, "ranks 1 vs 2 (baseline vs candidate)") != NULL;
            fp_gate_result_free(&res);
        }
        free(json);
        fp_gate_side_free(&D);
    } else {
        none = 0;
    }
    tap_ok(none, "gate: no data-parallel check, and no ranks in the comparable check or labels, when neither side "
                 "trained on ranks");
    tap_ok(one_vs_two == 4, "gate, alone vs 2 ranks: the comparable check says ranks 1 vs 2, and both data-parallel "
                            "checks of both arms are NOT_COMPARABLE naming them (%d of 4; %s)", one_vs_two, fig);
    if (rc == FP_OK) {
        fp_gate_side_free(&A);
        fp_gate_side_free(&B);
        fp_gate_side_free(&C);
    }
    free(p), free(pa), free(pb), free(pc), free(pd);
    tu_rmdir(dir);
    return tap_done();
}
