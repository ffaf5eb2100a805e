/* bench/common.c — the benchmarks' shared clock, median comparator and scratch-database helpers
 * (see common.h). No state; safe to link into any benchmark. */
#include "bench/common.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

void bench_remove_db(const char *path)
{
    char side[4200];
    remove(path);
    snprintf(side, sizeof side, "%s-wal", path);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", path);
    remove(side);
}
