/* cmd_train.c — `fp16probe train`: parses the options, picks the device, and runs trainer/train.c's
 * loop with a progress line every few seconds. Exit status: 0 finished, 1 failed, 2 usage error
 * (bad choice: the message lists the valid ones), 130 interrupted (Ctrl-C, run marked interrupted). */
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
#include "trainer/train.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: fp16probe train --model NAME --precision POLICY [options]\n"
            "Trains one model under one precision policy on the CPU and records the run (metadata, layers,\n"
            "steps, evaluations, events) in the database.\n\n"
            "  --model NAME           %s\n"
            "  --precision POLICY     %s\n"
            "  --data SPEC            synthetic (default), synthetic:N, cifar10:DIR, imagefolder:DIR\n"
            "  --steps N              training steps (default 100)\n"
            "  --batch N              images per step (default 32)\n"
            "  --image-size N         input size, >= 32 (default 32)\n"
            "  --classes N            output classes (default: the dataset's)\n"
            "  --optimizer NAME       sgd (default), adam, adamw\n"
            "  --lr X                 base learning rate (sgd 0.1, adam/adamw 0.001)\n"
            "  --momentum X           sgd momentum (default 0.9)\n"
            "  --weight-decay X       (sgd 5e-4, adam 0, adamw 0.01)\n"
            "  --schedule NAME        constant (default), step (x0.1 every steps/3), cosine (over the run)\n"
            "  --warmup N             linear warmup steps from lr/3 (default 0)\n"
            "  --seed N               initialisation, data and augmentation seed (default 0)\n"
            "  --threads N            BLAS and kernel threads (default: online CPUs)\n"
            "  --device cpu|cuda|auto where to train (default cpu; the CUDA backend has not landed yet)\n"
            "  --db FILE              database (default %s)\n"
            "  --eval-every N         validate every N steps (default 0: at the end only)\n"
            "  --eval-batches N       validation batches per evaluation (default 50, 0: the whole split)\n"
            "  --weights FILE         start from torchvision-named safetensors weights\n"
            "  --save FILE            write the final weights (torchvision layout, safetensors)\n"
            "  --checkpoint FILE      write a checkpoint at the end and on Ctrl-C\n"
            "  --checkpoint-every N   also every N steps\n"
            "  --resume FILE          continue a checkpoint up to --steps (same settings required)\n"
            "  --augment on|none      training augmentation (default on)\n"
            "  --shuffle on|off       reshuffle every epoch (default on)\n",
            fp_model_names_joined(), fp_policy_names_joined(), FP_STORE_DEFAULT_PATH);
}

static int parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return cli_error(2, "train: %s needs an integer in [%" PRId64 ", %" PRId64 "] (got '%s')", opt, lo, hi, s);
    *out = v;
    return 0;
}

static int parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
    int64_t v;
    int rc = parse_i64(opt, s, lo, hi, &v);
    if (!rc)
        *out = (int)v;
    return rc;
}

static int parse_double(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0)
        return cli_error(2, "train: %s needs a finite number >= 0 (got '%s')", opt, s);
    *out = v;
    return 0;
}

static int parse_onoff(const char *opt, const char *s, const char *on, const char *off, int *out)
{
    if (strcmp(s, on) == 0)
        *out = 1;
    else if (strcmp(s, off) == 0)
        *out = 0;
    else
        return cli_error(2, "train: %s must be %s or %s (got '%s')", opt, on, off, s);
    return 0;
}

static void fmt_time(char *buf, size_t size, double s)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, size, "?");
    else if (s >= 3600)
        snprintf(buf, size, "%d:%02d:%02d", (int)(s / 3600), (int)fmod(s / 60, 60), (int)fmod(s, 60));
    else
        snprintf(buf, size, "%d:%02d", (int)(s / 60), (int)fmod(s, 60));
}

