/* test_cuda_upload.c — the CUDA backend's uploads (upload.c): the staged ones (pinned double-buffered staging,
 * large uploads on a copy stream ordered with the compute stream by events): every upload lands whole although the
 * caller rewrites its buffer at once, an upload never overtakes the work queued before it that reads its destination,
 * and a model's loss on uploaded batches is the same, bit for bit, with the staging as with plain copies (fp32 and
 * fp16, batches on the small and the large path); and those from host memory page-locked in place
 * (fp_backend_cuda_host_register): they land bit for bit with no host copy (the upload counters: direct, not staged),
 * in order, interleaved with staged uploads and a CUDA graph's fixed slots (which still take theirs); unregistered,
 * the same memory is staged again; a registration refused (0 bytes, NULL, a range that wraps, one larger than the
 * machine, one overlapping, memory the driver already pins) leaves the uploads staged and CUDA without an error; a
 * model's losses from a registered batch equal the staged ones, the batch's bytes moved from staged to direct (a
 * diagnostic line says how many per step); and prefetches (fp_backend_cuda_prefetch): used by the next upload of their
 * source across a synchronisation, dropped by another large upload or a graph's refill, refused where they cannot help;
 * a CUDA graph's batch upload through the slot's device twin (primed, refilled by DMA or from a prefetch).
 * Skips with a TAP reason when built without CUDA or when no GPU is usable. */
#include "config.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
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

static fp_backend_cuda_upload_counts counts(fp_backend *be)
{
    fp_backend_cuda_upload_counts c;
    fp_backend_cuda_upload_counts_of(be, &c);
    return c;
}

/* One tinynet on the GPU: the training loss of three batches with plain uploads, then with the staging, then from
 * the same batches in a registered block (images, then labels, as compare.c's ring): bit for bit (same parameters: a
 * train step computes gradients, it does not update). The registered pass moves exactly the batches' bytes from
 * staged to direct. */
