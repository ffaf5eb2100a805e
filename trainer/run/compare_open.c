/* compare_open.c — opening and closing a comparison (compare.h): the choices and inputs checked, the arms
 * created from the same weights (one resumed from its checkpoint), the loader started, the session and one
 * run per arm recorded, each arm's probes attached and the GPU probes begun; what it holds (arms, session);
 * and everything freed again.
 * Promises: a bad choice or input, or no arm to train, is refused before anything is recorded (no session
 * without a step); an arm that alone fails to be created, or to get its probes, is recorded failed while the
 * others train. */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
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
                                       * (each run's own is in allreduce_error.wire); --sync-bn or not */
        snprintf(buf + len, size - len, ",\"ranks\":%d,\"global_batch\":%d,\"allreduce\":\"%s\",\"sync_bn\":%s",
                 c->ranks, c->cfg.base.batch * c->ranks, wire_name(c->acfg.allreduce),
                 c->acfg.sync_bn ? "true" : "false");
}

/* The k-th arm in reference-first order: the reference, then the others in list order. */
static int ref_first(const fp_compare *c, int k)
{
    return k == 0 ? c->ref : (k <= c->ref ? k - 1 : k);
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
        int i = ref_first(c, k);   /* reference first, then list order */
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
        fp_param_dev_free(a->pdev);   /* before the arm: its memory is the model's backend's */
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
    fp_cmp_ring_free(c);   /* after the arms: their streams no longer read it */
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

/* Opening refused before anything was recorded: the message (and whether it is a usage error) in res, c freed. */
static int refuse(fp_compare *c, fp_compare_result *res, int rc, int usage)
{
    res->usage_error = usage;
    snprintf(res->message, sizeof res->message, "%s", fp_error_message());
    fp_compare_close(c);
    return rc;
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
    if (cf->base.resume && (rc = fp_cmp_resume_choices(c)))   /* the checkpoint opens, its metadata sound */
        return refuse(c, res, rc, 0);
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
    if (rc)   /* a bad choice (usage), or data that do not open: no session, no run */
        return refuse(c, res, rc, usage);
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
    if (cf->base.resume && (rc = fp_cmp_resume_check(c, &usage)))   /* steps left, the same settings */
        return refuse(c, res, rc, usage);
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
    c->ring_pinned = c->acfg.backend == fp_backend_cuda();   /* the batches DMA'd from the ring (compare.c) */
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
        int i = ref_first(c, k);
        if (!c->arms[i].arm)
            continue;
        if ((rc = fp_cmp_attach_probes(c, i)))   /* out of memory: the arm cannot be measured, so it fails */
            fp_cmp_arm_failf(c, res, i, "probes: %s", fp_error_message());
    }
    fp_cmp_gpu_probes_begin(c);
    *out = c;
    return FP_OK;
}
