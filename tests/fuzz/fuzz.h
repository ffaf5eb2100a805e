/* fuzz.h — what the fuzz targets in tests/fuzz/ share. Each fuzz_<name>.c defines libFuzzer's entry
 * point (and optionally its initializer); it is linked twice: with libFuzzer (`make fuzz`, a clang build
 * with -fsanitize=fuzzer-no-link, tests/fuzz.mk) and with replay_main.c (`make check`: every file of the
 * committed corpus tests/fuzz/<name>/ replayed once, one TAP line each). A target must not leak, print
 * or exit; it may abort (a failed invariant) only for a real bug. */
#ifndef FP_FUZZ_H
#define FP_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A private scratch directory for this process (on /dev/shm when there is one, else $TMPDIR or /tmp),
 * created on first use and removed with its files at exit. */
const char *fz_dir(void);
/* "scratch/name" in a static buffer per call site's choice: copies into buf (cap bytes). */
char *fz_path(char *buf, size_t cap, const char *name);
/* Writes data to path (created or truncated); 0, or -1 on failure. */
int fz_write(const char *path, const void *data, size_t n);
/* The whole file (malloc'd) and its length, or NULL. */
uint8_t *fz_slurp(const char *path, size_t *len);

/* With FUZZ_DEBUG set in the environment: prints "what: <the calling thread's fp_error_message()>" to
 * stderr (why an input was refused; for looking at seeds and reproducers, not while fuzzing). */
void fz_debug(const char *what);

/* A bug in the code under test: print why and abort (libFuzzer reports it with the input). */
#define FZ_CHECK(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fz_fail(__FILE__, __LINE__, #cond);                                                    \
    } while (0)
void fz_fail(const char *file, int line, const char *what) __attribute__((noreturn));

#endif
