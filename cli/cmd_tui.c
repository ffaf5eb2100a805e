/* cmd_tui.c — `fp16probe tui [--db FILE] [--session ID] [--refresh MS] [--no-color] [--ascii]`: the
 * live dashboard attached to a session of a database (the newest by default), reading only the file;
 * `--headless WxH [--keys SCRIPT]` prints one frame as text instead (for scripts and tests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <locale.h>
#include <unistd.h>
#include "commands.h"
#include "error.h"
#include "store.h"
#include "store_cli.h"
#include "tui/tui.h"

static const char usage_text[] =
    "usage: fp16probe tui [--db FILE] [--session ID] [--refresh MS] [--no-color] [--ascii] [--blocks]\n"
    "       fp16probe tui [--db FILE] [--session ID] --headless WxH [--keys SCRIPT]\n"
    "The live dashboard of a session in FILE (default ./" FP_STORE_DEFAULT_PATH "; the newest session unless\n"
    "--session): loss, throughput and speedup, memory and energy, loss scale, the layer table and the\n"
    "histogram of the selected layer. It only reads the file, live or finished. Press ? for the keys.\n"
    "  --refresh MS   poll interval (default 500)\n"
    "  --no-color     no colours          --ascii   ASCII only (also when the locale is not UTF-8)\n"
    "  --blocks       half-block charts instead of braille\n"
    "  --headless WxH print one frame of W columns x H lines as text and exit (no terminal needed)\n"
    "  --keys SCRIPT  keys applied before that frame: characters, <up> <down> <tab> <enter> <C-l>\n"
    "                 <resize WxH>\n"
    "Needs a terminal (TERM set, stdin/stdout a tty) unless --headless; exit 1 otherwise.\n";

static int parse_int(const char *s, long long lo, long long hi, long long *v)
{
    long long x;
    if (cli_integer(s, lo, &x) != 0 || x > hi)
        return -1;
    *v = x;
    return 0;
}

int cmd_tui(int argc, char **argv)
{
    fp_tui_options o;
    fp_tui_options_init(&o);
    o.db_path = FP_STORE_DEFAULT_PATH;
    const char *session = NULL, *refresh = NULL, *headless = NULL, *keys = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--no-color") == 0) {
            o.no_color = 1;
            continue;
        }
        if (strcmp(argv[i], "--ascii") == 0) {
            o.ascii = 1;
            continue;
        }
        if (strcmp(argv[i], "--blocks") == 0) {
            o.chart = FP_TUI_CHART_BLOCK;
            continue;
        }
        int r = cli_option(argc, argv, &i, "--db", &o.db_path);
        if (r == 0)
            r = cli_option(argc, argv, &i, "--session", &session);
        if (r == 0)
            r = cli_option(argc, argv, &i, "--refresh", &refresh);
        if (r == 0)
            r = cli_option(argc, argv, &i, "--headless", &headless);
        if (r == 0)
            r = cli_option(argc, argv, &i, "--keys", &keys);
        if (r < 0)
            return 2;
        if (r == 0)
            return cli_error(2, "tui: unexpected argument '%s' (see 'fp16probe tui --help')", argv[i]);
    }
    long long v;
    if (session) {
        if (parse_int(session, 1, INT64_MAX, &v))
            return cli_error(2, "tui: --session wants a session id, not '%s'", session);
        o.session = v;
    }
    if (refresh) {
        if (parse_int(refresh, 50, 60000, &v))
            return cli_error(2, "tui: --refresh wants milliseconds in 50..60000, not '%s'", refresh);
        o.refresh_ms = (int)v;
    }
    if (access(o.db_path, F_OK) != 0)
        return cli_error(1, "tui: %s: no such file", o.db_path);
    if (headless) {
        int w, h;
        char x;
        if (sscanf(headless, "%dx%d%c", &w, &h, &x) != 2 || w < 1 || h < 1 || w > 1000 || h > 1000)
            return cli_error(2, "tui: --headless wants WxH (e.g. 80x24), not '%s'", headless);
        setlocale(LC_ALL, "");
        setlocale(LC_NUMERIC, "C");
        char *text;
        if (fp_tui_render_text(&o, w, h, keys, &text) != FP_OK)
            return cli_error(1, "tui: %s", fp_error_message());
        fputs(text, stdout);
        free(text);
        return 0;
    }
    int rc = fp_tui_run(&o);
    if (rc < 0)
        return cli_error(1, "tui: %s", fp_error_message());
    return 0;
}
