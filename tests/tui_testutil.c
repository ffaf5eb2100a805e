/* tui_testutil.c — implementation of tui_testutil.h (the dashboard tests' fixture database).
 * Promise: deterministic content; every number the tests grep for is derived from the constants of
 * the header (wall times, the hot layer's counts, the skipped steps 40 and 90). */
#include "tui_testutil.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "db_remove.h"
#include "error.h"
#include "hist.h"

static const char *const names[TT_LAYERS] = {"conv1", "bn1", "layer1.0.conv1", "layer1.0.conv2", "layer2.0.conv1",
                                             "layer2.0.downsample.0", "layer3.2.conv2", "layer4.0.conv3",
                                             "avgpool", "fc"};
static const char *const types[TT_LAYERS] = {"conv2d", "batchnorm2d", "conv2d", "conv2d", "conv2d", "conv2d",
                                             "conv2d", "conv2d", "avgpool2d", "linear"};

const char *tt_layer_name(int l)
{
    return l >= 0 && l < TT_LAYERS ? names[l] : "?";
}

static int begin_arms(fp_store_t *s, int64_t runs[2], int arms, int total_steps)
{
    int64_t session;
    char cfg[128];
    snprintf(cfg, sizeof cfg, "{\"model\":\"resnet50\",\"steps\":%d}", total_steps);
    fp_session_info_t si = {.name = "tui fixture", .config_json = cfg};
    int rc = fp_store_begin_session(s, &si, &session);
    static const char *const pol[2] = {"fp32", "fp16"};
    for (int i = 0; rc == FP_OK && i < arms; i++) {
        fp_run_info_t ri = {.session = session, .arm = pol[i], .model = "resnet50", .policy = pol[i],
                            .ref_run = i ? runs[0] : 0, .device = "cpu (test)", .batch_size = 32, .image_size = 64,
                            .dataset = "synthetic", .seed = 1, .optimizer = "sgd"};
        rc = fp_store_begin_run(s, &ri, &runs[i]);
    }
    for (int i = 0; rc == FP_OK && i < arms; i++)
        for (int l = 0; rc == FP_OK && l < TT_LAYERS; l++) {
            fp_layer_info_t li = {.run = runs[i], .index = l, .name = names[l], .type = types[l],
                                  .input_shape = "32x64x16x16", .output_shape = "32x64x16x16",
                                  .params = 1000 * (l + 1), .fwd_flops = 1000000LL * (l + 1),
                                  .bwd_flops = 2000000LL * (l + 1)};
            rc = fp_store_layer(s, &li);
        }
    return rc;
}

int tt_begin(fp_store_t *s, int64_t runs[2], int total_steps)
{
    return begin_arms(s, runs, 2, total_steps);
}

static int record_hist(fp_store_t *s, int64_t run, int64_t k, int l, int arm)
{
    for (int role = 0; role < FP_ROLE_COUNT; role++) {
        fp_hist_t h;
        fp_hist_init(&h);
        float x[32];
        size_t n = 0;
        for (int i = 0; i < 8; i++)
            x[n++] = (float)(0.5 + 0.1 * i) * (role == FP_ROLE_WEIGHT_GRAD ? 1e-3f : 1.0f);
        if (l == TT_HOT_LAYER && role == FP_ROLE_ACTIVATION && arm == 1) {
            for (int i = 0; i < 3; i++)
                x[n++] = 70000.0f;   /* fp16 overflow */
            for (int i = 0; i < 2; i++)
                x[n++] = 1e-9f;      /* fp16 underflow */
            for (int i = 0; i < 4; i++)
                x[n++] = 1e-6f;      /* fp16 subnormal */
        }
        if (l == TT_LAYERS - 1 && role == FP_ROLE_WEIGHT_GRAD)
            for (int i = 0; i < 5; i++)
                x[n++] = 1e-9f;
        fp_hist_add(&h, x, n);
        int rc = fp_store_hist(s, run, k, l, (fp_tensor_role)role, &h);
        if (rc != FP_OK)
            return rc;
    }
    return FP_OK;
}

