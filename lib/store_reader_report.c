/* store_reader_report.c — the reader queries reports, traces and the gate need (store_reader.h):
 * run environment, layers, evaluations, events, histograms per role, per-layer numerics, precision
 * error, kernel flags, kernels and layer times of step ranges. Promise: as store_reader.c — each call
 * is one short read transaction; nothing is written; on error nothing is returned (*rows NULL). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader.h"


/* ---------------------------------------------------------------- environment */

static int fill_env(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_run_env_t *e = elem;
    fp_col_text(st, 0, e->driver_version, sizeof e->driver_version);
    fp_col_text(st, 1, e->cuda_version, sizeof e->cuda_version);
    fp_col_text(st, 2, e->cudnn_version, sizeof e->cudnn_version);
    fp_col_text(st, 3, e->cupti_version, sizeof e->cupti_version);
    fp_col_text(st, 4, e->blas, sizeof e->blas);
    fp_col_text(st, 5, e->fp16probe_version, sizeof e->fp16probe_version);
    fp_col_text(st, 6, e->optimizer_config, sizeof e->optimizer_config);
    fp_col_text(st, 7, e->config, sizeof e->config);
    return FP_OK;
}

int fp_reader_run_env(fp_reader_t *r, int64_t run, fp_run_env_t *env)
{
    fp_run_env_t *rows;
    size_t n;
    int rc = fp_reader_collect(r, "SELECT driver_version, cuda_version, cudnn_version, cupti_version, blas,"
                               " fp16probe_version, optimizer_config, config FROM runs WHERE id = ?1",
                               &run, 1, 1, sizeof *rows, (void **)&rows, &n, fill_env, "reading a run's environment");
    if (rc == FP_OK && n == 1)
        *env = rows[0];
    free(rows);
    return rc;
}

typedef struct {
    char *json;
} config_row_t;

static int fill_config(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    config_row_t *c = elem;
    const unsigned char *t = sqlite3_column_text(st, 0);
    c->json = strdup(t ? (const char *)t : "");
    return c->json ? FP_OK : fp_fail(FP_ENOMEM, "reader: out of memory");
}

int fp_reader_session_config(fp_reader_t *r, int64_t session, char **json)
{
    *json = NULL;
    config_row_t *rows;
    size_t n;
    int rc = fp_reader_collect(r, "SELECT config FROM sessions WHERE id = ?1", &session, 1, 0, sizeof *rows, (void **)&rows,
                               &n, fill_config, "reading a session");
    if (rc != FP_OK)
        return rc;
    if (n == 0)
        rc = fp_fail(FP_EINVAL, "%s: no session %lld", fp_reader_path(r), (long long)session);
    else
        *json = rows[0].json;
    free(rows);
    return rc;
}

/* ---------------------------------------------------------------- layers, evaluations, events */

static int fill_layer(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_layer_row_t *l = elem;
    l->layer = sqlite3_column_int(st, 0);
    fp_col_text(st, 1, l->name, sizeof l->name);
    fp_col_text(st, 2, l->type, sizeof l->type);
    fp_col_text(st, 3, l->input_shape, sizeof l->input_shape);
    fp_col_text(st, 4, l->output_shape, sizeof l->output_shape);
    l->params = fp_col_i64(st, 5);
    l->fwd_flops = fp_col_i64(st, 6);
    l->bwd_flops = fp_col_i64(st, 7);
    return FP_OK;
}

int fp_reader_layers(fp_reader_t *r, int64_t run, fp_layer_row_t **rows, size_t *n)
{
    return fp_reader_collect(r, "SELECT layer, name, type, input_shape, output_shape, params, fwd_flops, bwd_flops"
                             " FROM layers WHERE run = ?1 ORDER BY layer",
                             &run, 1, 1, sizeof **rows, (void **)rows, n, fill_layer, "reading layers");
}

static int fill_eval(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_eval_row_t *e = elem;
    e->step = sqlite3_column_int64(st, 0);
    fp_col_text(st, 1, e->split, sizeof e->split);
    e->loss = fp_col_dbl(st, 2);
    e->top1 = fp_col_dbl(st, 3);
    e->top5 = fp_col_dbl(st, 4);
    return FP_OK;
}

int fp_reader_evaluations(fp_reader_t *r, int64_t run, fp_eval_row_t **rows, size_t *n)
{
    return fp_reader_collect(r, "SELECT step, split, loss, top1, top5 FROM evaluations WHERE run = ?1 ORDER BY step, split",
                             &run, 1, 1, sizeof **rows, (void **)rows, n, fill_eval, "reading evaluations");
}

