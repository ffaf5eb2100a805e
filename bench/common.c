/* bench/common.c — the benchmarks' shared median comparator and scratch-database helpers
 * (see common.h; the clock is lib/clock.h). No state; safe to link into any benchmark. */
#include "bench/common.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_db_path(char *path, size_t size, const char *stem)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, size, "%s/%s_%d.db", tmp && *tmp ? tmp : "/tmp", stem, (int)getpid());
}

