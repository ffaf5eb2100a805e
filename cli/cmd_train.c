/* cmd_train.c — `fp16probe train`: parses the options, picks the device, and runs the training loop on one
 * arm (trainer/run/compare.h: train is a comparison of one policy, under the same probes) with a progress
 * line every few seconds. Exit status: 0 finished, 1 failed, 2 usage error
 * (bad choice: the message lists the valid ones), 128 + the signal when a signal interrupted it (130 Ctrl-C,
 * 143 SIGTERM; the run marked interrupted). */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "error.h"
#include "probe/probe.h"
#include "store.h"
#include "store_cli.h"
#include "train_options.h"
#include "trainer/dist/dist.h"
#include "trainer/run/environment.h"
#include "trainer/run/compare.h"

static void usage(FILE *to)
{
    fp_compare_config d;   /* the defaults shown are the library's */
    fp_compare_config_default_train(&d);
    fprintf(to,
            "usage: fp16probe train --model NAME --precision POLICY [options]\n"
            "Trains one model under one precision policy (a comparison of one arm: the same loop and probes as\n"
            "fp16probe compare) and records the run (metadata, layers, steps, layer times, histograms,\n"
            "evaluations, events) in the database.\n\n"
            "  --model NAME           %s\n"
            "  --precision POLICY     %s\n"
            "  --data SPEC            synthetic (default), synthetic:N, cifar10:DIR, imagefolder:DIR\n"
            "  --steps N              training steps (default %" PRId64 ")\n"
            "  --batch N              images per step (default %d)\n"
            "  --image-size N         input size, >= 32 (default %d)\n"
            "  --classes N            output classes (default: the dataset's)\n"
            "  --optimizer NAME       sgd (default), adam, adamw\n"
            "  --lr X                 base learning rate (sgd 0.1, adam/adamw 0.001)\n"
            "  --momentum X           sgd momentum (default 0.9)\n"
            "  --weight-decay X       (sgd 5e-4, adam 0, adamw 0.01)\n"
            "  --schedule NAME        constant (default), step (x0.1 every steps/3), cosine (over the run)\n"
            "  --warmup N             linear warmup steps from lr/3 (default %" PRId64 ")\n"
            "  --seed N               initialisation, data and augmentation seed (default 0)\n"
            "  --threads N            BLAS and kernel threads (default: online CPUs)\n"
            "  --device cpu|cuda|auto where to train (default cpu; cuda / auto: the GPU when one is usable, else\n"
            "                         one line saying why and the CPU)\n"
            "  --cuda-graph           GPU arms: replay each step as one CUDA graph after the first (sampled,\n"
            "                         evaluated, checkpointed and data-parallel steps run eagerly; no effect on the CPU)\n"
            "  --db FILE              database (default %s; '' records nothing)\n"
            "  --allreduce FMT        under mpirun: what the gradient all-reduce carries, fp32, fp16 or bf16\n"
            "                         (default: the gradients' own format); --batch is per rank\n"
            "  --sync-bn              under mpirun: batchnorm over the global batch (PyTorch's SyncBatchNorm:\n"
            "                         the ranks' statistics and backward sums all-reduced; identical running\n"
            "                         statistics on every rank); default per-rank statistics; no effect alone\n"
            "  --eval-every N         validate every N steps (default %d: at the end only)\n"
            "  --eval-batches N       validation batches per evaluation (default %" PRId64 ", 0: the whole split)\n"
            "  --weights FILE         start from torchvision-named safetensors weights\n"
            "  --save FILE            write the final weights (torchvision layout, safetensors)\n"
            "  --checkpoint FILE      write a checkpoint at the end and on Ctrl-C\n"
            "  --checkpoint-every N   also every N steps\n"
            "  --resume FILE          continue a checkpoint up to --steps (same settings required)\n"
            "  --augment on|none      training augmentation (default on)\n"
            "  --shuffle on|off       reshuffle every epoch (default on)\n"
            "  --hist-every N         exponent histograms of every layer every N steps (default %d, or once at\n"
            "                         the last step of a shorter run; 0: off)\n"
            "  --error-every N        (a comparison's: rounding error against an fp32 arm; one arm has none)\n"
            "  --trace-every N        kernel-level rows every N steps (GPU only; default %d, or once at the last\n"
            "                         step of a shorter run; 0: off)\n",
            fp_model_names_joined(), fp_policy_names_joined(), d.base.steps, d.base.batch, d.base.arm.image_size,
            d.base.arm.lr.warmup_steps, d.base.db ? d.base.db : "none", d.base.eval_every, d.base.eval_batches,
            FP_PROBE_DEFAULT_HIST_EVERY, FP_PROBE_DEFAULT_TRACE_EVERY);
}

