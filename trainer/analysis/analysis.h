/* analysis.h — precision analysis on top of the probes: per-layer rounding error of a low-precision
 * forward against the fp32 one on the same weights and batch, lost updates, the update tensors,
 * and the post-mortem of a skipped step. Promises: each figure is defined here in one sentence;
 * nothing prints; rows go to the store only through lib/store.h. */
#ifndef FP_ANALYSIS_H
#define FP_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>
#include "probe/probe.h"
#include "trainer/model.h"

/* ---- error of x against a reference ----
 * rel_l2 = ||x - ref||_2 / ||ref||_2 (||x - ref||_2 when ref is all zeros), max_abs = max |x - ref|,
 * cosine = <x, ref> / (||x|| ||ref||) (1 when both are all zeros, 0 when only one is). Sums in
 * double. A non-finite x gives rel_l2 = max_abs = Inf and cosine NaN. Any output may be NULL. */
void fp_layer_error(const float *ref, const float *x, size_t n, double *rel_l2, double *max_abs, double *cosine);

typedef struct {
    double rel_l2, max_abs, cosine;   /* NaN: not measured (the layer did not run) */
} fp_layer_err_t;

/* fp_layer_error where the tensors lie: ref (fp32) and x (n values of dt: fp32, or fp16 / bf16 bit patterns)
 * both in the memory of backend instance be of table ops (trainer/backend.h). Host memory (ops NULL or
 * ops->host_memory): summed on the host, over the kernels' pool. The CUDA backend: summed on the device on
 * be's stream (trainer/cuda/layer_error_dev.h; work on another stream that writes ref or x must be done), only
 * the five sums come back. The figures are fp_layer_error's up to the order of the double sums. FP_EINVAL for
 * a NULL out, another device backend, a CPU-only build given device memory or another dt; the backend's
 * error (FP_ENOMEM, a CUDA error) otherwise. */
struct fp_backend_ops;
struct fp_backend;
int fp_layer_error_on(const struct fp_backend_ops *ops, struct fp_backend *be, const float *ref, const void *x,
                      fp_dtype dt, size_t n, fp_layer_err_t *out);

/* ---- per-layer rounding error, isolated from weight drift ----
 * The low-precision forward (a scratch clone of the fp32 model under `policy`) runs with the fp32
 * model's current weights on the same batch, and every layer's output is compared with the fp32
 * forward's (role activation in precision_error). Two ways:
 *  - riding on the fp32 arm's own training step (trainer/run/compare_probes.c; no extra fp32
 *    forward): fp_prec_err_attach puts a capture backend on the fp32 model's probe set;
 *    fp_prec_err_arm(pe, n) before that model's sampled step; during its TRAIN forward the first k
 *    images' output of every layer is kept (fp32: read in place after the forward where the model's
 *    plan keeps it until the backward, fp_model_output_kept, copied otherwise; the model must be
 *    the one given to fp_prec_err_create); then, after the forward and before the backward
 *    and the optimizer (the weights are those the forward used), fp_prec_err_ride runs the
 *    low-precision forward on those k images (fp_model_forward_bn_stats) with every batchnorm
 *    normalising with the fp32 forward's statistics of the WHOLE batch moved by the difference
 *    rounding makes to the statistics of those k images (low-precision input against the captured
 *    fp32 one): with k = n these are the low-precision forward's own batch statistics. Measured on
 *    resnet50 64x64 under fp16 (fresh weights, one batch of 16; per-layer rel_l2): k = 16 gives the
 *    one call's whole-batch figures within 0.4% (median; max 1.7%); against k = 16, k = 8 median
 *    1.00x (p10 0.95x), k = 4 median 0.98x (p10 0.81x, p90 1.02x: the k-image correction also takes
 *    out the channel mean of those images' own error), k = 2 median 0.96x (p10 0.61x). fp32
 *    against itself this way leaves rel_l2 below 6e-5 (the float-rounded saved mean and
 *    1/sqrt(var + eps)). Rows go out (stored when fp_prec_err_set_store was called) at the step the
 *    fp32 model's probe had when armed.
 *  - one call: fp_prec_err_compare runs both forwards (TRAIN, so batchnorm uses batch statistics as
 *    in training) on the first k images; used for a reference on a GPU, whose activations the CPU
 *    scratch cannot read. Both forwards normalise with the statistics of those k images, so the
 *    comparison is like for like but is the rounding error of a k-image batch: measured on resnet50
 *    64x64 under fp16, per-layer rel_l2 against the whole batch's: k = 8 median 1.00x (p90 1.01x),
 *    k = 4 median 1.06x (p90 1.17x, the deep layers whose batchnorm then sees few values). With
 *    k < n the reference forward runs on a clone of the reference model (made once; it reads the
 *    reference's parameters in place and gets a copy of its running statistics each time).
 * k = FP_PREC_ERR_DEFAULT_SUBBATCH unless fp_prec_err_set_subbatch says otherwise (0: the whole
 * batch; a batch of at most k images is used whole). The low-precision outputs are taken in their
 * storage format (16 bits under fp16 / bf16). */
