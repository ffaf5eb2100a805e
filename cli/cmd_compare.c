/* cmd_compare.c — `fp16probe compare` and `fp16probe <model>`: one model trained under several precision
 * policies side by side (trainer/run/compare.c), progress lines per arm, and the end-of-run summary table from
 * reports/summary*.c (the figures the HTML report and the gate use). Exit status: 0 every arm finished,
 * 1 an arm or the comparison failed, 2 usage error (the valid choices listed), 130 interrupted (Ctrl-C or the
 * dashboard's stop; 128 + the signal for another: 143 SIGTERM). */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands.h"
#include "db_remove.h"
#include "error.h"
#include "probe/probe.h"
#include "reports/summary.h"
#include "reports/units.h"
#include "store.h"
#include "store_cli.h"
#include "store_reader.h"
#include "train_options.h"
#include "trainer/dist/dist.h"
#include "trainer/run/environment.h"
#include "trainer/run/compare.h"
#include "tui/tui.h"

static void usage(FILE *to)
{
    fp_compare_config d, g;   /* the defaults shown are the library's */
    fp_compare_config_default(&d);
    fp_compare_config_default_gpu(&g);
    fprintf(to,
            "usage: fp16probe compare [--model NAME] [--precision LIST] [options]\n"
            "       fp16probe <model> [options]      (= compare --model <model>)\n"
            "Trains one model under several precision policies side by side: the same initial weights, the same\n"
            "batches in the same order, lockstep turns of K steps per arm; records every arm as a run of one\n"
            "session and prints the comparison (speedup, throughput, memory, energy, loss, accuracy, numerics).\n\n"
            "  --model NAME           %s (default %s)\n"
            "  --precision LIST       comma-separated policies of %s (default %s)\n"
            "  --turn K               steps per arm per turn (default: a turn of about a second)\n"
            "  --steps N              training steps per arm (default %" PRId64 "; %" PRId64 " on a GPU)\n"
            "  --batch N              images per step (default %d; %d on a GPU)\n"
            "  --image-size N         input size, >= 32 (default %d; %d on a GPU)\n"
            "  --data SPEC            synthetic (default), synthetic:N, cifar10:DIR, imagefolder:DIR\n"
            "  --augment on|none      training augmentation (default on)\n"
            "  --shuffle on|off       reshuffle every epoch (default on)\n"
            "  --classes N            output classes (default: the dataset's)\n"
            "  --optimizer NAME       sgd (default), adam, adamw\n"
            "  --lr X                 base learning rate (sgd: 0.1 x batch / 256, adam/adamw 0.001)\n"
            "  --momentum X           sgd momentum (default 0.9)\n"
            "  --weight-decay X       (sgd 5e-4, adam 0, adamw 0.01)\n"
            "  --schedule NAME        constant (default), step, cosine\n"
            "  --warmup N             linear warmup steps from lr/3 (default 10, steps / 4 in a run under 40)\n"
            "  --seed N               initialisation, data and augmentation seed (default 0)\n"
            "  --threads N            BLAS and kernel threads (default: online CPUs)\n"
            "  --device cpu|cuda|auto where to train (default auto: the GPU when one is usable, else one\n"
            "                         line saying why and the CPU; the same for cuda)\n"
            "  --cuda-graph           GPU arms: replay each step as one CUDA graph after the first (sampled,\n"
            "                         evaluated, checkpointed and data-parallel steps run eagerly; no effect on the CPU)\n"
            "  --db FILE              database (default %s; '' records into a temporary file)\n"
            "  --allreduce FMT        under mpirun: what the gradient all-reduce carries, fp32, fp16 or bf16\n"
            "                         (default: each arm's gradient format); --batch is per rank\n"
            "  --sync-bn              under mpirun: batchnorm over the global batch (PyTorch's SyncBatchNorm:\n"
            "                         the ranks' statistics and backward sums all-reduced; identical running\n"
            "                         statistics on every rank); default per-rank statistics; no effect alone\n"
            "  --eval-every N         validate every N steps (default: steps / 2)\n"
            "  --eval-batches N       validation batches per evaluation (default %" PRId64 ", 0: the whole split)\n"
            "  --weights FILE         start every arm from torchvision-named safetensors weights\n"
            "  --no-tui               progress lines instead of the dashboard (also when stdout is not a terminal)\n"
            "  --hist-every N         exponent histograms of every layer every N steps (default %d, or once at\n"
            "                         the last step of a shorter run; 0: off)\n"
            "  --error-every N        per-layer rounding error against the fp32 arm every N steps (default %d, or\n"
            "                         once at the last step of a shorter run; 0: off)\n"
            "  --trace-every N        kernel-level rows every N steps (GPU only; default %d, or once at the last\n"
            "                         step of a shorter run; 0: off)\n",
            fp_model_names_joined(), d.base.arm.model, fp_policy_names_joined(), d.precision, d.base.steps,
            g.base.steps, d.base.batch, g.base.batch, d.base.arm.image_size, g.base.arm.image_size,
            d.base.db ? d.base.db : "none", d.base.eval_batches, FP_PROBE_DEFAULT_HIST_EVERY,
            FP_PROBE_DEFAULT_PRECISION_EVERY, FP_PROBE_DEFAULT_TRACE_EVERY);
}

