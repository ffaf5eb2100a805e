/* model.h — a network as a flat list of layer nodes (conv, batchnorm, relu, pools, linear, add) over
 * tensor slots, run through the backend table of backend.h (the CPU backend: layers.h kernels). Promises:
 * one parameter buffer and one gradient buffer handed out by a sizes table (as karpathy/llm.c), torchvision
 * names and init, forward (train / eval) and backward that match PyTorch, and exact memory accounting. */
#ifndef FP_MODEL_H
#define FP_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "trainer/layers.h"
#include "trainer/precision.h"

typedef struct fp_model fp_model;

/* ---- the model zoo (trainer/resnet.c) ---- */

typedef struct {
    const char *name;     /* one of fp_model_names() */
    int num_classes;      /* >= 1 */
    int image_size;       /* >= 32; the input is image_size x image_size x 3 (NHWC) */
    int base_width;       /* channels of conv1; 0 means 64 (torchvision); every channel count scales
                           * by base_width/64 (smaller widths are for test fixtures) */
    uint64_t seed;        /* parameter init (see fp_model_init_params) */
    int no_init;          /* 1: leave parameters and running stats at zero (listing, or loading next) */
} fp_model_config;        /* models are created on the CPU backend: see fp_model_set_backend */

/* NULL-terminated list: resnet18, resnet34, resnet50, resnet101, resnet152, tinynet. */
const char *const *fp_model_names(void);
/* "resnet18, resnet34, ..." — for error messages. */
const char *fp_model_names_joined(void);

/* Builds and initialises a model. FP_EINVAL (message lists the valid names for an unknown model)
 * for a bad name, num_classes < 1, image_size < 32 or base_width < 1; FP_ENOMEM. */
int fp_model_create(fp_model **out, const fp_model_config *cfg);
void fp_model_free(fp_model *m);   /* NULL is fine */

/* A torchvision-topology ResNet of any depth: blocks per stage layers[0..3], BasicBlock (bottleneck
 * 0) or Bottleneck (1); same checks and init as fp_model_create (resnet18 = {2,2,2,2}, 0). */
int fp_resnet_create(fp_model **out, const char *name, int bottleneck, const int layers[4], int base_width,
                     int num_classes, int image_size, uint64_t seed);
/* As fp_resnet_create; no_init leaves the parameters at zero. */
int fp_resnet_create_ex(fp_model **out, const char *name, int bottleneck, const int layers[4], int base_width,
                        int num_classes, int image_size, uint64_t seed, int no_init);

/* ---- building (used by the zoo; any flat graph of these nodes works) ----
 * Each adder returns the id (>= 0) of the value it produces, or a negative FP_E* code (sticky: the
 * first error is kept and fp_model_build_finish returns it). Names are torchvision module names
 * ("layer1.0.conv1"); parameters get "<name>.weight" etc. relu and add run in place (the output
 * shares the storage of the input / of `a`), which the value of `a` must allow (nothing reads it
 * later); the zoo's graphs only do this on BN outputs. */
int fp_model_build_begin(fp_model **out, const char *model_name, int h, int w, int c); /* value 0 = input */
int fp_model_add_conv(fp_model *m, const char *name, int in, int cout, int k, int stride, int pad);
int fp_model_add_bn(fp_model *m, const char *name, int in);
int fp_model_add_relu(fp_model *m, const char *name, int in);
int fp_model_add_maxpool(fp_model *m, const char *name, int in, int k, int stride, int pad);
int fp_model_add_avgpool(fp_model *m, const char *name, int in);     /* global: [h,w,c] -> [c] */
int fp_model_add_linear(fp_model *m, const char *name, int in, int out);
int fp_model_add_add(fp_model *m, const char *name, int a, int b);
/* Allocates parameters, gradients and running statistics; the last value is the output (logits). */
int fp_model_build_finish(fp_model *m);

/* torchvision's init from a seeded RNG: conv weight kaiming_normal_(mode=fan_out, relu), i.e.
 * N(0, 2/(cout*kh*kw)); BN weight 1, bias 0, running mean 0, var 1; linear weight and bias
 * U(-1/sqrt(in), 1/sqrt(in)) (PyTorch's nn.Linear default). RNG: splitmix64 seeds xoshiro256**;
 * uniforms are (x >> 11) * 2^-53, normals by Box-Muller in double; tensors drawn in parameter
 * order, each normal tensor using both values of every Box-Muller pair (cos, then sin). Same seed,
 * same model -> the same parameters on every machine with a correctly rounded libm (log, sin, cos). */
