/* compare.c — the training loop (compare.h), `train`'s one arm and a comparison's several alike: one loader
 * whose batches are kept for a turn and fed to every arm in turn, each step doing what its step plan says
 * (step_plan.h), evaluations on the same validation batches, one run per arm in one session. Promise:
 * recording goes through record.c, so a trained run's rows and a compared arm's are the same; failures stay
 * with their arm; a stop ends after the current step. */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "error.h"
#include "formats.h"
#include "trainer/analysis/analysis.h"
#include "probe/probe.h"
#include "store.h"
#include "trainer/run/compare_internal.h"
#include "trainer/run/config_json.h"
#include "trainer/run/environment.h"
#include "trainer/run/record.h"
#include "trainer/run/step_plan.h"
#include "trainer/backend.h"
#include "trainer/model.h"
#ifdef HAVE_CUDA
#include "gpu_detect.h"
#include "trainer/backend_cuda.h"
#endif

/* Steps of an arm left out of the progress line's speedup (warm-up: the first plans memory). */
enum { PROGRESS_WARMUP = 3 };

void fp_compare_config_default_train(fp_compare_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    fp_train_config_default(&cfg->base);
    cfg->base.db = FP_STORE_DEFAULT_PATH;
    cfg->command = "train";
    cfg->turn_seconds = 1.0;
    cfg->hist_every = cfg->error_every = cfg->trace_every = FP_AUTO;
    cfg->progress_interval_s = NAN;
}

void fp_compare_config_default(fp_compare_config *cfg)
{
    fp_compare_config_default_train(cfg);
    cfg->command = "compare";
    cfg->precision = "fp32,fp16";
    fp_train_config *b = &cfg->base;
    b->arm.model = "resnet50";
    b->arm.image_size = 64;
    b->batch = 16;
    b->steps = 80;
    b->lr_linear_scaling = 1;
    b->arm.lr.warmup_steps = FP_AUTO;
    b->eval_every = FP_AUTO;
    b->eval_batches = 8;
}

void fp_compare_config_default_gpu(fp_compare_config *cfg)
{
    fp_compare_config_default(cfg);
    cfg->base.arm.image_size = 224;
    cfg->base.batch = 256;
    cfg->base.steps = 500;
}

int fp_compare_parse_policies(const char *list, const fp_policy **pols, int max, int *n)
{
    *n = 0;
    if (!list || !*list)
        return fp_fail(FP_EINVAL, "empty precision list; valid policies: %s", fp_policy_names_joined());
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        char name[64];
        if (len == 0 || len >= sizeof name)
            return fp_fail(FP_EINVAL, "%s policy in the precision list '%s'; valid policies: %s",
                           len ? "too long a" : "an empty", list, fp_policy_names_joined());
        memcpy(name, p, len);
        name[len] = '\0';
        const fp_policy *pol = fp_policy_find(name);
        if (!pol)
            return fp_fail(FP_EINVAL, "unknown precision policy '%s' in '%s'; valid policies: %s", name, list,
                           fp_policy_names_joined());
        for (int i = 0; i < *n; i++)
            if (pols[i] == pol)
                return fp_fail(FP_EINVAL, "precision policy '%s' is listed twice in '%s' (each arm needs its own "
                               "policy)", name, list);
        if (*n >= max)
            return fp_fail(FP_EINVAL, "more than %d policies in '%s'", max, list);
        pols[(*n)++] = pol;
        if (!p[len])
            break;
        p += len + 1;
    }
    return FP_OK;
}

int fp_compare_arm_count(const fp_compare *c)
{
    return c->narms;
}

fp_arm *fp_compare_get_arm(fp_compare *c, int i)
{
    return i >= 0 && i < c->narms ? c->arms[i].arm : NULL;
}

int64_t fp_compare_session(const fp_compare *c)
{
    return c->session;
}

void fp_compare_request_stop(fp_compare *c)
{
    atomic_store(&c->stop, 1);
}

static int stop_requested(fp_compare *c)
{
    return atomic_load(&c->stop) || fp_store_signalled();
}

/* --allreduce as given when it is a format (the arms refuse anything else), else "default". */
static const char *wire_name(const char *s)
{
    return s && (!strcmp(s, "fp32") || !strcmp(s, "fp16") || !strcmp(s, "bf16")) ? s : "default";
}

/* "fp32","fp16" as a JSON array plus the comparison's own settings, for the configuration JSON. */
static void extra_json(char *buf, size_t size, const fp_compare *c)
{
    size_t len = (size_t)snprintf(buf, size, "\"arms\":[");
    for (int i = 0; i < c->narms && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s\"%s\"", i ? "," : "", c->arms[i].policy);
    if (len < size)
        snprintf(buf + len, size - len, "],\"turn\":%d,\"turn_seconds\":%.6g,\"hist_every\":%d,\"error_every\":%d,"
                 "\"trace_every\":%d", c->cfg.turn, c->cfg.turn_seconds, c->cfg.hist_every, c->cfg.error_every,
                 c->cfg.trace_every);
    len = strlen(buf);
    if (c->ranks > 1 && len < size)   /* data parallel: batch_size stays per rank; the all-reduce's format as asked
                                       * (each run's own is in allreduce_error.wire) */
        snprintf(buf + len, size - len, ",\"ranks\":%d,\"global_batch\":%d,\"allreduce\":\"%s\"", c->ranks,
                 c->cfg.base.batch * c->ranks, wire_name(c->acfg.allreduce));
}

void fp_cmp_arm_fail(fp_compare *c, fp_compare_result *res, int i, const char *msg)
{
    arm_state *a = &c->arms[i];
    fp_compare_arm_result *ar = &res->arms[i];
    fp_cmp_flush_steps(c, a);   /* the turn's earlier steps keep their rows (a store error shows in its status) */
    a->active = 0;
    ar->status = FP_RUN_FAILED;
    snprintf(ar->message, sizeof ar->message, "%s", msg);
    res->nfailed++;
    if (c->ranks > 1 && !c->dist_failed) {   /* the other ranks wait on this one: the whole job stops */
        c->dist_failed = 1;
        snprintf(c->dist_message, sizeof c->dist_message, "rank %d, arm %s: %s", c->rank, a->policy, msg);
    }
    if (c->store && a->run > 0)
        fp_store_end_run(c->store, a->run, FP_RUN_FAILED, ar->message);
    if (c->cfg.progress) {
        fp_compare_progress p = {.arm = i, .policy = a->policy, .step = ar->steps_done, .steps = c->cfg.base.steps,
                                 .loss = ar->last_loss, .speedup = NAN, .val_loss = NAN, .val_top1 = NAN,
                                 .val_top5 = NAN, .failed = 1, .message = ar->message};
        c->cfg.progress(&p, c->cfg.progress_user);
    }
}

