/* testutil.c — the scratch-file helpers, the relative L2 error and the gradient and FP_EINVAL checks of
 * testutil.h (the casts and generators are inline there). Promise: failures are reported by return value
 * (NULL / -1) or as TAP results, never by exiting. */
#include "testutil.h"
#include "error.h"
#include "tap.h"
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
    snprintf(dir, 4096, "%s/fp16probe-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        free(dir);
        return NULL;
    }
    chmod(dir, 0755);
    return dir;
}

/* path and, when it is a directory, everything under it; each directory is made 0755 first, so that one a
 * test left unreadable or unwritable goes too. */
static int rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode))
        return remove(path);
    chmod(path, 0755);
    int rc = 0;
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = tu_path(path, e->d_name);
        rc |= rmtree(p);
        free(p);
    }
    if (d)
        closedir(d);
    return rmdir(path) == 0 && d ? rc : -1;
}

int tu_rmdir(char *dir)
{
    if (!dir)
        return -1;
    int rc = rmtree(dir);
    free(dir);
    return rc;
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

float *tu_rand_array(size_t n, uint64_t *s)
{
    float *a = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; a && i < n; i++)
        a[i] = tu_uniform_pm1(s);
    return a;
}

double tu_rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

void tu_central_diffs(double *out, float *v, size_t n, float h, double (*f)(void *ctx), void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        float keep = v[i];
        v[i] = keep + h;
        double lp = f(ctx);
        v[i] = keep - h;
        double lm = f(ctx);
        v[i] = keep;
        out[i] = (lp - lm) / (2.0 * h);
    }
}

int tu_count_bad(const float *got, float base, const double *want, size_t n, double abs_tol, double rel_tol,
                 double *worst)
{
    int bad = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - base - want[i]);
        if (!(err <= abs_tol + rel_tol * fabs(want[i])))
            bad++;
        if (err > *worst || err != err)
            *worst = err;
    }
    return bad;
}

void tu_check_einval(int rc, const char *what)
{
    tap_ok(rc == FP_EINVAL && fp_error_message()[0] != '\0', "%s -> FP_EINVAL (%s)", what, fp_error_message());
    fp_error_clear();
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
