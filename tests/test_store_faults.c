/* test_store_faults.c — the store under SQLite faults at every point of a short recorded run (issue 21).
 * A VFS shim registered as the default in a child process wraps the unix VFS and fails the Nth write,
 * sync or lock of the run (open, session, run, layers, STEPS flushed steps, close): for every N of each
 * kind below, the child records the run through the writer API (lib/store.h) and reports what it was told;
 * the parent then asserts
 *   - the child ended by itself (no crash, no hang: 60 s alarm), as promised: a transient busy lock is
 *     waited out (everything committed, run finished); an I/O error, full disk or failed lock stops the
 *     writer with one message naming the file (the full disk named as such), later record calls return
 *     that error, close reports it and the run is marked failed (interrupted when the disk stays full:
 *     nothing can be written, and readers see the writer gone);
 *   - the file passes PRAGMA integrity_check;
 *   - every step whose flush returned FP_OK is readable through the reader API with its loss, and no
 *     step is there without all its layer-time rows;
 *   - a reader opens the file as it was left (or says it holds no fp16probe data yet);
 *   - a new writer opens the file afterwards and no run is left 'running'.
 * Kinds: write_ioerr (SQLITE_IOERR_WRITE once), write_full (SQLITE_FULL once: space freed at once),
 * write_full_sticky (SQLITE_FULL from the Nth write on), sync_ioerr (SQLITE_IOERR_FSYNC once), lock_busy
 * (SQLITE_BUSY three times in a row from the Nth lock: another process holding it briefly), lock_ioerr
 * (SQLITE_IOERR_LOCK once), and locked (SQLITE_BUSY for 6 s, past the 5 s busy timeout, at a few points:
 * another process's long BEGIN EXCLUSIVE; here the process may wait it out or stop recording with one
 * line that names the lock). "Lock" counts xLock and xShmLock lock requests; "write" xWrite; "sync" xSync. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "clock.h"
#include "error.h"
#include "store.h"
#include "store_reader.h"
#include "tap.h"
#include "store_testutil.h"

#define STEPS 4
#define LAYERS 3
#define LOCKED_MS 6000

/* ---------------------------------------------------------------- the VFS shim */

enum { OP_WRITE, OP_SYNC, OP_LOCK, OP_COUNT };

static sqlite3_vfs *real_vfs;
static atomic_long op_count[OP_COUNT];
static struct {
    int op;          /* -1: count only */
    long nth;        /* 1-based */
    int rc;
    long repeat;     /* failures from the nth on (< 0: all of them) */
    int64_t until_ns; /* > 0: fail every such op from the nth on until this monotonic time instead */
} fault = {-1, 0, 0, 0, 0};
static atomic_long fault_hits;

typedef struct {
    sqlite3_file base;
    sqlite3_file *real;
} shim_file;

static int inject(int op)
{
    long n = atomic_fetch_add(&op_count[op], 1) + 1;
    if (op != fault.op || n < fault.nth)
        return SQLITE_OK;
    if (fault.until_ns > 0) {
        static atomic_llong deadline;
        long long zero = 0;
        atomic_compare_exchange_strong(&deadline, &zero, (long long)(fp_clock_mono_ns() + fault.until_ns));
        if (fp_clock_mono_ns() >= atomic_load(&deadline))
            return SQLITE_OK;
    } else if (fault.repeat >= 0 && n >= fault.nth + fault.repeat) {
        return SQLITE_OK;
    }
    atomic_fetch_add(&fault_hits, 1);
    return fault.rc;
}

#define REAL(f) (((shim_file *)(f))->real)

