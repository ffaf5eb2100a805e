/* fuzz_util.c — the fuzz targets' scratch directory and file helpers (fuzz.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "error.h"
#include "fuzz.h"

static char scratch[256];
static pid_t owner;

static void remove_scratch(void)
{
    if (!scratch[0] || getpid() != owner)
        return;
    DIR *d = opendir(scratch);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", scratch, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(scratch);
}

const char *fz_dir(void)
{
    if (scratch[0])
        return scratch;
    struct stat st;
    const char *base = getenv("TMPDIR");
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
        base = "/dev/shm";
    else if (!base || !*base)
        base = "/tmp";
    snprintf(scratch, sizeof scratch, "%s/fp16probe-fuzz.XXXXXX", base);
    if (!mkdtemp(scratch)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    owner = getpid();
    atexit(remove_scratch);
    return scratch;
}

char *fz_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", fz_dir(), name);
    return buf;
}

int fz_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = n ? fwrite(data, 1, n, f) : 0;
    return (fclose(f) == 0 && put == n) ? 0 : -1;
}

uint8_t *fz_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *nb = realloc(buf, cap *= 2);
        if (!nb)
            free(buf);
        buf = nb;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

void fz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: invariant failed: %s\n", file, line, what);
    abort();
}

void fz_debug(const char *what)
{
    static int on = -1;
    if (on < 0)
        on = getenv("FUZZ_DEBUG") != NULL;
    if (on)
        fprintf(stderr, "%s: %s\n", what, fp_error_message());
}