/* Events carry their whole text (a fixed 256-byte field cut them at 255 characters): the texts are
 * gathered in one buffer while the rows are read and then packed behind the rows in the same
 * allocation, so that one free(rows) releases both, as for every other row array. */
int fp_reader_events(fp_reader_t *r, int64_t run, int kind, size_t limit, fp_event_row_t **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    int64_t args[3] = {run, kind, limit ? (int64_t)limit : -1};
    size_t cap = 0, tlen = 0, tcap = 0;
    char *texts = NULL;
    sqlite3_stmt *st = NULL;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    rc = fp_reader_check_run(r, run);
    int src = SQLITE_DONE;
    if (rc == FP_OK) {
        src = sqlite3_prepare_v2(fp_reader_db(r),
                                 "SELECT start, step, kind, layer, text FROM events WHERE run = ?1 AND (?2 < 0 OR kind ="
                                 " (SELECT name FROM (SELECT 0 AS id, 'loss_scale' AS name UNION ALL SELECT 1,"
                                 " 'skipped_step' UNION ALL SELECT 2, 'nan' UNION ALL SELECT 3, 'warning'"
                                 " UNION ALL SELECT 4, 'info') WHERE id = ?2)) ORDER BY start, id LIMIT ?3",
                                 -1, &st, NULL);
        if (src != SQLITE_OK)
            rc = fp_reader_fail(r, src, "reading events");
    }
    for (int i = 0; rc == FP_OK && i < 3; i++)
        sqlite3_bind_int64(st, i + 1, args[i]);
    while (rc == FP_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = fp_rows_reserve((void **)rows, &cap, *n, sizeof **rows)) != FP_OK)
            break;
        fp_event_row_t *e = *rows + *n;
        memset(e, 0, sizeof *e);
        e->start = sqlite3_column_int64(st, 0);
        e->step = fp_col_i64(st, 1);
        e->kind = fp_col_event_kind(st, 2);
        e->layer = fp_col_int(st, 3);
        const unsigned char *t = sqlite3_column_text(st, 4);
        size_t len = t ? (size_t)sqlite3_column_bytes(st, 4) : 0;
        if (tlen + len + 1 > tcap) {
            size_t nc = tcap ? tcap : 4096;
            while (nc < tlen + len + 1)
                nc *= 2;
            char *g = realloc(texts, nc);
            if (!g) {
                rc = fp_fail(FP_ENOMEM, "reader: out of memory");
                break;
            }
            texts = g;
            tcap = nc;
        }
        if (len)
            memcpy(texts + tlen, t, len);
        texts[tlen + len] = '\0';
        e->text = (const char *)(uintptr_t)tlen;   /* an offset until the texts are packed */
        tlen += len + 1;
        (*n)++;
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading events");
    sqlite3_finalize(st);
    if (rc == FP_OK && *n > 0) {
        size_t head = *n * sizeof **rows;
        fp_event_row_t *packed = realloc(*rows, head + tlen);
        if (!packed) {
            rc = fp_fail(FP_ENOMEM, "reader: out of memory");
        } else {
            *rows = packed;
            char *base = (char *)packed + head;
            memcpy(base, texts, tlen);
            for (size_t i = 0; i < *n; i++)
                packed[i].text = base + (uintptr_t)packed[i].text;
        }
    }
    free(texts);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}

/* ---------------------------------------------------------------- histograms */

static int fill_hist(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    fp_hist_row_t *h = elem;
    h->step = sqlite3_column_int64(st, 0);
    h->layer = sqlite3_column_int(st, 1);
    h->role = sqlite3_column_int(st, 2);
    const void *blob = sqlite3_column_blob(st, 3);
    int len = sqlite3_column_bytes(st, 3);
    int rc = fp_hist_from_blob(&h->hist, blob, (size_t)len);
    if (rc != FP_OK)
        return fp_fail(rc, "%s: histogram of layer %d step %lld: %s", fp_reader_path(r), h->layer,
                       (long long)h->step, fp_error_message());
    return FP_OK;
}

