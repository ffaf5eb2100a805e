/* train_options.c — the options `train` and `compare` share (train_options.h). Promise: one parser, and one
 * place that lays what the user gave over the library's defaults (the CLI's own default is only which device
 * a command tries when --device is not given), so both commands accept the same things; every error is one
 * line "fp16probe: <cmd>: ..." and status 2. */
#include "config.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "error.h"
#include "gpu_detect.h"
#include "store.h"
#include "store_cli.h"
#include "train_options.h"
#include "trainer/dist/dist.h"
#ifdef HAVE_CUDA
#include "trainer/backend_cuda.h"
#endif

void fp_train_options_init(fp_train_options *o, const char *cmd)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
}

int fp_cli_parse_i64(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = cli_is_decimal(s, 1) ? strtoll(s, &end, 10) : 0;
    if (!cli_is_decimal(s, 1) || errno || end == s || *end || v < lo || v > hi)
        return cli_error(2, "%s: %s needs an integer in [%" PRId64 ", %" PRId64 "] (got '%s')", cmd, opt, lo, hi, s);
    *out = v;
    return 0;
}

int fp_cli_parse_int(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out)
{
    int64_t v;
    int rc = fp_cli_parse_i64(cmd, opt, s, lo, hi, &v);
    if (!rc)
        *out = (int)v;
    return rc;
}

int fp_train_options_args(fp_train_options *o, int argc, char **argv, void (*usage)(FILE *to),
                          int (*own)(void *ctx, int argc, char **argv, int *i), void *ctx)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        int rc = fp_train_options_parse(o, argc, argv, &i);
        if (rc == 1)
            continue;
        if (rc > 1 || own(ctx, argc, argv, &i))
            return 2;
    }
    return -1;
}

static int parse_double(const char *cmd, const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = cli_is_decimal(s, 0) ? strtod(s, &end) : NAN;
    if (!cli_is_decimal(s, 0) || errno || end == s || *end || !isfinite(v) || v < 0)
        return cli_error(2, "%s: %s needs a finite number >= 0 (got '%s')", cmd, opt, s);
    *out = v;
    return 0;
}

static int parse_onoff(const char *cmd, const char *opt, const char *s, const char *on, const char *off, int *out)
{
    if (strcmp(s, on) == 0)
        *out = 1;
    else if (strcmp(s, off) == 0)
        *out = 0;
    else
        return cli_error(2, "%s: %s must be %s or %s (got '%s')", cmd, opt, on, off, s);
    return 0;
}

