/* cmd_gate.c — `fp16probe gate [--baseline A.db] [--candidate B.db] [options]`: the CI gate
 * (reports/gate.h). Prints a table of every check; exit 0 pass, 1 regression, 2 inconclusive, 3 error
 * (usage errors included). --junit / --markdown files are written atomically; the Markdown is also
 * appended to $GITHUB_STEP_SUMMARY when that is set. */
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

enum { GATE_ERROR = 3 };

static void usage(FILE *to)
{
    fputs("usage: fp16probe gate [--baseline A.db] [--candidate B.db] [--session ID] [--baseline-session ID]\n"
          "                      [--warmup N] [--min-steps N] [--alpha P] [--max-slowdown PCT]\n"
          "                      [--min-speedup X] [--max-loss-gap X] [--max-acc-drop PT]\n"
          "                      [--max-skip-rate PCT] [--max-overflows N] [--junit FILE] [--markdown FILE]\n"
          "Check the candidate session (default: the latest in --candidate, or --db, default ./" FP_STORE_DEFAULT_PATH ")\n"
          "against the baseline's arms of the same model and policy, and against thresholds:\n"
          "  step time      Mann-Whitney U on step times after warm-up; fails when p < --alpha (0.01)\n"
          "                 and the median is more than --max-slowdown percent (5) slower\n"
          "  speedup        low-precision arms over fp32 >= --min-speedup (default 1.0 on a GPU; on the\n"
          "                 CPU only when given)\n"
          "  loss gap       final loss - fp32 final loss <= --max-loss-gap (0.1)\n"
          "  accuracy drop  fp32 val top-1 - arm val top-1 <= --max-acc-drop points (1.0)\n"
          "  skipped steps  <= --max-skip-rate percent of steps (5)\n"
          "  overflow       activation/weight overflows + NaN/Inf + NaN events <= --max-overflows (0)\n"
          "  status         the run did not fail\n"
          "Fewer than --min-steps (20) step times after warm-up (default: 10% of steps, 5..100) is\n"
          "inconclusive. Without --baseline only the threshold checks run.\n"
          "exit: 0 pass, 1 regression, 2 inconclusive, 3 error\n", to);
}

