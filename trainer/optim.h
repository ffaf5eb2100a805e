/* optim.h — SGD (momentum, nesterov, weight decay, dampening 0), Adam and AdamW on fp32 master
 * weights with fp32 state, following PyTorch 1.13's single-tensor ("for-loop") update rules
 * operation by operation; state is owned here and exported / imported by name for checkpoints. */
#ifndef FP_OPTIM_H
#define FP_OPTIM_H

#include <stddef.h>
#include <stdint.h>

typedef enum { FP_OPTIM_SGD, FP_OPTIM_ADAM, FP_OPTIM_ADAMW, FP_OPTIM_KIND_COUNT } fp_optim_kind;

/* Hyperparameters (everything but the learning rate, which each step receives).
 * SGD:   d = g (+ weight_decay * p);  buf = d on the first step, else momentum * buf + d;
 *        d = nesterov ? d + momentum * buf : buf (when momentum != 0);  p -= lr * d.
 * Adam:  g (+ weight_decay * p) — L2 folded into the gradient, as torch.optim.Adam does;
 *        m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g g;
 *        p += -(lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * AdamW: p *= 1 - lr * weight_decay (decoupled), then Adam's update without L2.
 * Weight decay applies only to tensors whose apply_weight_decay flag is set.
 * Rounding: on a CPU with FMA, results are bit-identical to torch 1.13's CPU kernels (which fuse
 * add-with-alpha and addcmul into FMAs); elsewhere, or with the environment variable
 * FP_OPTIM_FMA=0 when the optimizer is created, those ops round twice (<= 1 ulp each). */
typedef struct {
    fp_optim_kind kind;
    double momentum;      /* SGD, >= 0 (0: plain SGD, no state) */
    int nesterov;         /* SGD, needs momentum > 0 (dampening is always 0) */
    double weight_decay;  /* >= 0 */
    double beta1, beta2;  /* Adam/AdamW, each in [0, 1) */
    double eps;           /* Adam/AdamW, >= 0 */
} fp_optim_config;

/* PyTorch's defaults for kind: SGD momentum 0, weight decay 0; Adam betas (0.9, 0.999), eps 1e-8,
 * weight decay 0; AdamW the same with weight decay 1e-2. */
void fp_optim_config_default(fp_optim_config *cfg, fp_optim_kind kind);

/* FP_OK, or FP_EINVAL with a message naming the bad hyperparameter (NaN, negative momentum or
 * weight decay, betas outside [0, 1), eps < 0, nesterov without momentum, unknown kind). */
int fp_optim_config_check(const fp_optim_config *cfg);

/* "sgd", "adam", "adamw" (case-sensitive) -> kind; anything else FP_EINVAL with a message that
 * lists the valid choices. */
int fp_optim_parse(const char *name, fp_optim_kind *out);
const char *fp_optim_name(fp_optim_kind kind);   /* "sgd", ... ("?" when invalid) */

/* One parameter tensor. param is updated in place; grad is read only. Both are fp32 and must stay
 * valid while the optimizer uses them (see fp_optim_rebind). name (copied; NULL gives "<index>")
 * names the tensor's state for export: "<name>.momentum_buffer", "<name>.exp_avg",
 * "<name>.exp_avg_sq", as PyTorch's state_dict keys them. */
typedef struct {
    const char *name;
    float *param;
    const float *grad;
    size_t n;
    int apply_weight_decay;
} fp_optim_param;

typedef struct fp_optim fp_optim;

/* Creates an optimizer over count tensors (count >= 1; a tensor may have n == 0). Checks cfg,
 * NULL pointers with n > 0, the same param pointer or name twice. Allocates zeroed state. */
int fp_optim_new(fp_optim **out, const fp_optim_config *cfg, const fp_optim_param *params,
                 size_t count);
void fp_optim_free(fp_optim *opt);               /* NULL is fine */

/* One update of every tensor with learning rate lr (finite, >= 0; else FP_EINVAL and nothing
 * changes). Increments the step counter first, as PyTorch does. */
int fp_optim_step(fp_optim *opt, double lr);

/* The same step in parts, for work done on each part while it is in cache (the probes' parameter
 * pass): fp_optim_step_begin checks lr and counts the step as fp_optim_step does; then
 * fp_optim_step_part(b, e) updates elements [b, e) of the flat range (every tensor in the order given
 * to fp_optim_new, fp_optim_size elements in all). Each element exactly once before the next step;
 * parts that do not overlap may run on different threads. The values are fp_optim_step's, bit for bit. */
int fp_optim_step_begin(fp_optim *opt, double lr);
void fp_optim_step_part(fp_optim *opt, size_t b, size_t e);
/* As fp_optim_step_part, also writing each element's update as it landed, delta[k - b] = new - old in
 * fp32 (0 where rounding lost it), for elements k in [b, e) (clamped to fp_optim_size). */
void fp_optim_step_part_delta(fp_optim *opt, size_t b, size_t e, float *delta);
size_t fp_optim_size(const fp_optim *opt);
/* 1 when tensor i's parameters are base + (its offset in the flat range) for every tensor: flat
 * element k is base[k]. */
int fp_optim_laid_out_from(const fp_optim *opt, const float *base);

/* Points tensor i at new param / grad storage (same n); state is kept. */
int fp_optim_rebind(fp_optim *opt, size_t i, float *param, const float *grad);

const fp_optim_config *fp_optim_get_config(const fp_optim *opt);
size_t fp_optim_param_count(const fp_optim *opt);

/* ---- state for checkpoints: a step counter plus a flat list of named fp32 arrays ----
 * SGD with momentum: one "<name>.momentum_buffer" per tensor; Adam/AdamW: "<name>.exp_avg" and
 * "<name>.exp_avg_sq" per tensor (in tensor order); plain SGD: none. Before the first step the
 * arrays are zero (PyTorch has no state yet; SGD's buffer is then initialised from the first
 * gradient, which the step counter 0 tells). */
int64_t fp_optim_get_step(const fp_optim *opt);
int fp_optim_set_step(fp_optim *opt, int64_t step);      /* step >= 0, else FP_EINVAL */

typedef struct {
    const char *name;    /* owned by the optimizer */
    float *data;         /* the live state: read it to export, write it to import */
    size_t n;
} fp_optim_state;

size_t fp_optim_state_count(const fp_optim *opt);
/* The i-th entry; FP_EINVAL when i is out of range. */
int fp_optim_state_at(const fp_optim *opt, size_t i, fp_optim_state *out);
/* Copies n floats into the entry called name: FP_EFORMAT with a message naming it when there is
 * no such entry or n differs from its size. */
int fp_optim_state_load(fp_optim *opt, const char *name, const float *data, size_t n);

#endif