static void progress(const fp_compare_progress *p, void *user)
{
    (void)user;
    if (p->failed)   /* the one stderr line says why */
        return;
    if (p->is_eval) {
        printf("eval  step %" PRId64 ": val loss %.4f  top-1 %.2f%%  top-5 %.2f%%\n", p->step, p->val_loss,
               100 * p->val_top1, 100 * p->val_top5);
    } else {
        printf("step %" PRId64 "/%" PRId64 "  loss %.4f  %.1f img/s  lr %.4g", p->step, p->steps, p->loss,
               p->images_per_s, p->lr);
        fp_cli_print_progress_tail(p);
    }
    fflush(stdout);
}

/* train's own options (the rest are train_options.h's), into the comparison's configuration */
static int train_arg(void *ctx, int argc, char **argv, int *i)
{
    fp_compare_config *c = ctx;
    const char *a = argv[*i], *v = NULL;
    int m = 0, rc = 0;
#define OPT(name) ((m = cli_option(argc, argv, i, name, &v)) != 0)
    if (OPT("--save"))
        c->base.save = v;
    else if (OPT("--checkpoint"))
        c->base.checkpoint = v;
    else if (OPT("--checkpoint-every"))
        rc = m > 0 && fp_cli_parse_i64("train", "--checkpoint-every", v, 0, INT64_C(1) << 40, &c->base.checkpoint_every);
    else if (OPT("--resume"))
        c->base.resume = v;
    else
        return cli_error(2, "train: unexpected argument '%s' (see fp16probe train --help)", a);
#undef OPT
    return m < 0 || rc;
}

int cmd_train(int argc, char **argv)
{
    fp_compare_config c;   /* train is a comparison of one arm: the same loop, probes and options */
    fp_compare_config_default_train(&c);
    fp_train_options o;
    fp_train_options_init(&o, "train");
    int st = fp_train_options_args(&o, argc, argv, usage, train_arg, &c);
    if (st >= 0)
        return st;
    if (fp_train_options_pick_device(&o, "cpu") > 1 || fp_train_options_apply(&o, &c) ||
        fp_train_options_dist(&o, &c))
        return 2;
    c.progress = progress;
    fp_env_set_threads(c.base.arm.threads);
    fp_store_install_signal_handlers();

    fp_compare_result res;
    fp_compare *run;
    int rc = fp_compare_open(&run, &c, &res);
    if (rc && res.usage_error)
        return cli_error(2, "train: %s", res.message);
    fp_train_options_device_note(&o);
    if (rc == FP_OK) {
        rc = fp_compare_run(run, &res);
        fp_compare_close(run);
    }
    const fp_compare_arm_result *r = &res.arms[0];
    if (rc) {
        const char *why = r->message[0] ? r->message : res.message;
        if (res.ranks > 1)   /* data parallel: the rank that says it */
            return cli_error(1, "train: rank %d: %s", fp_dist_rank(o.dist), why);
        if (r->run_id > 0)
            return cli_error(1, "train: run %" PRId64 " failed: %s", r->run_id, why);
        return cli_error(1, "train: %s", why);
    }
    char where[512] = "";
    if (r->run_id > 0)
        snprintf(where, sizeof where, "; run %" PRId64 " in %s", r->run_id, c.base.db);
    if (res.status == FP_RUN_INTERRUPTED) {
        printf("interrupted after step %" PRId64 "%s\n", r->steps_done, where);
        return fp_store_signalled() ? 128 + fp_store_signalled() : 130;   /* as the shell reports a signal */
    }
    printf("finished %" PRId64 " steps: loss %.4f", r->steps_done, r->last_loss);
    if (!isnan(r->val_top1))
        printf(", val loss %.4f top-1 %.2f%% top-5 %.2f%%", r->val_loss, 100 * r->val_top1, 100 * r->val_top5);
    if (!isnan(r->mean_step_ms))
        printf(", %.1f ms/step", r->mean_step_ms);
    if (r->skipped)
        printf(", %" PRId64 " skipped", r->skipped);
    printf("%s\n", where);
    fp_cli_print_dist_summary(&c, &res, 0);
    return fp_train_options_dist_end(&o, 0);
}
