/* test_nccl_one_rank.c — data parallel's NCCL path on one GPU without mpirun (issue 23): a one-rank communicator
 * (fp_dist_init_local: ncclCommInitRank with nranks 1); its all-reduce (ncclAvg over one rank: x 1) leaves fp32 and
 * fp16 payloads bit for bit, whole, bucketed and overlapped (ready / end), and keeps a found-inf flag; device arms of
 * tinynet training with it (--allreduce fp32 / fp16) against arms alone: fp32 weights bit for bit, the fp16 wire's
 * rounding of the gradients > 0 and small (the step-1 gradients, measured here: a device arm does not record it), an
 * injected Inf skipped as alone. bench: lines (as TAP diagnostics) for the all-reduce's time
 * per step. Skips without a GPU or NCCL. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#if defined(HAVE_CUDA) && defined(HAVE_NCCL)
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtype.h"
#include "error.h"
#include "testutil.h"
#include "trainer/backend_cuda.h"
#include "trainer/dist/dist.h"
#include "trainer/model.h"
#include "trainer/run/arm.h"

enum { N = 8, CLASSES = 10, SIZE = 32, WIDTH = 16, SEED = 11, K = 6, INF_STEP = 2 };
#define ARENA ((size_t)512 << 20)
#define LR 0.05

/* Buckets fp_dist_plan_begin makes of n elements of wb bytes with buckets of cap bytes (the first at most 1 MiB). */
static int buckets_of(size_t n, size_t wb, size_t cap)
{
    size_t per = cap / wb, first = (cap < FP_DIST_FIRST_BUCKET_BYTES ? cap : FP_DIST_FIRST_BUCKET_BYTES) / wb;
    first = first < n ? first : n;
    return n == 0 ? 0 : (int)(1 + (n - first + per - 1) / per);
}

/* ---------------------------------------------------------------- the communicator's own operations */

