/* store_cli.h — what the commands that read the store (ls, export, report, gate) share: option
 * matching for "--name VALUE" and "--name=VALUE", integer option values, and opening the database
 * read-only with the error printed. */
#ifndef FP_CLI_STORE_CLI_H
#define FP_CLI_STORE_CLI_H

#include "store_reader.h"

/* When argv[*i] is option `name` ("--db"), store its value in *value, advance *i past it, return 1;
 * return 0 when it is another argument; -1 (error printed) when the value is missing. */
int cli_option(int argc, char **argv, int *i, const char *name, const char **value);
/* One option a command takes and where its value goes; a list of them ends with {NULL, NULL}. */
typedef struct {
    const char *name;
    const char **value;
} cli_opt_t;
/* cli_option for each of opts in turn: 1 when argv[*i] is one of them, 0 when none, -1 as above. */
int cli_options(int argc, char **argv, int *i, const cli_opt_t *opts);
/* Plain decimal, as a user types a number: an optional '-', digits (unless `integer`: an optional fraction
 * and exponent); no spaces, '+', hex, inf or nan, which strtoll / strtod would take. 1 when s is one. */
int cli_is_decimal(const char *s, int integer);
/* A whole-string plain decimal integer >= min into *out: 0, or -1 (nothing printed) when s is not one. */
int cli_integer(const char *s, long long min, long long *out);
/* Open `path` as a one-shot reader; prints the error and returns 1 on failure, 0 on success. */
int cli_open_reader(const char *cmd, const char *path, fp_reader_t **r);

#endif
