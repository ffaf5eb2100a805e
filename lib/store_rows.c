/* store_rows.c — the writer thread's side of each queued record (store_writer_internal.h): a record
 * becomes one row through its prepared statement. Promise: runs on the writer thread only, inside the
 * transaction it has open; returns an SQLite code (SQLITE_MISUSE: a histogram that cannot be encoded). */
#include <string.h>
#include "clock.h"
#include "store_writer_internal.h"

static int apply_kernel(fp_store_t *s, const fp_kernel_rec_t *k)
{
    sqlite3_stmt *st = s->st[ST_KERNEL];
    sqlite3_bind_int64(st, 1, k->run);
    sqlite3_bind_int64(st, 2, k->step);
    fp_sw_bind_i64_na(st, 3, k->layer);
    fp_sw_bind_i64_na(st, 4, k->phase);
    sqlite3_bind_int64(st, 5, k->start);
    sqlite3_bind_int64(st, 6, k->end);
    sqlite3_bind_int(st, 7, k->device_id);
    sqlite3_bind_int(st, 8, k->stream_id);
    sqlite3_bind_int64(st, 9, k->correlation_id);
    for (int i = 0; i < 3; i++) {
        sqlite3_bind_int64(st, 10 + i, k->grid[i]);
        sqlite3_bind_int64(st, 13 + i, k->block[i]);
    }
    if (k->short_name > 0)
        sqlite3_bind_int64(st, 16, k->short_name);
    if (k->demangled_name > 0)
        sqlite3_bind_int64(st, 17, k->demangled_name);
    fp_sw_bind_i64_na(st, 18, k->tensor_core);
    if (k->kernel_class >= 1 && k->kernel_class <= 4)   /* ENUM_KERNEL_CLASS ids; else NULL */
        sqlite3_bind_int(st, 19, k->kernel_class);
    return fp_sw_run(st);
}

static int apply_step(fp_store_t *s, const fp_step_rec_t *r)
{
    sqlite3_stmt *st = s->st[ST_STEP];
    sqlite3_bind_int64(st, 1, r->run);
    sqlite3_bind_int64(st, 2, r->step);
    fp_sw_bind_dbl(st, 3, r->loss);
    fp_sw_bind_dbl(st, 4, r->loss_scale);
    sqlite3_bind_int(st, 5, r->skipped ? 1 : 0);
    fp_sw_bind_dbl(st, 6, r->lr);
    fp_sw_bind_i64_na(st, 7, r->start);
    fp_sw_bind_i64_na(st, 8, r->end);
    fp_sw_bind_i64_na(st, 9, r->wall_ns);
    fp_sw_bind_dbl(st, 10, r->samples_per_s);
    fp_sw_bind_i64_na(st, 11, r->mem_current);
    fp_sw_bind_i64_na(st, 12, r->mem_peak);
    fp_sw_bind_dbl(st, 13, r->energy_j);
    fp_sw_bind_dbl(st, 14, r->power_w);
    fp_sw_bind_i64_na(st, 15, r->cycles > 0 ? r->cycles : -1);
    fp_sw_bind_i64_na(st, 16, r->instructions > 0 ? r->instructions : -1);
    fp_sw_bind_i64_na(st, 17, r->host_cpu_ns > 0 ? r->host_cpu_ns : -1);
    return fp_sw_run(st);
}

static int apply_layer_time(fp_store_t *s, const fp_layer_time_row_t *r)
{
    sqlite3_stmt *st = s->st[ST_LAYER_TIME];
    sqlite3_bind_int64(st, 1, r->run);
    sqlite3_bind_int64(st, 2, r->step);
    sqlite3_bind_int(st, 3, r->t.layer);
    sqlite3_bind_int(st, 4, r->t.phase);
    sqlite3_bind_int64(st, 5, r->t.time_ns);
    fp_sw_bind_i64_na(st, 6, r->t.kernels);
    return fp_sw_run(st);
}

static int apply_layer(fp_store_t *s, const fp_layer_info_t *l)
{
    sqlite3_stmt *st = s->st[ST_LAYER];
    sqlite3_bind_int64(st, 1, l->run);
    sqlite3_bind_int(st, 2, l->index);
    fp_sw_bind_text(st, 3, l->name ? l->name : "");
    fp_sw_bind_text(st, 4, l->type);
    fp_sw_bind_text(st, 5, l->input_shape);
    fp_sw_bind_text(st, 6, l->output_shape);
    fp_sw_bind_i64_na(st, 7, l->params);
    fp_sw_bind_i64_na(st, 8, l->fwd_flops);
    fp_sw_bind_i64_na(st, 9, l->bwd_flops);
    return fp_sw_run(st);
}

