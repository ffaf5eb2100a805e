/* test_compare.c — the side-by-side comparison (trainer/run/compare.c) on tinynet at 32x32, batch 8, a few
 * steps: policy lists (unknown / empty / duplicate refused, valid ones listed), the same initial weights in
 * every arm, the same batches whatever the arms and the turn, one session with a run per arm naming the
 * fp32 reference, --turn respected in the order of the step rows, the summary's figures present, a failing
 * arm marked failed while the other finishes, a stop request ending as interrupted, and CPU arms keeping the GPU
 * probes out (no kernel rows, device samples or GPU events; every step row written); one arm (`train`): one
 * policy only, checkpoints and resume refused for several, and a checkpoint taken mid-turn by a stop resuming
 * bit for bit; bad inputs (0 steps, data that do not open, unwritable outputs, weights that do not load, a resume
 * with nothing left to train) recording nothing. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "error.h"
#include "reports/summary.h"
#include "store_reader.h"
#include "store_testutil.h"
#include "tap.h"
#include "trainer/run/compare.h"

static char dir[64];

static void cfg_tiny(fp_compare_config *c, const char *precision, int turn, const char *db)
{
    fp_compare_config_default(c);
    c->base.arm.model = "tinynet";
    c->base.arm.image_size = 32;
    c->base.arm.seed = 3;
    c->base.arm.threads = 1;
    fp_lr_schedule_default(&c->base.arm.lr, FP_LR_CONSTANT, 0.01);
    c->base.arm.optim.momentum = 0.9;
    c->base.data = "synthetic:100";
    c->base.batch = 8;
    c->base.steps = 6;
    c->base.loader_threads = 1;
    c->base.eval_batches = 2;
    c->base.eval_every = 3;
    c->base.db = db;
    c->precision = precision;
    c->turn = turn;
    c->hist_every = 3;
    c->error_every = 3;
}

/* `fp16probe train`'s configuration for tinynet, as cfg_tiny. */
static void cfg_one(fp_compare_config *c, const char *precision, const char *db)
{
    fp_compare_config_default_train(c);
    c->base.arm.model = "tinynet";
    c->base.arm.image_size = 32;
    c->base.arm.seed = 3;
    c->base.arm.threads = 1;
    c->base.data = "synthetic:100";
    c->base.batch = 8;
    c->base.steps = 6;
    c->base.loader_threads = 1;
    c->base.eval_batches = 2;
    c->base.db = db;
    c->precision = precision;
    c->turn = 3;
}

