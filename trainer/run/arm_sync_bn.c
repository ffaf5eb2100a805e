/* arm_sync_bn.c — the reduction an arm hands its model for --sync-bn (model.h fp_model_set_bn_reduce): the
 * batchnorm statistics summed over the ranks, MPI on CPU ranks, NCCL on GPU ranks. Promise: every rank sums
 * the same vectors in the same order (the model calls it in its layer order); a dead peer or a NCCL / CUDA
 * error comes back as one line; alone (one rank) the arm never installs it. */
#include "config.h"
#include "error.h"
#include "trainer/run/arm.h"
#ifdef HAVE_CUDA
#include "trainer/backend_cuda.h"
#endif

int fp_arm_bn_reduce(void *ctx, float *buf, size_t count)
{
    fp_arm *a = ctx;
    fp_dist *d = fp_arm_get_config(a)->dist;
    if (!fp_arm_on_device(a))
        return fp_dist_allreduce_sum_f32(d, buf, count);
#ifdef HAVE_NCCL
    return fp_dist_nccl_allreduce_sum_f32(d, buf, count, fp_backend_cuda_stream(fp_model_backend(fp_arm_model(a))));
#else
    return fp_fail(FP_EUNAVAIL, "--sync-bn on GPU ranks needs the NCCL build");
#endif
}