static int x_close(sqlite3_file *f)
{
    int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
    return rc;
}
static int x_read(sqlite3_file *f, void *b, int n, sqlite3_int64 off)
{
    return REAL(f)->pMethods->xRead(REAL(f), b, n, off);
}
static int x_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 off)
{
    int rc = inject(OP_WRITE);
    return rc ? rc : REAL(f)->pMethods->xWrite(REAL(f), b, n, off);
}
static int x_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int x_sync(sqlite3_file *f, int flags)
{
    int rc = inject(OP_SYNC);
    return rc ? rc : REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int x_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int x_lock(sqlite3_file *f, int level)
{
    int rc = inject(OP_LOCK);
    return rc ? rc : REAL(f)->pMethods->xLock(REAL(f), level);
}
static int x_unlock(sqlite3_file *f, int level)
{
    return REAL(f)->pMethods->xUnlock(REAL(f), level);
}
static int x_check_reserved(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int x_file_control(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int x_sector_size(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int x_device_characteristics(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int x_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, pgsz, extend, pp);
}
static int x_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    if (flags & SQLITE_SHM_LOCK) {
        int rc = inject(OP_LOCK);
        if (rc)
            return rc;
    }
    return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}
static void x_shm_barrier(sqlite3_file *f)
{
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int x_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int x_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
    return REAL(f)->pMethods->xFetch(REAL(f), off, n, pp);
}
static int x_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static sqlite3_io_methods shim_io = {
    3, x_close, x_read, x_write, x_truncate, x_sync, x_file_size, x_lock, x_unlock, x_check_reserved,
    x_file_control, x_sector_size, x_device_characteristics, x_shm_map, x_shm_lock, x_shm_barrier,
    x_shm_unmap, x_fetch, x_unfetch,
};

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out_flags)
{
    (void)vfs;
    shim_file *sf = (shim_file *)f;
    sf->real = (sqlite3_file *)(sf + 1);
    sf->base.pMethods = NULL;
    int rc = real_vfs->xOpen(real_vfs, name, sf->real, flags, out_flags);
    if (rc == SQLITE_OK)
        sf->base.pMethods = &shim_io;
    return rc;
}
static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    (void)vfs;
    return real_vfs->xDelete(real_vfs, name, sync_dir);
}
static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    (void)vfs;
    return real_vfs->xAccess(real_vfs, name, flags, out);
}
static int v_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
    (void)vfs;
    return real_vfs->xFullPathname(real_vfs, name, n, out);
}
static void *v_dl_open(sqlite3_vfs *vfs, const char *name)
{
    (void)vfs;
    return real_vfs->xDlOpen(real_vfs, name);
}
static void v_dl_error(sqlite3_vfs *vfs, int n, char *msg)
{
    (void)vfs;
    real_vfs->xDlError(real_vfs, n, msg);
}
static void (*v_dl_sym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
    (void)vfs;
    return real_vfs->xDlSym(real_vfs, h, sym);
}
static void v_dl_close(sqlite3_vfs *vfs, void *h)
{
    (void)vfs;
    real_vfs->xDlClose(real_vfs, h);
}
static int v_randomness(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return real_vfs->xRandomness(real_vfs, n, out);
}
static int v_sleep(sqlite3_vfs *vfs, int us)
{
    (void)vfs;
    return real_vfs->xSleep(real_vfs, us);
}
static int v_current_time(sqlite3_vfs *vfs, double *t)
{
    (void)vfs;
    return real_vfs->xCurrentTime(real_vfs, t);
}
static int v_last_error(sqlite3_vfs *vfs, int n, char *msg)
{
    (void)vfs;
    return real_vfs->xGetLastError(real_vfs, n, msg);
}
static int v_current_time64(sqlite3_vfs *vfs, sqlite3_int64 *t)
{
    (void)vfs;
    return real_vfs->xCurrentTimeInt64(real_vfs, t);
}

static sqlite3_vfs shim_vfs = {
    2, 0, 0, NULL, "fp-fault-shim", NULL, v_open, v_delete, v_access, v_full_pathname, v_dl_open, v_dl_error,
    v_dl_sym, v_dl_close, v_randomness, v_sleep, v_current_time, v_last_error, v_current_time64,
    NULL, NULL, NULL,
};