typedef struct {
    int width;          /* of the arm column in progress lines */
    atomic_int quiet;   /* 1 while the dashboard owns the terminal */
} progress_ctx;

static void progress(const fp_compare_progress *p, void *user)
{
    progress_ctx *pc = user;
    if (atomic_load(&pc->quiet))
        return;
    if (p->failed) {
        printf("%-*s  FAILED after step %" PRId64 ": %s\n", pc->width, p->policy, p->step, p->message);
    } else if (p->is_eval) {
        printf("%-*s  eval step %" PRId64 ": val loss %.4f  top-1 %.2f%%  top-5 %.2f%%\n", pc->width, p->policy,
               p->step, p->val_loss, 100 * p->val_top1, 100 * p->val_top5);
    } else {
        printf("%-*s  step %" PRId64 "/%" PRId64 "  loss %.4f  %.1f img/s", pc->width, p->policy, p->step, p->steps,
               p->loss, p->images_per_s);
        if (isfinite(p->speedup))
            printf("  speedup %.2fx", p->speedup);
        fp_cli_print_progress_tail(p);
    }
    fflush(stdout);
}

/* Whether any arm recorded a step. */
static int any_steps(const fp_compare_result *res)
{
    for (int i = 0; i < res->narms; i++)
        if (res->arms[i].steps_done > 0)
            return 1;
    return 0;
}

/* ---- the summary table ---- */
#define COLW 14

static void row(const char *label, const fp_summary_t *s, char cells[][FP_UNIT_BUF])
{
    printf("  %-22s", label);
    for (size_t i = 0; i < s->narms; i++)
        printf(" %*s", COLW, cells[i]);
    printf("\n");
}

