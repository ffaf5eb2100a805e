/* testutil.h — helpers any test or benchmark may use: float <-> bits casts, the deterministic random
 * generators (each caller keeps its own state and seed, so its stream stays fixed), and scratch files
 * (a temporary directory, paths in it, whole-file write and read, counting entries). */
#ifndef FP_TESTUTIL_H
#define FP_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t tu_f2u(float x) { uint32_t u; memcpy(&u, &x, sizeof u); return u; }
static inline float tu_u2f(uint32_t u) { float x; memcpy(&x, &u, sizeof x); return x; }

/* xorshift64* (Vigna): shifts 12, 25, 27, then the 0x2545F4914F6CDD1D multiplier. */
static inline uint64_t tu_xorshift64s(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* splitmix64: any state, including 0, is fine. */
static inline uint64_t tu_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Plain xorshift64 (13, 7, 17) turned into a float uniform in [-1, 1). */
static inline float tu_uniform_pm1(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Edge-value sets for conversion tests: appends to out each base value and its two float neighbours,
 * each with both signs, then each bit pattern with both signs; returns how many were written
 * (6 * nbase + 2 * nbits). */
size_t tu_edge_expand(float *out, const float *base, size_t nbase, const uint32_t *bits, size_t nbits);

/* A fresh scratch directory under $TMPDIR (or /tmp), mode 0755; removed by tu_rmdir. */
char *tu_mkdir(void);
void tu_rmdir(char *dir);                 /* removes it and its files (and one sub-level); frees */
char *tu_path(const char *dir, const char *name);   /* malloc'd "dir/name" */
int tu_exists(const char *path);
int tu_write_file(const char *path, const void *data, size_t len);   /* 0, or -1 on any failure */
/* The whole file, malloc'd and NUL-terminated (len, when not NULL, gets its size); NULL on failure. */
char *tu_slurp(const char *path, size_t *len);
/* Entries in dir other than "." and ".."; -1 when it cannot be read. */
int tu_count_entries(const char *dir);

#endif