static int apply_hist(fp_store_t *s, const fp_rec_t *r)
{
    const fp_hist_t *h = &((const hist_payload_t *)r->u.owned)->h;
    uint8_t blob[FP_HIST_BLOB_MAX_SIZE];
    size_t len = 0;
    if (fp_hist_to_blob(h, blob, sizeof blob, &len) != FP_OK)
        return SQLITE_MISUSE;
    sqlite3_stmt *st = s->st[ST_HIST];
    sqlite3_bind_int64(st, 1, r->a);
    sqlite3_bind_int64(st, 2, r->b);
    sqlite3_bind_int(st, 3, r->i32);
    sqlite3_bind_int(st, 4, r->j32);
    sqlite3_bind_int64(st, 5, (sqlite3_int64)h->count);
    sqlite3_bind_int64(st, 6, (sqlite3_int64)h->zero);
    sqlite3_bind_int64(st, 7, (sqlite3_int64)h->nan);
    sqlite3_bind_int64(st, 8, (sqlite3_int64)h->pos_inf);
    sqlite3_bind_int64(st, 9, (sqlite3_int64)h->neg_inf);
    sqlite3_bind_double(st, 10, h->amax);
    sqlite3_bind_double(st, 11, h->min_nonzero);
    sqlite3_bind_double(st, 12, fp_hist_mean_abs(h));
    /* columns per format in schema order: normal, subnormal, underflow, round_to_max, overflow */
    static const fp_value_class order[5] = {FP_CLASS_NORMAL, FP_CLASS_SUBNORMAL, FP_CLASS_UNDERFLOW,
                                            FP_CLASS_ROUND_TO_MAX, FP_CLASS_OVERFLOW};
    for (int f = 0; f < FP_FMT_COUNT; f++)
        for (int c = 0; c < 5; c++)
            sqlite3_bind_int64(st, 13 + f * 5 + c, (sqlite3_int64)h->cls[f][order[c]]);
    sqlite3_bind_blob(st, 33, blob, (int)len, SQLITE_TRANSIENT);
    return fp_sw_run(st);
}

static int apply_precision(fp_store_t *s, const fp_precision_rec_t *p)
{
    sqlite3_stmt *st = s->st[ST_PRECISION];
    sqlite3_bind_int64(st, 1, p->run);
    sqlite3_bind_int64(st, 2, p->ref_run);
    sqlite3_bind_int64(st, 3, p->step);
    sqlite3_bind_int(st, 4, p->layer);
    sqlite3_bind_int(st, 5, p->role);
    fp_sw_bind_dbl(st, 6, p->rel_l2);
    fp_sw_bind_dbl(st, 7, p->max_abs);
    fp_sw_bind_dbl(st, 8, p->cosine);
    return fp_sw_run(st);
}

static int apply_eval(fp_store_t *s, const fp_eval_rec_t *e)
{
    sqlite3_stmt *st = s->st[ST_EVAL];
    sqlite3_bind_int64(st, 1, e->run);
    sqlite3_bind_int64(st, 2, e->step);
    sqlite3_bind_text(st, 3, e->split, (int)strnlen(e->split, sizeof e->split), SQLITE_TRANSIENT);
    fp_sw_bind_dbl(st, 4, e->loss);
    fp_sw_bind_dbl(st, 5, e->top1);
    fp_sw_bind_dbl(st, 6, e->top5);
    fp_sw_bind_i64_na(st, 7, e->images > 0 ? e->images : -1);
    return fp_sw_run(st);
}

static int apply_device(fp_store_t *s, const fp_device_sample_t *d)
{
    sqlite3_stmt *st = s->st[ST_DEVICE];
    sqlite3_bind_int64(st, 1, d->run);
    sqlite3_bind_int64(st, 2, d->timestamp);
    sqlite3_bind_int(st, 3, d->device_id);
    fp_sw_bind_dbl(st, 4, d->power_w);
    fp_sw_bind_dbl(st, 5, d->energy_j);
    fp_sw_bind_i64_na(st, 6, d->mem_used);
    fp_sw_bind_dbl(st, 7, d->temperature_c);
    fp_sw_bind_i64_na(st, 8, d->sm_clock_mhz);
    fp_sw_bind_i64_na(st, 9, d->mem_clock_mhz);
    return fp_sw_run(st);
}

