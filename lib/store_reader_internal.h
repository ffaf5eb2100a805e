/* store_reader_internal.h — internal to the run store's readers (store_reader*.c): the statements a
 * reader keeps prepared on its connection (for the queries a live dashboard repeats every frame), and
 * per-group statistics of (group, value) pairs. Not for use outside lib/store_reader*.c. */
#ifndef FP_STORE_READER_INTERNAL_H
#define FP_STORE_READER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

/* ---- kept statements (store_reader.c) ---- */
/* The slots; each is one query, always prepared from the same SQL (0: none, see fp_query_t.keep). */
enum {
    FP_RQ_NONE, FP_RQ_STEPS_SINCE, FP_RQ_LAYER_TIMES, FP_RQ_LAYERS, FP_RQ_RUN_STEPS, FP_RQ_RUN_LAST, FP_RQ_COUNT
};
struct fp_reader;
/* The statement of `slot` (prepared from `sql` on first use on this connection), reset and with its
 * bindings cleared; reset it again when done. Only inside a read (after fp_reader_begin, which may
 * reconnect and so drop every kept statement). */
int fp_reader_cached(struct fp_reader *r, int slot, const char *sql, sqlite3_stmt **st);

/* ---- grouped statistics (store_reader_stats.c) ---- */
typedef struct {
    int64_t group, value;
} fp_gv_t;

typedef struct {
    int64_t count, sum, min, max;
    double mean, median, stddev;
} fp_group_stats_t;

/* Per group 0..ngroups-1 of the n (group, value) pairs: count, sum, min, max, mean, median, sample
 * standard deviation (all 0 for a group without pairs), into *stats, an array of ngroups the caller
 * frees. FP_OK, or FP_ENOMEM with *stats NULL. */
int fp_group_stats(const fp_gv_t *v, size_t n, size_t ngroups, fp_group_stats_t **stats);

#endif
