/* bench_tui.c — dashboard frame time (printed, never pass/fail): on a file of 2 runs x 100,000 steps,
 * 1,000,000 kernel rows, per-layer times (50 layers x 3 phases) for the last 2,000 steps and
 * histograms every 1,000 steps, a frame is the model's incremental update plus a 200x50 render.
 * Live frames: the writer appends one step of each arm before each frame. Median; file in $TMPDIR.
 * Also the first frame after attach and the longest frame (attach, the frames that read the rest of the
 * history under the model's per-frame budget, idle and live). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/common.h"
#include "clock.h"
#include "db_remove.h"
#include "error.h"
#include "store.h"
#include "tui/tui_internal.h"

#define STEPS 100000
#define KPS 5          /* kernels per step per run: 2 runs -> 1,000,000 rows */
#define LAYERS 50
#define TIMED 2000

static double now_ms(void)
{
    return fp_clock_mono_s() * 1e3;
}

static int die(const char *what)
{
    fprintf(stderr, "bench_tui: %s: %s\n", what, fp_error_message());
    return 1;
}

static int step(fp_store_t *s, const int64_t runs[2], int64_t k, int64_t name)
{
    fp_layer_time_t lt[LAYERS * 3];
    fp_kernel_rec_t kr[KPS];
    for (int i = 0; i < 2; i++) {
        fp_step_rec_t sr = {.run = runs[i], .step = k, .loss = 7.0 / (1.0 + k * 1e-3), .loss_scale = i ? 65536 : NAN,
                            .lr = 0.1, .start = k * 3000000, .end = k * 3000000 + 900000, .wall_ns = i ? 500000 : 900000,
                            .samples_per_s = i ? 3000 : 1500, .mem_current = 1 << 30, .mem_peak = 3LL << 30,
                            .energy_j = NAN, .power_w = NAN, .skipped = i && k % 5000 == 0};
        size_t n = 0;
        if (k >= STEPS - TIMED)
            for (int l = 0; l < LAYERS * 3; l++, n++)
                lt[l] = (fp_layer_time_t){.layer = l / 3, .phase = l % 3, .time_ns = 10000 + l * 7 + k % 13, .kernels = 1};
        for (int j = 0; j < KPS; j++)
            kr[j] = (fp_kernel_rec_t){.run = runs[i], .step = k, .layer = j, .phase = 0, .start = k * 1000 + j,
                                      .end = k * 1000 + j + 50, .short_name = name, .demangled_name = name,
                                      .tensor_core = 1};
        if (fp_store_kernels(s, kr, KPS) != FP_OK || fp_store_step(s, &sr, lt, n) != FP_OK)
            return FP_EIO;
        if (k % 1000 == 0)
            for (int l = 0; l < LAYERS; l++)
                for (int r = 0; r < FP_ROLE_COUNT; r++) {
                    fp_hist_t h;
                    fp_hist_init(&h);
                    float x[4] = {1.0f, 1e-6f, 7e4f, 0.5f};
                    fp_hist_add(&h, x, 4);
                    if (fp_store_hist(s, runs[i], k, l, (fp_tensor_role)r, &h) != FP_OK)
                        return FP_EIO;
                }
    }
    return FP_OK;
}

