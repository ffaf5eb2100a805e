/* gate_testutil.c — recorded fixture sessions for the gate's tests (gate_testutil.h). */
#include "gate_testutil.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "error.h"
#include "hist.h"
#include "report_testutil.h"
#include "store.h"
#include "store_testutil.h"

void gt_default(gt_session_t *g, const char *path, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->path = path;
    g->model = "resnet50";
    g->data = "synthetic";
    g->device = "NVIDIA H200";
    g->optimizer = "sgd";
    g->batch = 64;
    g->image_size = 224;
    g->steps = 300;
    g->eval_batches = 16;   /* 1,024 images */
    g->lr = 0.025;
    g->seed = seed;
    g->sigma = 0.04;
    g->hist_every = 50;
    g->narms = 2;
    gt_arm_t *a = &g->arms[0];
    a->policy = "fp32";
    a->median_ns = 100e6;
    a->loss_noise = 0.08;
    a->correct = 717;   /* 70.0% */
    a->lost_pct = 0.0;
    a->mem_peak = 20LL << 30;
    a = &g->arms[1];
    a->policy = "fp16";
    a->median_ns = 60e6;
    a->calib_skips = 3;
    a->probe_at = 200;
    a->loss_noise = 0.08;
    a->correct = 712;   /* 69.5%: a drop of half a point */
    a->lost_pct = 0.004;
    a->mem_peak = 12LL << 30;
}

void gt_quickstart(gt_session_t *g)
{
    g->steps = 80;
    g->batch = 16;
    g->image_size = 64;
    g->eval_batches = 8;
    g->device = "cpu: AMD EPYC";
    g->arms[1].calib_skips = 5;
    g->arms[1].probe_at = 0;
}

gt_arm_t *gt_arm(gt_session_t *g, const char *policy)
{
    for (int i = 0; i < g->narms; i++)
        if (strcmp(g->arms[i].policy, policy) == 0)
            return &g->arms[i];
    if (g->narms == GT_MAX_ARMS)
        return NULL;
    gt_arm_t *a = &g->arms[g->narms++];
    *a = g->arms[g->narms > 2 ? 1 : 0];
    a->policy = policy;
    return a;
}

int64_t gt_eval_images(const gt_session_t *g)
{
    return g->eval_batches * g->batch;
}

static int has_scaler(const char *policy)
{
    return strcmp(policy, "fp16") == 0;
}

static int low_precision(const char *policy)
{
    return strcmp(policy, "fp32") != 0 && strcmp(policy, "tf32") != 0;
}

/* A small histogram: n values around 1, `over` of them above fp16's maximum. */
static int write_hist(fp_store_t *st, int64_t run, int64_t step, fp_tensor_role role, int over, rt_rng_t *rng)
{
    enum { N = 512 };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(rt_normal(rng) * 0.5);
    for (int i = 0; i < over && i < N; i++)
        x[i] = 70000.0f;
    fp_hist_t h;
    fp_hist_init(&h);
    int rc = fp_hist_add(&h, x, N);
    return rc == FP_OK ? fp_store_hist(st, run, step, 0, role, &h) : rc;
}

static fp_run_status status_of(const char *s)
{
    if (!s || strcmp(s, "finished") == 0 || strcmp(s, "running") == 0)
        return FP_RUN_FINISHED;
    return strcmp(s, "failed") == 0 ? FP_RUN_FAILED : FP_RUN_INTERRUPTED;
}

