/* cmd_train.c — `fp16probe train`: parses the options, picks the device, and runs trainer/run/train.c's
 * loop with a progress line every few seconds. Exit status: 0 finished, 1 failed, 2 usage error
 * (bad choice: the message lists the valid ones), 130 interrupted (Ctrl-C, run marked interrupted). */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "error.h"
#include "store.h"
#include "store_cli.h"
#include "train_options.h"
#include "trainer/run/environment.h"
#include "trainer/run/train.h"

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
            "  --device cpu|cuda|auto where to train (default cpu; cuda / auto: the GPU when one is usable, else\n"
            "                         one line saying why and the CPU)\n"
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

static void progress(const fp_train_progress *p, void *user)
{
    (void)user;
    if (p->is_eval) {
        printf("eval  step %" PRId64 ": val loss %.4f  top-1 %.2f%%  top-5 %.2f%%\n", p->step, p->val_loss,
               100 * p->val_top1, 100 * p->val_top5);
    } else {
        printf("step %" PRId64 "/%" PRId64 "  loss %.4f  %.1f img/s  lr %.4g", p->step, p->steps, p->loss,
               p->images_per_s, p->lr);
        fp_cli_print_progress_tail(p->scale, p->skipped, p->eta_s);
    }
    fflush(stdout);
}

int cmd_train(int argc, char **argv)
{
    fp_train_config c;
    fp_train_config_default(&c);
    c.arm.policy = NULL;
    fp_train_options o;
    fp_train_options_init(&o, "train");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int rc = fp_train_options_next(&o, argc, argv, &i, usage), m = 0;
        if (rc == 1)
            continue;
        if (rc > 1)
            return rc == 2 ? 2 : 0;
#define OPT(name) ((m = cli_option(argc, argv, &i, name, &v)) != 0)
        if (OPT("--precision"))
            c.arm.policy = v;
        else if (OPT("--save"))
            c.save = v;
        else if (OPT("--checkpoint"))
            c.checkpoint = v;
        else if (OPT("--checkpoint-every"))
            rc = m > 0 && fp_cli_parse_i64("train", "--checkpoint-every", v, 0, INT64_C(1) << 40, &c.checkpoint_every);
        else if (OPT("--resume"))
            c.resume = v;
        else if (OPT("--augment"))
            rc = m > 0 && parse_onoff("--augment", v, "on", "none", &c.augment);
        else if (OPT("--shuffle"))
            rc = m > 0 && parse_onoff("--shuffle", v, "on", "off", &c.shuffle);
        else
            return cli_error(2, "train: unexpected argument '%s' (see fp16probe train --help)", a);
#undef OPT
        if (m < 0 || rc)
            return 2;
    }
    if (fp_train_options_apply(&o, &c))
        return 2;
    const char *db = o.db;
    c.progress = progress;
    c.progress_interval_s = c.steps <= 20 ? 0 : 5.0;

    fp_train_options_pick_device(&o, &c);
    fp_train_options_device_note(&o);
    fp_env_set_threads(o.threads);
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
