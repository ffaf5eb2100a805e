/* report_testutil.c — generated sessions for the report / gate tests and benchmark
 * (report_testutil.h). Promise: deterministic for a seed; everything goes through store.h, so the
 * files are exactly what a trainer would leave. */
#include "report_testutil.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "hist.h"
#include "store.h"

void rt_seed(rt_rng_t *r, uint64_t seed)
{
    r->s = seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    if (!r->s)
        r->s = 1;
}

double rt_uniform(rt_rng_t *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (double)((r->s * 0x2545F4914F6CDD1DULL) >> 11) * 0x1p-53;
}

double rt_normal(rt_rng_t *r)
{
    double u = rt_uniform(r), v = rt_uniform(r);
    return sqrt(-2 * log(u > 0 ? u : 1e-300)) * cos(2 * M_PI * v);
}

double rt_step_time(rt_rng_t *r, double median_ns, double sigma, double outlier_p)
{
    double t = median_ns * exp(sigma * rt_normal(r));
    if (rt_uniform(r) < outlier_p)
        t *= 1.5 + 1.5 * rt_uniform(r);
    return t;
}

/* ---------------------------------------------------------------- resnet50 names */

static const char *names50[160], *types50[160];
static char name_buf[160][32];
static int n50;

int rt_resnet50_layers(const char ***names, const char ***types)
{
    if (!n50) {
        int k = 0;
#define ADD(t, ...) (snprintf(name_buf[k], sizeof name_buf[k], __VA_ARGS__), names50[k] = name_buf[k], types50[k++] = t)
        ADD("conv2d", "conv1");
        ADD("batchnorm2d", "bn1");
        ADD("relu", "relu");
        ADD("maxpool2d", "maxpool");
        static const int blocks[4] = {3, 4, 6, 3};
        for (int s = 0; s < 4; s++)
            for (int b = 0; b < blocks[s]; b++) {
                for (int c = 1; c <= 3; c++) {
                    ADD("conv2d", "layer%d.%d.conv%d", s + 1, b, c);
                    ADD("batchnorm2d", "layer%d.%d.bn%d", s + 1, b, c);
                }
                if (b == 0) {
                    ADD("conv2d", "layer%d.0.downsample.0", s + 1);
                    ADD("batchnorm2d", "layer%d.0.downsample.1", s + 1);
                }
                ADD("relu", "layer%d.%d.relu", s + 1, b);
            }
        ADD("adaptiveavgpool2d", "avgpool");
        ADD("linear", "fc");
#undef ADD
        n50 = k;
    }
    *names = names50;
    *types = types50;
    return n50;
}

int rt_open(fp_store_t **st, const char *path, rt_rng_t *rng, uint64_t seed)
{
    rt_seed(rng, seed);
    return fp_store_open(st, path);
}

int rt_begin_arm(fp_store_t *st, fp_run_info_t *ri, int64_t *ref, int64_t *run)
{
    int fp32 = strcmp(ri->policy, "fp32") == 0;
    ri->ref_run = fp32 ? 0 : *ref;
    int rc = fp_store_begin_run(st, ri, run);
    if (fp32)
        *ref = *run;
    return rc;
}

/* ---------------------------------------------------------------- the realistic session */

void rt_default_spec(rt_session_spec_t *s, const char *path)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    s->model = "resnet50";
    s->steps = 300;
    s->layer_every = 1;
    s->layers = 1000;
    s->hist_every = 100;
    s->hist_layers = 1000;
    s->kernel_every = 50;
    s->median32_ns = 400e6;
    s->median16_ns = 220e6;
    s->sigma = 0.03;
    s->outlier_p = 0.01;
    s->hostile = 1;
    s->seed = 1;
}

static int hist_of(fp_store_t *st, rt_rng_t *rng, int64_t run, int64_t step, int layer, int role, int fp16)
{
    enum { N = 512 };
    float x[N];
    /* log2 scale by role: activations ~2^0, gradients ~2^-12 (unscaled) .. deeper layers smaller */
    static const double centre[FP_ROLE_COUNT] = {0, -18, -5, -16, -24};
    double c = centre[role] - layer * 0.05;
    for (int i = 0; i < N; i++) {
        double e = c + 3.0 * rt_normal(rng);
        x[i] = (float)((rt_uniform(rng) < 0.5 ? -1 : 1) * exp2(e));
    }
    if (role == FP_ROLE_ACTIVATION && layer % 7 == 3)
        x[0] = 70000.0f;   /* one overflow in fp16 */
    if (fp16 && role == FP_ROLE_ACTIVATION_GRAD && layer == 5 && step == 0)
        x[1] = INFINITY;
    if (role == FP_ROLE_ACTIVATION && layer % 3 == 2)
        for (int i = 0; i < N / 4; i++)
            x[i] = 0.0f;   /* relu zeros */
    fp_hist_t h;
    fp_hist_init(&h);
    fp_hist_add(&h, x, N);
    return fp_store_hist(st, run, step, layer, (fp_tensor_role)role, &h);
}