void fp_model_init_params(fp_model *m, uint64_t seed);

/* ---- layers (metadata for the store) ---- */

typedef enum {
    FP_LAYER_CONV, FP_LAYER_BN, FP_LAYER_RELU, FP_LAYER_MAXPOOL, FP_LAYER_AVGPOOL,
    FP_LAYER_LINEAR, FP_LAYER_ADD, FP_LAYER_TYPE_COUNT
} fp_layer_type;

const char *fp_layer_type_name(fp_layer_type t);   /* "conv2d", "batchnorm2d", "relu", ... */

/* FLOP convention (per image): conv / linear forward = 2 x MACs (a multiply-add is 2 FLOPs; the
 * linear bias is not counted, as fvcore / torchvision's "GFLOPS" which are MACs); backward = 2 x
 * forward (data gradient + weight gradient; counted even where the data gradient is skipped).
 * batchnorm forward 2/element (scale + shift), relu 1/element, add 1/element, max-pool k*k per
 * output, global avg-pool 1 per input element; their backward = 2 x forward as well. */
typedef struct {
    int index;
    const char *name;        /* torchvision module name; repeated relus get "_1", "_2", add is "<block>.add" */
    fp_layer_type type;
    fp_dims in, out;         /* per image (n = 1); avgpool / linear outputs are [1, 1, 1, c] */
    fp_dims in2;             /* add: the second input; zeros otherwise */
    int k, stride, pad;      /* conv / maxpool; 0 otherwise */
    size_t params;           /* trainable scalars of this layer */
    double macs;             /* per image, conv / linear only (0 otherwise) */
    double fwd_flops, bwd_flops;  /* per image, convention above */
} fp_layer_info;

int fp_model_layer_count(const fp_model *m);
const fp_layer_info *fp_model_layer(const fp_model *m, int i);   /* NULL when out of range */

/* ---- tensors: parameters (trainable) and buffers (BN running statistics) ---- */

typedef struct {
    const char *name;        /* "layer1.0.conv1.weight", "bn1.running_mean", "fc.bias" */
    int is_param;            /* 1: in the parameter / gradient buffers; 0: a running-stat buffer */
    int layer;               /* layer index */
    int rank;
    int64_t shape[4];        /* PyTorch's shape: conv weights [O, I, kh, kw] ... */
    int ohwi;                /* ... but stored OHWI (1 for conv weights): convert on load / save */
    size_t offset, numel;    /* floats into fp_model_params/grads (is_param) or fp_model_buffers */
} fp_tensor_info;

size_t fp_model_tensor_count(const fp_model *m);
const fp_tensor_info *fp_model_tensor(const fp_model *m, size_t i);  /* torchvision state_dict order */
const fp_tensor_info *fp_model_find_tensor(const fp_model *m, const char *name);
float *fp_model_tensor_data(fp_model *m, const fp_tensor_info *t);   /* its values */
float *fp_model_tensor_grad(fp_model *m, const fp_tensor_info *t);   /* NULL for buffers */

const char *fp_model_name(const fp_model *m);
size_t fp_model_num_params(const fp_model *m);     /* trainable scalars */
float *fp_model_params(fp_model *m);               /* all parameters, one buffer */
float *fp_model_grads(fp_model *m);                /* same layout */
size_t fp_model_num_buffers(const fp_model *m);    /* running-stat scalars */
float *fp_model_buffers(fp_model *m);
void fp_model_zero_grad(fp_model *m);
fp_dims fp_model_input_dims(const fp_model *m);    /* per image (n = 1) */
int fp_model_num_classes(const fp_model *m);
double fp_model_macs(const fp_model *m);           /* per image, conv + linear */
void fp_model_flops(const fp_model *m, double *fwd, double *bwd);  /* per image, all layers */

/* OIHW (PyTorch) <-> OHWI (ours) for a conv weight. No aliasing. */
void fp_oihw_to_ohwi(float *dst, const float *src, int o, int i, int kh, int kw);
void fp_ohwi_to_oihw(float *dst, const float *src, int o, int i, int kh, int kw);

/* ---- backends (trainer/backend.h; model_device.c) ----
 * A model is built on the CPU backend and may move onto another one, a device backend (host_memory 0,
 * e.g. CUDA) included. There, parameters, gradients and running statistics live in backend memory and
 * the host buffers of the accessors above are mirrors, synchronised lazily: fp_model_params / grads /
 * buffers / tensor_data / tensor_grad download what the device changed since (returning NULL, with the
 * message set, when that fails) and mark the part as possibly written by the host, so that the next
 * forward / backward uploads it. Keep no such pointer across a step of a device model: ask again.
 * On a host backend all of this costs nothing and every pointer is the host buffer itself. */
