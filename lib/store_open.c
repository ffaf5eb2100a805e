/* store_open.c — opening a run-store file: refusal checks before SQLite touches it (missing file or
 * directory, permissions, not SQLite, truncated, foreign, newer), then creation or an all-or-nothing
 * migration when writing. Promise: a refused file is never created or modified; errors name it. */
#include "store_db.h"
#include <errno.h>
#include <sys/resource.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "atomic_file.h"
#include "clock.h"
#include "error.h"

const char *fp_store_hostname(void)
{
    static _Thread_local char name[256];
    if (gethostname(name, sizeof name - 1) != 0)
        strcpy(name, "unknown");
    name[sizeof name - 1] = '\0';
    return name;
}

int fp_store_writer_gone(int64_t pid, const char *host)
{
    if (pid <= 0 || pid > INT_MAX || !host || strcmp(host, fp_store_hostname()) != 0)
        return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Why a write failed, as far as it can be told: SQLite does not always keep the system's errno (a write
 * past `ulimit -f` fails with EFBIG, and by the time the error is recorded errno may be another call's), so
 * the file size limit is also recognised by the database or its WAL having reached it. */
static const char *io_cause(sqlite3 *db, const char *path)
{
    int e = db ? sqlite3_system_errno(db) : 0;
    if (e == ENOSPC)
        return "the disk is full";
    if (e == EDQUOT)
        return "the disk quota is exceeded";
    struct rlimit rl;
    if (e == EFBIG || (path && getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)) {
        for (int i = 0; e != EFBIG && i < 2; i++) {
            char side[PATH_MAX + 8];
            struct stat st;
            snprintf(side, sizeof side, "%s%s", path, i ? "-wal" : "");
            if (stat(side, &st) == 0 && (rlim_t)st.st_size + 65536 >= rl.rlim_cur)
                e = EFBIG;
        }
        if (e == EFBIG)
            return "the file size limit (ulimit -f) was reached";
    }
    return "I/O error";
}

int fp_store_sqlite_fail(sqlite3 *db, int rc, const char *path, const char *doing)
{
    int code = FP_EINTERNAL;
    const char *what = "SQLite error";
    switch (rc & 0xff) {
    case SQLITE_NOTADB: code = FP_EFORMAT; what = "not an fp16probe database (not an SQLite file)"; break;
    case SQLITE_CORRUPT: code = FP_EFORMAT; what = "the database is corrupt"; break;
    case SQLITE_FULL: code = FP_EIO; what = "the disk is full (or the file size limit was reached)"; break;
    case SQLITE_IOERR:   /* say what the system said when it is one a user can act on */
        code = FP_EIO;
        what = io_cause(db, path);
        break;
    case SQLITE_READONLY: code = FP_EIO; what = "the file or its directory is read-only"; break;
    case SQLITE_CANTOPEN: code = FP_EIO; what = "cannot open the file"; break;
    case SQLITE_PERM: code = FP_EIO; what = "permission denied"; break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: code = FP_EIO; what = "the database stayed locked by another process"; break;
    case SQLITE_NOMEM: code = FP_ENOMEM; what = "out of memory"; break;
    default: break;
    }
    const char *detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    return fp_fail(code, "%s: %s while %s (%s)", path, what, doing, detail);
}

int fp_store_exec(sqlite3 *db, const char *path, const char *sql, const char *doing)
{
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? FP_OK : fp_store_sqlite_fail(db, rc, path, doing);
}

/* fp_store_exec for a statement whose lock SQLite takes without calling the busy handler (the exclusive
 * lock of PRAGMA journal_mode = WAL): SQLITE_BUSY is retried with back-off (10 ms doubling to 200 ms) for
 * up to FP_STORE_BUSY_TIMEOUT_MS, as the busy timeout would. */
static int exec_waiting(sqlite3 *db, const char *path, const char *sql, const char *doing)
{
    int64_t t0 = fp_clock_mono_ms();
    int delay_ms = 10;
    for (;;) {
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            return FP_OK;
        if ((rc & 0xff) != SQLITE_BUSY || fp_clock_mono_ms() - t0 >= FP_STORE_BUSY_TIMEOUT_MS)
            return fp_store_sqlite_fail(db, rc, path, doing);
        usleep((useconds_t)delay_ms * 1000);
        delay_ms = delay_ms < 100 ? delay_ms * 2 : 200;
    }
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int side_file_size(const char *path, const char *suffix, long long *size)
{
    char side[PATH_MAX + 8];
    struct stat st;
    snprintf(side, sizeof side, "%s%s", path, suffix);
    if (stat(side, &st) != 0)
        return 0;
    *size = (long long)st.st_size;
    return 1;
}

/* What the 100-byte SQLite header says, checked without SQLite (so a refusal writes nothing). */
static int check_header(const char *path, long long size, fp_store_mode mode)
{
    if (size == 0)
        return mode == FP_STORE_WRITE ? FP_OK
                                      : fp_fail(FP_EFORMAT, "%s: empty file, not an fp16probe database", path);
    unsigned char h[100];
    FILE *f = fopen(path, "rb");
    if (!f)
        return fp_fail(FP_EIO, "%s: cannot read: %s", path, strerror(errno));
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got < sizeof h || memcmp(h, "SQLite format 3", 16) != 0)
        return fp_fail(FP_EFORMAT, "%s: not an fp16probe database (not an SQLite file)", path);
    uint32_t page = (uint32_t)h[16] << 8 | h[17];
    if (page == 1)
        page = 65536;
    if (page < 512 || (page & (page - 1)) != 0)
        return fp_fail(FP_EFORMAT, "%s: the database is corrupt (bad page size in its header)", path);
    if (size % page != 0)
        return fp_fail(FP_EFORMAT, "%s: truncated or corrupt database (%lld bytes is not a whole number of "
                       "%u-byte pages)", path, size, page);
    uint32_t pages = be32(h + 28), counter = be32(h + 24), valid_for = be32(h + 92);
    long long wal = 0;
    int has_wal = side_file_size(path, "-wal", &wal) && wal > 0;
    if (!has_wal && pages > 0 && valid_for == counter && (long long)pages * page > size)
        return fp_fail(FP_EFORMAT, "%s: truncated database (%lld of %u pages present)", path, size / page, pages);
    uint32_t app = be32(h + 68), version = be32(h + 60);
    if (app != 0 && app != FP_STORE_APPLICATION_ID)
        return fp_fail(FP_EFORMAT, "%s: not an fp16probe database (SQLite application id 0x%08x)", path, app);
    if (app == FP_STORE_APPLICATION_ID && version > FP_STORE_SCHEMA_VERSION)
        return fp_fail(FP_EVERSION, "%s: written by a newer fp16probe (schema version %u; this build knows up to %d); "
                       "refused and not modified", path, version, FP_STORE_SCHEMA_VERSION);
    return FP_OK;
}

/* Everything that can be said about the path before opening it. */
static int check_path(const char *path, fp_store_mode mode, int *exists)
{
    struct stat st;
    char dir[PATH_MAX];
    fp_path_dir(path, dir, sizeof dir);
    *exists = stat(path, &st) == 0;
    if (!*exists && errno != ENOENT)
        return fp_fail(FP_EIO, "%s: cannot access: %s", path, strerror(errno));
    if (*exists && S_ISDIR(st.st_mode))
        return fp_fail(FP_EINVAL, "%s: is a directory, not a database file", path);
    if (!*exists) {
        if (mode != FP_STORE_WRITE)
            return fp_fail(FP_EIO, "%s: no such database file", path);
        struct stat dst;
        if (stat(dir, &dst) != 0)
            return fp_fail(FP_EIO, "%s: cannot create: directory %s does not exist", path, dir);
        if (!S_ISDIR(dst.st_mode))
            return fp_fail(FP_EIO, "%s: cannot create: %s is not a directory", path, dir);
        if (access(dir, W_OK | X_OK) != 0)
            return fp_fail(FP_EIO, "%s: cannot create: directory %s is not writable", path, dir);
        return FP_OK;
    }
    if (access(path, R_OK) != 0)
        return fp_fail(FP_EIO, "%s: cannot read: %s", path, strerror(errno));
    if (mode == FP_STORE_WRITE) {
        if (access(path, W_OK) != 0)
            return fp_fail(FP_EIO, "%s: the file is read-only; cannot record into it", path);
        if (access(dir, W_OK | X_OK) != 0)
            return fp_fail(FP_EIO, "%s: directory %s is not writable (SQLite needs it for the -wal and -shm "
                           "files); cannot record into it", path, dir);
    }
    return check_header(path, (long long)st.st_size, mode);
}

static int query_int(sqlite3 *db, const char *path, const char *sql, long long *out)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? FP_OK : fp_store_sqlite_fail(db, rc, path, "reading the schema");
}