static void direct(fp_dist *d)
{
    const fp_backend_ops *G = fp_backend_cuda();
    fp_backend *be = NULL;
    const size_t n = 300001;   /* odd: a last bucket that is not full */
    float *h = malloc(n * sizeof *h), *back = malloc(n * sizeof *back);
    uint16_t *h16 = malloc(n * 2), *b16 = malloc(n * 2);
    void *dv = NULL, *dflags = NULL;
    int rc = !h || !back || !h16 || !b16 ? FP_ENOMEM : fp_backend_cuda_create_sized(&be, (size_t)64 << 20, "nccl");
    rc = rc ? rc : G->alloc(be, &dv, n * sizeof *h);
    rc = rc ? rc : G->alloc(be, &dflags, 3 * sizeof(float));
    void *stream = rc ? NULL : fp_backend_cuda_stream(be);
    uint32_t rng = 0xBEEFu;
    for (size_t i = 0; h && i < n; i++)   /* gradients' spread of magnitudes: 1e-8 .. 1e2, both signs */
        h[i] = tu_uniform32_pm1(&rng) * powf(10.0f, (float)(i % 11) - 8.0f);
    if (h16)
        fp_narrow_array(h16, h, n, FP_DT_F16);

    /* whole, fp32, buckets of 256 KiB */
    fp_dist_stats st = {0};
    rc = rc ? rc : G->upload(be, dv, h, n * sizeof *h);
    rc = rc ? rc : fp_dist_nccl_allreduce_mean(d, dv, n, FP_DT_F32, (size_t)256 << 10, stream, &st);
    rc = rc ? rc : G->download(be, back, dv, n * sizeof *h);
    rc = rc ? rc : G->sync(be);
    int nb = buckets_of(n, 4, (size_t)256 << 10);
    tap_ok(!rc && memcmp(h, back, n * sizeof *h) == 0,
           "fp32 all-reduce over one rank (ncclAvg, x 1): %zu values bit for bit%s%s", n, rc ? ": " : "",
           rc ? fp_error_message() : "");
    tap_ok(!rc && st.buckets == nb && st.bytes == (int64_t)(n * 4) && st.early == 0,
           "its figures: %d buckets (want %d), %lld bytes (want %zu), none early (%d)", st.buckets, nb,
           (long long)st.bytes, n * 4, st.early);

    /* whole, fp16 */
    memset(&st, 0, sizeof st);
    int rc2 = rc ? rc : G->upload(be, dv, h16, n * 2);
    rc2 = rc2 ? rc2 : fp_dist_nccl_allreduce_mean(d, dv, n, FP_DT_F16, 0, stream, &st);
    rc2 = rc2 ? rc2 : G->download(be, b16, dv, n * 2);
    rc2 = rc2 ? rc2 : G->sync(be);
    tap_ok(!rc2 && memcmp(h16, b16, n * 2) == 0 && st.bytes == (int64_t)(n * 2),
           "fp16 all-reduce over one rank: %zu values bit for bit, %lld bytes%s%s", n, (long long)st.bytes,
           rc2 ? ": " : "", rc2 ? fp_error_message() : "");

    /* overlapped: buckets of 64 KiB, final in backward order (the top first) in pieces of 10007 */
    memset(&st, 0, sizeof st);
    rc2 = rc ? rc : G->upload(be, dv, h, n * sizeof *h);
    rc2 = rc2 ? rc2 : fp_dist_nccl_reduce_begin(d, dv, n, FP_DT_F32, (size_t)64 << 10);
    for (size_t hi = n; !rc2 && hi > 0;) {
        size_t lo = hi > 10007 ? hi - 10007 : 0;
        rc2 = fp_dist_nccl_reduce_ready(d, lo, hi - lo, stream);
        hi = lo;
    }
    rc2 = rc2 ? rc2 : fp_dist_nccl_reduce_end(d, stream, &st);
    rc2 = rc2 ? rc2 : G->download(be, back, dv, n * sizeof *h);
    rc2 = rc2 ? rc2 : G->sync(be);
    nb = buckets_of(n, 4, (size_t)64 << 10);
    tap_ok(!rc2 && memcmp(h, back, n * sizeof *h) == 0 && st.buckets == nb && st.early == nb,
           "overlapped (begin, ready in backward order, end): bit for bit, %d buckets (want %d), %d posted by ready%s%s",
           st.buckets, nb, st.early, rc2 ? ": " : "", rc2 ? fp_error_message() : "");

    /* the step state's flags (arm.c's device_reduce_flags): found-inf on the one rank stays found */
    float flags[3] = {1, 0, 0}, fb[3] = {0, 1, 1};
    rc2 = rc ? rc : G->upload(be, dflags, flags, sizeof flags);
    rc2 = rc2 ? rc2 : fp_dist_nccl_allreduce_mean(d, dflags, 3, FP_DT_F32, 0, stream, NULL);
    rc2 = rc2 ? rc2 : G->download(be, fb, dflags, sizeof fb);
    rc2 = rc2 ? rc2 : G->sync(be);
    tap_ok(!rc2 && fb[0] > 0 && fb[1] == 0 && fb[2] == 0,
           "the flags' reduction (found-inf, diverged, bad label): %g %g %g, found-inf kept", fb[0], fb[1], fb[2]);
    if (be) {
        G->free(be, dv, n * sizeof *h);
        G->free(be, dflags, 3 * sizeof(float));
        G->destroy(be);
    }
    free(h), free(back), free(h16), free(b16);
}

/* ---------------------------------------------------------------- device arms */

typedef struct {
    const char *policy, *wire;   /* wire NULL with d NULL: alone */
    fp_dist *d;
    float init_scale;            /* the GradScaler's (0: its default) */
    int rc;
    size_t np;
    float *g1;                   /* the gradients after step 1 (reduced, unscaled) */
    float *w;                    /* the weights after K steps */
    int skipped[K];
    float next_scale[K];
    int64_t comm_ns[K], bytes[K];
    int buckets[K];
    double rel16;                /* step 1's recorded all-reduce rounding (checked: fp_arm_check_reduce_next) */
} trace_t;