int gt_write(const gt_session_t *g)
{
    fp_store_t *st;
    rt_rng_t rng;
    int rc = rt_open(&st, g->path, &rng, g->seed);
    if (rc != FP_OK)
        return rc;
    char opt[256], cfg[2][1024], policies[128] = "";
    snprintf(opt, sizeof opt,
             "{\"lr\":%.17g,\"momentum\":0.9,\"dampening\":0,\"nesterov\":false,\"weight_decay\":0.0005,"
             "\"schedule\":\"constant\",\"warmup_steps\":10,\"warmup_start_factor\":0.33333333333333331}",
             g->lr);
    for (int i = 0; i < g->narms; i++) {
        size_t len = strlen(policies);
        snprintf(policies + len, sizeof policies - len, "%s%s", i ? "," : "", g->arms[i].policy);
    }
    snprintf(cfg[0], sizeof cfg[0],
             "{\"command\":\"compare\",\"model\":\"%s\",\"precision\":\"%s\",\"data\":\"%s\",\"classes\":10,"
             "\"image_size\":%lld,\"batch\":%lld,\"steps\":%lld,\"seed\":%llu,\"augment\":true,\"shuffle\":true,"
             "\"optimizer\":\"%s\",\"optimizer_config\":%s,\"device\":\"%s\",\"eval_every\":%lld,\"eval_batches\":%lld,"
             "\"weights\":null,\"hist_every\":%d}",
             g->model, policies, g->data, (long long)g->image_size, (long long)g->batch, (long long)g->steps,
             (unsigned long long)g->seed, g->optimizer, opt, g->device, (long long)g->steps,
             (long long)g->eval_batches, g->hist_every);
    fp_session_info_t si = {.name = "gate fixture", .config_json = cfg[0]};
    int64_t session, runs[GT_MAX_ARMS], ref = 0;
    rc = fp_store_begin_session(st, &si, &session);
    for (int i = 0; rc == FP_OK && i < g->narms; i++) {
        const gt_arm_t *a = &g->arms[i];
        fp_run_info_t ri = {.session = session, .arm = a->policy, .model = g->model, .policy = a->policy,
                            .device = g->device, .batch_size = g->batch, .image_size = g->image_size,
                            .dataset = g->data, .seed = (int64_t)g->seed, .optimizer = g->optimizer,
                            .optimizer_config = opt, .config_json = cfg[0]};
        rc = rt_begin_arm(st, &ri, &ref, &runs[i]);
    }
    double scale[GT_MAX_ARMS];
    for (int i = 0; i < g->narms; i++)
        scale[i] = 65536;
    for (int64_t k = 1; rc == FP_OK && k <= g->steps; k++)
        for (int i = 0; rc == FP_OK && i < g->narms; i++) {
            const gt_arm_t *a = &g->arms[i];
            int scaler = has_scaler(a->policy), skipped = 0;
            if (scaler && k <= a->calib_skips)
                skipped = 1;
            else if (scaler && a->probe_at && k == a->probe_at)
                scale[i] *= 2, skipped = 1;   /* a growth, and its first step overflows */
            else if (a->skip_every && k > a->calib_skips && k % a->skip_every == 0)
                skipped = 1;
            double t = rt_step_time(&rng, a->median_ns, g->sigma, 0.01);
            double loss = 2.0 * exp(-(double)k / 200.0) + 0.5 + a->loss_offset + a->loss_noise * rt_normal(&rng);
            fp_step_rec_t s = {.run = runs[i], .step = k, .loss = loss, .loss_scale = scaler ? scale[i] : NAN,
                               .lr = g->lr, .skipped = skipped, .start = -1, .end = -1, .wall_ns = (int64_t)t,
                               .samples_per_s = (double)g->batch * 1e9 / t, .mem_current = a->mem_peak,
                               .mem_peak = a->mem_peak, .energy_j = NAN, .power_w = NAN};
            rc = fp_store_step(st, &s, NULL, 0);
            if (skipped && scaler) {
                char text[128];
                snprintf(text, sizeof text, "loss scale %g -> %g (inf/NaN gradient)", scale[i], scale[i] / 2);
                fp_store_event(st, runs[i], -1, k, -1, FP_EVENT_LOSS_SCALE, text);
                scale[i] /= 2;
            }
            if (rc == FP_OK && g->hist_every && k % g->hist_every == 0) {
                rc = write_hist(st, runs[i], k, FP_ROLE_ACTIVATION, low_precision(a->policy) ? a->overflows : 0, &rng);
                if (rc == FP_OK)
                    rc = write_hist(st, runs[i], k, FP_ROLE_WEIGHT, 0, &rng);
                if (rc == FP_OK && a->lost_pct >= 0) {
                    char text[200];
                    snprintf(text, sizeof text,
                             "lost updates at step %lld: %.4g%% of the weights with a nonzero gradient did not change",
                             (long long)k, a->lost_pct);
                    rc = fp_store_event(st, runs[i], -1, k, -1, FP_EVENT_INFO, text);
                }
            }
            if (rc == FP_OK && k == g->steps) {
                fp_eval_rec_t ev = {.run = runs[i], .step = k, .split = "val", .loss = 1.0,
                                    .top1 = (double)a->correct / (double)gt_eval_images(g), .top5 = 0.95};
                rc = fp_store_eval(st, &ev);
            }
        }
    for (int i = 0; rc == FP_OK && i < g->narms; i++)
        if (status_of(g->arms[i].status) != FP_RUN_FINISHED)
            rc = fp_store_end_run(st, runs[i], status_of(g->arms[i].status),
                                  status_of(g->arms[i].status) == FP_RUN_FAILED ? "out of memory at step 120" : NULL);
    int rc2 = fp_store_close(st, FP_RUN_FINISHED, NULL);
    rc = rc != FP_OK ? rc : rc2;
    for (int i = 0; rc == FP_OK && i < g->narms; i++)
        if (g->arms[i].status && strcmp(g->arms[i].status, "running") == 0) {
            /* as a live writer leaves it: running, this process writing, a fresh heartbeat */
            char host[64] = "", sql[400];
            gethostname(host, sizeof host - 1);
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            snprintf(sql, sizeof sql,
                     "UPDATE runs SET status = 'running', end = NULL, writer_pid = %ld, writer_host = '%s', "
                     "heartbeat = %lld WHERE id = %lld",
                     (long)getpid(), host, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (long long)runs[i]);
            if (tu_sql(g->path, sql) != 0)
                rc = fp_fail(FP_EIO, "%s: cannot mark run %lld running", g->path, (long long)runs[i]);
        }
    return rc;
}