static int apply_dist_step(fp_store_t *s, const fp_dist_step_rec_t *d)
{
    sqlite3_stmt *st = s->st[ST_DIST_STEP];
    sqlite3_bind_int64(st, 1, d->run);
    sqlite3_bind_int64(st, 2, d->step);
    sqlite3_bind_int(st, 3, d->rank);
    fp_sw_bind_i64_na(st, 4, d->wall_ns);
    fp_sw_bind_i64_na(st, 5, d->comm_ns);
    fp_sw_bind_i64_na(st, 6, d->exposed_ns);
    fp_sw_bind_i64_na(st, 7, d->bytes);
    sqlite3_bind_int(st, 8, d->skipped ? 1 : 0);
    return fp_sw_run(st);
}

static int apply_allreduce_error(fp_store_t *s, const fp_allreduce_error_rec_t *e)
{
    sqlite3_stmt *st = s->st[ST_ALLREDUCE_ERROR];
    sqlite3_bind_int64(st, 1, e->run);
    sqlite3_bind_int64(st, 2, e->step);
    sqlite3_bind_int(st, 3, e->layer);
    sqlite3_bind_text(st, 4, e->wire, (int)strnlen(e->wire, sizeof e->wire), SQLITE_TRANSIENT);
    fp_sw_bind_dbl(st, 5, e->rel_l2);
    fp_sw_bind_i64_na(st, 6, e->overflow);
    fp_sw_bind_i64_na(st, 7, e->underflow);
    return fp_sw_run(st);
}

int fp_sw_insert_event(fp_store_t *s, int64_t run, int64_t time, int64_t step, int layer, int kind,
                        const char *text)
{
    sqlite3_stmt *st = s->st[ST_EVENT];
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, time);
    fp_sw_bind_i64_na(st, 3, step);
    fp_sw_bind_text(st, 4, fp_event_kind_name((fp_event_kind)kind));
    fp_sw_bind_i64_na(st, 5, layer);
    fp_sw_bind_text(st, 6, text);
    return fp_sw_run(st);
}

int fp_sw_end_run(fp_store_t *s, int64_t run, int status, const char *msg, int64_t now)
{
    sqlite3_stmt *st = s->st[ST_END_RUN];
    sqlite3_bind_int64(st, 1, run);
    fp_sw_bind_text(st, 2, fp_run_status_name((fp_run_status)status));
    fp_sw_bind_text(st, 3, msg);
    sqlite3_bind_int64(st, 4, now);
    return fp_sw_run(st);
}

int fp_sw_apply(fp_store_t *s, fp_rec_t *r)
{
    switch ((fp_rec_kind)r->kind) {
    case FP_REC_KERNEL: return apply_kernel(s, &r->u.kernel);
    case FP_REC_STEP: return apply_step(s, &r->u.step);
    case FP_REC_LAYER_TIME: return apply_layer_time(s, &r->u.layer_time);
    case FP_REC_LAYER: return apply_layer(s, &((layer_payload_t *)r->u.owned)->info);
    case FP_REC_HIST: return apply_hist(s, r);
    case FP_REC_PRECISION: return apply_precision(s, &r->u.precision);
    case FP_REC_EVAL: return apply_eval(s, &r->u.eval);
    case FP_REC_DEVICE: return apply_device(s, &r->u.device);
    case FP_REC_EVENT: return fp_sw_insert_event(s, r->a, r->c, r->b, r->i32, r->j32, r->u.owned);
    case FP_REC_STRING: {
        sqlite3_stmt *st = s->st[ST_STRING];
        sqlite3_bind_int64(st, 1, r->a);
        fp_sw_bind_text(st, 2, r->u.owned);
        return fp_sw_run(st);
    }
    case FP_REC_END_RUN: return fp_sw_end_run(s, r->a, r->i32, r->u.owned, fp_clock_wall_ns());
    case FP_REC_SYNC: return fp_sw_apply_sync(s, r->u.sync);
    case FP_REC_DIST_STEP: return apply_dist_step(s, &r->u.dist_step);
    case FP_REC_ALLREDUCE_ERROR: return apply_allreduce_error(s, &r->u.allreduce_error);
    }
    return SQLITE_OK;
}
