/* bench_store.c — run-store figures (printed, never pass/fail): (a) sustained kernel-row inserts from
 * one producer thread, end to end (first record queued -> everything committed); (b) on a file of
 * 1 run x 100,000 steps, 1,000,000 kernel rows and per-layer times (50 layers x 3 phases) for the
 * last 2,000 steps: the dashboard's reader queries, median of many repetitions. Files in $TMPDIR. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/common.h"
#include "clock.h"
#include "db_remove.h"
#include "error.h"
#include "store.h"
#include "store_reader.h"

#define STEPS 100000
#define KERNELS_PER_STEP 10
#define LAYERS 50
#define TIMED_STEPS 2000

static int die(const char *what)
{
    fprintf(stderr, "bench_store: %s: %s\n", what, fp_error_message());
    return 1;
}

static int begin(fp_store_t *s, int64_t *run)
{
    int64_t session;
    fp_session_info_t si = {.name = "bench"};
    if (fp_store_begin_session(s, &si, &session) != FP_OK)
        return FP_EIO;
    fp_run_info_t ri = {.session = session, .model = "resnet50", .policy = "fp16", .batch_size = 64,
                        .image_size = 224};
    return fp_store_begin_run(s, &ri, run);
}

/* Interns the 8 kernel names fill_kernels cycles through; returns the first one's id. */
static int64_t intern_names(fp_store_t *s)
{
    int64_t name = 0;
    for (int i = 0; i < 8; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "kernel_%d_sgemm_128x64_nn", i);
        int64_t id = fp_store_intern(s, nm);
        if (i == 0)
            name = id;
    }
    return name;
}

static void fill_kernels(fp_kernel_rec_t *k, size_t n, int64_t run, int64_t first, int64_t name)
{
    for (size_t i = 0; i < n; i++) {
        int64_t id = first + (int64_t)i;
        memset(&k[i], 0, sizeof k[i]);
        k[i].run = run;
        k[i].step = id / KERNELS_PER_STEP;
        k[i].layer = (int32_t)(id % LAYERS);
        k[i].phase = (int32_t)(id % 3);
        k[i].start = id * 1000;
        k[i].end = id * 1000 + 200 + id % 97;
        k[i].short_name = name + id % 8;
        k[i].demangled_name = name + id % 8;
        k[i].stream_id = 7;
        k[i].correlation_id = (uint32_t)id;
        k[i].grid[0] = 128;
        k[i].block[0] = 256;
        k[i].tensor_core = 1;
    }
}

