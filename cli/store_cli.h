/* store_cli.h — what the store commands (ls, export) share: option matching for "--name VALUE" and
 * "--name=VALUE", and opening the database read-only with the error printed. */
#ifndef FP_CLI_STORE_CLI_H
#define FP_CLI_STORE_CLI_H

#include "store_reader.h"

/* When argv[*i] is option `name` ("--db"), store its value in *value, advance *i past it, return 1;
 * return 0 when it is another argument; -1 (error printed) when the value is missing. */
int cli_option(int argc, char **argv, int *i, const char *name, const char **value);
/* Open `path` as a one-shot reader; prints the error and returns 1 on failure, 0 on success. */
int cli_open_reader(const char *cmd, const char *path, fp_reader_t **r);

#endif
