/* probe.h — the one probe interface the trainer calls (step begin/end, layer begin/end per phase,
 * tensors at sampling steps) and the probe backends that plug in behind it as small ops tables.
 * Promises: a probe set fans every call out to its backends in the order they were added; a NULL
 * probe costs the caller one pointer check; nothing here prints or exits; a backend that cannot
 * measure (no permission, no device) says "unavailable" with a reason and yields NULL, never 0. */
#ifndef FP_PROBE_H
#define FP_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include "store.h"   /* fp_phase, fp_tensor_role, fp_layer_time_t, fp_store_t */
#include "dtype.h"
#include "hist.h"    /* fp_hist_t: ready histograms */

/* Sampling defaults, chosen so that the default run stays within 3% of the probes-off step time
 * on the CPU (bench/bench_probe_overhead.c measures it): histograms of every layer's tensors every
 * FP_PROBE_DEFAULT_HIST_EVERY steps, kernel-level rows (CUPTI) every FP_PROBE_DEFAULT_TRACE_EVERY
 * steps, per-layer rounding error every FP_PROBE_DEFAULT_PRECISION_EVERY steps. Per-layer times
 * are taken every step. Measured on the default comparison's two arms (ResNet-50 64x64 batch 16,
 * fp32 + fp16, 2 cores; bench/bench_probe_overhead.c): a sampled step costs both arms together
 * ~60-85 ms of histograms and parameter passes and ~45-60 ms for the precision error riding on the
 * fp32 arm, against ~600-700 ms for one step of each, so every 10 is ~1.7-2.2% and every 50 ~0.4%;
 * the timers cost < 0.5% (within the noise). */
#define FP_PROBE_DEFAULT_HIST_EVERY 50
#define FP_PROBE_DEFAULT_TRACE_EVERY 100
#define FP_PROBE_DEFAULT_PRECISION_EVERY 50

#define FP_PROBE_MAX_BACKENDS 16

/* Role masks: which tensors a backend wants at this step (bit 1 << fp_tensor_role). */
#define FP_PROBE_ROLE_BIT(r) (1u << (unsigned)(r))
#define FP_PROBE_ALL_ROLES ((1u << FP_ROLE_COUNT) - 1u)

/* A backend: every hook is optional (NULL). `self` is the backend's own state, owned by whoever
 * created it (the set never frees it).
 *  step_begin  returns the mask of tensor roles it wants handed to `tensor` during this step
 *              (0: none). loss_scale is the scale in effect for this step's backward (1 without).
 *  layer_begin / layer_end bracket one layer's work in one phase (forward; backward_data;
 *              backward_weights — conv and linear only, other layers' backward is backward_data).
 *  tensor      x holds n fp32 values (16-bit storage already widened); valid only during the call.
 *              Gradients (activation_grad, weight_grad) are as computed, i.e. multiplied by
 *              loss_scale; updates (new - old master weight) are unscaled. During
 *              fp_probe_sample_params (analysis.h) tensor / tensor16 calls of the roles weight,
 *              weight_grad and update for DISTINCT layers may run at the same time on two threads
 *              (each layer's calls on one thread, in order): a backend that wants those roles keeps
 *              per-layer state per layer and its scratch per call (hist_probe.c does).
 * A backend added with fp_probe_add16 also has a tensor16 hook: a tensor stored in 16 bits (dt
 * FP_DT_F16 or FP_DT_BF16) as its raw bit patterns, same rules as tensor; it gets 16-bit tensors
 * there, never widened through tensor. */
typedef struct {
    const char *name;
    unsigned (*step_begin)(void *self, int64_t step, float loss_scale);
    void (*step_end)(void *self, int64_t step);
    void (*layer_begin)(void *self, int layer, fp_phase phase);
    void (*layer_end)(void *self, int layer, fp_phase phase);
    void (*tensor)(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale);
} fp_probe_ops;

typedef void (*fp_probe_tensor16_fn)(void *self, int layer, fp_tensor_role role, const uint16_t *x, fp_dtype dt,
                                     size_t n, float loss_scale);

typedef struct fp_probe fp_probe;

int fp_probe_create(fp_probe **out);
void fp_probe_free(fp_probe *p);   /* NULL is fine; the backends are not freed */
/* Adds a backend (at most FP_PROBE_MAX_BACKENDS): FP_EINVAL when full or ops is NULL. */
int fp_probe_add(fp_probe *p, const fp_probe_ops *ops, void *self);
/* As fp_probe_add, with a tensor16 hook (ops->tensor may then be NULL). */
int fp_probe_add16(fp_probe *p, const fp_probe_ops *ops, fp_probe_tensor16_fn tensor16, void *self);
int fp_probe_backend_count(const fp_probe *p);

