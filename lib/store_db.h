/* store_db.h — internal to the run store (writer, reader, export): the schema's identity, opening a
 * file for reading or writing with every refusal check, and SQLite errors turned into one-line
 * messages that name the file. Not for use outside lib/store*.c and its tests. */
#ifndef FP_STORE_DB_H
#define FP_STORE_DB_H

#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

#define FP_STORE_APPLICATION_ID 0x46503136   /* 'FP16' */
#define FP_STORE_SCHEMA_VERSION 6
#define FP_STORE_BUSY_TIMEOUT_MS 5000
/* A 'running' run whose heartbeat is older than this is shown as stale by readers. */
#define FP_STORE_STALE_NS (15LL * 1000000000LL)

/* ---- schema (store_schema.c) ---- */
const char *fp_store_schema_sql(void);             /* the current version, for a new file */
const char *fp_store_migration_sql(int from_version); /* from -> from + 1; NULL when none */

typedef struct {
    const char *name;      /* the name `export --table` takes */
    const char *select;    /* one run's rows; ?1 is the run id */
} fp_store_table_t;
const fp_store_table_t *fp_store_tables(size_t *count);

/* ---- opening (store_open.c) ---- */
typedef enum {
    FP_STORE_READ,      /* SQLITE_OPEN_READONLY, and immutable when no writer is active (no -wal
                         * file), so not even SQLite's -wal/-shm side files appear */
    FP_STORE_WRITE      /* creates the file (never its directory), migrates, WAL mode */
} fp_store_mode;

/* Open `path`, check it is ours and current (migrating it when writing), and set the connection
 * up (busy timeout; WAL and synchronous=NORMAL when writing). On failure *db is NULL and the
 * message names the file. */
int fp_store_db_open(const char *path, fp_store_mode mode, sqlite3 **db);
/* The same; *immutable (may be NULL) says whether a reader's connection reads the file immutable: no
 * writer was active, or the side files could not be used (an I/O error through them, e.g. a -shm that a
 * full disk keeps from growing) while the WAL held nothing. A write open that fails removes the -wal
 * and -shm files it made when the WAL holds nothing (and the empty file it created). */
int fp_store_db_open_ex(const char *path, fp_store_mode mode, sqlite3 **db, int *immutable);

/* 1 when PATH-wal exists (a writer is active, or died without cleaning up). */
int fp_store_wal_exists(const char *path);
/* Its size in bytes; -1 when there is none. */
long long fp_store_wal_size(const char *path);

/* Turn an SQLite result code into an FP_E* code and a message "PATH: <what went wrong> while
 * DOING"; returns the FP_E* code. */
int fp_store_sqlite_fail(sqlite3 *db, int rc, const char *path, const char *doing);

/* Run SQL that returns no rows (several statements allowed). */
int fp_store_exec(sqlite3 *db, const char *path, const char *sql, const char *doing);

/* This machine's host name (static storage). */
const char *fp_store_hostname(void);
/* 1 when a writer recorded as (pid, host) has certainly gone: same host and no such process. */
int fp_store_writer_gone(int64_t pid, const char *host);

/* ---- reader internals shared with store_csv.c (store_reader.c) ---- */
struct fp_reader;
sqlite3 *fp_reader_db(struct fp_reader *r);
int fp_reader_begin(struct fp_reader *r);           /* BEGIN a short read transaction */
/* fp_store_sqlite_fail for the reader's connection and file. */
int fp_reader_fail(struct fp_reader *r, int rc, const char *doing);
int fp_reader_end(struct fp_reader *r, int rc);     /* COMMIT (or ROLLBACK when rc != FP_OK); returns rc */
/* FP_OK when the run exists; else FP_EINVAL "FILE: no run ID" (inside a transaction). */
int fp_reader_check_run(struct fp_reader *r, int64_t run);

#endif