int main(void)
{
    char path[4096];
    bench_db_path(path, sizeof path, "bench_tui");
    fp_db_remove(path);
    double t0 = now_ms();
    fp_store_t *s;
    int64_t session, runs[2];
    fp_session_info_t si = {.name = "bench", .config_json = "{\"steps\":200000}"};
    if (fp_store_open(&s, path) != FP_OK || fp_store_begin_session(s, &si, &session) != FP_OK)
        return die("open");
    for (int i = 0; i < 2; i++) {
        fp_run_info_t ri = {.session = session, .arm = i ? "fp16" : "fp32", .model = "resnet50",
                            .policy = i ? "fp16" : "fp32", .ref_run = i ? runs[0] : 0};
        if (fp_store_begin_run(s, &ri, &runs[i]) != FP_OK)
            return die("run");
        for (int l = 0; l < LAYERS; l++) {
            char nm[32];
            snprintf(nm, sizeof nm, "layer%d.%d.conv%d", l / 12 + 1, l / 3 % 4, l % 3 + 1);
            fp_layer_info_t li = {.run = runs[i], .index = l, .name = nm, .type = "conv2d"};
            if (fp_store_layer(s, &li) != FP_OK)
                return die("layer");
        }
    }
    int64_t name = fp_store_intern(s, "sgemm_128x64_nn");
    for (int64_t k = 0; k < STEPS; k++)
        if (step(s, runs, k, name) != FP_OK)
            return die("records");
    if (fp_store_flush(s) != FP_OK)
        return die("flush");
    printf("file: 2 runs x %d steps, %d kernel rows, %d layer-time rows, histograms every 1000 steps: %.1f s\n",
           STEPS, 2 * STEPS * KPS, 2 * TIMED * LAYERS * 3, (now_ms() - t0) / 1e3);

    fp_tui_model_t m;
    fp_grid_t g;
    fp_layout_t l;
    fp_tui_ui_t ui;
    fp_tui_ui_init(&ui);
    fp_grid_init(&g, 200, 50, 0);
    fp_tui_layout(&l, 200, 50);
    t0 = now_ms();
    if (fp_tui_model_open(&m, path, 0) != FP_OK || fp_tui_model_update(&m, ui.role) != FP_OK)
        return die("first frame");
    fp_tui_render(&g, &m, &ui, &l, FP_TUI_CHART_BRAILLE, 0);
    double first = now_ms() - t0, fmax = first, tload = first;
    int nload = 1;
    while (m.loading && nload < 100000) {   /* the frames that read the rest of the history */
        t0 = now_ms();
        if (fp_tui_model_update(&m, ui.role) != FP_OK)
            return die("loading frame");
        fp_tui_render(&g, &m, &ui, &l, FP_TUI_CHART_BRAILLE, 0);
        double t = now_ms() - t0;
        fmax = t > fmax ? t : fmax;
        tload += t;
        nload++;
    }
    enum { N = 101 };
    double idle[N], live[N];
    for (int i = 0; i < N; i++) {   /* nothing new: marks and status only */
        t0 = now_ms();
        if (fp_tui_model_update(&m, ui.role) != FP_OK)
            return die("frame");
        fp_tui_render(&g, &m, &ui, &l, FP_TUI_CHART_BRAILLE, 0);
        idle[i] = now_ms() - t0;
    }
    for (int i = 0; i < N; i++) {   /* one new step of each arm per frame */
        if (step(s, runs, STEPS + i, name) != FP_OK || fp_store_flush(s) != FP_OK)
            return die("append");
        t0 = now_ms();
        if (fp_tui_model_update(&m, ui.role) != FP_OK)
            return die("frame");
        fp_tui_render(&g, &m, &ui, &l, FP_TUI_CHART_BRAILLE, 0);
        live[i] = now_ms() - t0;
    }
    int ok = m.arm[0].nsteps == STEPS + N && m.arm[1].nsteps == STEPS + N;
    fp_grid_free(&g);
    fp_tui_model_close(&m);
    fp_store_close(s, FP_RUN_FINISHED, NULL);
    fp_db_remove(path);
    if (!ok)
        return fprintf(stderr, "bench_tui: the model missed steps\n"), 1;
    qsort(idle, N, sizeof idle[0], bench_cmp_double);
    qsort(live, N, sizeof live[0], bench_cmp_double);
    double all_max = fmax > live[N - 1] ? fmax : live[N - 1];
    all_max = all_max > idle[N - 1] ? all_max : idle[N - 1];
    printf("frames 200x50 (update + render), median of %d: idle %.3f ms, live (1 new step per arm) %.3f ms"
           " (max %.3f ms); first frame %.1f ms; the 200,000 steps read over %d frames (%.1f ms in all, max"
           " %.1f ms a frame)\n", N, idle[N / 2], live[N / 2], live[N - 1], first, nload, tload, fmax);
    printf("bench: tui_first_frame=%.1f unit=ms\n", first);
    printf("bench: tui_frame_max=%.1f unit=ms\n", all_max);
    printf("bench: tui_frame=%.3f unit=ms\n", live[N / 2]);
    return 0;
}