static int shim_install(void)
{
    real_vfs = sqlite3_vfs_find(NULL);
    if (!real_vfs || real_vfs->iVersion < 2)
        return -1;
    shim_vfs.szOsFile = (int)sizeof(shim_file) + real_vfs->szOsFile;
    shim_vfs.mxPathname = real_vfs->mxPathname;
    return sqlite3_vfs_register(&shim_vfs, 1) == SQLITE_OK ? 0 : -1;
}

/* ---------------------------------------------------------------- the short run (in a child) */

typedef struct {
    int open_rc;          /* fp_store_open */
    int first_err;        /* the first error a record call returned (FP_OK: none) */
    int first_err_where;  /* 0 session, 1 run, 2 layers, 3 + k: step k, 3 + STEPS: close */
    int later_same;       /* after first_err: a later record call and writer_status returned an error too */
    int close_rc;
    int64_t run;          /* 0: no run begun */
    long acked;           /* the last step whose flush returned FP_OK (-1: none) */
    long counts[OP_COUNT];
    long hits;
    char msg[400];        /* first error's message */
    char close_msg[400];
} report_t;

static double loss_of(long step)
{
    return 2.5 / (double)(step + 1);
}

static void note_err(report_t *rep, int rc, int where)
{
    if (rc == FP_OK || rep->first_err != FP_OK)
        return;
    rep->first_err = rc;
    rep->first_err_where = where;
    snprintf(rep->msg, sizeof rep->msg, "%s", fp_error_message());
}

static void short_run(const char *path, report_t *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->acked = -1;
    fp_store_t *s;
    rep->open_rc = fp_store_open(&s, path);
    if (rep->open_rc != FP_OK) {
        snprintf(rep->msg, sizeof rep->msg, "%s", fp_error_message());
        return;
    }
    int64_t session = 0, run = 0;
    fp_session_info_t si = {.name = "faults", .config_json = "{\"steps\":4}"};
    note_err(rep, fp_store_begin_session(s, &si, &session), 0);
    if (rep->first_err == FP_OK) {
        fp_run_info_t ri = {.session = session, .arm = "fp16", .model = "tinynet", .policy = "fp16",
                            .batch_size = 8, .image_size = 32, .dataset = "synthetic", .optimizer = "sgd"};
        note_err(rep, fp_store_begin_run(s, &ri, &run), 1);
        if (rep->first_err == FP_OK)
            rep->run = run;
    }
    for (int l = 0; l < LAYERS && rep->first_err == FP_OK; l++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", l);
        fp_layer_info_t li = {.run = run, .index = l, .name = name, .type = "conv2d", .input_shape = "8x3x32x32",
                              .output_shape = "8x4x32x32", .params = 100 + l, .fwd_flops = 1000, .bwd_flops = 2000};
        note_err(rep, fp_store_layer(s, &li), 2);
    }
    for (long k = 0; k < STEPS && rep->first_err == FP_OK; k++) {
        fp_step_rec_t st = {.run = run, .step = k, .loss = loss_of(k), .loss_scale = 65536.0, .lr = 0.1,
                            .start = -1, .end = -1, .wall_ns = 1000000, .samples_per_s = NAN, .mem_current = -1,
                            .mem_peak = -1, .energy_j = NAN, .power_w = NAN};
        fp_layer_time_t lt[LAYERS * 3];
        for (int i = 0; i < LAYERS * 3; i++)
            lt[i] = (fp_layer_time_t){.layer = i / 3, .phase = i % 3, .time_ns = 1000 + i, .kernels = -1};
        note_err(rep, fp_store_step(s, &st, lt, LAYERS * 3), 3 + (int)k);
        if (rep->first_err == FP_OK)
            note_err(rep, fp_store_event(s, run, 0, k, -1, FP_EVENT_INFO, "step done"), 3 + (int)k);
        if (rep->first_err == FP_OK)
            note_err(rep, fp_store_flush(s), 3 + (int)k);
        if (rep->first_err == FP_OK)
            rep->acked = k;
    }
    if (rep->first_err != FP_OK) {   /* once failed, every record call says so */
        fp_step_rec_t st = {.run = run, .step = 99, .loss = 1, .loss_scale = NAN, .lr = NAN, .start = -1,
                            .end = -1, .wall_ns = -1, .samples_per_s = NAN, .mem_current = -1, .mem_peak = -1,
                            .energy_j = NAN, .power_w = NAN};
        int a = fp_store_step(s, &st, NULL, 0), b = fp_store_writer_status(s), c = fp_store_flush(s);
        rep->later_same = a != FP_OK && b != FP_OK && c != FP_OK;
    }
    rep->close_rc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    if (rep->close_rc != FP_OK) {
        snprintf(rep->close_msg, sizeof rep->close_msg, "%s", fp_error_message());
        note_err(rep, rep->close_rc, 3 + STEPS);
    }
}

