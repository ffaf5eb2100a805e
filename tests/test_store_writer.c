/* test_store_writer.c — the writer: every kind of record written by producers reads back exactly
 * (NULL for "not measured"), many producer threads lose nothing while the queue grows, commits are
 * fresh (<= 250 ms), names are deduplicated across reopen, runs end with the status asked for,
 * evaluations keep their image count and events their whole text, and trainer/run/record.c's data-parallel rows
 * (every rank's step, the all-reduce's rounding per layer with parameters and over the whole gradient). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "error.h"
#include "store.h"
#include "store_reader.h"
#include "tap.h"
#include "trainer/model.h"
#include "trainer/run/record.h"
#include "store_testutil.h"

#define NSTEPS 120
#define NLAYERS 10

static char *dir;

static void test_fixture_reads_back(void)
{
    char *p = tu_path(dir, "fixture.db");
    int64_t runs[2];
    int rc = tu_write_fixture(p, NSTEPS, NLAYERS, runs);
    tap_is_int(rc, FP_OK, "fixture written (%s)", fp_error_message());
    fp_reader_t *r;
    rc = fp_reader_open(&r, p);
    tap_is_int(rc, FP_OK, "reader opens it");
    if (rc != FP_OK) {
        tap_skip(22, "no reader");
        free(p);
        return;
    }
    fp_session_row_t *ss;
    size_t ns;
    fp_reader_sessions(r, &ss, &ns);
    tap_ok(ns == 1 && strcmp(ss[0].name, "fixture") == 0 && ss[0].runs == 2 && ss[0].end > 0,
           "one session 'fixture' with two runs, ended");
    free(ss);
    fp_run_row_t *rr;
    size_t nr;
    fp_reader_runs(r, 0, &rr, &nr);
    tap_is_int((long long)nr, 2, "two runs");
    int meta_ok = nr == 2;
    for (size_t i = 0; meta_ok && i < 2; i++)
        meta_ok = strcmp(rr[i].status, "finished") == 0 && !rr[i].stale && rr[i].steps == NSTEPS &&
                  rr[i].last_step == NSTEPS - 1 && rr[i].last_loss == tu_loss((int)i, NSTEPS - 1) &&
                  strcmp(rr[i].model, "resnet18") == 0 && strcmp(rr[i].dataset, "imagenet, subset \"tiny\"") == 0 &&
                  rr[i].batch_size == 32 && rr[i].seed == 42 && rr[i].end >= rr[i].start;
    tap_ok(meta_ok, "run metadata, status finished, steps and final loss exact");
    tap_ok(nr == 2 && rr[1].ref_run == runs[0] && rr[0].ref_run == -1, "ref_run links the fp16 arm to fp32");
    free(rr);

    int steps_ok = 1;
    for (int i = 0; i < 2; i++) {
        fp_step_row_t *st;
        size_t n;
        rc = fp_reader_steps_since(r, runs[i], -1, 0, &st, &n);
        steps_ok &= rc == FP_OK && n == NSTEPS;
        for (size_t k = 0; steps_ok && k < n; k++) {
            steps_ok &= st[k].step == (int64_t)k && st[k].loss == tu_loss(i, (int64_t)k) && st[k].lr == 0.1 &&
                        st[k].wall_ns == 900 && st[k].start == 1000 * (int64_t)k && st[k].samples_per_s == 1234.5 &&
                        st[k].skipped == (i == 1 && k == 3) && isnan(st[k].energy_j);
            if (i == 0)
                steps_ok &= isnan(st[k].loss_scale) && st[k].mem_current == -1 && st[k].mem_peak == -1 &&
                            isnan(st[k].power_w);
            else
                steps_ok &= st[k].loss_scale == 65536.0 && st[k].mem_current == 1000 && st[k].mem_peak == 2000 &&
                            st[k].power_w == 250.5;
        }
        free(st);
    }
    tap_ok(steps_ok, "every step reads back exactly; not-measured fields are NULL, never 0");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM steps WHERE mem_current = 0 OR energy_j = 0"), 0,
               "no made-up zeros in steps");

    long long want_lt = 0;
    for (int k = 0; k < NSTEPS; k++)
        for (int l = 0; l < NLAYERS; l++)
            for (int ph = 0; ph < 3; ph++)
                want_lt += 100 * (l + 1) + 10 * ph + (k % 3);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM layer_times WHERE run = %lld", (long long)runs[0]);
    tap_is_int(tu_sql_int(p, sql), NSTEPS * NLAYERS * 3, "all layer-time rows of a run");
    snprintf(sql, sizeof sql, "SELECT sum(time_ns) FROM layer_times WHERE run = %lld", (long long)runs[1]);
    tap_is_int(tu_sql_int(p, sql), want_lt, "layer times sum exactly");
    tap_is_int(tu_sql_int(p, "SELECT sum(kernels) FROM layer_times"), 2LL * NSTEPS * NLAYERS * (1 + 2 + 3),
               "kernel counts per layer and phase");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM kernels"), 2LL * (NSTEPS / 10) * NLAYERS * 4, "all kernel rows");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM StringIds"), 2, "kernel names deduplicated in StringIds");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM kernels k JOIN StringIds s ON s.id = k.shortName"
                             " WHERE s.value = 'sgemm_128x64_nn' AND k.gridX = 128 AND k.blockX = 256"
                             " AND k.streamId = 7"),
               (NSTEPS / 10) * NLAYERS * 2 * 2, "kernel rows join their names, grid and block");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM kernels WHERE tensorCore = 1"), (NSTEPS / 10) * NLAYERS * 4,
               "tensorCore flag per run");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM layers WHERE name = 'layer1.0.conv1' AND type = 'conv2d'"
                             " AND params = 36864 AND fwd_flops = 3700000000"), 2, "layers with names, types, sizes");

    fp_hist_row_t *h;
    size_t nh;
    rc = fp_reader_histograms(r, runs[1], 0, 5, &h, &nh);
    fp_hist_t want;
    fp_hist_init(&want);
    float x[6] = {1.0f, 70000.0f, 1e-6f, 1e-9f, 0.0f, -3.0f};
    fp_hist_add(&want, x, 6);
    tap_ok(rc == FP_OK && nh == 2 && h[0].step == 0 && h[0].role == FP_ROLE_ACTIVATION &&
               h[1].role == FP_ROLE_WEIGHT_GRAD,
           "histograms of layer 0 at the latest sampled step <= 5: two roles (%s)", fp_error_message());
    tap_ok(nh > 0 && memcmp(h[0].hist.cls, want.cls, sizeof want.cls) == 0 && h[0].hist.count == want.count &&
               memcmp(h[0].hist.binade, want.binade, sizeof want.binade) == 0 && h[0].hist.amax == want.amax,
           "the histogram blob decodes to what was recorded");
    free(h);
    snprintf(sql, sizeof sql, "SELECT fp16_overflow * 1000 + fp16_underflow * 100 + fp16_subnormal * 10 + "
             "fp16_normal FROM histograms WHERE run = %lld AND role = 0", (long long)runs[0]);
    tap_is_int(tu_sql_int(p, sql),
               (long long)(want.cls[FP_FMT_FP16][FP_CLASS_OVERFLOW] * 1000 + want.cls[FP_FMT_FP16][FP_CLASS_UNDERFLOW] * 100 +
                           want.cls[FP_FMT_FP16][FP_CLASS_SUBNORMAL] * 10 + want.cls[FP_FMT_FP16][FP_CLASS_NORMAL]),
               "per-format class counts are queryable columns");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM precision_error WHERE rel_l2 = 1e-3 AND cosine = 0.9999"), 1,
               "precision error row");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM evaluations WHERE split = 'val' AND top5 = 0.75"), 2,
               "evaluation rows");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM device_samples WHERE power_w IS NULL AND sm_clock_mhz IS NULL"
                             " AND mem_used = 123456789 AND temperature_c = 55"), 2,
               "device samples keep NULL for what was not measured");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM events WHERE kind = 'skipped_step' AND layer = 2 AND step = 3"
                             " AND text LIKE '%\"layer1.0.conv3\"' || char(10) || 'scale halved'"), 2,
               "events keep their text byte for byte");
    fp_reader_close(r);
    free(p);
}

typedef struct {
    fp_store_t *s;
    int64_t run;
    int thread;
    int n;
    int errors;
} producer_t;

static void *produce(void *v)
{
    producer_t *p = v;
    fp_kernel_rec_t k[64];
    memset(k, 0, sizeof k);
    for (int i = 0; i < p->n; i += 64) {
        int m = p->n - i < 64 ? p->n - i : 64;
        for (int j = 0; j < m; j++) {
            k[j].run = p->run;
            k[j].step = (i + j) / 1000;
            k[j].layer = -1;
            k[j].phase = -1;
            k[j].start = i + j;
            k[j].end = i + j + 10;
            k[j].correlation_id = (uint32_t)(p->thread * 1000000 + i + j);
            k[j].tensor_core = -1;
        }
        p->errors += fp_store_kernels(p->s, k, (size_t)m) != FP_OK;
    }
    return NULL;
}

static void test_threads_and_freshness(void)
{
    enum { THREADS = 4, PER = 60000 };
    char *p = tu_path(dir, "threads.db");
    fp_store_t *s;
    int rc = fp_store_open(&s, p);
    int64_t session = 0, run = 0;
    fp_session_info_t si = {.name = "threads"};
    fp_run_info_t ri = {.model = "m", .policy = "fp16", .batch_size = -1, .image_size = -1};
    if (rc == FP_OK)
        rc = fp_store_begin_session(s, &si, &session);
    ri.session = session;
    if (rc == FP_OK)
        rc = fp_store_begin_run(s, &ri, &run);
    tap_ok(rc == FP_OK && session > 0 && run > 0, "session and run ids are known when begin returns");
    if (rc != FP_OK) {
        tap_skip(13, "no store");
        free(p);
        return;
    }
    /* freshness: a step is visible to a reader within 250 ms, without any flush */
    fp_step_rec_t st = {.run = run, .step = 0, .loss = 1.5, .loss_scale = NAN, .lr = NAN, .start = -1, .end = -1,
                        .wall_ns = -1, .samples_per_s = NAN, .mem_current = -1, .mem_peak = -1,
                        .energy_j = NAN, .power_w = NAN};
    fp_store_step(s, &st, NULL, 0);
    usleep(300000);
    fp_reader_t *r;
    fp_step_row_t *rows = NULL;
    size_t n = 0;
    if (fp_reader_open(&r, p) == FP_OK) {
        fp_reader_steps_since(r, run, -1, 0, &rows, &n);
        fp_reader_close(r);
    }
    tap_ok(n == 1 && rows[0].loss == 1.5, "a step is committed and visible within 300 ms without a flush");
    free(rows);
    st.step = 1;
    st.cycles = 123456789;
    st.instructions = 987654321;
    st.host_cpu_ns = 45678901;
    fp_store_step(s, &st, NULL, 0);
    st.step = 2;
    st.host_cpu_ns = -1;   /* not measured, as a negative value */
    fp_store_step(s, &st, NULL, 0);
    fp_store_flush(s);
    tap_ok(tu_sql_int(p, "SELECT cycles FROM steps WHERE step = 1") == 123456789 &&
               tu_sql_int(p, "SELECT instructions FROM steps WHERE step = 1") == 987654321 &&
               tu_sql_int(p, "SELECT count(*) FROM steps WHERE step = 0 AND cycles IS NULL AND instructions IS NULL") == 1,
           "cycles and instructions stored; not measured (0) is NULL, never 0");
    rows = NULL;
    n = 0;
    if (fp_reader_open(&r, p) == FP_OK) {
        fp_reader_steps_since(r, run, -1, 0, &rows, &n);
        fp_reader_close(r);
    }
    tap_ok(tu_sql_int(p, "SELECT host_cpu_ns FROM steps WHERE step = 1") == 45678901 &&
               tu_sql_int(p, "SELECT count(*) FROM steps WHERE step IN (0, 2) AND host_cpu_ns IS NULL") == 2 &&
               n == 3 && rows[0].host_cpu_ns == -1 && rows[1].host_cpu_ns == 45678901 && rows[2].host_cpu_ns == -1,
           "host CPU time round-trips; not measured (0 or negative) is NULL, read back as -1, never 0");
    free(rows);
    tap_ok(tu_sql_int(p, "SELECT heartbeat > 0 FROM runs") == 1, "the run carries a heartbeat");

    pthread_t th[THREADS];
    producer_t pr[THREADS];
    for (int i = 0; i < THREADS; i++) {
        pr[i] = (producer_t){.s = s, .run = run, .thread = i, .n = PER};
        pthread_create(&th[i], NULL, produce, &pr[i]);
    }
    int errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        errors += pr[i].errors;
    }
    tap_is_int(errors, 0, "%d producer threads queued %d kernel records each without an error", THREADS, PER);
    int64_t id1 = fp_store_intern(s, "kernel_a"), id2 = fp_store_intern(s, "kernel_b"),
            id3 = fp_store_intern(s, "kernel_a");
    tap_ok(id1 > 0 && id2 > 0 && id1 == id3 && id1 != id2, "interning gives one id per name");
    fp_store_stats_t stats;
    fp_store_flush(s);
    fp_store_get_stats(s, &stats);
    tap_ok(stats.dropped == 0 && stats.written >= (uint64_t)THREADS * PER, "nothing dropped (%llu written, queue %zu)",
           (unsigned long long)stats.written, stats.queue_capacity);
    rc = fp_store_close(s, FP_RUN_INTERRUPTED, "stopped by the test");
    tap_is_int(rc, FP_OK, "close");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM kernels"), (long long)THREADS * PER, "every kernel row is there");
    long long want = 0;
    for (int t = 0; t < THREADS; t++)
        want += (long long)PER * t * 1000000 + (long long)PER * (PER - 1) / 2;
    tap_is_int(tu_sql_int(p, "SELECT sum(correlationId) FROM kernels"), want, "each exactly once");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM runs WHERE status = 'interrupted' AND failure = "
                             "'stopped by the test' AND end IS NOT NULL"), 1, "close marked the run interrupted");
    /* names survive a reopen with the same ids */
    if (fp_store_open(&s, p) == FP_OK) {
        int64_t again = fp_store_intern(s, "kernel_a"), fresh = fp_store_intern(s, "kernel_c");
        tap_ok(again == id1 && fresh > id2, "a reopened store keeps StringIds ids (%lld, %lld)", (long long)again,
               (long long)fresh);
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    } else {
        tap_skip(1, "reopen failed");
    }
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM StringIds"), 3, "StringIds holds each name once");
    free(p);
}