static void model_losses(const char *policy, int n)
{
    enum { CLASSES = 10, SIZE = 32, BATCHES = 3 };
    fp_model_config mc = {"tinynet", CLASSES, SIZE, 16, 7, 0};
    fp_model *m = NULL;
    int rc = fp_model_create(&m, &mc);
    rc = rc ? rc : fp_model_set_backend(m, fp_backend_cuda(), NULL);
    rc = rc ? rc : fp_model_set_policy(m, fp_policy_find(policy));
    size_t per = (size_t)SIZE * SIZE * 3, xb = (size_t)BATCHES * n * per * sizeof(float);
    size_t lb = (size_t)BATCHES * n * sizeof(int);
    void *block = NULL;
    if (posix_memalign(&block, 4096, xb + lb))
        block = NULL;
    float *x = block;
    int *lab = block ? (int *)((char *)block + xb) : NULL;
    rc = rc ? rc : block ? FP_OK : FP_ENOMEM;
    uint32_t rng = 0xC0FFEEu;
    for (size_t i = 0; !rc && i < (size_t)BATCHES * n * per; i++)
        x[i] = tu_uniform32_pm1(&rng);
    for (int i = 0; !rc && i < BATCHES * n; i++)
        lab[i] = (i * 7 + 3) % CLASSES;
    float loss[3][BATCHES];
    long long moved[3] = {0, 0, 0}, direct = 0;   /* staged + plain bytes of the passes; direct of the last */
    int reg = 0;
    for (int pass = 0; !rc && pass < 3; pass++) {
        fp_backend *be = fp_model_backend(m);
        fp_backend_cuda_set_upload_staging(be, pass > 0);
        if (pass == 2)
            reg = fp_backend_cuda_host_register(block, xb + lb);
        fp_backend_cuda_upload_counts c0 = counts(be);
        for (int b = 0; !rc && b < BATCHES; b++) {
            fp_model_zero_grad(m);
            rc = fp_model_train_step(m, &loss[pass][b], NULL, NULL, x + (size_t)b * n * per, lab + b * n, n);
        }
        rc = rc ? rc : G->sync(be);   /* before the registered source goes */
        fp_backend_cuda_upload_counts c1 = counts(be);
        moved[pass] = c1.staged_bytes - c0.staged_bytes + c1.plain_bytes - c0.plain_bytes;
        direct = c1.direct_bytes - c0.direct_bytes;
    }
    if (reg)
        fp_backend_cuda_host_unregister(block);
    int same = !rc;
    for (int b = 0; same && b < BATCHES; b++)
        same = memcmp(&loss[0][b], &loss[1][b], sizeof(float)) == 0 && isfinite(loss[0][b]) &&
               memcmp(&loss[0][b], &loss[2][b], sizeof(float)) == 0;
    tap_ok(same, "tinynet %s, batch %d (%s path): losses of %d batches equal bit for bit with and without staging, and "
           "from a registered batch%s", policy, n, (size_t)n * per * sizeof(float) > 65536 ? "copy stream" : "small",
           BATCHES, rc ? fp_error_message() : "");
    long long batch = (long long)(xb + lb);
    tap_ok(!rc && reg && direct == batch && moved[1] - moved[2] == batch,
           "tinynet %s, batch %d: from the registered block the batches' %lld bytes go direct (%lld), none of them "
           "staged (staged bytes %lld before, %lld now)", policy, n, batch, direct, moved[1], moved[2]);
    if (!rc) {
        tap_diag("losses %.9g %.9g %.9g / %.9g %.9g %.9g / %.9g %.9g %.9g", loss[0][0], loss[0][1], loss[0][2],
                 loss[1][0], loss[1][1], loss[1][2], loss[2][0], loss[2][1], loss[2][2]);
        tap_diag("per step, batch %d: %lld bytes direct and %lld staged from the registered batch; %lld staged "
                 "before", n, direct / BATCHES, moved[2] / BATCHES, moved[1] / BATCHES);
    }
    free(block);
    fp_model_free(m);
}

/* ---- host memory registered in place (fp_backend_cuda_host_register) ---- */

/* The device bytes at d equal want's (after a sync). */
static int landed(void *d, const unsigned char *want, size_t bytes)
{
    unsigned char *back = malloc(bytes ? bytes : 1);
    int ok = back && !G->download(gb, back, d, bytes) && !G->sync(gb) && memcmp(back, want, bytes) == 0;
    free(back);
    return ok;
}

/* A registered block: uploads of several sizes from inside it (small, copy-stream sized, large) land bit for bit,
 * counted direct with no staged byte; staged uploads from pageable memory between them still staged; with a graph's
 * fixed uploads on, an upload from the block goes into a fixed slot (not direct) and lands; after them direct again.
 * Then unregistered: the same memory is staged, and still lands. */
