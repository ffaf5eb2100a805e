/* cmd_report.c — `fp16probe report [--db FILE] [--session ID] [--warmup N] --html FILE [--csv DIR]`:
 * a session as one self-contained HTML file and/or one CSV per view. Exit 0 done, 1 runtime error
 * (one line; no output file left behind), 2 usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "error.h"
#include "reports/dist_report.h"
#include "reports/report.h"
#include "reports/summary.h"
#include "store.h"
#include "store_cli.h"

static void usage(FILE *to)
{
    fputs("usage: fp16probe report [--db FILE] [--session ID] [--warmup N] [--html FILE] [--csv DIR] [--summary]\n"
          "Write session ID (default: the latest) of FILE (default ./" FP_STORE_DEFAULT_PATH ") as a self-contained\n"
          "HTML report (inline SVG charts, no script, no network) and/or CSV files (RFC 4180) in DIR:\n"
          "summary.csv, steps.csv, layers.csv, histograms.csv, kernels.csv, ranks.csv (data parallel: per rank);\n"
          "--summary prints the precision summary (overflow / underflow of the roles that matter over the sampled\n"
          "steps, lost updates, accuracy intervals, notes; for a data-parallel session its ranks, images/s, share of\n"
          "communication, straggler, scaling efficiency and the all-reduce's rounding) to stdout.\n"
          "At least one of --html, --csv, --summary.\n"
          "--warmup N leaves the first N steps of each arm out of timing (default: 10%, 5..100).\n"
          "Outputs are written atomically: on an error none is created or replaced.\n", to);
}

/* Parse a non-negative integer option value; prints the error. */
static int parse_count(const char *cmd, const char *opt, const char *s, int64_t min, int64_t *out)
{
    long long v;
    if (cli_integer(s, min, &v)) {
        cli_error(2, "%s: %s takes an integer >= %lld, not '%s'", cmd, opt, (long long)min, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cmd_report(int argc, char **argv)
{
    const char *db = FP_STORE_DEFAULT_PATH, *session_s = NULL, *warmup_s = NULL, *html = NULL, *csv = NULL;
    int summary = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--summary") == 0) {
            summary = 1;
            continue;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        const cli_opt_t opts[] = {{"--db", &db}, {"--session", &session_s}, {"--warmup", &warmup_s},
                                  {"--html", &html}, {"--csv", &csv}, {NULL, NULL}};
        int o = cli_options(argc, argv, &i, opts);
        if (o < 0)
            return 2;
        if (o == 0)
            return cli_error(2, "report: unexpected argument '%s' (see 'fp16probe report --help')", argv[i]);
    }
    if (!html && !csv && !summary)
        return cli_error(2, "report: nothing to write: give --html FILE and/or --csv DIR (see 'fp16probe report --help')");
    fp_report_opts_t o = {.db_label = db, .session = 0, .warmup = -1, .html = html, .csv_dir = csv};
    if (session_s && parse_count("report", "--session", session_s, 1, &o.session))
        return 2;
    if (warmup_s && parse_count("report", "--warmup", warmup_s, 0, &o.warmup))
        return 2;
    if ((html && !*html) || (csv && !*csv))
        return cli_error(2, "report: --html and --csv take a non-empty path");
    fp_reader_t *r;
    if (cli_open_reader("report", db, &r))
        return 1;
    int rc = html || csv ? fp_report_write(r, &o) : FP_OK;
    if (rc == FP_OK && summary) {
        fp_summary_t sm;
        if ((rc = fp_summary_load(r, o.session, o.warmup, &sm)) == FP_OK) {
            printf("session %lld, %s, reference %s\n", (long long)sm.session.id, sm.model, sm.arms[sm.ref].run.policy);
            fp_summary_print_precision(stdout, &sm);
            fp_dist_summary_t ds;
            if ((rc = fp_dist_summary_load(r, &sm, &ds)) == FP_OK) {
                fp_dist_print(stdout, &sm, &ds);
                fp_dist_summary_free(&ds);
            }
            fp_summary_free(&sm);
        }
    }
    fp_reader_close(r);
    if (rc != FP_OK)
        return cli_error(1, "report: %s", fp_error_message());
    return 0;
}