typedef struct {
    long long app, version, tables;
} identity_t;

static int read_identity(sqlite3 *db, const char *path, identity_t *id)
{
    int rc = query_int(db, path, "SELECT count(*) FROM sqlite_master", &id->tables);
    if (rc == FP_OK)
        rc = query_int(db, path, "PRAGMA application_id", &id->app);
    if (rc == FP_OK)
        rc = query_int(db, path, "PRAGMA user_version", &id->version);
    if (rc != FP_OK)
        return rc;
    uint32_t app = (uint32_t)id->app;
    if (app != FP_STORE_APPLICATION_ID && (app != 0 || id->tables > 0)) {
        if (app == 0)
            return fp_fail(FP_EFORMAT, "%s: not an fp16probe database (an SQLite database of another program: "
                           "tables but no fp16probe application id)", path);
        return fp_fail(FP_EFORMAT, "%s: not an fp16probe database (SQLite application id 0x%08x)", path, app);
    }
    if (id->version > FP_STORE_SCHEMA_VERSION)
        return fp_fail(FP_EVERSION, "%s: written by a newer fp16probe (schema version %lld; this build knows up to "
                       "%d); refused and not modified", path, id->version, FP_STORE_SCHEMA_VERSION);
    if (id->tables > 0 && id->version < 1)
        return fp_fail(FP_EFORMAT, "%s: fp16probe database without a schema version: refused", path);
    return FP_OK;
}

