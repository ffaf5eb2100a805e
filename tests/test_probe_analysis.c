/* test_probe_analysis.c — precision analysis: layer error metrics on hand-made vectors, lost-update
 * fractions on a hand-made case, the skipped-step text naming the first non-finite layer, and the
 * per-layer rounding error of tinynet under fp16 vs fp32 (both ways: one call, and riding on the
 * fp32 model's own step) with rows in a store; asking for the GPU with a host reference changes nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/analysis/analysis.h"
#include "trainer/analysis/precision_internal.h"
#include "trainer/backend.h"
#include "store_testutil.h"
#include "tap.h"
#include "testutil.h"
#include "thread_pool.h"
#include "trainer/precision.h"

#define NB 4
#define HW 32
#define NC 10

static int same_sums(const fp_err_acc *a, const fp_err_acc *b)   /* bit for bit (no padding compared) */
{
    return memcmp(&a->dd, &b->dd, sizeof a->dd) == 0 && memcmp(&a->rr, &b->rr, sizeof a->rr) == 0 &&
           memcmp(&a->xx, &b->xx, sizeof a->xx) == 0 && memcmp(&a->xr, &b->xr, sizeof a->xr) == 0 &&
           memcmp(&a->maxabs, &b->maxabs, sizeof a->maxabs) == 0 && a->nonfinite == b->nonfinite;
}

