/* test_cuda_upload.c — the CUDA backend's staged uploads (backend_cuda.c: pinned double-buffered staging,
 * large uploads on a copy stream ordered with the compute stream by events): every upload lands whole
 * although the caller rewrites its buffer at once, an upload never overtakes the work queued before it
 * that reads its destination, and a model's loss on uploaded batches is the same, bit for bit, with the
 * staging as with plain copies (fp32 and fp16, batches on the small and the large path). Skips with a TAP
 * reason when built without CUDA or when no GPU is usable. */
#include "config.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/backend_cuda.h"
#include "trainer/model.h"

static const fp_backend_ops *G;
static fp_backend *gb;

/* Sizes across the small (<= 64 KiB) and large paths and the growth of the staging. */
static const size_t up_sizes[] = {4, 100, 65536, 65537, (size_t)1 << 20, ((size_t)3 << 20) + 5, 200000, 12};
#define NUP (sizeof up_sizes / sizeof *up_sizes)
enum { ROUNDS = 5 };

static unsigned char pat(size_t k, size_t i) { return (unsigned char)(k * 131u + i * 7u + (i >> 9)); }

/* ROUNDS x NUP uploads into distinct destinations, the host buffer overwritten right after each call and a
 * device op queued between them; then every destination holds what was uploaded into it. */
static void uploads_land(void)
{
    size_t n = ROUNDS * NUP, big = up_sizes[5];
    void **d = calloc(n, sizeof *d), *other = NULL;
    unsigned char *src = malloc(big), *back = malloc(big);
    int rc = G->alloc(gb, &other, big);
    for (size_t k = 0; !rc && k < n; k++) {
        size_t b = up_sizes[k % NUP];
        rc = G->alloc(gb, &d[k], b);
        for (size_t i = 0; i < b; i++)
            src[i] = pat(k, i);
        rc = rc ? rc : G->upload(gb, d[k], src, b);
        memset(src, 0xA5, b);   /* the caller may reuse its buffer on return */
        rc = rc ? rc : G->zero(gb, other, big);
    }
    rc = rc ? rc : G->sync(gb);
    size_t bad = n;
    for (size_t k = 0; !rc && k < n && bad == n; k++) {
        size_t b = up_sizes[k % NUP];
        if ((rc = G->download(gb, back, d[k], b)) || (rc = G->sync(gb)))
            break;
        for (size_t i = 0; i < b; i++)
            if (back[i] != pat(k, i)) {
                bad = k;
                break;
            }
    }
    tap_ok(!rc && bad == n, "%zu uploads of 4 B .. 3 MiB, the host buffer rewritten after each: every one landed whole%s",
           n, rc ? fp_error_message() : bad < n ? " (one did not)" : "");
    for (size_t k = 0; k < n; k++)
        G->free(gb, d[k], up_sizes[k % NUP]);
    G->free(gb, other, big);
    free(d);
    free(src);
    free(back);
}

/* y += x (queued), x re-uploaded, y += x (queued), per round: y ends as the sum of every upload, so no
 * upload overtook the accumulate before it. Integer values: every sum exact. Both paths. */
