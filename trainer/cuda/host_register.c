/* host_register.c — host memory page-locked in place for every CUDA backend instance of the process
 * (backend_cuda.h fp_backend_cuda_host_register / _unregister / _registered): a table of the ranges locked with
 * cudaHostRegister, looked up by each upload (backend_cuda_internal.h fp_bcu_host_holds) to DMA straight from
 * them. Promise: a refused registration changes nothing but the refusal count (uploads from it stay staged);
 * unregistering waits for the device first, so no copy out of the range still runs. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "trainer/cuda/backend_cuda_internal.h"

/* A failed runtime call is remembered by cudaGetLastError, which the next launch check reads: forgotten. */
static int forget_error(void)
{
    (void)cudaGetLastError();
    return 0;
}

/* The ranges fp_backend_cuda_host_register locked, for every instance of the process (the registration is the
 * process's: cudaHostRegisterDefault under unified addressing is portable), looked up by every upload. */
static struct {
    pthread_mutex_t lock;
    struct { uintptr_t base; size_t bytes; } *r;
    int n, cap;
    size_t bytes;
    long long refused;
} hreg = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0};

/* Index of the registered range that overlaps [x, x + bytes) (-1: none). Under hreg.lock. */
static int hreg_find(uintptr_t x, size_t bytes)
{
    for (int i = 0; i < hreg.n; i++)
        if (x < hreg.r[i].base + hreg.r[i].bytes && hreg.r[i].base < x + bytes)
            return i;
    return -1;
}

int fp_bcu_host_holds(const void *src, size_t bytes)
{
    uintptr_t x = (uintptr_t)src;
    pthread_mutex_lock(&hreg.lock);
    int i = hreg.n ? hreg_find(x, bytes) : -1;
    int in = i >= 0 && x >= hreg.r[i].base && x - hreg.r[i].base + bytes <= hreg.r[i].bytes;
    pthread_mutex_unlock(&hreg.lock);
    return in;
}

/* Physical memory of the machine (0: unknown): no range larger than it can be locked. */
static size_t phys_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

/* The current device can page-lock host memory in place (cudaDevAttrHostRegisterSupported). */
static int can_register(void)
{
    int dev = 0, ok = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&ok, cudaDevAttrHostRegisterSupported, dev) !=
                                                 cudaSuccess)
        return forget_error();
    return ok != 0;
}

int fp_backend_cuda_host_register(void *p, size_t bytes)
{
    uintptr_t x = (uintptr_t)p;
    size_t phys = phys_bytes();
    pthread_mutex_lock(&hreg.lock);
    int ok = p && bytes && x + bytes > x && (!phys || bytes <= phys) && hreg_find(x, bytes) < 0;
    if (ok && hreg.n == hreg.cap) {
        int cap = hreg.cap ? 2 * hreg.cap : 16;
        void *r = realloc(hreg.r, (size_t)cap * sizeof *hreg.r);
        ok = r != NULL;
        if (ok) {
            hreg.r = r;
            hreg.cap = cap;
        }
    }
    /* the driver pins every page now (faulting in those never touched): the cost of a registration */
    ok = ok && can_register() && (cudaHostRegister(p, bytes, cudaHostRegisterDefault) == cudaSuccess || forget_error());
    if (ok) {
        hreg.r[hreg.n].base = x;
        hreg.r[hreg.n].bytes = bytes;
        hreg.n++;
        hreg.bytes += bytes;
    } else {
        hreg.refused++;
    }
    pthread_mutex_unlock(&hreg.lock);
    return ok;
}

void fp_backend_cuda_host_unregister(void *p)
{
    pthread_mutex_lock(&hreg.lock);
    for (int i = 0; p && i < hreg.n; i++) {
        if (hreg.r[i].base != (uintptr_t)p)
            continue;
        if (cudaDeviceSynchronize() != cudaSuccess)   /* no copy out of it still runs (an error: the device is gone) */
            forget_error();
        if (cudaHostUnregister(p) != cudaSuccess)
            forget_error();
        hreg.bytes -= hreg.r[i].bytes;
        hreg.r[i] = hreg.r[--hreg.n];
        break;
    }
    if (!hreg.n) {
        free(hreg.r);
        hreg.r = NULL;
        hreg.cap = 0;
    }
    pthread_mutex_unlock(&hreg.lock);
}

void fp_backend_cuda_host_registered(int *ranges, size_t *bytes, long long *refused)
{
    pthread_mutex_lock(&hreg.lock);
    if (ranges)
        *ranges = hreg.n;
    if (bytes)
        *bytes = hreg.bytes;
    if (refused)
        *refused = hreg.refused;
    pthread_mutex_unlock(&hreg.lock);
}
