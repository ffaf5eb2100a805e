/* arm_device_internal.h — internal to the device arm (trainer/run/arm_device*.c, CUDA builds): what its files call
 * of each other; arm_internal.h has what arm.c calls. Promise: nothing else includes this header (after config.h:
 * HAVE_CUDA, HAVE_NCCL). */
#ifndef FP_ARM_DEVICE_INTERNAL_H
#define FP_ARM_DEVICE_INTERNAL_H

#include "trainer/run/arm_internal.h"

/* ---- arm_device.c: the step ---- */
/* The step's device work (steps 1 to 6) queued on the model's stream: eagerly, or captured (captured 1: nothing
 * runs; arm_device_graph.c). */
int fp_arm_device_queue(fp_arm *a, const fp_batch *b, fp_arm_step_result *r, int captured);

/* ---- arm_device_optim.c: the optimizer on the device ---- */
/* Its state down (device -> fp_optim's host state, down 1) or up; waits at the end. */
int fp_arm_device_opt_transfer(fp_arm *a, int down);
/* The per-step scalars (lr, SGD's first step, Adam's bias corrections) into their pinned host copy; step: the
 * optimizer's count before this step. */
int fp_arm_device_step_scalars(fp_arm *a, double lr, int64_t step);
/* 6. The update queued on the model's stream, doing nothing on the step state's skip flag; `half`'s rounding. */
int fp_arm_device_optim(fp_arm *a);

/* ---- arm_device_dist.c: data parallel ---- */
/* The step state's flags averaged over the ranks on the model's stream (> 0: set on some rank). */
int fp_arm_device_reduce_flags(fp_arm *a);

/* ---- arm_device_graph.c: the step as a CUDA graph ---- */
enum { FP_ARM_STEP_EAGER, FP_ARM_STEP_CAPTURE, FP_ARM_STEP_REPLAY };
/* The bytes of the batch's images upload. */
size_t fp_arm_device_image_bytes(const fp_arm *a, const fp_batch *b);
/* What this step does: FP_ARM_STEP_EAGER, _CAPTURE or _REPLAY. */
int fp_arm_device_graph_mode(fp_arm *a, const fp_batch *b);
/* The step captured and launched, or replayed; *ran 0 (FP_OK): it did not run, the caller runs it eagerly. */
int fp_arm_device_graph_capture(fp_arm *a, const fp_batch *b, fp_arm_step_result *r, int *ran);
int fp_arm_device_graph_replay(fp_arm *a, const fp_batch *b, int *ran);

#endif
