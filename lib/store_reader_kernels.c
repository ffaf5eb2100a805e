/* store_reader_kernels.c — the kernel summary (store_reader.h: fp_reader_kernel_summary): per kernel name over
 * a step range, the columns of nsys's cuda_gpu_kern_sum. Promise: one short read transaction; kernels are
 * grouped by their name's id (a hash table, so the cost is linear in the kernels read); largest total first. */
#include "store_reader.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store_columns.h"
#include "store_db.h"
#include "store_reader_internal.h"

static int cmp_total_desc(const void *a, const void *b)
{
    const fp_kernel_sum_t *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns < y->total_ns ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* Double the name-id -> group table and re-enter the ngroups names of name_of. */
static int rehash(int64_t **slot_id, int64_t **slot_group, size_t *nslots, const int64_t *name_of, size_t ngroups)
{
    size_t ns = *nslots * 2;
    int64_t *ids = malloc(ns * sizeof *ids), *groups = malloc(ns * sizeof *groups);
    if (!ids || !groups) {
        free(ids);
        free(groups);
        return fp_fail(FP_ENOMEM, "reader: out of memory");
    }
    for (size_t i = 0; i < ns; i++)
        ids[i] = -1;
    for (size_t g = 0; g < ngroups; g++) {
        size_t h = (size_t)((uint64_t)name_of[g] * 0x9E3779B97F4A7C15ULL) & (ns - 1);
        while (ids[h] != -1)
            h = (h + 1) & (ns - 1);
        ids[h] = name_of[g];
        groups[h] = (int64_t)g;
    }
    free(*slot_id);
    free(*slot_group);
    *slot_id = ids;
    *slot_group = groups;
    *nslots = ns;
    return FP_OK;
}

int fp_reader_kernel_summary(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi, fp_kernel_sum_t **rows,
                             size_t *n)
{
    *rows = NULL;
    *n = 0;
    fp_gv_t *v = NULL;
    int64_t *name_of = NULL;      /* group -> StringIds id */
    int64_t *slot_id = NULL;      /* open addressing: name id -> group */
    int64_t *slot_group = NULL;
    size_t nv = 0, cap = 0, ngroups = 0, gcap = 0, nslots = 1024;
    fp_group_stats_t *stats = NULL;
    sqlite3_stmt *st = NULL;
    int rc = fp_reader_begin(r);
    if (rc != FP_OK)
        return rc;
    slot_id = malloc(nslots * sizeof *slot_id);
    slot_group = malloc(nslots * sizeof *slot_group);
    if (!slot_id || !slot_group)
        rc = fp_fail(FP_ENOMEM, "reader: out of memory");
    else
        for (size_t i = 0; i < nslots; i++)
            slot_id[i] = -1;
    int src = rc == FP_OK ? sqlite3_prepare_v2(fp_reader_db(r),
                                               "SELECT coalesce(demangledName, shortName, 0), end - start FROM kernels"
                                               " WHERE run = ?1 AND step BETWEEN ?2 AND ?3", -1, &st, NULL)
                          : SQLITE_DONE;
    if (src == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, step_lo);
        sqlite3_bind_int64(st, 3, step_hi);
    }
    while (rc == FP_OK && (src == SQLITE_OK || src == SQLITE_ROW) && (src = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        size_t h = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ULL) & (nslots - 1);
        while (slot_id[h] != -1 && slot_id[h] != id)
            h = (h + 1) & (nslots - 1);
        if (slot_id[h] == -1) {
            if ((ngroups + 1) * 2 > nslots) {   /* keep the table at most half full */
                if ((rc = rehash(&slot_id, &slot_group, &nslots, name_of, ngroups)) != FP_OK)
                    break;
                h = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ULL) & (nslots - 1);
                while (slot_id[h] != -1)
                    h = (h + 1) & (nslots - 1);
            }
            if ((rc = fp_rows_reserve((void **)&name_of, &gcap, ngroups, sizeof *name_of)) != FP_OK)
                break;
            slot_id[h] = id;
            slot_group[h] = (int64_t)ngroups;
            name_of[ngroups++] = id;
        }
        if ((rc = fp_rows_reserve((void **)&v, &cap, nv, sizeof *v)) != FP_OK)
            break;
        v[nv].group = slot_group[h];
        v[nv++].value = sqlite3_column_int64(st, 1);
    }
    if (rc == FP_OK && src != SQLITE_DONE)
        rc = fp_reader_fail(r, src, "reading kernels");
    sqlite3_finalize(st);
    st = NULL;
    if (rc == FP_OK && ngroups > 0 && (rc = fp_group_stats(v, nv, ngroups, &stats)) == FP_OK &&
        !(*rows = calloc(ngroups, sizeof **rows)))
        rc = fp_fail(FP_ENOMEM, "reader: out of memory");
    if (rc == FP_OK && ngroups > 0) {
        src = sqlite3_prepare_v2(fp_reader_db(r), "SELECT value FROM StringIds WHERE id = ?1", -1, &st, NULL);
        if (src != SQLITE_OK)
            rc = fp_reader_fail(r, src, "reading kernel names");
    }
    int64_t grand = 0;
    for (size_t g = 0; rc == FP_OK && g < ngroups; g++)
        grand += stats[g].sum;
    for (size_t g = 0; rc == FP_OK && g < ngroups; g++) {
        fp_kernel_sum_t *o = &(*rows)[g];
        o->total_ns = stats[g].sum;
        o->instances = stats[g].count;
        o->avg_ns = stats[g].mean;
        o->med_ns = stats[g].median;
        o->min_ns = stats[g].min;
        o->max_ns = stats[g].max;
        o->stddev_ns = stats[g].stddev;
        o->time_pct = grand > 0 ? 100.0 * (double)o->total_ns / (double)grand : 0.0;
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, name_of[g]);
        src = sqlite3_step(st);
        if (src == SQLITE_ROW)
            fp_col_text(st, 0, o->name, sizeof o->name);
        else if (src == SQLITE_DONE)
            snprintf(o->name, sizeof o->name, "(unnamed)");
        else
            rc = fp_reader_fail(r, src, "reading kernel names");
    }
    sqlite3_finalize(st);
    if (rc == FP_OK) {
        *n = ngroups;
        if (*n > 1)   /* no rows: *rows may be NULL, which qsort must not be given */
            qsort(*rows, *n, sizeof **rows, cmp_total_desc);
    }
    free(v);
    free(name_of);
    free(slot_id);
    free(slot_group);
    free(stats);
    return fp_reader_end_rows(r, rc, (void **)rows, n);
}
