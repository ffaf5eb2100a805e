/* train.c — the loop of `fp16probe train`: dataset + loader, one arm, evaluations, checkpoints and the
 * store recording of the run (metadata, layers, steps, evaluations, events). Promise: bad choices are
 * refused before the store is touched; other setup failures leave one failed run with its message;
 * NaN loss without a scaler stops the run with an event; Ctrl-C ends after the current step. */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "store.h"
#include "trainer/run/checkpoint.h"
#include "trainer/cpu/gemm.h"
#include "trainer/run/train.h"

/* OpenBLAS's extension, resolved when the BLAS in use has it (weak: NULL otherwise). */
extern char *openblas_get_config(void) __attribute__((weak));

const char *fp_train_blas_name(void)
{
    if (openblas_get_config) {
        const char *s = openblas_get_config();
        if (s && *s)
            return s;
    }
    return "CBLAS";
}

int fp_train_set_threads(int threads)
{
    return fp_gemm_use_pool(threads);
}

const char *fp_train_cpu_name(char *buf, size_t size)
{
    snprintf(buf, size, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return buf;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        char *v = strchr(line, ':');
        if (!v)
            break;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\n")] = '\0';
        snprintf(buf, size, "cpu: %s", v);
        break;
    }
    fclose(f);
    return buf;
}

void fp_train_config_default(fp_train_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    fp_arm_config_default(&cfg->arm);
    cfg->arm.num_classes = 0;
    cfg->augment = 1;
    cfg->shuffle = 1;
    cfg->batch = 32;
    cfg->steps = 100;
    cfg->loader_threads = 2;
    cfg->eval_batches = 50;
    cfg->progress_interval_s = 5.0;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- a growing string for the JSON configuration ---- */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)n;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void sb_str(sbuf *b, const char *s)   /* a JSON string, or null */
{
    if (!s) {
        sb_printf(b, "null");
        return;
    }
    sb_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            sb_printf(b, "\\%c", *c);
        else if (*c < 0x20)
            sb_printf(b, "\\u%04x", *c);
        else
            sb_printf(b, "%c", *c);
    }
    sb_printf(b, "\"");
}

static void sb_num(sbuf *b, double v)
{
    if (isfinite(v)) {   /* the shortest of %.15g / %.17g that reads back exactly */
        char t[40];
        snprintf(t, sizeof t, "%.15g", v);
        if (strtod(t, NULL) != v)
            snprintf(t, sizeof t, "%.17g", v);
        sb_printf(b, "%s", t);
    }
    else
        sb_printf(b, "null");
}

static void optimizer_json(sbuf *b, const fp_arm_config *a)
{
    const fp_optim_config *o = &a->optim;
    sb_printf(b, "{\"lr\":");
    sb_num(b, a->lr.base_lr);
    if (o->kind == FP_OPTIM_SGD) {
        sb_printf(b, ",\"momentum\":");
        sb_num(b, o->momentum);
        sb_printf(b, ",\"dampening\":0,\"nesterov\":%s", o->nesterov ? "true" : "false");
    } else {
        sb_printf(b, ",\"betas\":[");
        sb_num(b, o->beta1);
        sb_printf(b, ",");
        sb_num(b, o->beta2);
        sb_printf(b, "],\"eps\":");
        sb_num(b, o->eps);
    }
    sb_printf(b, ",\"weight_decay\":");
    sb_num(b, o->weight_decay);
    sb_printf(b, ",\"schedule\":");
    sb_str(b, fp_lr_schedule_name(a->lr.kind));
    if (a->lr.kind == FP_LR_STEP) {
        sb_printf(b, ",\"step_size\":%" PRId64 ",\"gamma\":", a->lr.step_size);
        sb_num(b, a->lr.gamma);
    } else if (a->lr.kind == FP_LR_COSINE) {
        sb_printf(b, ",\"t_max\":%" PRId64 ",\"eta_min\":", a->lr.t_max);
        sb_num(b, a->lr.eta_min);
    }
    sb_printf(b, ",\"warmup_steps\":%" PRId64 ",\"warmup_start_factor\":", a->lr.warmup_steps);
    sb_num(b, a->lr.warmup_start_factor);
    sb_printf(b, "}");
}