static int print_summary(const char *db, int64_t session, const fp_compare_result *res)
{
    fp_reader_t *r;
    if (fp_reader_open_snapshot(&r, db))
        return cli_error(1, "compare: summary: %s", fp_error_message());
    fp_summary_t s;
    int rc = fp_summary_load(r, session, -1, &s);
    fp_reader_close(r);
    if (rc)
        return cli_error(1, "compare: summary: %s", fp_error_message());
    const fp_arm_t *R = &s.arms[s.ref];
    printf("\nsummary: %s, session %" PRId64 " (%s), reference %s, timing after %zu warm-up steps\n", s.model,
           s.session.id, fp_run_status_name(res->status), R->run.policy, R->warmup);
    char (*c)[FP_UNIT_BUF] = calloc(s.narms, sizeof *c);
    if (!c) {
        fp_summary_free(&s);
        return cli_error(1, "compare: out of memory");
    }
    printf("  %-22s", "");
    for (size_t i = 0; i < s.narms; i++)
        printf(" %*s", COLW, s.arms[i].run.policy);
    printf("\n");
#define ROW(label, expr)                                \
    do {                                                \
        for (size_t i = 0; i < s.narms; i++) {          \
            const fp_arm_t *a = &s.arms[i];             \
            (void)a;                                    \
            expr;                                       \
        }                                               \
        row(label, &s, c);                              \
    } while (0)
    ROW("status", snprintf(c[i], FP_UNIT_BUF, "%s", a->run.status));
    ROW("steps", snprintf(c[i], FP_UNIT_BUF, "%zu", a->nsteps));
    ROW("median step time", fp_fmt_ns(c[i], a->median_ns));
    ROW("speedup", fp_fmt_ratio(c[i], a->speedup));
    for (size_t i = 0; i < s.narms; i++)   /* "emulated on the CPU: ..." once, under the speedups */
        if (*fp_summary_speed_note(&s.arms[i])) {
            printf("  %-22s %s\n", "", fp_summary_speed_note(&s.arms[i]));
            break;
        }
    ROW("throughput (img/s)", fp_fmt_num(c[i], a->samples_per_s, 1));
    ROW("peak memory", fp_fmt_bytes(c[i], a->mem_peak));
    ROW("memory ratio", fp_fmt_ratio(c[i], a->mem_ratio));
    ROW("energy / step (J)", fp_fmt_num(c[i], a->energy_per_step, 2));
    ROW("energy ratio", fp_fmt_ratio(c[i], a->energy_ratio));
    ROW("final train loss", fp_fmt_num(c[i], a->final_loss, 4));
    ROW("val top-1", fp_summary_fmt_val_top1(c[i], a));
    ROW("top-1 gap", a->is_ref ? (void)snprintf(c[i], FP_UNIT_BUF, "-") : (void)fp_fmt_signed(c[i], a->top1_gap, 2, "pt"));
    ROW("skipped steps", snprintf(c[i], FP_UNIT_BUF, "%" PRId64, a->skipped));
    ROW("final loss scale", fp_summary_fmt_loss_scale(c[i], a));
#undef ROW
    free(c);
    fp_summary_print_precision(stdout, &s);
    char note[256];
    for (size_t i = 0; i < s.narms; i++)
        if (fp_summary_val_note(&s.arms[i], note, sizeof note))
            printf("  %s\n", note);
    for (size_t i = 0; i < s.narms; i++)
        if (s.arms[i].run.failure[0] && strcmp(s.arms[i].run.status, "finished") != 0)
            printf("  %s %s: %s\n", s.arms[i].run.policy, s.arms[i].run.status, s.arms[i].run.failure);
    fp_summary_free(&s);
    return 0;
}

/* ---- the run: on a terminal the dashboard in this thread while the arms train in another ---- */
typedef struct {
    fp_compare *c;
    fp_compare_result *res;
    int rc;
} run_job;

static void *run_thread(void *arg)
{
    run_job *j = arg;
    j->rc = fp_compare_run(j->c, j->res);
    return NULL;
}

static void stop_training(void *arg)
{
    fp_compare_request_stop(arg);
}

/* Runs the opened comparison c to its end: on a terminal the dashboard here, the arms in another thread. */
static int run_comparison(fp_compare *c, const fp_compare_config *cfg, fp_compare_result *res, progress_ctx *pc,
                          int tui)
{
    run_job job = {c, res, FP_OK};
    pthread_t th;
    if (!tui || !cfg->base.db || pthread_create(&th, NULL, run_thread, &job) != 0) {
        int rc = fp_compare_run(c, res);
        fp_compare_close(c);
        return rc;
    }
    atomic_store(&pc->quiet, 1);
    fp_tui_options to;
    fp_tui_options_init(&to);
    to.db_path = cfg->base.db;
    to.session = fp_compare_session(c);
    to.owns_training = 1;
    to.stop_training = stop_training;
    to.stop_arg = c;
    int trc = fp_tui_run(&to);
    atomic_store(&pc->quiet, 0);
    if (trc < 0)   /* no usable terminal: the progress lines take over */
        fprintf(stderr, "fp16probe: compare: dashboard: %s; showing progress lines\n", fp_error_message());
    pthread_join(th, NULL);
    fp_compare_close(c);
    if (job.rc)
        fp_fail(job.rc, "%s", res->message);
    return job.rc;
}

static int is_model(const char *name)
{
    for (const char *const *n = fp_model_names(); *n; n++)
        if (strcmp(*n, name) == 0)
            return 1;
    return 0;
}

/* compare's own options (the rest are train_options.h's) */
typedef struct {
    int no_tui, turn;
} compare_args;

static int compare_arg(void *ctx, int argc, char **argv, int *i)
{
    compare_args *c = ctx;
    const char *a = argv[*i], *v = NULL;
    int m;
    if (strcmp(a, "--no-tui") == 0)
        c->no_tui = 1;
    else if ((m = cli_option(argc, argv, i, "--turn", &v)) != 0)
        return m < 0 || fp_cli_parse_int("compare", "--turn", v, 1, 1 << 20, &c->turn);
    else
        return cli_error(2, "compare: unexpected argument '%s' (see fp16probe compare --help)", a);
    return 0;
}