static void uploads_ordered(void)
{
    const size_t counts[2] = {1000, (size_t)1 << 20};   /* 4 KB (small path), 4 MiB (large path) */
    for (int c = 0; c < 2; c++) {
        size_t n = counts[c], bytes = n * sizeof(float);
        float *h = malloc(bytes), *y = malloc(bytes);
        void *dx = NULL, *dy = NULL;
        fp_dims dims = {1, 1, 1, (int)n};
        int rc = G->alloc(gb, &dx, bytes) | G->alloc(gb, &dy, bytes);
        rc = rc ? rc : G->zero(gb, dy, bytes);
        for (int r = 1; !rc && r <= 12; r++) {
            for (size_t i = 0; i < n; i++)
                h[i] = (float)((r * 37 + (int)(i % 1000)) % 256);
            rc = G->upload(gb, dx, h, bytes);
            rc = rc ? rc : G->accumulate(gb, fp_tensor_of(dy, FP_DT_F32, dims), fp_tensor_of(dx, FP_DT_F32, dims));
        }
        rc = rc ? rc : G->download(gb, y, dy, bytes);
        rc = rc ? rc : G->sync(gb);
        size_t bad = n;
        for (size_t i = 0; !rc && i < n && bad == n; i++) {
            double want = 0;
            for (int r = 1; r <= 12; r++)
                want += (double)((r * 37 + (int)(i % 1000)) % 256);
            if ((double)y[i] != want)
                bad = i;
        }
        tap_ok(!rc && bad == n, "%s uploads into a tensor the queued accumulate reads: 12 rounds summed exactly%s",
               c ? "4 MiB (copy stream)" : "4 KB (pinned, on the stream)", rc ? fp_error_message() : "");
        G->free(gb, dx, bytes);
        G->free(gb, dy, bytes);
        free(h);
        free(y);
    }
}

/* One tinynet on the GPU: the training loss of three batches with plain uploads, then with the staging: bit
 * for bit (same parameters: a train step computes gradients, it does not update). */
static void model_losses(const char *policy, int n)
{
    enum { CLASSES = 10, SIZE = 32, BATCHES = 3 };
    fp_model_config mc = {"tinynet", CLASSES, SIZE, 16, 7, 0};
    fp_model *m = NULL;
    int rc = fp_model_create(&m, &mc);
    rc = rc ? rc : fp_model_set_backend(m, fp_backend_cuda(), NULL);
    rc = rc ? rc : fp_model_set_policy(m, fp_policy_find(policy));
    size_t per = (size_t)SIZE * SIZE * 3;
    float *x = malloc((size_t)BATCHES * n * per * sizeof(float));
    int *lab = malloc((size_t)BATCHES * n * sizeof(int));
    uint32_t rng = 0xC0FFEEu;
    for (size_t i = 0; i < (size_t)BATCHES * n * per; i++)
        x[i] = tu_uniform32_pm1(&rng);
    for (int i = 0; i < BATCHES * n; i++)
        lab[i] = (i * 7 + 3) % CLASSES;
    float loss[2][BATCHES];
    for (int staged = 0; !rc && staged < 2; staged++) {
        fp_backend_cuda_set_upload_staging(fp_model_backend(m), staged);
        for (int b = 0; !rc && b < BATCHES; b++) {
            fp_model_zero_grad(m);
            rc = fp_model_train_step(m, &loss[staged][b], NULL, NULL, x + (size_t)b * n * per, lab + b * n, n);
        }
    }
    int same = !rc;
    for (int b = 0; same && b < BATCHES; b++)
        same = memcmp(&loss[0][b], &loss[1][b], sizeof(float)) == 0 && isfinite(loss[0][b]);
    tap_ok(same, "tinynet %s, batch %d (%s path): losses of %d batches equal bit for bit with and without staging%s",
           policy, n, (size_t)n * per * sizeof(float) > 65536 ? "copy stream" : "small", BATCHES,
           rc ? fp_error_message() : "");
    if (!rc)
        tap_diag("losses %.9g %.9g %.9g / %.9g %.9g %.9g", loss[0][0], loss[0][1], loss[0][2], loss[1][0], loss[1][1],
                 loss[1][2]);
    free(x);
    free(lab);
    fp_model_free(m);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    G = fp_backend_cuda();
    if (fp_backend_cuda_create_sized(&gb, (size_t)1 << 30, "upload test")) {
        tap_plan(1);
        tap_ok(0, "backend created: %s", fp_error_message());
        return tap_done();
    }
    tap_plan(1 + 2 + 4);
    uploads_land();
    uploads_ordered();
    G->destroy(gb);
    model_losses("fp32", 8);
    model_losses("fp32", 2);
    model_losses("fp16", 8);
    model_losses("fp16", 2);
#endif
    return tap_done();
}
