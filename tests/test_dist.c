/* test_dist.c — data-parallel arms (trainer/dist/, arm.c's all-reduce), run by tests/test_dist.sh under
 * `mpirun -np 2`: 2 ranks x batch B end K steps with rank 0's weights, bit for bit, on every rank and within
 * 1e-6 rel. L2 of one process that runs both shards' forward / backward (per-shard batchnorm, as per rank) and
 * averages the gradients; an fp16 all-reduce's rounding against fp32 is measured (0 < rel. L2 < 1e-2) and its
 * weights stay within 1e-4 of the reference after one step (lr 0.01), 0.25 after K; an Inf injected into rank 1's batch makes every rank skip that step
 * (and only the steps rank 0 skips). Only rank 0 prints TAP; the other ranks' checks reach it by all-reduce. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "tap.h"
#include "dist_testutil.h"
#include "trainer/dist/dist.h"
#include "trainer/layers.h"
#include "trainer/run/arm.h"

#define S 32
#define B 4          /* per rank */
#define K 3          /* steps */
#define PX (S * S * 3)

static float images[2 * B * PX];   /* a global batch of 2 x B (two shards) */
static int32_t labels[2 * B];

/* The global batch of step t; shard s is images + s * B * PX. */
static void global_batch(int t) { td_images(images, labels, 2 * B, PX, (int64_t)t * 2 * B); }

static fp_batch shard(int s)
{
    fp_batch b = {B, S, images + (size_t)s * B * PX, labels + s * B, 0, 0};
    return b;
}

/* resnet18 of width 8, seed 11, buckets of 64 KiB: several even for this small model. */
static void cfg_of(fp_arm_config *c, const char *policy, fp_dist *d, const char *wire)
{
    td_arm_config(c, policy, 8, 11, d, wire, 64 << 10);
}

/* One process, both shards: forward / backward of each on its own (its own batch statistics), gradients
 * averaged, then the arm's optimizer (fp32: no scaler, as fp_arm_step). */
static int reference_step(fp_arm *ref, float *g0)
{
    fp_model *m = fp_arm_model(ref);
    size_t n = fp_model_num_params(m);
    int classes = fp_model_num_classes(m), rc = FP_OK;
    float dl[B * 10], loss;
    for (int s = 0; s < 2 && !rc; s++) {
        const float *logits;
        fp_batch b = shard(s);
        fp_model_zero_grad(m);
        rc = fp_model_forward(m, &logits, b.images, B, FP_MODE_TRAIN);
        rc = rc ? rc : fp_softmax_xent(&loss, dl, NULL, NULL, logits, (const int *)b.labels, B, classes);
        rc = rc ? rc : fp_model_backward(m, dl);
        if (!rc && s == 0)
            memcpy(g0, fp_model_grads(m), n * sizeof *g0);
    }
    float *g = fp_model_grads(m);
    for (size_t i = 0; i < n; i++)   /* as the ranks: each shard's gradient / 2, summed */
        g[i] = g0[i] * 0.5f + g[i] * 0.5f;
    return rc ? rc : fp_optim_step(fp_arm_optim(ref), fp_lr_at(&fp_arm_get_config(ref)->lr, fp_arm_iteration(ref)));
}

