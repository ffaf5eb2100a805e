/* precision_internal.h — private to the precision-error files (precision_analysis.c: the object and the
 * one-call comparison; precision_ride.c: riding on the reference's step; layer_error.c: the error sums).
 * Promises: nothing here is part of analysis.h's contract. */
#ifndef FP_PRECISION_INTERNAL_H
#define FP_PRECISION_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "trainer/analysis/analysis.h"

#define CHUNK 4096

/* Error sums of x against ref (layer_error.c): add pieces in order, then finish into the figures. */
typedef struct {
    double dd, rr, xx, xr, maxabs;
    int nonfinite;
} fp_err_acc;
void fp_err_acc_add(fp_err_acc *a, const float *ref, const float *x, size_t n);
/* The sums of fp_err_acc_add called on each CHUNK-value piece of x in turn (x fp32, or fp16 / bf16
 * bit patterns widened piece by piece), the pieces summed over the kernels' pool: the same bits for
 * any thread count. */
void fp_err_acc_add_pieces(fp_err_acc *a, const float *ref, const void *x, fp_dtype dt, size_t n);
void fp_err_acc_finish(const fp_err_acc *a, double *rel_l2, double *max_abs, double *cosine);

struct fp_prec_err {
    fp_model *scratch;
    fp_model *ref_scratch; /* fp_prec_err_compare on a sub-batch: the reference's clone (its policy) */
    int sub;               /* fp_prec_err_set_subbatch */
    fp_probe *sp;          /* on the scratch: the capture backend (fp_prec_err_compare) */
    fp_probe *rp;          /* for fp_prec_err_compare: the compare backend alone */
    fp_probe *ridep;       /* on the scratch: the compare-with-the-reference backend (fp_prec_err_ride) */
    int nlayers;
    size_t *off, *cnt;     /* per layer: byte offset into cap, values */
    fp_dtype *dt;
    unsigned char *cap;
    size_t cap_bytes;
    int cap_n;             /* batch the capture offsets are for */
    int capture_ok;
    /* riding: the reference's outputs of its first rk images, fp32, captured during its forward */
    size_t *per_image;     /* per layer: values per image */
    size_t *roff;          /* per layer: float offset into rcap (layers not kept only) */
    unsigned char *kept;   /* per layer: the reference's output stays in place until its backward
                            * (fp_model_output_kept): read there, not copied */
    const float **rsrc;    /* per layer: the captured output at this step (in place, or in rcap) */
    float *rcap;
    size_t rcap_floats;
    int rk, rn;            /* images captured, of a batch of rn */
    int rarmed;            /* fp_prec_err_arm called, until the step ends or the ride */
    int rlayers;           /* layers captured at this step */
    int64_t rstep;
    fp_model *ride_ref;    /* during fp_prec_err_ride: the reference lending its statistics */
    double *cs;            /* channel statistics scratch: 4 * widest batchnorm */
    float *full;           /* the reference's whole-batch mean and variance: 2 * widest batchnorm */
    fp_layer_err_t *rows;
    int armed;
    int64_t step, last_step;
    fp_store_t *store;
    int64_t run, ref_run;
    int have_rows;
    /* the comparison on the reference's GPU (fp_prec_err_use_device; precision_device.c) */
    int on_device;         /* asked for */
    fp_model *dscratch;    /* the low-precision clone on a CUDA instance of its own */
    fp_model *dref;        /* the reference's clone (its policy) on another instance */
    fp_probe *dsp, *drp;   /* in-place probes: the capture on dscratch, the comparison on dref */
    void *dcap;            /* the low-precision outputs as stored (dscratch's memory), laid out as cap */
    size_t dcap_bytes;
    int dcap_n;            /* batch dcap is laid out for */
    int dk;                /* images the clones' arenas are sized for (0: no clones) */
    size_t darena[2];      /* their arenas' bytes: dscratch, dref */
    int dfail;             /* an error during a device forward's hooks (FP_OK: none) */
};

/* precision_analysis.c: the rows of a comparison (begin: all "not measured"; end: kept and stored),
 * one layer's row from n reference values and n low-precision ones (fp32 or 16-bit as stored), and
 * the scratch reading ref's weights. */
void fp_pe_rows_begin(fp_prec_err *pe, int64_t step);
void fp_pe_rows_end(fp_prec_err *pe, int64_t step);
void fp_pe_layer_row(fp_prec_err *pe, int layer, const float *ref, const void *lo, fp_dtype lo_dt, size_t n);
int fp_pe_scratch_weights(fp_prec_err *pe, fp_model *ref);
/* precision_device.c: fp_prec_err_compare on the reference's GPU (when pe->on_device and ref lies on the CUDA
 * backend: returns 1 with *rc set; 0: not for the device, the host path runs); the clones' teardown. */
int fp_pe_compare_device(fp_prec_err *pe, fp_model *ref, const float *x, int n, int64_t step, int *rc);
void fp_pe_device_free(fp_prec_err *pe);
/* precision_analysis.c: the layout of the captured low-precision outputs of n images (off, cnt, dt; returns the
 * bytes) after model m's layers. */
size_t fp_pe_capture_layout(fp_prec_err *pe, const fp_model *m, int n);
/* precision_ride.c: the riding backends' ops (the capture on the reference, the comparison on the scratch). */
extern const fp_probe_ops fp_pe_refcap_ops, fp_pe_ride_ops;
void fp_pe_refcap_tensor16(void *self, int layer, fp_tensor_role role, const uint16_t *x, fp_dtype dt, size_t n,
                           float loss_scale);
void fp_pe_ride_tensor16(void *self, int layer, fp_tensor_role role, const uint16_t *x, fp_dtype dt, size_t n,
                         float loss_scale);

#endif
