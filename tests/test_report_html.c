/* test_report_html.c — the report's building blocks and the report itself on a generated resnet50
 * session: SHA-256 / base64 vectors, escaping (HTML, CSV, JSON, XML), chart
 * size bounds for long series, every chart and section present, hostile names escaped, the summary's
 * figures, all-or-nothing outputs on bad input. (Parsing with real parsers: test_report_cli.sh.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>
#include "error.h"
#include "reports/html_writer.h"
#include "reports/report.h"
#include "reports/sha256.h"
#include "reports/gate.h"
#include "reports/summary.h"
#include "reports/units.h"
#include "reports/svg_chart.h"
#include "report_testutil.h"
#include "store_testutil.h"
#include "tap.h"

/* fn's output for arg, written to a memory buffer, is want. */
static void writes(void (*fn)(FILE *, const char *), const char *arg, const char *want, const char *what)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fn(f, arg);
    fclose(f);
    tap_is_str(buf, want, "%s", what);
    free(buf);
}

/* The SHA-256 of msg[0..len), in hex, is want. */
static void sha256_is(const char *msg, size_t len, const char *want, const char *what)
{
    uint8_t d[32];
    char h[65];
    fp_sha256(msg, len, d);
    for (int i = 0; i < 32; i++)
        sprintf(h + 2 * i, "%02x", d[i]);
    tap_is_str(h, want, "%s", what);
}

