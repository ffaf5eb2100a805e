/* test_cuda_index.c — the CUDA backend kernels' index and launch arithmetic (trainer/cuda/backend_kernels.h,
 * the same inline functions the kernels call), on the host in every build: flat NHWC indices, their
 * inverse, pool windows and grid sizes at tensors of more than 2^31 elements, where 32-bit math wraps; in
 * a CUDA build also the max pool launchers' refusal of such inputs (before any CUDA call: no GPU needed). */
#include "config.h"
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include "error.h"
#include "tap.h"
#include "trainer/cuda/backend_kernels.h"

/* A tensor {3, 1024, 1024, 1024}: 3 * 2^30 elements, past both INT_MAX and UINT32_MAX / 2. */
enum { N = 3, H = 1024, W = 1024, C = 1024 };

static void flat_indices(void)
{
    const uint64_t total = (uint64_t)N * H * W * C;
    tap_ok(sizeof(size_t) >= 8, "size_t holds 64-bit indices (%zu bytes)", sizeof(size_t));
    tap_is_uint(fp_cbk_count(N, H, W, C), total, "count of {3, 1024, 1024, 1024} = 3 * 2^30 (no int wrap)");
    tap_is_uint(fp_cbk_count(1, 65536, 65536, 2), (uint64_t)1 << 33, "count of {1, 65536, 65536, 2} = 2^33");
    /* the last element: an int index ((int)(... ) as the old kernels) would be -1073741825 */
    tap_is_uint(fp_cbk_nhwc(N - 1, H - 1, W - 1, C - 1, H, W, C), total - 1, "flat index of the last element");
    tap_is_uint(fp_cbk_nhwc(2, 0, 0, 0, H, W, C), (uint64_t)1 << 31, "flat index of image 2 = 2^31");
    /* coordinates back from indices on both sides of 2^31 and 2^32, and round trips */
    const uint64_t probes[] = {0, ((uint64_t)1 << 31) - 1, (uint64_t)1 << 31, ((uint64_t)1 << 31) + 12345,
                               ((uint64_t)1 << 32) - 1, (uint64_t)1 << 32, ((uint64_t)1 << 32) + 1048576 + 2048 + 7,
                               total - 1};
    int bad = 0;
    for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
        int img, y, x, ch;
        fp_cbk_coords((size_t)probes[k], H, W, C, &img, &y, &x, &ch);
        uint64_t o = probes[k];
        int want_ch = (int)(o % C), want_x = (int)(o / C % W), want_y = (int)(o / C / W % H);
        int want_img = (int)(o / C / W / H);
        if (img != want_img || y != want_y || x != want_x || ch != want_ch ||
            fp_cbk_nhwc(img, y, x, ch, H, W, C) != (size_t)o) {
            tap_diag("index %llu: got (%d, %d, %d, %d), want (%d, %d, %d, %d)", (unsigned long long)o, img, y, x, ch,
                     want_img, want_y, want_x, want_ch);
            bad++;
        }
    }
    tap_is_int(bad, 0, "coordinates of indices around 2^31 and 2^32 and back");
    int img, y, x, ch;
    fp_cbk_coords(((size_t)1 << 32) + 1048576 + 2048 + 7, H, W, C, &img, &y, &x, &ch);
    tap_ok(img == 4 && y == 1 && x == 2 && ch == 7, "2^32 + 2^20 + 2*2^10 + 7 in {., 1024, 1024, 1024}: (4, 1, 2, 7)");
}

/* Outputs whose window holds input i, by brute force over every output position. */
static int window_ok(int i, int k, int stride, int pad, int out)
{
    int o0, o1, w0 = out, w1 = -1;
    fp_cbk_window(i, k, stride, pad, out, &o0, &o1);
    for (int o = 0; o < out; o++) {
        long long lo = (long long)o * stride - pad;
        if (lo <= i && i <= lo + k - 1) {
            w0 = o < w0 ? o : w0;
            w1 = o;
        }
    }
    return w1 < 0 ? o0 > o1 : o0 == w0 && o1 == w1;
}