int main(void)
{
    /* ---- fp_layer_error ---- */
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, z[4] = {0, 0, 0, 0};
    double rel, mx, cs;
    fp_layer_error(a, b, 4, &rel, &mx, &cs);
    tap_ok(rel == 0 && mx == 0 && fabs(cs - 1) < 1e-15, "identical: rel 0, max 0, cosine 1");
    float c[4] = {1, 2, 3, 4.5f};   /* known perturbation: d = (0,0,0,0.5), ||a|| = sqrt(30) */
    fp_layer_error(a, c, 4, &rel, &mx, &cs);
    tap_is_double(rel, 0.5 / sqrt(30.0), 1e-15, 0, "rel_l2 = 0.5/sqrt(30)");
    tap_is_double(mx, 0.5, 0, 0, "max_abs = 0.5");
    tap_is_double(cs, 32.0 / (sqrt(30.0) * sqrt(34.25)), 1e-15, 0, "cosine = <a,c>/(|a||c|)");
    float neg[4] = {-1, -2, -3, -4};
    fp_layer_error(a, neg, 4, NULL, NULL, &cs);
    tap_is_double(cs, -1, 1e-15, 0, "opposite: cosine -1");
    fp_layer_error(z, z, 4, &rel, &mx, &cs);
    tap_ok(rel == 0 && mx == 0 && cs == 1, "both zero: rel 0, cosine 1");
    fp_layer_error(z, a, 4, &rel, NULL, &cs);
    tap_ok(rel == sqrt(30.0) && cs == 0, "zero reference: rel = ||x||, cosine 0");
    float inf4[4] = {1, 2, INFINITY, 4};
    fp_layer_error(a, inf4, 4, &rel, &mx, &cs);
    tap_ok(isinf(rel) && isinf(mx) && isnan(cs), "non-finite x: Inf, Inf, NaN");

    /* ---- the sums in pieces over the pool: those of one fp_err_acc_add per piece, any thread count ---- */
    {
        size_t n = 256 * CHUNK + 1234;   /* two rounds of pieces, the last piece short */
        float *ref = malloc(n * sizeof(float)), *x = malloc(n * sizeof(float));
        uint16_t *x16 = malloc(n * sizeof(uint16_t));
        uint64_t s = 7;
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ref[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 8 - 4);
            x[i] = ref[i] * (1.0f + 1e-3f * (float)((s >> 20) % 7));
        }
        fp_narrow_array(x16, x, n, FP_DT_F16);
        int same = 1;
        for (int k = 0; k < 2; k++) {
            fp_err_acc serial = {0}, one = {0}, two = {0};
            float *w = malloc(n * sizeof(float));
            if (k)
                fp_widen_array(w, x16, n, FP_DT_F16);
            else
                memcpy(w, x, n * sizeof(float));
            for (size_t i = 0; i < n; i += CHUNK)
                fp_err_acc_add(&serial, ref + i, w + i, n - i < CHUNK ? n - i : CHUNK);
            const void *xv = k ? (const void *)x16 : (const void *)x;
            fp_dtype dt = k ? FP_DT_F16 : FP_DT_F32;
            fp_pool_set_threads(1);
            fp_err_acc_add_pieces(&one, ref, xv, dt, n);
            fp_pool_set_threads(2);
            fp_err_acc_add_pieces(&two, ref, xv, dt, n);
            fp_pool_set_threads(1);
            same &= same_sums(&serial, &one) && same_sums(&serial, &two) && serial.dd > 0;
            free(w);
        }
        tap_ok(same, "error sums in pieces over the pool: bit for bit one piece at a time, fp32 and fp16, 1 or 2 threads");
        free(ref);
        free(x);
        free(x16);
    }

    /* ---- lost updates ---- */
    float old_w[6] = {1, 1, 1, 1, 1, 1}, new_w[6] = {1, 0.99f, 1, 1, 0.5f, 1}, g[6] = {1e-8f, 1, 1e-8f, 0, 1, NAN};
    /* nonzero finite gradients: 0,1,2,4 -> unchanged: 0, 2 -> 2 of 4 */
    tap_is_double(fp_lost_update_fraction(old_w, new_w, g, 6), 0.5, 0, 0, "lost updates: 2 of 4");
    float g0[2] = {0, 0};
    tap_ok(isnan(fp_lost_update_fraction(old_w, new_w, g0, 2)), "no nonzero gradient: NaN");
    /* `half` stagnation: fp16 weight 1.0 + update 1e-4 rounds back to 1.0 */
    float w16[3] = {1.0f, 1.0f, 1.0f}, w16n[3], g16[3] = {1e-4f, 0.1f, 1e-5f};
    for (int i = 0; i < 3; i++)
        w16n[i] = w16[i] - g16[i];
    fp_round_to_dtype(w16n, 3, FP_DT_F16);
    tap_is_double(fp_lost_update_fraction(w16, w16n, g16, 3), 2.0 / 3.0, 1e-15, 0, "fp16: updates below half an ulp lost");

    /* ---- model-level: tinynet ---- */
    static float x[NB * HW * HW * 3];
    int labels[NB];
    uint64_t s = 17;
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        x[i] = tu_uniform_pm1(&s);
    for (int i = 0; i < NB; i++)
        labels[i] = i;
    fp_model_config cfg = {"tinynet", NC, HW, 16, 3, 0};
    fp_model *m = NULL;
    fp_model_create(&m, &cfg);
    int L = fp_model_layer_count(m);
    size_t np = fp_model_num_params(m);
    float *old = malloc(np * sizeof(float));
    float loss;
    fp_model_zero_grad(m);
    fp_model_train_step(m, &loss, NULL, NULL, x, labels, NB);
    memcpy(old, fp_model_params(m), np * sizeof(float));
    size_t off8, cnt8;
    fp_model_layer_params(m, 8, &off8, &cnt8);
    float *w = fp_model_params(m);
    for (size_t i = 0; i < np; i++)   /* fc moves, everything else stays */
        if (i >= off8 && i < off8 + cnt8)
            w[i] -= 0.5f;
    double per[16];   /* the definition, layer by layer */
    for (int l = 0; l < L && l < 16; l++) {
        size_t off, cnt;
        fp_model_layer_params(m, l, &off, &cnt);
        per[l] = fp_lost_update_fraction(old + off, w + off, fp_model_grads(m) + off, cnt);
    }
    double tot = fp_lost_update_fraction(old, w, fp_model_grads(m), np);
    tap_ok(per[8] == 0 && per[0] == 1 && isnan(per[2]), "per layer: fc 0, conv1 1, relu NaN");
    tap_ok(tot > 0 && tot < 1, "overall fraction in (0, 1): %g", tot);

    /* update tensors reach the probe */
    fp_probe *p = NULL;
    fp_probe_create(&p);
    fp_hist_probe *hp = NULL;
    fp_hist_probe_create(&hp, L, 1, FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE), NULL, 0);
    fp_hist_probe_attach(hp, p);
    fp_probe_step_begin(p, 0, 1);
    double per2[16];
    double tot2 = fp_probe_sample_params(p, m, old, fp_model_grads(m), per2);
    fp_probe_step_end(p);
    const fp_hist_t *uh = fp_hist_probe_get(hp, 8, FP_ROLE_UPDATE), *u0 = fp_hist_probe_get(hp, 0, FP_ROLE_UPDATE);
    tap_ok(uh && uh->amax == 0.5f && uh->count == cnt8 && u0 && u0->zero == u0->count, "update role: new - old per layer");
    int same = tot2 == tot;
    for (int l = 0; l < L && l < 16; l++)
        same &= per2[l] == per[l] || (isnan(per2[l]) && isnan(per[l]));
    tap_ok(same, "the update pass gives fp_lost_update_fraction's fractions, overall and per layer");
    float *g0s = calloc(np, sizeof(float));
    tap_ok(g0s && isnan(fp_probe_sample_params(NULL, m, old, g0s, per2)) && isnan(per2[8]),
           "no probe, no nonzero gradient: NaN fractions");
    free(g0s);
    fp_hist_probe_free(hp);
    fp_probe_free(p);

    /* ---- skipped step ---- */
    float *gr = fp_model_grads(m);
    size_t off4, cnt4, off1, cnt1;
    fp_model_layer_params(m, 4, &off4, &cnt4);
    fp_model_layer_params(m, 1, &off1, &cnt1);
    for (size_t i = 0; i < np; i++)
        gr[i] = 1.0f;
    gr[off8] = 4096.0f;           /* fc: headroom log2(65504/4096) */
    gr[off4 + 3] = INFINITY;      /* conv2: the first non-finite in backward order */
    gr[off1] = NAN;               /* bn1: later in backward order */
    char text[4096];
    double head[16];
    int first = fp_skipped_step_analysis(m, gr, 65536.0f, FP_FMT_FP16, text, sizeof text, head);
    tap_is_int(first, 4, "first non-finite layer in backward order: conv2 (4)");
    tap_ok(strstr(text, "layer 4 conv2") != NULL && strstr(text, "inf 1") != NULL, "text names it: %.120s", text);
    tap_is_double(head[8], log2(65504.0 / 4096.0), 1e-12, 0, "fc headroom log2(65504/4096)");
    tap_is_double(head[0], log2(65504.0), 1e-12, 0, "conv1 headroom log2(65504/1)");
    tap_ok(isnan(head[2]) && strstr(text, "fc=4.00") != NULL, "no headroom for relu; fc listed");
    for (size_t i = 0; i < np; i++)
        gr[i] = 0.5f;
    tap_is_int(fp_skipped_step_analysis(m, gr, 1, FP_FMT_FP16, text, sizeof text, NULL), -1, "all finite: -1");

    /* ---- per-layer rounding error, fp16 vs fp32 ---- */
    char *dir = tu_mkdir();
    char *db = tu_path(dir, "p.db");
    fp_store_t *st = NULL;
    int64_t sess = 0, runs[2] = {0, 0};
    fp_store_open(&st, db);
    fp_session_info_t si = {"precision", NULL};
    fp_store_begin_session(st, &si, &sess);
    for (int k = 0; k < 2; k++) {
        fp_run_info_t ri = {0};
        ri.session = sess;
        ri.arm = k ? "fp16" : "fp32";
        ri.model = "tinynet";
        ri.policy = ri.arm;
        ri.seed = 3;
        fp_store_begin_run(st, &ri, &runs[k]);
    }
    fp_prec_err *pe = NULL;
    tap_ok(fp_prec_err_create(&pe, m, fp_policy_find("fp16")) == FP_OK, "precision error object");
    fp_prec_err_set_store(pe, st, runs[1], runs[0]);
    float *buf0 = malloc(fp_model_num_buffers(m) * sizeof(float));
    memcpy(buf0, fp_model_buffers(m), fp_model_num_buffers(m) * sizeof(float));
    tap_ok(fp_prec_err_compare(pe, m, x, NB, 7) == FP_OK, "compare (one call)");
    tap_ok(memcmp(buf0, fp_model_buffers(m), fp_model_num_buffers(m) * sizeof(float)) == 0,
           "fp32 model's running statistics restored");
    int nrows = 0;
    const fp_layer_err_t *rows = fp_prec_err_rows(pe, &nrows);
    tap_is_int(nrows, L, "a row per layer");
    int ok = 1;
    for (int l = 0; l < L; l++)   /* fp16 rounding: relative errors around 2^-11, far from 0 and from 1 */
        ok &= rows[l].rel_l2 > 1e-5 && rows[l].rel_l2 < 0.05 && rows[l].cosine > 0.99 && rows[l].max_abs > 0;
    tap_ok(ok, "every layer: 1e-5 < rel_l2 < 0.05, cosine > 0.99 (conv1 %.2e, fc %.2e)", rows[0].rel_l2, rows[8].rel_l2);
    /* the same against a scratch fp32 clone: exactly zero */
    fp_prec_err *pe32 = NULL;
    fp_prec_err_create(&pe32, m, fp_policy_find("fp32"));
    fp_prec_err_compare(pe32, m, x, NB, 7);
    rows = fp_prec_err_rows(pe32, &nrows);
    ok = nrows == L;
    for (int l = 0; l < L; l++)
        ok &= rows[l].rel_l2 == 0 && rows[l].max_abs == 0;
    tap_ok(ok, "fp32 clone vs fp32: zero error on every layer");
    fp_prec_err_free(pe32);
    /* asking for the GPU with a reference in host memory: the host path, the same rows bit for bit, no clones */
    fp_prec_err *ped = NULL;
    fp_prec_err_create(&ped, m, fp_policy_find("fp16"));
    fp_prec_err_use_device(ped, 1);
    int drc = fp_prec_err_compare(ped, m, x, NB, 7);
    const fp_layer_err_t *drows = fp_prec_err_rows(ped, &nrows), *hrows = fp_prec_err_rows(pe, NULL);
    ok = drc == FP_OK && nrows == L && drows && hrows;
    for (int l = 0; ok && l < L; l++)
        ok &= memcmp(&drows[l], &hrows[l], sizeof drows[l]) == 0;
    size_t dpeak = 1, dws = 1;
    tap_ok(ok && fp_prec_err_device_memory(ped, &dpeak, &dws) == 0 && dpeak == 0 && dws == 0,
           "use_device with a host reference: the host path's rows bit for bit, no device memory");
    fp_prec_err_free(ped);
    /* the clone onto a backend of the caller's (here the CPU's): its values, its policy; mirroring needs devices */
    fp_model *cl = NULL;
    int crc = fp_model_clone_to(&cl, m, fp_policy_find("fp16"), fp_backend_cpu(), NULL);
    tap_ok(crc == FP_OK && strcmp(fp_model_policy(cl)->name, "fp16") == 0, "fp_model_clone_to: a clone under fp16 on "
           "the CPU");
    tap_ok(cl && memcmp(fp_model_params(cl), fp_model_params(m), fp_model_num_params(m) * sizeof(float)) == 0 &&
               fp_model_mirror_params(cl, m) == FP_EINVAL,
           "with the parameters of its source; fp_model_mirror_params between host models: FP_EINVAL");
    tap_ok(fp_model_device_bytes(cl, NB) > 3 * fp_model_num_params(m) * sizeof(float) &&
               fp_model_device_bytes(m, NB) > 2 * fp_model_num_params(m) * sizeof(float) && fp_model_device_bytes(m, 0) == 0,
           "fp_model_device_bytes: parameters, gradients and the weight copy at least; 0 for no images");
    fp_model_free(cl);
    /* riding on the fp32 model's own training step: the whole batch, so the corrected statistics are
     * the low-precision forward's own and the rows are those of the one call up to float rounding */
    double rel_once[16];
    rows = fp_prec_err_rows(pe, NULL);
    for (int l = 0; l < L; l++)
        rel_once[l] = rows[l].rel_l2;
    fp_probe *pr = NULL;
    fp_probe_create(&pr);
    tap_ok(fp_prec_err_attach(pe, pr) == FP_OK, "capture backend on the fp32 model's probe set");
    fp_model_set_probe(m, pr);
    tap_is_int(fp_prec_err_ride(pe, m, x, NB), FP_EINVAL, "ride before any capture: FP_EINVAL");
    tap_ok(fp_prec_err_arm(pe, NB) == FP_OK, "armed for a batch of %d", NB);
    fp_probe_step_begin(pr, 8, 1);
    tap_ok(fp_probe_wants(pr) & FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION), "armed: the activations are asked for");
    fp_model_forward_loss(m, &loss, NULL, NULL, x, labels, NB, 1.0f);
    tap_is_int(fp_prec_err_ride(pe, m, x, NB - 1), FP_EINVAL, "ride on another batch size: FP_EINVAL");
    tap_ok(fp_prec_err_arm(pe, NB) == FP_OK, "armed again after the failed ride");
    fp_probe_step_end(pr);
    tap_is_int(fp_prec_err_ride(pe, m, x, NB), FP_EINVAL,
               "the step ended without a ride: its capture dropped, FP_EINVAL");
    fp_prec_err_arm(pe, NB);
    fp_probe_step_begin(pr, 8, 1);
    fp_model_forward_loss(m, &loss, NULL, NULL, x, labels, NB, 1.0f);
    tap_ok(fp_prec_err_ride(pe, m, x, NB) == FP_OK, "ride after the forward");
    fp_model_backward_loss(m);
    fp_probe_step_end(pr);
    rows = fp_prec_err_rows(pe, NULL);
    ok = fp_prec_err_last_step(pe) == 8;
    double worst = 0;
    for (int l = 0; l < L; l++) {
        double r = fabs(rows[l].rel_l2 / rel_once[l] - 1);
        worst = r > worst ? r : worst;
    }
    tap_ok(ok && worst < 0.02, "riding gives the one call's rows within 2%% (worst %.2e) at step 8", worst);
    fp_probe_step_begin(pr, 9, 1);   /* not armed: nothing */
    tap_is_uint(fp_probe_wants(pr), 0, "not armed: no activations asked for");
    fp_probe_step_end(pr);
    /* fp32 against itself by the ride: only the recovered statistics' float rounding is left */
    fp_prec_err *self = NULL;
    fp_prec_err_create(&self, m, fp_policy_find("fp32"));
    fp_prec_err_set_subbatch(self, 2);
    fp_prec_err_attach(self, pr);
    fp_prec_err_arm(self, NB);
    fp_probe_step_begin(pr, 10, 1);
    fp_model_forward_loss(m, &loss, NULL, NULL, x, labels, NB, 1.0f);
    tap_ok(fp_prec_err_ride(self, m, x, NB) == FP_OK, "fp32 ride on 2 of %d images", NB);
    fp_probe_step_end(pr);
    rows = fp_prec_err_rows(self, &nrows);
    worst = 0;
    for (int l = 0; l < nrows; l++)
        worst = rows[l].rel_l2 > worst ? rows[l].rel_l2 : worst;
    tap_ok(nrows == L && worst < 1e-5, "fp32 vs fp32 on the reference's statistics: rel_l2 < 1e-5 (worst %.2e)", worst);
    fp_prec_err_free(self);
    fp_model_set_probe(m, NULL);
    float mv[64];
    tap_is_int(fp_model_bn_batch_stats(m, 0, mv, mv + 32), FP_EINVAL, "batch statistics of a conv layer: FP_EINVAL");
    tap_is_int(fp_model_forward_bn_stats(m, NULL, x, NB, NULL, NULL), FP_EINVAL, "no statistics callback: FP_EINVAL");
    tap_ok(fp_store_flush(st) == FP_OK, "flushed");
    char q[256];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM precision_error WHERE run=%lld AND ref_run=%lld AND role=0",
             (long long)runs[1], (long long)runs[0]);
    tap_is_int(tu_sql_int(db, q), 2 * L, "precision_error rows: a layer each at steps 7 and 8");
    fp_store_close(st, FP_RUN_FINISHED, NULL);
    fp_probe_free(pr);
    fp_prec_err_free(pe);
    free(buf0);
    free(db);
    tu_rmdir(dir);
    free(old);
    fp_model_free(m);
    return tap_done();
}
