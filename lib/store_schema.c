/* store_schema.c — the one definition of the run store's schema: the SQL of the current version,
 * the migrations from every older version, and the exportable tables of a run. Promise: a file
 * created here and a file migrated here from any older version have the same tables and columns. */
#include "store_db.h"
#include <stddef.h>
#include "store.h"

/* Tables new in a version are defined once here and used by both the current script and the
 * migration that introduced them. Times are ns: wall-clock ones (sessions, runs, steps, events,
 * device samples) since the Unix epoch; kernel start/end on the profiler's (CUPTI) clock. */
#define DEVICE_SAMPLES_SQL                                                                          \
    "CREATE TABLE device_samples (\n"                                                               \
    "  run INTEGER NOT NULL REFERENCES runs(id),\n"                                                 \
    "  timestamp INTEGER NOT NULL,\n"                                                               \
    "  deviceId INTEGER NOT NULL,\n"                                                                \
    "  power_w REAL, energy_j REAL, mem_used INTEGER, temperature_c REAL,\n"                        \
    "  sm_clock_mhz INTEGER, mem_clock_mhz INTEGER);\n"                                             \
    "CREATE INDEX device_samples_run_time ON device_samples(run, timestamp);\n"

/* Version 3: the matrix unit each kernel ran on (probe/kernel_class.h; ids are fp_kernel_class). */
#define KERNEL_CLASS_SQL                                                                            \
    "CREATE TABLE ENUM_KERNEL_CLASS (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);\n"         \
    "INSERT INTO ENUM_KERNEL_CLASS VALUES (1,'simt'),(2,'mma'),(3,'wgmma'),(4,'tcgen05');\n"

/* Version 5: data-parallel training (issue 23). dist_steps: every rank's figures of each step (rank 0
 * records them, gathered over MPI): its wall time, the gradient all-reduce's wall time on the CPU, the part
 * of it compute waited for (exposed), the bytes the rank sent into the reduction; compute time is wall_ns -
 * exposed_ns. allreduce_error: at the sampled (error) steps, the gradients reduced in the 16-bit wire format
 * against the same gradients reduced in fp32: rel. L2 per layer (layer -1: all layers together) and the
 * summed values that overflowed to Inf / flushed to zero (counted over all layers: on the -1 row only). */
#define DIST_SQL                                                                                    \
    "CREATE TABLE dist_steps (\n"                                                                   \
    "  run INTEGER NOT NULL REFERENCES runs(id), step INTEGER NOT NULL, rank INTEGER NOT NULL,\n"   \
    "  wall_ns INTEGER, comm_ns INTEGER, exposed_ns INTEGER, bytes INTEGER,\n"                      \
    "  skipped INTEGER NOT NULL DEFAULT 0,\n"                                                        \
    "  PRIMARY KEY (run, step, rank)) WITHOUT ROWID;\n"                                              \
    "CREATE TABLE allreduce_error (\n"                                                              \
    "  run INTEGER NOT NULL REFERENCES runs(id), step INTEGER NOT NULL, layer INTEGER NOT NULL,\n"  \
    "  wire TEXT NOT NULL CHECK (wire IN ('fp16','bf16')),\n"                                       \
    "  rel_l2 REAL, overflow INTEGER, underflow INTEGER,\n"                                         \
    "  PRIMARY KEY (run, step, layer)) WITHOUT ROWID;\n"