/* Records the session and one run per arm, the reference first so the others can name it; an arm that failed
 * to be created is recorded failed with its message. */
static int begin_store(fp_compare *c, fp_compare_result *res)
{
    const fp_compare_config *cf = &c->cfg;
    int rc = fp_store_open(&c->store, cf->base.db);
    if (rc)
        return rc;
    char sname[256];
    const char *extra = c->extra;
    fp_arm_config sa = c->acfg;
    sa.policy = cf->precision;
    char *sjson = fp_config_json(&cf->base, &sa, c->data, c->device, cf->command, extra);
    char *optjson = fp_config_optimizer_json(&c->acfg);
    if (!sjson || !optjson) {
        free(sjson);
        free(optjson);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    size_t len = (size_t)snprintf(sname, sizeof sname, "%s", c->acfg.model);
    for (int i = 0; i < c->narms && len < sizeof sname; i++)
        len += (size_t)snprintf(sname + len, sizeof sname - len, "%s%s", i ? " vs " : " ", c->arms[i].policy);
    fp_session_info_t si = {cf->base.session_name ? cf->base.session_name : sname, sjson};
    rc = fp_store_begin_session(c->store, &si, &c->session);
    res->session_id = c->session;
    for (int k = 0; k < c->narms && rc == FP_OK; k++) {
        int i = k == 0 ? c->ref : (k <= c->ref ? k - 1 : k);   /* reference first, then list order */
        arm_state *a = &c->arms[i];
        fp_arm_config ac = c->acfg;
        ac.policy = a->policy;
        char *rjson = fp_config_json(&cf->base, &ac, c->data, c->device, cf->command, extra);
        if (!rjson) {
            rc = fp_fail(FP_ENOMEM, "out of memory");
            break;
        }
        fp_run_info_t ri = {.session = c->session, .arm = a->policy, .model = ac.model, .policy = a->policy,
                            .ref_run = i == c->ref ? 0 : c->arms[c->ref].run, .device = c->device,
                            .blas = fp_env_blas_name(), .batch_size = cf->base.batch, .image_size = ac.image_size,
                            .dataset = c->data, .seed = (int64_t)ac.seed, .optimizer = fp_optim_name(ac.optim.kind),
                            .optimizer_config = optjson, .config_json = rjson};
        rc = fp_store_begin_run(c->store, &ri, &a->run);
        res->arms[i].run_id = a->run;
        free(rjson);
    }
    free(sjson);
    free(optjson);
    for (int i = 0; i < c->narms && rc == FP_OK; i++) {
        if (c->arms[i].arm)
            rc = fp_record_layers(c->store, c->arms[i].run, fp_arm_model(c->arms[i].arm), cf->base.batch);
        else if (res->arms[i].status == FP_RUN_FAILED)
            rc = fp_store_end_run(c->store, c->arms[i].run, FP_RUN_FAILED, res->arms[i].message);
    }
    if (rc == FP_OK && cf->base.resume && c->arms[0].arm)
        fp_record_event(c->store, c->arms[0].run, fp_arm_iteration(c->arms[0].arm), -1, FP_EVENT_INFO,
                        "resumed from %s at step %" PRId64 " (data epoch %" PRId64 ", batch %" PRId64 ")",
                        cf->base.resume, fp_arm_iteration(c->arms[0].arm), c->start_epoch, c->start_batch);
    return rc;
}

void fp_compare_close(fp_compare *c)
{
    if (!c)
        return;
    fp_cmp_gpu_probes_end(c);   /* the sampler and the tracer stop writing before the store closes */
    if (c->store)
        fp_store_close(c->store, FP_RUN_INTERRUPTED, "the comparison was closed before it ended");
    fp_loader_stop(c->ld);
    for (int i = 0; i < c->narms; i++) {
        arm_state *a = &c->arms[i];
        if (a->arm)
            fp_model_set_probe(fp_arm_model(a->arm), NULL);
        fp_probe_free(a->probe);
        fp_cpu_timer_free(a->timer);
        fp_rapl_close(a->rapl);
        fp_perf_close(a->perf);
        fp_hist_probe_free(a->hist);
        fp_prec_err_free(a->perr);
        free(a->old_params);
        free(a->scratch);
        free(a->per_layer);
        free(a->reduce_layers);
        free(a->rank_ns);
        fp_nvtx_free(a->nvtx);
        for (size_t k = 0; k < a->cap_pend; k++)
            free(a->pend[k].times);
        free(a->pend);
        fp_arm_free(a->arm);
    }
    fp_checkpoint_close(c->ck);   /* after the arms: a resumed run's model and policy may be its strings */
    fp_cupti_close(c->cupti);   /* after the arms: their probes name it */
    fp_nvml_close(c->nvml);
    fp_dataset_close(c->ds);
    for (size_t i = 0; i < c->ring_cap; i++) {
        free(c->ring[i].images);
        free(c->ring[i].labels);
    }
    free(c->ring);
    free(c->ring_pos);
    free(c);
}

static void result_init(fp_compare_result *res)
{
    memset(res, 0, sizeof *res);
    res->status = FP_RUN_FAILED;
    for (int i = 0; i < FP_COMPARE_MAX_ARMS; i++) {
        fp_compare_arm_result *ar = &res->arms[i];
        ar->status = FP_RUN_RUNNING;
        ar->last_loss = NAN;
        ar->mean_step_ms = ar->val_loss = ar->val_top1 = ar->val_top5 = NAN;
        ar->comm_ms = ar->exposed_ms = ar->comm_bytes = ar->comm_share = ar->reduce_rel_l2 = NAN;
    }
}

int fp_compare_open(fp_compare **out, const fp_compare_config *cfg, fp_compare_result *res)
{
    *out = NULL;
    result_init(res);
    fp_compare *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(res->message, sizeof res->message, "out of memory");
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    c->cfg = *cfg;
    fp_compare_config *cf = &c->cfg;
    if (!cf->command)
        cf->command = "compare";
    c->dist = cf->base.arm.dist;
    c->rank = fp_dist_rank(c->dist);
    c->ranks = res->ranks = fp_dist_size(c->dist);
    if (c->rank != 0) {   /* rank 0 records, prints and writes files; the others train their shards */
        cf->base.db = NULL;
        cf->base.save = cf->base.checkpoint = NULL;
        cf->progress = NULL;
    }
    c->session = 0;
    c->data = cf->base.data && *cf->base.data ? cf->base.data : "synthetic";
    if (cf->base.device)
        snprintf(c->device, sizeof c->device, "%s", cf->base.device);
    else
        fp_env_cpu_name(c->device, sizeof c->device);
    if (cf->turn_seconds <= 0)
        cf->turn_seconds = 1.0;
    if (isnan(cf->progress_interval_s))
        cf->progress_interval_s = cf->base.steps <= 20 ? 0 : 5.0;
    const int train = strcmp(cf->command, "train") == 0;

    /* ---- 1. choices and inputs: nothing is recorded when one is bad ---- */
    int rc = FP_OK;
    if (cf->base.resume && (rc = fp_cmp_resume_choices(c))) {   /* the checkpoint opens, its metadata sound */
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());
        fp_compare_close(c);
        return rc;
    }
    if (train && !cf->precision)
        rc = fp_fail(FP_EINVAL, "no precision policy given (--precision); valid policies: %s",
                     fp_policy_names_joined());
    if (rc == FP_OK)   /* the one parse of the policy list: the arms hold the policies themselves */
        rc = fp_compare_parse_policies(cf->precision, c->pols, FP_COMPARE_MAX_ARMS, &c->narms);
    if (rc == FP_OK && train && c->narms != 1)
        rc = fp_fail(FP_EINVAL, "train takes one precision policy, '%s' names %d (fp16probe compare trains "
                     "several side by side)", cf->precision, c->narms);
    if (rc == FP_OK && c->narms > 1 && (cf->base.save || cf->base.checkpoint || cf->base.resume))
        rc = fp_fail(FP_EINVAL, "--save, --checkpoint and --resume take one precision policy ('%s' names %d)",
                     cf->precision, c->narms);
    fp_train_config_resolve(&cf->base);   /* the automatic lr, warmup and schedule span */
    c->acfg = cf->base.arm;
    if (rc == FP_OK)
        rc = fp_train_check_choices(&cf->base);
    if (rc == FP_OK && cf->turn < 0)
        rc = fp_fail(FP_EINVAL, "--turn must be >= 1 (0: automatic)");
    int usage = rc != FP_OK;
    if (rc == FP_OK)   /* where the run will write, before anything is trained or recorded */
        rc = fp_train_check_outputs(&cf->base, &usage);
    if (rc == FP_OK)
        rc = fp_train_open_data(&cf->base, &c->acfg, &c->ds, &usage);
    if (rc) {   /* a bad choice (usage), or data that do not open: no session, no run */
        res->usage_error = usage;
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());
        fp_compare_close(c);
        return rc;
    }
    c->data = fp_dataset_spec(c->ds);
    {   /* the periods as the step plan resolves them (the configuration JSON records these) */
        fp_step_periods p = fp_step_periods_for(cf, cf->base.steps);
        cf->hist_every = p.hist;
        cf->error_every = p.error;
        cf->trace_every = p.trace;
        cf->base.eval_every = p.eval;
    }
    res->narms = c->narms;
    c->fp32 = fp_policy_find("fp32");
    c->ref = 0;
    for (int i = c->narms - 1; i >= 0; i--)
        if (c->pols[i] == c->fp32)
            c->ref = i;
    res->ref = c->ref;
    for (int i = 0; i < c->narms; i++) {
        c->arms[i].pol = c->pols[i];
        c->arms[i].policy = c->pols[i]->name;
        c->arms[i].last_report = -1;
        snprintf(res->arms[i].policy, sizeof res->arms[i].policy, "%s", c->pols[i]->name);
    }
    if (cf->base.resume && (rc = fp_cmp_resume_check(c, &usage))) {   /* steps left, the same settings */
        res->usage_error = usage;
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());
        fp_compare_close(c);
        return rc;
    }
    extra_json(c->extra, sizeof c->extra, c);

    /* ---- 2. arms (same seed / weights) and the loader; failures are recorded ---- */
    int setup_rc = rc, created = 0;