static void registered_uploads(void)
{
    static const size_t sizes[] = {100, 65537, ((size_t)3 << 20) + 5, 12, (size_t)1 << 20};
    enum { N = sizeof sizes / sizeof *sizes };
    const size_t total = ((size_t)6 << 20), big = ((size_t)3 << 20) + 5;
    unsigned char *blk = NULL, *page = malloc(big);
    if (posix_memalign((void **)&blk, 4096, total))
        blk = NULL;
    void *d[N] = {0}, *e[N] = {0}, *f[2] = {0};
    int rc = blk && page ? FP_OK : FP_ENOMEM;
    for (int k = 0; !rc && k < N; k++)
        rc = G->alloc(gb, &d[k], sizes[k]) | G->alloc(gb, &e[k], sizes[k]);
    rc = rc ? rc : G->alloc(gb, &f[0], sizes[0]) | G->alloc(gb, &f[1], sizes[1]);
    for (size_t i = 0; !rc && i < total; i++)
        blk[i] = pat(3, i);
    int ranges0 = 0, ranges1 = 0;
    size_t rbytes = 0;
    fp_backend_cuda_host_registered(&ranges0, NULL, NULL);
    int reg = !rc && fp_backend_cuda_host_register(blk, total);
    fp_backend_cuda_host_registered(&ranges1, &rbytes, NULL);
    tap_ok(reg && ranges1 == ranges0 + 1 && rbytes >= total, "a 6 MiB block registered (%d range(s), %zu bytes)%s",
           ranges1, rbytes, rc ? fp_error_message() : "");
    fp_backend_cuda_upload_counts c0 = counts(gb);
    long long want_direct = 0, want_staged = 0;
    size_t at[N];
    for (int k = 0, off = 0; !rc && k < N; k++) {   /* direct, then staged from pageable memory */
        at[k] = (size_t)off;
        rc = G->upload(gb, d[k], blk + at[k], sizes[k]);
        want_direct += (long long)sizes[k];
        for (size_t i = 0; i < sizes[k]; i++)
            page[i] = pat(k + 20, i);
        rc = rc ? rc : G->upload(gb, e[k], page, sizes[k]);
        memset(page, 0x5A, sizes[k]);   /* a staged source is free on return */
        want_staged += (long long)sizes[k];
        off = (int)((at[k] + sizes[k] + 4096 * 7 + 3) % (total - big));   /* various alignments, all inside */
    }
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c1 = counts(gb);
    int ok = !rc;
    for (int k = 0; ok && k < N; k++) {
        ok = landed(d[k], blk + at[k], sizes[k]);
        for (size_t i = 0; ok && i < sizes[k]; i++)
            page[i] = pat(k + 20, i);
        ok = ok && landed(e[k], page, sizes[k]);
    }
    tap_ok(ok && c1.direct_bytes - c0.direct_bytes == want_direct && c1.direct - c0.direct == N &&
           c1.staged_bytes - c0.staged_bytes == want_staged && c1.plain == c0.plain,
           "%d uploads from the registered block land bit for bit, direct (%lld of %lld bytes), no host copy; the %d "
           "staged ones between them staged (%lld of %lld bytes)%s", N, c1.direct_bytes - c0.direct_bytes, want_direct,
           N, c1.staged_bytes - c0.staged_bytes, want_staged, rc ? fp_error_message() : "");
    /* a graph's fixed slots: an upload from the block copies into slot 0 (the captured copy reads the slot) */
    fp_backend_cuda_fixed_uploads(gb, 1);
    rc = rc ? rc : G->upload(gb, f[0], blk + 11, sizes[0]);
    rc = rc ? rc : G->upload(gb, f[1], page, sizes[1]);
    fp_backend_cuda_fixed_uploads(gb, 0);
    int nfixed = fp_backend_cuda_fixed_count(gb);
    rc = rc ? rc : G->upload(gb, d[0], blk + 7, sizes[0]);   /* direct again */
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c2 = counts(gb);
    tap_ok(!rc && nfixed == 2 && c2.fixed - c1.fixed == 2 && c2.direct - c1.direct == 1 &&
           landed(f[0], blk + 11, sizes[0]) && landed(f[1], page, sizes[1]) && landed(d[0], blk + 7, sizes[0]),
           "fixed uploads on: an upload from the registered block goes into the graph's fixed slot (%lld fixed, %lld "
           "direct), off: direct again; all land%s", c2.fixed - c1.fixed, c2.direct - c1.direct,
           rc ? fp_error_message() : "");
    /* unregistered: the same memory staged again */
    fp_backend_cuda_host_unregister(blk);
    int ranges2 = -1;
    fp_backend_cuda_host_registered(&ranges2, NULL, NULL);
    rc = rc ? rc : G->upload(gb, d[2], blk + 1, sizes[2]);
    memset(blk + 1, 0, 16);   /* staged: free on return */
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c3 = counts(gb);
    memcpy(page, blk + 1, sizes[2]);
    for (size_t i = 0; i < 16; i++)
        page[i] = pat(3, i + 1);
    tap_ok(!rc && ranges2 == ranges0 && c3.direct == c2.direct && c3.staged == c2.staged + 1 &&
           landed(d[2], page, sizes[2]), "unregistered: an upload from the same memory is staged (%lld staged, %lld "
           "direct) and lands%s", c3.staged - c2.staged, c3.direct - c2.direct, rc ? fp_error_message() : "");
    for (int k = 0; k < N; k++) {
        G->free(gb, d[k], sizes[k]);
        G->free(gb, e[k], sizes[k]);
    }
    G->free(gb, f[0], sizes[0]);
    G->free(gb, f[1], sizes[1]);
    free(blk);
    free(page);
}

