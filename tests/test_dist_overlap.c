/* test_dist_overlap.c — the all-reduce overlapped with the backward (model.h's gradient-ready hook, dist.h's
 * fp_dist_reduce_*, arm.c's use), run by tests/test_dist_overlap.sh under `mpirun -np 2`: the hook's calls (backward
 * order, each parameter once, `half` unchanged by it), DDP's bucket plan (1 MiB first, then 25 MiB), every bucket
 * posted during the backward, and an overlapped 16-bit all-reduce bit for bit the same as the unoverlapped one.
 * Only rank 0 prints TAP; the other ranks' checks reach it by all-reduce. */
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
#define B 2          /* per rank */
#define K 3          /* steps */
#define PX (S * S * 3)

static float images[B * PX];
static int32_t labels[B];

/* This rank's batch of step t. */
static fp_batch batch(int t)
{
    for (int i = 0; i < B; i++) {
        int lab = 0;
        fp_dataset_get(td_ds, FP_SPLIT_TRAIN, ((int64_t)t * 2 + td_rank) * B + i, 0, images + (size_t)i * PX, &lab);
        labels[i] = lab;
    }
    fp_batch b = {B, S, images, labels, 0, 0};
    return b;
}

static void cfg_of(fp_arm_config *c, const char *policy, int width, fp_dist *d, const char *wire, size_t bucket)
{
    td_arm_config(c, policy, width, 5, d, wire, bucket);
}

/* The hook's record: every call's layer and range, checked against the model's layer table. */
typedef struct {
    fp_model *m;
    int calls, last_layer, bad;
    unsigned char *seen;
} hook_log;

static int record(void *ctx, int layer, size_t off, size_t count)
{
    hook_log *h = ctx;
    size_t o = 0, c = 0;
    if (fp_model_layer_params(h->m, layer, &o, &c) || o != off || c != count || count == 0)
        h->bad = 1;   /* not that layer's parameters */
    if (h->calls > 0 && layer >= h->last_layer)
        h->bad = 1;   /* not in backward order */
    for (size_t i = off; i < off + count && i < fp_model_num_params(h->m); i++)
        h->bad |= h->seen[i]++ != 0;
    h->last_layer = layer;
    h->calls++;
    return FP_OK;
}

/* Expected buckets of n elements of wire-size wb with cap bytes: DDP's first bucket min(1 MiB, cap), then cap. */
static int expected_buckets(size_t n, size_t wb, size_t cap)
{
    size_t first = (cap < ((size_t)1 << 20) ? cap : (size_t)1 << 20) / wb, per = cap / wb;
    if (n <= first)
        return 1;
    return 1 + (int)((n - first + per - 1) / per);
}