#define FP_PREC_ERR_DEFAULT_SUBBATCH 4
typedef struct fp_prec_err fp_prec_err;
int fp_prec_err_create(fp_prec_err **out, const fp_model *ref, const fp_policy *policy);
void fp_prec_err_free(fp_prec_err *pe);
/* Rows go to store as (run = the low-precision arm, ref_run = the fp32 arm, step, layer, activation). */
void fp_prec_err_set_store(fp_prec_err *pe, fp_store_t *store, int64_t run, int64_t ref_run);
/* Riding: attach once to the fp32 model's probe set; arm before its step on a batch of n; ride after
 * its forward (FP_EINVAL when nothing was captured for a batch of n). */
int fp_prec_err_attach(fp_prec_err *pe, fp_probe *ref_probe);
int fp_prec_err_arm(fp_prec_err *pe, int n);
int fp_prec_err_ride(fp_prec_err *pe, fp_model *ref, const float *x, int n);
int fp_prec_err_compare(fp_prec_err *pe, fp_model *ref, const float *x, int n, int64_t step);
void fp_prec_err_set_subbatch(fp_prec_err *pe, int k);   /* k <= 0: the whole batch */
int fp_prec_err_subbatch(const fp_prec_err *pe, int n);  /* images either way uses of a batch of n */
/* On the GPU (precision_device.c): with on != 0, fp_prec_err_compare given a reference on the CUDA backend runs
 * both forwards on the GPU instead of on the host: a clone of the reference under the policy and one under the
 * reference's own policy, each on a CUDA instance of its own on the same device (made at the first comparison,
 * again only for a larger sub-batch; arenas sized by fp_model_device_bytes for k images plus the capture), read
 * the reference's parameters and running statistics copied device to device (fp_model_mirror_params: a wait
 * for the reference's stream, no download); the low-precision outputs are captured as stored in device memory
 * (in-place probes, probe.h) and each layer's output of the reference clone is compared with them on the
 * device (fp_layer_error_on: one wait per layer, five sums back). Both clones normalise with the statistics of
 * the same k images (the whole batch too: ref's own plan is left alone). The reference is then cuDNN's /
 * cuBLASLt's fp32 (no TF32: the fp32 policy asks for FMA math), so a figure is the rounding of the policy on
 * the GPU against the GPU's fp32, not against the CPU backend's; the figures are fp_layer_error's of those
 * tensors up to the order of the double sums. A reference elsewhere, and off (the default), take the host path
 * above, unchanged. The clones' memory is held until fp_prec_err_free: fp_prec_err_device_memory gives their
 * arenas' bytes (0 before the first device comparison), *peak the most they had in use (allocations and
 * staging) and *workspace cuDNN's workspaces beside the arenas (either may be NULL). */
void fp_prec_err_use_device(fp_prec_err *pe, int on);
size_t fp_prec_err_device_memory(const fp_prec_err *pe, size_t *peak, size_t *workspace);
/* Per-layer rows of the last comparison (count = layers), NULL before one. */
const fp_layer_err_t *fp_prec_err_rows(const fp_prec_err *pe, int *count);
int64_t fp_prec_err_last_step(const fp_prec_err *pe);   /* -1 before one */
fp_model *fp_prec_err_scratch(fp_prec_err *pe);          /* the low-precision clone */

/* ---- lost updates ----
 * The fraction of weights whose update vanished in rounding: among i with a finite nonzero
 * grad[i], those with new[i] == old[i]. NaN when no gradient is nonzero. */
double fp_lost_update_fraction(const float *old_w, const float *new_w, const float *grad, size_t n);

/* ---- the parameter roles and the lost updates, in one pass ----
 * After the optimizer step of a sampled step (old_params: the parameters before it, as the forward
 * used them; the model holds the new ones; grads: the unscaled gradients the step used), per layer
 * with parameters, to p's tensor hooks (p may be NULL): new - old as FP_ROLE_UPDATE when p wants it,
 * and old as FP_ROLE_WEIGHT and grads as FP_ROLE_WEIGHT_GRAD (at loss scale 1) when p wants them and
 * the caller took them over from the model (fp_probe_caller_roles), so that the model does not read
 * those arrays a second time. per_layer[l] (when not NULL; nlayers entries) gets layer l's
 * fp_lost_update_fraction (NaN for a layer without parameters); returns the fraction over all
 * parameters. Reads each array once, in cache-sized pieces (a 256 KiB buffer per thread per call;
 * smaller pieces on the stack, one thread, when that cannot be had). Call before fp_probe_step_end.
 * Over the kernels' pool (lib/thread_pool.h) when it has two threads or more and is free:
 * the layers are split in two runs of whole layers of about equal parameter count, taken by the
 * caller and a pool worker, so p's tensor hooks are called concurrently for distinct layers
 * (probe.h); each layer's pieces still go to the hooks in order on one thread, so the results equal
 * one thread's bit for bit. One pool thread (or a busy pool): the calling thread, layers in order. */