/* Prefetches (fp_backend_cuda_prefetch) from a registered block: one kept across a synchronisation becomes the next
 * upload of its source (a device-to-device copy, counted prefetched, not direct) and lands bit for bit behind work
 * queued before it; a large upload of another source drops it (both then direct); a graph's fixed refill drops it;
 * refused (1, nothing queued) from pageable memory, for a small upload, with fixed uploads on. */
static void prefetched_uploads(void)
{
    const size_t total = (size_t)8 << 20, big = ((size_t)3 << 20) + 5;
    unsigned char *blk = NULL, *page = malloc(big);
    if (posix_memalign((void **)&blk, 4096, total))
        blk = NULL;
    void *d = NULL, *e = NULL, *f = NULL;
    int rc = blk && page ? FP_OK : FP_ENOMEM;
    rc = rc ? rc : G->alloc(gb, &d, big) | G->alloc(gb, &e, big) | G->alloc(gb, &f, 100);
    for (size_t i = 0; !rc && i < total; i++)
        blk[i] = pat(9, i);
    int reg = !rc && fp_backend_cuda_host_register(blk, total);
    unsigned char *A = blk + 4096, *B = blk + total - big;
    fp_backend_cuda_upload_counts c0 = counts(gb);
    int started = reg ? fp_backend_cuda_prefetch(gb, A, big) : -1;
    rc = rc ? rc : G->zero(gb, d, big);   /* queued work the prefetched copy must land after */
    rc = rc ? rc : G->sync(gb);           /* kept across it */
    rc = rc ? rc : G->upload(gb, d, A, big);
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c1 = counts(gb);
    tap_ok(!rc && reg && started == FP_OK && c1.prefetched - c0.prefetched == 1 &&
           c1.prefetched_bytes - c0.prefetched_bytes == (long long)big && c1.direct == c0.direct && landed(d, A, big),
           "a prefetch kept across a sync: the next upload of its source is a device copy (%lld prefetched, %lld direct) "
           "and lands after the zero queued before it%s", c1.prefetched - c0.prefetched, c1.direct - c0.direct,
           rc ? fp_error_message() : "");
    started = reg ? fp_backend_cuda_prefetch(gb, A, big) : -1;
    rc = rc ? rc : G->upload(gb, e, B, big);   /* another source: drops it */
    rc = rc ? rc : G->upload(gb, d, A, big);   /* direct now */
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c2 = counts(gb);
    tap_ok(!rc && started == FP_OK && c2.prefetched == c1.prefetched && c2.direct - c1.direct == 2 &&
           landed(e, B, big) && landed(d, A, big),
           "a large upload of another source drops the prefetch: both direct (%lld) and landed%s",
           c2.direct - c1.direct, rc ? fp_error_message() : "");
    fp_backend_cuda_fixed_uploads(gb, 1);
    int fixed_refused = fp_backend_cuda_prefetch(gb, A, big);
    rc = rc ? rc : G->upload(gb, f, page, 100);   /* fixed slot 0 */
    fp_backend_cuda_fixed_uploads(gb, 0);
    started = reg ? fp_backend_cuda_prefetch(gb, A, big) : -1;
    memset(page, 0x33, 100);
    rc = rc ? rc : fp_backend_cuda_fixed_refill(gb, 0, page, 100);   /* a replay's refill: drops it */
    rc = rc ? rc : G->upload(gb, d, A, big);
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c3 = counts(gb);
    tap_ok(!rc && fixed_refused == 1 && started == FP_OK && c3.prefetched == c2.prefetched &&
           c3.direct - c2.direct == 1 && landed(d, A, big),
           "refused while fixed uploads are on; a graph's refill drops a prefetch (the upload goes direct)%s",
           rc ? fp_error_message() : "");
    for (size_t i = 0; i < big; i++)
        page[i] = pat(10, i);
    int pageable = fp_backend_cuda_prefetch(gb, page, big), small = reg ? fp_backend_cuda_prefetch(gb, A, 4096) : -1;
    rc = rc ? rc : G->upload(gb, d, page, big);
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c4 = counts(gb);
    tap_ok(!rc && pageable == 1 && small == 1 && c4.prefetched == c3.prefetched && c4.staged - c3.staged == 1 &&
           landed(d, page, big) && cudaGetLastError() == cudaSuccess,
           "refused (1) from pageable memory and for 4 KiB; the upload is staged as before, no CUDA error left%s",
           rc ? fp_error_message() : "");
    if (reg)
        fp_backend_cuda_host_unregister(blk);
    G->free(gb, d, big);
    G->free(gb, e, big);
    G->free(gb, f, 100);
    free(blk);
    free(page);
}

