/* bench_data.c — throughput of the data loader on the built-in synthetic set at 64x64 (batch 64,
 * training split with flip augmentation): images/s with 1 and 2 loader threads, best of 3 runs.
 * Prints figures only, never fails on time: `bench: data_synthetic_64px=X unit=images/s` (2 threads). */
#include "trainer/data/data.h"
#include "clock.h"
#include "error.h"
#include <stdio.h>

/* Images per second delivered by a loader with `threads` workers, best of 3 runs of 40 batches. */
static double run(const fp_dataset *ds, int threads)
{
    double best = 0.0;
    for (int rep = 0; rep < 3; rep++) {
        fp_loader_opts o;
        fp_loader_opts_default(&o);
        o.batch = 64;
        o.threads = threads;
        o.start_epoch = rep;
        fp_loader *ld;
        if (fp_loader_start(&ld, ds, &o) != FP_OK) {
            fprintf(stderr, "bench_data: %s\n", fp_error_message());
            return -1.0;
        }
        double t0 = fp_clock_mono_s();
        long images = 0;
        for (int i = 0; i < 40; i++) {
            fp_batch b;
            int rc = fp_loader_next(ld, &b);
            if (rc < 0) {
                fprintf(stderr, "bench_data: %s\n", fp_error_message());
                fp_loader_stop(ld);
                return -1.0;
            }
            images += rc == FP_OK ? b.n : 0;
        }
        double rate = (double)images / (fp_clock_mono_s() - t0);
        fp_loader_stop(ld);
        if (rate > best)
            best = rate;
    }
    return best;
}

int main(void)
{
    fp_data_opts opts;
    fp_data_opts_default(&opts);
    opts.image_size = 64;
    fp_dataset *ds;
    if (fp_dataset_open(&ds, "synthetic", &opts) != FP_OK) {
        fprintf(stderr, "bench_data: %s\n", fp_error_message());
        return 1;
    }
    double r1 = run(ds, 1), r2 = run(ds, 2);
    fp_dataset_close(ds);
    if (r1 < 0 || r2 < 0)
        return 1;
    printf("synthetic 64x64, batch 64: 1 thread %.0f images/s, 2 threads %.0f images/s\n", r1, r2);
    printf("bench: data_synthetic_64px_1thread=%.0f unit=images/s\n", r1);
    printf("bench: data_synthetic_64px=%.0f unit=images/s threads=2 ratio=%.2f\n", r2, r2 / r1);
    return 0;
}
