/* blas_core.c — which OpenBLAS kernels this process runs (environment.h fp_env_blas_core*). OpenBLAS built with
 * DYNAMIC_ARCH (Debian's) picks its kernels from the CPU's identification when it loads; on virtual machines that
 * hide the CPU model it falls back to a generic core (Prescott: SSE3) although the CPU has AVX2 or AVX-512, and
 * every GEMM, the CPU backend's convolutions included, runs 2-4x slower. Promise: a core is proposed only when
 * OpenBLAS chose one of its generic fallbacks, OPENBLAS_CORETYPE is not set (a user's choice always wins), and the
 * CPU and the OS support every instruction the proposed kernels use; otherwise NULL and nothing changes. The
 * restart replaces the process image before anything ran (same pid, arguments and environment plus the two
 * variables), once. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "trainer/run/environment.h"

/* OpenBLAS's extension, resolved when the BLAS in use has it (weak: NULL otherwise). */
extern char *openblas_get_corename(void) __attribute__((weak));

const char *fp_env_blas_core(void)
{
    if (openblas_get_corename) {
        const char *s = openblas_get_corename();
        if (s && *s)
            return s;
    }
    return NULL;
}

/* OpenBLAS's cores that are what its detection falls back to, older than any CPU with AVX. */
static int generic_core(const char *name)
{
    static const char *const generic[] = {"unknown", "katmai", "coppermine", "northwood", "prescott", "banias",
                                          "core2", "penryn", "dunnington", "nehalem", "atom", "athlon", "opteron",
                                          "opteron_sse3", "barcelona", "nano"};
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++)
        if (strcasecmp(name, generic[i]) == 0)
            return 1;
    return 0;
}

const char *fp_env_blas_core_upgrade(void)
{
    const char *now = fp_env_blas_core();
    if (!now || !generic_core(now) || getenv("OPENBLAS_CORETYPE"))
        return NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();   /* libgcc checks the OS saves the wider registers (XGETBV) too */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    if (__builtin_cpu_supports("avx"))
        return "Sandybridge";
#endif
    return NULL;
}

void fp_env_blas_core_restart(char **argv)
{
    const char *core = fp_env_blas_core_upgrade();
    if (!core || getenv("FP16PROBE_BLAS_CORE"))
        return;
    char self[] = "/proc/self/exe", *alone[] = {self, NULL}, path[4096];
    ssize_t len = readlink(self, path, sizeof path - 1);
    if (len <= 0)
        return;
    path[len] = '\0';
    const char *base = strrchr(path, '/');
    if (strstr(base ? base + 1 : path, "ld-linux") || strstr(base ? base + 1 : path, "ld.so"))
        return;   /* started through the dynamic loader (ld.so PROGRAM ...): /proc/self/exe is the loader */
    setenv("OPENBLAS_CORETYPE", core, 1);
    setenv("FP16PROBE_BLAS_CORE", core, 1);
    execv(self, argv && argv[0] ? argv : alone);
    unsetenv("OPENBLAS_CORETYPE");   /* the new start failed: this one goes on as it is */
    unsetenv("FP16PROBE_BLAS_CORE");
}