/* A training step. Layer and tensor calls outside step_begin .. step_end are ignored (evaluation
 * forwards between steps are not timed into a step). */
void fp_probe_step_begin(fp_probe *p, int64_t step, float loss_scale);
void fp_probe_step_end(fp_probe *p);
void fp_probe_set_loss_scale(fp_probe *p, float loss_scale);   /* changes the scale mid-step */
int64_t fp_probe_current_step(const fp_probe *p);              /* -1 outside a step */
float fp_probe_loss_scale(const fp_probe *p);

void fp_probe_layer_begin(fp_probe *p, int layer, fp_phase phase);
void fp_probe_layer_end(fp_probe *p, int layer, fp_phase phase);
/* The roles some backend wants now from the model (0 outside a step or at a non-sampling step): the
 * model hands a tensor over only when its role is wanted (16-bit ones as stored, through
 * fp_probe_tensor_dt). Roles the caller delivers itself (fp_probe_caller_roles) are left out. */
unsigned fp_probe_wants(const fp_probe *p);
/* Every role some backend wants now, the caller's included. */
unsigned fp_probe_wants_all(const fp_probe *p);
/* Roles the caller hands over itself from now on (e.g. the parameter roles, in one pass after the
 * optimizer step: analysis.h fp_probe_sample_params); fp_probe_wants stops reporting them to the
 * model, fp_probe_tensor still delivers them. 0 (the default): the model delivers every role. */
void fp_probe_caller_roles(fp_probe *p, unsigned roles);
/* Hands the tensor to every backend that wants its role this step. Safe to call from two threads at
 * once for distinct layers (it only reads the set), as fp_probe_sample_params does. */
void fp_probe_tensor(fp_probe *p, int layer, fp_tensor_role role, const float *x, size_t n);
/* The same for a tensor in its storage format dt (FP_DT_F32: as fp_probe_tensor; FP_DT_F16 /
 * FP_DT_BF16: x holds the bit patterns): backends with a tensor16 hook get it as stored, the others get it
 * widened once into a buffer the probe set owns (grown on demand, kept). FP_ENOMEM when that buffer
 * cannot grow (those backends then miss this tensor); FP_EINVAL for another dt. */
int fp_probe_tensor_dt(fp_probe *p, int layer, fp_tensor_role role, const void *x, fp_dtype dt, size_t n);

/* ---- ready histograms (a device counted the tensor: no download) ----
 * A backend added with fp_probe_add_hist also takes a tensor as its exponent histogram (lib/hist.h),
 * counted by the caller on the values exactly as `tensor` / `tensor16` would have received them
 * (fp_hist_add / fp_hist_add_f16 / _bf16 of the tensor as stored; gradients as computed, at
 * loss_scale): every count, amax and min_nonzero those of the values, sum_abs up to summation order.
 * h is valid only during the call. */
typedef void (*fp_probe_hist_fn)(void *self, int layer, fp_tensor_role role, const fp_hist_t *h, float loss_scale);
/* As fp_probe_add16, with a hist hook (tensor16 may be NULL). */
int fp_probe_add_hist(fp_probe *p, const fp_probe_ops *ops, fp_probe_tensor16_fn tensor16, fp_probe_hist_fn hist,
                      void *self);
/* Of the roles fp_probe_wants reports, those the caller must hand as values (fp_probe_tensor / _dt):
 * roles some backend without a hist hook wants, and the weight gradient while the loss scale is not 1
 * (backends record weight gradients unscaled, which a histogram of the scaled values cannot give).
 * The other wanted roles may go as ready histograms (fp_probe_tensor_hist). */
unsigned fp_probe_wants_values(const fp_probe *p);
/* The same with the caller's roles (fp_probe_caller_roles) included. */
unsigned fp_probe_wants_values_all(const fp_probe *p);
/* Hands a ready histogram of (layer, role) to every backend that wants the role this step. Nothing
 * happens outside a step or when the role is not wanted; FP_EINVAL (nothing handed, message set) when
 * the role is one fp_probe_wants_values reports (hand the values instead) or h is NULL. */
int fp_probe_tensor_hist(fp_probe *p, int layer, fp_tensor_role role, const fp_hist_t *h);

