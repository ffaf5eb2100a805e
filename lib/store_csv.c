/* store_csv.c — `export`: one run's rows of a store table as RFC 4180 CSV (store_reader.h).
 * Promise: a header row, CRLF line ends, a field quoted (quotes doubled) exactly when it holds a
 * comma, a quote, CR or LF; NULL is an empty field; reals print so they read back exactly; a failed write
 * (a full disk) stops the export and is named with its cause ("cannot write the CSV: No space left ..."). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store_db.h"
#include "store_reader.h"

const char *fp_reader_table_list(void)
{
    static char list[512];
    if (!list[0]) {
        size_t n, len = 0;
        const fp_store_table_t *t = fp_store_tables(&n);
        for (size_t i = 0; i < n; i++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", t[i].name);
    }
    return list;
}

static const fp_store_table_t *find_table(const char *name)
{
    size_t n;
    const fp_store_table_t *t = fp_store_tables(&n);
    for (size_t i = 0; i < n && name; i++)
        if (strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

int fp_reader_table_known(const char *name)
{
    return find_table(name) != NULL;
}

static void put_field(FILE *out, const char *s, size_t len)
{
    if (!strpbrk(s, ",\"\r\n") && strlen(s) == len) {
        fwrite(s, 1, len, out);
        return;
    }
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"')
            fputc('"', out);
        fputc(s[i], out);
    }
    fputc('"', out);
}

/* The shortest of %.15g .. %.17g that reads back as the same double. */
static void put_real(FILE *out, double v)
{
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, out);
}

int fp_reader_export_csv(fp_reader_t *r, int64_t run, const char *table, FILE *out)
{
    const fp_store_table_t *found = find_table(table);
    if (!found)
        return fp_fail(FP_EINVAL, "unknown table '%s'; valid tables: %s", table ? table : "", fp_reader_table_list());
    const char *path = fp_reader_path(r);
    sqlite3 *db = fp_reader_db(r);
    sqlite3_stmt *st = NULL;
    int rc = fp_reader_begin(r);
    if (rc == FP_OK)
        rc = fp_reader_check_run(r, run);
    int src = SQLITE_DONE, write_errno = 0;
    if (rc == FP_OK && (src = sqlite3_prepare_v2(db, found->select, -1, &st, NULL)) != SQLITE_OK)
        rc = fp_store_sqlite_fail(db, src, path, "preparing the export");
    if (rc == FP_OK) {
        sqlite3_bind_int64(st, 1, run);
        int cols = sqlite3_column_count(st);
        for (int c = 0; c < cols; c++) {
            const char *name = sqlite3_column_name(st, c);
            if (c)
                fputc(',', out);
            put_field(out, name, strlen(name));
        }
        fputs("\r\n", out);
        while (!ferror(out) && (src = sqlite3_step(st)) == SQLITE_ROW) {
            for (int c = 0; c < cols; c++) {
                if (c)
                    fputc(',', out);
                switch (sqlite3_column_type(st, c)) {
                case SQLITE_NULL: break;
                case SQLITE_INTEGER: fprintf(out, "%lld", (long long)sqlite3_column_int64(st, c)); break;
                case SQLITE_FLOAT: put_real(out, sqlite3_column_double(st, c)); break;
                default: {
                    const char *s = (const char *)sqlite3_column_text(st, c);
                    put_field(out, s ? s : "", (size_t)sqlite3_column_bytes(st, c));
                }
                }
            }
            if (fputs("\r\n", out) == EOF || ferror(out))
                write_errno = errno;   /* a full disk: say so, before SQLite can touch errno */
        }
        if (!ferror(out) && src != SQLITE_DONE)
            rc = fp_store_sqlite_fail(db, src, path, "exporting");
    }
    sqlite3_finalize(st);
    if (rc == FP_OK && (fflush(out) != 0 || ferror(out))) {
        if (!write_errno)
            write_errno = errno;
        rc = fp_fail(FP_EIO, "cannot write the CSV: %s", write_errno ? strerror(write_errno) : "write error");
    }
    return fp_reader_end(r, rc);
}