int fp_reader_histograms_role(fp_reader_t *r, int64_t run, int role, int64_t step, fp_hist_row_t **rows,
                              size_t *n)
{
    int64_t args[3] = {run, role, step < 0 ? INT64_MAX : step};
    return fp_reader_collect(r, "SELECT h.step, h.layer, h.role, h.blob FROM histograms h JOIN"
                             " (SELECT layer, max(step) AS s FROM histograms WHERE run = ?1 AND role = ?2 AND step <= ?3"
                             " GROUP BY layer) m ON m.layer = h.layer AND m.s = h.step"
                             " WHERE h.run = ?1 AND h.role = ?2 ORDER BY h.layer",
                             args, 3, 1, sizeof **rows, (void **)rows, n, fill_hist, "reading histograms");
}

static int fill_numerics(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_layer_numerics_t *x = elem;
    x->layer = sqlite3_column_int(st, 0);
    x->role = sqlite3_column_int(st, 1);
    x->samples = sqlite3_column_int64(st, 2);
    x->count = sqlite3_column_int64(st, 3);
    x->zero = sqlite3_column_int64(st, 4);
    x->nan = sqlite3_column_int64(st, 5);
    x->inf = sqlite3_column_int64(st, 6);
    x->amax = fp_col_dbl(st, 7);
    for (int f = 0; f < 4; f++) {
        x->overflow[f] = sqlite3_column_int64(st, 8 + 4 * f);
        x->round_to_max[f] = sqlite3_column_int64(st, 9 + 4 * f);
        x->subnormal[f] = sqlite3_column_int64(st, 10 + 4 * f);
        x->underflow[f] = sqlite3_column_int64(st, 11 + 4 * f);
    }
    return FP_OK;
}

#define FMT_SUMS(f) \
    " total(" f "_overflow), total(" f "_round_to_max), total(" f "_subnormal), total(" f "_underflow),"

int fp_reader_layer_numerics(fp_reader_t *r, int64_t run, fp_layer_numerics_t **rows, size_t *n)
{
    return fp_reader_collect(r, "SELECT layer, role, count(*), total(count), total(zero), total(nan),"
                             " total(pos_inf) + total(neg_inf), max(amax)," FMT_SUMS("fp16") FMT_SUMS("bf16")
                             FMT_SUMS("e4m3") FMT_SUMS("e5m2") " 0 FROM histograms WHERE run = ?1"
                             " GROUP BY layer, role ORDER BY layer, role",
                             &run, 1, 1, sizeof **rows, (void **)rows, n, fill_numerics, "summing histograms");
}

static int fill_precision(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_precision_sum_t *p = elem;
    p->layer = sqlite3_column_int(st, 0);
    p->role = sqlite3_column_int(st, 1);
    p->samples = sqlite3_column_int64(st, 2);
    p->mean_rel_l2 = fp_col_dbl(st, 3);
    p->max_rel_l2 = fp_col_dbl(st, 4);
    p->max_abs = fp_col_dbl(st, 5);
    p->min_cosine = fp_col_dbl(st, 6);
    return FP_OK;
}

int fp_reader_precision_summary(fp_reader_t *r, int64_t run, fp_precision_sum_t **rows, size_t *n)
{
    return fp_reader_collect(r, "SELECT layer, role, count(*), avg(rel_l2), max(rel_l2), max(max_abs), min(cosine)"
                             " FROM precision_error WHERE run = ?1 GROUP BY layer, role ORDER BY layer, role",
                             &run, 1, 1, sizeof **rows, (void **)rows, n, fill_precision, "reading precision errors");
}

/* ---------------------------------------------------------------- kernels and layer times */

static int fill_flag(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_kernel_flag_t *k = elem;
    fp_col_text(st, 0, k->name, sizeof k->name);
    k->tensor_core = fp_col_int(st, 1);
    k->kernel_class = sqlite3_column_int(st, 2);   /* NULL reads as 0: unknown */
    return FP_OK;
}

int fp_reader_kernel_flags(fp_reader_t *r, int64_t run, fp_kernel_flag_t **rows, size_t *n)
{
    return fp_reader_collect(r, "SELECT coalesce(s.value, '(unnamed)'), max(k.tensorCore), max(k.kernelClass) FROM kernels k"
                             " LEFT JOIN StringIds s"
                             " ON s.id = coalesce(k.demangledName, k.shortName) WHERE k.run = ?1"
                             " GROUP BY coalesce(k.demangledName, k.shortName, 0)",
                             &run, 1, 1, sizeof **rows, (void **)rows, n, fill_flag, "reading kernel flags");
}

static int fill_step(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    *(int64_t *)elem = sqlite3_column_int64(st, 0);
    return FP_OK;
}