#ifdef HAVE_CUDA
    if (rc == FP_OK && c->acfg.backend == fp_backend_cuda()) {
        /* the GPU probes: CUPTI before any context exists (its device buffers are set at open) and so
         * before warm-up; NVML for the device the runtime uses by default (device 0). Unavailable ones
         * are recorded as such once the runs exist; out of memory fails the setup. */
        if (c->cfg.trace_every > 0)   /* CUPTI traces the plan's trace steps: the same period */
            rc = fp_cupti_open(&c->cupti, NULL, 0, c->cfg.trace_every);
        if (rc == FP_OK) {   /* NVML on the GPU the CUDA runtime uses (device 0), found by its PCI bus id */
            fp_gpu_info_t gi;
            fp_gpu_detect(&gi);
            rc = fp_nvml_open_bus(&c->nvml, NULL, gi.pci_bus_id, 0);
        }
        setup_rc = rc;
    }
    if (c->acfg.backend == fp_backend_cuda() && !c->acfg.arena_bytes)   /* the GPU shared out evenly */
        c->acfg.arena_bytes = fp_backend_cuda_arena_share(c->narms);
#endif
    if (rc == FP_OK) {
        for (int i = 0; i < c->narms; i++) {
            fp_arm_config ac = c->acfg;
            ac.policy = c->pols[i]->name;
            int arc = fp_arm_create(&c->arms[i].arm, &ac);
            if (arc == FP_OK) {
                c->arms[i].active = 1;
                created++;
                continue;
            }
            res->arms[i].status = FP_RUN_FAILED;
            snprintf(res->arms[i].message, sizeof res->arms[i].message, "%s", fp_error_message());
            res->nfailed++;
            setup_rc = arc;
        }
        if (created > 0 && cf->base.resume)   /* the one arm continues from its checkpoint */
            setup_rc = fp_cmp_resume(c);
        else if (created > 0)
            setup_rc = FP_OK;
        if (created > 0 && setup_rc == FP_OK) {
            fp_loader_opts lo;
            fp_loader_opts_default(&lo);
            lo.split = FP_SPLIT_TRAIN;
            lo.batch = cf->base.batch * c->ranks;   /* the global batch; each rank keeps its shard */
            lo.threads = cf->base.loader_threads;
            lo.start_epoch = c->start_epoch;
            lo.start_batch = c->start_batch;
            setup_rc = fp_loader_start(&c->ld, c->ds, &lo);
        }
        for (int i = 0; i < c->narms; i++) {
            arm_state *a = &c->arms[i];
            if (a->arm)
                res->arms[i].steps_done = fp_arm_iteration(a->arm);
            a->data_epoch = c->start_epoch;
            a->data_batch = c->start_batch;
        }
    }
    if (setup_rc) {   /* no arm to train (its weights, the checkpoint's tensors, memory, the loader): nothing
                       * is recorded, no session without a step (issue 19) */
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());
        for (int i = 0; i < c->narms; i++)
            if (res->arms[i].status != FP_RUN_FAILED) {
                res->arms[i].status = FP_RUN_FAILED;
                snprintf(res->arms[i].message, sizeof res->arms[i].message, "%s", res->message);
            }
        fp_compare_close(c);
        return fp_fail(setup_rc, "%s", res->message);
    }

    /* ---- 3. the session and its runs (an arm that alone failed to be created, as failed) ---- */
    if (cf->base.db) {
        int src = begin_store(c, res);
        if (src) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            fp_store_close(c->store, FP_RUN_FAILED, res->message);
            c->store = NULL;
            fp_compare_close(c);
            return fp_fail(src, "%s", res->message);
        }
    }
    c->batch_floats = (size_t)cf->base.batch * (size_t)c->acfg.image_size * (size_t)c->acfg.image_size * 3;
    for (int k = 0; k < c->narms; k++) {   /* the reference first: the others' precision error rides on its probes */
        int i = k == 0 ? c->ref : k <= c->ref ? k - 1 : k;
        if (!c->arms[i].arm)
            continue;
        if ((rc = fp_cmp_attach_probes(c, i))) {   /* out of memory: the arm cannot be measured, so it fails */
            char msg[512];
            snprintf(msg, sizeof msg, "probes: %s", fp_error_message());
            fp_cmp_arm_fail(c, res, i, msg);
        }
    }
    fp_cmp_gpu_probes_begin(c);
    *out = c;
    return FP_OK;
}

