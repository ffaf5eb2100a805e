/* cmd_trace.c — `fp16probe export [--db FILE] [--session ID] [--steps N] --chrome-trace FILE`: a
 * session as Chrome Trace Event JSON for Perfetto / chrome://tracing (reports/trace_chrome.c).
 * Reached from cmd_export.c when --chrome-trace is given. Exit 0, 1 runtime error (no file left
 * behind), 2 usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "error.h"
#include "reports/report.h"
#include "store.h"
#include "store_cli.h"

static int parse_pos(const char *opt, const char *s, long long *out)
{
    if (cli_integer(s, 1, out))
        return cli_error(2, "export: %s takes a positive integer, not '%s'", opt, s), -1;
    return 0;
}

int cmd_export_chrome_trace(int argc, char **argv)
{
    const char *db = FP_STORE_DEFAULT_PATH, *session_s = NULL, *steps_s = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: fp16probe export [--db FILE] [--session ID] [--steps N] --chrome-trace FILE\n"
                   "Write session ID (default: the latest) as Chrome Trace Event JSON: one process per arm, the last\n"
                   "N (default 20) sampled steps with their layers and kernels, counters for loss, step time and\n"
                   "loss scale. Open it in Perfetto (ui.perfetto.dev) or chrome://tracing.\n");
            return 0;
        }
        const cli_opt_t opts[] = {{"--db", &db}, {"--session", &session_s}, {"--steps", &steps_s},
                                  {"--chrome-trace", &out}, {NULL, NULL}};
        int o = cli_options(argc, argv, &i, opts);
        if (o < 0)
            return 2;
        if (o == 0)
            return cli_error(2, "export: unexpected argument '%s' with --chrome-trace (see 'fp16probe export --help')",
                             argv[i]);
    }
    if (!out || !*out)
        return cli_error(2, "export: --chrome-trace takes an output file");
    long long session = 0, steps = 20;
    if (session_s && parse_pos("--session", session_s, &session))
        return 2;
    if (steps_s && parse_pos("--steps", steps_s, &steps))
        return 2;
    fp_reader_t *r;
    if (cli_open_reader("export", db, &r))
        return 1;
    fp_trace_opts_t o = {.session = session, .max_steps = (size_t)steps, .max_counter_points = 0};
    int rc = fp_trace_chrome_write(r, &o, out);
    fp_reader_close(r);
    if (rc != FP_OK)
        return cli_error(1, "export: %s", fp_error_message());
    return 0;
}