static void config_json(sbuf *b, const fp_train_config *c, const fp_arm_config *a, const char *data, int classes,
                        const char *device, const char *optjson, const char *command, const char *extra)
{
    sb_printf(b, "{\"command\":");
    sb_str(b, command);
    sb_printf(b, ",\"model\":");
    sb_str(b, a->model);
    sb_printf(b, ",\"precision\":");
    sb_str(b, a->policy);
    sb_printf(b, ",\"data\":");
    sb_str(b, data);
    sb_printf(b, ",\"classes\":%d,\"image_size\":%d,\"base_width\":%d,\"batch\":%d,\"steps\":%" PRId64
                 ",\"seed\":%" PRIu64 ",\"augment\":%s,\"shuffle\":%s,\"optimizer\":",
              classes, a->image_size, a->base_width, c->batch, c->steps, a->seed, c->augment ? "true" : "false",
              c->shuffle ? "true" : "false");
    sb_str(b, fp_optim_name(a->optim.kind));
    sb_printf(b, ",\"optimizer_config\":%s,\"threads\":%d,\"loader_threads\":%d,\"device\":", optjson, a->threads,
              c->loader_threads);
    sb_str(b, device);
    sb_printf(b, ",\"eval_every\":%d,\"eval_batches\":%" PRId64 ",\"weights\":", c->eval_every, c->eval_batches);
    sb_str(b, a->weights);
    sb_printf(b, ",\"save\":");
    sb_str(b, c->save);
    sb_printf(b, ",\"checkpoint\":");
    sb_str(b, c->checkpoint);
    sb_printf(b, ",\"checkpoint_every\":%" PRId64 ",\"resume\":", c->checkpoint_every);
    sb_str(b, c->resume);
    if (a->init_scale > 0 || a->growth_interval > 0)
        sb_printf(b, ",\"init_scale\":%.9g,\"growth_interval\":%d", a->init_scale, a->growth_interval);
    if (extra && *extra)
        sb_printf(b, ",%s", extra);
    sb_printf(b, "}");
}