static double median_ms(int reps, int (*fn)(fp_reader_t *, int64_t), fp_reader_t *r, int64_t run)
{
    double *t = malloc((size_t)reps * sizeof *t);
    for (int i = 0; i < reps; i++) {
        double t0 = fp_clock_mono_s();
        if (fn(r, run) != FP_OK) {
            die("query");
            free(t);
            return NAN;
        }
        t[i] = (fp_clock_mono_s() - t0) * 1e3;
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    double m = t[reps / 2];
    free(t);
    return m;
}

static int q_steps_since(fp_reader_t *r, int64_t run)
{
    fp_step_row_t *rows;
    size_t n;
    int rc = fp_reader_steps_since(r, run, STEPS - 101, 0, &rows, &n);
    free(rows);
    return rc == FP_OK && n == 100 ? FP_OK : FP_EINTERNAL;
}

static int q_layer_summary(fp_reader_t *r, int64_t run)
{
    fp_layer_sum_t *rows;
    size_t n;
    int rc = fp_reader_layer_summary(r, run, STEPS - 100, STEPS - 1, &rows, &n);
    free(rows);
    return rc == FP_OK && n == LAYERS * 3 ? FP_OK : FP_EINTERNAL;
}

static int q_kernel_summary(fp_reader_t *r, int64_t run)
{
    fp_kernel_sum_t *rows;
    size_t n;
    int rc = fp_reader_kernel_summary(r, run, STEPS - 100, STEPS - 1, &rows, &n);
    free(rows);
    return rc == FP_OK && n == 8 ? FP_OK : FP_EINTERNAL;
}

static int q_runs(fp_reader_t *r, int64_t run)
{
    (void)run;
    fp_run_row_t *rows;
    size_t n;
    int rc = fp_reader_runs(r, 0, &rows, &n);
    free(rows);
    return rc;
}

int main(void)
{
    char path[4096];
    bench_db_path(path, sizeof path, "bench_store");
    fp_db_remove(path);

    /* (a) sustained inserts, end to end */
    enum { N = 2000000, CHUNK = 256 };
    fp_store_t *s;
    int64_t run;
    if (fp_store_open(&s, path) != FP_OK || begin(s, &run) != FP_OK)
        return die("open");
    int64_t name = intern_names(s);
    fp_kernel_rec_t k[CHUNK];
    double t0 = fp_clock_mono_s(), produce = 0;
    for (int64_t i = 0; i < N; i += CHUNK) {
        fill_kernels(k, CHUNK, run, i, name);
        if (fp_store_kernels(s, k, CHUNK) != FP_OK)
            return die("kernels");
    }
    produce = fp_clock_mono_s() - t0;
    if (fp_store_flush(s) != FP_OK)
        return die("flush");
    double total = fp_clock_mono_s() - t0;
    fp_store_stats_t st;
    fp_store_get_stats(s, &st);
    fp_store_close(s, FP_RUN_FINISHED, NULL);
    fp_db_remove(path);
    printf("inserts: %d kernel rows from one producer thread: queued in %.3f s (%.0f ns/record on the producer),"
           " all committed after %.3f s; %llu commits, queue grew to %zu records, %llu dropped\n",
           N, produce, produce / N * 1e9, total, (unsigned long long)st.commits, st.queue_capacity,
           (unsigned long long)st.dropped);
    printf("bench: store_kernel_insert=%.0f unit=rows/s\n", N / total);

    /* (b) the big file */
    t0 = fp_clock_mono_s();
    if (fp_store_open(&s, path) != FP_OK || begin(s, &run) != FP_OK)
        return die("open");
    name = intern_names(s);
    fp_layer_time_t lt[LAYERS * 3];
    fp_kernel_rec_t kk[KERNELS_PER_STEP];
    for (int64_t step = 0; step < STEPS; step++) {
        fp_step_rec_t sr = {.run = run, .step = step, .loss = 7.0 / (1.0 + step * 1e-3), .loss_scale = 65536,
                            .lr = 0.1, .start = step * 1000000, .end = step * 1000000 + 900000, .wall_ns = 900000,
                            .samples_per_s = 1500, .mem_current = 1 << 30, .mem_peak = 3LL << 30, .energy_j = NAN,
                            .power_w = NAN};
        size_t nlt = 0;
        if (step >= STEPS - TIMED_STEPS)
            for (int l = 0; l < LAYERS * 3; l++, nlt++)
                lt[l] = (fp_layer_time_t){.layer = l / 3, .phase = l % 3, .time_ns = 10000 + l * 7 + step % 13,
                                          .kernels = 1 + l % 3};
        fill_kernels(kk, KERNELS_PER_STEP, run, step * KERNELS_PER_STEP, name);
        if (fp_store_kernels(s, kk, KERNELS_PER_STEP) != FP_OK || fp_store_step(s, &sr, lt, nlt) != FP_OK)
            return die("records");
    }
    if (fp_store_close(s, FP_RUN_FINISHED, NULL) != FP_OK)
        return die("close");
    printf("file: 1 run x %d steps, %d kernel rows, %d layer-time rows (%d layers x 3 phases, last %d steps):"
           " written in %.1f s\n", STEPS, STEPS * KERNELS_PER_STEP, TIMED_STEPS * LAYERS * 3, LAYERS, TIMED_STEPS,
           fp_clock_mono_s() - t0);
    fp_reader_t *r;
    if (fp_reader_open(&r, path) != FP_OK)
        return die("reader");
    double m_steps = median_ms(301, q_steps_since, r, run);
    double m_layers = median_ms(101, q_layer_summary, r, run);
    double m_kern = median_ms(101, q_kernel_summary, r, run);
    double m_runs = median_ms(51, q_runs, r, run);
    t0 = fp_clock_mono_s();
    fp_kernel_sum_t *ks;
    size_t nk;
    int rc = fp_reader_kernel_summary(r, run, 0, INT64_MAX, &ks, &nk);
    double all_kern = (fp_clock_mono_s() - t0) * 1e3;
    free(ks);
    fp_reader_close(r);
    fp_db_remove(path);
    if (rc != FP_OK)
        return die("kernel summary");
    printf("queries (median): steps since k (last 100 steps) %.3f ms; per-layer summary over 100 steps"
           " (15,000 rows) %.3f ms; kernel summary over 100 steps %.3f ms; list runs %.3f ms;"
           " kernel summary over all 1,000,000 kernels %.0f ms (once)\n", m_steps, m_layers, m_kern, m_runs,
           all_kern);
    printf("bench: store_steps_since=%.3f unit=ms\n", m_steps);
    printf("bench: store_layer_summary=%.3f unit=ms\n", m_layers);
    printf("bench: store_kernel_summary=%.3f unit=ms\n", m_kern);
    return 0;
}