static void primitives(void)
{
    sha256_is("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "SHA-256(\"abc\")");
    sha256_is("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "SHA-256(\"\")");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_is(m, strlen(m), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
              "SHA-256 of the 448-bit vector");
    char b64[16];
    fp_base64((const uint8_t *)"foob", 4, b64);
    tap_is_str(b64, "Zm9vYg==", "base64 with padding");

    writes(fp_html_text, "<a href='x'>&\"</a>\x01\xff ok \xc3\xa9",
           "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;\xEF\xBF\xBD\xEF\xBF\xBD ok \xc3\xa9",
           "HTML escaping: & < > \" ' escaped, control and invalid bytes replaced, UTF-8 kept");
    writes(fp_csv_field, "plain", "plain", "CSV: a plain field is not quoted");
    writes(fp_csv_field, "a,\"b\"\r\nc", "\"a,\"\"b\"\"\r\nc\"",
           "CSV: comma, quote, CRLF -> quoted, quotes doubled (RFC 4180)");
    writes(fp_json_string, "q\"b\\\n\x02\xff\xc3\xa9", "\"q\\\"b\\\\\\n\\u0002\\ufffd\xc3\xa9\"",
           "JSON string: quote, backslash, control, invalid UTF-8");
    writes(fp_xml_text, "<x a='1'>&\"\x01", "&lt;x a=&apos;1&apos;&gt;&amp;&quot;",
           "XML: entities, control characters dropped");
    tap_ok(strstr(fp_html_csp(), "default-src 'none'; style-src 'sha256-") != NULL, "the CSP allows its style by hash only");
}

static void chart_bounds(void)
{
    enum { N = 100000 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    rt_rng_t r;
    rt_seed(&r, 3);
    for (int i = 0; i < N; i++)
        x[i] = i, y[i] = 2 + sin(i / 500.0) + 0.1 * rt_normal(&r);
    y[5000] = NAN;
    y[77777] = 50;   /* a spike must survive downsampling */
    fp_svg_series_t s = {"loss <a&b>", x, y, N, "#0072b2", 0};
    fp_svg_opts_t o = {"c1", "t", "step", "loss", 0, 0, 0, NAN};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fp_svg_line_chart(f, &o, &s, 1);
    fclose(f);
    tap_ok(len < 40000, "a 100,000-point series draws in %zu bytes (< 40 kB: min/max per pixel column)", len);
    tap_ok(strstr(buf, "loss &lt;a&amp;b&gt;") != NULL, "legend text escaped");
    /* the spike (50, far above the rest at ~2) must be drawn: a path point near the top of the plot */
    double top = 1e9;
    const char *d = strstr(buf, " d=\"");
    for (const char *q = d; q && *q && *q != '/'; q++)
        if (*q == 'M' || *q == 'L') {
            double px, py;
            if (sscanf(q + 1, "%lf %lf", &px, &py) == 2 && py < top)
                top = py;
        }
    tap_ok(top < 50, "the outlier spike survives downsampling (topmost point at y = %.1f px)", top);
    free(buf);
    f = open_memstream(&buf, &len);
    fp_svg_line_chart(f, &o, &s, 0);
    fclose(f);
    tap_ok(strstr(buf, "id=\"c1\"") && strstr(buf, "no data"), "a chart without data is still drawn, saying so");
    free(buf);
    free(x);
    free(y);
}

static int has(const char *html, const char *what)
{
    return strstr(html, what) != NULL;
}

static void report_tests(void)
{
    char *dir = tu_mkdir();
    char *db = tu_path(dir, "runs.db"), *html = tu_path(dir, "r.html"), *csv = tu_path(dir, "csv");
    rt_session_spec_t spec;
    rt_default_spec(&spec, db);
    int64_t runs[2];
    tap_ok(rt_write_session(&spec, runs) == FP_OK, "generated resnet50 fp32 + fp16 session (300 steps, 126 layers)");
    fp_reader_t *r;
    tap_ok(fp_reader_open_snapshot(&r, db) == FP_OK, "reader opens it");

    fp_summary_t s;
    tap_ok(fp_summary_load(r, 0, -1, &s) == FP_OK && s.narms == 2 && s.ref == 0, "summary: two arms, fp32 reference");
    const fp_arm_t *a = &s.arms[1];
    tap_is_double(a->speedup, 400.0 / 220.0, 0, 0.03, "speedup = ratio of medians after warm-up (rel 3%%)");
    tap_is_int((long long)a->warmup, 30, "warm-up: 10%% of 300 steps");
    tap_is_int(a->skipped, 6, "6 skipped steps");
    tap_is_double(a->final_loss_scale, 1024, 0, 0, "final loss scale 65536 / 2^6");
    tap_is_double(a->mem_ratio, 12.0 / 20.0, 1e-12, 0, "peak memory ratio 12 GiB / 20 GiB");
    tap_is_double(a->energy_ratio, 66.0 / 120.0, 0, 0.03, "energy per step ratio (steps with energy only; rel 3%%)");
    tap_is_double(a->top1_gap, -0.3, 1e-9, 0, "val top-1 gap -0.3 pt");
    tap_ok(a->ntop_over > 0 && a->top_over[0].count >= a->top_over[a->ntop_over - 1].count,
           "top overflow layers listed, largest first");
    fp_summary_free(&s);

    fp_report_opts_t o = {.db_label = "runs.db", .session = 0, .warmup = -1, .html = html, .csv_dir = csv};
    int rc = fp_report_write(r, &o);
    tap_ok(rc == FP_OK, "report --html --csv writes (%s)", rc ? fp_error_message() : "ok");
    size_t len = 0;
    char *h = tu_slurp(html, &len);
    tap_ok(h != NULL, "the HTML file exists");
    h = h ? h : calloc(1, 1);
    tap_diag("HTML report of the 300-step session: %zu bytes", len);
    static const char *const ids[] = {
        "id=\"chart-loss\"", "id=\"chart-accuracy\"", "id=\"chart-throughput\"", "id=\"chart-speedup\"",
        "id=\"chart-loss-scale\"", "id=\"chart-layer-speedup-1\"", "id=\"chart-precision-error\"",
        "id=\"heatmap-0-activation\"", "id=\"heatmap-1-activation_grad\"", "id=\"heatmap-1-weight\"",
        "id=\"heatmap-1-weight_grad\"", "id=\"heatmap-1-update\"", "id=\"summary-table\"", "id=\"layer-table\"",
        "id=\"precision-table\"", "id=\"kernels-1\"", "id=\"events-table\"", "id=\"env-1\"", "id=\"session-config\""};
    int missing = 0;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (!has(h, ids[i])) {
            tap_diag("missing %s", ids[i]);
            missing++;
        }
    tap_is_int(missing, 0, "every chart, heatmap and table is present");
    tap_ok(!has(h, "<script") && !has(h, "<SCRIPT"), "no <script> anywhere (hostile names included)");
    tap_ok(has(h, "evil&lt;T&gt;(x) &amp; &quot;q&quot; &#39;a&#39;, &lt;/td&gt;&lt;/table&gt;&lt;script&gt;"),
           "a hostile kernel name is escaped");
    tap_ok(has(h, "resnet50 &lt;fp32 &amp; fp16&gt; &quot;side &#39;by&#39; side&quot;"), "the session name is escaped");
    tap_ok(has(h, "&lt;/pre&gt;&lt;script&gt;x()&lt;/script&gt;"), "the session configuration is escaped");
    tap_ok(!has(h, "src=") && !has(h, "href=\"http") && !has(h, "url(") && !has(h, "@import"), "no external resources");
    tap_ok(has(h, "http-equiv=\"Content-Security-Policy\" content=\"default-src &#39;none&#39;; style-src &#39;sha256-"),
           "the document declares its CSP");
    tap_ok(has(h, "<th>Time (%)</th><th>Total Time (ns)</th><th>Instances</th><th>Avg (ns)</th><th>Med (ns)</th>"
                  "<th>Min (ns)</th><th>Max (ns)</th><th>StdDev (ns)</th><th>Tensor cores</th><th>Name</th>"),
           "kernel table has nsys cuda_gpu_kern_sum's columns and a tensor-core flag");
    tap_ok(has(h, "<td>yes</td><td>sm80_xmma_fprop"), "fp16 conv kernels flagged as tensor-core");
    tap_ok(has(h, "fp16 max") && has(h, "e4m3 max") && has(h, "e5m2 min normal") && has(h, "bf16"),
           "heatmaps draw the fp16, bf16, E4M3 and E5M2 limits");
    tap_ok(has(h, "1.8") && has(h, "faster"), "the verdict states the speedup");
    tap_ok(has(h, "NVIDIA H100 80GB HBM3") && has(h, "550.54.15") && has(h, "cuBLAS 12.4"), "environment listed");
    free(h);

    static const char *const heads[] = {
        "arm,run,policy,reference,status,steps,warmup,median_step_ns,speedup,",
        "arm,run,step,loss,loss_scale,skipped,lr,wall_ns,samples_per_s,mem_current,mem_peak,energy_j,power_w\r\n",
        "arm,run,layer,name,type,forward_ns,backward_data_ns,backward_weights_ns,total_ns,share,speedup,",
        "arm,run,step,layer,name,role,count,zero,nan,inf,amax,min_nonzero,mean_abs,fp16_normal,",
        "arm,run,time_pct,total_ns,instances,avg_ns,med_ns,min_ns,max_ns,stddev_ns,tensor_core,name\r\n",
        /* data parallel, per rank: only the header for a session trained alone */
        "arm,run,rank,ranks,steps,mean_step_ns,mean_compute_ns,mean_allreduce_ns,mean_exposed_ns,mean_bytes,"
        "max_step_ns,vs_fastest,straggler\r\n"};
    int bad = 0;
    for (int v = 0; v < FP_REPORT_CSV_VIEWS; v++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.csv", csv, fp_report_csv_view(v));
        char *c = tu_slurp(path, NULL);
        if (!c || strncmp(c, heads[v], strlen(heads[v])) != 0) {
            tap_diag("%s: unexpected header", path);
            bad++;
        }
        free(c);
    }
    tap_is_int(bad, 0, "six CSV views with their header rows");
    tap_is_int(tu_count_entries(csv), 6, "the CSV directory holds exactly the six files (no temporaries)");

    /* bad input: all or nothing */
    char *html2 = tu_path(dir, "r2.html"), *csv2 = tu_path(dir, "csv2");
    fp_report_opts_t bad_sess = {.db_label = "runs.db", .session = 99, .warmup = -1, .html = html2, .csv_dir = csv2};
    tap_ok(fp_report_write(r, &bad_sess) == FP_EINVAL && strstr(fp_error_message(), "no session 99") &&
               !tu_exists(html2) && !tu_exists(csv2),
           "a missing session: one message, no output at all (%s)", fp_error_message());
    char *notdir = tu_path(dir, "r.html");   /* a file where the CSV directory should be */
    fp_report_opts_t bad_csv = {.db_label = "runs.db", .session = 0, .warmup = -1, .html = html2, .csv_dir = notdir};
    tap_ok(fp_report_write(r, &bad_csv) != FP_OK && !tu_exists(html2),
           "a CSV path that is a file: error, and the HTML is not left behind either");
    int before = tu_count_entries(dir);
    char *unwritable = tu_path(dir, "nope/r.html");
    fp_report_opts_t bad_out = {.db_label = "runs.db", .session = 0, .warmup = -1, .html = unwritable, .csv_dir = NULL};
    tap_ok(fp_report_write(r, &bad_out) == FP_EIO && tu_count_entries(dir) == before,
           "an unwritable output path: FP_EIO, nothing created (%s)", fp_error_message());
    char *trace = tu_path(dir, "t.json");
    fp_trace_opts_t to = {0, 0, 0};
    tap_ok(fp_trace_chrome_write(r, &to, trace) == FP_OK, "Chrome trace written");
    char *t = tu_slurp(trace, NULL);
    tap_ok(t && strstr(t, "\"traceEvents\":[") && strstr(t, "\"ph\":\"X\"") && strstr(t, "\"ph\":\"C\"") &&
               strstr(t, "\"name\":\"process_name\"") && strstr(t, "evil<T>(x) & \\\"q\\\""),
           "trace: X and C events, process names, kernel names JSON-escaped");
    free(t);
    fp_reader_close(r);
    free(html2);
    free(csv2);
    free(notdir);
    free(unwritable);
    free(trace);
    free(db);
    free(html);
    free(csv);
    tu_rmdir(dir);
}

/* A validation whose loss was NaN (stored NULL) or inf: the summary says it was non-finite (issue 21). */
static void nonfinite_eval(void)
{
    char *dir = tu_mkdir();
    char *db = tu_path(dir, "nf.db");
    rt_gate_spec_t g;
    rt_default_gate(&g, db, 7);
    g.steps = 40;
    tap_ok(rt_write_gate(&g) == FP_OK, "lean fp32 + fp16 session with a validation at the end");
    sqlite3 *h = NULL;
    int ok = sqlite3_open(db, &h) == SQLITE_OK &&
             sqlite3_exec(h, "UPDATE evaluations SET loss = NULL, top1 = 0.685 WHERE run = 2;"
                             "UPDATE evaluations SET loss = 9e999 WHERE run = 1;", NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_close(h);
    tap_ok(ok, "fp16's validation loss made NaN (NULL), fp32's inf");
    fp_reader_t *r;
    fp_summary_t s;
    if (fp_reader_open_snapshot(&r, db) != FP_OK || fp_summary_load(r, 0, -1, &s) != FP_OK) {
        tap_ok(0, "summary loads (%s)", fp_error_message());
        return;
    }
    fp_reader_close(r);
    const fp_arm_t *a = fp_summary_arm(&s, "fp16"), *b = fp_summary_arm(&s, "fp32");
    char buf[FP_UNIT_BUF], note[256];
    tap_ok(a && a->val_nonfinite && b && b->val_nonfinite, "both validations are non-finite");
    tap_is_str(fp_summary_fmt_val_top1(buf, a), "non-finite", "val top-1 reads 'non-finite', not 68.50%%");
    tap_ok(fp_summary_val_note(a, note, sizeof note) == 1 && strstr(note, "fp16: validation at step") &&
               strstr(note, "non-finite (loss nan)"),
           "the note names the arm and the NaN loss: %s", note);
    tap_ok(fp_summary_val_note(b, note, sizeof note) == 1 && strstr(note, "(loss inf)"), "fp32's: %s", note);
    fp_summary_free(&s);
    /* a finite validation is shown as before */
    ok = sqlite3_open(db, &h) == SQLITE_OK &&
         sqlite3_exec(h, "UPDATE evaluations SET loss = 1.5, top1 = 0.5;", NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_close(h);
    if (ok && fp_reader_open_snapshot(&r, db) == FP_OK) {
        ok = fp_summary_load(r, 0, -1, &s) == FP_OK;
        fp_reader_close(r);
        a = ok ? fp_summary_arm(&s, "fp16") : NULL;
        tap_ok(a && !a->val_nonfinite && strcmp(fp_summary_fmt_val_top1(buf, a), "50.00%") == 0 &&
                   fp_summary_val_note(a, note, sizeof note) == 0 && note[0] == 0,
               "a finite validation: '%s', no note", a ? buf : "?");
        if (ok)
            fp_summary_free(&s);
    } else
        tap_ok(0, "finite validation reloads");
    free(db);
    tu_rmdir(dir);
}

/* The accuracy's sample size: the store's evaluations.images where recorded, else the run's
 * configuration (eval_batches x batch), in both the summary (report, summary.csv) and the gate. */
static void eval_sample_size(void)
{
    char *dir = tu_mkdir();
    char *db = tu_path(dir, "images.db");
    rt_gate_spec_t g;
    rt_default_gate(&g, db, 11);
    g.steps = 30;
    tap_ok(rt_write_gate(&g) == FP_OK, "sample size: lean fp32 + fp16 session");
    tap_is_int(tu_sql_int(db, "SELECT count(*) FROM evaluations WHERE images IS NULL"), 2,
               "sample size: evaluations written without a count store NULL");
    tu_sql(db, "UPDATE runs SET config = '{\"data\":\"synthetic\",\"batch\":16,\"eval_batches\":8}'");
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: no count recorded (an old file): derived, 8 x 16; pass 1: the store's 5000 */
        if (pass == 1)
            tu_sql(db, "UPDATE evaluations SET images = 5000");
        int64_t want = pass ? 5000 : 128;
        fp_reader_t *r;
        fp_summary_t s;
        int ok = fp_reader_open_snapshot(&r, db) == FP_OK && fp_summary_load(r, 0, -1, &s) == FP_OK;
        if (ok)
            fp_reader_close(r);
        const fp_arm_t *a = ok ? fp_summary_arm(&s, "fp16") : NULL;
        tap_ok(a && a->val_images == want && isfinite(a->val_top1_lo),
               "summary: val_images %lld (%s), with an interval", a ? (long long)a->val_images : -2LL,
               pass ? "the store's" : "derived from the configuration");
        if (ok)
            fp_summary_free(&s);
        fp_gate_side_t side;
        memset(&side, 0, sizeof side);
        int rc = fp_gate_load(db, 0, -1, &side);
        int found = 0;
        for (size_t i = 0; rc == FP_OK && side.x && i < side.s.narms; i++)
            if (strcmp(side.s.arms[i].run.policy, "fp16") == 0)
                found = side.x[i].eval_images == want &&
                        strstr(side.x[i].eval_from, pass ? "recorded by the store" : "derived") != NULL;
        tap_ok(found, "gate: eval_images %lld (%s)", (long long)want, pass ? "recorded by the store" : "derived");
        if (rc == FP_OK)
            fp_gate_side_free(&side);
    }
    free(db);
    tu_rmdir(dir);
}

/* The heatmap's colour scale: a swatch for every colour a cell can take, lightest (smallest share) first,
 * each labelled with the smallest share it stands for; the cells' colours are among them. */
static void heatmap_scale(void)
{
    const char *rows[3] = {"0 conv1", "1 bn1", "2 fc"};
    /* row 0: one share of 1; row 1: 1e-5 and the rest; row 2: 1e-3 / 0.999 */
    double frac[3 * 4] = {0, 1.0, 0, 0, 1e-5, 0.99999, 0, 0, 0, 0, 1e-3, 0.999};
    fp_svg_mark_t marks[2] = {{-14, "fp16 min normal", "#d55e00"}, {-14, "e5m2 min normal", "#e69f00"}};
    fp_svg_opts_t o = {"hm", "t: activation", "log2 |x|", NULL, 0, 0, 0, NAN};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fp_svg_heatmap(f, &o, rows, 3, -16, 4, frac, marks, 2);
    fclose(f);
    const char *g = strstr(buf, "class=\"colour-scale\"");
    const char *gend = g ? strstr(g, "</g>") : NULL;
    tap_ok(g && gend, "the heatmap draws a colour scale");
    int swatches = 0, in_order = 1;
    double last = -1;
    for (const char *q = g; q && gend && (q = strstr(q, "<rect")) && q < gend; q++) {
        swatches++;
        const char *t = strstr(q, "<text");
        const char *v = t ? strchr(t, '>') : NULL;
        double share = v ? atof(v + 1) : -1;   /* "&gt; 0" reads 0 */
        in_order &= share > last || (swatches == 1 && share == 0);
        last = share;
    }
    tap_ok(swatches == 8 && in_order, "8 swatches, labelled with increasing shares (%d)", swatches);
    /* every colour a cell was drawn in is a swatch of the scale */
    int cells = 0, found = 0;
    for (const char *q = buf; (q = strstr(q, "<rect")) && (!g || q < g); q++) {
        const char *fill = strstr(q, "fill=\"#");
        const char *end = strchr(q, '>');
        if (!fill || fill > end || (strstr(q, "stroke=") && strstr(q, "stroke=") < end))
            continue;   /* the frame and background */
        char col[16];
        if (sscanf(fill + 6, "%7s", col) != 1 || strcmp(col, "#ffffff") == 0 || strcmp(col, "#fafbfc") == 0)
            continue;
        cells++;
        char pat[32];
        snprintf(pat, sizeof pat, "fill=\"%s\"", col);
        const char *in = g ? strstr(g, pat) : NULL;
        found += in && in < gend;
    }
    tap_ok(cells >= 4 && found == cells, "each of the %d cells' colours is on the scale (%d)", cells, found);
    tap_ok(strstr(buf, ">0.37</text>") && strstr(buf, ">2.7e-6</text>"),
           "the darkest swatch reads 0.37 (share >= 0.37 = 10^(-3/7)), the second 2.7e-6");
    /* two limits at the same binade: their labels sit in different lanes (rows) */
    int ys[2] = {0, 0}, nl = 0;
    for (const char *q = buf; nl < 2 && (q = strstr(q, "class=\"mark-label\"")); q++) {
        const char *y = strstr(q, " y=\"");
        ys[nl++] = y ? atoi(y + 4) : -1;
    }
    tap_ok(nl == 2 && ys[0] != ys[1] && ys[0] > 16 && ys[1] > 16,
           "labels of limits at the same binade get separate rows below the title (y %d, %d)", ys[0], ys[1]);
    free(buf);
}

/* What the HTML shows of a session as the trainer records it: arms without a loss scaler store 1 each
 * step and are not drawn in the loss-scale chart; an event's text is shown whole. */
static void html_truth(void)
{
    char *dir = tu_mkdir();
    char *db = tu_path(dir, "truth.db"), *html = tu_path(dir, "truth.html");
    rt_gate_spec_t g;
    rt_default_gate(&g, db, 5);
    g.steps = 40;
    g.policies = "fp32,fp16,half";
    tap_ok(rt_write_gate(&g) == FP_OK, "truth: fp32 + fp16 + half session");
    char *ev = malloc(1200 + 200);
    int n = snprintf(ev, 200, "INSERT INTO events (run, start, step, kind, layer, text) VALUES (2, 7, 3, 'warning', NULL, '");
    for (int i = 0; i < 1000; i++)
        ev[n + i] = (char)('a' + (i * 7) % 26);
    memcpy(ev + n + 1000, "END')", 6);
    tu_sql(db, "UPDATE steps SET loss_scale = 1 WHERE run IN (1, 3)");   /* as the trainer stores them */
    tu_sql(db, ev);
    fp_reader_t *r;
    int rc = fp_reader_open_snapshot(&r, db);
    fp_report_opts_t o = {.db_label = "truth.db", .session = 0, .warmup = -1, .html = html, .csv_dir = NULL};
    if (rc == FP_OK) {
        rc = fp_report_write(r, &o);
        fp_reader_close(r);
    }
    tap_ok(rc == FP_OK, "truth: report written (%s)", rc ? fp_error_message() : "ok");
    char *h = tu_slurp(html, NULL);
    h = h ? h : calloc(1, 1);
    const char *fig = strstr(h, "id=\"chart-loss-scale\"");
    const char *end = fig ? strstr(fig, "</figure>") : NULL;
    char *chart = fig && end ? strndup(fig, (size_t)(end - fig)) : strdup("");
    tap_ok(strstr(chart, ">fp16</text>") && !strstr(chart, ">fp32</text>") && !strstr(chart, ">half</text>"),
           "the loss-scale chart draws fp16 only (fp32 and half stored 1: no scaler)");
    tap_ok(has(h, "Not drawn (no loss scaler): fp32, half."), "and says which arms it leaves out");
    ev[n + 1003] = 0;
    tap_ok(has(h, ev + n), "a 1003-character event text is shown whole");
    tap_ok(has(h, "<details class=\"detail\" id=\"heatmaps-0\">") && has(h, "<details class=\"detail\" id=\"layer-detail\">"),
           "per-layer detail (heatmaps, the layer table) is collapsed in <details>");
    free(chart);
    free(h);
    free(ev);
    free(db);
    free(html);
    tu_rmdir(dir);
}

int main(void)
{
    primitives();
    chart_bounds();
    report_tests();
    nonfinite_eval();
    eval_sample_size();
    heatmap_scale();
    html_truth();
    return tap_done();
}
