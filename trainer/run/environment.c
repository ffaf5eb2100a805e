/* environment.c — the machine a run uses (environment.h): CPU and BLAS names, kernel threads. Promise:
 * every call answers, falling back to a generic name when the system does not say. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "trainer/cpu/gemm.h"
#include "trainer/run/environment.h"

/* OpenBLAS's extension, resolved when the BLAS in use has it (weak: NULL otherwise). */
extern char *openblas_get_config(void) __attribute__((weak));

const char *fp_env_blas_name(void)
{
    if (openblas_get_config) {
        const char *s = openblas_get_config();
        if (s && *s)
            return s;
    }
    return "CBLAS";
}

int fp_env_set_threads(int threads)
{
    return fp_gemm_use_pool(threads);
}

int fp_env_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

const char *fp_env_cpu_name(char *buf, size_t size)
{
    snprintf(buf, size, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return buf;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        char *v = strchr(line, ':');
        if (!v)
            break;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\n")] = '\0';
        snprintf(buf, size, "cpu: %s", v);
        break;
    }
    fclose(f);
    return buf;
}
