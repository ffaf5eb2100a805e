/* test_compare_fake_nvml.c — a stand-in libnvidia-ml for the CPU tests of the comparison's NVML use (built
 * as tests/libfake_nvml.so, loaded by path): the few functions probe/nvml.c looks up, a device "Fake GPU"
 * at PCI bus id 0000:65:00.0 whose energy counter rises by exactly 7 mJ per read and whose power reads 250 W. Promise: nothing else;
 * its own declarations, like nvml.c's (NVML_SUCCESS = 0). */
#include <stdio.h>
#include <string.h>

typedef struct {
    unsigned long long total, free, used;
} fake_memory;

static unsigned long long energy_mj = 1000000;   /* since "driver load" */

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **dev)
{
    if (index != 0)
        return 2;   /* NVML_ERROR_INVALID_ARGUMENT */
    *dev = &energy_mj;
    return 0;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)   /* the one device at 0000:65:00.0 */
{
    if (strcmp(bus, "0000:65:00.0") != 0)
        return 6;   /* NVML_ERROR_NOT_FOUND */
    *dev = &energy_mj;
    return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *mj)
{
    (void)dev;
    *mj = __atomic_add_fetch(&energy_mj, 7, __ATOMIC_RELAXED);
    return 0;
}
int nvmlDeviceGetPowerUsage(void *dev, unsigned int *mw)
{
    (void)dev;
    *mw = 250000;
    return 0;
}
int nvmlDeviceGetMemoryInfo(void *dev, fake_memory *m)
{
    (void)dev;
    m->total = 1ull << 34;
    m->used = 1ull << 30;
    m->free = m->total - m->used;
    return 0;
}
int nvmlDeviceGetTemperature(void *dev, int sensor, unsigned int *c)
{
    (void)dev;
    (void)sensor;
    *c = 50;
    return 0;
}
int nvmlDeviceGetClockInfo(void *dev, int type, unsigned int *mhz)
{
    (void)dev;
    *mhz = type == 1 ? 1500 : 2600;
    return 0;
}
int nvmlDeviceGetName(void *dev, char *name, unsigned int len)
{
    (void)dev;
    snprintf(name, len, "Fake GPU");
    return 0;
}
int nvmlSystemGetDriverVersion(char *v, unsigned int len)
{
    snprintf(v, len, "999.1");
    return 0;
}
const char *nvmlErrorString(int r) { return r ? "fake NVML error" : "success"; }
