/* store_columns.h — internal to the run store's readers (store_reader*.c): one column of a result row
 * with SQL NULL read as "not recorded" (-1, NaN or ""), growing and (on error) dropping a row array,
 * one query's rows collected into an array, and a 'running' run's liveness as readers derive it. Not for use outside lib/store*.c. */
#ifndef FP_STORE_COLUMNS_H
#define FP_STORE_COLUMNS_H

#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

/* Column i as text into dst[cap] (truncated, always NUL-terminated; NULL reads as ""). */
void fp_col_text(sqlite3_stmt *st, int i, char *dst, size_t cap);
/* Column i as an integer; NULL reads as -1 (every such column holds ids, counts or times >= 0). */
int64_t fp_col_i64(sqlite3_stmt *st, int i);
int fp_col_int(sqlite3_stmt *st, int i);
/* Column i as a double; NULL reads as NaN. */
double fp_col_dbl(sqlite3_stmt *st, int i);
/* Column i, an event kind's name (fp_event_kind_name), as its fp_event_kind; unknown or NULL reads
 * as FP_EVENT_INFO. */
int fp_col_event_kind(sqlite3_stmt *st, int i);

/* Grow *arr (of *cap elements of size sz) so that element n fits: doubles, 64 at first. FP_OK, or
 * FP_ENOMEM with *arr and *cap untouched. */
int fp_rows_reserve(void **arr, size_t *cap, size_t n, size_t sz);

/* End a read that fills *rows (fp_reader_end); when rc or the end failed, free *rows, set it NULL and
 * *n 0. Returns the result. */
struct fp_reader;
int fp_reader_end_rows(struct fp_reader *r, int rc, void **rows, size_t *n);

/* Fills one element of a row array from the current row of st (r: the reader, for nested reads). */
typedef int (*fp_row_fill_fn)(sqlite3_stmt *st, void *elem, struct fp_reader *r);
/* Run `sql` with int64 arguments ?1..?nargs in one read transaction; each row is filled (zeroed first)
 * into a new element of size `elem` of *rows. With check_run, the run args[0] must exist. On error
 * *rows is NULL, *n 0 and the message names the file and `doing`. */
int fp_reader_collect(struct fp_reader *r, const char *sql, const int64_t *args, int nargs, int check_run,
                      size_t elem, void **rows, size_t *n, fp_row_fill_fn fill, const char *doing);

/* A run recorded as status[] 'running' whose writer (pid on host) has certainly gone becomes
 * "interrupted", with failure[] "writer process PID is gone"; returns 1 (stale) then, or when its
 * heartbeat (ns, -1 when none) is older than FP_STORE_STALE_NS; else 0 and nothing changes. */
int fp_run_liveness(char *status, size_t status_cap, char *failure, size_t failure_cap, int64_t pid,
                    const char *host, int64_t heartbeat);

#endif