char *fp_train_optimizer_json(const fp_arm_config *a)
{
    sbuf b = {0};
    optimizer_json(&b, a);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

char *fp_train_config_json(const fp_train_config *c, const fp_arm_config *a, const char *data, const char *device,
                           const char *command, const char *extra)
{
    char *opt = fp_train_optimizer_json(a);
    if (!opt)
        return NULL;
    sbuf b = {0};
    config_json(&b, c, a, data, a->num_classes, device, opt, command, extra);
    free(opt);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* "16x64x56x56" (PyTorch's NCHW order) or "16x512" for a vector. */
static void shape_str(char *buf, size_t size, int batch, fp_dims d, fp_layer_type type)
{
    if (d.h == 1 && d.w == 1 && (type == FP_LAYER_LINEAR || type == FP_LAYER_AVGPOOL))
        snprintf(buf, size, "%dx%d", batch, d.c);
    else
        snprintf(buf, size, "%dx%dx%dx%d", batch, d.c, d.h, d.w);
}

int fp_train_record_layers(fp_store_t *s, int64_t run, fp_model *m, int batch)
{
    int rc = FP_OK;
    for (int i = 0; i < fp_model_layer_count(m) && !rc; i++) {
        const fp_layer_info *l = fp_model_layer(m, i);
        char in[64], out[64];
        shape_str(in, sizeof in, batch, l->in, l->type);
        shape_str(out, sizeof out, batch, l->out, l->type);
        fp_layer_info_t li = {.run = run, .index = l->index, .name = l->name, .type = fp_layer_type_name(l->type),
                              .input_shape = in, .output_shape = out, .params = (int64_t)l->params,
                              .fwd_flops = (int64_t)llround(l->fwd_flops * batch),
                              .bwd_flops = (int64_t)llround(l->bwd_flops * batch)};
        rc = fp_store_layer(s, &li);
    }
    return rc;
}

static int is_model_name(const char *name)
{
    for (const char *const *n = fp_model_names(); *n; n++)
        if (strcmp(*n, name) == 0)
            return 1;
    return 0;
}

int fp_train_check_choices(const fp_train_config *c, const fp_arm_config *a, int check_policy)
{
    if (!a->model)
        return fp_fail(FP_EINVAL, "no model given (--model); valid models: %s", fp_model_names_joined());
    if (!is_model_name(a->model))
        return fp_fail(FP_EINVAL, "unknown model '%s'; valid models: %s", a->model, fp_model_names_joined());
    if (check_policy && (!a->policy || !fp_policy_find(a->policy)))
        return fp_fail(FP_EINVAL, "unknown precision policy '%s'; valid policies: %s", a->policy ? a->policy : "",
                       fp_policy_names_joined());
    if (c->batch < 1 || c->steps < 0)
        return fp_fail(FP_EINVAL, "batch must be >= 1 and steps >= 0");
    int rc = fp_optim_config_check(&a->optim);
    if (rc == FP_OK)
        rc = fp_lr_schedule_check(&a->lr);
    return rc;
}

int fp_train_open_data(const fp_train_config *c, fp_arm_config *a, fp_dataset **ds, int *usage)
{
    *usage = 0;
    *ds = NULL;
    fp_data_opts dopts;
    fp_data_opts_default(&dopts);
    dopts.image_size = a->image_size;
    dopts.seed = a->seed;
    dopts.augment = c->augment;
    dopts.shuffle = c->shuffle;
    int rc = fp_dataset_open(ds, c->data && *c->data ? c->data : "synthetic", &dopts);
    if (rc) {
        *usage = rc == FP_EINVAL;
        return rc;
    }
    int dclasses = fp_dataset_num_classes(*ds);
    if (a->num_classes <= 0)
        a->num_classes = dclasses;
    else if (a->num_classes < dclasses)
        return fp_fail(FP_EINVAL, "--classes %d is fewer than the %d classes of %s", a->num_classes, dclasses,
                       fp_dataset_spec(*ds));
    return FP_OK;
}

/* The run's settings a resume must share with its checkpoint (key, value) — kept as text. */
enum { NEXTRA = 10 };
typedef struct {
    const char *kv[2 * NEXTRA];
    char val[NEXTRA][384];
} extras_t;

static void extras_fill(extras_t *e, const fp_train_config *c, const fp_arm_config *a, const char *data,
                        const char *optjson)
{
    static const char *const keys[NEXTRA] = {"data", "batch", "augment", "shuffle", "image_size", "num_classes",
                                             "seed", "base_width", "optimizer_config_run", "policy"};
    for (int i = 0; i < NEXTRA; i++)
        e->kv[2 * i] = keys[i];
    snprintf(e->val[0], sizeof e->val[0], "%s", data);
    snprintf(e->val[1], sizeof e->val[1], "%d", c->batch);
    snprintf(e->val[2], sizeof e->val[2], "%d", c->augment);
    snprintf(e->val[3], sizeof e->val[3], "%d", c->shuffle);
    snprintf(e->val[4], sizeof e->val[4], "%d", a->image_size);
    snprintf(e->val[5], sizeof e->val[5], "%d", a->num_classes);
    snprintf(e->val[6], sizeof e->val[6], "%" PRIu64, a->seed);
    snprintf(e->val[7], sizeof e->val[7], "%d", a->base_width);
    snprintf(e->val[8], sizeof e->val[8], "%s", optjson);
    snprintf(e->val[9], sizeof e->val[9], "%s", a->policy);
    for (int i = 0; i < NEXTRA; i++)
        e->kv[2 * i + 1] = e->val[i];
}

static int extras_check(const fp_checkpoint *ck, const char *path, const extras_t *e)
{
    static const char *const what[NEXTRA] = {"--data", "--batch", "--augment", "--shuffle", "--image-size",
                                             "--classes", "--seed", "base width", "optimizer settings", "--precision"};
    for (int i = 0; i < NEXTRA; i++) {
        const char *have = fp_checkpoint_meta(ck, e->kv[2 * i]);
        if (!have)
            return fp_fail(FP_EFORMAT, "%s: checkpoint metadata has no '%s'", path, e->kv[2 * i]);
        if (strcmp(have, e->val[i]) != 0)
            return fp_fail(FP_EINVAL, "%s: checkpoint was made with %s %s, this run has %s (resume with the same "
                           "settings)", path, what[i], have, e->val[i]);
    }
    return FP_OK;
}

typedef struct {
    fp_store_t *store;
    int64_t run;
} rec_t;

static void event(rec_t *r, int64_t step, int layer, fp_event_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void event(rec_t *r, int64_t step, int layer, fp_event_kind kind, const char *fmt, ...)
{
    if (!r->store)
        return;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fp_store_event(r->store, r->run, 0, step, layer, kind, text);
}

static const char *layer_name(fp_model *m, int layer)
{
    const fp_layer_info *l = fp_model_layer(m, layer);
    return l ? l->name : "?";
}

const char *fp_train_diverged_message(const fp_arm *arm, const fp_arm_step_result *r)
{
    static _Thread_local char msg[300];
    snprintf(msg, sizeof msg,
             "loss is %s at step %" PRId64 " and policy %s has no loss scaler: training diverged, run stopped "
             "(lower --lr, or use a policy with a scaler)", isnan(r->loss) ? "NaN" : "infinite", r->iteration + 1,
             fp_arm_policy(arm)->name);
    return msg;
}

int fp_train_record_step(fp_store_t *s, int64_t run, fp_arm *arm, const fp_arm_step_result *r, int64_t start_ns,
                         int64_t end_ns)
{
    fp_train_step_extra x = {NULL, 0, NAN, NULL, -1, -1};
    return fp_train_record_step_ex(s, run, arm, r, start_ns, end_ns, &x);
}

int fp_train_record_step_ex(fp_store_t *s, int64_t run, fp_arm *arm, const fp_arm_step_result *r, int64_t start_ns,
                            int64_t end_ns, const fp_train_step_extra *x)
{
    fp_arm_mem mem;
    fp_arm_memory(arm, &mem);
    int64_t step_no = r->iteration + 1;
    fp_step_rec_t st = {.run = run, .step = step_no, .loss = r->loss, .loss_scale = r->scale, .lr = r->lr,
                        .skipped = r->skipped, .start = start_ns, .end = end_ns, .wall_ns = r->total_ns,
                        .samples_per_s = r->total_ns > 0 ? r->n / (r->total_ns * 1e-9) : NAN,
                        .mem_current = (int64_t)mem.current, .mem_peak = (int64_t)mem.peak,
                        .energy_j = x->energy_j, .power_w = NAN, .cycles = x->cycles,
                        .instructions = x->instructions};
    if (isfinite(x->energy_j) && r->total_ns > 0)
        st.power_w = x->energy_j / (r->total_ns * 1e-9);
    int rc = fp_store_step(s, &st, x->times, x->ntimes);
    if (rc)
        return rc;
    rec_t rec = {s, run};
    fp_model *m = fp_arm_model(arm);
    if (r->diverged)
        event(&rec, step_no, -1, FP_EVENT_NAN, "%s", fp_train_diverged_message(arm, r));
    if (r->skipped)
        event(&rec, step_no, r->nonfinite_layer, FP_EVENT_SKIPPED_STEP,
              "step %" PRId64 " skipped: inf/NaN gradient, first (in backward order) in layer %s (%s)%s; loss "
              "scale %g -> %g%s%s", step_no, layer_name(m, r->nonfinite_layer),
              r->nonfinite_tensor ? r->nonfinite_tensor : "?", r->loss_finite ? "" : ", loss not finite", r->scale,
              r->next_scale, x->skip_detail ? "; " : "", x->skip_detail ? x->skip_detail : "");
    else if (r->nonfinite_layer >= 0 && !r->diverged)
        event(&rec, step_no, r->nonfinite_layer, FP_EVENT_WARNING,
              "step %" PRId64 ": inf/NaN gradient first in layer %s (%s) applied: policy %s has no loss scaler",
              step_no, layer_name(m, r->nonfinite_layer), r->nonfinite_tensor ? r->nonfinite_tensor : "?",
              fp_arm_policy(arm)->name);
    if (r->scale_changed)
        event(&rec, step_no, -1, FP_EVENT_LOSS_SCALE, "loss scale %g -> %g (%s)", r->scale, r->next_scale,
              r->skipped ? "inf/NaN gradient" : "growth interval of clean steps");
    return fp_store_writer_status(s);
}

int fp_train_record_eval(fp_store_t *s, int64_t run, fp_arm *arm, const fp_dataset *ds, const fp_train_config *c,
                         int64_t step, double *loss, double *top1, double *top5)
{
    fp_arm_eval_acc acc;
    int rc = fp_arm_evaluate(arm, ds, FP_SPLIT_VAL, c->batch, c->loader_threads, c->eval_batches, &acc);
    if (rc)
        return rc;
    fp_arm_eval_result(&acc, loss, top1, top5);
    if (s) {
        fp_eval_rec_t e = {.run = run, .step = step, .split = "val", .loss = *loss, .top1 = *top1, .top5 = *top5};
        rc = fp_store_eval(s, &e);
    }
    return rc;
}

static int run_eval(fp_arm *arm, const fp_dataset *ds, const fp_train_config *c, rec_t *rec, int64_t step,
                    fp_train_result *res)
{
    return fp_train_record_eval(rec->store, rec->run, arm, ds, c, step, &res->val_loss, &res->val_top1,
                                &res->val_top5);
}

int fp_train(const fp_train_config *c, fp_train_result *res)
{
    memset(res, 0, sizeof *res);
    res->status = FP_RUN_FAILED;
    res->val_loss = res->val_top1 = res->val_top5 = NAN;
    res->last_loss = NAN;

    fp_arm_config a = c->arm;
    fp_dataset *ds = NULL;
    fp_arm *arm = NULL;
    fp_checkpoint *ck = NULL;
    fp_loader *ld = NULL;
    fp_store_t *store = NULL;
    rec_t rec = {NULL, 0};
    sbuf optjson = {0}, cfgjson = {0};
    char device_buf[300];
    const char *device = c->device ? c->device : fp_train_cpu_name(device_buf, sizeof device_buf);
    const char *data = c->data && *c->data ? c->data : "synthetic";
    int rc = FP_OK, setup_rc = FP_OK;

    /* ---- 1. choices (usage errors: nothing is recorded) ---- */
    if (c->resume && (!a.model || !a.policy)) {
        /* --model / --precision default to the checkpoint's. */
        if ((rc = fp_checkpoint_open(&ck, c->resume))) {
            /* Without a model and policy there is no run to record the failure in. */
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            goto out_nostore;
        }
        if (!a.model)
            a.model = fp_checkpoint_meta(ck, "model");
        if (!a.policy)
            a.policy = fp_checkpoint_meta(ck, "policy");
    }
    if ((rc = fp_train_check_choices(c, &a, 1)))
        goto usage;
    int data_usage = 0;
    rc = fp_train_open_data(c, &a, &ds, &data_usage);
    if (data_usage)   /* unknown scheme or bad options: the message lists the choices */
        goto usage;

    /* ---- 2. the rest of the setup; a failure here is recorded as a failed run ---- */
    if (rc)
        goto setup_failed;
    data = fp_dataset_spec(ds);
    optimizer_json(&optjson, &a);
    config_json(&cfgjson, c, &a, data, a.num_classes, device, optjson.p ? optjson.p : "{}", "train", NULL);
    if (optjson.oom || cfgjson.oom) {
        rc = fp_fail(FP_ENOMEM, "out of memory");
        goto setup_failed;
    }
    if ((rc = fp_arm_create(&arm, &a)))
        goto setup_failed;
    extras_t extras;
    extras_fill(&extras, c, &a, data, optjson.p);
    int64_t start_epoch = 0, start_batch = 0;
    if (c->resume) {
        if (!ck && (rc = fp_checkpoint_open(&ck, c->resume)))
            goto setup_failed;
        if ((rc = extras_check(ck, c->resume, &extras)) ||
            (rc = fp_checkpoint_restore(ck, arm, &start_epoch, &start_batch)))
            goto setup_failed;
    }
    {
        fp_loader_opts lo;
        fp_loader_opts_default(&lo);
        lo.split = FP_SPLIT_TRAIN;
        lo.batch = c->batch;
        lo.threads = c->loader_threads;
        lo.start_epoch = start_epoch;
        lo.start_batch = start_batch;
        if ((rc = fp_loader_start(&ld, ds, &lo)))
            goto setup_failed;
    }
setup_failed:
    setup_rc = rc;
    if (setup_rc)
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());

    /* ---- 3. the run in the store ---- */
    if (c->db) {
        if ((rc = fp_store_open(&store, c->db))) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            goto out_nostore;
        }
        char sname[256];
        snprintf(sname, sizeof sname, "%s %s", a.model, a.policy);
        fp_session_info_t si = {c->session_name ? c->session_name : sname, cfgjson.p};
        int64_t sid = 0, rid = 0;
        if (!(rc = fp_store_begin_session(store, &si, &sid))) {
            fp_run_info_t ri = {.session = sid, .arm = a.policy, .model = a.model, .policy = a.policy,
                                .ref_run = 0, .device = device, .blas = fp_train_blas_name(),
                                .batch_size = c->batch, .image_size = a.image_size, .dataset = data,
                                .seed = (int64_t)a.seed, .optimizer = fp_optim_name(a.optim.kind),
                                .optimizer_config = optjson.p, .config_json = cfgjson.p};
            rc = fp_store_begin_run(store, &ri, &rid);
        }
        if (rc) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            fp_store_close(store, FP_RUN_FAILED, res->message);
            store = NULL;
            fp_fail(rc, "%s", res->message);
            goto out_nostore;
        }
        res->session_id = sid;
        res->run_id = rid;
        rec.store = store;
        rec.run = rid;
    }
    if (setup_rc) {
        rc = setup_rc;
        goto finish;
    }
    if (store && (rc = fp_train_record_layers(store, rec.run, fp_arm_model(arm), c->batch))) {
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());
        goto finish;
    }
    if (c->resume)
        event(&rec, fp_arm_iteration(arm), -1, FP_EVENT_INFO, "resumed from %s at step %" PRId64 " (data epoch %"
              PRId64 ", batch %" PRId64 ")", c->resume, fp_arm_iteration(arm), start_epoch, start_batch);

    /* ---- 4. the loop ---- */
    res->status = FP_RUN_FINISHED;
    double t_start = mono_s(), t_last = t_start;
    int64_t images_since = 0, last_eval = -1, done_here = 0;
    double step_ms_sum = 0;
    while (fp_arm_iteration(arm) < c->steps) {
        if (fp_store_signalled()) {
            res->status = FP_RUN_INTERRUPTED;
            break;
        }
        fp_batch b;
        rc = fp_loader_next(ld, &b);
        if (rc == FP_DATA_END_OF_EPOCH)
            continue;
        if (rc < 0) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
            break;
        }
        fp_arm_step_result r;
        int64_t w0 = wall_ns();
        if ((rc = fp_arm_step(arm, &b, &r))) {
            snprintf(res->message, sizeof res->message, "step %" PRId64 ": %s", r.iteration + 1, fp_error_message());
            res->status = FP_RUN_FAILED;
            break;
        }
        int64_t w1 = wall_ns(), step_no = r.iteration + 1;
        res->last_loss = r.loss;
        done_here++;
        step_ms_sum += r.total_ns / 1e6;
        images_since += r.n;
        if (store && (rc = fp_train_record_step(store, rec.run, arm, &r, w0, w1))) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
            break;
        }
        if (r.skipped)
            res->skipped++;
        if (r.diverged) {
            snprintf(res->message, sizeof res->message, "%s", fp_train_diverged_message(arm, &r));
            res->status = FP_RUN_FAILED;
            rc = fp_fail(FP_EINVAL, "%s", res->message);
            break;
        }

        double now = mono_s();
        if (c->progress && (c->progress_interval_s <= 0 || now - t_last >= c->progress_interval_s ||
                            done_here == 1 || step_no == c->steps)) {
            double el = now - t_start;
            fp_train_progress p = {.step = step_no, .steps = c->steps, .loss = r.loss, .lr = r.lr,
                                   .scale = r.next_scale, .images_per_s = now > t_last ? images_since / (now - t_last) : 0,
                                   .elapsed_s = el, .eta_s = el / (double)done_here * (double)(c->steps - step_no),
                                   .skipped = res->skipped, .val_loss = NAN, .val_top1 = NAN, .val_top5 = NAN};
            c->progress(&p, c->progress_user);
            t_last = now;
            images_since = 0;
        }
        if (c->eval_every > 0 && c->eval_batches >= 0 && step_no % c->eval_every == 0 && step_no < c->steps &&
            fp_dataset_size(ds, FP_SPLIT_VAL) > 0) {
            if ((rc = run_eval(arm, ds, c, &rec, step_no, res))) {
                snprintf(res->message, sizeof res->message, "evaluation at step %" PRId64 ": %s", step_no,
                         fp_error_message());
                res->status = FP_RUN_FAILED;
                break;
            }
            last_eval = step_no;
            if (c->progress) {
                fp_train_progress p = {.step = step_no, .steps = c->steps, .loss = r.loss, .lr = r.lr,
                                       .scale = r.next_scale, .elapsed_s = mono_s() - t_start, .is_eval = 1,
                                       .skipped = res->skipped, .val_loss = res->val_loss,
                                       .val_top1 = res->val_top1, .val_top5 = res->val_top5};
                c->progress(&p, c->progress_user);
            }
        }
        if (c->checkpoint && c->checkpoint_every > 0 && step_no % c->checkpoint_every == 0 && step_no < c->steps) {
            fp_checkpoint_state cs = {0, 0, cfgjson.p, extras.kv, NEXTRA};
            fp_loader_position(ld, &cs.data_epoch, &cs.data_batch);
            if ((rc = fp_checkpoint_save(c->checkpoint, arm, &cs))) {
                snprintf(res->message, sizeof res->message, "%s", fp_error_message());
                res->status = FP_RUN_FAILED;
                break;
            }
        }
    }
    res->steps_done = fp_arm_iteration(arm);
    res->mean_step_ms = done_here ? step_ms_sum / (double)done_here : NAN;
    if (res->status == FP_RUN_FAILED) {
        if (rc == FP_OK)
            rc = FP_EINTERNAL;
        goto finish;
    }
    rc = FP_OK;
    if (res->status == FP_RUN_INTERRUPTED) {
        snprintf(res->message, sizeof res->message, "interrupted by signal %d after step %" PRId64,
                 fp_store_signalled(), res->steps_done);
        event(&rec, res->steps_done, -1, FP_EVENT_INFO, "%s", res->message);
    } else if (c->eval_batches >= 0 && last_eval != c->steps && fp_dataset_size(ds, FP_SPLIT_VAL) > 0) {
        if ((rc = run_eval(arm, ds, c, &rec, res->steps_done, res))) {
            snprintf(res->message, sizeof res->message, "final evaluation: %s", fp_error_message());
            res->status = FP_RUN_FAILED;
            goto finish;
        }
        if (c->progress) {
            fp_train_progress p = {.step = res->steps_done, .steps = c->steps, .loss = res->last_loss,
                                   .elapsed_s = mono_s() - t_start, .is_eval = 1, .skipped = res->skipped,
                                   .val_loss = res->val_loss, .val_top1 = res->val_top1, .val_top5 = res->val_top5};
            c->progress(&p, c->progress_user);
        }
    }
    if (c->checkpoint) {
        fp_checkpoint_state cs = {0, 0, cfgjson.p, extras.kv, NEXTRA};
        fp_loader_position(ld, &cs.data_epoch, &cs.data_batch);
        if ((rc = fp_checkpoint_save(c->checkpoint, arm, &cs))) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
            goto finish;
        }
    }
    if (c->save && (rc = fp_model_save(fp_arm_model(arm), c->save))) {
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());
        res->status = FP_RUN_FAILED;
        goto finish;
    }

finish:
    if (rc && res->status != FP_RUN_FAILED)
        res->status = FP_RUN_FAILED;
    if (store) {
        int crc = fp_store_close(store, res->status, res->message[0] ? res->message : NULL);
        store = NULL;
        if (crc && !rc) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
            rc = crc;
        }
    }
    if (rc)
        fp_fail(rc, "%s", res->message);
    goto out_nostore;

usage:
    res->usage_error = 1;
    snprintf(res->message, sizeof res->message, "%s", fp_error_message());
out_nostore:
    fp_loader_stop(ld);
    fp_checkpoint_close(ck);
    fp_arm_free(arm);
    fp_dataset_close(ds);
    free(optjson.p);
    free(cfgjson.p);
    return rc;
}
