/* test_store_dist.c — the data-parallel tables (schema version 5): dist_steps and allreduce_error rows written
 * through the writer read back exactly through lib/store_reader_dist.h (NULL as -1 / NaN, compute = wall -
 * exposed, the straggler's ratio, the runs with ranks, layer -1 with the counts), bad wire formats refused,
 * reading changes nothing, and a version-4 file is refused by readers, then migrated by a writer to tables equal
 * to a new file's, its old rows kept and new rows accepted. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "store.h"
#include "store_db.h"
#include "store_reader.h"
#include "store_reader_dist.h"
#include "tap.h"
#include "store_testutil.h"

static char *dir;

/* The CREATE statements of the two tables, as SQLite keeps them (malloc'd; "" when absent). */
static char *dist_schema(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char *out = calloc(1, 4096);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT name || ': ' || sql FROM sqlite_master WHERE name IN ('dist_steps',"
                           " 'allreduce_error') ORDER BY name", -1, &st, NULL) == SQLITE_OK)
        while (sqlite3_step(st) == SQLITE_ROW && out)
            snprintf(out + strlen(out), 4096 - strlen(out), "%s\n", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

/* Run 1: 2 ranks x 4 steps, rank 1 twice as slow (the straggler), step 3 skipped on both, rank 1's bytes at
 * step 4 not measured; all-reduce errors at steps 2 and 4 (fp16). Run 2: alone, no rows. */
static int record(const char *p, int64_t runs[2])
{
    fp_store_t *s;
    int rc = fp_store_open(&s, p);
    if (rc)
        return rc;
    int64_t session = 0;
    fp_session_info_t si = {"dist", "{}"};
    rc = fp_store_begin_session(s, &si, &session);
    for (int i = 0; i < 2 && !rc; i++) {
        fp_run_info_t ri = {.session = session, .arm = i ? "alone" : "fp16", .model = "tinynet", .policy = "fp16",
                            .batch_size = 4, .image_size = 32, .seed = 1};
        rc = fp_store_begin_run(s, &ri, &runs[i]);
    }
    for (int64_t step = 1; step <= 4 && !rc; step++) {
        fp_dist_step_rec_t d[2];
        for (int k = 0; k < 2; k++)
            d[k] = (fp_dist_step_rec_t){.run = runs[0], .step = step, .rank = k, .skipped = step == 3,
                                        .wall_ns = 1000000 * (k + 1) + step, .comm_ns = 300000 + step,
                                        .exposed_ns = 200000 + step, .bytes = step == 4 && k == 1 ? -1 : 44700000};
        rc = fp_store_dist_steps(s, d, 2);
    }
    for (int64_t step = 2; step <= 4 && !rc; step += 2) {
        fp_allreduce_error_rec_t e[3] = {
            {.run = runs[0], .step = step, .layer = -1, .wire = "fp16", .rel_l2 = 3e-4, .overflow = step == 4 ? 7 : 0,
             .underflow = 11},
            {.run = runs[0], .step = step, .layer = 0, .wire = "fp16", .rel_l2 = 2.5e-4, .overflow = -1,
             .underflow = -1},
            {.run = runs[0], .step = step, .layer = 3, .wire = "fp16", .rel_l2 = NAN, .overflow = -1, .underflow = -1}};
        rc = fp_store_allreduce_error(s, e, 3);
    }
    if (!rc) {
        fp_allreduce_error_rec_t bad = {.run = runs[0], .step = 9, .layer = -1, .wire = "fp32", .rel_l2 = 0};
        int brc = fp_store_allreduce_error(s, &bad, 1);
        tap_ok(brc == FP_EINVAL && strstr(fp_error_message(), "fp32"), "an fp32 wire is refused (%s)",
               fp_error_message());
        tap_is_int(fp_store_dist_steps(s, NULL, 0), FP_OK, "no ranks: nothing queued, no error");
    }
    int crc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    return rc ? rc : crc;
}

static void test_round_trip(void)
{
    char *p = tu_path(dir, "dist.db");
    int64_t runs[2] = {0, 0};
    int rc = record(p, runs);
    tap_is_int(rc, FP_OK, "two runs recorded, one with 2 ranks (%s)", rc ? fp_error_message() : "ok");
    tap_is_int(tu_sql_int(p, "PRAGMA user_version"), FP_STORE_SCHEMA_VERSION, "a new file is schema version %d",
               FP_STORE_SCHEMA_VERSION);
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM dist_steps"), 8, "8 dist_steps rows: 4 steps x 2 ranks");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM dist_steps WHERE bytes IS NULL"), 1, "unmeasured bytes are NULL");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM allreduce_error WHERE layer = 3 AND rel_l2 IS NULL"), 2,
               "NaN rel_l2 is NULL");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM allreduce_error WHERE layer >= 0 AND overflow IS NULL"), 4,
               "per-layer rows carry no counts (NULL)");

    tu_snap_t snap;
    tu_snap(p, &snap);
    fp_reader_t *r;
    rc = fp_reader_open(&r, p);
    tap_is_int(rc, FP_OK, "a reader opens it");
    if (rc) {
        tap_skip(12, "no reader");
        tu_snap_free(&snap);
        free(p);
        return;
    }
    fp_dist_step_row_t *st = NULL;
    size_t n = 0;
    rc = fp_reader_dist_steps(r, runs[0], 0, -1, &st, &n);
    int ordered = rc == FP_OK && n == 8;
    for (size_t i = 0; ordered && i < n; i++)
        ordered = st[i].step == (int64_t)(i / 2 + 1) && st[i].rank == (int)(i % 2) &&
                  st[i].wall_ns == 1000000 * (st[i].rank + 1) + st[i].step &&
                  st[i].compute_ns == st[i].wall_ns - (200000 + st[i].step) && st[i].comm_ns == 300000 + st[i].step &&
                  st[i].skipped == (st[i].step == 3);
    tap_ok(ordered, "fp_reader_dist_steps: 8 rows by step then rank, compute = wall - exposed, skips (n %zu)", n);
    tap_ok(ordered && st[7].bytes == -1 && st[6].bytes == 44700000, "bytes: measured, and -1 for NULL");
    free(st);
    rc = fp_reader_dist_steps(r, runs[0], 2, 3, &st, &n);
    tap_ok(rc == FP_OK && n == 4 && st[0].step == 2 && st[3].step == 3, "a step range: steps 2..3, both ranks");
    free(st);
    rc = fp_reader_dist_steps(r, runs[1], 0, -1, &st, &n);
    tap_ok(rc == FP_OK && n == 0 && st == NULL, "a run alone has no rows (not an error)");
    rc = fp_reader_dist_steps(r, 77, 0, -1, &st, &n);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "no run 77"), "an unknown run is named (%s)",
           fp_error_message());

    fp_dist_rank_row_t *rk = NULL;
    rc = fp_reader_dist_ranks(r, runs[0], &rk, &n);
    tap_ok(rc == FP_OK && n == 2 && rk[0].rank == 0 && rk[1].rank == 1 && rk[0].steps == 4 && rk[1].steps == 4 &&
               fabs(rk[0].mean_wall_ns - 1000002.5) < 1e-6 && fabs(rk[1].mean_wall_ns - 2000002.5) < 1e-6 &&
               fabs(rk[0].mean_exposed_ns - 200002.5) < 1e-6 && fabs(rk[1].mean_compute_ns - 1800000) < 1e-6 &&
               rk[1].max_wall_ns == 2000004,
           "fp_reader_dist_ranks: per rank steps, mean wall / compute / exposed, slowest step");
    tap_ok(rc == FP_OK && n == 2 && fabs(rk[0].vs_fastest - 1) < 1e-12 &&
               fabs(rk[1].vs_fastest - 2000002.5 / 1000002.5) < 1e-12 &&
               fabs(rk[1].mean_bytes - 44700000) < 1e-6,
           "the straggler shows: rank 1 at %.3fx the fastest; mean bytes over measured steps only",
           rc == FP_OK && n == 2 ? rk[1].vs_fastest : NAN);
    free(rk);

    fp_dist_run_row_t *dr = NULL;
    rc = fp_reader_dist_runs(r, 0, &dr, &n);
    tap_ok(rc == FP_OK && n == 1 && dr[0].run == runs[0] && dr[0].ranks == 2 && dr[0].steps == 4,
           "fp_reader_dist_runs: only the data-parallel run, 2 ranks, 4 steps");
    free(dr);
    rc = fp_reader_dist_runs(r, 99, &dr, &n);
    tap_ok(rc == FP_OK && n == 0, "another session's runs: none");
    free(dr);

    fp_allreduce_error_row_t *er = NULL;
    rc = fp_reader_allreduce_error(r, runs[0], &er, &n);
    tap_ok(rc == FP_OK && n == 6 && er[0].step == 2 && er[0].layer == -1 && er[0].overflow == 0 &&
               er[0].underflow == 11 && er[1].layer == 0 && fabs(er[1].rel_l2 - 2.5e-4) < 1e-15 &&
               er[1].overflow == -1 && isnan(er[2].rel_l2) && er[3].step == 4 && er[3].overflow == 7 &&
               strcmp(er[3].wire, "fp16") == 0 && fabs(er[3].rel_l2 - 3e-4) < 1e-15,
           "fp_reader_allreduce_error: by step then layer, -1 first with the counts, NaN for NULL");
    free(er);
    char *csvp = tu_path(dir, "dist.csv");
    FILE *f = fopen(csvp, "wb");
    rc = f ? fp_reader_export_csv(r, runs[0], "dist_steps", f) : FP_EIO;
    if (f)
        fclose(f);
    char *csv = tu_slurp(csvp, NULL);
    free(csvp);
    tap_ok(rc == FP_OK && csv && strncmp(csv, "run,step,rank,wall_ns,comm_ns,exposed_ns,bytes,skipped\r\n", 56) == 0 &&
               strstr(csv, "\r\n1,4,1,2000004,300004,200004,,0\r\n"),
           "export --table dist_steps: header in schema order, NULL bytes an empty field");
    free(csv);
    fp_reader_close(r);
    tap_ok(tu_same(p, &snap), "reading changed nothing");
    tu_snap_free(&snap);
    free(p);
}