/* ---- tensors where they lie (a device: no download) ----
 * A backend added with fp_probe_add_in_place takes the tensors it wants where the model keeps them: the
 * in_place hook gets x in the memory of the model's backend (mem: that backend's table and instance,
 * trainer/backend.h fp_backend_ops / fp_backend, opaque here; host 1 when the host may read x, i.e. the
 * table's host_memory), in its storage format dt (FP_DT_F32, or FP_DT_F16 / FP_DT_BF16 bit patterns), valid
 * only during the call; on a device, work the backend queued that writes x may still be running on its
 * stream (read it on that stream). Such a backend never gets tensors through tensor / tensor16 / hist (those
 * hooks are not called), and its wants do not count in fp_probe_wants_values. The model hands each tensor
 * whose role some in-place backend wants to fp_probe_tensor_in_place first, then, when fp_probe_wants_copies
 * says another backend wants the role, as before (values or a histogram). */
typedef struct {
    const void *ops;   /* const fp_backend_ops * */
    void *instance;    /* fp_backend * */
    int host;          /* 1: host-readable memory */
} fp_probe_mem;
typedef void (*fp_probe_in_place_fn)(void *self, int layer, fp_tensor_role role, const void *x, fp_dtype dt,
                                     size_t n, float loss_scale, const fp_probe_mem *mem);
int fp_probe_add_in_place(fp_probe *p, const fp_probe_ops *ops, fp_probe_in_place_fn in_place, void *self);
/* Roles some in-place backend wants now (outside a step: 0; the caller's roles left out, as fp_probe_wants). */
unsigned fp_probe_wants_in_place(const fp_probe *p);
/* Roles some other backend wants now (the ones fp_probe_tensor / _dt / _hist serve). */
unsigned fp_probe_wants_copies(const fp_probe *p);
/* Hands x (where it lies, see above) to every in-place backend that wants role this step. */
void fp_probe_tensor_in_place(fp_probe *p, int layer, fp_tensor_role role, const void *x, fp_dtype dt, size_t n,
                              const fp_probe_mem *mem);

/* 1 when step is a sampling step of period `every` (every <= 0: never; step 0 always samples). */
int fp_probe_every(int64_t step, int every);

/* ---- CPU wall time per layer and phase (cpu_timer.c) ----
 * CLOCK_MONOTONIC around every layer_begin / layer_end of a step, accumulated per (layer, phase);
 * the kernel count of a row is the number of layer calls it accumulated. After step_end the table
 * holds one row per (layer, phase) that ran, in layer then phase order, ready for fp_store_step. */
typedef struct fp_cpu_timer fp_cpu_timer;
int fp_cpu_timer_create(fp_cpu_timer **out, int nlayers);
void fp_cpu_timer_free(fp_cpu_timer *t);
int fp_cpu_timer_attach(fp_cpu_timer *t, fp_probe *p);
/* The rows of the last finished step (valid until the next step_end); returns their count. */
size_t fp_cpu_timer_rows(const fp_cpu_timer *t, const fp_layer_time_t **rows);
int64_t fp_cpu_timer_step_ns(const fp_cpu_timer *t);   /* step_begin .. step_end of the last step; -1 none */
/* Sum of the last step's rows of one phase (-1 for all phases). */
int64_t fp_cpu_timer_phase_ns(const fp_cpu_timer *t, int phase);

/* ---- hardware counters (perf_counters.c): cycles and instructions of this process ----
 * Opened with perf_event_open (user space only, inherited by threads created later). When the
 * kernel refuses (perf_event_paranoid, seccomp, no PMU), the object still exists and says why. */
typedef struct fp_perf fp_perf;
int fp_perf_open(fp_perf **out);          /* FP_OK (even when unavailable) or FP_ENOMEM */
void fp_perf_close(fp_perf *pc);
int fp_perf_available(const fp_perf *pc);
const char *fp_perf_reason(const fp_perf *pc);   /* "" when available */
/* Totals since open: FP_OK, or FP_EUNAVAIL with both set to -1 (NULL in the store). */
int fp_perf_read(const fp_perf *pc, int64_t *cycles, int64_t *instructions);
int fp_perf_attach(fp_perf *pc, fp_probe *p);
/* Counts over the last finished step; -1 when unavailable. */
int fp_perf_step(const fp_perf *pc, int64_t *cycles, int64_t *instructions);

/* ---- energy from RAPL (rapl.c) ----
 * Sums the package zones <root>/intel-rapl:N/energy_uj (not their sub-zones, which the package
 * includes, nor a "psys" zone, which covers everything), unwrapping each counter with its
 * max_energy_range_uj. root NULL means /sys/class/powercap (tests point it at a fake tree). Unreadable
 * (no RAPL, or root-only since the 2020 Platypus fix) -> unavailable with a reason. */
