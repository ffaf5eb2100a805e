/* gpu_detect.h — is there a usable NVIDIA GPU, and if not, why not.
 * Works in every build: without CUDA it says so; with CUDA it asks the runtime, which fails
 * cleanly (no driver, no device, driver too old) on machines without a GPU. Never aborts. */
#ifndef FP_GPU_DETECT_H
#define FP_GPU_DETECT_H

typedef struct {
    int available;           /* 1 when at least one device can be used */
    int device_count;
    char name[256];          /* device 0's name when available */
    char pci_bus_id[32];     /* device 0's PCI bus id ("0000:65:00.0"), "" when unknown */
    int driver_version;      /* CUDA driver API version (e.g. 13000), 0 when unknown */
    int runtime_version;     /* CUDA runtime version built against, 0 without CUDA */
    int compute_major, compute_minor;
    char reason[256];        /* why not available ("" when available) */
} fp_gpu_info_t;

/* 1 when this binary was built with the CUDA backend. */
int fp_gpu_compiled(void);

/* Fill *info (always succeeds). The answer is computed once and cached. */
void fp_gpu_detect(fp_gpu_info_t *info);

#endif