/* A CUDA graph's upload of a batch from a registered block (fixed_reserve gave slot 0 a device twin): captured as a
 * copy from the twin with no host copy, fixed_prime fills it from the captured source before the first launch; a
 * refill from another registered batch is a DMA (direct), one from a prefetched batch a device copy (prefetched);
 * every launch's destination holds the batch it was given, bit for bit. */
static void graph_twin_uploads(void)
{
    const size_t total = (size_t)12 << 20, big = ((size_t)3 << 20) + 5;
    unsigned char *blk = NULL;
    if (posix_memalign((void **)&blk, 4096, total))
        blk = NULL;
    void *d = NULL, *exec = NULL, *stream = fp_backend_cuda_stream(gb);
    int rc = blk ? G->alloc(gb, &d, big) : FP_ENOMEM;
    for (size_t i = 0; !rc && i < total; i++)
        blk[i] = pat(12, i);
    int reg = !rc && fp_backend_cuda_host_register(blk, total);
    unsigned char *A = blk + 8192, *B = blk + ((size_t)4 << 20), *C = blk + total - big;
    rc = rc ? rc : fp_backend_cuda_fixed_reserve(gb, 0, big);
    fp_backend_cuda_upload_counts c0 = counts(gb);
    fp_backend_cuda_fixed_uploads(gb, 1);
    rc = rc ? rc : fp_cuda_graph_begin(stream);
    if (!rc) {
        int qrc = G->upload(gb, d, A, big);
        rc = fp_cuda_graph_end(stream, &exec);
        rc = rc ? rc : qrc;
    }
    fp_backend_cuda_fixed_uploads(gb, 0);
    fp_backend_cuda_upload_counts c1 = counts(gb);
    rc = rc ? rc : fp_backend_cuda_fixed_prime(gb);
    rc = rc ? rc : fp_cuda_graph_launch(exec, stream);
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c2 = counts(gb);
    tap_ok(!rc && reg && fp_backend_cuda_fixed_count(gb) == 1 && c1.fixed - c0.fixed == 1 &&
           c2.direct - c1.direct == 1 && landed(d, A, big),
           "a captured batch upload from a registered block reads the slot's device twin; fixed_prime fills it (a DMA, "
           "%lld direct) and the first launch lands it%s", c2.direct - c1.direct, rc ? fp_error_message() : "");
    rc = rc ? rc : fp_backend_cuda_fixed_refill(gb, 0, B, big);
    rc = rc ? rc : fp_cuda_graph_launch(exec, stream);
    rc = rc ? rc : G->sync(gb);
    int okB = !rc && landed(d, B, big);
    fp_backend_cuda_upload_counts c3 = counts(gb);
    int started = reg ? fp_backend_cuda_prefetch(gb, C, big) : -1;
    rc = rc ? rc : G->sync(gb);
    rc = rc ? rc : fp_backend_cuda_fixed_refill(gb, 0, C, big);
    rc = rc ? rc : fp_cuda_graph_launch(exec, stream);
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c4 = counts(gb);
    tap_ok(okB && c3.direct - c2.direct == 1 && c3.fixed == c2.fixed && started == FP_OK &&
           c4.prefetched - c3.prefetched == 1 && landed(d, C, big),
           "refills: from a registered batch a DMA (%lld direct, no host copy), from a prefetched one a device copy "
           "(%lld prefetched); each replay lands its batch%s", c3.direct - c2.direct, c4.prefetched - c3.prefetched,
           rc ? fp_error_message() : "");
    fp_cuda_graph_destroy(exec);
    if (reg)
        fp_backend_cuda_host_unregister(blk);
    G->free(gb, d, big);
    free(blk);
}