int rt_write_session(const rt_session_spec_t *sp, int64_t runs[2])
{
    const char **names, **types;
    int nl = rt_resnet50_layers(&names, &types);
    if (sp->layers < nl)
        nl = sp->layers;
    fp_store_t *st;
    rt_rng_t rng;
    int rc = rt_open(&st, sp->path, &rng, sp->seed);
    if (rc != FP_OK)
        return rc;
    int64_t session;
    fp_session_info_t si = {
        .name = sp->hostile ? "resnet50 <fp32 & fp16> \"side 'by' side\"" : "resnet50 fp32 vs fp16",
        .config_json = "{\"model\":\"resnet50\",\"precision\":[\"fp32\",\"fp16\"],\"note\":\"</pre><script>x()</script>\"}"};
    rc = fp_store_begin_session(st, &si, &session);
    static const char *const pol[2] = {"fp32", "fp16"};
    for (int i = 0; rc == FP_OK && i < 2; i++) {
        fp_run_info_t ri = {.session = session, .arm = pol[i], .model = sp->model, .policy = pol[i],
                            .ref_run = i ? runs[0] : 0, .device = "NVIDIA H100 80GB HBM3",
                            .driver_version = "550.54.15", .cuda_version = "12.4", .cudnn_version = "9.1.0",
                            .cupti_version = "2024.1", .blas = "cuBLAS 12.4", .batch_size = 256, .image_size = 224,
                            .dataset = sp->hostile ? "imagenet, val \"mini\" <b>" : "imagenet", .seed = 42,
                            .optimizer = "sgd", .optimizer_config = "{\"lr\":0.1,\"momentum\":0.9}",
                            .config_json = "{\"turn\":10}"};
        rc = fp_store_begin_run(st, &ri, &runs[i]);
    }
    for (int i = 0; rc == FP_OK && i < 2; i++)
        for (int l = 0; rc == FP_OK && l < nl; l++) {
            fp_layer_info_t li = {.run = runs[i], .index = l, .name = names[l], .type = types[l],
                                  .input_shape = "256x256x56x56", .output_shape = "256x256x56x56",
                                  .params = strcmp(types[l], "conv2d") == 0 ? 147456 : 512,
                                  .fwd_flops = 1850000000LL, .bwd_flops = 3700000000LL};
            rc = fp_store_layer(st, &li);
        }
    int64_t kn[4];
    kn[0] = fp_store_intern(st, "implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>");
    kn[1] = fp_store_intern(st, "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_nhwckrsc_nhwc_tilesize128x128x32");
    kn[2] = fp_store_intern(st, "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(...)");
    kn[3] = fp_store_intern(st, sp->hostile ? "evil<T>(x) & \"q\" 'a', </td></table><script>alert(1)</script>"
                                            : "elementwise_kernel<128, 4>");
    for (int k = 0; k < 4 && rc == FP_OK; k++)
        if (kn[k] <= 0)
            rc = FP_EINTERNAL;
    fp_layer_time_t *lt = malloc(((size_t)nl * 3 + 1) * sizeof *lt);
    fp_kernel_rec_t *kr = malloc(((size_t)nl * 2 + 1) * sizeof *kr);
    if (!lt || !kr)
        rc = FP_ENOMEM;
    double scale[2] = {65536, 65536};
    int64_t t0 = 1700000000LL * 1000000000LL, now[2] = {t0, t0};
    for (size_t k = 0; rc == FP_OK && k < sp->steps; k++)
        for (int i = 0; rc == FP_OK && i < 2; i++) {
            double med = i ? sp->median16_ns : sp->median32_ns;
            double t = rt_step_time(&rng, med, sp->sigma, sp->outlier_p);
            if (k < 3)
                t *= 3;   /* warm-up: cudnn autotuning */
            int skipped = i == 1 && (k < 3 || k % 97 == 50);
            double loss = 6.9 * exp(-(double)k / (double)(sp->steps / 3 + 1)) + 0.8 + 0.02 * rt_normal(&rng) +
                          (i ? 0.01 : 0);
            fp_step_rec_t s = {.run = runs[i], .step = (int64_t)k, .loss = skipped ? NAN : loss,
                               .loss_scale = i ? scale[1] : NAN, .lr = 0.1, .skipped = skipped, .start = now[i],
                               .end = now[i] + (int64_t)t, .wall_ns = (int64_t)t, .samples_per_s = 256 / (t / 1e9),
                               .mem_current = i ? 11LL << 30 : 19LL << 30, .mem_peak = i ? 12LL << 30 : 20LL << 30,
                               .energy_j = (k % 2) ? NAN : (i ? 66.0 : 120.0) * (t / med),
                               .power_w = (k % 2) ? NAN : (i ? 300.0 : 300.0)};
            now[i] += (int64_t)(t * 2.05);   /* lockstep turns: the other arm runs in between */
            size_t nt = 0;
            if (sp->layer_every && k % (size_t)sp->layer_every == 0)
                for (int l = 0; l < nl; l++)
                    for (int p = 0; p < 3; p++) {
                        double base = (strcmp(types[l], "conv2d") == 0 ? 2.0e6 : 0.3e6) * (p ? 1.0 : 0.5);
                        double sp16 = strcmp(types[l], "conv2d") == 0 ? 2.4 : 1.3;
                        lt[nt++] = (fp_layer_time_t){l, p, (int64_t)(base / (i ? sp16 : 1.0) * exp(0.05 * rt_normal(&rng))),
                                                     strcmp(types[l], "conv2d") == 0 ? 2 : 1};
                    }
            rc = fp_store_step(st, &s, lt, nt);
            if (rc == FP_OK && skipped) {
                char txt[200];
                snprintf(txt, sizeof txt, "step %zu skipped: first non-finite gradient in %s; headroom log2 -1.2", k,
                         names[5 % nl]);
                rc = fp_store_event(st, runs[i], now[i], (int64_t)k, 5 % nl, FP_EVENT_SKIPPED_STEP, txt);
                scale[1] /= 2;
                snprintf(txt, sizeof txt, "loss scale %g -> %g", scale[1] * 2, scale[1]);
                if (rc == FP_OK)
                    rc = fp_store_event(st, runs[i], now[i], (int64_t)k, -1, FP_EVENT_LOSS_SCALE, txt);
            }
            if (rc == FP_OK && sp->kernel_every && k % (size_t)sp->kernel_every == 0) {
                size_t nk = 0;
                int64_t at = 5000000000LL + (int64_t)k * 1000000000LL;
                for (int l = 0; l < nl; l++) {
                    int conv = strcmp(types[l], "conv2d") == 0;
                    for (int p = 0; p < 2; p++) {
                        int64_t d = (int64_t)((conv ? 900e3 : 150e3) / (i && conv ? 2.4 : 1) * exp(0.05 * rt_normal(&rng)));
                        int64_t name = conv ? kn[i ? 1 : 0] : (l == nl - 1 ? kn[3] : kn[2]);
                        kr[nk++] = (fp_kernel_rec_t){.run = runs[i], .step = (int64_t)k, .start = at, .end = at + d,
                                                     .short_name = name, .demangled_name = name, .layer = l,
                                                     .phase = p ? FP_PHASE_BACKWARD_DATA : FP_PHASE_FORWARD,
                                                     .device_id = 0, .stream_id = p ? 13 : 7,
                                                     .correlation_id = (uint32_t)(k * 1000 + (size_t)nk),
                                                     .grid = {128, 2, 1}, .block = {256, 1, 1},
                                                     .tensor_core = conv && i ? 1 : 0};
                        at += d + 2000;
                    }
                }
                rc = fp_store_kernels(st, kr, nk);
            }
            if (rc == FP_OK && sp->hist_every && k % (size_t)sp->hist_every == 0)
                for (int l = 0; rc == FP_OK && l < nl && l < sp->hist_layers; l++)
                    for (int role = 0; rc == FP_OK && role < FP_ROLE_COUNT; role++)
                        rc = hist_of(st, &rng, runs[i], (int64_t)k, l, role, i);
            if (rc == FP_OK && i == 1 && sp->hist_every && k % (size_t)sp->hist_every == 0)
                for (int l = 0; rc == FP_OK && l < nl; l++) {
                    fp_precision_rec_t pr = {.run = runs[1], .ref_run = runs[0], .step = (int64_t)k, .layer = l,
                                             .role = FP_ROLE_ACTIVATION, .rel_l2 = 4e-4 * (1 + l * 0.05),
                                             .max_abs = 2e-3 * (1 + l * 0.02), .cosine = 1 - 1e-7 * (1 + l)};
                    rc = fp_store_precision(st, &pr);
                }
            if (rc == FP_OK && (k + 1) % 100 == 0) {
                fp_eval_rec_t ev = {.run = runs[i], .step = (int64_t)k, .split = "val",
                                    .loss = 2.0 - 0.001 * (double)k, .top1 = 0.2 + 0.5 * (double)(k + 1) / (double)sp->steps - (i ? 0.003 : 0),
                                    .top5 = 0.5 + 0.4 * (double)(k + 1) / (double)sp->steps};
                rc = fp_store_eval(st, &ev);
            }
        }
    if (rc == FP_OK && sp->hostile)
        rc = fp_store_event(st, runs[1], 0, -1, -1, FP_EVENT_WARNING,
                            "odd <b>markup</b> & \"quotes\", 'apostrophes',\ncommas\r\nand \x01 control");
    free(lt);
    free(kr);
    int rc2 = fp_store_close(st, FP_RUN_FINISHED, NULL);
    return rc != FP_OK ? rc : rc2;
}