int cmd_compare(int argc, char **argv)
{
    fp_train_options o;
    fp_train_options_init(&o, "compare");
    compare_args ca = {0, -1};
    if (argc > 0 && is_model(argv[0]))   /* fp16probe <model> [options] */
        o.model = argv[0];
    int st = fp_train_options_args(&o, argc, argv, usage, compare_arg, &ca);
    if (st >= 0)
        return st;
    int no_tui = ca.no_tui, turn = ca.turn;
    /* The library's defaults (realistic sizes on a GPU, the embedded run on a CPU), what the user gave over them. */
    const int gpu = fp_train_options_pick_device(&o, "auto");
    if (gpu > 1)
        return 2;
    fp_compare_config cfg;
    if (gpu)
        fp_compare_config_default_gpu(&cfg);
    else
        fp_compare_config_default(&cfg);
    if (turn >= 0)
        cfg.turn = turn;
    if (fp_train_options_apply(&o, &cfg) || fp_train_options_dist(&o, &cfg))
        return 2;
    const int rank = fp_dist_rank(o.dist);
    if (rank != 0)
        no_tui = 1;   /* rank 0 shows the run; the others train their shards */

    /* No database given: record into a temporary one (the summary is computed from it). */
    char tmpdb[64] = "";
    if (!cfg.base.db) {
        const char *td = getenv("TMPDIR");
        snprintf(tmpdb, sizeof tmpdb, "%s/fp16probe-compare-XXXXXX", td && strlen(td) < 30 ? td : "/tmp");
        int fd = mkstemp(tmpdb);
        if (fd < 0)
            return cli_error(1, "compare: cannot create a temporary database %s", tmpdb);
        close(fd);
        unlink(tmpdb);
        cfg.base.db = tmpdb;
    }
    progress_ctx pc = {4, 0};
    cfg.progress = progress;
    cfg.progress_user = &pc;

    fp_env_set_threads(cfg.base.arm.threads);
    fp_store_install_signal_handlers();
    fp_compare_result res;
    fp_compare *c = NULL;
    int rc = fp_compare_open(&c, &cfg, &res);
    if (!(rc && res.usage_error)) {   /* arguments good: the device line (a usage error stays one line) */
        fp_train_options_device_note(&o);
        for (int i = 0; i < res.narms; i++)
            if ((int)strlen(res.arms[i].policy) > pc.width)
                pc.width = (int)strlen(res.arms[i].policy);
    }
    if (rc == FP_OK)
        rc = run_comparison(c, &cfg, &res, &pc, !no_tui && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO));
    int status = 0;
    if (rank != 0) {   /* data parallel: rank 0 recorded and sums up; a failure here is said here */
        if (rc)
            status = cli_error(1, "compare: rank %d: %s", rank, res.message);
    } else if (rc && res.ranks > 1)
        status = cli_error(1, "compare: rank 0: %s", res.message);
    else if (rc && res.usage_error)
        status = cli_error(2, "compare: %s", res.message);
    else if (rc && res.session_id <= 0)
        status = cli_error(1, "compare: %s", res.message);
    else if (rc && !any_steps(&res)) {   /* every arm failed at its first step: one line, the runs recorded failed */
        status = cli_error(1, "compare: %s", res.message);
        if (!tmpdb[0])
            printf("session %" PRId64 " in %s (its runs failed before the first step)\n", res.session_id, cfg.base.db);
    } else {
        if (rc)
            fprintf(stderr, "fp16probe: compare: %s\n", res.message);
        int sst = print_summary(cfg.base.db, res.session_id, &res);
        for (int i = 0; i < res.narms; i++)
            fp_cli_print_dist_summary(&cfg, &res, i);
        const int sig = fp_store_signalled();   /* 128 + the signal, as the shell reports one; the dashboard's stop 130 */
        status = res.status == FP_RUN_INTERRUPTED ? (sig ? 128 + sig : 130) : (rc || res.nfailed || sst) ? 1 : 0;
        if (!tmpdb[0])
            printf("session %" PRId64 " in %s\n", res.session_id, cfg.base.db);
    }
    if (tmpdb[0])
        fp_db_remove(tmpdb);
    return fp_train_options_dist_end(&o, status);
}
