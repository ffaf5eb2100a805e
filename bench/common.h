/* bench/common.h — helpers the benchmarks share: a qsort comparator for medians and the scratch
 * database in $TMPDIR (its path and removal with its -wal / -shm side files); the clock is lib/clock.h.
 * Benchmarks print figures only; nothing here decides pass or fail. */
#ifndef FP_BENCH_COMMON_H
#define FP_BENCH_COMMON_H

#include <stddef.h>

/* qsort comparator for doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);
/* "$TMPDIR/<stem>_<pid>.db" (/tmp when TMPDIR is unset or empty) into path[size]. */
void bench_db_path(char *path, size_t size, const char *stem);

#endif
