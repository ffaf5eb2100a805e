/* train_options.c — the options `train` and `compare` share (train_options.h). Promise: one parser and one
 * translation into the trainer's configuration, so both commands accept and default the same things;
 * every error is one line "fp16probe: <cmd>: ..." and status 2. */
#include "config.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands.h"
#include "error.h"
#include "gpu_detect.h"
#include "store.h"
#include "store_cli.h"
#include "train_options.h"
#ifdef HAVE_CUDA
#include "trainer/backend_cuda.h"
#endif

void fp_train_options_init(fp_train_options *o, const char *cmd)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->optimizer = "sgd";
    o->schedule = "constant";
    o->device = "cpu";
    o->db = FP_STORE_DEFAULT_PATH;
    o->steps = 100;
    o->batch = 32;
    o->image_size = 32;
    o->eval_batches = 50;
    o->lr = o->momentum = o->weight_decay = NAN;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = ncpu > 0 ? (int)ncpu : 1;
}

int fp_cli_parse_i64(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
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

int fp_train_options_next(fp_train_options *o, int argc, char **argv, int *i, void (*usage)(FILE *to))
{
    if (strcmp(argv[*i], "--help") == 0 || strcmp(argv[*i], "-h") == 0) {
        usage(stdout);
        return 3;
    }
    return fp_train_options_parse(o, argc, argv, i);
}

static int parse_double(const char *cmd, const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0)
        return cli_error(2, "%s: %s needs a finite number >= 0 (got '%s')", cmd, opt, s);
    *out = v;
    return 0;
}

int fp_train_options_parse(fp_train_options *o, int argc, char **argv, int *i)
{
    const char *v = NULL, *c = o->cmd;
    int m = 0;
#define OPT(name) ((m = cli_option(argc, argv, i, name, &v)) != 0)
#define RET(expr) return (m < 0 ? 2 : (expr) ? 2 : 1)
    if (OPT("--model"))
        RET((o->model = v, 0));
    if (OPT("--data"))
        RET((o->data = v, 0));
    if (OPT("--steps"))
        RET((o->set_steps = 1, m > 0 && fp_cli_parse_i64(c, "--steps", v, 0, INT64_C(1) << 40, &o->steps)));
    if (OPT("--batch"))
        RET((o->set_batch = 1, m > 0 && fp_cli_parse_int(c, "--batch", v, 1, 1 << 20, &o->batch)));
    if (OPT("--image-size"))
        RET((o->set_image_size = 1, m > 0 && fp_cli_parse_int(c, "--image-size", v, 32, 4096, &o->image_size)));
    if (OPT("--classes"))
        RET(m > 0 && fp_cli_parse_int(c, "--classes", v, 1, 1 << 20, &o->classes));
    if (OPT("--optimizer"))
        RET((o->optimizer = v, 0));
    if (OPT("--lr"))
        RET((o->set_lr = 1, m > 0 && parse_double(c, "--lr", v, &o->lr)));
    if (OPT("--momentum"))
        RET(m > 0 && parse_double(c, "--momentum", v, &o->momentum));
    if (OPT("--weight-decay"))
        RET(m > 0 && parse_double(c, "--weight-decay", v, &o->weight_decay));
    if (OPT("--schedule"))
        RET((o->schedule = v, 0));
    if (OPT("--warmup"))
        RET((o->set_warmup = 1, m > 0 && fp_cli_parse_i64(c, "--warmup", v, 0, INT64_C(1) << 40, &o->warmup)));
    if (OPT("--seed"))
        RET(m > 0 && fp_cli_parse_i64(c, "--seed", v, 0, INT64_MAX, &o->seed));
    if (OPT("--threads"))
        RET(m > 0 && fp_cli_parse_int(c, "--threads", v, 1, 1024, &o->threads));
    if (OPT("--device"))
        RET((o->device = v, 0));
    if (OPT("--db"))
        RET((o->db = v, 0));
    if (OPT("--eval-every"))
        RET((o->set_eval_every = 1, m > 0 && fp_cli_parse_int(c, "--eval-every", v, 0, 1 << 30, &o->eval_every)));
    if (OPT("--eval-batches"))
        RET((o->set_eval_batches = 1,
             m > 0 && fp_cli_parse_i64(c, "--eval-batches", v, 0, INT64_C(1) << 40, &o->eval_batches)));
    if (OPT("--weights"))
        RET((o->weights = v, 0));
#undef RET
#undef OPT
    return m < 0 ? 2 : 0;
}

