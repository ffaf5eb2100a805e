/* fuzz_image.c — image decoding of trainer/data/data_imagefolder.c (libjpeg-turbo and libpng through
 * fp_image_decode, the API folder_get uses) on arbitrary bytes, then the imagefolder transform of the
 * decoded image (Resize + CenterCrop, or RandomResizedCrop + flip when the input's length is odd) to
 * 24x24. A decoded image must be within the decoder's limits; an undecodable one must say why, naming
 * the file. */
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/data/data_internal.h"
#include "fuzz.h"

#define OUT 24

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fp_data_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    int w = -1, h = -1;
    int rc = fp_image_decode(data, size, "fuzz.img", &scratch, &w, &h);
    if (rc != FP_OK) {
        fz_debug("decode");
        FZ_CHECK(rc == FP_EFORMAT || rc == FP_ENOMEM);
        FZ_CHECK(strstr(fp_error_message(), "fuzz.img") != NULL);
    } else {
        FZ_CHECK(w > 0 && h > 0 && w <= 32768 && h <= 32768);
        FZ_CHECK(scratch.image.cap >= (size_t)w * h * 3);
        static float out[OUT * OUT * 3];
        fp_data_rng rng = fp_data_rng_seed(size, FP_RNG_AUGMENT, 0, 0, 0);
        rc = fp_image_transform(scratch.image.p, w, h, OUT, (int)(size & 1), &rng, out, &scratch);
        FZ_CHECK(rc == FP_OK);
    }
    fp_data_scratch_free(&scratch);
    return 0;
}