/* Runs the short run in a child with the shim failing as configured; 0 and *rep filled, or -1 when the
 * child crashed or hung (*status tells). */
static int run_child(const char *path, int op, long nth, int rc, long repeat, int64_t until_ns, report_t *rep,
                     int *status)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (child == 0) {
        close(fds[0]);
        alarm(60);
        fault.op = op;
        fault.nth = nth;
        fault.rc = rc;
        fault.repeat = repeat;
        fault.until_ns = until_ns;
        report_t r;
        if (shim_install() != 0)
            _exit(5);
        short_run(path, &r);
        for (int i = 0; i < OP_COUNT; i++)
            r.counts[i] = atomic_load(&op_count[i]);
        r.hits = atomic_load(&fault_hits);
        ssize_t w = write(fds[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 6);
    }
    close(fds[1]);
    memset(rep, 0, sizeof *rep);
    size_t got = 0;
    while (got < sizeof *rep) {
        ssize_t n = read(fds[0], (char *)rep + got, sizeof *rep - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fds[0]);
    waitpid(child, status, 0);
    return WIFEXITED(*status) && WEXITSTATUS(*status) == 0 && got == sizeof *rep ? 0 : -1;
}

/* ---------------------------------------------------------------- checks (in the parent) */

static int real_failures;   /* the exit status */

static void check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int cond, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tap_ok(cond, "%s", buf);
    real_failures += !cond;
}

typedef struct {
    const char *name;
    int op;
    int rc;
    long repeat;
    int64_t until_ns;
    int expect;              /* EXPECT_* */
} kind_t;

enum {
    EXPECT_RECOVER,      /* everything committed, run finished */
    EXPECT_FAIL_ONCE,    /* recovered, or stopped with the error and the run marked failed */
    EXPECT_FAIL_STICKY,  /* recovered, or stopped with the error; the run failed or interrupted */
    EXPECT_WAIT_OR_STOP  /* recovered, or stopped with a message naming the lock */
};

typedef struct {
    long cases, ended, integrity, committed, promised, readable, reopened;
    long recovered, stopped, open_failed, hit;
    char first_bad[6][300];   /* by check: ended, integrity, committed, promised, readable, reopened */
} tally_t;

static void bad(tally_t *t, int which, long nth, const char *fmt, const char *detail)
{
    char buf[240];
    snprintf(buf, sizeof buf, fmt, detail ? detail : "");
    if (getenv("FAULTS_VERBOSE"))
        tap_diag("N=%ld [%d]: %s", nth, which, buf);
    if (!t->first_bad[which][0])
        snprintf(t->first_bad[which], sizeof t->first_bad[which], "N=%ld: %.240s", nth, buf);
}

static int file_nonempty(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    int c = fgetc(f);
    fclose(f);
    return c != EOF;
}