typedef struct fp_rapl fp_rapl;
int fp_rapl_open(fp_rapl **out, const char *root);   /* FP_OK (even when unavailable) or FP_ENOMEM */
void fp_rapl_close(fp_rapl *r);
int fp_rapl_available(const fp_rapl *r);
const char *fp_rapl_reason(const fp_rapl *r);
int fp_rapl_zone_count(const fp_rapl *r);
/* Energy in joules since open (reads the counters now; call at least once per wrap period,
 * minutes at full load). NaN when unavailable. */
double fp_rapl_energy_j(fp_rapl *r);
int fp_rapl_attach(fp_rapl *r, fp_probe *p);
double fp_rapl_step_j(const fp_rapl *r);   /* energy of the last finished step; NaN when unavailable */

/* ---- process memory (process_mem.c) ---- */
int64_t fp_process_rss_bytes(void);        /* resident set from /proc/self/statm; -1 when unreadable */
int64_t fp_process_peak_rss_bytes(void);   /* VmHWM from /proc/self/status; -1 when unreadable */

/* ---- exponent histograms (hist_probe.c) ----
 * At steps where fp_probe_every(step, every): every role of every layer through lib/hist.h (fp16,
 * bf16, E4M3, E5M2 at once), one histogram per (layer, role) per step, written with fp_store_hist at
 * step_end when a store is given. Weight gradients are recorded UNSCALED (multiplied by 1/loss_scale
 * on the way in: exact for the power-of-two scales the GradScaler uses); activation gradients are
 * recorded as the backward holds them, at the loss scale of that step (what the 16-bit storage saw). */
typedef struct fp_hist_probe fp_hist_probe;
/* store may be NULL (histograms are only kept for fp_hist_probe_get). roles: mask of roles to take
 * (0 = all). */
int fp_hist_probe_create(fp_hist_probe **out, int nlayers, int every, unsigned roles, fp_store_t *store,
                         int64_t run);
void fp_hist_probe_free(fp_hist_probe *h);
int fp_hist_probe_attach(fp_hist_probe *h, fp_probe *p);
/* The caller's decision (the trainer's step plan, trainer/run/step_plan.h): the next step samples when
 * sample != 0. From the first call on the probe no longer applies its own period. */
void fp_hist_probe_sample_next(fp_hist_probe *h, int sample);
/* The histogram of (layer, role) at the last sampling step; NULL when none was taken. */
const fp_hist_t *fp_hist_probe_get(const fp_hist_probe *h, int layer, fp_tensor_role role);
int64_t fp_hist_probe_last_step(const fp_hist_probe *h);   /* -1 when none */
/* FP_OK, or the first error fp_store_hist returned. */
int fp_hist_probe_status(const fp_hist_probe *h);

/* ---- NVML (nvml.c): loaded with dlopen, own declarations, no nvml.h needed ----
 * Energy counter (mJ since driver load, read at turn boundaries after a device synchronize),
 * power, memory, clocks and temperature; a background thread samples them into device_samples. */
typedef struct fp_nvml fp_nvml;
/* lib NULL: "libnvidia-ml.so.1". FP_OK (even when unavailable) or FP_ENOMEM. */
int fp_nvml_open(fp_nvml **out, const char *lib, int device);
/* The same for the device at PCI bus id bus ("0000:65:00.0", as cudaDeviceGetPCIBusId gives it, or
 * lib/gpu_detect.h's pci_bus_id): NVML numbers devices in PCI order, CUDA fastest first and through
 * CUDA_VISIBLE_DEVICES, so an index can name another GPU. bus NULL or "", or a library without
 * nvmlDeviceGetHandleByPciBusId_v2: by index `device`. Unavailable (reason naming bus) when NVML
 * has no such device. */
int fp_nvml_open_bus(fp_nvml **out, const char *lib, const char *bus, int device);
void fp_nvml_close(fp_nvml *nv);            /* stops the sampler, shuts NVML down */
int fp_nvml_available(const fp_nvml *nv);
const char *fp_nvml_reason(const fp_nvml *nv);
const char *fp_nvml_device_name(const fp_nvml *nv);      /* "" when unavailable */
const char *fp_nvml_driver_version(const fp_nvml *nv);   /* "" when unavailable */
/* Total energy in joules since the driver loaded (NaN when unavailable or unsupported). */
double fp_nvml_energy_j(fp_nvml *nv);
/* One sample now; unmeasured fields NaN / -1. FP_EUNAVAIL when NVML is unavailable. */
int fp_nvml_sample(fp_nvml *nv, fp_device_sample_t *s);
/* Background sampling every interval_ms into store (run); FP_EUNAVAIL when unavailable. */
int fp_nvml_start_sampler(fp_nvml *nv, fp_store_t *store, int64_t run, int interval_ms);
/* The run the sampler's next samples name (the arm whose turn it is); safe while the sampler runs. */
void fp_nvml_set_run(fp_nvml *nv, int64_t run);
int64_t fp_nvml_run(const fp_nvml *nv);
void fp_nvml_stop_sampler(fp_nvml *nv);
uint64_t fp_nvml_samples_taken(const fp_nvml *nv);