/* Version 4 -> 5: the two tables added empty; old rows kept; readers refuse version 4. */
static void test_migrate_v4(void)
{
    char *fresh = tu_path(dir, "v5.db"), *p = tu_path(dir, "v4.db");
    int64_t runs[2];
    int rc = tu_write_fixture(fresh, 3, 2, runs);
    rc = rc ? rc : tu_write_fixture(p, 3, 2, runs);
    tap_is_int(rc, FP_OK, "fixtures written");
    /* version 6's steps.host_cpu_ns goes too: a version-4 file has neither */
    tu_sql(p, "ALTER TABLE steps DROP COLUMN host_cpu_ns; DROP TABLE dist_steps; DROP TABLE allreduce_error;"
              " PRAGMA user_version = 4;");
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM sqlite_master WHERE name = 'dist_steps'"), 0,
               "hand-built version 4: no dist_steps");
    fp_reader_t *r;
    tu_snap_t snap;
    tu_snap(p, &snap);
    rc = fp_reader_open(&r, p);
    fp_reader_close(r);
    tap_ok(rc == FP_EVERSION && tu_same(p, &snap), "a reader refuses version 4 without migrating it (%s)",
           fp_error_message());
    tu_snap_free(&snap);
    fp_store_t *s;
    rc = fp_store_open(&s, p);
    tap_is_int(rc, FP_OK, "the writer migrates version 4 (%s)", rc ? fp_error_message() : "ok");
    if (rc == FP_OK) {
        fp_dist_step_rec_t d = {.run = runs[0], .step = 1, .rank = 1, .wall_ns = 5, .comm_ns = 2, .exposed_ns = 1,
                                .bytes = 8};
        rc = fp_store_dist_steps(s, &d, 1);
        int crc = fp_store_close(s, FP_RUN_FINISHED, NULL);
        rc = rc ? rc : crc;
    }
    tap_is_int(rc, FP_OK, "and records a rank's step into it");
    tap_is_int(tu_sql_int(p, "PRAGMA user_version"), FP_STORE_SCHEMA_VERSION, "migrated to version %d",
               FP_STORE_SCHEMA_VERSION);
    char *a = dist_schema(fresh), *b = dist_schema(p);
    tap_ok(a && b && strstr(a, "dist_steps: CREATE") && strstr(a, "allreduce_error: CREATE") && strcmp(a, b) == 0,
           "the migrated tables equal a new file's");
    free(a);
    free(b);
    tap_is_int(tu_sql_int(p, "SELECT count(*) FROM steps"), 6, "the old steps survived the migration");
    rc = fp_reader_open(&r, p);
    fp_dist_run_row_t *dr = NULL;
    size_t n = 0;
    rc = rc ? rc : fp_reader_dist_runs(r, 0, &dr, &n);
    tap_ok(rc == FP_OK && n == 1 && dr[0].ranks == 2 && dr[0].steps == 1, "a reader reads the migrated file's row");
    free(dr);
    fp_reader_close(r);
    free(fresh);
    free(p);
}

int main(void)
{
    dir = tu_mkdir();
    if (!dir)
        tap_skip_all("cannot create a scratch directory");
    test_round_trip();
    test_migrate_v4();
    tu_rmdir(dir);
    return tap_done();
}