/* Create or migrate inside one IMMEDIATE transaction: all of it happens or none of it. */
static int bring_up_to_date(sqlite3 *db, const char *path)
{
    int rc = fp_store_exec(db, path, "BEGIN IMMEDIATE", "starting the schema transaction");
    if (rc != FP_OK)
        return rc;
    identity_t id;
    rc = read_identity(db, path, &id);   /* again, under the write lock: another writer may have won */
    if (rc == FP_OK && id.tables == 0) {
        char sql[96];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d",
                 FP_STORE_APPLICATION_ID, FP_STORE_SCHEMA_VERSION);
        rc = fp_store_exec(db, path, fp_store_schema_sql(), "creating the schema");
        if (rc == FP_OK)
            rc = fp_store_exec(db, path, sql, "creating the schema");
    } else if (rc == FP_OK && id.version < FP_STORE_SCHEMA_VERSION) {
        for (int v = (int)id.version; rc == FP_OK && v < FP_STORE_SCHEMA_VERSION; v++) {
            rc = fp_store_exec(db, path, fp_store_migration_sql(v), "migrating the schema");
            if (rc != FP_OK) {
                char why[512];
                snprintf(why, sizeof why, "%s", fp_error_message());
                rc = fp_fail(rc, "%s; migration from schema version %lld rolled back, file unchanged", why,
                             id.version);
            }
        }
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", FP_STORE_SCHEMA_VERSION);
        if (rc == FP_OK)
            rc = fp_store_exec(db, path, sql, "migrating the schema");
    }
    if (rc == FP_OK)
        return fp_store_exec(db, path, "COMMIT", "committing the schema");
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* "file:" URI of path, with "?immutable=1" when asked (only %, ? and # need escaping). */
static void uri_of(const char *path, int immutable, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "file:");
    for (const char *p = path; *p && n + 4 < cap; p++) {
        if (*p == '%' || *p == '?' || *p == '#')
            n += (size_t)snprintf(buf + n, cap - n, "%%%02X", (unsigned char)*p);
        else
            buf[n++] = *p;
    }
    snprintf(buf + n, cap - n, "%s", immutable ? "?immutable=1" : "");
}

static int open_conn(const char *path, int flags, int immutable, sqlite3 **out)
{
    char name[PATH_MAX + 32];
    uri_of(path, immutable, name, sizeof name);
    sqlite3 *db = NULL;
    int src = sqlite3_open_v2(name, &db, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, NULL);
    if (src != SQLITE_OK) {
        int rc = fp_store_sqlite_fail(db, src, path, "opening");
        sqlite3_close(db);
        *out = NULL;
        return rc;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, FP_STORE_BUSY_TIMEOUT_MS);
    *out = db;
    return FP_OK;
}

int fp_store_wal_exists(const char *path)
{
    long long size;
    return side_file_size(path, "-wal", &size);
}

long long fp_store_wal_size(const char *path)
{
    long long size;
    return side_file_size(path, "-wal", &size) ? size : -1;
}

/* A start that failed after SQLite made PATH-wal and PATH-shm (a full disk while switching to WAL mode
 * leaves a 3-byte -shm and an empty -wal, through which every later reader then had to go): removed when
 * this open made them (neither was there before) and the WAL holds nothing, so not a byte of data goes;
 * likewise the empty database file this open created. */