/* Room for n batches in the turn's ring. */
static int ring_reserve(fp_compare *c, size_t n)
{
    if (n <= c->ring_cap)
        return FP_OK;
    fp_batch *r = realloc(c->ring, n * sizeof *r);
    if (!r)
        return fp_fail(FP_ENOMEM, "out of memory for the turn's batches");
    c->ring = r;
    int64_t *pos = realloc(c->ring_pos, 2 * n * sizeof *pos);
    if (!pos)
        return fp_fail(FP_ENOMEM, "out of memory for the turn's batches");
    c->ring_pos = pos;
    for (; c->ring_cap < n; c->ring_cap++) {
        fp_batch *b = &c->ring[c->ring_cap];
        memset(b, 0, sizeof *b);
        b->images = malloc(c->batch_floats * sizeof *b->images);
        b->labels = malloc((size_t)c->cfg.base.batch * sizeof *b->labels);
        if (!b->images || !b->labels) {
            free(b->images);
            free(b->labels);
            return fp_fail(FP_ENOMEM, "out of memory for the turn's batches");
        }
    }
    return FP_OK;
}

/* The next training batch of the loader, copied into dst; pos[0..1] the loader's position after it (where a
 * checkpoint taken after this batch resumes). */
static int next_batch(fp_compare *c, fp_batch *dst, int64_t *pos)
{
    fp_batch b;
    int rc;
    while ((rc = fp_loader_next(c->ld, &b)) == FP_DATA_END_OF_EPOCH)
        ;
    if (rc < 0)
        return rc;
    float *im = dst->images;
    int32_t *lb = dst->labels;
    int n = b.n / c->ranks;   /* data parallel: rank r's shard r of the global batch */
    size_t px = (size_t)b.size * (size_t)b.size * 3, off = (size_t)c->rank * (size_t)n;
    memcpy(im, b.images + off * px, (size_t)n * px * sizeof *im);
    memcpy(lb, b.labels + off, (size_t)n * sizeof *lb);
    *dst = b;
    dst->n = n;
    dst->images = im;
    dst->labels = lb;
    fp_loader_position(c->ld, &pos[0], &pos[1]);
    return FP_OK;
}

/* Steps per turn: fixed, or about turn_seconds of the slowest arm's last step (the first turn, one step,
 * is the warm-up; the second is sized from it, later ones from the last timed step). */
static int turn_steps(const fp_compare *c, int first)
{
    if (c->cfg.turn > 0)
        return c->cfg.turn;
    if (first)
        return 1;
    int64_t slow = 0;
    int all_gpu = 1;
    for (int i = 0; i < c->narms; i++) {
        if (c->arms[i].active && c->arms[i].last_ns > slow)
            slow = c->arms[i].last_ns;
        if (c->arms[i].active && !c->arms[i].gpu)
            all_gpu = 0;
    }
    if (slow <= 0)
        return 1;
    double k = c->cfg.turn_seconds * 1e9 / (double)slow;
    /* the ring holds a turn: at most 1 GiB of batches */
    double kmem = (double)(INT64_C(1) << 30) / ((double)c->batch_floats * sizeof(float));
    if (k > kmem)
        k = kmem;
    double kmax = all_gpu ? FP_COMPARE_AUTO_TURN_MAX_GPU : FP_COMPARE_AUTO_TURN_MAX;
    if (k > kmax)
        k = kmax;
    return k < 1 ? 1 : (int)llround(k);
}

static double speedup_so_far(const fp_compare *c, int i)
{
    const arm_state *a = &c->arms[i], *r = &c->arms[c->ref];
    if (a->timed_steps == 0 || r->timed_steps == 0)
        return NAN;
    return (r->timed_ns / (double)r->timed_steps) / (a->timed_ns / (double)a->timed_steps);
}

