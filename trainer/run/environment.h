/* environment.h — the machine a run uses, as the runs table records it: the CPU's and the BLAS library's
 * names, and the threads of the CPU kernels. Promise: nothing here fails; what cannot be read is named
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

#endif
