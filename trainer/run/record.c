/* record.c — a run's rows in the store (record.h): layers, steps with their events, evaluations, the ranks'
 * data-parallel figures and the all-reduce's rounding. Promise:
 * every row of a trained or compared arm is written here; an event never fails the run (the writer's
 * status says whether the store still works). */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "trainer/run/record.h"

void fp_record_event(fp_store_t *s, int64_t run, int64_t step, int layer, fp_event_kind kind, const char *fmt, ...)
{
    if (!s)
        return;
    /* The whole text, however long (a fixed buffer cut events at 511 characters): the stack buffer
     * serves the usual short line, a longer one is sized first and allocated. */
    char buf[512], *text = buf;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int len = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (len >= (int)sizeof buf && (text = malloc((size_t)len + 1)) != NULL)
        vsnprintf(text, (size_t)len + 1, fmt, again);
    else if (!text)
        text = buf;   /* out of memory: the cut line rather than none */
    va_end(again);
    if (len >= 0)
        fp_store_event(s, run, 0, step, layer, kind, text);
    if (text != buf)
        free(text);
}

/* "16x64x56x56" (PyTorch's NCHW order) or "16x512" for a vector. */
static void shape_str(char *buf, size_t size, int batch, fp_dims d, fp_layer_type type)
{
    if (d.h == 1 && d.w == 1 && (type == FP_LAYER_LINEAR || type == FP_LAYER_AVGPOOL))
        snprintf(buf, size, "%dx%d", batch, d.c);
    else
        snprintf(buf, size, "%dx%dx%dx%d", batch, d.c, d.h, d.w);
}

int fp_record_layers(fp_store_t *s, int64_t run, fp_model *m, int batch)
{
    int rc = FP_OK;
    for (int i = 0; i < fp_model_layer_count(m) && !rc; i++) {
        const fp_layer_info *l = fp_model_layer(m, i);
        char in[64], out[64];
        shape_str(in, sizeof in, batch, l->in, l->type);
        shape_str(out, sizeof out, batch, l->out, l->type);
        fp_layer_info_t li = {.run = run, .index = l->index, .name = l->name, .type = fp_layer_type_name(l->type),
                              .input_shape = in, .output_shape = out, .params = (int64_t)l->params,
                              .fwd_flops = (int64_t)llround(l->fwd_flops * batch),
                              .bwd_flops = (int64_t)llround(l->bwd_flops * batch)};
        rc = fp_store_layer(s, &li);
    }
    return rc;
}

static const char *layer_name(fp_model *m, int layer)
{
    const fp_layer_info *l = fp_model_layer(m, layer);
    return l ? l->name : "?";
}

const char *fp_record_diverged_message(const fp_arm *arm, const fp_arm_step_result *r)
{
    static _Thread_local char msg[300];
    snprintf(msg, sizeof msg,
             "loss is %s at step %" PRId64 " and policy %s has no loss scaler: training diverged, run stopped "
             "(lower --lr, or use a policy with a scaler)", isnan(r->loss) ? "NaN" : "infinite", r->iteration + 1,
             fp_arm_policy(arm)->name);
    return msg;
}

int fp_record_step(fp_store_t *s, int64_t run, fp_arm *arm, const fp_arm_step_result *r, int64_t start_ns,
                   int64_t end_ns, const fp_record_step_extra *x)
{
    static const fp_record_step_extra none = {NULL, 0, NAN, NULL, -1, -1, -1};
    if (!x)
        x = &none;
    fp_arm_mem mem;
    fp_arm_memory(arm, &mem);
    int64_t step_no = r->iteration + 1;
    /* an arm without a loss scaler has no loss scale: NULL in the store, '-' in the reports (not 1) */
    const double scale = fp_arm_policy(arm)->scaling == FP_SCALE_NONE ? NAN : r->scale;
    fp_step_rec_t st = {.run = run, .step = step_no, .loss = r->loss, .loss_scale = scale, .lr = r->lr,
                        .skipped = r->skipped, .start = start_ns, .end = end_ns, .wall_ns = r->total_ns,
                        .samples_per_s = r->total_ns > 0 ? r->n / (r->total_ns * 1e-9) : NAN,
                        .mem_current = (int64_t)mem.current, .mem_peak = (int64_t)mem.peak,
                        .energy_j = x->energy_j, .power_w = NAN, .cycles = x->cycles,
                        .instructions = x->instructions, .host_cpu_ns = x->host_cpu_ns};
    if (isfinite(x->energy_j) && r->total_ns > 0)
        st.power_w = x->energy_j / (r->total_ns * 1e-9);
    int rc = fp_store_step(s, &st, x->times, x->ntimes);
    if (rc)
        return rc;
    fp_model *m = fp_arm_model(arm);
    if (r->diverged)
        fp_record_event(s, run, step_no, -1, FP_EVENT_NAN, "%s", fp_record_diverged_message(arm, r));
    if (r->skipped)
        fp_record_event(s, run, step_no, r->nonfinite_layer, FP_EVENT_SKIPPED_STEP,
                        "step %" PRId64 " skipped: inf/NaN gradient, first (in backward order) in layer %s (%s)%s; "
                        "loss scale %g -> %g%s%s", step_no, layer_name(m, r->nonfinite_layer),
                        r->nonfinite_tensor ? r->nonfinite_tensor : "?", r->loss_finite ? "" : ", loss not finite",
                        r->scale, r->next_scale, x->skip_detail ? "; " : "", x->skip_detail ? x->skip_detail : "");
    else if (r->nonfinite_layer >= 0 && !r->diverged)
        fp_record_event(s, run, step_no, r->nonfinite_layer, FP_EVENT_WARNING,
                        "step %" PRId64 ": inf/NaN gradient first in layer %s (%s) applied: policy %s has no loss "
                        "scaler", step_no, layer_name(m, r->nonfinite_layer),
                        r->nonfinite_tensor ? r->nonfinite_tensor : "?", fp_arm_policy(arm)->name);
    if (r->scale_changed)
        fp_record_event(s, run, step_no, -1, FP_EVENT_LOSS_SCALE, "loss scale %g -> %g (%s)", r->scale, r->next_scale,
                        r->skipped ? "inf/NaN gradient" : "growth interval of clean steps");
    return fp_store_writer_status(s);
}

