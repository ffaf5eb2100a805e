/* replay_main.c — the fuzz targets without a fuzzer, for `make check` (any compiler, with or without
 * sanitizers): replay_<name> feeds every file of its committed corpus (FUZZ_SRCDIR/tests/fuzz/<name>/,
 * or the files and directories named on the command line) to LLVMFuzzerTestOneInput once, in name
 * order, one TAP line per file. A crash, a sanitizer report or a leak fails the test, which is how a
 * fixed fuzz finding stays fixed: put its reproducer in the corpus. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

typedef struct {
    char **v;
    size_t n, cap;
} list;

static void add(list *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v)
            abort();
    }
    if (!(l->v[l->n++] = strdup(s)))
        abort();
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* path: a file is added; a directory adds its regular files (not hidden, not recursive), sorted. */
static int collect(list *l, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        add(l, path);
        return 0;
    }
    DIR *d = opendir(path);
    if (!d)
        return -1;
    size_t first = l->n;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            add(l, p);
    }
    closedir(d);
    qsort(l->v + first, l->n - first, sizeof *l->v, cmp);
    return 0;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (!strncmp(base, "lt-", 3))
        base += 3;
    const char *name = !strncmp(base, "replay_", 7) ? base + 7 : base;
    list files = {0};
    int bad = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            if (collect(&files, argv[i]) != 0) {
                fprintf(stderr, "%s: cannot read %s\n", base, argv[i]);
                bad = 1;
            }
    } else {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/tests/fuzz/%s", FUZZ_SRCDIR, name);
        if (collect(&files, dir) != 0 || files.n == 0) {
            printf("1..1\nnot ok 1 - corpus %s is missing or empty\n", dir);
            return 1;
        }
    }
    printf("1..%zu\n", files.n);
    fflush(stdout);
    for (size_t i = 0; i < files.n; i++) {
        size_t len = 0;
        uint8_t *data = fz_slurp(files.v[i], &len);
        const char *shown = strrchr(files.v[i], '/');
        shown = shown ? shown + 1 : files.v[i];
        if (!data) {
            printf("not ok %zu - %s: cannot read\n", i + 1, shown);
            bad = 1;
        } else {
            /* an exact-size copy, as libFuzzer gives: ASan sees a read one byte past the end */
            uint8_t *exact = malloc(len ? len : 1);
            if (!exact)
                abort();
            memcpy(exact, data, len);
            LLVMFuzzerTestOneInput(exact, len);
            free(exact);
            printf("ok %zu - %s %s (%zu bytes)\n", i + 1, name, shown, len);
        }
        fflush(stdout);
        free(data);
        free(files.v[i]);
    }
    free(files.v);
    return bad;
}
