/* store_testutil.c — implementation of store_testutil.h (helpers for the run-store tests).
 * Promise: deterministic fixture content; snapshots compare bytes and modification time. */
#include "store_testutil.h"
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "error.h"

void tu_snap(const char *path, tu_snap_t *s)
{
    memset(s, 0, sizeof *s);
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    s->exists = 1;
    s->mtime = st.st_mtim;
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    s->len = (size_t)st.st_size;
    s->bytes = malloc(s->len ? s->len : 1);
    s->len = fread(s->bytes, 1, s->len, f);
    fclose(f);
}

int tu_same(const char *path, const tu_snap_t *s)
{
    tu_snap_t now;
    tu_snap(path, &now);
    int same = now.exists == s->exists;
    if (same && s->exists)
        same = now.len == s->len && memcmp(now.bytes, s->bytes, s->len) == 0 &&
               now.mtime.tv_sec == s->mtime.tv_sec && now.mtime.tv_nsec == s->mtime.tv_nsec;
    tu_snap_free(&now);
    return same;
}

void tu_snap_free(tu_snap_t *s)
{
    free(s->bytes);
    memset(s, 0, sizeof *s);
}

int tu_no_side_files(const char *path)
{
    char side[4200];
    snprintf(side, sizeof side, "%s-wal", path);
    if (tu_exists(side))
        return 0;
    snprintf(side, sizeof side, "%s-shm", path);
    return !tu_exists(side);
}

int tu_sql(const char *path, const char *sql)
{
    sqlite3 *db;
    int rc = sqlite3_open(path, &db);
    char *err = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fprintf(stdout, "# tu_sql: %s: %s\n", path, err ? err : sqlite3_errmsg(db));
    sqlite3_free(err);
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : -1;
}