static void drop_failed_start(const char *path, int existed, int side_before)
{
    char side[PATH_MAX + 8];
    long long wal = fp_store_wal_size(path);
    if (side_before || wal > 0)
        return;
    snprintf(side, sizeof side, "%s-wal", path);
    if (wal == 0)
        unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    struct stat st;
    if (!existed && stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
        unlink(path);
}

/* Reading through the side files failed with an I/O error (a -shm that cannot be grown on a full disk, a
 * read-only or leftover one): when the WAL holds nothing, the database file alone is the whole database, so
 * it is read immutable, without them. *db is replaced on success; else the first error stands. */
static int read_without_side_files(const char *path, int rc, sqlite3 **db, identity_t *id, int *immutable)
{
    char first[1024];
    snprintf(first, sizeof first, "%s", fp_error_message());
    if (rc != FP_EIO || fp_store_wal_size(path) != 0)
        return rc;
    sqlite3 *alt = NULL;
    int rc2 = open_conn(path, SQLITE_OPEN_READONLY, 1, &alt);
    if (rc2 == FP_OK)
        rc2 = read_identity(alt, path, id);
    if (rc2 != FP_OK) {
        sqlite3_close(alt);
        return fp_fail(rc, "%s", first);
    }
    sqlite3_close(*db);
    *db = alt;
    *immutable = 1;
    return FP_OK;
}

int fp_store_db_open(const char *path, fp_store_mode mode, sqlite3 **out)
{
    return fp_store_db_open_ex(path, mode, out, NULL);
}

int fp_store_db_open_ex(const char *path, fp_store_mode mode, sqlite3 **out, int *immutable_out)
{
    *out = NULL;
    if (immutable_out)
        *immutable_out = 0;
    if (!path || !*path)
        return fp_fail(FP_EINVAL, "no database file given");
    int exists, rc = check_path(path, mode, &exists);
    if (rc != FP_OK)
        return rc;
    struct stat st;
    int empty = !exists || (stat(path, &st) == 0 && st.st_size == 0);
    /* Check the file through a read-only connection first: immutable (no locks, no -wal/-shm side
     * files) unless a writer is active, so that a refused file is left exactly as it was. */
    sqlite3 *db = NULL;
    identity_t id = {0, 0, 0};
    char shm[PATH_MAX + 8];
    snprintf(shm, sizeof shm, "%s-shm", path);
    int side_before = fp_store_wal_exists(path) || access(shm, F_OK) == 0;
    int immutable = !fp_store_wal_exists(path);
    if (!empty) {
        rc = open_conn(path, SQLITE_OPEN_READONLY, immutable, &db);
        if (rc == FP_OK)
            rc = read_identity(db, path, &id);
        if (rc != FP_OK && !immutable && mode != FP_STORE_WRITE)
            rc = read_without_side_files(path, rc, &db, &id, &immutable);
    }
    if (rc == FP_OK && mode != FP_STORE_WRITE) {
        if (id.tables == 0)
            rc = fp_fail(FP_EFORMAT, "%s: holds no fp16probe data (empty SQLite database)", path);
        else if (id.version < FP_STORE_SCHEMA_VERSION)
            rc = fp_fail(FP_EVERSION, "%s: schema version %lld is older than this build's %d; record into it once "
                         "(which migrates it) before reading", path, id.version, FP_STORE_SCHEMA_VERSION);
        if (rc == FP_OK) {
            *out = db;
            if (immutable_out)
                *immutable_out = immutable;
            return FP_OK;
        }
    }
    sqlite3_close(db);
    if (rc != FP_OK)
        return rc;
    rc = open_conn(path, SQLITE_OPEN_READWRITE | (exists ? 0 : SQLITE_OPEN_CREATE), 0, &db);
    if (rc == FP_OK)
        rc = exec_waiting(db, path, "PRAGMA journal_mode = WAL", "switching to WAL mode");
    if (rc == FP_OK)
        rc = fp_store_exec(db, path, "PRAGMA synchronous = NORMAL", "setting synchronous mode");
    if (rc == FP_OK && (id.tables == 0 || id.version < FP_STORE_SCHEMA_VERSION))
        rc = bring_up_to_date(db, path);
    if (rc != FP_OK) {
        sqlite3_close(db);
        drop_failed_start(path, exists, side_before);
        return rc;
    }
    *out = db;
    return FP_OK;
}