static int integrity_ok(const char *path, char *why, size_t cap)
{
    if (!file_nonempty(path))
        return 1;   /* nothing was ever written (the open failed first) */
    sqlite3 *db;
    int ok = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK) {
            int n = 0;
            while (sqlite3_step(st) == SQLITE_ROW) {
                const char *t = (const char *)sqlite3_column_text(st, 0);
                ok = n++ == 0 && t && strcmp(t, "ok") == 0;
                if (!ok)
                    snprintf(why, cap, "%s", t ? t : "(null)");
            }
            sqlite3_finalize(st);
        }
    }
    if (!ok && !why[0])
        snprintf(why, cap, "%s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return ok;
}

/* Every acked step is there with its loss and whole; nothing after what was queued. */
static int committed_ok(const char *path, const report_t *rep, char *why, size_t cap)
{
    if (rep->acked < 0 && !file_nonempty(path))
        return 1;
    if (!file_nonempty(path)) {
        snprintf(why, cap, "the file is empty or gone");
        return 0;
    }
    if (tu_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name IN ('steps', 'layer_times')") == 2 &&
        tu_sql_int(path, "SELECT count(*) FROM steps s WHERE (SELECT count(*) FROM layer_times t"
                         " WHERE t.run = s.run AND t.step = s.step) != 9") != 0) {
        snprintf(why, cap, "a step without all its layer times");
        return 0;
    }
    if (rep->acked < 0)
        return 1;
    fp_reader_t *r;
    if (fp_reader_open_snapshot(&r, path) != FP_OK) {
        snprintf(why, cap, "the reader cannot open it: %s", fp_error_message());
        return 0;
    }
    fp_step_row_t *rows = NULL;
    size_t n = 0;
    int ok = fp_reader_steps_since(r, rep->run, -1, 0, &rows, &n) == FP_OK;
    if (!ok)
        snprintf(why, cap, "reading steps: %s", fp_error_message());
    for (long k = 0; ok && k <= rep->acked; k++) {
        ok = (size_t)k < n && rows[k].step == k && rows[k].loss == loss_of(k);
        if (!ok)
            snprintf(why, cap, "acknowledged step %ld is missing or wrong (%zu steps read)", k, n);
    }
    if (ok && n > STEPS) {
        ok = 0;
        snprintf(why, cap, "%zu steps read, %d queued", n, STEPS);
    }
    free(rows);
    fp_reader_close(r);
    return ok;
}

static const char *run_status(const char *path, int64_t run, char *buf, size_t cap)
{
    buf[0] = '\0';
    fp_reader_t *r;
    if (!file_nonempty(path) || fp_reader_open_snapshot(&r, path) != FP_OK)
        return buf;
    fp_run_row_t row;
    if (fp_reader_run(r, run, &row) == FP_OK)
        snprintf(buf, cap, "%s", row.status);
    fp_reader_close(r);
    return buf;
}

