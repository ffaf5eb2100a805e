/* test_cuda_step_scaler.c — the device side of an arm step (kernels.h fp_cuda_step_*): the loss-scale update
 * on the device against trainer/precision.c's fp_grad_scaler over sequences with injected Inf / NaN gradients,
 * non-finite losses and a bad label (scale, growth tracker, skip: identical every step), the first non-finite
 * segment, and the SGD kernel's skip flag (nothing moves, the 16-bit copy is the weights' cast). Skips without a GPU. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dtype.h"
#include "error.h"
#include "testutil.h"
#include "trainer/cuda/kernels.h"
#include "trainer/precision.h"

enum { NSEG = 5, SEGN = 3000, STEPS = 64 };

/* What step s injects: 0 nothing, 1 an Inf gradient, 2 a NaN gradient, 3 a non-finite loss (finite gradients),
 * 4 a label out of range. Irregular, with runs of overflows and long clean stretches. */
static int inject(int s)
{
    if (s == 40)
        return 4;
    if (s == 7 || s == 8 || s == 9 || s == 31)
        return 1;
    if (s == 20 || s == 55)
        return 2;
    if (s == 13 || s == 47)
        return 3;
    return 0;
}

/* One mode over STEPS steps: the device state against the host's GradScaler; mismatches counted per field. */
static void scaler_sequence(const char *name, fp_scale_mode mode, float init_scale, int interval)
{
    fp_grad_scaler host;
    fp_grad_scaler_init(&host, mode);
    if (mode != FP_SCALE_NONE)
        host.scale = init_scale;
    host.growth_interval = interval;
    float *g = malloc((size_t)NSEG * SEGN * sizeof(float));
    float *dg = gtu_dev_copy(NULL, (size_t)NSEG * SEGN * sizeof(float));
    fp_cuda_step_state *ds = gtu_dev_copy(NULL, sizeof *ds), *hs = NULL;
    fp_cuda_xent_result *dx = gtu_dev_copy(NULL, sizeof *dx);
    int rc = !g || !dg || !ds || !dx ? FP_ENOMEM : fp_cuda_host_alloc((void **)&hs, sizeof *hs);
    fp_cuda_segment segs[NSEG];
    memset(segs, 0, sizeof segs);
    for (int k = 0; k < NSEG; k++) {
        segs[k].grad = dg + (size_t)k * SEGN;
        segs[k].n = SEGN;
    }
    rc = rc ? rc : fp_cuda_step_set_scaler(ds, host.scale, host.clean_steps, NULL);
    int bad_scale = 0, bad_tracker = 0, bad_skip = 0, bad_first = 0, skips = 0, changes = 0;
    uint64_t rng = 0x5EEDull + (uint64_t)mode;
    for (int s = 0; !rc && s < STEPS; s++) {
        int what = inject(s), seg = s % NSEG;
        for (size_t i = 0; i < (size_t)NSEG * SEGN; i++)
            g[i] = tu_uniform_pm1(&rng) * host.scale;
        if (what == 1)
            g[(size_t)seg * SEGN + 17] = (s & 1) ? -INFINITY : INFINITY;
        if (what == 2) {
            g[(size_t)seg * SEGN + 5] = NAN;
            g[(size_t)(NSEG - 1) * SEGN] = INFINITY;   /* a later segment too: the first is still seg */
        }
        fp_cuda_xent_result x = {.loss_sum = what == 3 ? INFINITY : 2.3 * 8, .correct1 = 1, .correct5 = 4,
                                 .bad_label = what == 4 ? 3 : -1};
        if (cudaMemcpy(dg, g, (size_t)NSEG * SEGN * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaMemcpy(dx, &x, sizeof x, cudaMemcpyHostToDevice) != cudaSuccess) {
            rc = FP_EIO;
            break;
        }
        rc = fp_cuda_step_loss(ds, dx, 8, NULL);
        rc = rc ? rc : fp_cuda_unscale_and_check_first(segs, NSEG, 1.0f / host.scale, &ds->found, &ds->first_nonfinite,
                                                       NULL);
        rc = rc ? rc : fp_cuda_step_flags(ds, NULL);
        rc = rc ? rc : fp_cuda_step_update(ds, (int)mode, host.growth_factor, host.backoff_factor, host.growth_interval,
                                           NULL);
        rc = rc ? rc : fp_cuda_step_readback(hs, ds, NULL);
        if (rc || cudaStreamSynchronize(NULL) != cudaSuccess)
            break;
        /* the host's recipe (arm.c's host path): a bad label fails the step before anything; without a scaler a
         * non-finite loss diverges (nothing updated); else found -> skip + update */
        int found = what == 1 || what == 2, want_skip;
        if (what == 4)
            want_skip = 1;
        else if (mode == FP_SCALE_NONE)
            want_skip = what == 3;
        else {
            want_skip = found;
            changes += fp_grad_scaler_update(&host, found);
        }
        skips += want_skip;
        bad_scale += memcmp(&hs->scale, &host.scale, sizeof(float)) != 0;
        bad_tracker += hs->growth_tracker != host.clean_steps;
        bad_skip += hs->skip != want_skip;
        bad_first += hs->first_nonfinite != (found ? seg : INT_MAX) || hs->found != found;
        if (s < 3 || hs->skip != want_skip || hs->scale != host.scale)
            tap_diag("%s step %d: inject %d: device scale %g tracker %d skip %d / host %g %d %d", name, s, what,
                     hs->scale, hs->growth_tracker, hs->skip, host.scale, host.clean_steps, want_skip);
    }
    tap_ok(!rc, "%s: %d steps ran%s%s", name, STEPS, rc ? ": " : "", rc ? fp_error_message() : "");
    tap_ok(!rc && bad_scale == 0 && bad_tracker == 0,
           "%s: scale and growth tracker identical to fp_grad_scaler every step (%d / %d mismatches; %d changes)", name,
           bad_scale, bad_tracker, changes);
    tap_ok(!rc && bad_skip == 0 && skips > 0, "%s: skip decisions identical (%d skipped, %d mismatches)", name, skips,
           bad_skip);
    tap_ok(!rc && bad_first == 0, "%s: found flag and first non-finite segment right every step (%d mismatches)", name,
           bad_first);
    cudaFree(dg);
    cudaFree(ds);
    cudaFree(dx);
    fp_cuda_host_free(hs);
    free(g);
}

/* The SGD kernel with a skip flag: set, weights and momentum unchanged and the copy their cast; clear, the same
 * bits as fp_cuda_sgd_step. */
static void sgd_skip(fp_dtype lowp)
{
    enum { N = 5000 };
    float p0[N], m0[N], g[N], p1[N], m1[N], p2[N], m2[N];
    uint16_t c1[N], c2[N], want[N];
    uint64_t rng = 0xABCDull;
    for (int i = 0; i < N; i++) {
        p0[i] = tu_uniform_pm1(&rng);
        m0[i] = tu_uniform_pm1(&rng) * 0.1f;
        g[i] = tu_uniform_pm1(&rng) * 0.01f;
    }
    float *dp = gtu_dev_copy(NULL, sizeof p0), *dm = gtu_dev_copy(NULL, sizeof m0), *dg = gtu_dev_copy(NULL, sizeof g);
    uint16_t *dc = gtu_dev_copy(NULL, sizeof c1);
    int *dskip = gtu_dev_copy(NULL, sizeof(int)), one = 1, zero = 0;
    fp_cuda_segment seg = {dp, dg, dm, dc, N, 1};
    int rc = !dp || !dm || !dg || !dc || !dskip ? FP_ENOMEM : FP_OK;
    int ok_skip = 0, ok_run = 0;
    for (int run = 0; !rc && run < 2; run++) {
        cudaMemcpy(dp, p0, sizeof p0, cudaMemcpyHostToDevice);
        cudaMemcpy(dm, m0, sizeof m0, cudaMemcpyHostToDevice);
        cudaMemcpy(dg, g, sizeof g, cudaMemcpyHostToDevice);
        cudaMemset(dc, 0xFF, sizeof c1);
        cudaMemcpy(dskip, run == 0 ? &one : &zero, sizeof(int), cudaMemcpyHostToDevice);
        rc = fp_cuda_sgd_step_unless(&seg, 1, 0.05, 0.9, 5e-4, 0, 0, lowp, dskip, NULL);
        cudaMemcpy(run == 0 ? p1 : p2, dp, sizeof p1, cudaMemcpyDeviceToHost);
        cudaMemcpy(run == 0 ? m1 : m2, dm, sizeof m1, cudaMemcpyDeviceToHost);
        cudaMemcpy(run == 0 ? c1 : c2, dc, sizeof c1, cudaMemcpyDeviceToHost);
    }
    if (!rc) {
        fp_narrow_array(want, p0, N, lowp);
        ok_skip = memcmp(p1, p0, sizeof p0) == 0 && memcmp(m1, m0, sizeof m0) == 0 && memcmp(c1, want, sizeof want) == 0;
        /* the reference: the plain kernel on the same inputs */
        cudaMemcpy(dp, p0, sizeof p0, cudaMemcpyHostToDevice);
        cudaMemcpy(dm, m0, sizeof m0, cudaMemcpyHostToDevice);
        rc = fp_cuda_sgd_step(&seg, 1, 0.05, 0.9, 5e-4, 0, 0, lowp, NULL);
        float pr[N], mr[N];
        uint16_t cr[N];
        cudaMemcpy(pr, dp, sizeof pr, cudaMemcpyDeviceToHost);
        cudaMemcpy(mr, dm, sizeof mr, cudaMemcpyDeviceToHost);
        cudaMemcpy(cr, dc, sizeof cr, cudaMemcpyDeviceToHost);
        ok_run = !rc && memcmp(p2, pr, sizeof pr) == 0 && memcmp(m2, mr, sizeof mr) == 0 &&
                 memcmp(c2, cr, sizeof cr) == 0 && memcmp(p2, p0, sizeof p0) != 0;
    }
    tap_ok(!rc && ok_skip, "sgd %s: skip flag set: weights and momentum unchanged, the copy is their cast%s",
           fp_dtype_name(lowp), rc ? fp_error_message() : "");
    tap_ok(!rc && ok_run, "sgd %s: skip flag clear: the same bits as fp_cuda_sgd_step", fp_dtype_name(lowp));
    cudaFree(dp);
    cudaFree(dm);
    cudaFree(dg);
    cudaFree(dc);
    cudaFree(dskip);
}

/* Timing events: a recorded pair gives a time >= 0 after the stream synchronised. */
static void events(void)
{
    void *a = NULL, *b = NULL;
    int64_t ns = -1;
    int rc = fp_cuda_event_create(&a);
    rc = rc ? rc : fp_cuda_event_create(&b);
    rc = rc ? rc : fp_cuda_event_record(a, NULL);
    rc = rc ? rc : fp_cuda_event_record(b, NULL);
    rc = rc ? rc : cudaStreamSynchronize(NULL) == cudaSuccess ? FP_OK : FP_EIO;
    rc = rc ? rc : fp_cuda_event_elapsed_ns(a, b, &ns);
    tap_ok(!rc && ns >= 0, "timing events: elapsed %lld ns", (long long)ns);
    fp_cuda_event_destroy(a);
    fp_cuda_event_destroy(b);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    tap_plan(4 * 5 + 2 * 2 + 1);
    scaler_sequence("dynamic, interval 3", FP_SCALE_DYNAMIC, 65536.0f, 3);
    scaler_sequence("dynamic, interval 1, near FLT_MAX", FP_SCALE_DYNAMIC, 0x1p125f, 1);
    scaler_sequence("dynamic, default interval", FP_SCALE_DYNAMIC, 65536.0f, 2000);
    scaler_sequence("static", FP_SCALE_STATIC, 1024.0f, 2000);
    scaler_sequence("none", FP_SCALE_NONE, 1.0f, 2000);
    sgd_skip(FP_DT_F16);
    sgd_skip(FP_DT_BF16);
    events();
#endif
    return tap_done();
}
