/* environment.h — the machine a run uses, as the runs table records it: the CPU's and the BLAS library's
 * names (and the BLAS kernels this CPU should get), and the threads of the CPU kernels. Promise: nothing here fails; what cannot be read is named
 * generically ("cpu", "CBLAS"). */
#ifndef FP_ENVIRONMENT_H
#define FP_ENVIRONMENT_H

#include <stddef.h>

/* "cpu: <model name>" from /proc/cpuinfo (or "cpu"), into buf. */
const char *fp_env_cpu_name(char *buf, size_t size);
/* The BLAS library's own description (openblas_get_config()) or "CBLAS". */
const char *fp_env_blas_name(void);
/* Threads for the CPU kernels, GEMMs included (trainer/cpu/gemm.h fp_gemm_use_pool: the kernels' pool
 * gets them, the BLAS library one); returns the count set. */
int fp_env_set_threads(int threads);
/* The online CPUs (at least 1). */
int fp_env_online_cpus(void);

/* blas_core.c: OpenBLAS's kernel set in use ("Haswell", "SkylakeX", ...; NULL: not OpenBLAS). */
const char *fp_env_blas_core(void);
/* The kernel set to ask OpenBLAS for (through OPENBLAS_CORETYPE, read when the library loads) when it fell back
 * to a generic one on a CPU with AVX / AVX2 / AVX-512 and OPENBLAS_CORETYPE is unset; NULL: keep what it has. */
const char *fp_env_blas_core_upgrade(void);
/* With such an upgrade, start the program again (execv of /proc/self/exe with argv, or alone when NULL) with
 * OPENBLAS_CORETYPE set to it and FP16PROBE_BLAS_CORE marking the second start (the library reads the variable
 * only when it loads); call first thing in main. Returns only when nothing was to be done or the exec failed. */
void fp_env_blas_core_restart(char **argv);

#endif