/* y += x (queued), x uploaded from the next part of a registered block, per round: y ends as the sum of every
 * upload, so no direct upload overtook the accumulate before it (the block is not rewritten before the sync). */
static void registered_ordered(void)
{
    enum { ROUNDS_O = 12 };
    const size_t n = (size_t)1 << 20, bytes = n * sizeof(float);
    float *h = NULL, *y = malloc(bytes);
    if (posix_memalign((void **)&h, 4096, ROUNDS_O * bytes))
        h = NULL;
    void *dx = NULL, *dy = NULL;
    fp_dims dims = {1, 1, 1, (int)n};
    int rc = h && y ? FP_OK : FP_ENOMEM;
    for (int r = 0; !rc && r < ROUNDS_O; r++)
        for (size_t i = 0; i < n; i++)
            h[(size_t)r * n + i] = (float)(((r + 1) * 37 + (int)(i % 1000)) % 256);
    int reg = !rc && fp_backend_cuda_host_register(h, ROUNDS_O * bytes);
    rc = rc ? rc : G->alloc(gb, &dx, bytes) | G->alloc(gb, &dy, bytes);
    rc = rc ? rc : G->zero(gb, dy, bytes);
    fp_backend_cuda_upload_counts c0 = counts(gb);
    for (int r = 0; !rc && r < ROUNDS_O; r++) {
        rc = G->upload(gb, dx, h + (size_t)r * n, bytes);
        rc = rc ? rc : G->accumulate(gb, fp_tensor_of(dy, FP_DT_F32, dims), fp_tensor_of(dx, FP_DT_F32, dims));
    }
    rc = rc ? rc : G->download(gb, y, dy, bytes);
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c1 = counts(gb);
    size_t bad = n;
    for (size_t i = 0; !rc && i < n && bad == n; i++) {
        double want = 0;
        for (int r = 1; r <= ROUNDS_O; r++)
            want += (double)((r * 37 + (int)(i % 1000)) % 256);
        if ((double)y[i] != want)
            bad = i;
    }
    tap_ok(!rc && reg && bad == n && c1.direct - c0.direct == ROUNDS_O && c1.staged == c0.staged,
           "12 direct 4 MiB uploads into a tensor the queued accumulate reads: summed exactly (%lld direct)%s",
           c1.direct - c0.direct, rc ? fp_error_message() : "");
    if (reg)
        fp_backend_cuda_host_unregister(h);
    G->free(gb, dx, bytes);
    G->free(gb, dy, bytes);
    free(h);
    free(y);
}

