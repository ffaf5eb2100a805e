/* rapl.c — CPU package energy from Linux powercap (<root>/intel-rapl:N/energy_uj), unwrapped with
 * max_energy_range_uj. Promises: sub-zones and "psys" are not double counted; an unreadable tree is
 * "unavailable" with a reason and every reading is NaN (NULL), never 0. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "probe/probe.h"

#define MAX_ZONES 16

typedef struct {
    char path[512];         /* .../energy_uj */
    uint64_t max_range;     /* max_energy_range_uj; 0 unknown */
    uint64_t last;          /* last reading */
    uint64_t total;         /* unwrapped microjoules since open */
} zone_t;

struct fp_rapl {
    zone_t z[MAX_ZONES];
    int nz;
    int available;
    char reason[256];
    double at_begin, step_j;
};

static int read_u64(const char *path, uint64_t *v)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    unsigned long long x;
    int ok = fscanf(f, "%llu", &x) == 1;
    fclose(f);
    if (!ok)
        return -1;
    *v = x;
    return 0;
}

/* "intel-rapl:N" exactly (a package zone, not "intel-rapl:N:M"). */
static int is_package_zone(const char *name)
{
    const char *p = "intel-rapl:";
    size_t n = strlen(p);
    if (strncmp(name, p, n) != 0 || !name[n])
        return 0;
    for (const char *c = name + n; *c; c++)
        if (*c < '0' || *c > '9')
            return 0;
    return 1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int fp_rapl_open(fp_rapl **out, const char *root)
{
    fp_rapl *r = calloc(1, sizeof *r);
    *out = r;
    if (!r)
        return fp_fail(FP_ENOMEM, "rapl: out of memory");
    r->step_j = NAN;
    if (!root)
        root = "/sys/class/powercap";
    DIR *d = opendir(root);
    if (!d) {
        snprintf(r->reason, sizeof r->reason, "%s not readable (no powercap)", root);
        return FP_OK;
    }
    char *names[MAX_ZONES];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < MAX_ZONES)
        if (is_package_zone(e->d_name) && (names[nn] = strdup(e->d_name)))
            nn++;
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, cmp_str);
    char first_err[256] = "";
    for (int i = 0; i < nn; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s/name", root, names[i]);
        FILE *f = fopen(p, "r");
        char zname[64] = "";
        if (f) {
            if (!fgets(zname, sizeof zname, f))
                zname[0] = 0;
            fclose(f);
        }
        if (strncmp(zname, "psys", 4) == 0)
            continue;   /* the whole platform: would count the packages twice */
        zone_t *z = &r->z[r->nz];
        snprintf(z->path, sizeof z->path, "%s/%s/energy_uj", root, names[i]);
        if (read_u64(z->path, &z->last) != 0) {
            if (!first_err[0])
                snprintf(first_err, sizeof first_err, "%s not readable (root only on most kernels since 2020)",
                         z->path);
            continue;
        }
        snprintf(p, sizeof p, "%s/%s/max_energy_range_uj", root, names[i]);
        if (read_u64(p, &z->max_range) != 0)
            z->max_range = 0;
        r->nz++;
    }
    for (int i = 0; i < nn; i++)
        free(names[i]);
    if (r->nz == 0) {
        snprintf(r->reason, sizeof r->reason, "%s", first_err[0] ? first_err : "no RAPL package zone under powercap");
        return FP_OK;
    }
    r->available = 1;
    return FP_OK;
}

void fp_rapl_close(fp_rapl *r) { free(r); }
int fp_rapl_available(const fp_rapl *r) { return r && r->available; }
const char *fp_rapl_reason(const fp_rapl *r) { return !r ? "no RAPL" : r->available ? "" : r->reason; }
int fp_rapl_zone_count(const fp_rapl *r) { return r ? r->nz : 0; }

double fp_rapl_energy_j(fp_rapl *r)
{
    if (!r || !r->available)
        return NAN;
    uint64_t total = 0;
    for (int i = 0; i < r->nz; i++) {
        zone_t *z = &r->z[i];
        uint64_t v;
        if (read_u64(z->path, &v) != 0)
            return NAN;
        uint64_t d;
        if (v >= z->last)
            d = v - z->last;
        else if (z->max_range > z->last)   /* wrapped once: counter runs 0 .. max_range */
            d = z->max_range - z->last + v;
        else
            d = v;   /* unknown range: count from zero */
        z->total += d;
        z->last = v;
        total += z->total;
    }
    return (double)total * 1e-6;
}

static unsigned rapl_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)step;
    (void)loss_scale;
    fp_rapl *r = self;
    r->at_begin = fp_rapl_energy_j(r);
    return 0;
}

static void rapl_step_end(void *self, int64_t step)
{
    (void)step;
    fp_rapl *r = self;
    double e = fp_rapl_energy_j(r);
    r->step_j = isnan(e) || isnan(r->at_begin) ? NAN : e - r->at_begin;
}

static const fp_probe_ops rapl_ops = {"rapl", rapl_step_begin, rapl_step_end, NULL, NULL, NULL};

int fp_rapl_attach(fp_rapl *r, fp_probe *p)
{
    if (!r || !r->available)
        return fp_fail(FP_EUNAVAIL, "rapl: %s", fp_rapl_reason(r));
    return fp_probe_add(p, &rapl_ops, r);
}

double fp_rapl_step_j(const fp_rapl *r) { return r && r->available ? r->step_j : NAN; }
