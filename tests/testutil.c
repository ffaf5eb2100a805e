/* testutil.c — the scratch-file helpers of testutil.h (the casts and generators are inline there).
 * Promise: failures are reported by return value (NULL / -1), never by exiting. */
#include "testutil.h"
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

char *tu_mkdir(void)
{
    const char *base = getenv("TMPDIR");
    char *dir = malloc(4096);
    snprintf(dir, 4096, "%s/fp16probe-store-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        free(dir);
        return NULL;
    }
    chmod(dir, 0755);
    return dir;
}

void tu_rmdir(char *dir)
{
    if (!dir)
        return;
    chmod(dir, 0755);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = tu_path(dir, e->d_name);
        chmod(p, 0755);
        if (remove(p) != 0) {   /* a sub-directory: one more level */
            DIR *d2 = opendir(p);
            struct dirent *e2;
            while (d2 && (e2 = readdir(d2)) != NULL) {
                char *p2 = tu_path(p, e2->d_name);
                if (e2->d_name[0] != '.')
                    remove(p2);
                free(p2);
            }
            if (d2)
                closedir(d2);
            rmdir(p);
        }
        free(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    free(dir);
}

char *tu_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int tu_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return fclose(f) == 0 && w == len ? 0 : -1;
}

char *tu_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b)
        b[n] = 0;
    fclose(f);
    if (len)
        *len = b ? (size_t)n : 0;
    return b;
}

int tu_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

size_t tu_edge_expand(float *out, const float *base, size_t nbase, const uint32_t *bits, size_t nbits)
{
    size_t n = 0;
    for (size_t i = 0; i < nbase; i++) {
        float v[3] = {base[i], nextafterf(base[i], -INFINITY), nextafterf(base[i], INFINITY)};
        for (int j = 0; j < 3; j++) {
            out[n++] = v[j];
            out[n++] = -v[j];
        }
    }
    for (size_t i = 0; i < nbits; i++) {
        out[n++] = tu_u2f(bits[i]);
        out[n++] = tu_u2f(bits[i] | 0x80000000u);
    }
    return n;
}
