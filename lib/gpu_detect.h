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
    char compat[96];         /* how driver and runtime match (fp_gpu_driver_compat's text), "" unknown */
    char reason[256];        /* why not available ("" when available) */
} fp_gpu_info_t;

/* CUDA's rule for a driver and the runtime a binary was built with (versions as 1000 * major + 10 *
 * minor): the same or a newer driver runs it ("driver X.Y >= runtime A.B"); a driver of the same major
 * version but an older minor runs it through minor-version compatibility (CUDA 11 and later: SASS runs,
 * PTX newer than the driver cannot be JIT-compiled); an older major version cannot. Returns 1 when the
 * pair can run, 0 when not, and writes which case it is into why (one line). */
int fp_gpu_driver_compat(int driver_version, int runtime_version, char *why, unsigned long why_size);

/* 1 when this binary was built with the CUDA backend. */
int fp_gpu_compiled(void);

/* Fill *info (always succeeds). The answer is computed once and cached. */
void fp_gpu_detect(fp_gpu_info_t *info);

#endif
