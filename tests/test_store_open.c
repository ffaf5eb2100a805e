/* test_store_open.c — opening a run-store file: create, reopen, migrate (version-1, -2 and -5 files built by
 * hand), and every refusal (not SQLite, empty, truncated, corrupt, newer, foreign, read-only file or
 * directory, missing directory or file): error names the file, one line, file untouched. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "error.h"
#include "store.h"
#include "store_db.h"
#include "store_reader.h"
#include "tap.h"
#include "store_testutil.h"

static char *dir;

/* Try to open path as a writer and as a reader; both must fail without touching the file. */
static void refused(const char *what, const char *path, int check_write, int check_read)
{
    tu_snap_t before;
    tu_snap(path, &before);
    int side_before = tu_no_side_files(path);
    for (int w = 0; w < 2; w++) {
        if ((w == 0 && !check_write) || (w == 1 && !check_read))
            continue;
        fp_error_clear();
        int rc;
        if (w == 0) {
            fp_store_t *s = NULL;
            rc = fp_store_open(&s, path);
            if (rc == FP_OK)
                fp_store_close(s, FP_RUN_FINISHED, NULL);
        } else {
            fp_reader_t *r = NULL;
            rc = fp_reader_open(&r, path);
            fp_reader_close(r);
        }
        const char *m = fp_error_message();
        tap_ok(rc != FP_OK && strstr(m, path) != NULL && !strchr(m, '\n'),
               "%s: %s refused with one line naming the file (%s)", what, w ? "reader" : "writer", m);
    }
    tap_ok(tu_same(path, &before), "%s: file not created or modified", what);
    tap_ok(!side_before || tu_no_side_files(path), "%s: no -wal/-shm side files left", what);
    tu_snap_free(&before);
}

static char *fresh(const char *name)
{
    char *p = tu_path(dir, name);
    fp_store_t *s;
    if (fp_store_open(&s, p) != FP_OK || fp_store_close(s, FP_RUN_FINISHED, NULL) != FP_OK)
        tap_diag("cannot create %s: %s", p, fp_error_message());
    return p;
}

/* PRAGMA table_info of every table, as one string, to compare schemas. */
static char *schema_of(const char *path)
{
    sqlite3 *db;
    sqlite3_stmt *t, *c;
    size_t cap = 65536, len = 0;
    char *out = calloc(1, cap);
    sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type IN ('table','index') ORDER BY name", -1, &t,
                       NULL);
    while (sqlite3_step(t) == SQLITE_ROW) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT name, type, \"notnull\", pk FROM pragma_table_info('%s')",
                 (const char *)sqlite3_column_text(t, 0));
        len += (size_t)snprintf(out + len, cap - len, "[%s]", (const char *)sqlite3_column_text(t, 0));
        sqlite3_prepare_v2(db, sql, -1, &c, NULL);
        while (sqlite3_step(c) == SQLITE_ROW)
            len += (size_t)snprintf(out + len, cap - len, " %s:%s:%d:%d", sqlite3_column_text(c, 0),
                                    sqlite3_column_text(c, 1), sqlite3_column_int(c, 2), sqlite3_column_int(c, 3));
        sqlite3_finalize(c);
    }
    sqlite3_finalize(t);
    sqlite3_close(db);
    return out;
}

/* The version-6 addition taken away again: a version-5 file. */
#define TO_V5 "ALTER TABLE steps DROP COLUMN host_cpu_ns;"
/* The version-5 additions taken away again: a version-4 file. */
#define TO_V4 TO_V5 " DROP TABLE dist_steps; DROP TABLE allreduce_error;"
/* The version-4 addition taken away again: a version-3 file. */
#define TO_V3 TO_V4 " ALTER TABLE evaluations DROP COLUMN images;"
/* The version-3 additions taken away again: a version-2 file (with one kernel row). */
#define TO_V2                                                                                       \
    TO_V3 " ALTER TABLE kernels DROP COLUMN kernelClass; DROP TABLE ENUM_KERNEL_CLASS;"                 \
    " ALTER TABLE steps DROP COLUMN cycles; ALTER TABLE steps DROP COLUMN instructions;"