/* ---------------------------------------------------------------- lean gate sessions */

void rt_default_gate(rt_gate_spec_t *g, const char *path, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->path = path;
    g->model = "resnet50";
    g->policies = "fp32,fp16";
    g->steps = 300;
    g->median_ns = 100e6;
    g->speedup = 1.8;
    g->slowdown = 1.0;
    g->sigma = 0.05;
    g->outlier_p = 0.01;
    g->seed = seed;
}

int rt_write_gate(const rt_gate_spec_t *g)
{
    fp_store_t *st;
    rt_rng_t rng;
    int rc = rt_open(&st, g->path, &rng, g->seed);
    if (rc != FP_OK)
        return rc;
    int64_t session, runs[8], ref = 0;
    char pol[8][32];
    int np = 0;
    const char *p = g->policies;
    while (*p && np < 8) {
        size_t len = strcspn(p, ",");
        snprintf(pol[np++], sizeof pol[0], "%.*s", (int)len, p);
        p += len + (p[len] == ',');
    }
    fp_session_info_t si = {.name = "gate", .config_json = "{}"};
    rc = fp_store_begin_session(st, &si, &session);
    for (int i = 0; rc == FP_OK && i < np; i++) {
        fp_run_info_t ri = {.session = session, .arm = pol[i], .model = g->model, .policy = pol[i],
                            .device = "NVIDIA A100-SXM4-80GB", .batch_size = 128, .image_size = 224, .seed = 1,
                            .optimizer = "sgd"};
        rc = rt_begin_arm(st, &ri, &ref, &runs[i]);
    }
    for (size_t k = 0; rc == FP_OK && k < g->steps; k++)
        for (int i = 0; rc == FP_OK && i < np; i++) {
            int low = strcmp(pol[i], "fp32") != 0;
            double med = g->median_ns * g->slowdown / (low ? g->speedup : 1.0);
            double t = rt_step_time(&rng, med, g->sigma, g->outlier_p);
            int skipped = low && g->skip_every && k % (size_t)g->skip_every == 1;
            double loss = 2.0 * exp(-(double)k / 200.0) + 0.5 + (low ? g->loss_offset16 : 0) + 0.01 * rt_normal(&rng);
            fp_step_rec_t s = {.run = runs[i], .step = (int64_t)k, .loss = loss, .loss_scale = low ? 32768 : NAN,
                               .lr = 0.1, .skipped = skipped, .start = -1, .end = -1, .wall_ns = (int64_t)t,
                               .samples_per_s = NAN, .mem_current = -1, .mem_peak = -1, .energy_j = NAN,
                               .power_w = NAN};
            rc = fp_store_step(st, &s, NULL, 0);
            if (rc == FP_OK && k + 1 == g->steps) {
                fp_eval_rec_t ev = {.run = runs[i], .step = (int64_t)k, .split = "val", .loss = 1.0,
                                    .top1 = 0.70 - (low ? g->loss_offset16 : 0), .top5 = 0.9};
                rc = fp_store_eval(st, &ev);
            }
        }
    int rc2 = fp_store_close(st, FP_RUN_FINISHED, NULL);
    return rc != FP_OK ? rc : rc2;
}