static const char schema_current[] =
    /* Enumerations, named like Nsight Systems' ENUM_* tables. */
    "CREATE TABLE ENUM_PHASE (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);\n"
    "INSERT INTO ENUM_PHASE VALUES (0,'forward'),(1,'backward_data'),(2,'backward_weights');\n"
    "CREATE TABLE ENUM_TENSOR_ROLE (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);\n"
    "INSERT INTO ENUM_TENSOR_ROLE VALUES (0,'activation'),(1,'activation_grad'),(2,'weight'),"
    "(3,'weight_grad'),(4,'update');\n"
    KERNEL_CLASS_SQL
    /* Deduplicated names (kernel names), as in nsys exports. */
    "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);\n"
    "CREATE TABLE sessions (\n"
    "  id INTEGER PRIMARY KEY, name TEXT, host TEXT, start INTEGER NOT NULL, end INTEGER,\n"
    "  config TEXT, fp16probe_version TEXT);\n"
    "CREATE TABLE runs (\n"
    "  id INTEGER PRIMARY KEY, session INTEGER NOT NULL REFERENCES sessions(id),\n"
    "  arm TEXT, model TEXT NOT NULL, policy TEXT NOT NULL, ref_run INTEGER,\n"
    "  device TEXT, driver_version TEXT, cuda_version TEXT, cudnn_version TEXT,\n"
    "  cupti_version TEXT, blas TEXT, host TEXT,\n"
    "  batch_size INTEGER, image_size INTEGER, dataset TEXT, seed INTEGER,\n"
    "  optimizer TEXT, optimizer_config TEXT, config TEXT, fp16probe_version TEXT,\n"
    "  start INTEGER NOT NULL, end INTEGER,\n"
    "  status TEXT NOT NULL CHECK (status IN ('running','finished','failed','interrupted')),\n"
    "  failure TEXT,\n"
    "  writer_pid INTEGER, writer_host TEXT, heartbeat INTEGER);\n"
    "CREATE INDEX runs_session ON runs(session);\n"
    "CREATE TABLE layers (\n"
    "  run INTEGER NOT NULL REFERENCES runs(id), layer INTEGER NOT NULL,\n"
    "  name TEXT NOT NULL, type TEXT, input_shape TEXT, output_shape TEXT,\n"
    "  params INTEGER, fwd_flops INTEGER, bwd_flops INTEGER,\n"
    "  PRIMARY KEY (run, layer)) WITHOUT ROWID;\n"
    "CREATE TABLE steps (\n"
    "  run INTEGER NOT NULL REFERENCES runs(id), step INTEGER NOT NULL,\n"
    "  loss REAL, loss_scale REAL, skipped INTEGER NOT NULL DEFAULT 0, lr REAL,\n"
    "  start INTEGER, end INTEGER, wall_ns INTEGER, samples_per_s REAL,\n"
    "  mem_current INTEGER, mem_peak INTEGER, energy_j REAL, power_w REAL,\n"
    "  cycles INTEGER, instructions INTEGER, host_cpu_ns INTEGER,\n"
    "  PRIMARY KEY (run, step)) WITHOUT ROWID;\n"
    "CREATE TABLE layer_times (\n"
    "  run INTEGER NOT NULL, step INTEGER NOT NULL, layer INTEGER NOT NULL,\n"
    "  phase INTEGER NOT NULL REFERENCES ENUM_PHASE(id), time_ns INTEGER NOT NULL, kernels INTEGER,\n"
    "  PRIMARY KEY (run, step, layer, phase)) WITHOUT ROWID;\n"
    "CREATE TABLE kernels (\n"
    "  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, step INTEGER NOT NULL,\n"
    "  layer INTEGER, phase INTEGER REFERENCES ENUM_PHASE(id),\n"
    "  start INTEGER NOT NULL, end INTEGER NOT NULL,\n"
    "  deviceId INTEGER, streamId INTEGER, correlationId INTEGER,\n"
    "  gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER,\n"
    "  shortName INTEGER REFERENCES StringIds(id), demangledName INTEGER REFERENCES StringIds(id),\n"
    "  tensorCore INTEGER, kernelClass INTEGER REFERENCES ENUM_KERNEL_CLASS(id));\n"
    "CREATE INDEX kernels_run_step ON kernels(run, step);\n"
    "CREATE TABLE histograms (\n"
    "  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, step INTEGER NOT NULL, layer INTEGER NOT NULL,\n"
    "  role INTEGER NOT NULL REFERENCES ENUM_TENSOR_ROLE(id),\n"
    "  count INTEGER, zero INTEGER, nan INTEGER, pos_inf INTEGER, neg_inf INTEGER,\n"
    "  amax REAL, min_nonzero REAL, mean_abs REAL,\n"
    "  fp16_normal INTEGER, fp16_subnormal INTEGER, fp16_underflow INTEGER,\n"
    "  fp16_round_to_max INTEGER, fp16_overflow INTEGER,\n"
    "  bf16_normal INTEGER, bf16_subnormal INTEGER, bf16_underflow INTEGER,\n"
    "  bf16_round_to_max INTEGER, bf16_overflow INTEGER,\n"
    "  e4m3_normal INTEGER, e4m3_subnormal INTEGER, e4m3_underflow INTEGER,\n"
    "  e4m3_round_to_max INTEGER, e4m3_overflow INTEGER,\n"
    "  e5m2_normal INTEGER, e5m2_subnormal INTEGER, e5m2_underflow INTEGER,\n"
    "  e5m2_round_to_max INTEGER, e5m2_overflow INTEGER,\n"
    "  blob BLOB NOT NULL);\n"
    "CREATE UNIQUE INDEX histograms_key ON histograms(run, layer, step, role);\n"
    "CREATE TABLE precision_error (\n"
    "  run INTEGER NOT NULL, ref_run INTEGER NOT NULL, step INTEGER NOT NULL, layer INTEGER NOT NULL,\n"
    "  role INTEGER NOT NULL REFERENCES ENUM_TENSOR_ROLE(id),\n"
    "  rel_l2 REAL, max_abs REAL, cosine REAL,\n"
    "  PRIMARY KEY (run, step, layer, role, ref_run)) WITHOUT ROWID;\n"
    "CREATE TABLE evaluations (\n"
    "  run INTEGER NOT NULL, step INTEGER NOT NULL, split TEXT NOT NULL,\n"
    "  loss REAL, top1 REAL, top5 REAL, images INTEGER,\n"
    "  PRIMARY KEY (run, step, split)) WITHOUT ROWID;\n"
    DEVICE_SAMPLES_SQL
    DIST_SQL
    "CREATE TABLE events (\n"
    "  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, start INTEGER NOT NULL, step INTEGER,\n"
    "  kind TEXT NOT NULL CHECK (kind IN ('loss_scale','skipped_step','nan','warning','info')),\n"
    "  layer INTEGER, text TEXT);\n"
    "CREATE INDEX events_run_time ON events(run, start);\n";

