/* summary_kernels.c — a run's kernels as both reports list them (summary.h fp_run_kernels_t): the kernel
 * summary over all its steps with the tensor-core flags. Promise: freeing is safe after any outcome; a kernel
 * without a flag is unknown (-1), never "no". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "summary.h"

int fp_summary_run_kernels(fp_reader_t *r, int64_t run, fp_run_kernels_t *rk)
{
    memset(rk, 0, sizeof *rk);
    int rc = fp_reader_kernel_summary(r, run, 0, INT64_MAX, &rk->k, &rk->n);
    if (rc == FP_OK)
        rc = fp_reader_kernel_flags(r, run, &rk->fl, &rk->nf);
    return rc;
}

void fp_run_kernels_free(fp_run_kernels_t *rk)
{
    free(rk->k);
    free(rk->fl);
    memset(rk, 0, sizeof *rk);
}

int fp_run_kernels_tc(const fp_run_kernels_t *rk, size_t j)
{
    int tc = -1;
    for (size_t q = 0; q < rk->nf; q++)
        if (strcmp(rk->fl[q].name, rk->k[j].name) == 0)
            tc = rk->fl[q].tensor_core;
    return tc;
}
