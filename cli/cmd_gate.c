/* cmd_gate.c — `fp16probe gate [--baseline A.db] [--candidate B.db] [options]`: the CI gate
 * (reports/gate.h). Prints a table of every check; exit 0 pass, 1 regression, 2 inconclusive (only with
 * --inconclusive fail), 3 error (usage errors included), 4 not comparable. --junit / --markdown / --json
 * files are written atomically; the Markdown is also appended to $GITHUB_STEP_SUMMARY when that is
 * set, and GitHub annotations are printed when $GITHUB_ACTIONS is set (GitHub sets "true"). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "error.h"
#include "atomic_file.h"
#include "reports/gate.h"
#include "store.h"
#include "store_cli.h"

static void usage(FILE *to)
{
    fputs("usage: fp16probe gate [--baseline A.db] [--candidate B.db] [--session ID] [--baseline-session ID]\n"
          "                      [--inconclusive pass|fail] [--allow-config-diff KEY,...] [thresholds]\n"
          "                      [--junit FILE] [--markdown FILE] [--json FILE]\n"
          "Checks the candidate session (default: the latest in --candidate, or --db, default ./" FP_STORE_DEFAULT_PATH ")\n"
          "on its own and, with --baseline, against the baseline's arms of the same policy.\n"
          "\n"
          "Comparable first: model, policies, batch, image size, data, steps, optimizer and its config,\n"
          "lr, device (and threads) and fp16probe version must match and every baseline run must have\n"
          "finished, else the gate says NOT COMPARABLE (exit 4), names what differs and runs no baseline\n"
          "comparison; --allow-config-diff KEY,... accepts differences on purpose (keys: model, policy,\n"
          "batch, image_size, data, steps, optimizer, lr, device, version). Another seed is comparable.\n"
          "\n"
          "On the candidate alone, per arm (fp32 is the reference):\n"
          "  status          only a finished run passes (failed, interrupted or killed, running fail)\n"
          "  speedup         low-precision arm over fp32 >= --min-speedup (1.0 on a GPU; on the CPU only\n"
          "                  when given)\n"
          "  loss_gap        final loss - fp32's <= --max-loss-gap (0.1); above it a failure only when\n"
          "                  significant against the standard error of the last-N-steps means\n"
          "  acc_drop        fp32 val top-1 - the arm's <= --max-acc-drop points (1.0); above it a failure\n"
          "                  only when a two-proportion test on the evaluated images is significant\n"
          "  skipped         skipped steps after GradScaler's calibration <= --max-skip-rate percent (5);\n"
          "                  calibration skips are reported apart\n"
          "  overflow        activation/weight overflows + NaN/Inf + NaN events <= --max-overflows (0)\n"
          "  lost_updates    % of weights with a nonzero gradient left unchanged <= --max-lost-updates (1)\n"
          "Against the baseline, per arm:\n"
          "  step_time             step time per image: fails when Mann-Whitney p < --alpha and the median\n"
          "                        is more than --max-slowdown percent (5) slower\n"
          "  loss_vs_base          final loss rise, as loss_gap (--max-loss-gap)\n"
          "  acc_vs_base           val top-1 drop, as acc_drop (--max-acc-drop); against another seed\n"
          "                        these two are inconclusive above their limits, never failures\n"
          "  memory_vs_base        peak memory growth <= --max-mem-growth percent (5)\n"
          "  skipped_vs_base       skip-rate rise after calibration <= --max-skip-rise points (1), failing\n"
          "                        only when significant\n"
          "  lost_updates_vs_base  lost-update rise <= --max-lost-rise points (1)\n"
          "  overflow_vs_base      overflow count rise <= --max-overflows, failing only when significant\n"
          "  comm_share_vs_base    data parallel: rise of the exposed all-reduce share of the step time\n"
          "                        <= --max-comm-rise points (5), failing only when significant\n"
          "  straggler_vs_base     data parallel: rise of the slowest rank's mean step over the fastest's\n"
          "                        <= --max-straggler-rise (0.1, as a ratio), failing only when significant;\n"
          "                        both not comparable when the rank counts differ\n"
          "\n"
          "Statistical tests use --alpha (0.01). Fewer than --min-steps (20) step times after warm-up\n"
          "(--warmup N, default 10% of steps, 5..100) makes a timing check inconclusive; so does a figure\n"
          "above its limit that its sample cannot tell from noise. --inconclusive pass (default) counts\n"
          "those as passes with a warning line; --inconclusive fail as failures (exit 2). JUnit, JSON and\n"
          "Markdown give every check the same verdict as the exit status; with $GITHUB_ACTIONS set,\n"
          "::error / ::warning annotations follow the table, and --markdown is appended to\n"
          "$GITHUB_STEP_SUMMARY.\n"
          "exit: 0 pass, 1 regression, 2 inconclusive (--inconclusive fail), 3 error, 4 not comparable\n",
          to);
}

static int num(const char *opt, const char *s, double lo, double *out)
{
    errno = 0;
    double v = cli_is_decimal(s, 0) ? strtod(s, NULL) : NAN;
    if (errno || !isfinite(v) || v < lo) {
        cli_error(FP_GATE_ERROR, "gate: %s takes a number >= %g, not '%s'", opt, lo, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int load(const char *path, const char *session_s, int64_t warmup, fp_gate_side_t *side)
{
    long long sess = 0;
    if (session_s && cli_integer(session_s, 1, &sess))
        return cli_error(FP_GATE_ERROR, "gate: a session id is a positive integer, not '%s'", session_s);
    if (fp_gate_load(path, (int64_t)sess, warmup, side) != FP_OK)
        return cli_error(FP_GATE_ERROR, "gate: %s", fp_error_message());
    return 0;
}

typedef void (*writer_fn)(FILE *f, const fp_gate_result_t *res);

static int write_file(const char *path, writer_fn fn, const fp_gate_result_t *res)
{
    fp_afile_t a;
    if (fp_afile_open(&a, path) != FP_OK)
        return -1;
    fn(a.f, res);
    int rc = fp_afile_commit(&a);
    fp_afile_abort(&a);
    return rc == FP_OK ? 0 : -1;
}

static int parse_allow(const char *list, unsigned *allow)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    int any = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        int k = fp_gate_key_parse(t);
        if (k < 0)
            return cli_error(FP_GATE_ERROR, "gate: --allow-config-diff: unknown key '%s' (keys: %s)", t,
                             fp_gate_key_list());
        *allow |= 1u << k;
        any = 1;
    }
    if (!any)
        return cli_error(FP_GATE_ERROR, "gate: --allow-config-diff takes keys (%s)", fp_gate_key_list());
    return 0;
}

enum {
    O_WARMUP, O_MIN_STEPS, O_ALPHA, O_SLOWDOWN, O_SPEEDUP, O_LOSS_GAP, O_ACC_DROP, O_SKIP_RATE, O_SKIP_RISE,
    O_OVERFLOWS, O_LOST, O_LOST_RISE, O_MEM_GROWTH, O_COMM_RISE, O_STRAGGLER_RISE, O_COUNT
};
static const char *const numeric[O_COUNT] = {
    "--warmup", "--min-steps", "--alpha", "--max-slowdown", "--min-speedup", "--max-loss-gap", "--max-acc-drop",
    "--max-skip-rate", "--max-skip-rise", "--max-overflows", "--max-lost-updates", "--max-lost-rise",
    "--max-mem-growth", "--max-comm-rise", "--max-straggler-rise"};

static int set_numeric(fp_gate_opts_t *o, int which, const char *v)
{
    double d;
    if (num(numeric[which], v, 0, &d))
        return -1;
    int integral = which == O_WARMUP || which == O_MIN_STEPS || which == O_OVERFLOWS;
    if (integral && (d != floor(d) || d > 1e15))
        return cli_error(-1, "gate: %s takes an integer, not '%s'", numeric[which], v);
    if ((which == O_LOST || which == O_SKIP_RATE) && d > 100)
        return cli_error(-1, "gate: %s takes a percentage (0..100), not '%s'", numeric[which], v);
    switch (which) {
    case O_WARMUP: o->warmup = (int64_t)d; break;
    case O_MIN_STEPS: o->min_steps = (size_t)d; break;
    case O_ALPHA:
        if (d <= 0 || d >= 1)
            return cli_error(-1, "gate: --alpha takes a probability between 0 and 1, not '%s'", v);
        o->alpha = d;
        break;
    case O_SLOWDOWN: o->max_slowdown = d / 100; break;
    case O_SPEEDUP: o->min_speedup = d; break;
    case O_LOSS_GAP: o->max_loss_gap = d; break;
    case O_ACC_DROP: o->max_acc_drop = d; break;
    case O_SKIP_RATE: o->max_skip_rate = d / 100; break;
    case O_SKIP_RISE: o->max_skip_rise = d / 100; break;
    case O_OVERFLOWS: o->max_overflows = (int64_t)d; break;
    case O_LOST: o->max_lost_updates = d; break;
    case O_LOST_RISE: o->max_lost_rise = d; break;
    case O_COMM_RISE: o->max_comm_rise = d; break;
    case O_STRAGGLER_RISE: o->max_straggler_rise = d; break;
    default: o->max_mem_growth = d / 100; break;
    }
    return 0;
}

int cmd_gate(int argc, char **argv)
{
    const char *base_db = NULL, *cand_db = FP_STORE_DEFAULT_PATH, *sess = NULL, *base_sess = NULL;
    const char *junit = NULL, *markdown = NULL, *json = NULL, *inconclusive = NULL, *allow = NULL;
    fp_gate_opts_t o;
    fp_gate_defaults(&o);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        const char *v = NULL;
        int k;
        const cli_opt_t paths[] = {{"--baseline", &base_db}, {"--candidate", &cand_db}, {"--db", &cand_db},
                                   {"--session", &sess}, {"--baseline-session", &base_sess}, {"--junit", &junit},
                                   {"--markdown", &markdown}, {"--json", &json}, {"--inconclusive", &inconclusive},
                                   {"--allow-config-diff", &allow}, {NULL, NULL}};
        if ((k = cli_options(argc, argv, &i, paths)) != 0) {
            if (k < 0)
                return FP_GATE_ERROR;
            continue;
        }
        int which = -1;
        for (int q = 0; q < O_COUNT && which < 0; q++) {
            k = cli_option(argc, argv, &i, numeric[q], &v);
            if (k < 0)
                return FP_GATE_ERROR;
            if (k > 0)
                which = q;
        }
        if (which < 0)
            return cli_error(FP_GATE_ERROR, "gate: unexpected argument '%s' (see 'fp16probe gate --help')", argv[i]);
        if (set_numeric(&o, which, v))
            return FP_GATE_ERROR;
    }
    if (base_sess && !base_db)
        return cli_error(FP_GATE_ERROR, "gate: --baseline-session needs --baseline");
    if ((junit && !*junit) || (markdown && !*markdown) || (json && !*json))
        return cli_error(FP_GATE_ERROR, "gate: --junit, --markdown and --json take a non-empty path");
    if (inconclusive) {
        if (strcmp(inconclusive, "pass") == 0)
            o.inconclusive_fails = 0;
        else if (strcmp(inconclusive, "fail") == 0)
            o.inconclusive_fails = 1;
        else
            return cli_error(FP_GATE_ERROR, "gate: --inconclusive takes pass or fail, not '%s'", inconclusive);
    }
    if (allow && parse_allow(allow, &o.allow))
        return FP_GATE_ERROR;
    fp_gate_side_t base, cand;
    if (load(cand_db, sess, o.warmup, &cand))
        return FP_GATE_ERROR;
    if (base_db && load(base_db, base_sess, o.warmup, &base)) {
        fp_gate_side_free(&cand);
        return FP_GATE_ERROR;
    }
    fp_gate_result_t res;
    int rc = fp_gate_run(base_db ? &base : NULL, &cand, &o, &res);
    fp_gate_side_free(&cand);
    if (base_db)
        fp_gate_side_free(&base);
    if (rc != FP_OK)
        return cli_error(FP_GATE_ERROR, "gate: %s", fp_error_message());
    fp_gate_print_table(stdout, &res);
    const char *gha = getenv("GITHUB_ACTIONS");
    if (gha && *gha && strcmp(gha, "false") != 0)
        fp_gate_github(stdout, &res);
    fflush(stdout);
    char note[2048];
    fp_gate_inconclusive_note(note, sizeof note, &res);
    if (note[0])
        fprintf(stderr, "fp16probe: gate: warning: %s\n", note);
    int code = fp_gate_exit_code(&res);
    if (junit && write_file(junit, fp_gate_junit, &res))
        code = cli_error(FP_GATE_ERROR, "gate: %s", fp_error_message());
    if (markdown && write_file(markdown, fp_gate_markdown, &res))
        code = cli_error(FP_GATE_ERROR, "gate: %s", fp_error_message());
    if (json && write_file(json, fp_gate_json, &res))
        code = cli_error(FP_GATE_ERROR, "gate: %s", fp_error_message());
    const char *summary = getenv("GITHUB_STEP_SUMMARY");
    if (markdown && summary && *summary) {
        FILE *f = fopen(summary, "a");
        if (!f) {
            code = cli_error(FP_GATE_ERROR, "gate: cannot append to $GITHUB_STEP_SUMMARY (%s): %s", summary,
                             strerror(errno));
        } else {
            fp_gate_markdown(f, &res);
            if (fclose(f) != 0)
                code = cli_error(FP_GATE_ERROR, "gate: cannot append to $GITHUB_STEP_SUMMARY (%s)", summary);
        }
    }
    fp_gate_result_free(&res);
    return code;
}
