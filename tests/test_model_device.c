/* test_model_device.c — the model's device-backend path (trainer/model_device.c) on the CPU: the CPU
 * backend's ops under a table that says host_memory 0, so that parameters, gradients and running
 * statistics get separate backend copies with host mirrors, logits are downloaded, labels and host
 * dlogits uploaded. Every result must equal the plain CPU model's bit for bit (same kernels): a missing
 * synchronisation shows as a difference. Also: a backend whose create fails leaves the model on the CPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "tap.h"
#include "trainer/backend.h"
#include "trainer/model.h"

static fp_backend_ops fake;   /* the CPU backend, declared a device backend */
static int fake_allocs;
static int fake_alloc(fp_backend *be, void **p, size_t bytes)
{
    fake_allocs++;
    return fp_backend_cpu()->alloc(be, p, bytes);
}
static int failing_create(fp_backend **out)
{
    *out = NULL;
    return fp_fail(FP_EUNAVAIL, "no such device (test)");
}

enum { N = 4, CLASSES = 10, SIZE = 32 };

static int same(const float *a, const float *b, size_t n) { return a && b && memcmp(a, b, n * sizeof(float)) == 0; }

/* k steps of train_step + plain SGD through the host accessors (p -= 0.05 g), both models. */
static int train(fp_model *m, const float *x, const int *labels, int k, float *loss)
{
    for (int s = 0; s < k; s++) {
        fp_model_zero_grad(m);
        int rc = fp_model_train_step(m, loss, NULL, NULL, x, labels, N);
        if (rc)
            return rc;
        float *p = fp_model_params(m);
        const float *g = fp_model_grads(m);
        if (!p || !g)
            return FP_EINTERNAL;
        for (size_t i = 0; i < fp_model_num_params(m); i++)
            p[i] -= 0.05f * g[i];
    }
    return FP_OK;
}

int main(void)
{
    fake = *fp_backend_cpu();
    fake.name = "cpu-as-device";
    fake.host_memory = 0;
    fake.alloc = fake_alloc;
    tap_plan(3 + 4 * 8);

    float *x = malloc((size_t)N * SIZE * SIZE * 3 * sizeof(float));
    int labels[N] = {1, 4, 7, 9};
    uint32_t r = 12345;
    for (size_t i = 0; i < (size_t)N * SIZE * SIZE * 3; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }

    /* create failure: the model stays on the CPU and still trains */
    fp_model_config mc = {"tinynet", CLASSES, SIZE, 16, 3, 0};
    fp_model *m = NULL;
    int rc = fp_model_create(&m, &mc);
    fp_backend_ops failing = fake;
    failing.create = failing_create;
    rc = rc ? rc : (fp_model_set_backend(m, &failing, NULL) == FP_EUNAVAIL ? FP_OK : FP_EINTERNAL);
    tap_ok(rc == FP_OK && strstr(fp_error_message(), "no such device"), "a backend whose create fails: FP_EUNAVAIL (%s)",
           fp_error_message());
    tap_ok(m && fp_model_backend_ops(m) == fp_backend_cpu(), "... and the model is still on the CPU backend");
    float l = NAN;
    tap_ok(m && fp_model_train_step(m, &l, NULL, NULL, x, labels, N) == FP_OK && isfinite(l), "... where it trains");
    fp_model_free(m);

    const char *policies[] = {"fp32", "fp16", "bf16", "half"};
    for (int p = 0; p < 4; p++) {
        fp_model *c = NULL, *d = NULL;
        rc = fp_model_create(&c, &mc);
        rc = rc ? rc : fp_model_clone(&d, c);
        int before = fake_allocs;
        rc = rc ? rc : fp_model_set_backend(d, &fake, NULL);
        rc = rc ? rc : fp_model_set_policy(c, fp_policy_find(policies[p]));
        rc = rc ? rc : fp_model_set_policy(d, fp_policy_find(policies[p]));
        tap_ok(rc == FP_OK && fake_allocs >= before + 3 && fp_model_backend_ops(d) == &fake,
               "%s: moved onto the device-like backend (parameters, gradients, statistics in backend memory)",
               policies[p]);
        float lc = NAN, ld = NAN;
        rc = rc ? rc : train(c, x, labels, 3, &lc);
        rc = rc ? rc : train(d, x, labels, 3, &ld);
        tap_ok(rc == FP_OK && memcmp(&lc, &ld, sizeof lc) == 0, "%s: 3 steps with host SGD: losses equal bit for bit (%g)",
               policies[p], lc);
        tap_ok(rc == FP_OK && same(fp_model_params(c), fp_model_params(d), fp_model_num_params(c)),
               "%s: parameters equal after the host updates went over", policies[p]);
        tap_ok(rc == FP_OK && same(fp_model_buffers(c), fp_model_buffers(d), fp_model_num_buffers(c)),
               "%s: running statistics come back equal", policies[p]);
        const float *a = NULL, *b = NULL;
        float *keep = malloc(N * CLASSES * sizeof(float));
        rc = rc ? rc : fp_model_forward(c, &a, x, N, FP_MODE_EVAL);
        if (!rc)
            memcpy(keep, a, N * CLASSES * sizeof(float));
        rc = rc ? rc : fp_model_forward(d, &b, x, N, FP_MODE_EVAL);
        tap_ok(rc == FP_OK && b != NULL && same(keep, b, N * CLASSES), "%s: eval logits downloaded, equal", policies[p]);
        /* the public backward with host dlogits (uploaded) */
        float dl[N * CLASSES];
        for (int i = 0; i < N * CLASSES; i++)
            dl[i] = (float)((i * 37) % 11 - 5) / 40.0f;
        fp_model_zero_grad(c);
        fp_model_zero_grad(d);
        rc = rc ? rc : fp_model_forward(c, &a, x, N, FP_MODE_TRAIN);
        rc = rc ? rc : fp_model_forward(d, &b, x, N, FP_MODE_TRAIN);
        rc = rc ? rc : fp_model_backward(c, dl);
        rc = rc ? rc : fp_model_backward(d, dl);
        tap_ok(rc == FP_OK && same(fp_model_grads(c), fp_model_grads(d), fp_model_num_params(c)),
               "%s: backward of host dlogits: gradients equal", policies[p]);
        /* zero_grad after the host has read the gradients: the host must see the zeros (the device copy is
         * the one cleared; the host mirror is downloaded again, not left with the old values) */
        fp_model_zero_grad(d);
        const float *zg = fp_model_grads(d);
        size_t nonzero = 0;
        for (size_t i = 0; zg && i < fp_model_num_params(d); i++)
            nonzero += zg[i] != 0.0f;
        tap_ok(zg && nonzero == 0, "%s: zero_grad: the host reads zero gradients (%zu not zero)", policies[p], nonzero);
        int nl = fp_model_layer_count(c), cnt = fp_model_layer_output(c, nl / 2, NULL, 0, NULL);
        float *oc = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(float)), *od = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(float));
        int r1 = cnt > 0 ? fp_model_layer_output(c, nl / 2, oc, (size_t)cnt, NULL) : -1;
        int r2 = cnt > 0 ? fp_model_layer_output(d, nl / 2, od, (size_t)cnt, NULL) : -1;
        tap_ok(rc == FP_OK && r1 == cnt && r2 == cnt && same(oc, od, (size_t)cnt),
               "%s: a layer output (%d values) comes back equal", policies[p], cnt);
        if (rc)
            tap_diag("%s", fp_error_message());
        free(oc);
        free(od);
        free(keep);
        fp_model_free(c);
        fp_model_free(d);
    }
    free(x);
    return tap_done();
}
