/* test_gpu_detect.c — CUDA's driver / runtime compatibility rule as fp_gpu_driver_compat applies it:
 * a newer or equal driver runs; the same major with an older minor runs through minor-version
 * compatibility (and says so); an older major does not. fp_gpu_detect never fails without a GPU. */
#include <string.h>
#include "gpu_detect.h"
#include "tap.h"

int main(void)
{
    char why[128];
    tap_plan(9);
    tap_is_int(fp_gpu_driver_compat(13000, 13000, why, sizeof why), 1, "driver 13.0, runtime 13.0: runs");
    tap_ok(strstr(why, ">= runtime 13.0") != NULL, "says why (%s)", why);
    tap_is_int(fp_gpu_driver_compat(13020, 13000, why, sizeof why), 1, "newer driver 13.2, runtime 13.0: runs");
    tap_is_int(fp_gpu_driver_compat(13000, 13010, why, sizeof why), 1,
               "driver 13.0, runtime 13.1: runs through minor-version compatibility");
    tap_ok(strstr(why, "minor-version compatibility") != NULL, "and says so (%s)", why);
    tap_is_int(fp_gpu_driver_compat(12090, 13000, why, sizeof why), 0, "driver 12.9, runtime 13.0: cannot run");
    tap_ok(strstr(why, "supports CUDA 12.9") != NULL && strstr(why, "needs 13.x") != NULL, "says why (%s)", why);
    tap_is_int(fp_gpu_driver_compat(10010, 10020, why, sizeof why), 0,
               "before CUDA 11 there is no minor-version compatibility");
    fp_gpu_info_t gi;
    fp_gpu_detect(&gi);
    tap_ok(gi.available || gi.reason[0] != '\0', "fp_gpu_detect: available, or a reason (%s)",
           gi.available ? gi.name : gi.reason);
    return tap_done();
}