static int num(const char *opt, const char *s, double lo, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo) {
        cli_error(GATE_ERROR, "gate: %s takes a number >= %g, not '%s'", opt, lo, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int load(const char *path, const char *session_s, int64_t warmup, fp_summary_t *s, char *label, size_t cap)
{
    long long sess = 0;
    if (session_s && cli_integer(session_s, 1, &sess))
        return cli_error(GATE_ERROR, "gate: a session id is a positive integer, not '%s'", session_s);
    fp_reader_t *r;
    if (fp_reader_open_snapshot(&r, path) != FP_OK)
        return cli_error(GATE_ERROR, "gate: %s", fp_error_message());
    int rc = fp_summary_load(r, (int64_t)sess, warmup, s);
    fp_reader_close(r);
    if (rc != FP_OK)
        return cli_error(GATE_ERROR, "gate: %s", fp_error_message());
    snprintf(label, cap, "%s session %lld (%s", path, (long long)s->session.id, s->model);
    for (size_t i = 0; i < s->narms; i++) {
        size_t len = strlen(label);
        snprintf(label + len, cap - len, "%s%s", i ? ", " : ": ", s->arms[i].run.policy);
    }
    size_t len = strlen(label);
    snprintf(label + len, cap - len, ")");
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

int cmd_gate(int argc, char **argv)
{
    const char *base_db = NULL, *cand_db = FP_STORE_DEFAULT_PATH, *sess = NULL, *base_sess = NULL;
    const char *junit = NULL, *markdown = NULL;
    fp_gate_opts_t o;
    fp_gate_defaults(&o);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        const char *v = NULL;
        int k;
        double d;
        const cli_opt_t paths[] = {{"--baseline", &base_db}, {"--candidate", &cand_db}, {"--db", &cand_db},
                                   {"--session", &sess}, {"--baseline-session", &base_sess}, {"--junit", &junit},
                                   {"--markdown", &markdown}, {NULL, NULL}};
        if ((k = cli_options(argc, argv, &i, paths)) != 0) {
            if (k < 0)
                return GATE_ERROR;
            continue;
        }
        static const char *const numeric[] = {"--warmup", "--min-steps", "--alpha", "--max-slowdown", "--min-speedup",
                                              "--max-loss-gap", "--max-acc-drop", "--max-skip-rate", "--max-overflows"};
        int which = -1;
        for (int q = 0; q < 9 && which < 0; q++) {
            k = cli_option(argc, argv, &i, numeric[q], &v);
            if (k < 0)
                return GATE_ERROR;
            if (k > 0)
                which = q;
        }
        if (which < 0)
            return cli_error(GATE_ERROR, "gate: unexpected argument '%s' (see 'fp16probe gate --help')", argv[i]);
        if (num(numeric[which], v, 0, &d))
            return GATE_ERROR;
        int integral = which == 0 || which == 1 || which == 8;
        if (integral && d != floor(d))
            return cli_error(GATE_ERROR, "gate: %s takes an integer, not '%s'", numeric[which], v);
        switch (which) {
        case 0: o.warmup = (int64_t)d; break;
        case 1: o.min_steps = (size_t)d; break;
        case 2:
            if (d <= 0 || d >= 1)
                return cli_error(GATE_ERROR, "gate: --alpha takes a probability between 0 and 1, not '%s'", v);
            o.alpha = d;
            break;
        case 3: o.max_slowdown = d / 100; break;
        case 4: o.min_speedup = d; break;
        case 5: o.max_loss_gap = d; break;
        case 6: o.max_acc_drop = d; break;
        case 7: o.max_skip_rate = d / 100; break;
        default: o.max_overflows = (int64_t)d; break;
        }
    }
    if (base_sess && !base_db)
        return cli_error(GATE_ERROR, "gate: --baseline-session needs --baseline");
    if ((junit && !*junit) || (markdown && !*markdown))
        return cli_error(GATE_ERROR, "gate: --junit and --markdown take a non-empty path");
    fp_summary_t base, cand;
    fp_gate_result_t res;
    char cand_label[256], base_label[256] = "";
    if (load(cand_db, sess, o.warmup, &cand, cand_label, sizeof cand_label))
        return GATE_ERROR;
    if (base_db && load(base_db, base_sess, o.warmup, &base, base_label, sizeof base_label)) {
        fp_summary_free(&cand);
        return GATE_ERROR;
    }
    int rc = fp_gate_run(base_db ? &base : NULL, &cand, &o, &res);
    fp_summary_free(&cand);
    if (base_db)
        fp_summary_free(&base);
    if (rc != FP_OK)
        return cli_error(GATE_ERROR, "gate: %s", fp_error_message());
    snprintf(res.candidate, sizeof res.candidate, "%s", cand_label);
    snprintf(res.baseline, sizeof res.baseline, "%s", base_label);
    fp_gate_print_table(stdout, &res);
    fflush(stdout);
    int code = fp_gate_exit_code(&res);
    if (junit && write_file(junit, fp_gate_junit, &res))
        code = cli_error(GATE_ERROR, "gate: %s", fp_error_message());
    if (markdown && write_file(markdown, fp_gate_markdown, &res))
        code = cli_error(GATE_ERROR, "gate: %s", fp_error_message());
    const char *summary = getenv("GITHUB_STEP_SUMMARY");
    if (markdown && summary && *summary) {
        FILE *f = fopen(summary, "a");
        if (!f) {
            code = cli_error(GATE_ERROR, "gate: cannot append to $GITHUB_STEP_SUMMARY (%s): %s", summary,
                             strerror(errno));
        } else {
            fp_gate_markdown(f, &res);
            if (fclose(f) != 0)
                code = cli_error(GATE_ERROR, "gate: cannot append to $GITHUB_STEP_SUMMARY (%s)", summary);
        }
    }
    fp_gate_result_free(&res);
    return code;
}