static const char to_v2[] =
    TO_V2 " PRAGMA user_version = 2;"
    " INSERT INTO sessions (id, name, start) VALUES (1, 'old', 1);"
    " INSERT INTO runs (id, session, model, policy, start, status) VALUES (1, 1, 'resnet50', 'bf16', 1, 'finished');"
    " INSERT INTO StringIds (id, value) VALUES (1, 'ampere_h16816gemm_256x128_ldg8_stages_64x3_tn');"
    " INSERT INTO kernels (run, step, start, end, shortName, tensorCore) VALUES (1, 1, 100, 200, 1, 1);";

/* A version-5 file with one step recorded before host CPU time was. */
static const char to_v5[] =
    TO_V5 " PRAGMA user_version = 5;"
    " INSERT INTO sessions (id, name, start) VALUES (1, 'old', 1);"
    " INSERT INTO runs (id, session, model, policy, start, status) VALUES (1, 1, 'resnet50', 'fp16', 1, 'finished');"
    " INSERT INTO steps (run, step, loss, wall_ns, cycles) VALUES (1, 1, 2.5, 1000000, 3000000);";

static const char to_v1[] =
    TO_V2 " DROP TABLE device_samples; ALTER TABLE runs DROP COLUMN heartbeat; ALTER TABLE runs DROP COLUMN writer_host;"
    " ALTER TABLE runs DROP COLUMN writer_pid; PRAGMA user_version = 1;"
    " INSERT INTO sessions (id, name, start) VALUES (1, 'old', 1);"
    " INSERT INTO runs (id, session, model, policy, start, status) VALUES (1, 1, 'resnet18', 'fp16', 1, 'finished');"
    " INSERT INTO steps (run, step, loss) VALUES (1, 0, 2.5);";

