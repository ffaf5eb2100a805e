/* nvml.c — NVIDIA's management library loaded at run time with dlopen("libnvidia-ml.so.1") and
 * our own declarations of the few functions used (as nvtop does), so no nvml.h is needed to build.
 * Promises: no library / no driver / no device -> "unavailable" with NVML's reason, readings NaN or
 * -1 (NULL), never 0; the sampler thread only reads NVML and queues store records. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "clock.h"
#include "error.h"
#include "probe/probe.h"

/* ---- our declarations (NVML API, nvml.h of driver 450+; values as documented) ---- */
typedef int nvmlReturn_t;                   /* NVML_SUCCESS = 0 */
#define NVML_SUCCESS 0
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;   /* bytes */
} nvmlMemory_t;
#define NVML_TEMPERATURE_GPU 0              /* nvmlTemperatureSensors_t */
#define NVML_CLOCK_SM 1                     /* nvmlClockType_t: GRAPHICS 0, SM 1, MEM 2, VIDEO 3 */
#define NVML_CLOCK_MEM 2

typedef struct {
    nvmlReturn_t (*init)(void);                                              /* nvmlInit_v2 */
    nvmlReturn_t (*shutdown)(void);                                          /* nvmlShutdown */
    nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t *);           /* nvmlDeviceGetHandleByIndex_v2 */
    nvmlReturn_t (*handle_by_bus)(const char *, nvmlDevice_t *);             /* nvmlDeviceGetHandleByPciBusId_v2 */
    nvmlReturn_t (*total_energy)(nvmlDevice_t, unsigned long long *);        /* mJ */
    nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned int *);               /* mW */
    nvmlReturn_t (*memory_info)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int *);          /* deg C */
    nvmlReturn_t (*clock_info)(nvmlDevice_t, int, unsigned int *);           /* MHz */
    nvmlReturn_t (*device_name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*driver_version)(char *, unsigned int);                    /* nvmlSystemGetDriverVersion */
    const char *(*error_string)(nvmlReturn_t);
} nvml_fns;

struct fp_nvml {
    void *lib;
    nvml_fns f;
    int inited;
    nvmlDevice_t dev;
    int device;
    int available;
    char reason[256];
    char name[96], driver[80];
    char bus[32];                   /* the PCI bus id the device was found by ("": by index) */
    /* sampler */
    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    fp_store_t *store;
    int64_t run;                    /* read by the sampler, set by the trainer: atomic */
    int interval_ms;
    uint64_t samples;
};

static const char *nverr(const fp_nvml *nv, nvmlReturn_t r)
{
    static char buf[32];
    if (nv->f.error_string) {
        const char *s = nv->f.error_string(r);
        if (s)
            return s;
    }
    snprintf(buf, sizeof buf, "NVML error %d", r);
    return buf;
}

int fp_nvml_open(fp_nvml **out, const char *lib, int device) { return fp_nvml_open_bus(out, lib, NULL, device); }

