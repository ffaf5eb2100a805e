/* test_store_reader.c — the reader API on the fixture: steps since k with a limit, per-layer
 * aggregates (mean, median, min, max, kernel counts), the kernel summary (nsys cuda_gpu_kern_sum
 * columns), unknown runs, and the CSV export (header, quoting, CRLF, unknown table). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store.h"
#include "store_reader.h"
#include "tap.h"
#include "store_testutil.h"

#define NSTEPS 30
#define NLAYERS 6

int main(void)
{
    char *dir = tu_mkdir();
    if (!dir)
        tap_skip_all("cannot create a scratch directory");
    char *p = tu_path(dir, "fixture.db");
    int64_t runs[2];
    if (tu_write_fixture(p, NSTEPS, NLAYERS, runs) != FP_OK)
        tap_skip_all("cannot write the fixture");
    fp_reader_t *r;
    if (fp_reader_open(&r, p) != FP_OK)
        tap_skip_all("cannot open the fixture");

    fp_step_row_t *st;
    size_t n;
    int rc = fp_reader_steps_since(r, runs[0], 19, 5, &st, &n);
    tap_ok(rc == FP_OK && n == 5 && st[0].step == 20 && st[4].step == 24, "steps since 19, at most 5: 20..24");
    free(st);
    rc = fp_reader_steps_since(r, runs[0], NSTEPS - 1, 0, &st, &n);
    tap_ok(rc == FP_OK && n == 0, "no steps after the last one");
    free(st);

    /* layer times: 100 (l + 1) + 10 phase + (step % 3); over steps 0..5 the extra is 0,1,2,0,1,2 */
    fp_layer_sum_t *ls;
    rc = fp_reader_layer_summary(r, runs[1], 0, 5, &ls, &n);
    tap_is_int((long long)n, NLAYERS * 3, "layer summary: one row per layer and phase (%s)", fp_error_message());
    int ok = n == NLAYERS * 3;
    for (size_t i = 0; ok && i < n; i++) {
        double base = 100.0 * (ls[i].layer + 1) + 10.0 * ls[i].phase;
        ok = ls[i].layer == (int)(i / 3) && ls[i].phase == (int)(i % 3) && ls[i].steps == 6 &&
             ls[i].mean_ns == base + 1.0 && ls[i].median_ns == base + 1.0 && ls[i].min_ns == (int64_t)base &&
             ls[i].max_ns == (int64_t)base + 2 && ls[i].mean_kernels == ls[i].phase + 1;
        if (!ok)
            tap_diag("row %zu: layer %d phase %d steps %lld mean %g median %g", i, ls[i].layer, ls[i].phase,
                     (long long)ls[i].steps, ls[i].mean_ns, ls[i].median_ns);
    }
    tap_ok(ok, "mean, median, min, max and kernel counts per layer and phase");
    tap_ok(n > 0 && strcmp(ls[0].name, "layer1.0.conv1") == 0 && strcmp(ls[0].type, "conv2d") == 0,
           "rows carry the layer name and type");
    free(ls);
    rc = fp_reader_layer_summary(r, runs[1], 1000, 2000, &ls, &n);
    tap_ok(rc == FP_OK && n == 0, "an empty step range gives no rows");
    free(ls);

    /* kernels: every 10th step, per layer 4 kernels: j = 0..3, duration 50 + j; odd j sgemm */
    fp_kernel_sum_t *ks;
    rc = fp_reader_kernel_summary(r, runs[0], 0, INT64_MAX, &ks, &n);
    tap_is_int((long long)n, 2, "kernel summary: two names");
    long long inst = (NSTEPS / 10) * NLAYERS * 2;
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ks[i].name, "sgemm_128x64_nn") == 0) {
            found++;
            tap_ok(ks[i].instances == inst && ks[i].total_ns == inst / 2 * (51 + 53) && ks[i].min_ns == 51 &&
                       ks[i].max_ns == 53 && ks[i].avg_ns == 52.0 && ks[i].med_ns == 52.0,
                   "sgemm: instances, total, min, max, avg, median");
            tap_is_double(ks[i].stddev_ns, sqrt((double)inst / (double)(inst - 1)), 1e-9, 0,
                          "sgemm: sample standard deviation");
        }
    }
    tap_ok(found == 1 && n == 2 && ks[0].total_ns >= ks[1].total_ns &&
               fabs(ks[0].time_pct + ks[1].time_pct - 100.0) < 1e-9,
           "sorted by total time; Time(%%) adds up to 100");
    free(ks);

    fp_run_row_t row;
    rc = fp_reader_run(r, 99, &row);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "no run 99") && strstr(fp_error_message(), p),
           "an unknown run is an error naming the file (%s)", fp_error_message());

    char *csv = tu_path(dir, "steps.csv");
    FILE *f = fopen(csv, "wb");
    rc = fp_reader_export_csv(r, runs[1], "steps", f);
    fclose(f);
    char *text = tu_slurp(csv, NULL);
    tap_ok(rc == FP_OK && text && strncmp(text, "run,step,loss,", 14) == 0, "steps CSV has a header with step and loss");
    char line[128];
    snprintf(line, sizeof line, "\r\n%lld,3,%.17g", (long long)runs[1], tu_loss(1, 3));
    tap_ok(text && strstr(text, line) && !strstr(text, ",\n"), "CRLF line ends; step 3 of run 2 with its exact loss");
    int lines = 0;
    for (char *q = text; q && (q = strstr(q, "\r\n")); q += 2)
        lines++;
    tap_is_int(lines, NSTEPS + 1, "a header and one line per step");
    free(text);
    f = fopen(csv, "wb");
    rc = fp_reader_export_csv(r, runs[0], "runs", f);
    fclose(f);
    text = tu_slurp(csv, NULL);
    tap_ok(rc == FP_OK && text && strstr(text, ",\"imagenet, subset \"\"tiny\"\"\","),
           "a field with a comma and quotes is quoted, quotes doubled");
    tap_ok(text && strstr(text, ",\"{\"\"lr\"\":0.1,\"\"momentum\"\":0.9}\","), "JSON settings are quoted");
    free(text);
    f = fopen(csv, "wb");
    rc = fp_reader_export_csv(r, runs[0], "events", f);
    fclose(f);
    text = tu_slurp(csv, NULL);
    tap_ok(rc == FP_OK && text && strstr(text, ",\"step 3 skipped, first non-finite gradient in \"\"layer1.0.conv3\"\"\n"
                                               "scale halved\"\r\n"),
           "a field with a newline is quoted and kept");
    free(text);
    f = fopen(csv, "wb");
    rc = fp_reader_export_csv(r, runs[0], "kernels", f);
    fclose(f);
    text = tu_slurp(csv, NULL);
    tap_ok(rc == FP_OK && text && strstr(text, "shortName") && strstr(text, "\"void cudnn::conv<float, 3>(Params, int, float*)\""),
           "kernels export resolves names through StringIds");
    free(text);
    f = fopen(csv, "wb");
    rc = fp_reader_export_csv(r, runs[0], "bogus", f);
    fclose(f);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "'bogus'") && strstr(fp_error_message(), "layer_times"),
           "an unknown table lists the valid ones (%s)", fp_error_message());
    f = fopen(csv, "wb");
    rc = fp_reader_export_csv(r, 77, "steps", f);
    fclose(f);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "no run 77"), "export of an unknown run is an error");
    const char *tables[] = {"runs", "layers", "steps", "layer_times", "kernels", "histograms", "precision_error",
                            "evaluations", "device_samples", "events"};
    int all = 1;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        f = fopen(csv, "wb");
        all &= fp_reader_export_csv(r, runs[1], tables[i], f) == FP_OK;
        fclose(f);
        text = tu_slurp(csv, NULL);
        all &= text && strchr(text, '\n') && strchr(text, '\n')[1] != '\0';   /* header + at least one row */
        free(text);
    }
    tap_ok(all, "every table exports a header and rows for the fixture run");
    fp_reader_close(r);

    /* a damaged page of the runs table hides run 1 from a lookup by id without SQLite noticing: the error
     * names the corruption (as ls's full scan does), not "no run 1" (issue 21 #10) */
    char *bad = tu_path(dir, "corrupt.db");
    long long root = tu_damage_table_page(p, bad, "runs");
    tap_ok(root > 0, "a copy with the runs table's page damaged (page %lld)", root);
    fp_run_row_t one;
    rc = fp_reader_open_snapshot(&r, bad);
    if (rc == FP_OK)
        rc = fp_reader_run(r, runs[0], &one);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "corrupt") && strstr(fp_error_message(), bad) &&
               !strchr(fp_error_message(), '\n'),
           "fp_reader_run: one line naming the corruption: %s", fp_error_message());
    FILE *sink = fopen("/dev/null", "w");
    rc = r ? fp_reader_export_csv(r, runs[0], "steps", sink) : -1;
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "corrupt"), "the export says the same: %s",
           fp_error_message());
    fp_reader_close(r);
    rc = fp_reader_open_snapshot(&r, p);
    if (rc == FP_OK)
        rc = fp_reader_export_csv(r, 99, "steps", sink);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "no run 99"), "an intact file still says no run 99: %s",
           fp_error_message());
    fp_reader_close(r);
    fclose(sink);
    free(bad);
    free(csv);
    free(p);
    tu_rmdir(dir);
    return tap_done();
}
