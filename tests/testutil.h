/* testutil.h — helpers any test or benchmark may use: float <-> bits casts, the deterministic random
 * generators and arrays (each caller keeps its own state and seed, so its stream stays fixed), the relative
 * L2 error of two arrays, finite-difference gradient checks, the FP_EINVAL check, and scratch files (a
 * temporary directory, paths in it, whole-file write and read, counting entries). */
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

/* xorshift32 (Marsaglia: 13, 17, 5); the state must not be 0. */
static inline uint32_t tu_xorshift32(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* xorshift32's top 24 bits turned into a float uniform in [-1, 1), in float arithmetic. */
static inline float tu_uniform32_pm1(uint32_t *s)
{
    return (float)(tu_xorshift32(s) >> 8) / 16777216.0f * 2.0f - 1.0f;
}

/* n floats (room for one at least) from tu_uniform_pm1 on the caller's stream s, malloc'd. */
float *tu_rand_array(size_t n, uint64_t *s);

/* Relative L2 error ||a - b|| / ||b||, summed in double; ||a - b|| itself when b is all zeros. */
double tu_rel_l2(const float *a, const float *b, size_t n);

/* Gradient checks. tu_central_diffs: out[i] = (f(v + h e_i) - f(v - h e_i)) / 2h for each of v[0..n), v +- h
 * rounded to float, the rest in double; f reads v through ctx; v is left as it was. tu_count_bad: how many
 * elements have |got - base - want| > abs_tol + rel_tol |want| (NaN counts), the worst such error in *worst
 * (base: what the gradient held before an accumulating backward). */
void tu_central_diffs(double *out, float *v, size_t n, float h, double (*f)(void *ctx), void *ctx);
int tu_count_bad(const float *got, float base, const double *want, size_t n, double abs_tol, double rel_tol,
                 double *worst);

/* A TAP check that rc is FP_EINVAL with a message; clears the error. */
void tu_check_einval(int rc, const char *what);

/* Edge-value sets for conversion tests: appends to out each base value and its two float neighbours,
 * each with both signs, then each bit pattern with both signs; returns how many were written
 * (6 * nbase + 2 * nbits). */
size_t tu_edge_expand(float *out, const float *base, size_t nbase, const uint32_t *bits, size_t nbits);

/* A fresh scratch directory under $TMPDIR (or /tmp), mode 0755, malloc'd; NULL on failure. */
char *tu_mkdir(void);
/* Removes dir and everything under it, at any depth (even what a test made unreadable), and frees dir;
 * 0 when all of it is gone, -1 otherwise (and for NULL). */
int tu_rmdir(char *dir);
char *tu_path(const char *dir, const char *name);   /* malloc'd "dir/name" */
int tu_exists(const char *path);
int tu_write_file(const char *path, const void *data, size_t len);   /* 0, or -1 on any failure */
/* The whole file, malloc'd and NUL-terminated (len, when not NULL, gets its size); NULL on failure. */
char *tu_slurp(const char *path, size_t *len);
/* Entries in dir other than "." and ".."; -1 when it cannot be read. */
int tu_count_entries(const char *dir);

#endif
