/* dist_testutil.c — the data-parallel tests' shared start, checks and arm (dist_testutil.h). Promise: every
 * rank takes part in every check's all-reduce, so a failure on rank 1 fails rank 0's TAP line. */
#include "config.h"
#include "dist_testutil.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "tap.h"
#include "trainer/layers.h"

fp_dist *td_dist;
fp_dataset *td_ds;
int td_rank;

void td_start(const char *script, int plan, int image_size)
{
    if (fp_dist_launched_size() == 0) {
        char why[256];
        snprintf(why, sizeof why, "not started by mpirun (%s runs it with 2 ranks)", script);
        tap_skip_all(why);
    }
    if (fp_dist_init(&td_dist)) {
        printf("1..0 # SKIP %s\n", fp_error_message());
        exit(0);
    }
    td_rank = fp_dist_rank(td_dist);
    if (td_rank != 0 && !freopen("/dev/null", "w", stdout))
        exit(1);
    if (fp_dist_size(td_dist) != 2) {
        printf("1..0 # SKIP needs exactly 2 ranks, got %d\n", fp_dist_size(td_dist));
        fp_dist_finalize(td_dist);
        exit(0);
    }
    if (td_rank == 0)
        tap_plan(plan);
    fp_data_opts o;
    fp_data_opts_default(&o);
    o.image_size = image_size;
    if (fp_dataset_open(&td_ds, "synthetic:200", &o))
        tap_skip_all("cannot open the synthetic dataset");
}

int td_all_ok(int ok, const char *what)
{
    int bad = !ok;
    if (fp_dist_allreduce_max_int(td_dist, &bad))
        bad = 1;
    if (td_rank == 0)
        tap_ok(!bad, "%s (every rank)", what);
    return !bad;
}

void td_arm_config(fp_arm_config *c, const char *policy, int width, int seed, fp_dist *d, const char *wire,
                   size_t bucket)
{
    fp_arm_config_default(c);
    c->model = "resnet18";
    c->base_width = width;
    c->num_classes = 10;
    c->image_size = fp_dataset_image_size(td_ds);
    c->seed = seed;
    c->policy = policy;
    c->dist = d;
    c->allreduce = wire;
    c->bucket_bytes = bucket;
    fp_lr_schedule_default(&c->lr, FP_LR_CONSTANT, 0.01);
}

void td_images(float *images, int32_t *labels, int n, size_t px, int64_t first)
{
    for (int i = 0; i < n; i++) {
        int lab = 0;
        fp_dataset_get(td_ds, FP_SPLIT_TRAIN, first + i, 0, images + (size_t)i * px, &lab);
        labels[i] = lab;
    }
}

double td_rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        num += e * e;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

int td_finish(void)
{
    fp_dataset_close(td_ds);
    fp_dist_finalize(td_dist);
    return td_rank == 0 ? tap_done() : 0;   /* the other ranks' checks were reported by rank 0 */
}