int fp_record_eval(fp_store_t *s, int64_t run, fp_arm *arm, const fp_dataset *ds, const fp_train_config *c,
                   int64_t step, double *loss, double *top1, double *top5)
{
    fp_arm_eval_acc acc;
    int rc = fp_arm_evaluate(arm, ds, FP_SPLIT_VAL, c->batch, c->loader_threads, c->eval_batches, &acc);
    if (rc)
        return rc;
    fp_arm_eval_result(&acc, loss, top1, top5);
    if (s) {
        fp_eval_rec_t e = {.run = run, .step = step, .split = "val", .loss = *loss, .top1 = *top1, .top5 = *top5,
                          .images = acc.n};
        rc = fp_store_eval(s, &e);
    }
    return rc;
}

int fp_record_dist_step(fp_store_t *s, int64_t run, int64_t step, const fp_record_rank_step *ranks, int n)
{
    if (!s || n <= 0)
        return FP_OK;
    fp_dist_step_rec_t one[8], *rows = n <= 8 ? one : malloc((size_t)n * sizeof *rows);
    if (!rows)
        return fp_fail(FP_ENOMEM, "out of memory recording the ranks' step");
    for (int k = 0; k < n; k++)
        rows[k] = (fp_dist_step_rec_t){.run = run, .step = step, .rank = k, .skipped = ranks[k].skipped != 0,
                                       .wall_ns = ranks[k].wall_ns, .comm_ns = ranks[k].comm_ns,
                                       .exposed_ns = ranks[k].exposed_ns, .bytes = ranks[k].bytes};
    int rc = fp_store_dist_steps(s, rows, (size_t)n);
    if (rows != one)
        free(rows);
    return rc;
}

int fp_record_allreduce_error(fp_store_t *s, int64_t run, fp_arm *arm, const fp_arm_step_result *r,
                              const double *per_layer)
{
    fp_dtype wire = fp_arm_allreduce_dtype(arm);
    if (!s || isnan(r->reduce_rel_l2) || (wire != FP_DT_F16 && wire != FP_DT_BF16))
        return FP_OK;
    int nl = per_layer ? fp_model_layer_count(fp_arm_model(arm)) : 0;
    fp_allreduce_error_rec_t *rows = malloc((size_t)(nl + 1) * sizeof *rows);
    if (!rows)
        return fp_fail(FP_ENOMEM, "out of memory recording the all-reduce's rounding");
    size_t n = 0;
    const int64_t step_no = r->iteration + 1;
    const char *name = wire == FP_DT_F16 ? "fp16" : "bf16";
    rows[n] = (fp_allreduce_error_rec_t){.run = run, .step = step_no, .layer = -1, .rel_l2 = r->reduce_rel_l2,
                                         .overflow = r->reduce_overflow, .underflow = r->reduce_underflow};
    snprintf(rows[n++].wire, sizeof rows->wire, "%s", name);
    for (int l = 0; l < nl; l++) {
        if (isnan(per_layer[l]))   /* no parameters: nothing reduced */
            continue;
        rows[n] = (fp_allreduce_error_rec_t){.run = run, .step = step_no, .layer = l, .rel_l2 = per_layer[l],
                                             .overflow = -1, .underflow = -1};
        snprintf(rows[n++].wire, sizeof rows->wire, "%s", name);
    }
    int rc = fp_store_allreduce_error(s, rows, n);
    free(rows);
    return rc;
}
