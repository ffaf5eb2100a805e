/* val_images.c — a validation's image count as the store records it (val_images.h). Promise: a count the
 * store does not keep (no row, or none above 0) reads -1, never 0 or a guess. */
#include "val_images.h"
#include <stdlib.h>
#include <string.h>
#include "error.h"

int fp_val_images_recorded(fp_reader_t *r, int64_t run, int64_t step, int64_t *images)
{
    *images = -1;
    fp_eval_images_t *im = NULL;
    size_t nim = 0;
    int rc = fp_reader_eval_images(r, run, &im, &nim);
    if (rc != FP_OK)
        return rc;
    for (size_t i = 0; i < nim; i++)
        if (im[i].step == step && strcmp(im[i].split, "val") == 0 && im[i].images > 0)
            *images = im[i].images;
    free(im);
    return FP_OK;
}
