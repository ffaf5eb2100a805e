/* gpu_detect.c — GPU availability through the CUDA runtime (when built with CUDA).
 * Promise: on a machine with no driver or no device this returns available = 0 and a one-line
 * reason; it never exits or prints. The result is computed once (thread-safe) and cached. */
#include "config.h"
#include "gpu_detect.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static fp_gpu_info_t cached;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

int fp_gpu_compiled(void)
{
#ifdef HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int fp_gpu_driver_compat(int driver, int runtime, char *why, unsigned long why_size)
{
    int dmaj = driver / 1000, dmin = driver % 1000 / 10, rmaj = runtime / 1000, rmin = runtime % 1000 / 10;
    if (driver >= runtime) {
        snprintf(why, why_size, "driver CUDA %d.%d >= runtime %d.%d", dmaj, dmin, rmaj, rmin);
        return 1;
    }
    if (dmaj == rmaj && rmaj >= 11) {
        snprintf(why, why_size, "driver CUDA %d.%d < runtime %d.%d: minor-version compatibility", dmaj, dmin,
                 rmaj, rmin);
        return 1;
    }
    snprintf(why, why_size, "the NVIDIA driver supports CUDA %d.%d but this build needs %d.x (at least %d.0)",
             dmaj, dmin, rmaj, rmaj);
    return 0;
}

static void detect(void)
{
    memset(&cached, 0, sizeof cached);
#ifdef HAVE_CUDA
    cudaRuntimeGetVersion(&cached.runtime_version);
    if (cudaDriverGetVersion(&cached.driver_version) != cudaSuccess || cached.driver_version == 0) {
        snprintf(cached.reason, sizeof cached.reason, "no NVIDIA driver found (libcuda.so.1 not loadable)");
        return;
    }
    if (!fp_gpu_driver_compat(cached.driver_version, cached.runtime_version, cached.compat, sizeof cached.compat)) {
        snprintf(cached.reason, sizeof cached.reason, "%s", cached.compat);
        return;
    }
    cudaError_t err = cudaGetDeviceCount(&cached.device_count);
    if (err != cudaSuccess || cached.device_count == 0) {
        snprintf(cached.reason, sizeof cached.reason, "no usable CUDA device (%s)",
                 err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
        cached.device_count = 0;
        return;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
        snprintf(cached.name, sizeof cached.name, "%s", prop.name);
        cached.compute_major = prop.major;
        cached.compute_minor = prop.minor;
    }
    if (cudaDeviceGetPCIBusId(cached.pci_bus_id, (int)sizeof cached.pci_bus_id, 0) != cudaSuccess)
        cached.pci_bus_id[0] = 0;
    cached.available = 1;
#else
    snprintf(cached.reason, sizeof cached.reason, "built without CUDA (configure --with-cuda)");
#endif
}

void fp_gpu_detect(fp_gpu_info_t *info)
{
    pthread_once(&detect_once, detect);
    *info = cached;
}
