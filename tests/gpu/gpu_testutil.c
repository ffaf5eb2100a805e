/* gpu_testutil.c — the pieces several GPU test programs share (gpu_testutil.h): arm and comparison
 * configurations, test batches, the one-ulp loss comparison, device buffers, the host's FMA choice, the formats'
 * thresholds, the two backends side by side. Nothing here without CUDA (the programs skip there). Not a test
 * program itself: tests/gpu/check runs every test_*.c, this file is linked into them. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/backend_cuda.h"

void gtu_arm_config(fp_arm_config *ac, const char *model, int classes, int size, int width, uint64_t seed,
                    const char *policy, size_t arena_bytes)
{
    fp_arm_config_default(ac);
    ac->model = model;
    ac->num_classes = classes;
    ac->image_size = size;
    ac->base_width = width;
    ac->seed = seed;
    ac->policy = policy;
    ac->backend = fp_backend_cuda();
    ac->arena_bytes = arena_bytes;
}

void gtu_compare_config(fp_compare_config *cfg, const char *db, const char *data, int batch, int steps,
                        int eval_every, int turn)
{
    fp_compare_config_default(cfg);
    cfg->base.arm.model = "tinynet";
    cfg->base.arm.image_size = 32;
    cfg->base.arm.seed = 5;
    cfg->base.arm.backend = fp_backend_cuda();
    fp_lr_schedule_default(&cfg->base.arm.lr, FP_LR_CONSTANT, 0.01);
    cfg->base.data = data;
    cfg->base.batch = batch;
    cfg->base.steps = steps;
    cfg->base.loader_threads = 1;
    cfg->base.eval_batches = 1;
    cfg->base.eval_every = eval_every;
    cfg->base.db = db;
    cfg->precision = "fp32,fp16";
    cfg->turn = turn;
}

float *gtu_images(size_t count, uint32_t seed)
{
    float *x = malloc((count ? count : 1) * sizeof *x);
    uint32_t rng = seed;
    for (size_t i = 0; x && i < count; i++)
        x[i] = tu_uniform32_pm1(&rng);
    return x;
}

int *gtu_labels(int count, int classes)
{
    int *lab = malloc((size_t)(count > 0 ? count : 1) * sizeof *lab);
    for (int i = 0; lab && i < count; i++)
        lab[i] = (i * 7 + 3) % classes;
    return lab;
}

fp_batch gtu_batch(const float *x, const int *lab, int n, int size, int s)
{
    fp_batch b = {0};
    b.n = n;
    b.size = size;
    b.images = (float *)x + (size_t)s * (size_t)n * (size_t)size * (size_t)size * 3;
    b.labels = (int32_t *)lab + (size_t)s * (size_t)n;
    return b;
}

int gtu_same_loss(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b || fabs((double)a - b) <= 0x1p-23 * fabs((double)b);
}

void *gtu_dev_copy(const void *host, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    if (host && cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

int gtu_cpu_uses_fma(void)
{
    const char *env = getenv("FP_OPTIM_FMA");
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(__clang__)
    return !(env && strcmp(env, "0") == 0) && __builtin_cpu_supports("fma");
#else
    (void)env;
    return 0;
#endif
}

size_t gtu_format_thresholds(float base[GTU_THRESHOLDS])
{
    size_t nb = 0;
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        const fp_format_info_t *fi = fp_format_info((fp_format)f);
        base[nb++] = fi->min_subnormal / 2;
        base[nb++] = fi->min_normal;
        base[nb++] = fi->max_finite;
        base[nb++] = fi->overflow_at;
    }
    base[nb++] = 0x1p-149f;
    base[nb++] = 0x1p-126f;
    base[nb++] = 1.0f;
    base[nb++] = 3.4028235e38f;
    return nb;
}

int gtu_backends_or_fail(const fp_backend_ops **C, fp_backend **cb, const fp_backend_ops **G, fp_backend **gb,
                         size_t arena, const char *name)
{
    *C = fp_backend_cpu();
    *G = fp_backend_cuda();
    if ((*C)->create(cb) || fp_backend_cuda_create_sized(gb, arena, name)) {
        tap_plan(1);
        tap_ok(0, "backends created: %s", fp_error_message());
        return -1;
    }
    return 0;
}
#endif
