/* store_reader_report.c — the reader queries reports, traces and the gate need (store_reader.h):
 * run environment, layers, evaluations, events, per-layer numerics, precision error, kernel flags,
 * kernels and layer times of step ranges. Promise: as store_reader.c — each call is one short read
 * transaction; nothing is written; on error nothing is returned (*rows NULL). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader.h"
#include "store_reader_internal.h"

/* A query of one run's rows (?1: the run, which must exist), each of size elem. */
static int run_rows(fp_reader_t *r, const fp_query_t *q, int64_t run, size_t elem, void **rows, size_t *n)
{
    return fp_reader_collect(r, q, &run, 1, 1, elem, rows, n);
}

/* The rows of a one-integer query (steps, counts). */
static const fp_col_t int64_col[] = {{FP_COL_I64, 0, sizeof(int64_t)}};

/* ---------------------------------------------------------------- environment */

static const fp_col_t env_cols[] = {
    FP_COL(fp_run_env_t, driver_version, FP_COL_TEXT),      FP_COL(fp_run_env_t, cuda_version, FP_COL_TEXT),
    FP_COL(fp_run_env_t, cudnn_version, FP_COL_TEXT),       FP_COL(fp_run_env_t, cupti_version, FP_COL_TEXT),
    FP_COL(fp_run_env_t, blas, FP_COL_TEXT),                FP_COL(fp_run_env_t, fp16probe_version, FP_COL_TEXT),
    FP_COL(fp_run_env_t, optimizer_config, FP_COL_TEXT),    FP_COL(fp_run_env_t, config, FP_COL_TEXT),
};

int fp_reader_run_env(fp_reader_t *r, int64_t run, fp_run_env_t *env)
{
    static const fp_query_t q = {"SELECT driver_version, cuda_version, cudnn_version, cupti_version, blas,"
                                 " fp16probe_version, optimizer_config, config FROM runs WHERE id = ?1",
                                 FP_COLS(env_cols), NULL, "reading a run's environment", FP_RQ_NONE};
    fp_run_env_t *rows;
    size_t n;
    int rc = run_rows(r, &q, run, sizeof *rows, (void **)&rows, &n);
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
    static const fp_query_t q = {"SELECT config FROM sessions WHERE id = ?1", NULL, 0, fill_config,
                                 "reading a session", FP_RQ_NONE};
    *json = NULL;
    config_row_t *rows;
    size_t n;
    int rc = fp_reader_collect(r, &q, &session, 1, 0, sizeof *rows, (void **)&rows, &n);
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

static const fp_col_t layer_cols[] = {
    FP_COL(fp_layer_row_t, layer, FP_COL_INT),              FP_COL(fp_layer_row_t, name, FP_COL_TEXT),
    FP_COL(fp_layer_row_t, type, FP_COL_TEXT),              FP_COL(fp_layer_row_t, input_shape, FP_COL_TEXT),
    FP_COL(fp_layer_row_t, output_shape, FP_COL_TEXT),      FP_COL(fp_layer_row_t, params, FP_COL_I64_NA),
    FP_COL(fp_layer_row_t, fwd_flops, FP_COL_I64_NA),       FP_COL(fp_layer_row_t, bwd_flops, FP_COL_I64_NA),
};

int fp_reader_layers(fp_reader_t *r, int64_t run, fp_layer_row_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT layer, name, type, input_shape, output_shape, params, fwd_flops, bwd_flops"
                                 " FROM layers WHERE run = ?1 ORDER BY layer",
                                 FP_COLS(layer_cols), NULL, "reading layers", FP_RQ_NONE};
    return run_rows(r, &q, run, sizeof **rows, (void **)rows, n);
}

static const fp_col_t eval_cols[] = {
    FP_COL(fp_eval_row_t, step, FP_COL_I64), FP_COL(fp_eval_row_t, split, FP_COL_TEXT),
    FP_COL(fp_eval_row_t, loss, FP_COL_DBL), FP_COL(fp_eval_row_t, top1, FP_COL_DBL),
    FP_COL(fp_eval_row_t, top5, FP_COL_DBL),
};

int fp_reader_evaluations(fp_reader_t *r, int64_t run, fp_eval_row_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT step, split, loss, top1, top5 FROM evaluations WHERE run = ?1"
                                 " ORDER BY step, split",
                                 FP_COLS(eval_cols), NULL, "reading evaluations", FP_RQ_NONE};
    return run_rows(r, &q, run, sizeof **rows, (void **)rows, n);
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

/* ---------------------------------------------------------------- numerics and precision error */