double fp_probe_sample_params(fp_probe *p, fp_model *m, const float *old_params, const float *grads, double *per_layer);

/* ---- the parameters before a sampled step ----
 * dst[0, n) = src[0, n), as memcpy; from 2M floats on, in ranges over the kernels' pool. */
void fp_probe_copy_params(float *dst, const float *src, size_t n);

/* ---- the same pass riding on the optimizer step ----
 * With the optimizer run piece by piece inside the pass (each piece's weights handed over, then
 * fp_optim_step_part_delta on it writing each element's update, then used while in cache): the
 * parameters are read from memory once and no copy of them is made. Call after fp_optim_step_begin
 * (trainer/run/arm.h fp_arm_set_update_hook), when fp_probe_params_steppable(m, opt): the layers'
 * parameters tile m's parameter buffer in order and opt's flat range is that buffer. It updates every
 * parameter once and gives what fp_probe_sample_params gives with old_params = the parameters before
 * the step, bit for bit. */
struct fp_optim;
int fp_probe_params_steppable(fp_model *m, const struct fp_optim *opt);
double fp_probe_sample_params_stepping(fp_probe *p, fp_model *m, struct fp_optim *opt, const float *grads,
                                       double *per_layer);

/* The roles the parameter pass hands to p now: the update when some backend wants it, the weight and the
 * weight gradient when wanted and taken over by the caller (fp_probe_caller_roles). */
unsigned fp_probe_params_roles(const fp_probe *p);

/* ---- the same pass where the parameters lie (param_pass_device.c) ----
 * For a model on a device backend (any backend whose table has update_delta: the CPU one too): the
 * parameters before the step are copied backend to backend (fp_param_dev_before, queued before the step on
 * the model's backend) into a buffer the pass owns, allocated once from the model's backend at create (the
 * parameters plus the largest layer's update: fp_param_dev_bytes); after the step, fp_param_dev_after runs,
 * layer by layer, the backend's update_delta op (d = new - old, the lost / moved counts) and hands the roles
 * of fp_probe_params_roles to p through fp_model_probe_backend (old as FP_ROLE_WEIGHT, the gradients as
 * FP_ROLE_WEIGHT_GRAD at loss scale 1, d as FP_ROLE_UPDATE): histograms counted by the backend's hist op when
 * p's backends take ready histograms (only counts come back), else the tensor downloaded. per_layer and *all
 * (either may be NULL) get what fp_probe_sample_params gives on the same values, bit for bit; the histograms
 * the same counts (sum_abs up to summation order). No host mirror is read or marked: the parameters and
 * gradients stay on the device. Call after before on the same model, before fp_probe_step_end. create:
 * FP_EUNAVAIL when the backend has no update_delta, FP_ENOMEM (the backend's message) without the memory;
 * before / after: FP_EINVAL for another model or after without before, the backend's error otherwise. The
 * pass must be freed before the model's backend goes (fp_model_set_backend, fp_model_free). */
typedef struct fp_param_dev fp_param_dev;
int fp_param_dev_create(fp_param_dev **out, fp_model *m);
void fp_param_dev_free(fp_param_dev *pd);   /* NULL is fine */
size_t fp_param_dev_bytes(const fp_param_dev *pd);
int fp_param_dev_before(fp_param_dev *pd, fp_model *m);
int fp_param_dev_after(fp_param_dev *pd, fp_probe *p, fp_model *m, double *all, double *per_layer);

/* ---- a skipped step ----
 * From the parameter gradients of a skipped step as the backward left them (scaled), in backward
 * order (last layer first): the first layer whose gradient holds Inf or NaN, and each layer's
 * headroom log2(max_finite(fmt) / amax) where amax is its largest finite |gradient| (Inf when the
 * gradient is all zeros). text gets e.g.
 *   "skipped step: first non-finite gradient in backward order: layer 12 layer1.0.conv3 (inf 3, nan 0
 *    of 16384) at loss scale 65536; headroom log2(65504/amax) per layer: fc=5.21 layer4.2.bn3=7.90 ..."
 * truncated to cap. Returns the first non-finite layer's index, or -1 when all are finite. */
int fp_skipped_step_analysis(const fp_model *m, const float *grads, float loss_scale, fp_format fmt, char *text,
                             size_t cap, double *headroom);

#endif