int fp_train_options_parse(fp_train_options *o, int argc, char **argv, int *i)
{
    const char *v = NULL, *c = o->cmd;
    int m = 0;
#define OPT(name) ((m = cli_option(argc, argv, i, name, &v)) != 0)
#define RET(expr) return (m < 0 ? 2 : (expr) ? 2 : 1)
#define INT(flag, name, lo, hi, dst) RET((o->flag = 1, m > 0 && fp_cli_parse_int(c, name, v, lo, hi, dst)))
#define I64(flag, name, lo, hi, dst) RET((o->flag = 1, m > 0 && fp_cli_parse_i64(c, name, v, lo, hi, dst)))
#define NUM(flag, name, dst) RET((o->flag = 1, m > 0 && parse_double(c, name, v, dst)))
    if (strcmp(argv[*i], "--cuda-graph") == 0)   /* a flag: no value */
        return (o->cuda_graph = 1);
    if (strcmp(argv[*i], "--sync-bn") == 0)
        return (o->sync_bn = 1);
    if (strncmp(argv[*i], "--sync-bn=", 10) == 0)
        return cli_error(2, "%s: --sync-bn takes no value (got '%s')", c, argv[*i] + 10);
    if (OPT("--model"))
        RET((o->model = v, 0));
    if (OPT("--precision"))
        RET((o->precision = v, 0));
    if (OPT("--data"))
        RET((o->data = v, 0));
    if (OPT("--augment"))
        RET((o->set_augment = 1, m > 0 && parse_onoff(c, "--augment", v, "on", "none", &o->augment)));
    if (OPT("--shuffle"))
        RET((o->set_shuffle = 1, m > 0 && parse_onoff(c, "--shuffle", v, "on", "off", &o->shuffle)));
    if (OPT("--steps"))
        I64(set_steps, "--steps", 1, INT64_C(1) << 40, &o->steps);
    if (OPT("--batch"))
        INT(set_batch, "--batch", 1, 1 << 20, &o->batch);
    if (OPT("--image-size"))
        INT(set_image_size, "--image-size", 32, 4096, &o->image_size);
    if (OPT("--classes"))
        INT(set_classes, "--classes", 1, 1 << 20, &o->classes);
    if (OPT("--optimizer"))
        RET((o->optimizer = v, 0));
    if (OPT("--lr"))
        NUM(set_lr, "--lr", &o->lr);
    if (OPT("--momentum"))
        NUM(set_momentum, "--momentum", &o->momentum);
    if (OPT("--weight-decay"))
        NUM(set_weight_decay, "--weight-decay", &o->weight_decay);
    if (OPT("--schedule"))
        RET((o->schedule = v, 0));
    if (OPT("--warmup"))
        I64(set_warmup, "--warmup", 0, INT64_C(1) << 40, &o->warmup);
    if (OPT("--seed"))
        I64(set_seed, "--seed", 0, INT64_MAX, &o->seed);
    if (OPT("--threads"))
        INT(set_threads, "--threads", 1, 1024, &o->threads);
    if (OPT("--device"))
        RET((o->device = v, 0));
    if (OPT("--db"))
        RET((o->db = v, 0));
    if (OPT("--allreduce")) {
        fp_dtype w;
        if (m > 0 && fp_dist_parse_wire(v, &w))
            RET(cli_error(2, "%s: --allreduce: %s", c, fp_error_message()));
        RET((o->allreduce = v, 0));
    }
    if (OPT("--eval-every"))
        INT(set_eval_every, "--eval-every", 0, 1 << 30, &o->eval_every);
    if (OPT("--eval-batches"))
        I64(set_eval_batches, "--eval-batches", 0, INT64_C(1) << 40, &o->eval_batches);
    if (OPT("--weights"))
        RET((o->weights = v, 0));
    if (OPT("--hist-every"))
        INT(set_hist, "--hist-every", 0, 1 << 30, &o->hist_every);
    if (OPT("--error-every"))
        INT(set_error, "--error-every", 0, 1 << 30, &o->error_every);
    if (OPT("--trace-every"))
        INT(set_trace, "--trace-every", 0, 1 << 30, &o->trace_every);
#undef NUM
#undef I64
#undef INT
#undef RET
#undef OPT
    return m < 0 ? 2 : 0;
}

int fp_train_options_apply(const fp_train_options *o, fp_compare_config *cfg)
{
    fp_train_config *c = &cfg->base;
    fp_arm_config *a = &c->arm;
    if (o->optimizer) {   /* first: the kind brings its own defaults */
        fp_optim_kind kind;
        if (fp_optim_parse(o->optimizer, &kind))
            return cli_error(2, "%s: %s", o->cmd, fp_error_message());
        fp_train_config_set_optimizer(c, kind);
    }
    if (o->schedule) {
        fp_lr_kind lk;
        if (fp_lr_schedule_parse(o->schedule, &lk))
            return cli_error(2, "%s: %s", o->cmd, fp_error_message());
        fp_train_config_set_schedule(c, lk);
    }
    if (o->set_momentum && a->optim.kind != FP_OPTIM_SGD)
        return cli_error(2, "%s: --momentum applies to sgd only (adam's betas are 0.9, 0.999)", o->cmd);
    if (o->set_momentum)
        a->optim.momentum = o->momentum;
    if (o->set_weight_decay)
        a->optim.weight_decay = o->weight_decay;
    if (o->set_lr)
        a->lr.base_lr = o->lr;
    if (o->set_warmup)
        a->lr.warmup_steps = o->warmup;
    if (o->model)
        a->model = o->model;
    if (o->precision)
        cfg->precision = o->precision;
    if (o->set_image_size)
        a->image_size = o->image_size;
    if (o->set_classes)
        a->num_classes = o->classes;
    if (o->set_seed)
        a->seed = (uint64_t)o->seed;
    if (o->set_threads)
        a->threads = o->threads;
    if (o->weights)
        a->weights = o->weights;
    if (o->allreduce)
        a->allreduce = o->allreduce;
    a->cuda_graph = o->cuda_graph;
    a->sync_bn = o->sync_bn;
    if (o->data)
        c->data = o->data;
    if (o->set_augment)
        c->augment = o->augment;
    if (o->set_shuffle)
        c->shuffle = o->shuffle;
    if (o->set_batch)
        c->batch = o->batch;
    if (o->set_steps)
        c->steps = o->steps;
    if (o->set_eval_every)
        c->eval_every = o->eval_every;
    if (o->set_eval_batches)
        c->eval_batches = o->eval_batches;
    if (o->db)
        c->db = *o->db ? o->db : NULL;
    if (o->set_hist)
        cfg->hist_every = o->hist_every;
    if (o->set_error)
        cfg->error_every = o->error_every;
    if (o->set_trace)
        cfg->trace_every = o->trace_every;
#ifdef HAVE_CUDA
    if (o->gpu)
        fp_train_config_set_device(c, fp_backend_cuda(), o->device_text);
#endif
    return 0;
}