static double eta_s(const fp_compare *c, double elapsed)
{
    int64_t done = 0, left = 0;
    for (int i = 0; i < c->narms; i++) {
        if (!c->arms[i].arm)
            continue;
        int64_t t = fp_arm_iteration(c->arms[i].arm);
        done += c->arms[i].steps_here;
        if (c->arms[i].active && t < c->cfg.base.steps)
            left += c->cfg.base.steps - t;
    }
    return done ? elapsed / (double)done * (double)left : NAN;
}

static int evaluate(fp_compare *c, fp_compare_result *res, int i, int64_t step, double t0)
{
    arm_state *a = &c->arms[i];
    fp_compare_arm_result *ar = &res->arms[i];
    int rc = fp_cmp_flush_steps(c, a);   /* a GPU arm's steps so far get their energy; the evaluation's is left out */
    if (rc)
        return rc;
    rc = fp_record_eval(c->store, a->run, a->arm, c->ds, &c->cfg.base, step, &ar->val_loss, &ar->val_top1,
                                  &ar->val_top5);
    if (rc)
        return rc;
    if (fp_cmp_defers_steps(c, a))
        a->turn_e0 = fp_cmp_synced_energy_j(c, a);
    if (c->cfg.progress) {
        fp_compare_progress p = {.arm = i, .policy = a->policy, .step = step, .steps = c->cfg.base.steps,
                                 .loss = ar->last_loss, .speedup = speedup_so_far(c, i), .elapsed_s = fp_clock_mono_s() - t0,
                                 .eta_s = NAN, .skipped = ar->skipped, .is_eval = 1, .val_loss = ar->val_loss,
                                 .val_top1 = ar->val_top1, .val_top5 = ar->val_top5};
        c->cfg.progress(&p, c->cfg.progress_user);
    }
    return FP_OK;
}

/* The plan's evaluations need a validation split. */
static int has_val(const fp_compare *c)
{
    return fp_dataset_size(c->ds, FP_SPLIT_VAL) > 0;
}

/* Data parallel: the next step of arm a also measures its 16-bit all-reduce against fp32 (per layer). */
static int reduce_check_next(arm_state *a)
{
    if (!a->reduce_layers) {
        int nl = fp_model_layer_count(fp_arm_model(a->arm));
        if (!(a->reduce_layers = calloc(nl > 0 ? (size_t)nl : 1, sizeof *a->reduce_layers)))
            return fp_fail(FP_ENOMEM, "out of memory");
    }
    fp_arm_check_reduce_next(a->arm, a->reduce_layers);
    return FP_OK;
}

enum { DIST_FIGS = 5 };   /* per rank and step: total, all-reduce, exposed (ns), bytes, skipped */

/* Data parallel, after arm i's step on every rank: the ranks' step figures gathered to rank 0, which keeps the
 * slowest rank's (the step waits for it) and records every rank's. */
static int dist_step_figures(fp_compare *c, fp_compare_result *res, int i, const fp_arm_step_result *r)
{
    double mine[DIST_FIGS] = {(double)r->total_ns, (double)r->comm_ns, (double)r->comm_exposed_ns,
                              (double)r->comm_bytes, r->skipped}, *all = NULL;
    if (c->rank == 0 && !(all = calloc((size_t)c->ranks * DIST_FIGS, sizeof *all)))
        return fp_fail(FP_ENOMEM, "out of memory");
    int rc = fp_dist_gather_f64(c->dist, mine, DIST_FIGS, all);
    if (rc || c->rank != 0) {
        free(all);
        return rc;
    }
    arm_state *a = &c->arms[i];
    double tot = 0, comm = 0, exp = 0;
    for (int k = 0; k < c->ranks; k++) {
        const double *f = all + (size_t)k * DIST_FIGS;
        tot = f[0] > tot ? f[0] : tot;
        comm = f[1] > comm ? f[1] : comm;
        exp = f[2] > exp ? f[2] : exp;
        if (f[4] != r->skipped)   /* found-inf is reduced: a rank that disagrees is a bug, not a figure */
            rc = fp_fail(FP_EINTERNAL, "rank %d %s step %" PRId64 " that rank 0 %s", k, f[4] ? "skipped" : "took",
                         r->iteration + 1, r->skipped ? "skipped" : "took");
    }
    a->comm_ns += comm;
    a->exposed_ns += exp;
    a->compute_ns += tot;
    a->bytes += mine[3];
    if (!a->rank_ns && !(a->rank_ns = calloc((size_t)c->ranks, sizeof *a->rank_ns)))
        rc = fp_fail(FP_ENOMEM, "out of memory");
    for (int k = 0; a->rank_ns && k < c->ranks; k++)
        a->rank_ns[k] += all[(size_t)k * DIST_FIGS];
    /* every rank's row (dist_steps) and, at a checked step, the all-reduce's rounding (allreduce_error); a store
     * that failed says so in its status, polled after the step */
    if (c->store && a->run > 0) {
        fp_record_rank_step one[8], *rows = c->ranks <= 8 ? one : malloc((size_t)c->ranks * sizeof *rows);
        for (int k = 0; rows && k < c->ranks; k++) {
            const double *f = all + (size_t)k * DIST_FIGS;
            rows[k] = (fp_record_rank_step){.wall_ns = (int64_t)f[0], .comm_ns = (int64_t)f[1],
                                            .exposed_ns = (int64_t)f[2], .bytes = (int64_t)f[3], .skipped = f[4] != 0};
        }
        if (rows)
            fp_record_dist_step(c->store, a->run, r->iteration + 1, rows, c->ranks);
        if (rows != one)
            free(rows);
        fp_record_allreduce_error(c->store, a->run, a->arm, r, a->reduce_layers);
    }
    if (!isnan(r->reduce_rel_l2)) {
        res->arms[i].reduce_rel_l2 = r->reduce_rel_l2;
        a->reduce_step = r->iteration + 1;
        a->reduce_over = r->reduce_overflow;
        a->reduce_under = r->reduce_underflow;
    }
    free(all);
    return rc;
}