/* Registrations that cannot be had return 0, are counted, leave no CUDA error behind, and the uploads from that
 * memory are staged and land. */
static void refused_registrations(void)
{
    const size_t bytes = (size_t)1 << 20;
    unsigned char *a = malloc(2 * bytes), *pinned = NULL;
    void *d = NULL;
    int rc = a ? FP_OK : FP_ENOMEM;
    if (!rc && cudaHostAlloc((void **)&pinned, bytes, cudaHostAllocDefault) != cudaSuccess) {
        pinned = NULL;
        rc = FP_ENOMEM;
    }
    rc = rc ? rc : G->alloc(gb, &d, bytes);
    long long r0 = 0, r1 = 0;
    int n0 = 0, n1 = 0;
    fp_backend_cuda_host_registered(&n0, NULL, &r0);
    int got[7] = {0}, reg = 0;
    if (!rc) {
        got[0] = fp_backend_cuda_host_register(a, 0);                          /* 0 bytes */
        got[1] = fp_backend_cuda_host_register(NULL, bytes);                   /* NULL */
        got[2] = fp_backend_cuda_host_register(a, SIZE_MAX - 64);              /* wraps */
        got[3] = fp_backend_cuda_host_register(a, (size_t)1 << 50);            /* larger than any machine here */
        got[4] = fp_backend_cuda_host_register(pinned, bytes);                 /* the driver already pins it */
        reg = fp_backend_cuda_host_register(a + bytes, bytes);
        got[5] = fp_backend_cuda_host_register(a + bytes / 2, bytes);          /* overlaps the one just registered */
        got[6] = fp_backend_cuda_host_register(a + bytes + 4096, 100);         /* inside it */
    }
    cudaError_t last = cudaGetLastError();
    fp_backend_cuda_host_registered(&n1, NULL, &r1);
    if (reg)
        fp_backend_cuda_host_unregister(a + bytes);
    int none = 1;
    for (int i = 0; i < 7; i++)
        none &= got[i] == 0;
    tap_ok(!rc && none && reg && r1 - r0 == 7 && n1 == n0 + 1 && last == cudaSuccess,
           "refused registrations (0 bytes, NULL, wrapping, 1 PiB, cudaHostAlloc memory, overlapping, inside) return "
           "0, counted (%lld), no CUDA error left (%s)%s", r1 - r0, cudaGetErrorName(last),
           rc ? fp_error_message() : "");
    fp_backend_cuda_upload_counts c0 = counts(gb);
    for (size_t i = 0; !rc && i < bytes; i++)
        a[i] = pat(5, i);
    rc = rc ? rc : G->upload(gb, d, a, bytes);
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c1 = counts(gb);
    int ok = !rc && landed(d, a, bytes);
    for (size_t i = 0; !rc && i < bytes; i++)
        pinned[i] = pat(6, i);
    rc = rc ? rc : G->upload(gb, d, pinned, bytes);
    rc = rc ? rc : G->sync(gb);
    fp_backend_cuda_upload_counts c2 = counts(gb);
    ok = ok && !rc && landed(d, pinned, bytes);
    tap_ok(ok && c1.staged == c0.staged + 1 && c2.staged == c1.staged + 1 && c2.direct == c0.direct,
           "uploads from memory whose registration was refused are staged (%lld) and land%s", c2.staged - c0.staged,
           rc ? fp_error_message() : "");
    G->free(gb, d, bytes);
    if (pinned)
        cudaFreeHost(pinned);
    free(a);
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
    tap_plan(1 + 2 + 4 + 4 + 2 + 1 + 2 + 8);
    uploads_land();
    uploads_ordered();
    registered_uploads();
    prefetched_uploads();
    graph_twin_uploads();
    registered_ordered();
    refused_registrations();
    G->destroy(gb);
    model_losses("fp32", 8);
    model_losses("fp32", 2);
    model_losses("fp16", 8);
    model_losses("fp16", 2);
#endif
    return tap_done();
}