#define FMT_COLS(f)                                                                                        \
    FP_COL(fp_layer_numerics_t, overflow[f], FP_COL_I64), FP_COL(fp_layer_numerics_t, round_to_max[f], FP_COL_I64), \
        FP_COL(fp_layer_numerics_t, subnormal[f], FP_COL_I64), FP_COL(fp_layer_numerics_t, underflow[f], FP_COL_I64)

static const fp_col_t numerics_cols[] = {
    FP_COL(fp_layer_numerics_t, layer, FP_COL_INT),     FP_COL(fp_layer_numerics_t, role, FP_COL_INT),
    FP_COL(fp_layer_numerics_t, samples, FP_COL_I64),   FP_COL(fp_layer_numerics_t, count, FP_COL_I64),
    FP_COL(fp_layer_numerics_t, zero, FP_COL_I64),      FP_COL(fp_layer_numerics_t, nan, FP_COL_I64),
    FP_COL(fp_layer_numerics_t, inf, FP_COL_I64),       FP_COL(fp_layer_numerics_t, amax, FP_COL_DBL),
    FMT_COLS(0), FMT_COLS(1), FMT_COLS(2), FMT_COLS(3),
};

#define FMT_SUMS(f) \
    " total(" f "_overflow), total(" f "_round_to_max), total(" f "_subnormal), total(" f "_underflow),"

int fp_reader_layer_numerics(fp_reader_t *r, int64_t run, fp_layer_numerics_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT layer, role, count(*), total(count), total(zero), total(nan),"
                                 " total(pos_inf) + total(neg_inf), max(amax)," FMT_SUMS("fp16") FMT_SUMS("bf16")
                                 FMT_SUMS("e4m3") FMT_SUMS("e5m2") " 0 FROM histograms WHERE run = ?1"
                                 " GROUP BY layer, role ORDER BY layer, role",
                                 FP_COLS(numerics_cols), NULL, "summing histograms", FP_RQ_NONE};
    return run_rows(r, &q, run, sizeof **rows, (void **)rows, n);
}

static const fp_col_t precision_cols[] = {
    FP_COL(fp_precision_sum_t, layer, FP_COL_INT),          FP_COL(fp_precision_sum_t, role, FP_COL_INT),
    FP_COL(fp_precision_sum_t, samples, FP_COL_I64),        FP_COL(fp_precision_sum_t, mean_rel_l2, FP_COL_DBL),
    FP_COL(fp_precision_sum_t, max_rel_l2, FP_COL_DBL),     FP_COL(fp_precision_sum_t, max_abs, FP_COL_DBL),
    FP_COL(fp_precision_sum_t, min_cosine, FP_COL_DBL),
};

int fp_reader_precision_summary(fp_reader_t *r, int64_t run, fp_precision_sum_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT layer, role, count(*), avg(rel_l2), max(rel_l2), max(max_abs), min(cosine)"
                                 " FROM precision_error WHERE run = ?1 GROUP BY layer, role ORDER BY layer, role",
                                 FP_COLS(precision_cols), NULL, "reading precision errors", FP_RQ_NONE};
    return run_rows(r, &q, run, sizeof **rows, (void **)rows, n);
}

/* ---------------------------------------------------------------- kernels and layer times */

static const fp_col_t flag_cols[] = {
    FP_COL(fp_kernel_flag_t, name, FP_COL_TEXT), FP_COL(fp_kernel_flag_t, tensor_core, FP_COL_INT_NA),
    FP_COL(fp_kernel_flag_t, kernel_class, FP_COL_INT),   /* NULL reads as 0: unknown */
};

int fp_reader_kernel_flags(fp_reader_t *r, int64_t run, fp_kernel_flag_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT coalesce(s.value, '(unnamed)'), max(k.tensorCore), max(k.kernelClass)"
                                 " FROM kernels k LEFT JOIN StringIds s"
                                 " ON s.id = coalesce(k.demangledName, k.shortName) WHERE k.run = ?1"
                                 " GROUP BY coalesce(k.demangledName, k.shortName, 0)",
                                 FP_COLS(flag_cols), NULL, "reading kernel flags", FP_RQ_NONE};
    return run_rows(r, &q, run, sizeof **rows, (void **)rows, n);
}

int fp_reader_kernel_steps(fp_reader_t *r, int64_t run, int64_t **steps, size_t *n)
{
    static const fp_query_t q = {"SELECT DISTINCT step FROM kernels WHERE run = ?1 ORDER BY step", FP_COLS(int64_col),
                                 NULL, "reading sampled steps", FP_RQ_NONE};
    return run_rows(r, &q, run, sizeof **steps, (void **)steps, n);
}