int main(void)
{
    td_start("tests/test_dist.sh", 12, S);
    fp_dist *dist = td_dist;
    int rank = td_rank;

    /* 1. fp32: the ranks against one process with both shards */
    fp_arm_config c;
    fp_arm *a32 = NULL, *a16 = NULL, *ref = NULL;
    cfg_of(&c, "fp32", dist, "fp32");
    int ok = fp_arm_create(&a32, &c) == FP_OK;
    cfg_of(&c, "fp32", dist, "fp16");
    ok = ok && fp_arm_create(&a16, &c) == FP_OK;
    cfg_of(&c, "fp32", NULL, NULL);
    ok = ok && (rank != 0 || fp_arm_create(&ref, &c) == FP_OK);
    if (!td_all_ok(ok, "arms created")) {
        tap_diag("%s", fp_error_message());
        return 1;
    }
    size_t n = fp_model_num_params(fp_arm_model(a32));
    float *g0 = malloc(n * sizeof *g0), *w0 = malloc(n * sizeof *w0);
    double err16 = NAN, over = 0, first16 = NAN;
    int steps_ok = 1;
    for (int t = 0; t < K; t++) {
        global_batch(t);
        fp_batch mine = shard(rank);
        fp_arm_step_result r32, r16;
        if (t == 1)
            fp_arm_check_reduce_next(a16, NULL);
        steps_ok &= fp_arm_step(a32, &mine, &r32) == FP_OK && fp_arm_step(a16, &mine, &r16) == FP_OK;
        steps_ok &= r32.comm_bytes == (int64_t)(n * 4) && r16.comm_bytes == (int64_t)(n * 2) && r32.comm_buckets > 1;
        if (t == 1) {
            err16 = r16.reduce_rel_l2;
            over = (double)r16.reduce_overflow;
        }
        if (rank == 0 && reference_step(ref, g0))
            steps_ok = 0;
        if (rank == 0 && t == 0)
            first16 = td_rel_l2(fp_model_params(fp_arm_model(a16)), fp_model_params(fp_arm_model(ref)), n);
        if (rank == 0)
            tap_diag("step %d: fp16 vs fp32 all-reduce weights rel. L2 %.3g, loss %g %g", t + 1,
                     td_rel_l2(fp_model_params(fp_arm_model(a16)), fp_model_params(fp_arm_model(a32)), n), r32.loss, r16.loss);
    }
    td_all_ok(steps_ok, "K steps with an fp32 and an fp16 all-reduce (bytes: 4 and 2 per parameter, several buckets)");
    /* every rank holds rank 0's weights, bit for bit */
    const float *p32 = fp_model_params(fp_arm_model(a32));
    memcpy(w0, p32, n * sizeof *w0);
    fp_dist_broadcast(dist, w0, n * sizeof *w0);
    td_all_ok(memcmp(w0, p32, n * sizeof *w0) == 0, "fp32 all-reduce: the same weights on every rank, bit for bit");
    const float *p16 = fp_model_params(fp_arm_model(a16));
    memcpy(w0, p16, n * sizeof *w0);
    fp_dist_broadcast(dist, w0, n * sizeof *w0);
    td_all_ok(memcmp(w0, p16, n * sizeof *w0) == 0, "fp16 all-reduce: the same weights on every rank, bit for bit");
    if (rank == 0) {
        const float *pr = fp_model_params(fp_arm_model(ref));
        double e = td_rel_l2(p32, pr, n), e16 = td_rel_l2(p16, pr, n);
        tap_diag("after %d steps: rel. L2 of the ranks' weights vs one process with both shards: fp32 %.3g, fp16 "
                 "all-reduce %.3g; fp16 all-reduce rounding at step 2: rel. L2 %.3g, %.0f overflowed", K, e, e16,
                 err16, over);
        tap_ok(e <= 1e-6, "fp32 all-reduce = one process averaging both shards' gradients (rel. L2 %.3g <= 1e-6)", e);
        /* One step's fp16 reduction moves the weights by what it rounded; over K steps the trajectories part as
         * any perturbation does in this tiny, noisy model (batchnorm over 4 images: 6e-6 after step 1, then 6e-4
         * to 4e-2 after step 3, depending on the BLAS library's kernels), so only the first step is bounded
         * tightly and the last one against divergence. */
        tap_ok(first16 > 0 && first16 <= 1e-4 && e16 > 0 && e16 <= 0.25,
               "fp16 all-reduce: weights near the reference (0 < rel. L2 %.3g <= 1e-4 after one step, %.3g <= 0.25 "
               "after %d)", first16, e16, K);
        tap_ok(err16 > 0 && err16 < 1e-2, "fp16 all-reduce rounding vs fp32 measured (0 < rel. L2 %.3g < 1e-2)",
               err16);
        tap_ok(over == 0, "no summed gradient overflowed fp16");
    }

    /* 2. an Inf on rank 1 at step 2 of an fp16 (scaled) arm: every rank skips that step */
    fp_arm *amp = NULL;
    cfg_of(&c, "fp16", dist, NULL);
    c.init_scale = 1024;   /* no overflow of its own at these sizes: only the injected one skips */
    ok = fp_arm_create(&amp, &c) == FP_OK && fp_arm_allreduce_dtype(amp) == FP_DT_F32;
    td_all_ok(ok, "fp16 arm: its all-reduce defaults to its gradients' format (fp32)");
    int skipped[K] = {0}, injected_ok = 1;
    for (int t = 0; t < K && ok; t++) {
        global_batch(t);
        if (t == 1)
            images[(size_t)B * PX + 5] = INFINITY;   /* shard 1: rank 1's */
        fp_batch mine = shard(rank);
        fp_arm_step_result r;
        if (fp_arm_step(amp, &mine, &r)) {
            injected_ok = 0;
            break;
        }
        skipped[t] = r.skipped;
        int theirs = r.skipped, mx = theirs, mn = -theirs;
        fp_dist_allreduce_max_int(dist, &mx);
        fp_dist_allreduce_max_int(dist, &mn);
        if (mx != -mn)   /* the ranks disagree on this step */
            injected_ok = 0;
    }
    td_all_ok(injected_ok, "every rank skipped exactly the same steps");
    td_all_ok(skipped[1] == 1 && skipped[0] == 0 && skipped[2] == 0,
           "the step with rank 1's Inf was skipped on every rank, the others were not");
    p16 = fp_model_params(fp_arm_model(amp));
    memcpy(w0, p16, n * sizeof *w0);
    fp_dist_broadcast(dist, w0, n * sizeof *w0);
    td_all_ok(memcmp(w0, p16, n * sizeof *w0) == 0, "after the skip: the same weights on every rank");

    free(g0);
    free(w0);
    fp_arm_free(a32);
    fp_arm_free(a16);
    fp_arm_free(ref);
    fp_arm_free(amp);
    return td_finish();
}