static void run_arm(trace_t *t, const float *x, const int *lab)
{
    fp_arm_config ac;
    gtu_arm_config(&ac, "tinynet", CLASSES, SIZE, WIDTH, SEED, t->policy, ARENA);
    fp_lr_schedule_default(&ac.lr, FP_LR_CONSTANT, LR);
    ac.dist = t->d;
    ac.allreduce = t->wire;
    ac.init_scale = t->init_scale;
    fp_arm *a = NULL;
    int rc = fp_arm_create(&a, &ac);
    for (int s = 0; !rc && s < K; s++) {
        fp_batch b = gtu_batch(x, lab, N, SIZE, s);
        fp_arm_step_result r;
        if (s == 0)
            fp_arm_check_reduce_next(a, NULL);   /* the first step measures the wire's rounding (16-bit wires) */
        if ((rc = fp_arm_step(a, &b, &r)))
            break;
        if (s == 0)
            t->rel16 = r.reduce_rel_l2;
        t->skipped[s] = r.skipped;
        t->next_scale[s] = r.next_scale;
        t->comm_ns[s] = r.comm_ns;
        t->bytes[s] = r.comm_bytes;
        t->buckets[s] = r.comm_buckets;
        fp_model *m = fp_arm_model(a);
        t->np = fp_model_num_params(m);
        const float *g = s == 0 ? fp_model_grads(m) : NULL;   /* a download: the device's gradients */
        if (s == 0 && (!g || !(t->g1 = malloc(t->np * sizeof *g))))
            rc = g ? FP_ENOMEM : FP_EINTERNAL;
        else if (s == 0)
            memcpy(t->g1, g, t->np * sizeof *g);
    }
    const float *w = rc ? NULL : fp_model_params(fp_arm_model(a));
    if (!rc && (!w || !(t->w = malloc(t->np * sizeof *w))))
        rc = w ? FP_ENOMEM : FP_EINTERNAL;
    else if (!rc)
        memcpy(t->w, w, t->np * sizeof *w);
    t->rc = rc;
    if (rc)
        tap_diag("%s arm (%s): %s", t->policy, t->d ? t->wire : "alone", fp_error_message());
    fp_arm_free(a);
}

static void trace_free(trace_t *t)
{
    free(t->g1);
    free(t->w);
}

/* The mean all-reduce time of steps 2..K (step 1 also makes the NCCL communicator), ms. */
static double mean_comm_ms(const trace_t *t)
{
    double sum = 0;
    for (int s = 1; s < K; s++)
        sum += (double)t->comm_ns[s];
    return sum / (K - 1) / 1e6;
}

static int same(const float *a, const float *b, size_t n) { return a && b && memcmp(a, b, n * sizeof *a) == 0; }

