/* test_store_fixture.c — writes the deterministic store fixture of store_testutil.h (session
 * "fixture", runs 1 fp32 and 2 fp16 of resnet18, 20 steps, 6 layers) to the path given, for the
 * shell tests of `ls` and `export`; with --damage-runs COPY also a copy whose runs table has a damaged
 * page (tu_damage_table_page). Exit 0 on success, 1 with a message otherwise. */
#include <stdio.h>
#include <string.h>
#include "error.h"
#include "store_testutil.h"

int main(int argc, char **argv)
{
    if (argc != 2 && !(argc == 4 && strcmp(argv[2], "--damage-runs") == 0)) {
        fprintf(stderr, "usage: test_store_fixture FILE [--damage-runs COPY]\n");
        return 2;
    }
    int64_t runs[2];
    if (tu_write_fixture(argv[1], 20, 6, runs) != FP_OK) {
        fprintf(stderr, "test_store_fixture: %s\n", fp_error_message());
        return 1;
    }
    if (argc == 4 && tu_damage_table_page(argv[1], argv[3], "runs") < 0) {
        fprintf(stderr, "test_store_fixture: cannot write the damaged copy %s\n", argv[3]);
        return 1;
    }
    return 0;
}
