/* test_arena.c — the device arena's bookkeeping on a host block (no GPU needed): 256-byte alignment,
 * first fit, splitting and coalescing, current / peak accounting, the out-of-memory message naming
 * the request, bad releases refused; then a randomized alloc/release run checked against a shadow
 * list (no overlaps, in_use equal to the shadow's sum, everything coalesces back to one block); the
 * device arena: unavailable with its reason without a GPU, plain device memory with one. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include "error.h"
#include "gpu_detect.h"
#include "tap.h"
#include "trainer/cuda/arena.h"

#define NSHADOW 200

int main(void)
{
    tap_plan(28);
    char buf[32];
    tap_is_str(fp_arena_format_bytes(40ull << 30, buf, sizeof buf), "40 GiB", "whole GiB");
    tap_is_str(fp_arena_format_bytes((size_t)(39.9 * (1ull << 30)), buf, sizeof buf), "39.9 GiB", "one decimal");
    tap_is_str(fp_arena_format_bytes(512, buf, sizeof buf), "512 B", "bytes");

    /* a block deliberately misaligned by 8 bytes */
    enum { BLOCK = 1 << 20 };
    unsigned char *raw = malloc(BLOCK + 512);
    unsigned char *block = raw + ((FP_ARENA_ALIGN - ((uintptr_t)raw % FP_ARENA_ALIGN)) % FP_ARENA_ALIGN) + 8;
    fp_arena *a = NULL;
    tap_is_int(fp_arena_new_over(&a, block, BLOCK, "fp16 arm"), FP_OK, "arena over a host block");
    tap_ok((uintptr_t)fp_arena_base(a) % FP_ARENA_ALIGN == 0 && (unsigned char *)fp_arena_base(a) >= block,
           "usable part starts on a 256-byte boundary inside the block");
    tap_is_uint(fp_arena_size(a), BLOCK - FP_ARENA_ALIGN, "usable size: the block less the alignment skip, whole units");

    void *p1, *p2, *p3, *p0;
    tap_is_int(fp_arena_alloc(a, 1000, "conv1.weight", &p1), FP_OK, "alloc 1000 B");
    tap_is_int(fp_arena_alloc(a, 1, "bn1.bias", &p2), FP_OK, "alloc 1 B");
    tap_is_int(fp_arena_alloc(a, 0, "empty", &p0), FP_OK, "alloc 0 B gives one unit");
    tap_ok((uintptr_t)p1 % 256 == 0 && (uintptr_t)p2 % 256 == 0 && (uintptr_t)p0 % 256 == 0, "all 256-byte aligned");
    tap_ok((char *)p2 - (char *)p1 == 1024 && (char *)p0 - (char *)p2 == 256, "first fit in address order, rounded sizes");
    tap_is_uint(fp_arena_in_use(a), 1024 + 256 + 256, "in_use counts rounded sizes");
    tap_is_int(fp_arena_release(a, p2), FP_OK, "release the middle one");
    tap_is_int(fp_arena_alloc(a, 200, "fits the hole", &p3), FP_OK, "alloc into the hole");
    tap_ok(p3 == p2, "the hole is reused (first fit)");
    tap_is_uint(fp_arena_peak(a), 1536, "peak kept across release");
    tap_is_int(fp_arena_release(a, p2), FP_OK, "release p3 (same address)");
    tap_is_int(fp_arena_release(a, p2), FP_EINVAL, "double release refused");
    tap_is_int(fp_arena_release(a, (char *)p1 + 256), FP_EINVAL, "release of an interior pointer refused");

    void *big;
    int rc = fp_arena_alloc(a, 123456789, "layer4.2.conv3", &big);
    tap_is_int(rc, FP_ENOMEM, "too large: FP_ENOMEM");
    tap_is_str(fp_error_message(),
               "layer4.2.conv3: out of device memory asking for 123456789 bytes (arena fp16 arm: 1023.8 KiB, "
               "1.2 KiB in use, largest free block 1022.2 KiB)",
               "the message names the request, the bytes, the arena and its use");
    tap_ok(big == NULL, "no pointer on failure");
    tap_is_int(fp_arena_release(a, p1), FP_OK, "release p1");
    tap_is_int(fp_arena_release(a, p0), FP_OK, "release p0");
    tap_ok(fp_arena_in_use(a) == 0 && fp_arena_live(a) == 0 && fp_arena_largest_free(a) == fp_arena_size(a),
           "all released: one free block again (coalesced)");

    /* randomized: shadow list of live allocations */
    struct { unsigned char *p; size_t n; } sh[NSHADOW];
    size_t live = 0, want_use = 0, overlaps = 0, ooms = 0, wrong_use = 0;
    uint32_t s = 12345;
    fp_arena_reset_peak(a);
    for (int it = 0; it < 20000; it++) {
        s = s * 1664525u + 1013904223u;
        if (live < NSHADOW && (live == 0 || (s >> 16) % 3 != 0)) {
            size_t n = 1 + (s >> 8) % 9000;
            void *p;
            if (fp_arena_alloc(a, n, "random", &p) != FP_OK) {
                ooms++;
                continue;
            }
            size_t r = (n + 255) & ~(size_t)255;
            for (size_t k = 0; k < live; k++)
                overlaps += (unsigned char *)p < sh[k].p + sh[k].n && sh[k].p < (unsigned char *)p + r;
            sh[live].p = p;
            sh[live++].n = r;
            want_use += r;
        } else {
            size_t k = (s >> 4) % live;
            fp_arena_release(a, sh[k].p);
            want_use -= sh[k].n;
            sh[k] = sh[--live];
        }
        wrong_use += fp_arena_in_use(a) != want_use;
    }
    tap_is_uint(overlaps + wrong_use, 0, "20000 random operations: no overlaps, in_use always the shadow's sum");
    tap_diag("%zu out-of-memory answers, peak %zu bytes", ooms, fp_arena_peak(a));
    while (live)
        fp_arena_release(a, sh[--live].p);
    tap_ok(fp_arena_largest_free(a) == fp_arena_size(a), "everything coalesces back to one free block");
    fp_arena_free_all(a);
    free(raw);

    /* the device arena: unavailable (with the reason) without CUDA or a GPU; with one, plain device
     * memory (cudaMalloc, not managed) */
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    fp_arena *d = NULL;
    rc = fp_arena_new_device(&d, 1 << 20, "device");
    if (!fp_gpu_compiled() || !gpu.available) {
        tap_ok(rc == FP_EUNAVAIL && strstr(fp_error_message(), "arena device"),
               "no GPU: the device arena is unavailable, saying why (%s)", fp_error_message());
    } else {
        int device_mem = 0;
#ifdef HAVE_CUDA
        struct cudaPointerAttributes attr;
        device_mem = rc == FP_OK && cudaPointerGetAttributes(&attr, fp_arena_base(d)) == cudaSuccess &&
                     attr.type == cudaMemoryTypeDevice;
#endif
        tap_ok(device_mem && fp_arena_size(d) == 1 << 20, "GPU: a 1 MiB arena of plain device memory (%s)",
               rc == FP_OK ? "made" : fp_error_message());
    }
    fp_arena_free_all(d);
    return tap_done();
}
