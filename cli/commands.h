/* commands.h — the table of fp16probe subcommands. Each command parses its own options, runs,
 * and returns the process exit status (0 ok, 1 failure, 2 usage error). */
#ifndef FP_CLI_COMMANDS_H
#define FP_CLI_COMMANDS_H

#include <stddef.h>

typedef struct {
    const char *name;
    const char *summary;                 /* one line for --help */
    int (*run)(int argc, char **argv);   /* argv[0] is the command name */
} fp_command_t;

extern const fp_command_t fp_commands[];
extern const size_t fp_command_count;

/* Print "fp16probe: <msg>" on stderr (one line) and return status. */
int cli_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Commands (one file each under cli/). */
int cmd_devices(int argc, char **argv);
int cmd_formats(int argc, char **argv);
int cmd_ls(int argc, char **argv);       /* cmd_ls.c */
int cmd_export(int argc, char **argv);   /* cmd_export.c */
int cmd_export_chrome_trace(int argc, char **argv);   /* cmd_trace.c (export --chrome-trace) */
int cmd_report(int argc, char **argv);   /* cmd_report.c */
int cmd_gate(int argc, char **argv);     /* cmd_gate.c */
int cmd_models(int argc, char **argv);   /* cmd_models.c */
int cmd_train(int argc, char **argv);    /* cmd_train.c */
int cmd_compare(int argc, char **argv);  /* cmd_compare.c (also `fp16probe <model>`) */
int cmd_tui(int argc, char **argv);      /* cmd_tui.c */

#endif
