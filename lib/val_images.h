/* val_images.h — how many images a run's validation used, as the store records it: the one lookup the
 * summary, the gate and the dashboard make before each falls back on the run's configuration. */
#ifndef FP_LIB_VAL_IMAGES_H
#define FP_LIB_VAL_IMAGES_H

#include <stdint.h>
#include "store_reader.h"

/* The store's image count of run's "val" evaluation at step into *images (-1 when it keeps none, or on
 * error); FP_OK or the reader's error. */
int fp_val_images_recorded(fp_reader_t *r, int64_t run, int64_t step, int64_t *images);

#endif
