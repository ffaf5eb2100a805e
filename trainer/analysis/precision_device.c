/* precision_device.c — analysis.h's one-call comparison (fp_prec_err_compare) on the reference's GPU: the
 * low-precision forward and the reference's forward run on clones of the reference on CUDA instances of their
 * own (fp_model_clone_to; weights copied device to device each time, fp_model_mirror_params), the low-precision
 * outputs are captured as stored into device memory (in-place probes, probe.h) and each layer's error against
 * the reference's output is summed on the device (fp_layer_error_on): only the rows' sums come to the host.
 * Promises: the reference is only read; the clones and the capture are made once (again only for a larger
 * sub-batch) and freed with the analysis (fp_prec_err_free); a build without CUDA never takes this path. */
#include "config.h"
#include <math.h>
#include <stdlib.h>
#include "error.h"
#include "trainer/analysis/precision_internal.h"
#include "trainer/backend.h"
#ifdef HAVE_CUDA
#include "trainer/backend_cuda.h"
#endif

void fp_prec_err_use_device(fp_prec_err *pe, int on)
{
    if (pe)
        pe->on_device = on != 0;
}

void fp_pe_device_free(fp_prec_err *pe)
{
    if (pe->dcap && pe->dscratch)
        fp_model_backend_ops(pe->dscratch)->free(fp_model_backend(pe->dscratch), pe->dcap, pe->dcap_bytes);
    pe->dcap = NULL;
    pe->dcap_bytes = 0;
    pe->dcap_n = 0;
    fp_model_free(pe->dscratch);
    fp_model_free(pe->dref);
    pe->dscratch = pe->dref = NULL;
    fp_probe_free(pe->dsp);
    fp_probe_free(pe->drp);
    pe->dsp = pe->drp = NULL;
    pe->dk = 0;
    pe->darena[0] = pe->darena[1] = 0;
}

size_t fp_prec_err_device_memory(const fp_prec_err *pe, size_t *peak, size_t *workspace)
{
    size_t pk = 0, ws = 0;
    const fp_model *ms[2] = {pe ? pe->dscratch : NULL, pe ? pe->dref : NULL};
    for (int i = 0; i < 2; i++) {
        if (!ms[i])
            continue;
        fp_backend_mem bm;
        fp_model_backend_ops(ms[i])->memory(fp_model_backend(ms[i]), &bm);
        pk += bm.allocated_peak + bm.staging_peak;
        ws += bm.workspace_peak;
    }
    if (peak)
        *peak = pk;
    if (workspace)
        *workspace = ws;
    return pe && pe->dk ? pe->darena[0] + pe->darena[1] : 0;
}

#ifdef HAVE_CUDA
static unsigned act_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)self;
    (void)step;
    (void)loss_scale;
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}

/* The low-precision clone's layer output (device memory, as stored) copied into the capture on its stream. */
static void dcap_in_place(void *self, int layer, fp_tensor_role role, const void *x, fp_dtype dt, size_t n,
                          float loss_scale, const fp_probe_mem *mem)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    if (role != FP_ROLE_ACTIVATION || layer < 0 || layer >= pe->nlayers)
        return;
    if (n != pe->cnt[layer] || dt != pe->dt[layer]) {
        pe->capture_ok = 0;
        return;
    }
    const fp_backend_ops *o = mem->ops;
    int rc = o->copy(mem->instance, (unsigned char *)pe->dcap + pe->off[layer], x, n * (size_t)fp_dtype_bytes(dt));
    if (rc && !pe->dfail)
        pe->dfail = rc;
}

/* The reference clone's layer output (fp32, device memory) against the captured low-precision one: summed on the
 * device, on the reference clone's stream, after the work queued there (fp_layer_error_on). */
static void dcmp_in_place(void *self, int layer, fp_tensor_role role, const void *x, fp_dtype dt, size_t n,
                          float loss_scale, const fp_probe_mem *mem)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    if (role != FP_ROLE_ACTIVATION || layer < 0 || layer >= pe->nlayers)
        return;
    if (n != pe->cnt[layer] || dt != FP_DT_F32) {
        pe->capture_ok = 0;
        return;
    }
    int rc = fp_layer_error_on(mem->ops, mem->instance, x, (const unsigned char *)pe->dcap + pe->off[layer],
                               pe->dt[layer], n, &pe->rows[layer]);
    if (rc) {
        pe->rows[layer] = (fp_layer_err_t){NAN, NAN, NAN};
        if (!pe->dfail)
            pe->dfail = rc;
    }
}

static const fp_probe_ops dcap_ops = {"precision_capture_device", act_step_begin, NULL, NULL, NULL, NULL};
static const fp_probe_ops dcmp_ops = {"precision_error_device", act_step_begin, NULL, NULL, NULL, NULL};

/* One clone of ref under pol on a CUDA instance of its own with an arena of `bytes`, named `name`. */
static int device_clone(fp_model **out, fp_model *ref, const fp_policy *pol, size_t bytes, const char *name)
{
    fp_backend *be = NULL;
    int rc = fp_backend_cuda_create_sized(&be, bytes, name);
    return rc ? rc : fp_model_clone_to(out, ref, pol, fp_backend_cuda(), be);
}