long long tu_sql_int(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    long long v = -999;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

int tu_as_user(int (*fn)(void *), void *arg, char *msg, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return 77;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 77;
    if (pid == 0) {
        close(fds[0]);
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(77);
        int rc = fn(arg);
        const char *m = fp_error_message();
        ssize_t w = write(fds[1], m, strlen(m));
        (void)w;
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], msg, cap - 1);
    msg[got > 0 ? got : 0] = '\0';
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

double tu_loss(int run_index, int64_t step)
{
    return 3.0 / (1.0 + (double)step) + 0.25 * run_index;
}

int tu_record_fixture(fp_store_t *s, int nsteps, int nlayers, int64_t runs[2])
{
    int64_t session;
    fp_session_info_t si = {.name = "fixture", .config_json = "{\"model\":\"resnet18\",\"steps\":20}"};
    int rc = fp_store_begin_session(s, &si, &session);
    const char *policies[2] = {"fp32", "fp16"};
    for (int i = 0; rc == FP_OK && i < 2; i++) {
        fp_run_info_t ri = {.session = session, .arm = policies[i], .model = "resnet18", .policy = policies[i],
                            .ref_run = i ? runs[0] : 0, .device = "cpu", .blas = "OpenBLAS 0.3",
                            .batch_size = 32, .image_size = 224, .dataset = "imagenet, subset \"tiny\"",
                            .seed = 42, .optimizer = "sgd", .optimizer_config = "{\"lr\":0.1,\"momentum\":0.9}",
                            .config_json = "{\"arm\":1}", .cuda_version = NULL};
        rc = fp_store_begin_run(s, &ri, &runs[i]);
    }
    static const char *const types[3] = {"conv2d", "batchnorm2d", "relu"};
    for (int i = 0; rc == FP_OK && i < 2; i++)
        for (int l = 0; rc == FP_OK && l < nlayers; l++) {
            char name[32];
            snprintf(name, sizeof name, "layer%d.%d.conv%d", l / 6 + 1, (l / 3) % 2, l % 3 + 1);
            fp_layer_info_t li = {.run = runs[i], .index = l, .name = name, .type = types[l % 3],
                                  .input_shape = "32x64x56x56", .output_shape = "32x64x56x56",
                                  .params = 36864, .fwd_flops = 3700000000LL, .bwd_flops = 7400000000LL};
            rc = fp_store_layer(s, &li);
        }
    int64_t k_short = fp_store_intern(s, "sgemm_128x64_nn");
    int64_t k_long = fp_store_intern(s, "void cudnn::conv<float, 3>(Params, int, float*)");
    if (k_short <= 0 || k_long <= 0)
        rc = FP_EINTERNAL;
    fp_layer_time_t *lt = calloc((size_t)nlayers * 3 + 1, sizeof *lt);
    for (int64_t k = 0; rc == FP_OK && k < nsteps; k++)
        for (int i = 0; rc == FP_OK && i < 2; i++) {
            fp_step_rec_t st = {.run = runs[i], .step = k, .loss = tu_loss(i, k), .loss_scale = i ? 65536.0 : NAN,
                                .lr = 0.1, .skipped = i == 1 && k == 3, .start = 1000 * k, .end = 1000 * k + 900,
                                .wall_ns = 900, .samples_per_s = 1234.5, .mem_current = i ? 1000 : -1,
                                .mem_peak = i ? 2000 : -1, .energy_j = NAN, .power_w = i ? 250.5 : NAN};
            for (int l = 0; l < nlayers; l++)
                for (int p = 0; p < 3; p++)
                    lt[l * 3 + p] = (fp_layer_time_t){.layer = l, .phase = p,
                                                      .time_ns = 100 * (l + 1) + 10 * p + (k % 3),
                                                      .kernels = p + 1};
            rc = fp_store_step(s, &st, lt, (size_t)nlayers * 3);
            if (rc == FP_OK && k % 10 == 0) {
                for (int l = 0; rc == FP_OK && l < nlayers; l++)
                    for (int j = 0; rc == FP_OK && j < 4; j++) {
                        fp_kernel_rec_t kr = {.run = runs[i], .step = k, .layer = l, .phase = j % 3,
                                              .start = k * 1000000 + l * 1000 + j * 100,
                                              .end = k * 1000000 + l * 1000 + j * 100 + 50 + j,
                                              .short_name = j % 2 ? k_short : k_long,
                                              .demangled_name = j % 2 ? k_short : k_long, .device_id = 0,
                                              .stream_id = 7, .correlation_id = (uint32_t)(k * 100 + j),
                                              .grid = {128, 1, 1}, .block = {256, 1, 1}, .tensor_core = i};
                        rc = fp_store_kernels(s, &kr, 1);
                    }
            }
        }
    free(lt);
    for (int i = 0; rc == FP_OK && i < 2; i++) {
        fp_hist_t h;
        fp_hist_init(&h);
        float x[6] = {1.0f, 70000.0f, 1e-6f, 1e-9f, 0.0f, -3.0f};
        fp_hist_add(&h, x, 6);
        rc = fp_store_hist(s, runs[i], 0, 0, FP_ROLE_ACTIVATION, &h);
        if (rc == FP_OK)
            rc = fp_store_hist(s, runs[i], 0, 0, FP_ROLE_WEIGHT_GRAD, &h);
        fp_eval_rec_t ev = {.run = runs[i], .step = nsteps - 1, .split = "val", .loss = 2.0, .top1 = 0.5,
                            .top5 = 0.75};
        if (rc == FP_OK)
            rc = fp_store_eval(s, &ev);
        fp_device_sample_t ds = {.run = runs[i], .timestamp = 5000, .device_id = 0, .power_w = NAN,
                                 .energy_j = NAN, .temperature_c = 55.0, .mem_used = 123456789,
                                 .sm_clock_mhz = -1, .mem_clock_mhz = -1};
        if (rc == FP_OK)
            rc = fp_store_device_sample(s, &ds);
        if (rc == FP_OK)
            rc = fp_store_event(s, runs[i], 7000, 3, 2, FP_EVENT_SKIPPED_STEP,
                                "step 3 skipped, first non-finite gradient in \"layer1.0.conv3\"\nscale halved");
    }
    if (rc == FP_OK) {
        fp_precision_rec_t pr = {.run = runs[1], .ref_run = runs[0], .step = 0, .layer = 1,
                                 .role = FP_ROLE_ACTIVATION, .rel_l2 = 1e-3, .max_abs = 0.02, .cosine = 0.9999};
        rc = fp_store_precision(s, &pr);
    }
    return rc;
}

int tu_write_fixture(const char *path, int nsteps, int nlayers, int64_t runs[2])
{
    fp_store_t *s;
    int rc = fp_store_open(&s, path);
    if (rc != FP_OK)
        return rc;
    rc = tu_record_fixture(s, nsteps, nlayers, runs);
    int rc2 = fp_store_close(s, FP_RUN_FINISHED, NULL);
    return rc != FP_OK ? rc : rc2;
}

long long tu_damage_table_page(const char *src, const char *dst, const char *table)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = '%s'", table);
    long long root = tu_sql_int(src, sql), psize = tu_sql_int(src, "PRAGMA page_size");
    size_t len = 0;
    unsigned char *bytes = (unsigned char *)tu_slurp(src, &len);
    int ok = bytes && root > 1 && psize >= 512 && (size_t)(root * psize) <= len;
    if (ok) {
        for (long long i = 8; i < 40; i++)
            bytes[(root - 1) * psize + i] = (unsigned char)(i * 37 + 12);
        ok = tu_write_file(dst, bytes, len) == 0;
    }
    free(bytes);
    return ok ? root : -1;
}