int fp_nvml_open_bus(fp_nvml **out, const char *lib, const char *bus, int device)
{
    fp_nvml *nv = calloc(1, sizeof *nv);
    *out = nv;
    if (!nv)
        return fp_fail(FP_ENOMEM, "nvml: out of memory");
    pthread_mutex_init(&nv->mu, NULL);
    pthread_cond_init(&nv->cv, NULL);
    nv->device = device;
    if (!lib)
        lib = "libnvidia-ml.so.1";
    nv->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!nv->lib) {
        const char *e = dlerror();
        snprintf(nv->reason, sizeof nv->reason, "cannot load %s: %s", lib, e ? e : "dlopen failed");
        return FP_OK;
    }
    struct {
        const char *sym;
        void **slot;
    } syms[] = {
        {"nvmlInit_v2", (void **)&nv->f.init},
        {"nvmlShutdown", (void **)&nv->f.shutdown},
        {"nvmlDeviceGetHandleByIndex_v2", (void **)&nv->f.handle_by_index},
        {"nvmlDeviceGetTotalEnergyConsumption", (void **)&nv->f.total_energy},
        {"nvmlDeviceGetPowerUsage", (void **)&nv->f.power_usage},
        {"nvmlDeviceGetMemoryInfo", (void **)&nv->f.memory_info},
        {"nvmlDeviceGetTemperature", (void **)&nv->f.temperature},
        {"nvmlDeviceGetClockInfo", (void **)&nv->f.clock_info},
        {"nvmlDeviceGetName", (void **)&nv->f.device_name},
        {"nvmlSystemGetDriverVersion", (void **)&nv->f.driver_version},
        {"nvmlErrorString", (void **)&nv->f.error_string},
        {"nvmlDeviceGetHandleByPciBusId_v2", (void **)&nv->f.handle_by_bus},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        void *p = dlsym(nv->lib, syms[i].sym);
        memcpy(syms[i].slot, &p, sizeof p);   /* object -> function pointer without a cast warning */
        if (!p && i < 3) {
            snprintf(nv->reason, sizeof nv->reason, "%s lacks %s (driver too old?)", lib, syms[i].sym);
            return FP_OK;
        }
    }
    nvmlReturn_t r = nv->f.init();
    if (r != NVML_SUCCESS) {
        snprintf(nv->reason, sizeof nv->reason, "nvmlInit: %s", nverr(nv, r));
        return FP_OK;
    }
    nv->inited = 1;
    if (bus && bus[0] && nv->f.handle_by_bus) {   /* the device CUDA runs on, whatever NVML's order */
        r = nv->f.handle_by_bus(bus, &nv->dev);
        if (r != NVML_SUCCESS) {
            snprintf(nv->reason, sizeof nv->reason, "nvmlDeviceGetHandleByPciBusId(%s): %s", bus, nverr(nv, r));
            return FP_OK;
        }
        snprintf(nv->bus, sizeof nv->bus, "%s", bus);
    } else {
        r = nv->f.handle_by_index((unsigned)device, &nv->dev);
        if (r != NVML_SUCCESS) {
            snprintf(nv->reason, sizeof nv->reason, "nvmlDeviceGetHandleByIndex(%d): %s", device, nverr(nv, r));
            return FP_OK;
        }
    }
    if (nv->f.device_name && nv->f.device_name(nv->dev, nv->name, sizeof nv->name) != NVML_SUCCESS)
        nv->name[0] = 0;
    if (nv->f.driver_version && nv->f.driver_version(nv->driver, sizeof nv->driver) != NVML_SUCCESS)
        nv->driver[0] = 0;
    nv->available = 1;
    return FP_OK;
}

void fp_nvml_close(fp_nvml *nv)
{
    if (!nv)
        return;
    fp_nvml_stop_sampler(nv);
    if (nv->inited && nv->f.shutdown)
        nv->f.shutdown();
    if (nv->lib)
        dlclose(nv->lib);
    pthread_mutex_destroy(&nv->mu);
    pthread_cond_destroy(&nv->cv);
    free(nv);
}

int fp_nvml_available(const fp_nvml *nv) { return nv && nv->available; }
const char *fp_nvml_reason(const fp_nvml *nv) { return !nv ? "no NVML" : nv->available ? "" : nv->reason; }
const char *fp_nvml_device_name(const fp_nvml *nv) { return nv && nv->available ? nv->name : ""; }
const char *fp_nvml_driver_version(const fp_nvml *nv) { return nv && nv->available ? nv->driver : ""; }

double fp_nvml_energy_j(fp_nvml *nv)
{
    unsigned long long mj;
    if (!nv || !nv->available || !nv->f.total_energy || nv->f.total_energy(nv->dev, &mj) != NVML_SUCCESS)
        return NAN;
    return (double)mj * 1e-3;
}

