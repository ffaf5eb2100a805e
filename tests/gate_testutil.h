/* gate_testutil.h — recorded fixture sessions for the gate's tests (tests/test_gate.c,
 * tests/test_gate_fixture.c), written through the public writer API (store.h) as the trainer writes
 * them: runs with a configuration JSON (batch, steps, data, eval_batches, optimizer_config), step rows
 * with realistic step-time noise, GradScaler's loss scale (the start-up calibration and its probing
 * after a growth), skips after calibration, noisy losses, a validation whose top-1 is a count of
 * correct images, the parameter pass's "lost updates" events, peak memory and histograms with chosen
 * overflow counts. Every figure a planted regression changes is one field. */
#ifndef FP_GATE_TESTUTIL_H
#define FP_GATE_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#define GT_MAX_ARMS 4

typedef struct {
    const char *policy;          /* "fp32", "fp16", "half", ... */
    double median_ns;            /* per step */
    int calib_skips;             /* leading skipped steps, the scale halving from 65536 (scaler arms) */
    int probe_at;                /* step index of a scale growth whose first step is skipped (0: none) */
    int skip_every;              /* after calibration, every this many steps skipped (0: none) */
    double loss_offset, loss_noise;   /* added to the loss curve; sd of each step's loss */
    int64_t correct;             /* validation images right (of the session's eval images) */
    double lost_pct;             /* % lost updates at each sampled step; < 0: no events */
    int64_t mem_peak;            /* bytes; < 0: not measured */
    int overflows;               /* activation values above 65504 in each histogram (0: none) */
    const char *status;          /* "finished" (NULL), "failed", "interrupted", "running" */
} gt_arm_t;

typedef struct {
    const char *path, *model, *data, *device, *optimizer;
    int64_t batch, image_size, steps, eval_batches;
    double lr;
    uint64_t seed;
    double sigma;                /* step-time jitter (lognormal) */
    int hist_every;              /* histograms and lost-update events every this many steps (0: none) */
    int narms;
    gt_arm_t arms[GT_MAX_ARMS];
} gt_session_t;

/* A healthy two-arm session (fp32 + fp16 on a GPU, 300 steps, batch 64, 100 ms / 60 ms steps, 3
 * calibration skips and one probe skip in fp16, 1,024 validation images, lost updates 0.004% in fp16). */
void gt_default(gt_session_t *g, const char *path, uint64_t seed);
/* Makes a gt_default session the quick start's as issue 20 found it: 80 steps of batch 16 at 64x64 on a CPU,
 * 8 validation batches (128 images), 5 calibration skips in fp16 and no probe skip (the accuracies stay the
 * caller's to set). */
void gt_quickstart(gt_session_t *g);
/* Index of the arm with this policy (appended as a copy of arm 1, or fp32's defaults, when missing). */
gt_arm_t *gt_arm(gt_session_t *g, const char *policy);
/* Write (append) the session; FP_OK or the store's error. */
int gt_write(const gt_session_t *g);
/* Images each validation used: eval_batches x batch. */
int64_t gt_eval_images(const gt_session_t *g);

#endif