struct fp_backend_ops;
struct fp_backend;
/* Moves m (finished) onto ops, using the instance be (owned by the model from now on) or, be NULL, a
 * new one from ops->create. Values are kept; plans, gradient blocks and the weight copy are remade on
 * the new backend; a shared parameter buffer becomes the model's own. On failure m is back on the CPU
 * backend and the message names the backend (FP_EUNAVAIL: no device; FP_ENOMEM names what and bytes). */
int fp_model_set_backend(fp_model *m, const struct fp_backend_ops *ops, struct fp_backend *be);
const struct fp_backend_ops *fp_model_backend_ops(const fp_model *m);
struct fp_backend *fp_model_backend(const fp_model *m);
/* Downloads every part the device holds newer (checkpoints, reports): afterwards the host buffers are
 * current without marking them written. / Uploads every part handed out to the host for writing. */
int fp_model_sync_to_host(fp_model *m);
int fp_model_sync_to_device(fp_model *m);
/* Backend-memory views (device pointers on a device backend) for code that runs on the backend itself
 * (the device optimizer, kernels.h): uploads what the host wrote first, then marks the part as changed
 * on the device (the next host access downloads it). NULL on failure. Same layout as the host buffers. */
float *fp_model_backend_params(fp_model *m);
float *fp_model_backend_grads(fp_model *m);
float *fp_model_backend_buffers(fp_model *m);
/* Read-only backend-memory views of the parameters and gradients (for the parameter pass on the device,
 * analysis.h): uploads what the host wrote first, marks nothing (the host mirrors stay as they are; the caller
 * must not write through them). NULL on failure. */
const float *fp_model_backend_params_view(fp_model *m);
const float *fp_model_backend_grads_view(fp_model *m);
struct fp_probe;
/* Hands cnt fp32 values at x, memory of m's backend (a view above, or a block from its alloc), to probe p as
 * (layer, role: an fp_tensor_role of lib/store.h), a role the caller delivers (fp_probe_caller_roles): on a
 * device backend with a hist op and no backend of p needing the role as values (fp_probe_wants_values_all),
 * counted where they lie (only the counts come back); else downloaded into the model's probe staging (on a host
 * backend: x itself) and handed as values. Outside a step or when p does not want the role nothing happens.
 * FP_EINVAL for a NULL model or tensor; FP_ENOMEM or the backend's error when they could not be handed (nothing
 * recorded then). */
int fp_model_probe_backend(fp_model *m, struct fp_probe *p, int layer, int role, const float *x, size_t cnt);

/* ---- running ---- */

typedef enum { FP_MODE_TRAIN, FP_MODE_EVAL } fp_mode;

/* Forward of a batch x (NHWC [n, h, w, 3], copied in). TRAIN: BN uses batch statistics, updates the
 * running statistics (momentum 0.1, eps 1e-5), and everything backward needs is kept. EVAL: running
 * statistics, activations reused as soon as they are dead, no backward. The logits [n, classes]
 * stay valid until the next forward. The first call at a new (mode, n) plans the activation memory. */
int fp_model_forward(fp_model *m, const float **logits, const float *x, int n, fp_mode mode);

/* A forward like EVAL (no backward state, running statistics untouched) in which every batchnorm asks
 * the caller what to normalise with: stats(ctx, layer, input_layer, x, rows, c, mean, var) gets the
 * layer's input widened to fp32 (rows = n*h*w values per channel, NHWC; input_layer: the layer that
 * produced it, -1 for the image) and writes c means and c (biased) variances; non-zero stops the
 * forward with that code. The probe's tensor hooks receive the layer outputs as at a TRAIN sampling
 * step. Host memory only (FP_EINVAL). For the rounding error of one precision against another on
 * the same normalisation (trainer/analysis/analysis.h). */
typedef int (*fp_bn_stats_fn)(void *ctx, int layer, int input_layer, const float *x, size_t rows, int c, float *mean,
                              float *var);
int fp_model_forward_bn_stats(fp_model *m, const float **logits, const float *x, int n, fp_bn_stats_fn stats,
                              void *ctx);
/* The mean and biased variance batchnorm `layer` normalised with in m's last TRAIN forward (the
 * variance recovered from the saved 1/sqrt(var + eps)); host memory. FP_EINVAL otherwise. */