static void test_end_run(void)
{
    char *p = tu_path(dir, "end.db");
    fp_store_t *s;
    int64_t session, a, b;
    fp_session_info_t si = {0};
    fp_run_info_t ri = {.model = "m", .policy = "fp32", .batch_size = -1, .image_size = -1};
    int rc = fp_store_open(&s, p);
    if (rc == FP_OK)
        rc = fp_store_begin_session(s, &si, &session);
    ri.session = session;
    if (rc == FP_OK)
        rc = fp_store_begin_run(s, &ri, &a);
    if (rc == FP_OK)
        rc = fp_store_begin_run(s, &ri, &b);
    if (rc == FP_OK)
        rc = fp_store_end_run(s, a, FP_RUN_FAILED, "loss diverged");
    if (rc == FP_OK)
        rc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    tap_is_int(rc, FP_OK, "end_run and close");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM runs WHERE status = 'failed' AND failure = 'loss diverged'"), 1,
               "end_run marked one run failed with its message");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM runs WHERE status = 'finished' AND failure IS NULL"), 1,
               "close finished the other");
    tap_ok(fp_store_close(NULL, FP_RUN_FINISHED, NULL) == FP_OK, "close(NULL) is a no-op");
    free(p);
}

/* Each kernel's class: written as its ENUM_KERNEL_CLASS id (unknown / out of range: NULL), read back
 * through fp_reader_kernels and fp_reader_kernel_flags, named in the export. */