static void arms(fp_dist *d)
{
    const size_t per = (size_t)SIZE * SIZE * 3;
    float *x = gtu_images((size_t)K * N * per, 0xD1CEu);
    int *lab = gtu_labels(K * N, CLASSES);
    trace_t r1 = {.policy = "fp32"}, r2 = {.policy = "fp32"}, c32 = {.policy = "fp32", .wire = "fp32", .d = d},
            c16 = {.policy = "fp32", .wire = "fp16", .d = d};
    run_arm(&r1, x, lab);
    run_arm(&r2, x, lab);
    run_arm(&c32, x, lab);
    run_arm(&c16, x, lab);
    const size_t np = r1.np;
    int ran = !r1.rc && !r2.rc && !c32.rc && !c16.rc && np && c32.np == np && c16.np == np;
    tap_ok(ran, "fp32 tinynet, %d steps: two arms alone, one with --allreduce fp32 and one with fp16 over the one-rank "
                "communicator", K);
    int bytes_ok = ran;
    for (int s = 0; ran && s < K; s++)
        bytes_ok &= c32.bytes[s] == (int64_t)np * 4 && c16.bytes[s] == (int64_t)np * 2 && c32.buckets[s] >= 1 &&
                    r1.bytes[s] == 0;
    /* events' resolution is about 0.5 us: a single step's may read 0, the steps' sum may not */
    int timed = ran && mean_comm_ms(&c32) > 0 && mean_comm_ms(&c16) > 0;
    tap_ok(bytes_ok && timed, "every step all-reduced: %zu parameters, %lld / %lld bytes (fp32 / fp16), timed by events "
                              "(%lld / %lld ns at step 2)", np, ran ? (long long)c32.bytes[0] : -1LL,
           ran ? (long long)c16.bytes[0] : -1LL, ran ? (long long)c32.comm_ns[1] : -1LL,
           ran ? (long long)c16.comm_ns[1] : -1LL);
    /* is the arm alone bit-reproducible here (cuDNN's algorithms deterministic)? then the fp32 wire must be invisible */
    int repro = ran && same(r1.g1, r2.g1, np) && same(r1.w, r2.w, np);
    double spread = ran ? tu_rel_l2(r2.w, r1.w, np) : NAN, d32 = ran ? tu_rel_l2(c32.w, r1.w, np) : NAN;
    tap_diag("alone twice: %s (weights rel. L2 %.3g)", repro ? "bit for bit" : "NOT bit for bit", spread);
    if (repro) {
        tap_ok(same(c32.g1, r1.g1, np) && same(c32.w, r1.w, np),
               "--allreduce fp32 over one rank: step-1 gradients and the weights after %d steps bit for bit as alone "
               "(rel. L2 %.3g)", K, d32);
    } else {
        tap_ok(ran && d32 <= 4 * spread + 1e-7, "--allreduce fp32 over one rank: weights within 4x the arms' own spread "
                                                "(%.3g vs %.3g; no bitwise reference on this GPU)", d32, spread);
    }
    /* the fp16 wire's rounding of the step-1 gradients: exactly fp16's rounding of the gradients alone */
    double e16 = ran ? tu_rel_l2(c16.g1, r1.g1, np) : NAN;
    float *want = malloc((np ? np : 1) * sizeof *want);
    int in_fp16 = ran && want;
    if (in_fp16) {
        fp_round_to_dtype_copy(want, c16.g1, np, FP_DT_F16);
        in_fp16 = same(want, c16.g1, np);
        fp_round_to_dtype_copy(want, r1.g1, np, FP_DT_F16);
    }
    tap_ok(in_fp16 && e16 > 0 && e16 < 1e-3,
           "--allreduce fp16: the step-1 gradients are fp16 values, rel. L2 %.3g from the arm alone's (> 0, < 1e-3)",
           e16);
    if (repro)
        tap_ok(same(want, c16.g1, np), "... exactly the arm alone's gradients rounded to fp16");
    else
        tap_skip(1, "no bitwise reference on this GPU");
    double w16 = ran ? tu_rel_l2(c16.w, r1.w, np) : NAN;
    tap_ok(ran && w16 > 0 && w16 < 1e-3, "--allreduce fp16: weights after %d steps rel. L2 %.3g from alone (> 0, < 1e-3)",
           K, w16);
    /* the arm's own record of it (a checked step: the same gradients reduced in fp32 too, compared on the host) */
    double rec = c16.rel16;
    tap_ok(ran && rec > 0 && rec < 1e-3 && (!repro || fabs(rec - e16) <= 1e-6 * e16),
           "--allreduce fp16, step 1 checked: the arm records the all-reduce's rounding, rel. L2 %.3g (> 0, < 1e-3%s; "
           "measured here %.3g)", rec, repro ? ", = the measured within 1e-6" : "", e16);
    if (ran) {
        /* as TAP diagnostics, so that tests/gpu/check's log shows them */
        tap_diag("bench: name=nccl_one_rank_allreduce_fp32 value=%.4f unit=ms/step (tinynet, %zu parameters, steps "
                 "2-%d)", mean_comm_ms(&c32), np, K);
        tap_diag("bench: name=nccl_one_rank_allreduce_fp16 value=%.4f unit=ms/step (with the casts to and from fp16)",
                 mean_comm_ms(&c16));
    }
    free(want);
    trace_free(&r1), trace_free(&r2), trace_free(&c32), trace_free(&c16);

    /* found-inf: fp16 with its GradScaler, an Inf pixel at step INF_STEP + 1; a scale of 1024 (not 2^16), so that
     * no scaled gradient overflows the fp16 wire by itself: only the Inf step skips */
    x[(size_t)INF_STEP * N * per + 5] = INFINITY;
    trace_t f1 = {.policy = "fp16", .init_scale = 1024}, f2 = {.policy = "fp16", .init_scale = 1024},
            fc = {.policy = "fp16", .wire = "fp32", .d = d, .init_scale = 1024},
            fh = {.policy = "fp16", .wire = "fp16", .d = d, .init_scale = 1024};
    run_arm(&f1, x, lab);
    run_arm(&f2, x, lab);
    run_arm(&fc, x, lab);
    run_arm(&fh, x, lab);
    ran = !f1.rc && !f2.rc && !fc.rc && !fh.rc;
    int flags_same = ran;
    for (int s = 0; ran && s < K; s++)
        flags_same &= fc.skipped[s] == f1.skipped[s] && fc.next_scale[s] == f1.next_scale[s] &&
                      fh.skipped[s] == f1.skipped[s] && fh.next_scale[s] == f1.next_scale[s] &&
                      f1.skipped[s] == (s == INF_STEP);
    tap_ok(flags_same, "fp16 with an Inf input at step %d: skipped there only and the scale halved, with the one-rank "
                       "all-reduce (fp32 and fp16 wire) as alone (scale %g -> %g)", INF_STEP + 1,
           ran ? f1.next_scale[INF_STEP - 1] : NAN, ran ? f1.next_scale[INF_STEP] : NAN);
    int frepro = ran && same(f1.w, f2.w, f1.np);
    double df = ran ? tu_rel_l2(fc.w, f1.w, f1.np) : NAN, fs = ran ? tu_rel_l2(f2.w, f1.w, f1.np) : NAN;
    if (frepro)
        tap_ok(same(fc.w, f1.w, f1.np), "... the fp32 wire's weights after %d steps bit for bit as alone", K);
    else
        tap_ok(ran && df <= 4 * fs + 1e-7, "... the fp32 wire's weights within 4x the arms' own spread (%.3g vs %.3g)", df,
               fs);
    trace_free(&f1), trace_free(&f2), trace_free(&fc), trace_free(&fh);
    free(x);
    free(lab);
}
#endif

int main(void)
{
    tu_require_gpu();
#if !defined(HAVE_CUDA) || !defined(HAVE_NCCL)
    tap_skip_all("built without NCCL (configure finds it with MPI and the CUDA backend)");
#else
    tap_plan(1 + 5 + 9);
    fp_dist *d = NULL;
    int rc = fp_dist_init_local(&d);
    tap_ok(rc == FP_OK && fp_dist_rank(d) == 0 && fp_dist_size(d) == 1 && fp_dist_built() == 2,
           "a one-rank communicator without MPI: rank %d of %d%s%s", fp_dist_rank(d), fp_dist_size(d), rc ? ": " : "",
           rc ? fp_error_message() : "");
    if (rc == FP_OK) {
        direct(d);
        arms(d);
    }
    fp_dist_finalize(d);
#endif
    return tap_done();
}