/* The clones for k images (made again only for a larger k), their probes and the capture's device memory. */
static int device_setup(fp_prec_err *pe, fp_model *ref, int k)
{
    if (pe->dk && pe->dk < k)
        fp_pe_device_free(pe);
    int rc = FP_OK;
    if (!pe->dk) {
        size_t cap = fp_pe_capture_layout(pe, pe->scratch, k);   /* the low-precision clone's formats */
        pe->cap_n = 0;                                            /* (the host capture's layout is gone) */
        pe->darena[0] = fp_model_device_bytes(pe->scratch, k) + cap + ((size_t)1 << 20);
        pe->darena[1] = fp_model_device_bytes(ref, k);
        if (ref == NULL || !pe->darena[1])
            return fp_fail(FP_EINVAL, "precision error: no reference to clone");
        rc = device_clone(&pe->dscratch, ref, fp_model_policy(pe->scratch), pe->darena[0],
                          "precision error: low-precision clone");
        rc = rc ? rc : device_clone(&pe->dref, ref, fp_model_policy(ref), pe->darena[1],
                                    "precision error: reference clone");
        rc = rc ? rc : fp_probe_create(&pe->dsp);
        rc = rc ? rc : fp_probe_create(&pe->drp);
        rc = rc ? rc : fp_probe_add_in_place(pe->dsp, &dcap_ops, dcap_in_place, pe);
        rc = rc ? rc : fp_probe_add_in_place(pe->drp, &dcmp_ops, dcmp_in_place, pe);
        if (rc) {
            fp_pe_device_free(pe);
            return rc;
        }
        pe->dk = k;
        fp_model_set_probe(pe->dscratch, pe->dsp);
        fp_model_set_probe(pe->dref, pe->drp);
    }
    if (pe->dcap_n == k)
        return FP_OK;
    const fp_backend_ops *o = fp_model_backend_ops(pe->dscratch);
    fp_backend *be = fp_model_backend(pe->dscratch);
    o->free(be, pe->dcap, pe->dcap_bytes);
    pe->dcap = NULL;
    pe->dcap_n = 0;
    size_t bytes = fp_pe_capture_layout(pe, pe->dscratch, k);
    pe->cap_n = 0;
    pe->dcap_bytes = bytes ? bytes : 1;
    fp_backend_cuda_set_label(be, "captured low-precision outputs");
    rc = o->alloc(be, &pe->dcap, pe->dcap_bytes);
    fp_backend_cuda_set_label(be, NULL);
    if (rc) {
        pe->dcap = NULL;
        return rc;
    }
    pe->dcap_n = k;
    return FP_OK;
}

int fp_pe_compare_device(fp_prec_err *pe, fp_model *ref, const float *x, int n, int64_t step, int *rc)
{
    if (!pe->on_device || !ref || fp_model_backend_ops(ref) != fp_backend_cuda())
        return 0;
    int k = fp_prec_err_subbatch(pe, n);   /* the whole batch too: on the clone, ref's plan stays for n */
    int r = device_setup(pe, ref, k);
    r = r ? r : fp_model_mirror_params(pe->dscratch, ref);
    r = r ? r : fp_model_mirror_params(pe->dref, ref);
    pe->capture_ok = 1;
    pe->dfail = FP_OK;
    if (!r) {   /* the low-precision forward, its outputs captured as stored on its stream */
        fp_probe_step_begin(pe->dsp, step, 1.0f);
        r = fp_model_forward_queued(pe->dscratch, x, k, FP_MODE_TRAIN);
        fp_probe_step_end(pe->dsp);
        r = r ? r : pe->dfail;
        /* the capture is complete before the reference clone's stream reads it */
        r = r ? r : fp_model_backend_ops(pe->dscratch)->sync(fp_model_backend(pe->dscratch));
    }
    if (!r && !pe->capture_ok)
        r = fp_fail(FP_EINTERNAL, "precision error: captured outputs do not match the layers");
    if (!r) {   /* the reference's forward, each layer compared as it comes */
        fp_pe_rows_begin(pe, step);
        fp_probe_step_begin(pe->drp, step, 1.0f);
        r = fp_model_forward_queued(pe->dref, x, k, FP_MODE_TRAIN);
        fp_probe_step_end(pe->drp);
        r = r ? r : pe->dfail;
        if (!r && !pe->capture_ok)
            r = fp_fail(FP_EINTERNAL, "precision error: reference outputs do not match the layers");
        if (!r)
            fp_pe_rows_end(pe, step);
    }
    *rc = r;
    return 1;
}
#else
int fp_pe_compare_device(fp_prec_err *pe, fp_model *ref, const float *x, int n, int64_t step, int *rc)
{
    (void)pe;
    (void)ref;
    (void)x;
    (void)n;
    (void)step;
    (void)rc;
    return 0;   /* no CUDA backend: every reference lies in host memory */
}
#endif