int fp_model_bn_batch_stats(const fp_model *m, int layer, float *mean, float *var);

/* Backward of the last TRAIN forward: dlogits [n, classes]; ACCUMULATES into the gradient buffer
 * (call fp_model_zero_grad first, as optimizer.zero_grad()). FP_EINVAL after an EVAL forward.
 * Loss scaling is the caller's: dlogits must already be multiplied by the scale (fp32; they are
 * rounded to the activation-gradient format as they enter the 16-bit domain, so a scale too large
 * gives Inf there), and the parameter gradients come out scaled — unscale them with
 * fp_unscale_and_check (precision.h), which also reports Inf / NaN. */
int fp_model_backward(fp_model *m, const float *dlogits);

/* Gradient-ready hook (data parallel's bucketed all-reduce rides on it, trainer/dist/dist.h): during every
 * backward, fn(ctx, layer, offset, count) once per layer with parameters, in backward order (last layer first),
 * as soon as that layer's parameter gradients [offset, offset + count) of the gradient buffer are final (a
 * layer the loss does not reach: its zeros, at once). On a device backend the ops that write them are queued on
 * the backend's stream, not necessarily done; under a `half` policy they are already rounded to the master
 * format. A non-zero return stops the backward with that code. fn NULL removes it. */
typedef int (*fp_model_grad_ready_fn)(void *ctx, int layer, size_t offset, size_t count);
void fp_model_set_grad_ready(fp_model *m, fp_model_grad_ready_fn fn, void *ctx);

/* Synchronised batchnorm (data parallel's --sync-bn, PyTorch's SyncBatchNorm; trainer/model_sync_bn.c): with fn
 * set, every TRAIN forward's batchnorm normalises with the mean and variance of the global batch (every rank's
 * shard) and updates the running statistics from them (unbiased variance with the global count), and the
 * backward's input gradient uses the globally summed sum(dy) and sum(dy * xhat); dgamma and dbeta stay this
 * rank's (the gradient all-reduce averages them with the rest, as DDP does). fn(ctx, buf, count) replaces
 * buf[0..count) in place by the sum over the ranks of every rank's buf: fp32 backend memory (host memory on
 * the CPU backend; on a device backend device memory, the sum queued on the backend's stream). Every rank
 * calls it in the same order: twice per batchnorm in the forward (the sums, then the sums centred on the
 * global mean: the two-pass variance), once in the backward where dx is computed. A non-zero return stops
 * the pass with that code. fn NULL (the default): per-rank statistics. EVAL forwards never call it. */
typedef int (*fp_model_bn_reduce_fn)(void *ctx, float *buf, size_t count);
void fp_model_set_bn_reduce(fp_model *m, fp_model_bn_reduce_fn fn, void *ctx);

/* forward (TRAIN) + softmax cross-entropy (mean) with the loss gradient (times loss_scale) kept in
 * backend memory, and no backward yet (the caller may stop on a non-finite loss); labels are host
 * memory (uploaded on a device backend). backward_loss: the backward of that gradient. */
int fp_model_forward_loss(fp_model *m, float *loss, int *correct1, int *correct5, const float *x, const int *labels,
                          int n, float loss_scale);
int fp_model_backward_loss(fp_model *m);

/* forward (TRAIN) + softmax cross-entropy (mean) + backward; loss, top-1 / top-5 hits (may be NULL). */
int fp_model_train_step(fp_model *m, float *loss, int *correct1, int *correct5, const float *x, const int *labels,
                        int n);
/* The same with the loss scaled by loss_scale for the backward (scaler.scale(loss).backward()):
 * *loss is the unscaled loss, the gradients come out multiplied by loss_scale. */
int fp_model_train_step_scaled(fp_model *m, float *loss, int *correct1, int *correct5, const float *x,
                               const int *labels, int n, float loss_scale);