static void test_create_reopen_migrate(void)
{
    char *p = tu_path(dir, "new.db");
    fp_store_t *s;
    int rc = fp_store_open(&s, p);
    tap_is_int(rc, FP_OK, "a new file is created (%s)", fp_error_message());
    if (rc == FP_OK)
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    tap_is_int(tu_sql_int(p, "PRAGMA application_id"), FP_STORE_APPLICATION_ID, "application_id is 'FP16'");
    tap_is_int(tu_sql_int(p, "PRAGMA user_version"), FP_STORE_SCHEMA_VERSION, "user_version is current");
    rc = fp_store_open(&s, p);
    tap_is_int(rc, FP_OK, "reopening for writing works");
    if (rc == FP_OK)
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    fp_reader_t *r;
    tu_snap_t snap;
    tu_snap(p, &snap);
    rc = fp_reader_open(&r, p);
    tap_is_int(rc, FP_OK, "a reader opens it");
    fp_reader_close(r);
    tap_ok(tu_same(p, &snap), "the reader changed nothing");
    tu_snap_free(&snap);
    rc = fp_reader_open_snapshot(&r, p);
    fp_reader_close(r);
    tap_ok(rc == FP_OK && tu_no_side_files(p), "a snapshot reader opens it without side files");

    /* Version 1 built by hand: the version-2 additions taken away again. */
    char *old = fresh("v1.db");
    tu_sql(old, to_v1);
    tap_is_int(tu_sql_int(old, "PRAGMA user_version"), 1, "hand-built file is version 1");
    tu_snap(old, &snap);
    rc = fp_reader_open(&r, old);
    fp_reader_close(r);
    tap_ok(rc == FP_EVERSION && strstr(fp_error_message(), old) && tu_same(old, &snap),
           "a reader refuses the old version without migrating it (%s)", fp_error_message());
    tu_snap_free(&snap);
    rc = fp_store_open(&s, old);
    tap_is_int(rc, FP_OK, "the writer migrates version 1 (%s)", fp_error_message());
    if (rc == FP_OK)
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    tap_is_int(tu_sql_int(old, "PRAGMA user_version"), FP_STORE_SCHEMA_VERSION, "migrated to the current version");
    char *a = schema_of(p), *b = schema_of(old);
    tap_ok(strcmp(a, b) == 0, "migrated tables and columns equal a new file's");
    if (strcmp(a, b) != 0)
        tap_diag("new: %s\nmigrated: %s", a, b);
    free(a);
    free(b);
    tap_is_int(tu_sql_int(old, "SELECT count(*) FROM runs WHERE model = 'resnet18' AND status = 'finished'"), 1,
               "the old run survived the migration");
    tap_is_int(tu_sql_int(old, "SELECT count(*) FROM steps"), 1, "the old step survived the migration");

    /* A failing migration leaves the file as it was: version 1 with a stray device_samples table. */
    char *bad = fresh("v1bad.db");
    tu_sql(bad, to_v1);
    tu_sql(bad, "CREATE TABLE device_samples (x)");
    rc = fp_store_open(&s, bad);
    tap_ok(rc != FP_OK && strstr(fp_error_message(), bad) && strstr(fp_error_message(), "rolled back"),
           "a failing migration is reported (%s)", fp_error_message());
    tap_is_int(tu_sql_int(bad, "PRAGMA user_version"), 1, "after it the file is still version 1");
    tap_is_int(tu_sql_int(bad, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'writer_pid'"), 0,
               "and the first migration steps were rolled back too");
    free(p);
    free(old);
    free(bad);
}

/* Version 2 -> 3: the kernel class table and column; old kernel rows keep their values, class NULL. */
static void test_migrate_v2(void)
{
    char *p = tu_path(dir, "new3.db");
    fp_store_t *s;
    int rc = fp_store_open(&s, p);
    if (rc == FP_OK)
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    char *old = fresh("v2.db");
    tu_sql(old, to_v2);
    tap_is_int(tu_sql_int(old, "PRAGMA user_version"), 2, "hand-built file is version 2");
    fp_reader_t *r;
    tu_snap_t snap;
    tu_snap(old, &snap);
    rc = fp_reader_open(&r, old);
    fp_reader_close(r);
    tap_ok(rc == FP_EVERSION && tu_same(old, &snap), "a reader refuses version 2 without migrating it (%s)",
           fp_error_message());
    tu_snap_free(&snap);
    rc = fp_store_open(&s, old);
    tap_is_int(rc, FP_OK, "the writer migrates version 2 (%s)", fp_error_message());
    if (rc == FP_OK)
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    tap_is_int(tu_sql_int(old, "PRAGMA user_version"), FP_STORE_SCHEMA_VERSION, "version 2 migrated to the current");
    char *a = schema_of(p), *b = schema_of(old);
    tap_ok(strcmp(a, b) == 0, "migrated (from 2) tables and columns equal a new file's");
    free(a);
    free(b);
    tap_is_int(tu_sql_int(old, "SELECT count(*) FROM kernels WHERE start = 100 AND end = 200 AND tensorCore = 1"
                               " AND shortName = 1 AND kernelClass IS NULL"), 1,
               "the old kernel row survived, its class NULL (not classified)");
    tap_is_int(tu_sql_int(old, "SELECT count(*) FROM ENUM_KERNEL_CLASS WHERE (id, name) IN"
                               " (VALUES (1,'simt'),(2,'mma'),(3,'wgmma'),(4,'tcgen05'))"), 4,
               "ENUM_KERNEL_CLASS holds the four classes");
    tap_ok(fp_reader_open(&r, old) == FP_OK, "a reader opens the migrated file");
    fp_kernel_row_t *rows = NULL;
    size_t n = 0;
    rc = fp_reader_kernels(r, 1, 0, 10, &rows, &n);
    tap_ok(rc == FP_OK && n == 1 && rows[0].kernel_class == 0 && rows[0].tensor_core == 1,
           "the reader shows the old kernel as class unknown, tensor cores as recorded");
    free(rows);
    fp_reader_close(r);

    /* A failing 2 -> 3 migration (the enum table already there) leaves the file at version 2. */
    char *bad = fresh("v2bad.db");
    tu_sql(bad, to_v2);
    tu_sql(bad, "CREATE TABLE ENUM_KERNEL_CLASS (x)");
    rc = fp_store_open(&s, bad);
    tap_ok(rc != FP_OK && strstr(fp_error_message(), "rolled back"), "a failing 2 -> 3 migration is reported (%s)",
           fp_error_message());
    tap_is_int(tu_sql_int(bad, "PRAGMA user_version"), 2, "after it the file is still version 2");
    tap_is_int(tu_sql_int(bad, "SELECT count(*) FROM pragma_table_info('kernels') WHERE name = 'kernelClass'"), 0,
               "and kernels has no class column");
    free(p);
    free(old);
    free(bad);
}

/* Version 5 -> 6: steps.host_cpu_ns added; the old step keeps its values with host CPU NULL (not measured),
 * a step recorded after the migration carries it, and the reader tells the two apart. */
static void test_migrate_v5(void)
{
    char *p = tu_path(dir, "new6.db");
    fp_store_t *s;
    int rc = fp_store_open(&s, p);
    if (rc == FP_OK)
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    char *old = fresh("v5.db");
    tu_sql(old, to_v5);
    tap_ok(tu_sql_int(old, "PRAGMA user_version") == 5 &&
               tu_sql_int(old, "SELECT count(*) FROM pragma_table_info('steps') WHERE name = 'host_cpu_ns'") == 0,
           "hand-built file is version 5, steps without host_cpu_ns");
    fp_reader_t *r;
    tu_snap_t snap;
    tu_snap(old, &snap);
    rc = fp_reader_open(&r, old);
    fp_reader_close(r);
    tap_ok(rc == FP_EVERSION && tu_same(old, &snap), "a reader refuses version 5 without migrating it (%s)",
           fp_error_message());
    tu_snap_free(&snap);
    rc = fp_store_open(&s, old);
    tap_is_int(rc, FP_OK, "the writer migrates version 5 (%s)", rc ? fp_error_message() : "ok");
    if (rc == FP_OK) {
        fp_step_rec_t st = {.run = 1, .step = 2, .loss = 2.25, .loss_scale = NAN, .lr = NAN, .start = -1, .end = -1,
                            .wall_ns = 1100000, .samples_per_s = NAN, .mem_current = -1, .mem_peak = -1,
                            .energy_j = NAN, .power_w = NAN, .host_cpu_ns = 654321};
        rc = fp_store_step(s, &st, NULL, 0);
        int crc = fp_store_close(s, FP_RUN_FINISHED, NULL);
        rc = rc ? rc : crc;
    }
    tap_is_int(rc, FP_OK, "and records a step with its host CPU time into it");
    tap_is_int(tu_sql_int(old, "PRAGMA user_version"), FP_STORE_SCHEMA_VERSION, "version 5 migrated to the current");
    char *a = schema_of(p), *b = schema_of(old);
    tap_ok(strcmp(a, b) == 0, "migrated (from 5) tables and columns equal a new file's");
    if (strcmp(a, b) != 0)
        tap_diag("new: %s\nmigrated: %s", a, b);
    free(a);
    free(b);
    tap_is_int(tu_sql_int(old, "SELECT count(*) FROM steps WHERE step = 1 AND loss = 2.5 AND wall_ns = 1000000"
                               " AND cycles = 3000000 AND host_cpu_ns IS NULL"), 1,
               "the old step survived, its host CPU time NULL (not measured), never 0");
    tap_is_int(tu_sql_int(old, "SELECT host_cpu_ns FROM steps WHERE step = 2"), 654321,
               "the new step's host CPU time is stored");
    fp_step_row_t *rows = NULL;
    size_t n = 0;
    rc = fp_reader_open(&r, old);
    if (rc == FP_OK) {
        rc = fp_reader_steps_since(r, 1, INT64_MIN, 0, &rows, &n);
        fp_reader_close(r);
    }
    tap_ok(rc == FP_OK && n == 2 && rows[0].host_cpu_ns == -1 && rows[0].wall_ns == 1000000 &&
               rows[1].host_cpu_ns == 654321,
           "the reader shows the old step's host CPU as not measured (-1), the new one's as recorded");
    free(rows);

    /* A failing 5 -> 6 migration (the column already there) leaves the file at version 5. */
    char *bad = fresh("v5bad.db");
    tu_sql(bad, to_v5);
    tu_sql(bad, "ALTER TABLE steps ADD COLUMN host_cpu_ns TEXT");
    tu_snap(bad, &snap);
    rc = fp_store_open(&s, bad);
    tap_ok(rc != FP_OK && strstr(fp_error_message(), "rolled back"), "a failing 5 -> 6 migration is reported (%s)",
           fp_error_message());
    tap_ok(tu_sql_int(bad, "PRAGMA user_version") == 5 && tu_same(bad, &snap),
           "after it the file is still version 5, unchanged");
    tu_snap_free(&snap);
    free(p);
    free(old);
    free(bad);
}

typedef struct {
    const char *path;
    int write;
} open_arg_t;

static int try_open(void *v)
{
    open_arg_t *a = v;
    if (a->write) {
        fp_store_t *s;
        int rc = fp_store_open(&s, a->path);
        if (rc == FP_OK)
            fp_store_close(s, FP_RUN_FINISHED, NULL);
        return rc;
    }
    fp_reader_t *r;
    int rc = fp_reader_open(&r, a->path);
    fp_reader_close(r);
    return rc;
}

/* Permission checks, run as an unprivileged user when we are root (root ignores mode bits). */
static void test_permissions(void)
{
    char msg[600];
    char *sub = tu_path(dir, "ro");
    mkdir(sub, 0755);
    char *ro_file = tu_path(sub, "ro.db");
    int64_t runs[2];
    tu_write_fixture(ro_file, 3, 2, runs);
    chmod(ro_file, 0444);
    tu_snap_t snap;
    tu_snap(ro_file, &snap);
    open_arg_t a = {ro_file, 1};
    int rc = tu_as_user(try_open, &a, msg, sizeof msg);
    if (rc == 77) {
        tap_skip(6, "cannot switch to an unprivileged user, and root ignores permission bits");
        tu_snap_free(&snap);
        free(sub);
        free(ro_file);
        return;
    }
    tap_ok(rc != 0 && strstr(msg, ro_file) && !strchr(msg, '\n'), "read-only file: writer refused (%s)", msg);
    tap_ok(tu_same(ro_file, &snap) && tu_no_side_files(ro_file), "read-only file: not modified");
    a.write = 0;
    rc = tu_as_user(try_open, &a, msg, sizeof msg);
    tap_ok(rc == 0, "read-only file: a reader still opens it (%s)", msg);
    chmod(sub, 0555);
    char *in_ro_dir = tu_path(sub, "new.db");
    a = (open_arg_t){in_ro_dir, 1};
    rc = tu_as_user(try_open, &a, msg, sizeof msg);
    tap_ok(rc != 0 && strstr(msg, in_ro_dir) && !tu_exists(in_ro_dir),
           "read-only directory: new file refused and not created (%s)", msg);
    chmod(ro_file, 0644);
    tu_snap_free(&snap);
    tu_snap(ro_file, &snap);
    a = (open_arg_t){ro_file, 1};
    rc = tu_as_user(try_open, &a, msg, sizeof msg);
    tap_ok(rc != 0 && strstr(msg, ro_file), "read-only directory: writing an existing file refused (%s)", msg);
    tap_ok(tu_same(ro_file, &snap) && tu_no_side_files(ro_file), "read-only directory: file not modified");
    chmod(sub, 0755);
    tu_snap_free(&snap);
    free(in_ro_dir);
    free(ro_file);
    free(sub);
}

static void test_refusals(void)
{
    char *text = tu_path(dir, "notes.txt");
    const char notes[] = "these are not the tables you are looking for\n";
    tu_write_file(text, notes, strlen(notes));
    refused("text file", text, 1, 1);

    char *empty = tu_path(dir, "empty.db");
    tu_write_file(empty, "", 0);
    refused("empty file (reader)", empty, 0, 1);

    char *trunc = tu_path(dir, "truncated.db");
    int64_t runs[2];
    tu_write_fixture(trunc, 40, 8, runs);
    struct stat st;
    stat(trunc, &st);
    truncate(trunc, st.st_size / 2);
    refused("truncated to half", trunc, 1, 1);
    char *trunc2 = tu_path(dir, "truncated_odd.db");
    tu_write_fixture(trunc2, 5, 2, runs);
    stat(trunc2, &st);
    truncate(trunc2, st.st_size - 100);
    refused("truncated by 100 bytes", trunc2, 1, 1);

    char *schema_bad = tu_path(dir, "corrupt_schema.db");
    tu_write_fixture(schema_bad, 5, 2, runs);
    {
        FILE *f = fopen(schema_bad, "r+b");
        unsigned char junk[2048];
        memset(junk, 0xA5, sizeof junk);
        fseek(f, 100, SEEK_SET);   /* right after the header: the schema's b-tree page */
        fwrite(junk, 1, sizeof junk, f);
        fclose(f);
    }
    refused("corrupted schema page", schema_bad, 1, 1);

    char *newer = fresh("newer.db");
    tu_sql(newer, "PRAGMA user_version = 99");
    tu_snap_t snap;
    tu_snap(newer, &snap);
    fp_store_t *s;
    int rc = fp_store_open(&s, newer);
    tap_is_int(rc, FP_EVERSION, "newer schema version: FP_EVERSION (%s)", fp_error_message());
    if (rc == FP_OK)
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    tu_snap_free(&snap);
    refused("newer schema version", newer, 1, 1);

    char *foreign = tu_path(dir, "foreign.db");
    tu_sql(foreign, "PRAGMA application_id = 305419896; CREATE TABLE t (x); INSERT INTO t VALUES (1)");
    refused("foreign application id", foreign, 1, 1);

    char *noid = tu_path(dir, "noid.db");
    tu_sql(noid, "CREATE TABLE t (x); INSERT INTO t VALUES (1)");
    refused("tables but no application id", noid, 1, 1);

    char *nodir = tu_path(dir, "missing/sub/x.db");
    refused("missing directory", nodir, 1, 1);
    char *missing_dir = tu_path(dir, "missing");
    tap_ok(!tu_exists(missing_dir), "missing directory: not created");

    char *nofile = tu_path(dir, "absent.db");
    refused("missing file (reader)", nofile, 0, 1);

    refused("a directory", dir, 1, 1);
    free(text);
    free(empty);
    free(trunc);
    free(trunc2);
    free(schema_bad);
    free(newer);
    free(foreign);
    free(noid);
    free(nodir);
    free(missing_dir);
    free(nofile);
}

/* ---- a full disk, simulated by a file size limit in a child process (issue 21 #8) ---- */

/* In a child under RLIMIT_FSIZE = limit bytes (SIGXFSZ ignored: the write fails instead): fn(arg); its
 * result, and the child's last error message into msg. */
static int limited(long limit, int (*fn)(const char *), const char *arg, char *msg, size_t cap)
{
    int p[2];
    if (pipe(p))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
        int rc = setrlimit(RLIMIT_FSIZE, &rl) == 0 ? fn(arg) : 99;
        const char *m = fp_error_message();
        if (write(p[1], m, strlen(m)) < 0) { /* the parent reads nothing */ }
        _exit(rc);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < cap && (got = read(p[0], msg + n, cap - 1 - n)) > 0)
        n += (size_t)got;
    msg[n] = 0;
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 98;
}