static void test_kernel_class(void)
{
    char *p = tu_path(dir, "kclass.db");
    fp_store_t *s;
    int64_t session = 0, run = 0;
    fp_session_info_t si = {0};
    fp_run_info_t ri = {.model = "m", .policy = "fp16", .batch_size = -1, .image_size = -1};
    int rc = fp_store_open(&s, p);
    if (rc == FP_OK)
        rc = fp_store_begin_session(s, &si, &session);
    ri.session = session;
    if (rc == FP_OK)
        rc = fp_store_begin_run(s, &ri, &run);
    if (rc != FP_OK) {
        tap_ok(0, "store for the kernel-class test (%s)", fp_error_message());
        free(p);
        return;
    }
    /* classes 0 (unknown), 1 simt, 2 mma, 3 wgmma, 4 tcgen05, 9 (out of range); names a, b, b, c, c, d */
    const int cls[6] = {0, 1, 2, 3, 4, 9};
    const char *names[6] = {"k_a", "k_b", "k_b", "k_c", "k_c", "k_d"};
    fp_kernel_rec_t k[6];
    memset(k, 0, sizeof k);
    for (int i = 0; i < 6; i++) {
        k[i] = (fp_kernel_rec_t){.run = run, .step = 1, .layer = -1, .phase = -1, .start = 10 * i, .end = 10 * i + 5,
                                 .short_name = fp_store_intern(s, names[i]), .tensor_core = cls[i] >= 2 && cls[i] <= 4,
                                 .kernel_class = cls[i]};
    }
    rc = fp_store_kernels(s, k, 6);
    if (rc == FP_OK)
        rc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    tap_is_int(rc, FP_OK, "kernels with classes written");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM kernels WHERE kernelClass IS NULL"), 2,
               "unknown (0) and out-of-range (9) classes are NULL");
    tap_is_int(tu_sql_int(p, "SELECT group_concat(kernelClass, '') FROM (SELECT kernelClass FROM kernels"
                             " WHERE kernelClass IS NOT NULL ORDER BY start)"),
               1234, "classes 1..4 stored as their ids, in order");
    fp_reader_t *r;
    rc = fp_reader_open(&r, p);
    fp_kernel_row_t *rows = NULL;
    size_t n = 0;
    if (rc == FP_OK)
        rc = fp_reader_kernels(r, run, 0, 10, &rows, &n);
    int ok = rc == FP_OK && n == 6;
    for (size_t i = 0; ok && i < n; i++)
        ok = rows[i].kernel_class == (cls[i] <= 4 ? cls[i] : 0);
    tap_ok(ok, "fp_reader_kernels reads each class back (NULL as 0)");
    free(rows);
    fp_kernel_flag_t *fl = NULL;
    if (rc == FP_OK)
        rc = fp_reader_kernel_flags(r, run, &fl, &n);
    int seen = 0;
    for (size_t i = 0; rc == FP_OK && i < n; i++) {
        if (strcmp(fl[i].name, "k_b") == 0)
            seen += fl[i].kernel_class == 2;
        if (strcmp(fl[i].name, "k_c") == 0)
            seen += fl[i].kernel_class == 4 && fl[i].tensor_core == 1;
        if (strcmp(fl[i].name, "k_a") == 0)
            seen += fl[i].kernel_class == 0;
    }
    tap_is_int(seen, 3, "fp_reader_kernel_flags: the highest class per name (k_b mma, k_c tcgen05, k_a unknown)");
    free(fl);
    char *csv = tu_path(dir, "kclass.csv");
    FILE *f = fopen(csv, "w");
    if (rc == FP_OK && f)
        rc = fp_reader_export_csv(r, run, "kernels", f);
    if (f)
        fclose(f);
    size_t len = 0;
    char *text = tu_slurp(csv, &len);
    tap_ok(rc == FP_OK && text && strstr(text, "kernelClass") && strstr(text, ",wgmma") && strstr(text, ",tcgen05"),
           "the kernels export names the class column and its values");
    free(text);
    free(csv);
    fp_reader_close(r);
    free(p);
}