/* Data parallel, rank 0, at the end of arm i: one event with the ranks, the global batch, the all-reduce's
 * format, time, exposed share and bytes, each rank's mean step (the straggler) and the last measured 16-bit
 * rounding. */
static void dist_summary_event(fp_compare *c, const fp_compare_result *res, int i)
{
    arm_state *a = &c->arms[i];
    const fp_compare_arm_result *ar = &res->arms[i];
    if (c->ranks < 2 || c->rank != 0 || !c->store || !a->arm || a->steps_here == 0)
        return;
    char text[900];
    size_t len = (size_t)snprintf(text, sizeof text, "data parallel: %d ranks, global batch %d, all-reduce %s "
                                  "%.3f ms/step (exposed %.3f ms, %.1f%% of the step), %.0f bytes/step per rank; "
                                  "mean step per rank:", c->ranks, c->cfg.base.batch * c->ranks,
                                  fp_dtype_name(fp_arm_allreduce_dtype(a->arm)), ar->comm_ms, ar->exposed_ms,
                                  100 * ar->comm_share, ar->comm_bytes);
    for (int k = 0; a->rank_ns && k < c->ranks && len < sizeof text; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, " r%d %.3f ms", k,
                                a->rank_ns[k] / 1e6 / (double)a->steps_here);
    if (a->reduce_step > 0 && len < sizeof text)
        snprintf(text + len, sizeof text - len, "; all-reduce rounding vs fp32 at step %" PRId64 ": rel. L2 %.3g, "
                 "%" PRId64 " overflowed, %" PRId64 " flushed to zero", a->reduce_step, ar->reduce_rel_l2,
                 a->reduce_over, a->reduce_under);
    fp_store_event(c->store, a->run, 0, ar->steps_done, -1, FP_EVENT_INFO, text);
}

/* One step of arm i on the turn's batch j, recorded, with what its step plan says; the arm is marked failed
 * when it cannot go on. Returns an error only when the store failed (the whole comparison stops). */
static int arm_step(fp_compare *c, fp_compare_result *res, int i, int j, double t0)
{
    const fp_batch *b = &c->ring[j];
    arm_state *a = &c->arms[i];
    fp_compare_arm_result *ar = &res->arms[i];
    fp_arm_step_result r;
    fp_model *m = fp_arm_model(a->arm);
    int64_t step_no = fp_arm_iteration(a->arm) + 1;
    const fp_step_plan plan = fp_step_plan_for(&c->cfg, step_no, c->cfg.base.steps);   /* what this step does */
    int rc;
    /* probe work riding inside the step (the rounding error's ride, the parameter pass): its time is left out of
     * the step's (arm.h), which this thread's CPU clock cannot do, so such a step's host CPU is not recorded */
    int rides = 0;
    if (c->ride && i == c->ref && plan.error) {
        fp_cmp_ride_arm(c, res, step_no, b->n);
        for (int k = 0; k < c->narms; k++)
            rides |= c->arms[k].perr_armed;
    }
    if (a->perr && !c->ride && c->arms[c->ref].active && plan.error &&   /* untimed */
        (rc = fp_prec_err_compare(a->perr, fp_arm_model(c->arms[c->ref].arm), b->images, b->n, step_no))) {
        char msg[512];
        snprintf(msg, sizeof msg, "precision error at step %" PRId64 ": %s", step_no, fp_error_message());
        fp_cmp_arm_fail(c, res, i, msg);
        return FP_OK;
    }
    const fp_grad_scaler *sc = fp_arm_scaler(a->arm);
    const int sampled = a->hist && plan.hist;
    if (a->hist)
        fp_hist_probe_sample_next(a->hist, sampled);
    fp_probe_step_begin(a->probe, step_no, sc->mode == FP_SCALE_NONE ? 1.0f : sc->scale);
    /* the parameters before the step, unless the pass rides on it (host mirror: a device model downloads) */
    const float *p0 = sampled && !a->steppable ? fp_model_params(m) : NULL;
    rc = sampled && !a->steppable && !p0 ? FP_EINTERNAL : FP_OK;
    if (p0)
        fp_probe_copy_params(a->old_params, p0, fp_model_num_params(m));
    if (!rc && sampled && a->steppable) {
        rc = fp_arm_set_update_hook(a->arm, fp_cmp_params_while_stepping, a);
        rides = 1;
    }
    if (!rc && c->ranks > 1 && plan.error)   /* the 16-bit all-reduce against fp32, at the error steps */
        rc = reduce_check_next(a);
    if (plan.hist || plan.error || plan.trace || plan.eval || plan.checkpoint)   /* --cuda-graph: not replayed */
        fp_arm_eager_next(a->arm);
    /* host CPU: this thread's CPU time over the step (issue 22; docs/schema.md says what it holds) */
    int64_t w0 = fp_clock_wall_ns(), cpu0 = rides ? -1 : fp_clock_thread_cpu_ns();
    rc = rc ? rc : fp_arm_step(a->arm, b, &r);
    int64_t cpu1 = fp_clock_thread_cpu_ns(), w1 = fp_clock_wall_ns();
    if (c->ride && i == c->ref)
        fp_cmp_ride_failures(c, res);
    double lost_all = NAN;   /* the parameter roles and the lost updates, one pass */
    if (!rc && sampled && a->steppable && !r.skipped && !r.diverged) {   /* the hook ran (arm.h) */
        lost_all = a->lost_all;
    } else if (!rc && sampled) {   /* after the step; riding on it but it did not update: nothing moved */
        const float *g = fp_model_grads(m);
        if (!g || !fp_model_params(m))   /* a device model whose download failed: the message says why */
            rc = FP_EINTERNAL;
        else
            lost_all = fp_probe_sample_params(a->probe, m, a->steppable ? fp_model_params(m) : a->old_params, g,
                                              a->per_layer);
    }
    fp_probe_step_end(a->probe);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "step %" PRId64 ": %s", fp_arm_iteration(a->arm) + 1, fp_error_message());
        fp_cmp_arm_fail(c, res, i, msg);
        return FP_OK;
    }
    if (c->ranks > 1 && (rc = dist_step_figures(c, res, i, &r))) {   /* every rank's, gathered to rank 0 */
        char msg[512];
        snprintf(msg, sizeof msg, "step %" PRId64 ": %s", step_no, fp_error_message());
        fp_cmp_arm_fail(c, res, i, msg);
        return FP_OK;
    }
    ar->steps_done = step_no;
    ar->last_loss = r.loss;
    a->data_epoch = c->ring_pos[2 * j];   /* a checkpoint from here on resumes after this batch */
    a->data_batch = c->ring_pos[2 * j + 1];
    ar->skipped += r.skipped;
    a->steps_here++;
    a->step_ms_sum += r.total_ns / 1e6;
    a->last_ns = r.total_ns;
    a->images_since += r.n;
    a->ns_since += r.total_ns;
    if (a->steps_here > PROGRESS_WARMUP && !r.skipped) {
        a->timed_steps++;
        a->timed_ns += (double)r.total_ns;
    }
    char detail[400];
    fp_record_step_extra x = {NULL, 0, a->rapl ? fp_rapl_step_j(a->rapl) : NAN,
                             r.skipped ? fp_cmp_skip_detail(a, &r, detail, sizeof detail) : NULL, -1, -1,
                             cpu0 >= 0 && cpu1 > cpu0 ? cpu1 - cpu0 : -1};
    x.ntimes = fp_cpu_timer_rows(a->timer, &x.times);
    fp_perf_step(a->perf, &x.cycles, &x.instructions);
    /* a GPU arm's row waits for the turn's energy; without memory to keep it, it goes now, unmeasured */
    if (c->store && (!fp_cmp_defers_steps(c, a) || fp_cmp_defer_step(a, &r, w0, w1, &x) != FP_OK) &&
        (rc = fp_record_step(c->store, a->run, a->arm, &r, w0, w1, &x)))
        return rc;
    if (sampled && !r.skipped && !r.diverged)
        fp_cmp_lost_updates_event(c, a, step_no, lost_all);
    if (a->hist && (rc = fp_hist_probe_status(a->hist)))
        return rc;
    if (r.diverged) {
        fp_cmp_arm_fail(c, res, i, fp_record_diverged_message(a->arm, &r));
        return FP_OK;
    }
    double now = fp_clock_mono_s();
    const fp_compare_config *cf = &c->cfg;
    if (cf->progress && (cf->progress_interval_s <= 0 || a->last_report < 0 ||
                         now - a->last_report >= cf->progress_interval_s || step_no == cf->base.steps)) {
        fp_compare_progress p = {.arm = i, .policy = a->policy, .step = step_no, .steps = cf->base.steps,
                                 .loss = r.loss, .lr = r.lr, .scale = r.next_scale,
                                 .images_per_s = a->ns_since > 0 ? a->images_since / (a->ns_since * 1e-9) : NAN,
                                 .speedup = speedup_so_far(c, i), .elapsed_s = now - t0, .eta_s = eta_s(c, now - t0),
                                 .skipped = ar->skipped, .val_loss = NAN, .val_top1 = NAN, .val_top5 = NAN};
        fp_store_status_t ss;
        if (c->store && fp_store_status(c->store, &ss) == FP_OK && ss.state == FP_STORE_WAITING) {
            p.store_wait_s = ss.waiting_s > 0 ? ss.waiting_s : 1e-3;
            p.store_patience_s = ss.patience_s;
        }
        cf->progress(&p, cf->progress_user);
        a->last_report = now;
        a->images_since = 0;
        a->ns_since = 0;
    }
    /* the last step's evaluation waits for every arm's last step (fp_compare_run) */
    if (plan.eval && !plan.last && c->rank == 0 && has_val(c) && (rc = evaluate(c, res, i, step_no, t0))) {
        char msg[512];
        snprintf(msg, sizeof msg, "evaluation at step %" PRId64 ": %s", step_no, fp_error_message());
        fp_cmp_arm_fail(c, res, i, msg);
    }
    /* the last step's checkpoint is the run's end's (fp_compare_run), stopped or not */
    if (plan.checkpoint && !plan.last && a->active && c->rank == 0 && fp_cmp_checkpoint(c, i))
        fp_cmp_arm_fail(c, res, i, fp_error_message());
    return c->store ? fp_store_writer_status(c->store) : FP_OK;
}

