/* main.c — the fp16probe command: global options (--help, --version), the process-wide signal
 * dispositions, the BLAS kernels' one restart, and dispatch to the subcommand table of commands.c. */
#include "config.h"
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "commands.h"
#include "trainer/model.h"
#include "trainer/run/environment.h"

int cli_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fp16probe: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: fp16probe <command> [options]\n"
            "       fp16probe --help | --version\n\n"
            "fp16probe trains a model in fp32 and in fp16/bf16 side by side, under probes, and\n"
            "records speed, memory, energy and numerics into one SQLite file.\n\n"
            "commands:\n");
    for (size_t i = 0; i < fp_command_count; i++)
        fprintf(to, "  %-10s %s\n", fp_commands[i].name, fp_commands[i].summary);
    fprintf(to, "\nRun 'fp16probe <command> --help' for a command's options.\n");
}

static void list_commands(FILE *to)
{
    for (size_t i = 0; i < fp_command_count; i++)
        fprintf(to, "%s%s", i ? ", " : "", fp_commands[i].name);
    fputc('\n', to);
}

int main(int argc, char **argv)
{
    /* A write past `ulimit -f` fails with EFBIG (the store and the reports say "file size limit") instead of
     * killing the process silently with runs left `running` and temporary files behind. */
    signal(SIGXFSZ, SIG_IGN);
    fp_env_blas_core_restart(argv);   /* once, before anything: OpenBLAS's kernels (trainer/run/blas_core.c) */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("fp16probe %s\n", PACKAGE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < fp_command_count; i++)
        if (strcmp(cmd, fp_commands[i].name) == 0)
            return fp_commands[i].run(argc - 1, argv + 1);
    for (const char *const *m = fp_model_names(); *m; m++)   /* fp16probe <model> = compare --model <model> */
        if (strcmp(cmd, *m) == 0)
            return cmd_compare(argc - 1, argv + 1);
    fprintf(stderr, "fp16probe: unknown command '%s'; valid commands: ", cmd);
    list_commands(stderr);
    return 2;
}