int fp_train_options_apply(const fp_train_options *o, fp_train_config *c)
{
    fp_optim_kind kind;
    if (fp_optim_parse(o->optimizer, &kind))
        return cli_error(2, "%s: %s", o->cmd, fp_error_message());
    fp_lr_kind lk;
    if (fp_lr_schedule_parse(o->schedule, &lk))
        return cli_error(2, "%s: %s", o->cmd, fp_error_message());
    if (strcmp(o->device, "cpu") != 0 && strcmp(o->device, "cuda") != 0 && strcmp(o->device, "auto") != 0)
        return cli_error(2, "%s: unknown device '%s'; valid devices: cpu, cuda, auto", o->cmd, o->device);
    fp_arm_config *a = &c->arm;
    a->model = o->model;
    a->image_size = o->image_size;
    a->num_classes = o->classes;
    fp_optim_config_default(&a->optim, kind);
    if (kind == FP_OPTIM_SGD) {
        a->optim.momentum = isnan(o->momentum) ? 0.9 : o->momentum;
        a->optim.weight_decay = isnan(o->weight_decay) ? 5e-4 : o->weight_decay;
    } else {
        if (!isnan(o->momentum))
            return cli_error(2, "%s: --momentum applies to sgd only (adam's betas are 0.9, 0.999)", o->cmd);
        if (!isnan(o->weight_decay))
            a->optim.weight_decay = o->weight_decay;
    }
    double lr = isnan(o->lr) ? (kind == FP_OPTIM_SGD ? 0.1 : 1e-3) : o->lr;
    fp_lr_schedule_default(&a->lr, lk, lr);
    a->lr.warmup_steps = o->warmup;
    int64_t main_steps = o->steps - o->warmup > 0 ? o->steps - o->warmup : 1;
    if (lk == FP_LR_STEP)
        a->lr.step_size = main_steps / 3 > 0 ? main_steps / 3 : 1;
    else if (lk == FP_LR_COSINE)
        a->lr.t_max = main_steps;
    a->seed = (uint64_t)o->seed;
    a->threads = o->threads;
    a->weights = o->weights;
    c->data = o->data;
    c->batch = o->batch;
    c->steps = o->steps;
    c->eval_every = o->eval_every;
    c->eval_batches = o->eval_batches;
    c->db = o->db && *o->db ? o->db : NULL;
    return 0;
}

int fp_train_options_pick_device(fp_train_options *o, fp_train_config *c)
{
    if (strcmp(o->device, "cpu") == 0)
        return 0;
    fp_gpu_info_t gi;
    fp_gpu_detect(&gi);
#ifdef HAVE_CUDA
    if (gi.available) {
        snprintf(o->device_text, sizeof o->device_text, "cuda: %s", gi.name);
        c->device = o->device_text;
        c->arm.backend = fp_backend_cuda();
        /* A GPU step of ResNet-50 at 224x224 eats thousands of images a second: two loader threads make
         * about 1,500 (bench_data at 224x224, batch 256), so a GPU run takes half the cores, up to 8. */
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        int want = ncpu > 4 ? (int)(ncpu / 2 < 8 ? ncpu / 2 : 8) : 2;
        if (c->loader_threads < want)
            c->loader_threads = want;
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

void fp_cli_print_progress_tail(double scale, int64_t skipped, double eta_s)
{
    char eta[32];
    fp_cli_fmt_time(eta, sizeof eta, eta_s);
    if (scale != 1.0)
        printf("  scale %g", scale);
    if (skipped)
        printf("  skipped %" PRId64, skipped);
    printf("  eta %s\n", eta);
}