/* Evaluations keep their image count (the accuracy's sample size; 0 or less: NULL, read as -1, as in
 * rows migrated from version 3: test_store_open checks the migration, test_gate a file without the
 * column), and events their whole text (the reader cut them at 255 characters). */
static void test_eval_images_and_long_events(void)
{
    char *p = tu_path(dir, "images.db");
    fp_store_t *s;
    int64_t session = 0, run = 0;
    fp_session_info_t si = {0};
    fp_run_info_t ri = {.model = "m", .policy = "fp16", .batch_size = -1, .image_size = -1};
    int rc = fp_store_open(&s, p);
    if (rc == FP_OK)
        rc = fp_store_begin_session(s, &si, &session);
    ri.session = session;
    if (rc == FP_OK)
        rc = fp_store_begin_run(s, &ri, &run);
    char long_text[3001];
    for (int i = 0; i < 3000; i++)
        long_text[i] = (char)('a' + i % 26);
    long_text[3000] = '\0';
    long_text[2999] = 'Z';   /* the last character must survive */
    fp_eval_rec_t e1 = {.run = run, .step = 10, .split = "val", .loss = 1.0, .top1 = 0.5, .top5 = 0.9,
                        .images = 10000};
    fp_eval_rec_t e2 = {.run = run, .step = 20, .split = "val", .loss = 1.0, .top1 = 0.5, .top5 = 0.9};
    if (rc == FP_OK)
        rc = fp_store_eval(s, &e1);
    if (rc == FP_OK)
        rc = fp_store_eval(s, &e2);
    if (rc == FP_OK)
        rc = fp_store_event(s, run, 1, 1, -1, FP_EVENT_WARNING, long_text);
    if (rc == FP_OK)
        rc = fp_store_event(s, run, 2, 2, -1, FP_EVENT_INFO, NULL);
    if (rc == FP_OK)
        rc = fp_store_event(s, run, 3, 3, -1, FP_EVENT_INFO, "short");
    /* the trainer's recorder formats into a buffer first (it cut at 511 characters) */
    if (rc == FP_OK)
        fp_record_event(s, run, 4, -1, FP_EVENT_WARNING, "%s|%s", long_text, "end");
    if (rc == FP_OK)
        rc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    tap_is_int(rc, FP_OK, "evaluations with image counts and long events written (%s)", fp_error_message());
    tap_is_int(tu_sql_int(p, "SELECT images FROM evaluations WHERE step = 10"), 10000, "images stored");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM evaluations WHERE step = 20 AND images IS NULL"), 1,
               "no image count (0) is NULL");
    tap_is_int(tu_sql_int(p, "SELECT length(text) FROM events WHERE step = 1"), 3000,
               "the database holds all 3000 characters");
    tap_is_int(tu_sql_int(p, "SELECT length(text) FROM events WHERE step = 4 AND text LIKE '%Z|end'"), 3004,
               "fp_record_event (trainer/run/record.c) stores its whole 3004-character line");
    fp_reader_t *r;
    rc = fp_reader_open(&r, p);
    fp_eval_images_t *im = NULL;
    size_t n = 0;
    if (rc == FP_OK)
        rc = fp_reader_eval_images(r, run, &im, &n);
    tap_ok(rc == FP_OK && n == 2 && im[0].step == 10 && im[0].images == 10000 && im[1].step == 20 &&
               im[1].images == -1, "fp_reader_eval_images: 10000, then -1 for NULL");
    free(im);
    fp_event_row_t *ev = NULL;
    if (rc == FP_OK)
        rc = fp_reader_events(r, run, -1, 0, &ev, &n);
    tap_ok(rc == FP_OK && n == 4 && strcmp(ev[0].text, long_text) == 0 && strcmp(ev[1].text, "") == 0 &&
               strcmp(ev[2].text, "short") == 0 && ev[2].kind == FP_EVENT_INFO,
           "fp_reader_events: the whole 3000-character text, NULL as \"\", a short one after (%zu chars)",
           rc == FP_OK && n > 0 ? strlen(ev[0].text) : (size_t)0);
    free(ev);
    if (rc == FP_OK)
        rc = fp_reader_events(r, run, FP_EVENT_INFO, 1, &ev, &n);
    tap_ok(rc == FP_OK && n == 1 && strcmp(ev[0].text, "") == 0, "fp_reader_events: kind and limit still apply");
    free(ev);
    fp_reader_close(r);

    free(p);
}

