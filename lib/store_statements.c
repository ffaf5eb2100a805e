/* store_statements.c — the writer's SQL (store_writer_internal.h): one prepared statement per kind of
 * row and per run or session update, prepared once when the store opens, and the binding helpers that
 * turn "not measured" (NULL pointers, negative integers, NaN) into SQL NULL. */
#include <math.h>
#include "store_writer_internal.h"

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",   /* the write lock up front: a busy file is met here, before any row */
    [ST_COMMIT] = "COMMIT",
    [ST_KERNEL] = "INSERT INTO kernels (run, step, layer, phase, start, end, deviceId, streamId, correlationId,"
                  " gridX, gridY, gridZ, blockX, blockY, blockZ, shortName, demangledName, tensorCore, kernelClass)"
                  " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_STEP] = "INSERT OR REPLACE INTO steps (run, step, loss, loss_scale, skipped, lr, start, end, wall_ns,"
                " samples_per_s, mem_current, mem_peak, energy_j, power_w, cycles, instructions, host_cpu_ns)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_LAYER_TIME] = "INSERT OR REPLACE INTO layer_times (run, step, layer, phase, time_ns, kernels)"
                      " VALUES (?,?,?,?,?,?)",
    [ST_LAYER] = "INSERT OR REPLACE INTO layers (run, layer, name, type, input_shape, output_shape, params,"
                 " fwd_flops, bwd_flops) VALUES (?,?,?,?,?,?,?,?,?)",
    [ST_HIST] = "INSERT OR REPLACE INTO histograms (run, step, layer, role, count, zero, nan, pos_inf, neg_inf,"
                " amax, min_nonzero, mean_abs,"
                " fp16_normal, fp16_subnormal, fp16_underflow, fp16_round_to_max, fp16_overflow,"
                " bf16_normal, bf16_subnormal, bf16_underflow, bf16_round_to_max, bf16_overflow,"
                " e4m3_normal, e4m3_subnormal, e4m3_underflow, e4m3_round_to_max, e4m3_overflow,"
                " e5m2_normal, e5m2_subnormal, e5m2_underflow, e5m2_round_to_max, e5m2_overflow, blob)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_PRECISION] = "INSERT OR REPLACE INTO precision_error (run, ref_run, step, layer, role, rel_l2, max_abs,"
                     " cosine) VALUES (?,?,?,?,?,?,?,?)",
    [ST_EVAL] = "INSERT OR REPLACE INTO evaluations (run, step, split, loss, top1, top5, images)"
                " VALUES (?,?,?,?,?,?,?)",
    [ST_DEVICE] = "INSERT INTO device_samples (run, timestamp, deviceId, power_w, energy_j, mem_used,"
                  " temperature_c, sm_clock_mhz, mem_clock_mhz) VALUES (?,?,?,?,?,?,?,?,?)",
    [ST_EVENT] = "INSERT INTO events (run, start, step, kind, layer, text) VALUES (?,?,?,?,?,?)",
    [ST_STRING] = "INSERT OR IGNORE INTO StringIds (id, value) VALUES (?,?)",
    [ST_END_RUN] = "UPDATE runs SET status = ?2, failure = ?3, end = ?4, heartbeat = ?4"
                   " WHERE id = ?1 AND status = 'running'",
    [ST_HEARTBEAT] = "UPDATE runs SET heartbeat = ?2 WHERE id = ?1 AND status = 'running'",
    [ST_SESSION] = "INSERT INTO sessions (name, host, start, config, fp16probe_version) VALUES (?,?,?,?,?)",
    [ST_RUN] = "INSERT INTO runs (session, arm, model, policy, ref_run, device, driver_version, cuda_version,"
               " cudnn_version, cupti_version, blas, host, batch_size, image_size, dataset, seed, optimizer,"
               " optimizer_config, config, fp16probe_version, start, status, writer_pid, writer_host, heartbeat)"
               " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'running',?,?,?)",
    [ST_END_SESSION] = "UPDATE sessions SET end = ?2 WHERE id = ?1 AND end IS NULL",
    [ST_DIST_STEP] = "INSERT OR REPLACE INTO dist_steps (run, step, rank, wall_ns, comm_ns, exposed_ns, bytes, skipped)"
                     " VALUES (?,?,?,?,?,?,?,?)",
    [ST_ALLREDUCE_ERROR] = "INSERT OR REPLACE INTO allreduce_error (run, step, layer, wire, rel_l2, overflow,"
                           " underflow) VALUES (?,?,?,?,?,?,?)",
};

int fp_sw_prepare(fp_store_t *s)
{
    for (int i = 0; i < ST_COUNT; i++) {
        int src = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
        if (src != SQLITE_OK)
            return fp_store_sqlite_fail(s->db, src, s->path, "preparing statements");
    }
    return FP_OK;
}

void fp_sw_finalize(fp_store_t *s)
{
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(s->st[i]);
        s->st[i] = NULL;
    }
}

void fp_sw_bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

void fp_sw_bind_i64_na(sqlite3_stmt *st, int i, int64_t v)   /* negative: NULL */
{
    if (v < 0)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

void fp_sw_bind_dbl(sqlite3_stmt *st, int i, double v)   /* NaN: NULL */
{
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

int fp_sw_run(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}
