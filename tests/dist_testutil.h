/* dist_testutil.h — what the data-parallel TAP programs (test_dist, test_dist_overlap, test_dist_sync_bn; run under `mpirun -np 2`
 * by their .sh) share: starting as one of exactly 2 ranks with only rank 0 printing TAP, checks that every rank
 * makes and rank 0 reports, and the small resnet18 arm they train. */
#ifndef FP_TESTS_DIST_TESTUTIL_H
#define FP_TESTS_DIST_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include "trainer/dist/dist.h"
#include "trainer/run/arm.h"

extern fp_dist *td_dist;      /* this job's communicator (after td_start) */
extern fp_dataset *td_ds;     /* synthetic:200 at image_size */
extern int td_rank;

/* Join the job as one of exactly 2 ranks (skips the whole test otherwise, naming `script`, the .sh that starts
 * it), silence the other ranks' stdout, plan `plan` checks on rank 0 and open the synthetic data set. */
void td_start(const char *script, int plan, int image_size);
/* A check every rank makes: rank 0 reports it once all ranks' answers are in; 1 only when all passed. */
int td_all_ok(int ok, const char *what);
/* resnet18 of `width`, 10 classes, `seed`, constant lr 0.01 (stable at a batch of a few images), under `policy`,
 * all-reducing over d (NULL: alone) in `wire` (NULL: the gradients' format) with buckets of `bucket` bytes (0: DDP's). */
void td_arm_config(fp_arm_config *c, const char *policy, int width, int seed, fp_dist *d, const char *wire,
                   size_t bucket);
/* The training images first .. first + n - 1 of td_ds into images (px floats each) and their labels. */
void td_images(float *images, int32_t *labels, int n, size_t px, int64_t first);
/* Relative L2 distance of a from b (absolute when b is all zero). */
double td_rel_l2(const float *a, const float *b, size_t n);
/* Close the data set and the communicator; the exit status (rank 0's TAP verdict, 0 elsewhere). */
int td_finish(void);

#endif
