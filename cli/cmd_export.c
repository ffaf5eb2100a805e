/* cmd_export.c — `fp16probe export [--db FILE] --run ID --table NAME [--csv FILE|-]`: one table of a
 * run as RFC 4180 CSV. Read-only on the database; an output file is written atomically
 * (lib/atomic_file.h): if export fails it is neither created nor replaced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "atomic_file.h"
#include "commands.h"
#include "error.h"
#include "store.h"
#include "store_cli.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: fp16probe export [--db FILE] --run ID --table NAME [--csv FILE|-]\n"
            "Write one table of run ID from FILE (default ./" FP_STORE_DEFAULT_PATH ") as CSV (RFC 4180,\n"
            "header row, CRLF line ends) to the --csv file or standard output ('-', the default).\n"
            "tables: %s\n"
            "or: fp16probe export [--db FILE] [--session ID] [--steps N] --chrome-trace FILE (Chrome Trace JSON)\n",
            fp_reader_table_list());
}

int cmd_export(int argc, char **argv)
{
    const char *db = FP_STORE_DEFAULT_PATH, *run_s = NULL, *table = NULL, *csv = "-";
    for (int i = 1; i < argc; i++)   /* the Chrome trace mode: cli/cmd_trace.c */
        if (strncmp(argv[i], "--chrome-trace", 14) == 0 && (argv[i][14] == '\0' || argv[i][14] == '='))
            return cmd_export_chrome_trace(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        const cli_opt_t opts[] = {{"--db", &db}, {"--run", &run_s}, {"--table", &table}, {"--csv", &csv}, {NULL, NULL}};
        int o = cli_options(argc, argv, &i, opts);
        if (o < 0)
            return 2;
        if (o == 0)
            return cli_error(2, "export: unexpected argument '%s' (see 'fp16probe export --help')", argv[i]);
    }
    if (!run_s || !table)
        return cli_error(2, "export: --run ID and --table NAME are required (see 'fp16probe export --help')");
    long long run;
    if (cli_integer(run_s, 1, &run))
        return cli_error(2, "export: --run takes a positive run id, not '%s'", run_s);
    if (!fp_reader_table_known(table))
        return cli_error(2, "export: unknown table '%s'; valid tables: %s", table, fp_reader_table_list());
    fp_reader_t *r;
    if (cli_open_reader("export", db, &r))
        return 1;
    fp_run_row_t row;
    if (fp_reader_run(r, run, &row) != FP_OK) {
        fp_reader_close(r);
        return cli_error(1, "%s", fp_error_message());
    }
    if (strcmp(csv, "-") == 0) {
        int rc = fp_reader_export_csv(r, run, table, stdout);
        fp_reader_close(r);
        if (rc != FP_OK && ferror(stdout))   /* the output failed: name it, the cause is in the message */
            return cli_error(1, "export: standard output: %s", fp_error_message());
        return rc == FP_OK ? 0 : cli_error(1, "export: %s", fp_error_message());
    }
    fp_afile_t out;
    if (fp_afile_open(&out, csv) != FP_OK) {
        fp_reader_close(r);
        return cli_error(1, "export: %s", fp_error_message());
    }
    int rc = fp_reader_export_csv(r, run, table, out.f);
    fp_reader_close(r);
    if (rc != FP_OK) {
        int output = ferror(out.f);   /* the CSV file failed (a full disk), not the database */
        fp_afile_abort(&out);
        if (output)
            return cli_error(1, "export: %s: %s", csv, fp_error_message());
        return cli_error(1, "export: %s", fp_error_message());
    }
    if (fp_afile_commit(&out) != FP_OK)
        return cli_error(1, "export: %s", fp_error_message());
    return 0;
}
