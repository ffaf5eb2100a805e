/* store_columns.h — internal to the run store's readers (store_reader*.c): one column of a result row
 * with SQL NULL read as "not recorded" (-1, NaN or ""), growing and (on error) dropping a row array,
 * one query's rows collected into an array (its columns read by a table of fields), and a 'running'
 * run's liveness as readers derive it. Not for use outside lib/store*.c. */
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

/* How a column is read into a field of a row: NULL reads as "not recorded" for the _NA kinds, -1 / NaN
 * / "" (fp_col_i64, fp_col_int, fp_col_dbl, fp_col_text), and as SQLite gives it (0) for the others. */
typedef enum {
    FP_COL_I64,         /* int64_t, NULL 0 */
    FP_COL_I64_NA,      /* int64_t, NULL -1 */
    FP_COL_INT,         /* int, NULL 0 */
    FP_COL_INT_NA,      /* int, NULL -1 */
    FP_COL_U32,         /* uint32_t: the integer's low 32 bits */
    FP_COL_DBL,         /* double, NULL NaN */
    FP_COL_TEXT,        /* char[size], truncated, always NUL-terminated */
    FP_COL_EVENT_KIND   /* int: fp_col_event_kind */
} fp_col_kind;

/* Where one column goes: its kind, and the field's offset and size in the row. */
typedef struct {
    fp_col_kind kind;
    size_t offset, size;
} fp_col_t;
#define FP_COL(type, field, kind) {(kind), offsetof(type, field), sizeof ((type *)0)->field}
/* Columns 0..ncols-1 of st's current row into the fields of the row at `row`. */
void fp_cols_read(sqlite3_stmt *st, const fp_col_t *cols, size_t ncols, void *row);

/* Fills one element of a row array from the current row of st, after its columns (r: the reader, for
 * nested reads). */
typedef int (*fp_row_fill_fn)(sqlite3_stmt *st, void *elem, struct fp_reader *r);

/* One query of a reader and how its rows become elements. */
typedef struct {
    const char *sql;            /* int64 arguments ?1..?nargs */
    const fp_col_t *cols;       /* column i goes to cols[i] (i < ncols; more columns are the fill's) */
    size_t ncols;
    fp_row_fill_fn fill;        /* then this, when not NULL */
    const char *doing;          /* for the error message: "reading layers" */
    int keep;                   /* a kept statement's slot (store_reader_internal.h); 0: prepared for this call */
} fp_query_t;
#define FP_COLS(array) (array), sizeof (array) / sizeof *(array)

/* Run q with int64 arguments ?1..?nargs in one read transaction; each row becomes a new element of
 * size `elem` of *rows, zeroed, then its columns read and filled. With check_run, the run args[0] must
 * exist. On error *rows is NULL, *n 0 and the message names the file and q->doing. */
int fp_reader_collect(struct fp_reader *r, const fp_query_t *q, const int64_t *args, int nargs, int check_run,
                      size_t elem, void **rows, size_t *n);

/* A run recorded as status[] 'running' whose writer (pid on host) has certainly gone becomes
 * "interrupted", with failure[] "writer process PID is gone"; returns 1 (stale) then, or when its
 * heartbeat (ns, -1 when none) is older than FP_STORE_STALE_NS; else 0 and nothing changes. */
int fp_run_liveness(char *status, size_t status_cap, char *failure, size_t failure_cap, int64_t pid,
                    const char *host, int64_t heartbeat);

#endif