static void pool_windows(void)
{
    int bad = 0, cases = 0;
    for (int k = 1; k <= 7; k++)
        for (int stride = 1; stride <= 4; stride++)
            for (int pad = 0; pad <= k / 2; pad++)
                for (int h = k > 2 * pad ? k - 2 * pad : 1; h <= 23; h++) {
                    int out = (h + 2 * pad - k) / stride + 1;
                    for (int i = 0; i < h; i++, cases++)
                        bad += !window_ok(i, k, stride, pad, out);
                }
    tap_ok(bad == 0, "pool windows: the outputs holding each input, as brute force (%d of %d cases wrong)", bad, cases);
    /* an axis of nearly INT_MAX positions: i + pad + stride - 1 passes INT_MAX in int arithmetic */
    const int h = INT_MAX - 1, k = 7, stride = 3, pad = 3, out = (int)(((long long)h + 2 * pad - k) / stride + 1);
    int o0, o1;
    fp_cbk_window(h - 1, k, stride, pad, out, &o0, &o1);
    long long lo = ((long long)h - 1 + pad - k + 1 + stride - 1) / stride, hi = ((long long)h - 1 + pad) / stride;
    tap_ok(o0 == (int)lo && o1 == (int)(hi < out - 1 ? hi : out - 1) && o0 <= o1,
           "pool window of the last of INT_MAX - 1 positions: [%d, %d] (want [%lld, %lld])", o0, o1, lo,
           hi < out - 1 ? hi : (long long)out - 1);
}

static void grids(void)
{
    tap_is_uint(fp_cbk_grid(0), 1, "grid for 0 elements: one block");
    tap_is_uint(fp_cbk_grid(1), 1, "grid for 1 element: one block");
    tap_is_uint(fp_cbk_grid(FP_CBK_THREADS + 1), 2, "grid for threads + 1 elements: two blocks");
    tap_is_uint(fp_cbk_grid((size_t)FP_CBK_GRID_CAP * FP_CBK_THREADS), FP_CBK_GRID_CAP, "grid at the cap");
    const size_t big = (size_t)N * H * W * C;   /* (big + 255) / 256 truncated to 32 bits would be 4194304 */
    tap_is_uint(fp_cbk_grid(big), FP_CBK_GRID_CAP, "grid for 3 * 2^30 elements: capped at %u blocks", FP_CBK_GRID_CAP);
    tap_is_uint(fp_cbk_grid(SIZE_MAX), FP_CBK_GRID_CAP, "grid for SIZE_MAX elements: capped, no overflow");
    /* the grid-stride loop (64-bit stride) reaches the last element from the thread that owns it */
    const size_t stride = (size_t)fp_cbk_grid(big) * FP_CBK_THREADS, last = big - 1;
    size_t t = last % stride, steps = last / stride;
    tap_ok(t + steps * stride == last && last + stride > last,
           "grid-stride: thread %zu reaches element 3 * 2^30 - 1 after %zu strides of %zu", t, steps, stride);
}

static void argmax_limit(void)
{
    tap_ok(fp_cbk_argmax_fits(1, 1, 1, INT_MAX), "max pool input of INT_MAX elements: int32 argmax fits");
    tap_ok(!fp_cbk_argmax_fits(2, 1, 1, INT_MAX), "2 * INT_MAX elements refused (int math: -2, 'fits')");
    tap_ok(!fp_cbk_argmax_fits(1, 46341, 46341, 1), "46341^2 = INT_MAX + 4634 elements refused");
    tap_ok(fp_cbk_argmax_fits(1, 46340, 46340, 1), "46340^2 elements fit");
    tap_ok(!fp_cbk_argmax_fits(N, H, W, C), "3 * 2^30 elements refused (int math wraps to -2^30)");
    tap_ok(!fp_cbk_argmax_fits(65536, 65536, 1, 1), "2^32 elements refused (int math wraps to 0)");
    tap_ok(!fp_cbk_argmax_fits(0, 1, 1, 1) && !fp_cbk_argmax_fits(1, -1, 1, 1), "empty or negative dims refused");
}

#ifdef HAVE_CUDA
/* The launchers check the input before touching any pointer or the device: NULL buffers are never read. */
static void launcher_limit(void)
{
    int rc = fp_cbk_maxpool_forward(NULL, FP_DT_F16, NULL, NULL, FP_DT_F16, N, H, W, C, H / 2, W / 2, 3, 2, 1, NULL);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "INT_MAX"), "maxpool forward of 3 * 2^30 elements: %s",
           fp_error_message());
    rc = fp_cbk_maxpool_backward(NULL, FP_DT_F32, NULL, FP_DT_F32, NULL, 65536, 65536, 1, 1, 32768, 1, 3, 2, 1, 0, NULL);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "INT_MAX"), "maxpool backward of 2^32 elements: %s",
           fp_error_message());
}
#endif

int main(void)
{
#ifdef HAVE_CUDA
    tap_plan(7 + 2 + 7 + 7 + 2);
#else
    tap_plan(7 + 2 + 7 + 7);
#endif
    flat_indices();
    pool_windows();
    grids();
    argmax_limit();
#ifdef HAVE_CUDA
    launcher_limit();
#endif
    return tap_done();
}