/* At the run's end (or a stop): arm i's last checkpoint and its weights, when asked for; 1 when that failed
 * (the arm is then marked failed). */
static int keep_arm(fp_compare *c, fp_compare_result *res, int i)
{
    if (c->rank != 0)
        return 0;
    if (!fp_step_plan_for(&c->cfg, c->cfg.base.steps, c->cfg.base.steps).checkpoint && !c->cfg.base.save)
        return 0;
    int rc = fp_cmp_checkpoint(c, i);
    if (rc == FP_OK && c->cfg.base.save)
        rc = fp_model_save(fp_arm_model(c->arms[i].arm), c->cfg.base.save);
    if (rc)
        fp_cmp_arm_fail(c, res, i, fp_error_message());
    return rc != FP_OK;
}

int fp_compare_run(fp_compare *c, fp_compare_result *res)
{
    if (c->ran)
        return fp_fail(FP_EINVAL, "fp_compare_run called twice");
    c->ran = 1;
    const int64_t steps = c->cfg.base.steps;
    double t0 = fp_clock_mono_s();
    int rc = FP_OK, interrupted = 0, first = 1;
    int64_t t = c->start_iter;   /* steps every active arm has been offered (a resume starts further on) */
    /* rc != FP_OK: the store failed (every step polls it) and nothing more can be recorded, so the loop stops
     * now rather than train on unrecorded (the next turn's ring_reserve used to clear rc) */
    while (t < steps && !interrupted && rc == FP_OK && !c->dist_failed) {
        int any = 0;
        for (int i = 0; i < c->narms; i++)
            any |= c->arms[i].active;
        if (!any)
            break;
        if (stop_requested(c)) {
            interrupted = 1;
            break;
        }
        int k = turn_steps(c, first);
        first = 0;
        if ((int64_t)k > steps - t)
            k = (int)(steps - t);
        res->turn = k;
        if ((rc = ring_reserve(c, (size_t)k)))
            break;
        for (int j = 0; j < k && rc == FP_OK; j++)
            rc = next_batch(c, &c->ring[j], &c->ring_pos[2 * j]);
        if (rc) {   /* the data failed: every arm stops with its message */
            char msg[512];
            snprintf(msg, sizeof msg, "data: %s", fp_error_message());
            for (int i = 0; i < c->narms; i++)
                if (c->arms[i].active)
                    fp_cmp_arm_fail(c, res, i, msg);
            rc = FP_OK;
            break;
        }
        for (int i = 0; i < c->narms && !interrupted && rc == FP_OK && !c->dist_failed; i++) {
            if (!c->arms[i].active)
                continue;
            fp_cmp_turn_begin(c, i);
            for (int j = 0; j < k && c->arms[i].active && rc == FP_OK; j++) {
                if (stop_requested(c)) {
                    interrupted = 1;
                    break;
                }
                rc = arm_step(c, res, i, j, t0);
            }
            int frc = fp_cmp_flush_steps(c, &c->arms[i]);   /* the turn's end: its energy, after a sync */
            if (rc == FP_OK)
                rc = frc;
        }
        t += k;
    }
    fp_cmp_gpu_probes_end(c);
    if (!rc && c->ranks > 1 && interrupted && !c->dist_failed) {   /* a signal: mpirun stopping the job for a
                                                                 * rank that died fails it, a Ctrl-C does not */
        char m[256];
        if (fp_dist_dead_peer(c->dist, m, sizeof m) >= 0) {
            c->dist_failed = 1;
            snprintf(c->dist_message, sizeof c->dist_message, "%s", m);
        }
    }
    if (!rc && c->dist_failed) {   /* data parallel: one rank's failure is the job's */
        rc = fp_fail(FP_EIO, "%s", c->dist_message);
    }
    if (rc) {   /* the store failed: nothing more can be recorded */
        int64_t done = 0;
        for (int i = 0; i < c->narms; i++)
            done = res->arms[i].steps_done > done ? res->arms[i].steps_done : done;
        snprintf(res->message, sizeof res->message, "training stopped after step %" PRId64 ": %s", done,
                 fp_error_message());
        for (int i = 0; i < c->narms; i++)
            if (res->arms[i].status == FP_RUN_RUNNING) {
                res->arms[i].status = FP_RUN_FAILED;
                snprintf(res->arms[i].message, sizeof res->arms[i].message, "%s", res->message);
            }
    } else if (interrupted) {
        if (fp_store_signalled())
            snprintf(res->message, sizeof res->message, "interrupted by signal %d", fp_store_signalled());
        else
            snprintf(res->message, sizeof res->message, "stopped from the dashboard");
        for (int i = 0; i < c->narms; i++) {
            fp_compare_arm_result *ar = &res->arms[i];
            if (res->arms[i].status != FP_RUN_RUNNING)
                continue;
            if (c->arms[i].active && keep_arm(c, res, i))   /* its checkpoint and weights, as they stand */
                continue;
            ar->status = FP_RUN_INTERRUPTED;
            snprintf(ar->message, sizeof ar->message, "%.200s after step %" PRId64, res->message, ar->steps_done);
            if (c->store)
                fp_store_event(c->store, c->arms[i].run, 0, ar->steps_done, -1, FP_EVENT_INFO, ar->message);
        }
    } else {
        const fp_step_plan last = fp_step_plan_for(&c->cfg, steps, steps);   /* the final evaluation */
        for (int i = 0; i < c->narms && rc == FP_OK; i++) {
            arm_state *a = &c->arms[i];
            if (!a->active)
                continue;
            int64_t done = fp_arm_iteration(a->arm);
            if (last.eval && c->rank == 0 && has_val(c) && (rc = evaluate(c, res, i, done, t0))) {
                char msg[512];
                snprintf(msg, sizeof msg, "final evaluation: %s", fp_error_message());
                fp_cmp_arm_fail(c, res, i, msg);
                rc = c->store ? fp_store_writer_status(c->store) : FP_OK;
                continue;
            }
            if (keep_arm(c, res, i)) {
                rc = c->store ? fp_store_writer_status(c->store) : FP_OK;
                continue;
            }
            res->arms[i].status = FP_RUN_FINISHED;
            if (c->store)
                fp_store_end_run(c->store, a->run, FP_RUN_FINISHED, NULL);
        }
        if (rc)
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
    }
    for (int i = 0; i < c->narms; i++) {
        arm_state *a = &c->arms[i];
        fp_compare_arm_result *ar = &res->arms[i];
        ar->mean_step_ms = a->steps_here ? a->step_ms_sum / (double)a->steps_here : NAN;
        if (c->ranks > 1 && a->steps_here) {
            ar->comm_ms = a->comm_ns / 1e6 / (double)a->steps_here;
            ar->exposed_ms = a->exposed_ns / 1e6 / (double)a->steps_here;
            ar->comm_bytes = a->bytes / (double)a->steps_here;
            ar->comm_share = a->compute_ns > 0 ? a->exposed_ns / a->compute_ns : NAN;
            dist_summary_event(c, res, i);
        }
        char graph[300];   /* --cuda-graph: whether the arm's step ran as a CUDA graph, one event */
        if (c->store && c->rank == 0 && a->arm && fp_arm_cuda_graph_line(a->arm, graph, sizeof graph))
            fp_store_event(c->store, a->run, 0, ar->steps_done, -1, FP_EVENT_INFO, graph);
    }
    res->status = rc ? FP_RUN_FAILED : interrupted ? FP_RUN_INTERRUPTED
                                                   : res->nfailed == c->narms ? FP_RUN_FAILED : FP_RUN_FINISHED;
    if (!rc && res->status == FP_RUN_FAILED)
        snprintf(res->message, sizeof res->message, "every arm failed");
    if (c->store) {
        int crc = fp_store_close(c->store, res->status == FP_RUN_FAILED ? FP_RUN_FAILED : res->status,
                                 res->message[0] ? res->message : NULL);
        c->store = NULL;
        if (crc && !rc) {
            rc = crc;
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
        }
    }
    if (rc)
        return fp_fail(rc, "%s", res->message);
    if (res->status == FP_RUN_FAILED)
        return fp_fail(FP_EINVAL, "%s", res->message);
    return FP_OK;
}

int fp_compare_train(const fp_compare_config *cfg, fp_compare_result *res)
{
    fp_compare *c;
    int rc = fp_compare_open(&c, cfg, res);
    if (rc)
        return rc;
    rc = fp_compare_run(c, res);
    fp_compare_close(c);
    return rc;
}