/* Version 1 -> 2: writer liveness (pid, host, heartbeat) for stale-run detection; device samples. */
static const char migrate_1_to_2[] =
    "ALTER TABLE runs ADD COLUMN writer_pid INTEGER;\n"
    "ALTER TABLE runs ADD COLUMN writer_host TEXT;\n"
    "ALTER TABLE runs ADD COLUMN heartbeat INTEGER;\n"
    DEVICE_SAMPLES_SQL;

/* Version 2 -> 3: each kernel's class (SIMT / MMA / wgmma / tcgen05); each step's CPU cycles and
 * instructions. Rows written before stay NULL (not classified / not measured): their tensorCore flag
 * is kept as it was. */
static const char migrate_2_to_3[] =
    KERNEL_CLASS_SQL
    "ALTER TABLE kernels ADD COLUMN kernelClass INTEGER REFERENCES ENUM_KERNEL_CLASS(id);\n"
    "ALTER TABLE steps ADD COLUMN cycles INTEGER;\n"
    "ALTER TABLE steps ADD COLUMN instructions INTEGER;\n";

/* Version 3 -> 4: how many images each evaluation used (the accuracy's sample size). Rows written
 * before stay NULL: readers derive the count from the run's configuration there. */
static const char migrate_3_to_4[] =
    "ALTER TABLE evaluations ADD COLUMN images INTEGER;\n";

/* Version 4 -> 5: the data-parallel tables (empty: no run before had ranks). */
static const char migrate_4_to_5[] = DIST_SQL;

/* Version 5 -> 6: each step's host CPU time, the training thread's CPU time over the step (issue 22). Rows
 * written before stay NULL (not measured). */
static const char migrate_5_to_6[] =
    "ALTER TABLE steps ADD COLUMN host_cpu_ns INTEGER;\n";

/* migrations[v - 1] upgrades a version-v file to version v + 1. */
static const char *const migrations[FP_STORE_SCHEMA_VERSION - 1] = {migrate_1_to_2, migrate_2_to_3,
                                                                    migrate_3_to_4, migrate_4_to_5,
                                                                    migrate_5_to_6};

const char *fp_store_schema_sql(void)
{
    return schema_current;
}

const char *fp_store_migration_sql(int from_version)
{
    if (from_version < 1 || from_version >= FP_STORE_SCHEMA_VERSION)
        return NULL;
    return migrations[from_version - 1];
}

/* The tables `export` knows, each as the SELECT that lists one run's rows (?1 = run id), in the
 * order a reader expects them; names are resolved through StringIds / ENUM_* for readability. */
