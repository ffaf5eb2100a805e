/* workspace.c — the CPU kernels' scratch buffer (im2col columns), grown on demand with realloc.
 * Promises: reserve never shrinks, leaves ws untouched on failure (FP_ENOMEM), free zeroes ws. */
#include <stdint.h>
#include <stdlib.h>
#include "error.h"
#include "trainer/layers.h"

int fp_workspace_reserve(fp_workspace *ws, size_t floats)
{
    if (!ws)
        return fp_fail(FP_EINVAL, "workspace: NULL workspace");
    if (floats <= ws->cap)
        return FP_OK;
    if (floats > SIZE_MAX / sizeof(float))
        return fp_fail(FP_ENOMEM, "workspace: %zu floats overflow", floats);
    /* Grow geometrically a little so alternating shapes do not realloc every call. */
    size_t want = floats;
    if (ws->cap && want < ws->cap + ws->cap / 4 && ws->cap + ws->cap / 4 < SIZE_MAX / sizeof(float))
        want = ws->cap + ws->cap / 4;
    float *p = realloc(ws->buf, want * sizeof(float));
    if (!p)
        return fp_fail(FP_ENOMEM, "workspace: cannot allocate %zu floats", want);
    ws->buf = p;
    ws->cap = want;
    return FP_OK;
}

void fp_workspace_free(fp_workspace *ws)
{
    if (!ws)
        return;
    free(ws->buf);
    ws->buf = NULL;
    ws->cap = 0;
}
