/* store_cli.c — option matching, integer values and read-only database opening shared by the
 * commands that read the store (store_cli.h).
 * Promise: every failure is one "fp16probe: ..." line on stderr. */
#include "store_cli.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "error.h"

int cli_option(int argc, char **argv, int *i, const char *name, const char **value)
{
    size_t len = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, len) != 0)
        return 0;
    if (a[len] == '=') {
        *value = a + len + 1;
        return 1;
    }
    if (a[len] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        cli_error(2, "%s: option %s needs a value", argv[0], name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int cli_options(int argc, char **argv, int *i, const cli_opt_t *opts)
{
    int o = 0;
    for (; opts->name && o == 0; opts++)
        o = cli_option(argc, argv, i, opts->name, opts->value);
    return o;
}

static int is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

int cli_is_decimal(const char *s, int integer)
{
    const char *p = s + (*s == '-');
    int digits = 0;
    for (; is_digit(*p); p++)
        digits++;
    if (!integer && *p == '.')
        for (p++; is_digit(*p); p++)
            digits++;
    if (!digits)
        return 0;
    if (!integer && (*p == 'e' || *p == 'E')) {
        p += 1 + (p[1] == '+' || p[1] == '-');
        if (!is_digit(*p))
            return 0;
        while (is_digit(*p))
            p++;
    }
    return *p == '\0';
}

int cli_integer(const char *s, long long min, long long *out)
{
    if (!cli_is_decimal(s, 1))
        return -1;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno || v < min)
        return -1;
    *out = v;
    return 0;
}

int cli_open_reader(const char *cmd, const char *path, fp_reader_t **r)
{
    (void)cmd;
    if (fp_reader_open_snapshot(r, path) != FP_OK) {
        cli_error(1, "%s", fp_error_message());
        return 1;
    }
    return 0;
}
