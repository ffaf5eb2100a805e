/* test_tui_fixture.c — writes the dashboard's fixture database (tui_testutil.h) for the shell tests:
 * `test_tui_fixture FILE [two|one|failed]`. Exit 0 on success, 1 with a message otherwise. */
#include <stdio.h>
#include <string.h>
#include "error.h"
#include "tui_testutil.h"

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: test_tui_fixture FILE [two|one|failed]\n");
        return 2;
    }
    tt_opts_t o = {.arms = 2, .steps = TT_STEPS, .status = FP_RUN_FINISHED};
    if (argc == 3 && strcmp(argv[2], "one") == 0)
        o.arms = 1;
    if (argc == 3 && strcmp(argv[2], "failed") == 0)
        o.status = FP_RUN_FAILED;
    if (tt_write_fixture(argv[1], &o) != FP_OK) {
        fprintf(stderr, "test_tui_fixture: %s\n", fp_error_message());
        return 1;
    }
    return 0;
}