/* ---- precision policy (precision.h; default fp32, bit-identical to the plain fp32 model) ----
 * Under a policy, forward and backward follow PyTorch's CUDA autocast, emulated with values
 * rounded exactly as the format rounds (lib/numfmt.h) and fp32 accumulation in the same kernels:
 *  - conv / linear: activation and weight (linear bias too) rounded to `compute`, fp32 GEMM, output
 *    rounded to `activation` (tf32: output stays fp32). The rounded weight copy is made once per
 *    forward. Backward: dy and x rounded to `compute`; the weight (bias) gradient of the 16-bit copy
 *    is rounded to `compute` and then added into the fp32 gradient buffer (autocast's cast
 *    backward); dx rounded to `activation_grad`.
 *  - batchnorm: fp32 parameters and statistics, computed in fp32, output in its input's format;
 *    relu, add, max-pool, avg-pool: computed in fp32, output in the input's format (so under fp16
 *    everything after conv1 is fp16; the fp32 input image is rounded at conv1).
 *  - the logits are widened to fp32 for the loss (fp_model_forward returns fp32 logits).
 *  - storage: 16-bit tensors (activations, the ones saved for backward, activation gradients) are
 *    really stored in 16 bits and widened into a small reused fp32 scratch around each kernel;
 *    overflow gives Inf (from 65520 up in fp16) and propagates as on a GPU.
 *  - `half` (master fp16, model.half()): set_policy rounds parameters and running statistics to
 *    fp16; the parameter gradients are rounded to fp16 at the end of backward; running statistics
 *    are rounded after each update. BN still computes its batch statistics in fp32 internally. The
 *    values live in fp32 containers (fp_model_memory reports what is allocated: 4 bytes each); the
 *    training loop keeps weights and optimizer state fp16 with fp_round_to_dtype after each step.
 * The policy is copied (its name string must outlive the model); the activation plans are rebuilt
 * at the next forward. FP_EINVAL for an unfinished model or a policy whose activation and
 * activation_grad differ; FP_ENOMEM. NULL means fp32. */
int fp_model_set_policy(fp_model *m, const fp_policy *p);
const fp_policy *fp_model_policy(const fp_model *m);

/* Copies the output of layer `layer` from the last forward, widened to fp32, into dst (cap values;
 * dst NULL: only the count) and its storage format into *stored (may be NULL). It is what the
 * storage holds now: a later in-place node (relu, add) or, in EVAL, memory reuse may have written
 * over it. Returns the value count (batch included) or a negative FP_E* code. For tests. */
int fp_model_layer_output(fp_model *m, int layer, float *dst, size_t cap, fp_dtype *stored);
/* 1 when the output of `layer` that a TRAIN forward hands to the probe (activation role) stays in
 * host memory unchanged until the next backward or forward: its storage is kept for the backward and
 * no later node writes into it (in place); 0 otherwise (device memory, or overwritten later). Lets a
 * probe read it after the forward instead of copying it while the forward runs. */
int fp_model_output_kept(const fp_model *m, int layer);

/* ---- probes (probe/probe.h) ----
 * With a probe set, every layer's work is bracketed by fp_probe_layer_begin / end: forward; in
 * backward, conv and linear as backward_weights then backward_data (none for a layer whose input
 * needs no gradient), every other layer as backward_data. At a sampling step (fp_probe_wants != 0,
 * TRAIN forwards only) the tensor hook receives, per layer: its output (activation; 16-bit storage
 * handed over as stored through fp_probe_tensor_dt) and its parameters (weight: the fp32 master values of all
 * the layer's parameters, in parameter order) after its forward; the gradient of its output
 * (activation_grad, as scaled) before its backward, and its accumulated parameter gradient
 * (weight_grad, fp32 buffer, as scaled) after it. NULL removes the probe (one pointer check left). */
struct fp_probe;
void fp_model_set_probe(fp_model *m, struct fp_probe *p);
struct fp_probe *fp_model_probe(const fp_model *m);

/* The parameters of layer `layer`: offset and count (floats) into fp_model_params / grads, all of
 * the layer's parameters contiguous (count 0 for layers without). FP_EINVAL when out of range. */
int fp_model_layer_params(const fp_model *m, int layer, size_t *offset, size_t *count);
/* The storage format of layer `layer`'s output under the current policy (FP_DT_F32 when out of range). */
fp_dtype fp_model_layer_dtype(const fp_model *m, int layer);
/* A new model of the same architecture (nodes, names), with a copy of the parameters and running
 * statistics, policy fp32, no probe. FP_ENOMEM. */
int fp_model_clone(fp_model **out, const fp_model *m);
/* A clone of m (as fp_model_clone) under `policy` (NULL: fp32) on backend instance be of table ops (be NULL: a new
 * instance from ops->create; be is taken over: destroyed with the clone, or at once on failure). When m lies on
 * a device of the same table, its parameters and running statistics are copied device to device
 * (fp_model_mirror_params), m's host mirrors untouched; otherwise through m's host values. For scratch models
 * of the analysis on an arm's GPU (trainer/analysis). FP_EINVAL, FP_ENOMEM, the backend's errors. */