/* ---- CUPTI activity (cupti_activity.c, built with CUPTI; elsewhere every call is FP_EUNAVAIL) ----
 * Collection is on only during traced steps (fp_probe_every(step, trace_every)): at such a step's begin
 * CONCURRENT_KERNEL (never KERNEL), RUNTIME, DRIVER, EXTERNAL_CORRELATION, MEMCPY, MEMSET, MEMORY2 and
 * OVERHEAD are enabled; at its end the records are flushed, its kernels written with fp_store_kernels, and
 * every kind disabled again. Every layer and phase of a traced step pushes an external correlation id
 * (CUSTOM0) encoding (layer, phase); CUPTI ties it to the runtime or driver call that launched a kernel
 * (cuDNN and cuBLASLt launch through the driver API, hence DRIVER), so kernels are attributed. 8 MB host
 * buffers that the completion callback only queues. Tensor-core use is classified by kernel name
 * (kernel_class.h). */
typedef struct fp_cupti fp_cupti;
int fp_cupti_open(fp_cupti **out, fp_store_t *store, int64_t run, int trace_every);   /* FP_OK or FP_ENOMEM */
/* Flushes (writing what a traced step left), disables every kind, detaches the buffer callbacks from the
 * tracer (a buffer CUPTI hands back later is freed without touching it), then frees it. */
void fp_cupti_close(fp_cupti *c);
int fp_cupti_available(const fp_cupti *c);
const char *fp_cupti_reason(const fp_cupti *c);
int fp_cupti_attach(fp_cupti *c, fp_probe *p);   /* one tracer may be attached to several arms' probes */
int fp_cupti_flush(fp_cupti *c);       /* flush now (end of a sampled step, exit) */
/* The run (and store) that kernel rows name from now on (one tracer per process, so one per session:
 * the comparison re-targets it at each arm's turn). Records still queued are flushed first and stored
 * under the previous run when they belong to a traced step. FP_OK, or the store's error from that
 * flush; FP_EUNAVAIL when unavailable. A new store drops the interned-name cache. */
int fp_cupti_set_run(fp_cupti *c, fp_store_t *store, int64_t run);
int64_t fp_cupti_run(const fp_cupti *c);
/* Records CUPTI reported dropped (no host buffer space), plus kernel records delivered without timestamps
 * (no device buffer space): both are missing from the kernel rows. */
uint64_t fp_cupti_dropped(const fp_cupti *c);
uint64_t fp_cupti_kernels(const fp_cupti *c);   /* kernel rows written */
/* CUPTI's own device-side record buffers, set to a fixed size and pool limit at open and read back:
 * bytes per buffer and the most buffers per context (0, 0 when unavailable). */
void fp_cupti_device_buffers(const fp_cupti *c, size_t *bytes, size_t *pool);
/* Kernel-name heuristic, usable without CUPTI: 1 when the name marks a tensor-core kernel
 * ("hmma", "imma", "s16816", "h1688", "s1688", "h16816", "xmma", "gmma", "wgmma", "_tensorop_",
 * "tensorop", or "cutlass" together with "f16"/"bf16"/"h16"), else 0. cuDNN / cuBLAS name their
 * tensor-core kernels this way; a kernel that uses mma instructions under another name is missed. */

/* ---- NVTX ranges (nvtx_ranges.c, built with NVTX3; elsewhere attach is FP_EUNAVAIL) ----
 * "step N" around each step, "<layer name> <phase>" around every layer and phase, so Nsight
 * Systems shows our names. */
typedef struct fp_nvtx fp_nvtx;
/* layer_names[l] names layer l (the store's names); copied, the caller keeps its array. */
int fp_nvtx_create(fp_nvtx **out, int nlayers, const char *const *layer_names);
void fp_nvtx_free(fp_nvtx *n);
int fp_nvtx_attach(fp_nvtx *n, fp_probe *p);
int fp_nvtx_compiled(void);   /* 1 when built with NVTX3 */

#endif