/* fp_record_dist_step / fp_record_allreduce_error (trainer/run/record.c) through the writer: the arm says the wire
 * format and the layers; an arm alone takes --allreduce too, so no MPI is needed to write the rows. */
static void test_record_dist(void)
{
    char *p = tu_path(dir, "dist.db");
    fp_store_t *s;
    int64_t session = 0, run = 0;
    fp_session_info_t si = {0};
    fp_run_info_t ri = {.model = "tinynet", .policy = "fp16", .batch_size = 4, .image_size = 32};
    fp_arm *arm16 = NULL, *arm32 = NULL;
    fp_arm_config c;
    fp_arm_config_default(&c);
    c.model = "tinynet";
    c.policy = "fp16";
    c.num_classes = 3;
    c.image_size = 32;
    c.base_width = 8;
    c.allreduce = "bf16";
    int rc = fp_arm_create(&arm16, &c);
    c.allreduce = "fp32";
    rc = rc ? rc : fp_arm_create(&arm32, &c);
    rc = rc ? rc : fp_store_open(&s, p);
    if (rc == FP_OK)
        rc = fp_store_begin_session(s, &si, &session);
    ri.session = session;
    if (rc == FP_OK)
        rc = fp_store_begin_run(s, &ri, &run);
    tap_is_int(rc, FP_OK, "arms (bf16 and fp32 all-reduce) and a run (%s)", rc ? fp_error_message() : "ok");
    if (rc) {
        fp_arm_free(arm16);
        fp_arm_free(arm32);
        tap_skip(7, "no store or arm");
        free(p);
        return;
    }
    const fp_record_rank_step ranks[3] = {{1000, 300, 200, 4096, 0}, {1500, 350, 250, 4096, 0}, {900, -1, -1, -1, 0}};
    rc = fp_record_dist_step(s, run, 7, ranks, 3);
    rc = rc ? rc : fp_record_dist_step(NULL, run, 8, ranks, 3);
    int nl = fp_model_layer_count(fp_arm_model(arm16)), with = 0;
    double *per_layer = calloc((size_t)nl, sizeof *per_layer);
    for (int l = 0; per_layer && l < nl; l++) {
        size_t off, cnt = 0;
        per_layer[l] = fp_model_layer_params(fp_arm_model(arm16), l, &off, &cnt) == FP_OK && cnt > 0 ? 1e-3 * (l + 1)
                                                                                                : NAN;
        with += !isnan(per_layer[l]);
    }
    fp_arm_step_result r = {.iteration = 4, .reduce_rel_l2 = 2e-3, .reduce_overflow = 2, .reduce_underflow = 5};
    rc = rc ? rc : fp_record_allreduce_error(s, run, arm16, &r, per_layer);
    r.iteration = 5;
    rc = rc ? rc : fp_record_allreduce_error(s, run, arm32, &r, per_layer);   /* fp32: nothing to compare */
    r.iteration = 6;
    r.reduce_rel_l2 = NAN;
    rc = rc ? rc : fp_record_allreduce_error(s, run, arm16, &r, per_layer);   /* not a checked step */
    int crc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    tap_is_int(rc ? rc : crc, FP_OK, "recorded (%s)", rc || crc ? fp_error_message() : "ok");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM dist_steps WHERE step = 7"), 3, "one dist_steps row per rank");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM dist_steps WHERE step = 7 AND rank = 1 AND wall_ns = 1500 AND"
                             " comm_ns = 350 AND exposed_ns = 250 AND bytes = 4096 AND skipped = 0"), 1,
               "rank 1's figures stored as given");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM dist_steps WHERE rank = 2 AND wall_ns = 900 AND comm_ns IS NULL"
                             " AND exposed_ns IS NULL AND bytes IS NULL"), 1, "rank 2's unmeasured figures are NULL");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM allreduce_error"), 1 + with,
               "the checked step only: the whole gradient plus the %d of %d layers with parameters", with, nl);
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM allreduce_error WHERE step = 5 AND layer = -1 AND wire = 'bf16'"
                             " AND rel_l2 = 2e-3 AND overflow = 2 AND underflow = 5"), 1,
               "layer -1: the overall rel. L2 and the counts, at step iteration + 1, the arm's wire format");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM allreduce_error WHERE layer >= 0 AND abs(rel_l2 - 1e-3 * (layer"
                             " + 1)) < 1e-12 AND overflow IS NULL AND underflow IS NULL"), with,
               "each layer's rel. L2 in its row, no counts");
    free(per_layer);
    fp_arm_free(arm16);
    fp_arm_free(arm32);
    free(p);
}

int main(void)
{
    dir = tu_mkdir();
    if (!dir)
        tap_skip_all("cannot create a scratch directory");
    test_fixture_reads_back();
    test_threads_and_freshness();
    test_end_run();
    test_kernel_class();
    test_eval_images_and_long_events();
    test_record_dist();
    tu_rmdir(dir);
    return tap_done();
}
