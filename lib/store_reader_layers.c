/* store_reader_layers.c — per-layer aggregates of a run's layer times (store_reader.h:
 * fp_reader_layer_summary): per layer and phase over a step range, the time's statistics, the mean kernel
 * count and the layer's name. Promise: one short read transaction on kept statements; nothing is written. */
#include "store_reader.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader_internal.h"

#define LAYER_TIMES_SQL                                                                                    \
    "SELECT layer, phase, time_ns, kernels FROM layer_times WHERE run = ?1 AND step BETWEEN ?2 AND ?3"
#define LAYER_NAMES_SQL "SELECT layer, name, type FROM layers WHERE run = ?1"

int fp_reader_layer_summary(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi, fp_layer_sum_t **rows,
                            size_t *n)
{
    *rows = NULL;
    *n = 0;
    fp_gv_t *v = NULL;
    int64_t *kern_sum = NULL, *kern_n = NULL;
    fp_group_stats_t *stats = NULL;
    size_t nv = 0, cap = 0, ngroups = 0;
    sqlite3_stmt *st;
    int src = SQLITE_DONE, rc = fp_reader_begin(r);
    if (rc == FP_OK)
        rc = fp_reader_cached(r, FP_RQ_LAYER_TIMES, LAYER_TIMES_SQL, &st);
    if (rc != FP_OK)
        return fp_reader_end(r, rc);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, step_lo);
    sqlite3_bind_int64(st, 3, step_hi);
    int max_layer = -1;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        int layer = sqlite3_column_int(st, 0), phase = sqlite3_column_int(st, 1);
        if (layer < 0 || phase < 0 || phase >= FP_PHASE_COUNT)
            continue;
        if ((rc = fp_rows_reserve((void **)&v, &cap, nv, sizeof *v)) != FP_OK)
            break;
        v[nv].group = (int64_t)layer * FP_PHASE_COUNT + phase;
        v[nv++].value = sqlite3_column_int64(st, 2);
        if (layer > max_layer)
            max_layer = layer;
        if ((size_t)(layer + 1) * FP_PHASE_COUNT > ngroups) {   /* kernel counts per group */
            size_t ng = (size_t)(layer + 1) * FP_PHASE_COUNT * 2;
            int64_t *a = realloc(kern_sum, ng * sizeof *a), *b = a ? realloc(kern_n, ng * sizeof *b) : NULL;
            if (a)
                kern_sum = a;
            if (!a || !b) {
                rc = fp_fail(FP_ENOMEM, "reader: out of memory");
                break;
            }
            kern_n = b;
            memset(kern_sum + ngroups, 0, (ng - ngroups) * sizeof *a);
            memset(kern_n + ngroups, 0, (ng - ngroups) * sizeof *b);
            ngroups = ng;
        }
        if (sqlite3_column_type(st, 3) != SQLITE_NULL) {
            kern_sum[v[nv - 1].group] += sqlite3_column_int64(st, 3);
            kern_n[v[nv - 1].group]++;
        }
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading layer times");
    sqlite3_reset(st);
    size_t used = (size_t)(max_layer + 1) * FP_PHASE_COUNT;
    if (rc == FP_OK && used > 0 && (rc = fp_group_stats(v, nv, used, &stats)) == FP_OK &&
        !(*rows = calloc(used, sizeof **rows)))
        rc = fp_fail(FP_ENOMEM, "reader: out of memory");
    for (size_t g = 0; rc == FP_OK && g < used; g++) {
        if (stats[g].count == 0)
            continue;
        fp_layer_sum_t *o = &(*rows)[(*n)++];
        o->layer = (int)(g / FP_PHASE_COUNT);
        o->phase = (int)(g % FP_PHASE_COUNT);
        o->steps = stats[g].count;
        o->mean_ns = stats[g].mean;
        o->median_ns = stats[g].median;
        o->stddev_ns = stats[g].stddev;
        o->min_ns = stats[g].min;
        o->max_ns = stats[g].max;
        o->mean_kernels = kern_n[g] ? (double)kern_sum[g] / (double)kern_n[g] : NAN;
    }
    if (rc == FP_OK && *n > 0 && (rc = fp_reader_cached(r, FP_RQ_LAYERS, LAYER_NAMES_SQL, &st)) == FP_OK) {   /* names */
        sqlite3_bind_int64(st, 1, run);
        while ((src = sqlite3_step(st)) == SQLITE_ROW) {
            int layer = sqlite3_column_int(st, 0);
            for (size_t i = 0; i < *n; i++)
                if ((*rows)[i].layer == layer) {
                    fp_col_text(st, 1, (*rows)[i].name, sizeof (*rows)[i].name);
                    fp_col_text(st, 2, (*rows)[i].type, sizeof (*rows)[i].type);
                }
        }
        if (src != SQLITE_DONE)
            rc = fp_reader_fail(r, src, "reading layer names");
        sqlite3_reset(st);
    }
    free(v);
    free(kern_sum);
    free(kern_n);
    free(stats);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}