static char *path(const char *name)
{
    static char buf[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* The step rows of run `run` (losses, start times). */
static size_t steps_of(const char *db, int64_t run, fp_step_row_t **rows)
{
    fp_reader_t *r;
    size_t n = 0;
    *rows = NULL;
    if (fp_reader_open_snapshot(&r, db) == FP_OK) {
        fp_reader_steps_since(r, run, INT64_MIN, 0, rows, &n);
        fp_reader_close(r);
    }
    return n;
}

static fp_compare *g_cmp;

static void stop_after_first(const fp_compare_progress *p, void *user)
{
    (void)user;
    if (!p->is_eval && p->step >= 1)
        fp_compare_request_stop(g_cmp);
}

static void stop_after_4(const fp_compare_progress *p, void *user)
{
    (void)user;
    if (!p->is_eval && p->step >= 4)
        fp_compare_request_stop(g_cmp);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/fp16probe-compare-XXXXXX", "/tmp");
    if (!mkdtemp(dir))
        tap_skip_all("cannot create a temporary directory");

    /* ---- policy lists ---- */
    const fp_policy *names[FP_COMPARE_MAX_ARMS];
    int n = 0;
    tap_ok(fp_compare_parse_policies("fp32,fp16,bf16", names, FP_COMPARE_MAX_ARMS, &n) == FP_OK && n == 3 &&
               names[2] == fp_policy_find("bf16"), "fp32,fp16,bf16 parses into three arms");
    tap_ok(fp_compare_parse_policies("fp32,fp99", names, FP_COMPARE_MAX_ARMS, &n) == FP_EINVAL &&
               strstr(fp_error_message(), "fp99") && strstr(fp_error_message(), "fp16-noscale"),
           "unknown policy: FP_EINVAL naming it and listing the valid ones (%s)", fp_error_message());
    tap_ok(fp_compare_parse_policies("", names, FP_COMPARE_MAX_ARMS, &n) == FP_EINVAL &&
               strstr(fp_error_message(), "empty") && strstr(fp_error_message(), "bf16"),
           "empty list refused, valid ones listed (%s)", fp_error_message());
    tap_ok(fp_compare_parse_policies("fp32,,fp16", names, FP_COMPARE_MAX_ARMS, &n) == FP_EINVAL,
           "empty entry refused (%s)", fp_error_message());
    tap_ok(fp_compare_parse_policies("fp16,fp32,fp16", names, FP_COMPARE_MAX_ARMS, &n) == FP_EINVAL &&
               strstr(fp_error_message(), "twice"), "duplicate policy refused (%s)", fp_error_message());

    /* ---- bad choices record nothing ---- */
    fp_compare_config cfg;
    fp_compare_result res;
    fp_compare *c = NULL;
    cfg_tiny(&cfg, "fp32,fp16", 2, path("bad.db"));
    cfg.base.arm.model = "resnet19";
    tap_ok(fp_compare_open(&c, &cfg, &res) == FP_EINVAL && res.usage_error && strstr(res.message, "resnet50") &&
               access(path("bad.db"), F_OK) != 0 && !c,
           "unknown model: usage error listing the models, no database (%s)", res.message);
    cfg_tiny(&cfg, "fp32,half,fp32", 2, path("bad.db"));
    tap_ok(fp_compare_open(&c, &cfg, &res) == FP_EINVAL && res.usage_error && access(path("bad.db"), F_OK) != 0,
           "duplicate policy: usage error, no database (%s)", res.message);

    /* ---- bad inputs record nothing either (issue 21 #9, issue 19): no session without a step ---- */
    cfg_tiny(&cfg, "fp32,fp16", 2, path("bad.db"));
    cfg.base.steps = 0;
    tap_ok(fp_compare_open(&c, &cfg, &res) == FP_EINVAL && res.usage_error && strstr(res.message, "--steps") &&
               access(path("bad.db"), F_OK) != 0,
           "0 steps: usage error, no database (%s)", res.message);
    cfg_tiny(&cfg, "fp32,fp16", 2, path("bad.db"));
    cfg.base.data = "cifar10:/nonexistent-dir";
    tap_ok(fp_compare_open(&c, &cfg, &res) != FP_OK && !res.usage_error && res.session_id == 0 &&
               res.arms[0].run_id == 0 && strstr(res.message, "nonexistent-dir") && access(path("bad.db"), F_OK) != 0,
           "data that do not open: an error, no session, no database (%s)", res.message);
    cfg_one(&cfg, "fp32", path("bad.db"));
    cfg.base.save = path("nodir/w.safetensors");
    tap_ok(fp_compare_open(&c, &cfg, &res) == FP_EIO && !res.usage_error && strstr(res.message, "does not exist") &&
               access(path("bad.db"), F_OK) != 0,
           "--save into a missing directory: refused before anything is recorded (%s)", res.message);
    cfg_one(&cfg, "fp32", path("bad.db"));
    cfg.base.checkpoint = "";
    tap_ok(fp_compare_open(&c, &cfg, &res) == FP_EINVAL && res.usage_error && access(path("bad.db"), F_OK) != 0,
           "--checkpoint '': usage error, no database (%s)", res.message);
    cfg_one(&cfg, "fp32", path("bad.db"));
    cfg.base.arm.weights = path("nosuch.safetensors");
    tap_ok(fp_compare_open(&c, &cfg, &res) != FP_OK && !res.usage_error && res.session_id == 0 &&
               res.arms[0].status == FP_RUN_FAILED && strstr(res.arms[0].message, "nosuch") &&
               access(path("bad.db"), F_OK) != 0,
           "weights that do not load: the arm failed, no session recorded (%s)", res.message);

    /* ---- three arms, turns of 2 ---- */
    const char *db1 = path("a.db");
    cfg_tiny(&cfg, "fp32,fp16,bf16", 2, db1);
    int rc = fp_compare_open(&c, &cfg, &res);
    tap_ok(rc == FP_OK && fp_compare_arm_count(c) == 3, "open three arms (%s)", rc ? res.message : "ok");
    if (rc)
        return tap_done();
    {
        int same = 1;
        fp_model *m0 = fp_arm_model(fp_compare_get_arm(c, 0));
        size_t np = fp_model_num_params(m0);
        for (int i = 1; i < 3; i++)
            same &= memcmp(fp_model_params(m0), fp_model_params(fp_arm_model(fp_compare_get_arm(c, i))),
                           np * sizeof(float)) == 0;
        tap_ok(same, "every arm starts from the same %zu parameters, bit for bit", np);
    }
    rc = fp_compare_run(c, &res);
    fp_compare_close(c);
    tap_ok(rc == FP_OK && res.status == FP_RUN_FINISHED && res.nfailed == 0, "the comparison finishes (%s)",
           res.message);
    tap_ok(res.arms[0].status == FP_RUN_FINISHED && res.arms[1].status == FP_RUN_FINISHED &&
               res.arms[2].status == FP_RUN_FINISHED && res.arms[2].steps_done == 6,
           "every arm finished its 6 steps");

    fp_reader_t *r = NULL;
    fp_run_row_t *runs = NULL;
    size_t nr = 0;
    if (fp_reader_open_snapshot(&r, db1) == FP_OK)
        fp_reader_runs(r, res.session_id, &runs, &nr);
    tap_ok(nr == 3, "one session holds one run per arm (%zu)", nr);
    int64_t ref = -1;
    for (size_t i = 0; i < nr; i++)
        if (strcmp(runs[i].policy, "fp32") == 0)
            ref = runs[i].id;
    int refs_ok = nr == 3;
    for (size_t i = 0; i < nr; i++)
        refs_ok &= strcmp(runs[i].policy, "fp32") == 0 ? runs[i].ref_run < 0 : runs[i].ref_run == ref;
    tap_ok(refs_ok, "fp16 and bf16 name the fp32 run as ref_run");
    tap_ok(nr == 3 && strcmp(runs[0].status, "finished") == 0 && strcmp(runs[2].status, "finished") == 0,
           "runs are stored as finished");

    /* --turn 2: ordered by start time, steps come in pairs per arm */
    fp_step_row_t *st[3] = {NULL, NULL, NULL};
    size_t ns[3] = {0, 0, 0};
    for (size_t i = 0; i < nr && i < 3; i++)
        ns[i] = steps_of(db1, res.arms[i].run_id, &st[i]);
    int order_ok = ns[0] == 6 && ns[1] == 6 && ns[2] == 6;
    for (int t = 0; order_ok && t < 6; t += 2)
        for (int a = 0; a < 3; a++) {
            /* both steps of arm a's turn start after the previous arm's turn ended and before the next's */
            order_ok &= st[a][t].start < st[a][t + 1].start;
            if (a > 0)
                order_ok &= st[a - 1][t + 1].end <= st[a][t].start;
            if (a < 2)
                order_ok &= st[a][t + 1].end <= st[a + 1][t].start;
            if (t + 2 < 6 && a == 2)
                order_ok &= st[2][t + 1].end <= st[0][t + 2].start;
        }
    tap_ok(order_ok, "--turn 2: the step rows alternate arms two steps at a time");
    tap_is_double(st[1] ? st[1][0].loss : NAN, st[0] ? st[0][0].loss : NAN, 0, 1e-2,
                  "fp16's first loss equals fp32's within 1e-2 relative (same weights, same batch)");
    tap_is_double(st[2] ? st[2][0].loss : NAN, st[0] ? st[0][0].loss : NAN, 0, 2e-2,
                  "bf16's first loss equals fp32's within 2e-2 relative");

    /* the summary's figures */
    fp_summary_t s;
    rc = r ? fp_summary_load(r, res.session_id, -1, &s) : FP_EINVAL;
    tap_ok(rc == FP_OK && s.narms == 3 && strcmp(s.arms[s.ref].run.policy, "fp32") == 0,
           "summary: three arms, fp32 the reference (%s)", rc ? fp_error_message() : "ok");
    if (rc == FP_OK) {
        const fp_arm_t *a = fp_summary_arm(&s, "fp16");
        tap_ok(a && isfinite(a->speedup) && isfinite(a->samples_per_s) && isfinite(a->mem_ratio) && a->mem_ratio < 1,
               "summary: speedup %.2f, throughput %.1f, memory ratio %.2f (< 1 for fp16)", a ? a->speedup : NAN,
               a ? a->samples_per_s : NAN, a ? a->mem_ratio : NAN);
        tap_ok(a && isfinite(a->final_loss) && isfinite(a->val_top1) && isfinite(a->top1_gap) && a->val_step == 6,
               "summary: final loss, validation top-1 at step 6 and its gap");
        tap_ok(a && a->final_loss_scale == 65536 && a->skipped == 0, "summary: fp16's loss scale 65536, 0 skipped");
        tap_ok(a && a->nnumerics > 0 && a->ntop_under >= 0 && s.arms[s.ref].nnumerics > 0,
               "summary: histograms sampled for the overflow / underflow tables");
        tap_ok(isnan(a->energy_per_step) || a->energy_per_step > 0, "summary: energy per step n/a or positive");
        fp_summary_free(&s);
    } else {
        tap_skip(5, "no summary");
    }
    free(runs);
    fp_reader_close(r);

    /* CPU arms: the GPU probes (NVML, CUPTI, NVTX) stay out, every step row is written at its step */
    tap_ok(tu_sql_int(db1, "SELECT count(*) FROM kernels") == 0 &&
               tu_sql_int(db1, "SELECT count(*) FROM device_samples") == 0,
           "CPU arms: no kernel rows, no device samples");
    tap_ok(tu_sql_int(db1, "SELECT count(*) FROM events WHERE text LIKE '%CUPTI%' OR text LIKE '%NVML%' OR "
                           "text LIKE '%NVTX%'") == 0,
           "CPU arms: no GPU probe events");
    tap_ok(tu_sql_int(db1, "SELECT count(*) FROM steps") == 18 &&
               tu_sql_int(db1, "SELECT count(*) FROM steps WHERE energy_j IS NOT NULL AND NOT energy_j > 0") == 0,
           "CPU arms: 18 step rows, energy NULL (no RAPL) or positive (RAPL)");

    /* ---- the same batches whatever the arms and the turn ---- */
    const char *db2 = path("b.db");
    cfg_tiny(&cfg, "bf16,fp32", 3, db2);
    rc = fp_compare_train(&cfg, &res);
    fp_step_row_t *st2 = NULL;
    size_t ns2 = rc == FP_OK ? steps_of(db2, res.arms[1].run_id, &st2) : 0;
    int same = ns2 == 6 && ns[0] == 6;
    for (size_t i = 0; same && i < 6; i++)
        same &= st2[i].loss == st[0][i].loss;
    tap_ok(same, "the fp32 arm's six losses are identical with other arms and --turn 3 (same batches, same order)");
    tap_ok(rc == FP_OK && res.ref == 1, "the reference is the fp32 arm wherever it is in the list");
    free(st2);
    for (int i = 0; i < 3; i++)
        free(st[i]);

    /* ---- a failing arm: lr 1e10 without a scaler ---- */
    const char *db3 = path("c.db");
    cfg_tiny(&cfg, "fp16,fp16-noscale", 1, db3);
    fp_lr_schedule_default(&cfg.base.arm.lr, FP_LR_CONSTANT, 1e10);
    rc = fp_compare_train(&cfg, &res);
    tap_ok(rc == FP_OK && res.status == FP_RUN_FINISHED && res.nfailed == 1, "one arm failing does not stop the other");
    tap_ok(res.arms[1].status == FP_RUN_FAILED && strstr(res.arms[1].message, "no loss scaler"),
           "fp16-noscale failed: %s", res.arms[1].message);
    tap_ok(res.arms[0].status == FP_RUN_FINISHED && res.arms[0].steps_done == 6 && res.arms[0].skipped > 0,
           "fp16 finished its 6 steps, skipping %lld", (long long)res.arms[0].skipped);
    r = NULL;
    runs = NULL;
    nr = 0;
    if (fp_reader_open_snapshot(&r, db3) == FP_OK)
        fp_reader_runs(r, res.session_id, &runs, &nr);
    tap_ok(nr == 2 && strcmp(runs[1].status, "failed") == 0 && strstr(runs[1].failure, "no loss scaler") &&
               strcmp(runs[0].status, "finished") == 0,
           "stored: fp16-noscale failed with its message, fp16 finished");
    free(runs);
    fp_reader_close(r);

    /* ---- a stop request (the dashboard's, as the first Ctrl-C) after the first step ---- */
    cfg_tiny(&cfg, "fp32,fp16", 1, path("f.db"));
    cfg.progress = stop_after_first;
    cfg.progress_interval_s = 0;
    rc = fp_compare_open(&g_cmp, &cfg, &res);
    if (rc == FP_OK) {
        rc = fp_compare_run(g_cmp, &res);
        fp_compare_close(g_cmp);
    }
    tap_ok(rc == FP_OK && res.status == FP_RUN_INTERRUPTED && res.arms[0].status == FP_RUN_INTERRUPTED &&
               res.arms[0].steps_done == 1 && res.arms[1].steps_done == 0,
           "a stop request ends every arm after the current step, as interrupted (%s)", res.message);
    r = NULL;
    runs = NULL;
    nr = 0;
    if (fp_reader_open_snapshot(&r, path("f.db")) == FP_OK)
        fp_reader_runs(r, res.session_id, &runs, &nr);
    tap_ok(nr == 2 && strcmp(runs[0].status, "interrupted") == 0 && strcmp(runs[1].status, "interrupted") == 0,
           "both runs stored as interrupted");
    free(runs);
    fp_reader_close(r);

    /* ---- one arm, as `train` ---- */
    cfg_one(&cfg, "fp32,fp16", path("t.db"));
    tap_ok(fp_compare_open(&c, &cfg, &res) == FP_EINVAL && res.usage_error && strstr(res.message, "one precision") &&
               access(path("t.db"), F_OK) != 0,
           "train with two policies: usage error, no database (%s)", res.message);
    cfg_tiny(&cfg, "fp32,fp16", 2, path("t.db"));
    cfg.base.save = path("w.safetensors");
    tap_ok(fp_compare_open(&c, &cfg, &res) == FP_EINVAL && res.usage_error && strstr(res.message, "--save") &&
               access(path("t.db"), F_OK) != 0,
           "--save with two policies: usage error, no database (%s)", res.message);
    /* straight: 6 steps; stopped after step 4 (turns of 3: the loader is 2 batches ahead) with a checkpoint,
     * then resumed to 6: the same weights bit for bit */
    cfg_one(&cfg, "fp16", path("one.db"));
    cfg.base.save = path("full.safetensors");
    int rc1 = fp_compare_train(&cfg, &res);
    cfg_one(&cfg, "fp16", path("one.db"));
    cfg.base.checkpoint = path("ck.safetensors");
    cfg.progress = stop_after_4;
    cfg.progress_interval_s = 0;
    int rc2 = fp_compare_open(&g_cmp, &cfg, &res);
    if (rc2 == FP_OK) {
        rc2 = fp_compare_run(g_cmp, &res);
        fp_compare_close(g_cmp);
    }
    tap_ok(rc1 == FP_OK && rc2 == FP_OK && res.status == FP_RUN_INTERRUPTED && res.arms[0].steps_done == 4 &&
               access(path("ck.safetensors"), F_OK) == 0,
           "one arm stopped after step 4 of 6 (turns of 3) leaves its checkpoint (%s)", res.message);
    cfg_one(&cfg, "fp16", path("one.db"));
    cfg.precision = NULL;   /* the checkpoint's, as the model would be */
    cfg.base.resume = path("ck.safetensors");
    cfg.base.save = path("resumed.safetensors");
    int rc3 = fp_compare_train(&cfg, &res);
    size_t l1 = 0, l2 = 0;
    char *w1 = tu_slurp(path("full.safetensors"), &l1), *w2 = tu_slurp(path("resumed.safetensors"), &l2);
    tap_ok(rc3 == FP_OK && res.arms[0].steps_done == 6 && w1 && w2 && l1 == l2 && memcmp(w1, w2, l1) == 0,
           "resumed from step 4 to 6: the weights of the straight 6 steps, bit for bit (%s)", rc3 ? res.message : "ok");
    free(w1);
    free(w2);
    tap_ok(tu_sql_int(path("one.db"), "SELECT count(*) FROM events WHERE text LIKE 'resumed from %ck.safetensors at "
                                      "step 4 (data epoch 0, batch 4)'") == 1,
           "the resumed run says where it continued (step 4, data batch 4)");
    /* a resume with nothing left to train is a usage error, recorded nowhere (issue 19) */
    long long runs_before = tu_sql_int(path("one.db"), "SELECT count(*) FROM runs");
    cfg_one(&cfg, "fp16", path("one.db"));
    cfg.precision = NULL;
    cfg.base.resume = path("ck.safetensors");
    cfg.base.steps = 4;
    tap_ok(fp_compare_open(&c, &cfg, &res) == FP_EINVAL && res.usage_error && strstr(res.message, "at step 4") &&
               tu_sql_int(path("one.db"), "SELECT count(*) FROM runs") == runs_before,
           "resume at step 4 with 4 steps: usage error, no run recorded (%s)", res.message);

    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