static int try_write_open(const char *path)
{
    fp_store_t *s = NULL;
    int rc = fp_store_open(&s, path);
    if (rc == FP_OK)
        fp_store_close(s, FP_RUN_FINISHED, NULL);
    return rc == FP_OK ? 0 : 1;
}

static int try_read(const char *path)
{
    for (int live = 0; live < 2; live++) {
        fp_reader_t *r = NULL;
        fp_session_row_t *ss = NULL;
        fp_run_row_t *runs = NULL;
        size_t ns = 0, nr = 0;
        int rc = live ? fp_reader_open(&r, path) : fp_reader_open_snapshot(&r, path);
        for (int q = 0; rc == FP_OK && q < 3; q++) {   /* a live reader queries again: no reconnect loop */
            free(ss);
            free(runs);
            ss = NULL;
            runs = NULL;
            rc = fp_reader_sessions(r, &ss, &ns);
            if (rc == FP_OK)
                rc = fp_reader_runs(r, 0, &runs, &nr);
        }
        free(ss);
        free(runs);
        fp_reader_close(r);
        if (rc != FP_OK || ns != 1 || nr != 2)
            return 1;
    }
    return 0;
}

static void test_full_disk(void)
{
    char *db = tu_path(dir, "full.db"), msg[1024];
    int64_t runs[2];
    int ok = tu_write_fixture(db, 30, 4, runs) == FP_OK && tu_no_side_files(db);
    tap_ok(ok, "fixture written and closed cleanly (no -wal, no -shm)");
    /* a write open that cannot grow the -shm (as on a 100% full disk) */
    int rc = limited(16384, try_write_open, db, msg, sizeof msg);
    tap_ok(rc == 1 && strstr(msg, db) && strstr(msg, "limit"), "recording under a 16 KiB file size limit fails, "
           "naming the file and the cause: %s", msg);
    tap_ok(tu_no_side_files(db), "the failed start leaves no -wal or -shm behind (it left a 3-byte -shm and an "
           "empty -wal)");
    rc = limited(16384, try_read, db, msg, sizeof msg);
    tap_ok(rc == 0, "the file reads while the disk stays full (%s)", rc ? msg : "ok");
    /* the leftovers of such a start (an older build's, or a crash's): an intact file still reads */
    char side[4200];
    snprintf(side, sizeof side, "%s-shm", db);
    tu_write_file(side, "\0\0\0", 3);
    snprintf(side, sizeof side, "%s-wal", db);
    tu_write_file(side, "", 0);
    rc = limited(16384, try_read, db, msg, sizeof msg);
    tap_ok(rc == 0, "with a leftover 3-byte -shm and empty -wal, snapshot and live readers read it on a full disk "
           "(%s)", rc ? msg : "ok");
    rc = try_read(db);
    tap_ok(rc == 0, "... and with room again (%s)", rc ? fp_error_message() : "ok");
    /* a database created on a full disk: nothing is left at all */
    char *fresh = tu_path(dir, "fresh.db");
    rc = limited(2048, try_write_open, fresh, msg, sizeof msg);
    tap_ok(rc == 1 && !tu_exists(fresh) && tu_no_side_files(fresh), "creating a database past the limit fails and "
           "leaves no file: %s", msg);
    free(fresh);
    free(db);
}

int main(void)
{
    dir = tu_mkdir();
    if (!dir)
        tap_skip_all("cannot create a scratch directory");
    test_create_reopen_migrate();
    test_migrate_v2();
    test_migrate_v5();
    test_refusals();
    test_permissions();
    test_full_disk();
    tu_rmdir(dir);
    return tap_done();
}