static const fp_col_t kernel_cols[] = {
    FP_COL(fp_kernel_row_t, step, FP_COL_I64),          FP_COL(fp_kernel_row_t, start, FP_COL_I64),
    FP_COL(fp_kernel_row_t, end, FP_COL_I64),           FP_COL(fp_kernel_row_t, layer, FP_COL_INT_NA),
    FP_COL(fp_kernel_row_t, phase, FP_COL_INT_NA),      FP_COL(fp_kernel_row_t, device_id, FP_COL_INT),
    FP_COL(fp_kernel_row_t, stream_id, FP_COL_INT),     FP_COL(fp_kernel_row_t, correlation_id, FP_COL_U32),
    FP_COL(fp_kernel_row_t, grid[0], FP_COL_U32),       FP_COL(fp_kernel_row_t, grid[1], FP_COL_U32),
    FP_COL(fp_kernel_row_t, grid[2], FP_COL_U32),       FP_COL(fp_kernel_row_t, block[0], FP_COL_U32),
    FP_COL(fp_kernel_row_t, block[1], FP_COL_U32),      FP_COL(fp_kernel_row_t, block[2], FP_COL_U32),
    FP_COL(fp_kernel_row_t, tensor_core, FP_COL_INT_NA), FP_COL(fp_kernel_row_t, name, FP_COL_TEXT),
    FP_COL(fp_kernel_row_t, kernel_class, FP_COL_INT),   /* NULL reads as 0: unknown */
};

int fp_reader_kernels(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi, fp_kernel_row_t **rows,
                      size_t *n)
{
    static const fp_query_t q = {"SELECT k.step, k.start, k.end, k.layer, k.phase, k.deviceId, k.streamId,"
                                 " k.correlationId, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ,"
                                 " k.tensorCore, coalesce(d.value, s.value, '(unnamed)'), k.kernelClass"
                                 " FROM kernels k LEFT JOIN StringIds s ON s.id = k.shortName"
                                 " LEFT JOIN StringIds d ON d.id = k.demangledName"
                                 " WHERE k.run = ?1 AND k.step BETWEEN ?2 AND ?3 ORDER BY k.step, k.start",
                                 FP_COLS(kernel_cols), NULL, "reading kernels", FP_RQ_NONE};
    const int64_t args[3] = {run, step_lo, step_hi};
    return fp_reader_collect(r, &q, args, 3, 1, sizeof **rows, (void **)rows, n);
}

static const fp_col_t layer_time_cols[] = {
    FP_COL(fp_layer_time_row_t, step, FP_COL_I64),      FP_COL(fp_layer_time_row_t, layer, FP_COL_INT),
    FP_COL(fp_layer_time_row_t, phase, FP_COL_INT),     FP_COL(fp_layer_time_row_t, time_ns, FP_COL_I64),
    FP_COL(fp_layer_time_row_t, kernels, FP_COL_INT_NA),
};

int fp_reader_layer_times(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi,
                          fp_layer_time_row_t **rows, size_t *n)
{
    static const fp_query_t q = {"SELECT step, layer, phase, time_ns, kernels FROM layer_times"
                                 " WHERE run = ?1 AND step BETWEEN ?2 AND ?3 ORDER BY step, layer, phase",
                                 FP_COLS(layer_time_cols), NULL, "reading layer times", FP_RQ_NONE};
    const int64_t args[3] = {run, step_lo, step_hi};
    return fp_reader_collect(r, &q, args, 3, 1, sizeof **rows, (void **)rows, n);
}

/* ---------------------------------------------------------------- evaluated images (the gate) */

static const fp_col_t eval_images_cols[] = {
    FP_COL(fp_eval_images_t, step, FP_COL_I64), FP_COL(fp_eval_images_t, split, FP_COL_TEXT),
    FP_COL(fp_eval_images_t, images, FP_COL_I64_NA),
};

int fp_reader_eval_images(fp_reader_t *r, int64_t run, fp_eval_images_t **rows, size_t *n)
{
    static const fp_query_t has_column = {"SELECT count(*) FROM pragma_table_info('evaluations')"
                                          " WHERE name = 'images'", FP_COLS(int64_col), NULL,
                                          "reading the evaluations table's columns", FP_RQ_NONE};
    static const fp_query_t q = {"SELECT step, split, images FROM evaluations WHERE run = ?1 ORDER BY step, split",
                                 FP_COLS(eval_images_cols), NULL, "reading evaluated image counts", FP_RQ_NONE};
    *rows = NULL;
    *n = 0;
    int64_t *has = NULL;
    size_t nh = 0;
    int rc = fp_reader_collect(r, &has_column, &run, 0, 0, sizeof *has, (void **)&has, &nh);
    int present = rc == FP_OK && nh == 1 && has[0] > 0;
    free(has);
    if (rc != FP_OK || !present)
        return rc;
    return run_rows(r, &q, run, sizeof **rows, (void **)rows, n);
}
