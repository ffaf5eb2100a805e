/* store_testutil.h — helpers shared by the run-store tests, beside testutil.h's scratch files: file
 * snapshots (bytes + mtime) to prove a file was not modified, running a check as an unprivileged
 * user, and a deterministic fixture (one session, two runs) written through the public writer API. */
#ifndef FP_STORE_TESTUTIL_H
#define FP_STORE_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "store.h"
#include "testutil.h"   /* tu_mkdir, tu_path, tu_write_file, ... */

typedef struct {
    int exists;
    size_t len;
    unsigned char *bytes;
    struct timespec mtime;
} tu_snap_t;
void tu_snap(const char *path, tu_snap_t *s);
/* 1 when path is now exactly as snapped (absent then and now, or same bytes and mtime). */
int tu_same(const char *path, const tu_snap_t *s);
void tu_snap_free(tu_snap_t *s);
/* 1 when neither path-wal nor path-shm exists. */
int tu_no_side_files(const char *path);

/* Run raw SQL on a file with plain SQLite (to build old, foreign or damaged files by hand). */
int tu_sql(const char *path, const char *sql);
long long tu_sql_int(const char *path, const char *sql);

/* Run fn(arg) in a child process; when we are root the child first becomes nobody (65534) so that
 * permission bits apply. Returns fn's result (0 / non-zero), or 77 when the switch failed.
 * The child's fp_error_message() is copied into msg. */
int tu_as_user(int (*fn)(void *), void *arg, char *msg, size_t cap);

/* The fixture: session "fixture" with run 1 (arm fp32) and run 2 (arm fp16) of resnet18, nsteps
 * steps each with nlayers layers x 3 phases of layer times, 4 kernels per layer every 10th step,
 * histograms at step 0, an evaluation, device samples and events (one with a comma, a quote and a
 * newline in its text). Loss of run i (0, 1) at step k is tu_loss(i, k). */
double tu_loss(int run_index, int64_t step);
int tu_write_fixture(const char *path, int nsteps, int nlayers, int64_t runs[2]);
/* The same records into an open store (runs[] receives the ids). */
int tu_record_fixture(fp_store_t *s, int nsteps, int nlayers, int64_t runs[2]);

/* A copy of src at dst whose `table`'s root page has its cell pointer array overwritten (bytes 8..40): a
 * damaged page that a lookup by rowid can miss without SQLite noticing, where a full scan or
 * PRAGMA quick_check says the database is corrupt. Returns the page number, or -1. */
long long tu_damage_table_page(const char *src, const char *dst, const char *table);

/* Another process holding a database's write lock: a child that, on tu_lock_holder_lock, takes BEGIN
 * EXCLUSIVE (waiting up to 10 s for a writer's transaction) and holds it hold_ms (< 0: until
 * tu_lock_holder_end, at most 5 minutes), then rolls back and closes. */
typedef struct {
    pid_t pid;
    int cmd, ack;   /* parent's ends: commands to the child, its answers */
} tu_lock_holder;
int tu_lock_holder_start(tu_lock_holder *hd, const char *db, int hold_ms);   /* 0, or -1 (pipe / fork) */
int tu_lock_holder_lock(tu_lock_holder *hd);      /* 1 when the child now holds the lock */
int tu_lock_holder_holding(tu_lock_holder *hd);   /* 1 while it still holds it */
void tu_lock_holder_end(tu_lock_holder *hd);      /* release when still held; wait until the child is gone */

#endif
