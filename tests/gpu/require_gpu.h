/* require_gpu.h — what every GPU test does first: skip the whole program, with its reason as the TAP
 * skip line, when built without CUDA or when no GPU is usable (lib/gpu_detect.h). */
#ifndef FP_TESTS_REQUIRE_GPU_H
#define FP_TESTS_REQUIRE_GPU_H

#include "gpu_detect.h"
#include "tap.h"

static inline void tu_require_gpu(void)
{
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    if (!fp_gpu_compiled())
        tap_skip_all("built without CUDA");
    if (!gpu.available)
        tap_skip_all(gpu.reason);
}

#endif