/* ---------------------------------------------------------------- a lock held by another process */

/* The child: 'L' -> BEGIN EXCLUSIVE, answer 'K' / 'E'; hold hold_ms or until 'U' / the pipe closes; roll
 * back, close, answer 'R'. */
static void lock_holder_main(int cmd, int ack, const char *db, int hold_ms)
{
    char ch;
    if (read(cmd, &ch, 1) != 1 || ch != 'L')
        _exit(0);
    sqlite3 *h = NULL;
    int ok = sqlite3_open(db, &h) == SQLITE_OK;
    if (ok) {
        sqlite3_busy_timeout(h, 10000);
        ok = sqlite3_exec(h, "BEGIN EXCLUSIVE", NULL, NULL, NULL) == SQLITE_OK;
    }
    if (write(ack, ok ? "K" : "E", 1) != 1)
        _exit(1);
    struct pollfd p = {cmd, POLLIN, 0};
    poll(&p, 1, hold_ms >= 0 ? hold_ms : 300 * 1000);
    if (ok)
        sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(h);
    if (write(ack, "R", 1) != 1)
        _exit(1);
    _exit(0);
}

int tu_lock_holder_start(tu_lock_holder *hd, const char *db, int hold_ms)
{
    int c[2], a[2];
    if (pipe(c) || pipe(a))
        return -1;
    if ((hd->pid = fork()) < 0)
        return -1;
    if (hd->pid == 0) {
        close(c[1]);
        close(a[0]);
        lock_holder_main(c[0], a[1], db, hold_ms);
    }
    close(c[0]);
    close(a[1]);
    hd->cmd = c[1];
    hd->ack = a[0];
    return 0;
}

int tu_lock_holder_lock(tu_lock_holder *hd)
{
    char ch = 0;
    return write(hd->cmd, "L", 1) == 1 && read(hd->ack, &ch, 1) == 1 && ch == 'K';
}

int tu_lock_holder_holding(tu_lock_holder *hd)
{
    struct pollfd p = {hd->ack, POLLIN, 0};
    return poll(&p, 1, 0) == 0;
}

void tu_lock_holder_end(tu_lock_holder *hd)
{
    char ch;
    if (write(hd->cmd, "U", 1) != 1) { /* the child may be gone already */ }
    close(hd->cmd);
    while (read(hd->ack, &ch, 1) == 1 && ch != 'R')
        ;
    close(hd->ack);
    waitpid(hd->pid, NULL, 0);
}