int fp_nvml_sample(fp_nvml *nv, fp_device_sample_t *s)
{
    memset(s, 0, sizeof *s);
    s->timestamp = fp_clock_wall_ns();
    s->device_id = nv ? nv->device : 0;
    s->power_w = s->energy_j = s->temperature_c = NAN;
    s->mem_used = s->sm_clock_mhz = s->mem_clock_mhz = -1;
    if (!nv || !nv->available)
        return fp_fail(FP_EUNAVAIL, "nvml: %s", fp_nvml_reason(nv));
    unsigned int u;
    nvmlMemory_t mem;
    if (nv->f.power_usage && nv->f.power_usage(nv->dev, &u) == NVML_SUCCESS)
        s->power_w = u * 1e-3;
    s->energy_j = fp_nvml_energy_j(nv);
    if (nv->f.temperature && nv->f.temperature(nv->dev, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS)
        s->temperature_c = u;
    if (nv->f.memory_info && nv->f.memory_info(nv->dev, &mem) == NVML_SUCCESS)
        s->mem_used = (int64_t)mem.used;
    if (nv->f.clock_info && nv->f.clock_info(nv->dev, NVML_CLOCK_SM, &u) == NVML_SUCCESS)
        s->sm_clock_mhz = u;
    if (nv->f.clock_info && nv->f.clock_info(nv->dev, NVML_CLOCK_MEM, &u) == NVML_SUCCESS)
        s->mem_clock_mhz = u;
    return FP_OK;
}

static void *sampler_main(void *arg)
{
    fp_nvml *nv = arg;
    pthread_mutex_lock(&nv->mu);
    while (!nv->stop) {
        pthread_mutex_unlock(&nv->mu);
        fp_device_sample_t s;
        if (fp_nvml_sample(nv, &s) == FP_OK) {
            s.run = __atomic_load_n(&nv->run, __ATOMIC_ACQUIRE);
            if (nv->store)
                fp_store_device_sample(nv->store, &s);
            __atomic_add_fetch(&nv->samples, 1, __ATOMIC_RELAXED);
        }
        struct timespec until = fp_clock_timespec(fp_clock_wall_ns() + nv->interval_ms * FP_NS_PER_MS);
        pthread_mutex_lock(&nv->mu);
        while (!nv->stop && pthread_cond_timedwait(&nv->cv, &nv->mu, &until) == 0)
            ;
    }
    pthread_mutex_unlock(&nv->mu);
    return NULL;
}

int fp_nvml_start_sampler(fp_nvml *nv, fp_store_t *store, int64_t run, int interval_ms)
{
    if (!nv || !nv->available)
        return fp_fail(FP_EUNAVAIL, "nvml: %s", fp_nvml_reason(nv));
    if (nv->running)
        return fp_fail(FP_EINVAL, "nvml: sampler already running");
    nv->store = store;
    fp_nvml_set_run(nv, run);
    nv->interval_ms = interval_ms > 0 ? interval_ms : 100;
    nv->stop = 0;
    if (pthread_create(&nv->thread, NULL, sampler_main, nv) != 0)
        return fp_fail(FP_ENOMEM, "nvml: cannot start the sampler thread");
    nv->running = 1;
    return FP_OK;
}

void fp_nvml_stop_sampler(fp_nvml *nv)
{
    if (!nv || !nv->running)
        return;
    pthread_mutex_lock(&nv->mu);
    nv->stop = 1;
    pthread_cond_signal(&nv->cv);
    pthread_mutex_unlock(&nv->mu);
    pthread_join(nv->thread, NULL);
    nv->running = 0;
}

uint64_t fp_nvml_samples_taken(const fp_nvml *nv) { return nv ? __atomic_load_n(&nv->samples, __ATOMIC_RELAXED) : 0; }

void fp_nvml_set_run(fp_nvml *nv, int64_t run)
{
    if (nv)
        __atomic_store_n(&nv->run, run, __ATOMIC_RELEASE);
}

int64_t fp_nvml_run(const fp_nvml *nv) { return nv ? __atomic_load_n(&nv->run, __ATOMIC_ACQUIRE) : 0; }