int fp_train_options_pick_device(fp_train_options *o, const char *dflt)
{
    const char *d = o->device ? o->device : dflt;
    if (strcmp(d, "cpu") != 0 && strcmp(d, "cuda") != 0 && strcmp(d, "auto") != 0)
        return cli_error(2, "%s: unknown device '%s'; valid devices: cpu, cuda, auto", o->cmd, d);
    o->gpu = 0;
    if (strcmp(d, "cpu") == 0)
        return 0;
    fp_gpu_info_t gi;
    fp_gpu_detect(&gi);
#ifdef HAVE_CUDA
    if (gi.available) {
        snprintf(o->device_text, sizeof o->device_text, "cuda: %s", gi.name);
        o->gpu = 1;
        return 1;
    }
#endif
    snprintf(o->device_note, sizeof o->device_note, "fp16probe: %s: gpu: unavailable: %s; training on the CPU",
             o->cmd, gi.available ? "this binary was built without the CUDA backend" : gi.reason);
    return 0;
}

void fp_train_options_device_note(const fp_train_options *o)
{
    if (o->device_note[0])
        fprintf(stderr, "%s\n", o->device_note);
    if (o->cuda_graph && !o->gpu)
        fprintf(stderr, "fp16probe: %s: --cuda-graph: no effect: the arms train on the CPU\n", o->cmd);
    if (o->sync_bn && fp_dist_launched_size() < 2)
        fprintf(stderr, "fp16probe: %s: --sync-bn: no effect: one process (it needs mpirun -np N, N > 1)\n", o->cmd);
}

void fp_cli_fmt_time(char *buf, size_t size, double s)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, size, "?");
    else if (s >= 3600)
        snprintf(buf, size, "%d:%02d:%02d", (int)(s / 3600), (int)fmod(s / 60, 60), (int)fmod(s, 60));
    else
        snprintf(buf, size, "%d:%02d", (int)(s / 60), (int)fmod(s, 60));
}

void fp_cli_print_progress_tail(const fp_compare_progress *p)
{
    char eta[32];
    fp_cli_fmt_time(eta, sizeof eta, p->eta_s);
    if (p->scale != 1.0)
        printf("  scale %g", p->scale);
    if (p->skipped)
        printf("  skipped %" PRId64, p->skipped);
    if (p->store_wait_s > 0)
        printf("  recording waits for a lock on the database (%.0f s of %.0f)", p->store_wait_s, p->store_patience_s);
    printf("  eta %s\n", eta);
}

int fp_train_options_dist(fp_train_options *o, fp_compare_config *cfg)
{
    if (fp_dist_launched_size() == 0)
        return 0;
    if (fp_dist_init(&o->dist))
        return cli_error(2, "%s: %s", o->cmd, fp_error_message());
    cfg->base.arm.dist = o->dist;
    if (fp_dist_rank(o->dist) != 0 && !freopen("/dev/null", "w", stdout))
        return cli_error(2, "%s: rank %d: cannot silence stdout", o->cmd, fp_dist_rank(o->dist));
    return 0;
}

int fp_train_options_dist_end(fp_train_options *o, int status)
{
    if (o->dist && status == 0)
        fp_dist_finalize(o->dist);
    o->dist = NULL;
    return status;
}

void fp_cli_print_dist_summary(const fp_compare_config *cfg, const fp_compare_result *res, int i)
{
    const fp_compare_arm_result *r = &res->arms[i];
    if (res->ranks < 2 || isnan(r->comm_ms))
        return;
    const fp_arm_config *a = &cfg->base.arm;
    printf("data parallel: %d ranks, global batch %d, all-reduce %s %.2f ms/step (exposed %.2f ms, %.1f%% of the "
           "step), %.2f MB/step per rank", res->ranks, cfg->base.batch * res->ranks,
           a->allreduce ? a->allreduce : "as the gradients", r->comm_ms, r->exposed_ms, 100 * r->comm_share,
           r->comm_bytes / 1e6);
    if (!isnan(r->reduce_rel_l2))
        printf(", rounding vs fp32 rel. L2 %.3g", r->reduce_rel_l2);
    printf("%s\n", a->sync_bn ? ", sync-bn" : "");
}
