/* gpu_testutil.h — what several GPU test programs (tests/gpu/test_*.c) share: a device arm's configuration, a
 * short CUDA comparison's configuration, the s-th batch of a test's images and labels (made here), the loss of
 * two runs compared to one ulp, device buffers, the host's FMA choice (optim.c's), every number format's class
 * thresholds, and the CPU and CUDA backends created side by side. CUDA builds only (require_gpu.h skips the
 * programs otherwise); linked into the tests/gpu programs that use it (the .mk fragments' _SOURCES). */
#ifndef FP_TESTS_GPU_TESTUTIL_H
#define FP_TESTS_GPU_TESTUTIL_H

#ifdef HAVE_CUDA
#include <stddef.h>
#include <stdint.h>
#include "formats.h"
#include "trainer/backend.h"
#include "trainer/data/data.h"
#include "trainer/run/arm.h"
#include "trainer/run/compare.h"

/* fp_arm_config_default, then model, classes, image size, base width (0: torchvision's 64), seed and policy, on
 * the CUDA backend with an arena of arena_bytes (0: the backend's default); the rest (optimizer, lr, scaler) is
 * the caller's. */
void gtu_arm_config(fp_arm_config *ac, const char *model, int classes, int size, int width, uint64_t seed,
                    const char *policy, size_t arena_bytes);

/* fp_compare_config_default, then a short CUDA comparison: tinynet fp32 vs fp16 at 32x32, seed 5, constant lr
 * 0.01, one loader thread, one evaluation batch, recorded into db; data, batch, steps, eval_every and turn as
 * given (the probes' cadences are the caller's). */
void gtu_compare_config(fp_compare_config *cfg, const char *db, const char *data, int batch, int steps,
                        int eval_every, int turn);

/* count floats from tu_uniform32_pm1 on a stream started at seed, malloc'd (room for one at least); NULL when
 * out of memory. */
float *gtu_images(size_t count, uint32_t seed);
/* count labels (i * 7 + 3) % classes, malloc'd (room for one at least); NULL when out of memory. */
int *gtu_labels(int count, int classes);
/* Batch s of n images of size x size x 3 (NHWC) in x and n labels in lab, taken in place (no copy). */
fp_batch gtu_batch(const float *x, const int *lab, int n, int size, int s);

/* The loss of two runs: equal, both NaN, or within one float ulp (a device sums the batch's losses in double
 * with atomicAdd, in an order that may change from run to run: the float quotient may round either way). */
int gtu_same_loss(float a, float b);

/* bytes (1 at least) of device memory by cudaMalloc, host's bytes copied in when host is not NULL; NULL on any
 * failure (cudaFree it). */
void *gtu_dev_copy(const void *host, size_t bytes);

/* optim.c's want_fma(): its fused path exists only where HAVE_FMA_PATH is set (GCC on x86 with FMA), and
 * FP_OPTIM_FMA=0 turns it off. 1 when the host's optimizer arithmetic is fused. */
int gtu_cpu_uses_fma(void);

/* Writes into base every format's class thresholds (min_subnormal / 2, min_normal, max_finite, overflow_at),
 * then fp32's smallest subnormal and normal, 1 and FLT_MAX; returns how many (GTU_THRESHOLDS). */
#define GTU_THRESHOLDS (4 * FP_FMT_COUNT + 4)
size_t gtu_format_thresholds(float base[GTU_THRESHOLDS]);

/* The CPU backend's table in *C and an instance in *cb, the CUDA backend's in *G and an instance of arena bytes
 * named name in *gb: 0. Otherwise a TAP plan of one failed check, "backends created: <the error>", and -1 (the
 * caller returns tap_done()). */
int gtu_backends_or_fail(const fp_backend_ops **C, fp_backend **cb, const fp_backend_ops **G, fp_backend **gb,
                         size_t arena, const char *name);
#endif

#endif