struct fp_backend_ops;
struct fp_backend;
int fp_model_clone_to(fp_model **out, fp_model *m, const fp_policy *policy, const struct fp_backend_ops *ops,
                      struct fp_backend *be);
/* dst and src of one architecture, both on device backends of one table (FP_EINVAL otherwise): dst's parameters
 * and running statistics become src's, copied device to device on dst's instance after src's instance finished
 * its queued work (one wait for src's stream; nothing comes to the host), rounded to dst's master format when
 * that is 16-bit (`half`, as fp_model_set_policy rounds). dst's host mirrors are then behind (downloaded when
 * read). */
int fp_model_mirror_params(fp_model *dst, fp_model *src);
/* fp_model_forward without the logits: on a device backend the work stays queued on its stream (no download,
 * no wait); the probe hooks run as in fp_model_forward. */
int fp_model_forward_queued(fp_model *m, const float *x, int n, fp_mode mode);
/* An upper bound of the backend memory (bytes) a copy of m on a device backend holds to run TRAIN forwards of n
 * images under its current policy (parameters, gradient buffer, statistics, weight copy, activations, staging),
 * for sizing a device arena; 0 for n < 1. */
size_t fp_model_device_bytes(const fp_model *m, int n);
/* Copies m's parameters (and running statistics) into dst, a model of the same architecture
 * (FP_EINVAL otherwise). */
int fp_model_copy_params(fp_model *dst, const fp_model *m, int with_buffers);
/* dst reads src's parameters in place (no copy) until the next fp_model_copy_params into dst, and
 * gets a copy of src's buffers (running statistics). For forward passes only: dst must not be trained
 * or have its parameters written while sharing, and src must outlive the sharing. FP_EINVAL when the
 * architectures differ or dst's policy rounds its parameters (`half`). */
int fp_model_share_params(fp_model *dst, fp_model *src);

/* Scratch threads hint passed to the kernels' workspace (>= 1). */
void fp_model_set_threads(fp_model *m, int threads);
/* Fusion (trainer/model_fuse.c): batchnorm -> relu and batchnorm -> add -> relu chains whose intermediate
 * values nothing else reads run as the backend's fused op (backend.h bn_act_*) in TRAIN forwards that the
 * probes sample nothing from (and in their backwards, unless those sample). Sampled, EVAL and caller-
 * statistics forwards run every node, so probes see each layer's own output. After a fused forward the
 * chain's batchnorm and add outputs were not written: fp_model_layer_output refuses them (FP_EINVAL).
 * on: 1 / 0; -1 (the default): on for device backends, off for the CPU backend (docs/design.md).
 * fp_model_fusion: the chains the backend fuses (found at the TRAIN plan's build; 0 before one), in
 * *fused_last how many ran fused in the last forward, in *on whether fusion is on (either may be NULL). */
void fp_model_set_fusion(fp_model *m, int on);
int fp_model_fusion(const fp_model *m, int *fused_last, int *on);

/* ---- memory (bytes) ---- */
typedef struct {
    size_t params, grads, buffers;      /* fixed once built */
    size_t activations, activations_peak;   /* planned activation arenas (all modes held) */
    size_t saved, saved_peak;           /* of which: kept for backward by the last TRAIN plan
                                         * (activations, argmax, BN mean/invstd) */
    size_t act_grads, act_grads_peak;   /* activation-gradient buffers live during backward */
    size_t workspace, workspace_peak;   /* im2col scratch, plus (low-precision policies) the casts below */
    size_t casts;                       /* of which: fp32 scratch that widens 16-bit tensors around the
                                         * kernels and holds a weight gradient before rounding */
    size_t weight_copy;                 /* conv / linear weights rounded to the compute format, fp32
                                         * containers (0 under fp32); not in the figures above */
} fp_model_mem;
void fp_model_memory(const fp_model *m, fp_model_mem *out);

/* ---- weights in safetensors (torchvision names; conv weights OIHW in the file) ---- */
struct fp_st;
/* Loads every parameter and running statistic from an open file (shapes must match; a missing
 * tensor or a mismatch -> FP_EFORMAT naming file and tensor). `num_batches_tracked` entries and,
 * with allow_extra, any tensor the model does not have are ignored; otherwise an unknown tensor is
 * FP_EFORMAT. */
int fp_model_load_st(fp_model *m, const struct fp_st *st, int allow_extra);
int fp_model_load(fp_model *m, const char *path);   /* strict */
int fp_model_save(const fp_model *m, const char *path);

#endif