int main(void)
{
    td_start("tests/test_dist_overlap.sh", 8, S);
    fp_dist *dist = td_dist;
    int rank = td_rank;

    /* 1. the hook alone (no ranks): backward order, each parameter once; `half` the same with and without it */
    fp_arm_config c;
    fp_arm *h1 = NULL, *h2 = NULL;
    cfg_of(&c, "half", 8, NULL, NULL, 0);
    int ok = fp_arm_create(&h1, &c) == FP_OK && fp_arm_create(&h2, &c) == FP_OK;
    if (!td_all_ok(ok, "arms created")) {
        tap_diag("%s", fp_error_message());
        return 1;
    }
    fp_model *m2 = fp_arm_model(h2);
    size_t n8 = fp_model_num_params(m2);
    hook_log log = {m2, 0, 0, 0, calloc(n8, 1)};
    int with_params = 0;
    for (int l = 0; l < fp_model_layer_count(m2); l++) {
        size_t off, cnt;
        with_params += fp_model_layer_params(m2, l, &off, &cnt) == FP_OK && cnt > 0;
    }
    ok = 1;
    for (int t = 0; t < K && ok; t++) {
        fp_batch b = batch(t);
        fp_arm_step_result r;
        memset(log.seen, 0, n8);
        log.calls = 0;
        fp_model_set_grad_ready(m2, record, &log);
        ok = fp_arm_step(h1, &b, &r) == FP_OK && fp_arm_step(h2, &b, &r) == FP_OK;
        for (size_t i = 0; i < n8; i++)
            log.bad |= log.seen[i] != 1;
        log.bad |= log.calls != with_params;
    }
    td_all_ok(ok && !log.bad, "gradient-ready hook: once per layer with parameters, last layer first, every parameter "
                           "exactly once, each range its layer's");
    td_all_ok(ok && memcmp(fp_model_params(fp_arm_model(h1)), fp_model_params(m2), n8 * sizeof(float)) == 0,
           "`half` with the hook (rounded per layer) = without it (rounded at the end), bit for bit");
    free(log.seen);
    fp_arm_free(h1);
    fp_arm_free(h2);

    /* 2. 2 ranks, resnet18 at full width, DDP's buckets: every one posted during the backward */
    fp_arm *a32 = NULL, *a16 = NULL, *b16 = NULL;
    cfg_of(&c, "fp32", 64, dist, "fp32", 0);
    ok = fp_arm_create(&a32, &c) == FP_OK;
    cfg_of(&c, "fp32", 64, dist, "fp16", 0);
    ok = ok && fp_arm_create(&a16, &c) == FP_OK && fp_arm_create(&b16, &c) == FP_OK;
    if (!td_all_ok(ok, "2 ranks: resnet18 arms created")) {
        tap_diag("%s", fp_error_message());
        return 1;
    }
    size_t n = fp_model_num_params(fp_arm_model(a32));
    int nb32 = expected_buckets(n, 4, (size_t)25 << 20), nb16 = expected_buckets(n, 2, (size_t)25 << 20);
    int plan_ok = 1, early_ok = 1, checked_ok = 1;
    double exposed = 0, total = 0;
    for (int t = 0; t < K; t++) {
        fp_batch b = batch(t);
        fp_arm_step_result r32, r16, q16;
        fp_arm_check_reduce_next(b16, NULL);   /* b16: every step unoverlapped (reduced after the backward) */
        if (fp_arm_step(a32, &b, &r32) || fp_arm_step(a16, &b, &r16) || fp_arm_step(b16, &b, &q16)) {
            plan_ok = early_ok = checked_ok = 0;
            tap_diag("rank %d: %s", rank, fp_error_message());
            break;
        }
        plan_ok &= r32.comm_buckets == nb32 && r16.comm_buckets == nb16 && q16.comm_buckets == nb16;
        early_ok &= r32.comm_buckets_early == nb32 && r16.comm_buckets_early == nb16;
        checked_ok &= q16.comm_buckets_early == 0 && q16.reduce_rel_l2 > 0;
        if (t > 0) {
            exposed += (double)r32.comm_exposed_ns;
            total += (double)r32.comm_ns;
        }
        if (rank == 0)
            tap_diag("step %d: fp32 %d buckets, all-reduce %.1f ms, exposed %.1f ms; fp16 %d buckets", t + 1,
                     r32.comm_buckets, r32.comm_ns / 1e6, r32.comm_exposed_ns / 1e6, r16.comm_buckets);
    }
    td_all_ok(plan_ok, "DDP's buckets: 1 MiB first, then 25 MiB (fp32 and fp16 payloads)");
    td_all_ok(early_ok, "every bucket was posted during the backward (fp32 and fp16)");
    td_all_ok(checked_ok, "a checked step reduces after the backward (none early) and measures the rounding");
    const float *p = fp_model_params(fp_arm_model(a16)), *q = fp_model_params(fp_arm_model(b16));
    td_all_ok(memcmp(p, q, n * sizeof *p) == 0,
           "fp16 all-reduce overlapped = the same after the backward, bit for bit, after 3 steps");
    if (rank == 0)
        tap_diag("steps 2-%d: fp32 all-reduce %.1f ms/step, of which exposed %.1f ms (both ranks on this machine's "
                 "cores)", K, total / 1e6 / (K - 1), exposed / 1e6 / (K - 1));
    fp_arm_free(a32);
    fp_arm_free(a16);
    fp_arm_free(b16);
    return td_finish();
}
