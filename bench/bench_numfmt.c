/* bench_numfmt.c — single-thread throughput of numfmt.h's array conversions on 64 MiB inputs.
 * Prints `bench: <op>_<isa>=X unit=GB/s` (GB/s of input bytes, 1e9, best of several runs) for the
 * scalar path and every vector path this CPU has, then `<op>_speedup` (best path / scalar). */
#include "numfmt.h"
#include "clock.h"
#include "error.h"
#include "testutil.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INPUT_BYTES ((size_t)64 << 20)
#define REPS 7
#define GOAL_GBS 4.0       /* issue 2: fp32 <-> fp16 at least 4 GB/s of input */

static uint64_t rng_state = 0xB7E151628AED2A6Bull;
static uint64_t rng(void) { return tu_xorshift64s(&rng_state); }

static void *xalloc(size_t bytes)
{
    void *p = aligned_alloc(64, bytes);
    if (!p) {
        fprintf(stderr, "bench_numfmt: cannot allocate %zu bytes\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes);   /* touch every page before timing */
    return p;
}

typedef struct {
    const char *name;
    size_t in_size;        /* bytes per input element */
    int (*run)(void *dst, const void *src, size_t n);
    void *src;
    void *dst;
} op_t;

static int run_f32_to_f16(void *d, const void *s, size_t n) { return fp_f32_to_f16_array(d, s, n); }
static int run_f16_to_f32(void *d, const void *s, size_t n) { return fp_f16_to_f32_array(d, s, n); }
static int run_f32_to_bf16(void *d, const void *s, size_t n) { return fp_f32_to_bf16_array(d, s, n); }
static int run_bf16_to_f32(void *d, const void *s, size_t n) { return fp_bf16_to_f32_array(d, s, n); }
static int run_f32_to_tf32(void *d, const void *s, size_t n) { return fp_f32_to_tf32_array(d, s, n); }

/* Best-of-REPS throughput in GB/s of input bytes. */
static double measure(const op_t *op)
{
    size_t n = INPUT_BYTES / op->in_size;
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = fp_clock_mono_s();
        if (op->run(op->dst, op->src, n) != FP_OK) {
            fprintf(stderr, "bench_numfmt: %s: %s\n", op->name, fp_error_message());
            exit(1);
        }
        double t = fp_clock_mono_s() - t0;
        if (t < best)
            best = t;
    }
    return (double)INPUT_BYTES / best / 1e9;
}

int main(void)
{
    size_t n32 = INPUT_BYTES / sizeof(float), n16 = INPUT_BYTES / sizeof(uint16_t);
    float *f32 = xalloc(INPUT_BYTES);
    uint16_t *f16 = xalloc(INPUT_BYTES), *bf16 = xalloc(INPUT_BYTES);
    void *dst = xalloc(2 * INPUT_BYTES);   /* large enough for fp16 -> fp32 of 64 MiB */

    /* random normal-range values: +-[2^-10, 2^10), any mantissa */
    for (size_t i = 0; i < n32; i++) {
        uint64_t r = rng();
        uint32_t u = ((uint32_t)r & 0x807FFFFFu) | ((uint32_t)(117 + (r >> 32) % 20) << 23);
        memcpy(&f32[i], &u, sizeof u);
    }
    for (size_t i = 0; i < n16; i++) {
        float x = f32[i % n32] * (i >= n32 ? -0.5f : 1.0f);
        f16[i] = fp_f32_to_f16(x);
        bf16[i] = fp_f32_to_bf16(x);
    }

    op_t ops[] = {
        {"f32_to_f16", sizeof(float), run_f32_to_f16, f32, dst},
        {"f16_to_f32", sizeof(uint16_t), run_f16_to_f32, f16, dst},
        {"f32_to_bf16", sizeof(float), run_f32_to_bf16, f32, dst},
        {"bf16_to_f32", sizeof(uint16_t), run_bf16_to_f32, bf16, dst},
        {"f32_to_tf32", sizeof(float), run_f32_to_tf32, f32, dst},
    };
    fp_isa best_isa = fp_numfmt_isa();
    double f16_min = 1e30;
    printf("# single thread, %zu MiB input, best of %d; GB/s of input bytes; best path: %s\n",
           INPUT_BYTES >> 20, REPS, fp_isa_name(best_isa));
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        double scalar = 0, best = 0;
        for (int i = 0; i < FP_ISA_COUNT; i++) {
            if (!fp_numfmt_isa_supported((fp_isa)i) || fp_numfmt_set_isa((fp_isa)i) != FP_OK)
                continue;
            double gbs = measure(&ops[o]);
            printf("bench: %s_%s=%.2f unit=GB/s\n", ops[o].name, fp_isa_name((fp_isa)i), gbs);
            if (i == FP_ISA_SCALAR)
                scalar = gbs;
            if (i == (int)best_isa)
                best = gbs;
        }
        printf("bench: %s_speedup=%.2f unit=x ratio=%.2f\n", ops[o].name, best / scalar, best / scalar);
        if (o < 2 && best < f16_min)
            f16_min = best;
    }
    fp_numfmt_set_isa(best_isa);
    printf("# goal: fp32 <-> fp16 >= %.0f GB/s of input on the best path (ratio = slower direction / goal)\n",
           GOAL_GBS);
    printf("bench: f16_both_ways_min=%.2f unit=GB/s ratio=%.2f\n", f16_min, f16_min / GOAL_GBS);
    free(f32);
    free(f16);
    free(bf16);
    free(dst);
    return 0;
}