static int record_step_arms(fp_store_t *s, const int64_t runs[2], int arms, int64_t k)
{
    int rc = FP_OK;
    for (int i = 0; rc == FP_OK && i < arms; i++) {
        int skipped = i == 1 && (k == 40 || k == 90);
        double scale = i == 1 ? (k < 40 ? 65536.0 : k < 90 ? 32768.0 : 16384.0) : NAN;
        int64_t wall = i ? TT_WALL_FP16 : TT_WALL_FP32;
        fp_step_rec_t st = {.run = runs[i], .step = k, .loss = 7.0 * exp(-(double)k / 60.0) + 0.5 + 0.01 * i,
                            .loss_scale = scale, .lr = 0.1, .skipped = skipped,
                            .start = 1700000000000000000LL + k * 3000000LL, .wall_ns = wall,
                            .end = 1700000000000000000LL + k * 3000000LL + wall,
                            .samples_per_s = 32.0 / ((double)wall / 1e9), .mem_current = (i ? 60 : 100) << 20,
                            .mem_peak = (i ? 120 : 200) << 20, .energy_j = NAN, .power_w = NAN};
        fp_layer_time_t lt[TT_LAYERS * 3];
        for (int l = 0; l < TT_LAYERS; l++)
            for (int p = 0; p < 3; p++) {
                int64_t base = 10000 * (l + 1) * (p ? 2 : 1);
                if (i == 1)
                    base = l == 1 ? base * 2 : base / 2;   /* bn1 is slower in fp16 */
                lt[l * 3 + p] = (fp_layer_time_t){.layer = l, .phase = p, .time_ns = base, .kernels = 1};
            }
        rc = fp_store_step(s, &st, lt, TT_LAYERS * 3);
        if (rc == FP_OK && k % 50 == 0)
            for (int l = 0; rc == FP_OK && l < TT_LAYERS; l++) {
                rc = record_hist(s, runs[i], k, l, i);
                if (rc == FP_OK && i == 1) {
                    fp_precision_rec_t pr = {.run = runs[1], .ref_run = runs[0], .step = k, .layer = l,
                                             .role = FP_ROLE_ACTIVATION,
                                             .rel_l2 = l == TT_HOT_LAYER ? 5e-2 : 1e-3 * (l + 1),
                                             .max_abs = 0.01, .cosine = 0.999};
                    rc = fp_store_precision(s, &pr);
                }
            }
        if (rc == FP_OK && skipped) {
            char txt[128];
            snprintf(txt, sizeof txt, "first non-finite gradient in %s", names[TT_HOT_LAYER]);
            rc = fp_store_event(s, runs[i], st.end, k, TT_HOT_LAYER, FP_EVENT_SKIPPED_STEP, txt);
            snprintf(txt, sizeof txt, "loss scale %.0f -> %.0f", scale * 2, scale);
            if (rc == FP_OK)
                rc = fp_store_event(s, runs[i], st.end + 1, k, -1, FP_EVENT_LOSS_SCALE, txt);
        }
    }
    return rc;
}

int tt_record_step(fp_store_t *s, const int64_t runs[2], int64_t k)
{
    return record_step_arms(s, runs, 2, k);
}

int tt_write_fixture(const char *path, const tt_opts_t *o)
{
    tt_opts_t d = {.arms = 2, .steps = TT_STEPS, .status = FP_RUN_FINISHED};
    if (!o)
        o = &d;
    int arms = o->arms == 1 ? 1 : 2, steps = o->steps > 0 ? o->steps : TT_STEPS;
    fp_db_remove(path);
    fp_store_t *s;
    int rc = fp_store_open(&s, path);
    if (rc != FP_OK)
        return rc;
    int64_t runs[2] = {0, 0};
    rc = begin_arms(s, runs, arms, TT_STEPS);
    for (int64_t k = 1; rc == FP_OK && k <= steps; k++)   /* step numbers are 1-based, as the trainer's */
        rc = record_step_arms(s, runs, arms, k);
    for (int i = 0; rc == FP_OK && i < arms; i++) {
        fp_eval_rec_t ev = {.run = runs[i], .step = steps, .split = "val", .loss = 1.1,
                            .top1 = i ? 0.709 : 0.712, .top5 = 0.9};
        rc = fp_store_eval(s, &ev);
    }
    if (rc == FP_OK)
        rc = fp_store_event(s, runs[0], 1700000000000000000LL + 5, 0, -1, FP_EVENT_WARNING,
                            "RAPL energy counter not readable: energy n/a");
    if (rc == FP_OK && o->status == FP_RUN_FAILED && arms == 2)
        rc = fp_store_end_run(s, runs[1], FP_RUN_FAILED, o->failure ? o->failure : "loss is NaN");
    int rc2 = fp_store_close(s, o->status == FP_RUN_FAILED || o->status == FP_RUN_RUNNING ? FP_RUN_FINISHED : o->status,
                              NULL);
    return rc != FP_OK ? rc : rc2;
}