static void progress(const fp_train_progress *p, void *user)
{
    (void)user;
    if (p->is_eval) {
        printf("eval  step %" PRId64 ": val loss %.4f  top-1 %.2f%%  top-5 %.2f%%\n", p->step, p->val_loss,
               100 * p->val_top1, 100 * p->val_top5);
    } else {
        char eta[32];
        fmt_time(eta, sizeof eta, p->eta_s);
        printf("step %" PRId64 "/%" PRId64 "  loss %.4f  %.1f img/s  lr %.4g", p->step, p->steps, p->loss,
               p->images_per_s, p->lr);
        if (p->scale != 1.0)
            printf("  scale %g", p->scale);
        if (p->skipped)
            printf("  skipped %" PRId64, p->skipped);
        printf("  eta %s\n", eta);
    }
    fflush(stdout);
}

int cmd_train(int argc, char **argv)
{
    fp_train_config c;
    fp_train_config_default(&c);
    c.arm.model = NULL;
    c.arm.policy = NULL;
    const char *optimizer = "sgd", *schedule = "constant", *device = "cpu";
    const char *db = FP_STORE_DEFAULT_PATH;
    double lr = NAN, momentum = NAN, wd = NAN;
    int64_t warmup = 0, seed = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = ncpu > 0 ? (int)ncpu : 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        int rc = 0, missing = 0;   /* cli_option: 1 matched, 0 not this one, -1 value missing (printed) */
#define OPT(name) ((rc = cli_option(argc, argv, &i, name, &v)) != 0 && (rc > 0 || (missing = 1, 0)))
        if (OPT("--model"))
            c.arm.model = v;
        else if (OPT("--precision"))
            c.arm.policy = v;
        else if (OPT("--data"))
            c.data = v;
        else if (OPT("--steps"))
            rc = parse_i64("--steps", v, 0, INT64_C(1) << 40, &c.steps);
        else if (OPT("--batch"))
            rc = parse_int("--batch", v, 1, 1 << 20, &c.batch);
        else if (OPT("--image-size"))
            rc = parse_int("--image-size", v, 32, 4096, &c.arm.image_size);
        else if (OPT("--classes"))
            rc = parse_int("--classes", v, 1, 1 << 20, &c.arm.num_classes);
        else if (OPT("--optimizer"))
            optimizer = v;
        else if (OPT("--lr"))
            rc = parse_double("--lr", v, &lr);
        else if (OPT("--momentum"))
            rc = parse_double("--momentum", v, &momentum);
        else if (OPT("--weight-decay"))
            rc = parse_double("--weight-decay", v, &wd);
        else if (OPT("--schedule"))
            schedule = v;
        else if (OPT("--warmup"))
            rc = parse_i64("--warmup", v, 0, INT64_C(1) << 40, &warmup);
        else if (OPT("--seed"))
            rc = parse_i64("--seed", v, 0, INT64_MAX, &seed);
        else if (OPT("--threads"))
            rc = parse_int("--threads", v, 1, 1024, &threads);
        else if (OPT("--device"))
            device = v;
        else if (OPT("--db"))
            db = v;
        else if (OPT("--eval-every"))
            rc = parse_int("--eval-every", v, 0, 1 << 30, &c.eval_every);
        else if (OPT("--eval-batches"))
            rc = parse_i64("--eval-batches", v, 0, INT64_C(1) << 40, &c.eval_batches);
        else if (OPT("--weights"))
            c.arm.weights = v;
        else if (OPT("--save"))
            c.save = v;
        else if (OPT("--checkpoint"))
            c.checkpoint = v;
        else if (OPT("--checkpoint-every"))
            rc = parse_i64("--checkpoint-every", v, 0, INT64_C(1) << 40, &c.checkpoint_every);
        else if (OPT("--resume"))
            c.resume = v;
        else if (OPT("--augment"))
            rc = parse_onoff("--augment", v, "on", "none", &c.augment);
        else if (OPT("--shuffle"))
            rc = parse_onoff("--shuffle", v, "on", "off", &c.shuffle);
        else if (!missing)
            return cli_error(2, "train: unexpected argument '%s' (see fp16probe train --help)", a);
#undef OPT
        if (missing || rc == 2)
            return 2;
    }

    fp_optim_kind kind;
    if (fp_optim_parse(optimizer, &kind))
        return cli_error(2, "train: %s", fp_error_message());
    fp_lr_kind lk;
    if (fp_lr_schedule_parse(schedule, &lk))
        return cli_error(2, "train: %s", fp_error_message());
    if (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0 && strcmp(device, "auto") != 0)
        return cli_error(2, "train: unknown device '%s'; valid devices: cpu, cuda, auto", device);
    fp_optim_config_default(&c.arm.optim, kind);
    if (kind == FP_OPTIM_SGD) {
        c.arm.optim.momentum = isnan(momentum) ? 0.9 : momentum;
        c.arm.optim.weight_decay = isnan(wd) ? 5e-4 : wd;
    } else {
        if (!isnan(momentum))
            return cli_error(2, "train: --momentum applies to sgd only (adam's betas are 0.9, 0.999)");
        if (!isnan(wd))
            c.arm.optim.weight_decay = wd;
    }
    if (isnan(lr))
        lr = kind == FP_OPTIM_SGD ? 0.1 : 1e-3;
    fp_lr_schedule_default(&c.arm.lr, lk, lr);
    c.arm.lr.warmup_steps = warmup;
    int64_t main_steps = c.steps - warmup > 0 ? c.steps - warmup : 1;
    if (lk == FP_LR_STEP)
        c.arm.lr.step_size = main_steps / 3 > 0 ? main_steps / 3 : 1;
    else if (lk == FP_LR_COSINE)
        c.arm.lr.t_max = main_steps;
    c.arm.seed = (uint64_t)seed;
    c.arm.threads = threads;
    c.db = *db ? db : NULL;
    c.progress = progress;
    c.progress_interval_s = c.steps <= 20 ? 0 : 5.0;

    if (strcmp(device, "cpu") != 0) {
        fp_gpu_info_t gi;
        fp_gpu_detect(&gi);
        if (gi.available)
            fprintf(stderr, "fp16probe: train: GPU %s found, but the CUDA backend has not landed yet; training on "
                            "the CPU\n", gi.name);
        else if (strcmp(device, "cuda") == 0)
            fprintf(stderr, "fp16probe: train: GPU unavailable (%s); training on the CPU\n", gi.reason);
    }
    fp_train_set_blas_threads(threads);
    fp_store_install_signal_handlers();

    fp_train_result r;
    int rc = fp_train(&c, &r);
    if (rc) {
        if (r.usage_error)
            return cli_error(2, "train: %s", r.message);
        if (r.run_id > 0)
            return cli_error(1, "train: run %" PRId64 " failed: %s", r.run_id, r.message);
        return cli_error(1, "train: %s", r.message);
    }
    char where[512] = "";
    if (r.run_id > 0)
        snprintf(where, sizeof where, "; run %" PRId64 " in %s", r.run_id, db);
    if (r.status == FP_RUN_INTERRUPTED) {
        printf("interrupted after step %" PRId64 "%s\n", r.steps_done, where);
        return 130;
    }
    printf("finished %" PRId64 " steps: loss %.4f", r.steps_done, r.last_loss);
    if (!isnan(r.val_top1))
        printf(", val loss %.4f top-1 %.2f%% top-5 %.2f%%", r.val_loss, 100 * r.val_top1, 100 * r.val_top5);
    if (!isnan(r.mean_step_ms))
        printf(", %.1f ms/step", r.mean_step_ms);
    if (r.skipped)
        printf(", %" PRId64 " skipped", r.skipped);
    printf("%s\n", where);
    return 0;
}