static void check_case(const kind_t *k, long nth, const char *path, tally_t *t)
{
    report_t rep;
    int status = 0;
    remove(path);
    char side[4200];
    snprintf(side, sizeof side, "%s-wal", path);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", path);
    remove(side);
    t->cases++;
    int64_t t0 = fp_clock_mono_ns();
    int ended = run_child(path, k->op, nth, k->rc, k->repeat, k->until_ns, &rep, &status) == 0;
    if (getenv("FAULTS_VERBOSE"))
        tap_diag("%s N=%ld: child %.0f ms, open %d, first error %d at %d, acked %ld, close %d", k->name, nth,
                 (double)(fp_clock_mono_ns() - t0) / 1e6, rep.open_rc, rep.first_err, rep.first_err_where,
                 rep.acked, rep.close_rc);
    if (ended)
        t->ended++;
    else {
        char st[64];
        snprintf(st, sizeof st, WIFSIGNALED(status) ? "killed by signal %d" : "exit status %d",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        bad(t, 0, nth, "the child did not end by itself: %s", st);
        return;
    }
    if (rep.hits > 0)
        t->hit++;
    char why[300] = "";
    if (integrity_ok(path, why, sizeof why))
        t->integrity++;
    else
        bad(t, 1, nth, "integrity_check: %s", why);
    why[0] = '\0';
    if (committed_ok(path, &rep, why, sizeof why))
        t->committed++;
    else
        bad(t, 2, nth, "%s", why);

    /* as promised */
    int recovered = rep.open_rc == FP_OK && rep.first_err == FP_OK && rep.acked == STEPS - 1 && rep.close_rc == FP_OK;
    char stbuf[32];
    const char *stored = rep.run > 0 ? run_status(path, rep.run, stbuf, sizeof stbuf) : "";
    const char *msg = rep.msg;
    int names_file = strstr(msg, path) != NULL;
    int promised = 0;
    char what[300];
    if (recovered) {
        t->recovered++;
        promised = strcmp(stored, "finished") == 0;
        snprintf(what, sizeof what, "recovered but the run is '%s'", stored);
    } else if (k->expect == EXPECT_RECOVER) {
        snprintf(what, sizeof what, "not waited out: %.250s", msg);
    } else if (rep.open_rc != FP_OK) {
        t->open_failed++;
        promised = names_file && rep.open_rc != FP_EINTERNAL;
        snprintf(what, sizeof what, "open failed with code %d: %.250s", rep.open_rc, msg);
    } else {
        t->stopped++;
        int full_named = k->rc != SQLITE_FULL || strstr(msg, "full") != NULL;
        int lock_named = k->expect != EXPECT_WAIT_OR_STOP || strstr(msg, "lock") != NULL;
        int stored_ok;
        if (rep.run <= 0)
            stored_ok = 1;
        else if (k->expect == EXPECT_FAIL_ONCE || k->expect == EXPECT_WAIT_OR_STOP)
            stored_ok = strcmp(stored, "failed") == 0;
        else
            stored_ok = strcmp(stored, "failed") == 0 || strcmp(stored, "interrupted") == 0;
        promised = names_file && full_named && lock_named && rep.close_rc != FP_OK &&
                   (rep.first_err_where == 3 + STEPS || rep.later_same) && stored_ok;
        snprintf(what, sizeof what, "stopped at %d (code %d, later calls %s, close %d, run '%s'): %.200s",
                 rep.first_err_where, rep.first_err, rep.later_same ? "fail" : "succeed", rep.close_rc, stored,
                 msg);
    }
    if (promised)
        t->promised++;
    else
        bad(t, 3, nth, "%s", what);

    /* a reader opens it as it was left (or says it holds no fp16probe data yet) */
    fp_reader_t *r;
    int rrc = file_nonempty(path) ? fp_reader_open_snapshot(&r, path) : FP_OK;
    if (rrc == FP_OK && file_nonempty(path))
        fp_reader_close(r);
    if (rrc == FP_OK || (rrc == FP_EFORMAT && strstr(fp_error_message(), "no fp16probe data")))
        t->readable++;
    else
        bad(t, 4, nth, "a reader cannot open it: %s", fp_error_message());

    /* a new writer opens it, and no run stays 'running' */
    fp_store_t *s;
    int rc = fp_store_open(&s, path);
    if (rc == FP_OK)
        rc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    long long running = rc == FP_OK ? tu_sql_int(path, "SELECT count(*) FROM runs WHERE status = 'running'") : -1;
    if (rc == FP_OK && running == 0)
        t->reopened++;
    else
        bad(t, 5, nth, "reopening: %s", rc != FP_OK ? fp_error_message() : "a run is still 'running'");
}

static void report_kind(const kind_t *k, const tally_t *t, const char *where)
{
    tap_diag("%s: %ld cases (%s): %ld recovered, %ld stopped recording, %ld failed to open; the fault fired "
             "in %ld", k->name, t->cases, where, t->recovered, t->stopped, t->open_failed, t->hit);
    static const char *const what[6] = {"the process ended by itself (no crash, no hang)",
                                        "the file passes integrity_check",
                                        "every committed step is readable and whole",
                                        "it recovered or stopped as promised",
                                        "a reader opens it as it was left",
                                        "a new writer opens it and no run stays running"};
    const long got[6] = {t->ended, t->integrity, t->committed, t->promised, t->readable, t->reopened};
    for (int i = 0; i < 6; i++) {
        check(got[i] == t->cases, "%s: %s (%ld of %ld)", k->name, what[i], got[i], t->cases);
        if (got[i] != t->cases && t->first_bad[i][0])
            tap_diag("  first: %s", t->first_bad[i]);
    }
}

int main(void)
{
    char *dir = tu_mkdir();
    if (!dir)
        tap_skip_all("no scratch directory");
    char *path = tu_path(dir, "faults.db");

    /* a clean run through the shim: how many writes, syncs and locks it makes */
    report_t clean;
    int status;
    int rc = run_child(path, -1, 0, 0, 0, 0, &clean, &status);
    check(rc == 0 && clean.open_rc == FP_OK && clean.first_err == FP_OK && clean.acked == STEPS - 1 &&
           clean.close_rc == FP_OK, "a clean run through the shim records everything (%s)", clean.msg);
    tap_diag("the short run makes %ld writes, %ld syncs, %ld lock requests", clean.counts[OP_WRITE],
             clean.counts[OP_SYNC], clean.counts[OP_LOCK]);
    if (rc != 0 || clean.counts[OP_WRITE] == 0) {
        tu_rmdir(dir);
        tap_done();
        return 1;
    }

    const kind_t kinds[] = {
        {"write_ioerr", OP_WRITE, SQLITE_IOERR_WRITE, 1, 0, EXPECT_FAIL_ONCE},
        {"write_full", OP_WRITE, SQLITE_FULL, 1, 0, EXPECT_FAIL_ONCE},
        {"write_full_sticky", OP_WRITE, SQLITE_FULL, -1, 0, EXPECT_FAIL_STICKY},
        {"sync_ioerr", OP_SYNC, SQLITE_IOERR_FSYNC, 1, 0, EXPECT_FAIL_ONCE},
        {"lock_busy", OP_LOCK, SQLITE_BUSY, 3, 0, EXPECT_RECOVER},
        {"lock_ioerr", OP_LOCK, SQLITE_IOERR_LOCK, 1, 0, EXPECT_FAIL_ONCE},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        tally_t t;
        memset(&t, 0, sizeof t);
        long total = clean.counts[kinds[i].op];
        int64_t t0 = fp_clock_mono_ns();
        for (long n = 1; n <= total; n++)
            check_case(&kinds[i], n, path, &t);
        char where[64];
        snprintf(where, sizeof where, "every one of %ld, %.1f s", total, (double)(fp_clock_mono_ns() - t0) / 1e9);
        report_kind(&kinds[i], &t, where);
    }

    /* held past the busy timeout, at three points: the first lock (open), the middle one, the last one */
    const kind_t locked = {"locked", OP_LOCK, SQLITE_BUSY, -1, (int64_t)LOCKED_MS * 1000000, EXPECT_WAIT_OR_STOP};
    long nl = clean.counts[OP_LOCK];
    long points[3] = {1, (nl + 1) / 2, nl};
    tally_t t;
    memset(&t, 0, sizeof t);
    int64_t t0 = fp_clock_mono_ns();
    for (int i = 0; i < 3; i++)
        check_case(&locked, points[i], path, &t);
    char where[96];
    snprintf(where, sizeof where, "locks %ld, %ld and %ld held %d ms, %.1f s", points[0], points[1], points[2],
             LOCKED_MS, (double)(fp_clock_mono_ns() - t0) / 1e9);
    report_kind(&locked, &t, where);

    free(path);
    tu_rmdir(dir);
    int rc_tap = tap_done();
    return real_failures ? 1 : rc_tap;
}