int fp_reader_kernel_steps(fp_reader_t *r, int64_t run, int64_t **steps, size_t *n)
{
    return fp_reader_collect(r, "SELECT DISTINCT step FROM kernels WHERE run = ?1 ORDER BY step", &run, 1, 1, sizeof **steps,
                             (void **)steps, n, fill_step, "reading sampled steps");
}

static int fill_kernel(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_kernel_row_t *k = elem;
    k->step = sqlite3_column_int64(st, 0);
    k->start = sqlite3_column_int64(st, 1);
    k->end = sqlite3_column_int64(st, 2);
    k->layer = fp_col_int(st, 3);
    k->phase = fp_col_int(st, 4);
    k->device_id = sqlite3_column_int(st, 5);
    k->stream_id = sqlite3_column_int(st, 6);
    k->correlation_id = (uint32_t)sqlite3_column_int64(st, 7);
    for (int i = 0; i < 3; i++) {
        k->grid[i] = (uint32_t)sqlite3_column_int64(st, 8 + i);
        k->block[i] = (uint32_t)sqlite3_column_int64(st, 11 + i);
    }
    k->tensor_core = fp_col_int(st, 14);
    fp_col_text(st, 15, k->name, sizeof k->name);
    k->kernel_class = sqlite3_column_int(st, 16);   /* NULL reads as 0: unknown */
    return FP_OK;
}

int fp_reader_kernels(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi, fp_kernel_row_t **rows,
                      size_t *n)
{
    int64_t args[3] = {run, step_lo, step_hi};
    return fp_reader_collect(r, "SELECT k.step, k.start, k.end, k.layer, k.phase, k.deviceId, k.streamId, k.correlationId,"
                             " k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.tensorCore,"
                             " coalesce(d.value, s.value, '(unnamed)'), k.kernelClass FROM kernels k"
                             " LEFT JOIN StringIds s ON s.id = k.shortName LEFT JOIN StringIds d ON d.id = k.demangledName"
                             " WHERE k.run = ?1 AND k.step BETWEEN ?2 AND ?3 ORDER BY k.step, k.start",
                             args, 3, 1, sizeof **rows, (void **)rows, n, fill_kernel, "reading kernels");
}

static int fill_layer_time(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_layer_time_row_t *t = elem;
    t->step = sqlite3_column_int64(st, 0);
    t->layer = sqlite3_column_int(st, 1);
    t->phase = sqlite3_column_int(st, 2);
    t->time_ns = sqlite3_column_int64(st, 3);
    t->kernels = fp_col_int(st, 4);
    return FP_OK;
}

int fp_reader_layer_times(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi,
                          fp_layer_time_row_t **rows, size_t *n)
{
    int64_t args[3] = {run, step_lo, step_hi};
    return fp_reader_collect(r, "SELECT step, layer, phase, time_ns, kernels FROM layer_times"
                             " WHERE run = ?1 AND step BETWEEN ?2 AND ?3 ORDER BY step, layer, phase",
                             args, 3, 1, sizeof **rows, (void **)rows, n, fill_layer_time, "reading layer times");
}

/* ---------------------------------------------------------------- evaluated images (the gate) */

static int fill_count(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    *(int64_t *)elem = sqlite3_column_int64(st, 0);
    return FP_OK;
}

static int fill_eval_images(sqlite3_stmt *st, void *elem, fp_reader_t *r)
{
    (void)r;
    fp_eval_images_t *e = elem;
    e->step = sqlite3_column_int64(st, 0);
    fp_col_text(st, 1, e->split, sizeof e->split);
    e->images = fp_col_i64(st, 2);
    return FP_OK;
}

int fp_reader_eval_images(fp_reader_t *r, int64_t run, fp_eval_images_t **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    int64_t *has = NULL;
    size_t nh = 0;
    int rc = fp_reader_collect(r, "SELECT count(*) FROM pragma_table_info('evaluations') WHERE name = 'images'", &run, 0, 0,
                               sizeof *has, (void **)&has, &nh, fill_count, "reading the evaluations table's columns");
    int present = rc == FP_OK && nh == 1 && has[0] > 0;
    free(has);
    if (rc != FP_OK || !present)
        return rc;
    return fp_reader_collect(r, "SELECT step, split, images FROM evaluations WHERE run = ?1 ORDER BY step, split", &run, 1, 1,
                             sizeof **rows, (void **)rows, n, fill_eval_images, "reading evaluated image counts");
}