static const fp_store_table_t tables[] = {
    {"runs", "SELECT * FROM runs WHERE id = ?1"},
    {"layers", "SELECT * FROM layers WHERE run = ?1 ORDER BY layer"},
    {"steps", "SELECT * FROM steps WHERE run = ?1 ORDER BY step"},
    {"layer_times",
     "SELECT t.run, t.step, t.layer, p.name AS phase, t.time_ns, t.kernels FROM layer_times t "
     "JOIN ENUM_PHASE p ON p.id = t.phase WHERE t.run = ?1 ORDER BY t.step, t.layer, t.phase"},
    {"kernels",
     "SELECT k.id, k.run, k.step, k.layer, p.name AS phase, k.start, k.end, k.end - k.start AS duration,"
     " k.deviceId, k.streamId, k.correlationId, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ,"
     " s.value AS shortName, d.value AS demangledName, k.tensorCore, c.name AS kernelClass FROM kernels k"
     " LEFT JOIN ENUM_PHASE p ON p.id = k.phase LEFT JOIN StringIds s ON s.id = k.shortName"
     " LEFT JOIN ENUM_KERNEL_CLASS c ON c.id = k.kernelClass"
     " LEFT JOIN StringIds d ON d.id = k.demangledName WHERE k.run = ?1 ORDER BY k.step, k.start"},
    {"histograms",
     "SELECT h.id, h.run, h.step, h.layer, r.name AS role, h.count, h.zero, h.nan, h.pos_inf, h.neg_inf,"
     " h.amax, h.min_nonzero, h.mean_abs,"
     " h.fp16_normal, h.fp16_subnormal, h.fp16_underflow, h.fp16_round_to_max, h.fp16_overflow,"
     " h.bf16_normal, h.bf16_subnormal, h.bf16_underflow, h.bf16_round_to_max, h.bf16_overflow,"
     " h.e4m3_normal, h.e4m3_subnormal, h.e4m3_underflow, h.e4m3_round_to_max, h.e4m3_overflow,"
     " h.e5m2_normal, h.e5m2_subnormal, h.e5m2_underflow, h.e5m2_round_to_max, h.e5m2_overflow,"
     " hex(h.blob) AS blob FROM histograms h JOIN ENUM_TENSOR_ROLE r ON r.id = h.role"
     " WHERE h.run = ?1 ORDER BY h.step, h.layer, h.role"},
    {"precision_error",
     "SELECT e.run, e.ref_run, e.step, e.layer, r.name AS role, e.rel_l2, e.max_abs, e.cosine"
     " FROM precision_error e JOIN ENUM_TENSOR_ROLE r ON r.id = e.role WHERE e.run = ?1"
     " ORDER BY e.step, e.layer, e.role"},
    {"evaluations", "SELECT * FROM evaluations WHERE run = ?1 ORDER BY step, split"},
    {"device_samples", "SELECT * FROM device_samples WHERE run = ?1 ORDER BY timestamp"},
    {"dist_steps", "SELECT * FROM dist_steps WHERE run = ?1 ORDER BY step, rank"},
    {"allreduce_error", "SELECT * FROM allreduce_error WHERE run = ?1 ORDER BY step, layer"},
    {"events", "SELECT * FROM events WHERE run = ?1 ORDER BY start, id"},
};

const fp_store_table_t *fp_store_tables(size_t *count)
{
    *count = sizeof tables / sizeof tables[0];
    return tables;
}

const char *fp_run_status_name(fp_run_status s)
{
    static const char *const names[] = {"running", "finished", "failed", "interrupted"};
    return (unsigned)s < 4 ? names[s] : "unknown";
}

const char *fp_phase_name(fp_phase p)
{
    static const char *const names[] = {"forward", "backward_data", "backward_weights"};
    return (unsigned)p < FP_PHASE_COUNT ? names[p] : "none";
}

const char *fp_tensor_role_name(fp_tensor_role r)
{
    static const char *const names[] = {"activation", "activation_grad", "weight", "weight_grad", "update"};
    return (unsigned)r < FP_ROLE_COUNT ? names[r] : "unknown";
}

const char *fp_event_kind_name(fp_event_kind k)
{
    static const char *const names[] = {"loss_scale", "skipped_step", "nan", "warning", "info"};
    return (unsigned)k <= FP_EVENT_INFO ? names[k] : "info";
}
