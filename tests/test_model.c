/* test_model.c — the model brick: torchvision's exact parameter counts, names and MACs; output shapes
 * at 32 / 33 / 64 / 224; whole-model gradients vs finite differences (tinynet and a small ResNet);
 * eval mode on running statistics; memory accounting; save / load; bad input -> FP_EINVAL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "error.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/model.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float urand(void) { return tu_uniform_pm1(&rng_state); }   /* uniform in [-1, 1) */
static float *rand_input(size_t n) { return tu_rand_array(n, &rng_state); }

static fp_model *make(const char *name, int classes, int size, int width, unsigned long long seed)
{
    fp_model_config cfg = {name, classes, size, width, seed, 0};
    fp_model *m = NULL;
    int rc = fp_model_create(&m, &cfg);
    if (rc)
        tap_diag("create %s: %s", name, fp_error_message());
    return m;
}

static const fp_layer_info *find_layer(const fp_model *m, const char *name)
{
    for (int i = 0; i < fp_model_layer_count(m); i++)
        if (strcmp(fp_model_layer(m, i)->name, name) == 0)
            return fp_model_layer(m, i);
    return NULL;
}

static void test_counts(void)
{
    static const struct { const char *name; size_t params; double gmacs; } want[] = {
        {"resnet18", 11689512, 1.81}, {"resnet34", 21797672, 3.66}, {"resnet50", 25557032, 4.09},
        {"resnet101", 44549160, 7.80}, {"resnet152", 60192808, 11.51}};
    for (int i = 0; i < 5; i++) {
        fp_model_config cfg = {want[i].name, 1000, 224, 0, 1, 1};   /* shapes only: no init */
        fp_model *m = NULL;
        fp_model_create(&m, &cfg);
        if (!m) {
            tap_ok(0, "create %s", want[i].name);
            tap_skip(1, "no model");
            continue;
        }
        tap_is_uint(fp_model_num_params(m), want[i].params, "%s: %zu parameters (torchvision)", want[i].name,
                    want[i].params);
        /* torchvision's published "GFLOPS" (which are MACs), to the 2 decimals they give: 5e-3 abs */
        tap_is_double(fp_model_macs(m) / 1e9, want[i].gmacs, 5e-3, 0, "%s: %.2f GMACs at 224", want[i].name,
                      want[i].gmacs);
        fp_model_free(m);
    }
    fp_model *m = make("resnet50", 10, 224, 0, 1);
    tap_is_uint(fp_model_num_params(m), 25557032 - 2049 * 990, "resnet50 with 10 classes: fc shrinks");
    tap_is_str(fp_model_tensor(m, 0)->name, "conv1.weight", "first tensor conv1.weight");
    const fp_tensor_info *t = fp_model_find_tensor(m, "layer1.0.downsample.0.weight");
    tap_ok(t && t->shape[0] == 256 && t->shape[1] == 64 && t->shape[2] == 1 && t->ohwi,
           "layer1.0.downsample.0.weight [256, 64, 1, 1], stored OHWI");
    t = fp_model_find_tensor(m, "layer2.0.conv2.weight");
    const fp_layer_info *l = find_layer(m, "layer2.0.conv2");
    tap_ok(t && l && l->stride == 2 && find_layer(m, "layer2.0.conv1")->stride == 1,
           "v1.5: layer2.0 stride in conv2 (3x3), not conv1");
    tap_ok(fp_model_find_tensor(m, "layer4.2.bn3.running_var") && fp_model_find_tensor(m, "fc.bias") &&
               !fp_model_find_tensor(m, "layer1.1.downsample.0.weight"),
           "names: layer4.2.bn3.running_var, fc.bias; no downsample in layer1.1");
    tap_is_str(fp_model_tensor(m, fp_model_tensor_count(m) - 1)->name, "fc.bias", "last tensor fc.bias");
    /* state_dict count: 53 convs + fc weight/bias + 53 BNs x 4 = 267 (without num_batches_tracked) */
    tap_is_uint(fp_model_tensor_count(m), 267, "resnet50 has 267 state tensors");
    double f, b;
    fp_model_flops(m, &f, &b);
    tap_ok(f > 2 * fp_model_macs(m) && b == 2 * f, "flops: forward > 2 x MACs (elementwise included), backward = 2x");
    fp_model_free(m);
    m = make("resnet18", 1000, 224, 0, 1);
    tap_ok(m && !fp_model_find_tensor(m, "layer1.0.downsample.0.weight") &&
               fp_model_find_tensor(m, "layer2.0.downsample.1.running_mean") && find_layer(m, "layer1.0.relu_1") &&
               find_layer(m, "layer1.0.add"),
           "resnet18 names: no layer1 downsample, layer2.0.downsample.1, relu_1, add");
    fp_model_free(m);
}

/* Eval forward of a narrow model at size s; checks the last block's and the logits' shapes. */
static void test_shapes(const char *name, int size, int expect_hw, const char *last)
{
    fp_model *m = make(name, 7, size, 8, 2);
    if (!m) {
        tap_skip(2, "no model");
        return;
    }
    const fp_layer_info *l = find_layer(m, last);
    tap_ok(l && l->out.h == expect_hw && l->out.w == expect_hw, "%s at %d: %s is %dx%d (got %dx%d)", name, size, last,
           expect_hw, expect_hw, l ? l->out.h : -1, l ? l->out.w : -1);
    int n = 2;
    float *x = rand_input((size_t)n * size * size * 3);
    const float *logits = NULL;
    int rc = fp_model_forward(m, &logits, x, n, FP_MODE_EVAL);
    int finite = rc == FP_OK;
    for (int i = 0; finite && i < n * 7; i++)
        finite = isfinite(logits[i]);
    tap_ok(rc == FP_OK && finite && fp_model_num_classes(m) == 7, "%s at %d: eval forward gives finite [2, 7] logits",
           name, size);
    free(x);
    fp_model_free(m);
}

/* Loss of one TRAIN forward (batch statistics: the loss does not depend on running stats). */
static double loss_of(fp_model *m, const float *x, const int *labels, int n)
{
    float loss;
    const float *logits;
    if (fp_model_forward(m, &logits, x, n, FP_MODE_TRAIN))
        return NAN;
    if (fp_softmax_xent(&loss, NULL, NULL, NULL, logits, labels, n, fp_model_num_classes(m)))
        return NAN;
    return loss;
}

/* Central differences with step h on a few entries of each named tensor; tolerance
 * |fd - g| <= 2e-3 + 3e-2 |g|: fp32 loss rounding (~1e-7 x loss / h) plus truncation. Batchnorm over few
 * values makes the loss strongly curved in the first layers of a ResNet, so those need h ~ 1e-4. */
static void grad_check(fp_model *m, const char *what, const char *const *names, int n, double h)
{
    fp_dims d = fp_model_input_dims(m);
    size_t per = (size_t)d.h * d.w * d.c;
    float *x = rand_input(per * n);
    int labels[4] = {1, 0, 3, 2};
    fp_model_zero_grad(m);
    float loss;
    int rc = fp_model_train_step(m, &loss, NULL, NULL, x, labels, n);
    tap_ok(rc == FP_OK && isfinite(loss), "%s: train step (loss %.4f)", what, loss);
    for (int k = 0; names[k]; k++) {
        const fp_tensor_info *t = fp_model_find_tensor(m, names[k]);
        if (!t) {
            tap_ok(0, "%s: no tensor %s", what, names[k]);
            continue;
        }
        float *p = fp_model_tensor_data(m, t), *g = fp_model_tensor_grad(m, t);
        int bad = 0, checked = 0;
        double worst = 0;
        for (size_t j = 0; j < t->numel && checked < 4; j += t->numel / 4 + 1, checked++) {
            float keep = p[j];
            p[j] = keep + (float)h;
            double lp = loss_of(m, x, labels, n);
            p[j] = keep - (float)h;
            double lm = loss_of(m, x, labels, n);
            p[j] = keep;
            double fd = (lp - lm) / (2 * h), err = fabs(fd - g[j]);
            if (!(err <= 2e-3 + 3e-2 * fabs(g[j]))) {
                bad++;
                tap_diag("%s %s[%zu]: analytic %.6g, finite difference %.6g", what, names[k], j, g[j], fd);
            }
            if (err > worst)
                worst = err;
        }
        tap_ok(bad == 0, "%s: d loss / d %s matches finite differences at %d entries (worst %.2g)", what, names[k],
               checked, worst);
    }
    free(x);
}

/* (L(p + h d) - L(p - h d)) / 2h vs g . d for d = g / |g| and for a random unit d; tolerance
 * 2e-3 |g| + 2e-2 |g . d| (fp32 loss rounding / h, and curvature). */
static void directional_check(fp_model *m, const char *what, int n)
{
    fp_dims dd = fp_model_input_dims(m);
    size_t per = (size_t)dd.h * dd.w * dd.c, np = fp_model_num_params(m);
    float *x = rand_input(per * n);
    int labels[4] = {1, 0, 3, 2};
    float loss;
    fp_model_zero_grad(m);
    tap_ok(fp_model_train_step(m, &loss, NULL, NULL, x, labels, n) == FP_OK, "%s: train step (loss %.4f)", what, loss);
    float *p = fp_model_params(m), *p0 = malloc(np * sizeof(float)), *dir = malloc(np * sizeof(float));
    const float *g = fp_model_grads(m);
    memcpy(p0, p, np * sizeof(float));
    for (int kind = 0; kind < 2; kind++) {
        double norm = 0, gnorm = 0, gd = 0;
        for (size_t i = 0; i < np; i++) {
            dir[i] = kind == 0 ? g[i] : urand();
            norm += (double)dir[i] * dir[i];
            gnorm += (double)g[i] * g[i];
        }
        norm = sqrt(norm);
        gnorm = sqrt(gnorm);
        for (size_t i = 0; i < np; i++)
            gd += g[i] * (dir[i] / norm);
        double h = 2e-4, l[2];
        for (int s = 0; s < 2; s++) {
            for (size_t i = 0; i < np; i++)
                p[i] = p0[i] + (float)((s ? -h : h) * dir[i] / norm);
            l[s] = loss_of(m, x, labels, n);
        }
        memcpy(p, p0, np * sizeof(float));
        double fd = (l[0] - l[1]) / (2 * h);
        tap_is_double(fd, gd, 2e-3 * gnorm, 2e-2, "%s: directional derivative along %s: %.5f vs g.d %.5f", what,
                      kind ? "a random direction" : "the gradient", fd, gd);
    }
    free(p0);
    free(dir);
    free(x);
}

static void test_gradients(void)
{
    fp_model *m = make("tinynet", 4, 32, 32, 3);   /* 8 and 16 channels */
    static const char *const tiny[] = {"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight",
                                       "fc.weight", "fc.bias", NULL};
    grad_check(m, "tinynet", tiny, 3, 1e-3);
    fp_model_free(m);
    /* a small ResNet (residual adds, downsample, in-place relus, gradient hand-over in backward): per-entry
     * differences are too noisy in fp32 here (batchnorm over few values), so check the directional
     * derivative along the gradient and along a random direction, where every parameter moves */
    static const int layers[4] = {1, 1, 1, 1};
    if (fp_resnet_create(&m, "resnet_b1111_w4", 1, layers, 4, 4, 64, 5) != FP_OK) {
        tap_ok(0, "create small bottleneck resnet: %s", fp_error_message());
        return;
    }
    directional_check(m, "bottleneck [1,1,1,1] w4", 4);
    fp_model_free(m);
}

static void test_eval_and_memory(void)
{
    fp_model *m = make("tinynet", 5, 32, 64, 4);
    int n = 3;
    size_t per = 32 * 32 * 3;
    float *x = rand_input(per * n);
    float *buf0 = malloc(fp_model_num_buffers(m) * sizeof(float));
    /* running stats away from 0 / 1, so eval differs from an identity normalisation */
    float *bufs = fp_model_buffers(m);
    for (size_t i = 0; i < fp_model_num_buffers(m); i++)
        bufs[i] = 0.5f + 0.25f * urand();
    memcpy(buf0, bufs, fp_model_num_buffers(m) * sizeof(float));
    const float *logits;
    float batch_logits[15], single[5];
    int rc = fp_model_forward(m, &logits, x, n, FP_MODE_EVAL);
    memcpy(batch_logits, logits, sizeof batch_logits);
    tap_ok(rc == FP_OK && memcmp(buf0, bufs, fp_model_num_buffers(m) * sizeof(float)) == 0,
           "eval forward leaves the running statistics alone");
    rc = fp_model_forward(m, &logits, x + per, 1, FP_MODE_EVAL);
    memcpy(single, logits, sizeof single);
    int same = rc == FP_OK;
    for (int i = 0; i < 5; i++)   /* the same sample alone: running stats make it batch-independent (1e-6 abs) */
        same &= fabsf(single[i] - batch_logits[5 + i]) <= 1e-6f;
    tap_ok(same, "eval: a sample's logits do not depend on the rest of the batch (running stats)");
    tap_ok(fp_model_backward(m, batch_logits) == FP_EINVAL, "backward after an eval forward -> FP_EINVAL");
    fp_error_clear();
    const fp_tensor_info *rm = fp_model_find_tensor(m, "bn2.running_mean");
    for (size_t i = 0; i < rm->numel; i++)   /* lower every mean: the BN outputs rise, past the relu */
        fp_model_tensor_data(m, rm)[i] -= 1.0f;
    fp_model_forward(m, &logits, x, n, FP_MODE_EVAL);
    int changed = 0;
    for (int i = 0; i < 15; i++)
        changed |= logits[i] != batch_logits[i];
    tap_ok(changed, "eval: changing bn2.running_mean changes the logits");
    for (size_t i = 0; i < rm->numel; i++)
        fp_model_tensor_data(m, rm)[i] += 1.0f;
    memcpy(buf0, bufs, fp_model_num_buffers(m) * sizeof(float));
    rc = fp_model_forward(m, &logits, x, n, FP_MODE_TRAIN);
    int differs = 0, moved = 0;
    for (int i = 0; i < 15; i++)
        differs |= logits[i] != batch_logits[i];
    for (size_t i = 0; i < fp_model_num_buffers(m); i++)
        moved += bufs[i] != buf0[i];
    tap_ok(rc == FP_OK && differs && moved == (int)fp_model_num_buffers(m),
           "train forward: batch statistics (other logits), every running statistic updated");

    /* memory accounting */
    fp_model_mem mem;
    int labels[3] = {0, 1, 4};
    float loss;
    fp_model_zero_grad(m);
    fp_model_train_step(m, &loss, NULL, NULL, x, labels, n);
    float *g1 = malloc(fp_model_num_params(m) * sizeof(float));
    memcpy(g1, fp_model_grads(m), fp_model_num_params(m) * sizeof(float));
    fp_model_train_step(m, &loss, NULL, NULL, x, labels, n);
    int twice = 1;
    for (size_t i = 0; i < fp_model_num_params(m); i++)
        twice &= fabsf(fp_model_grads(m)[i] - 2 * g1[i]) <= 1e-6f + 1e-5f * fabsf(g1[i]);
    tap_ok(twice, "backward accumulates: two steps without zero_grad give twice the gradient");
    fp_model_memory(m, &mem);
    tap_is_uint(mem.params, fp_model_num_params(m) * 4, "memory: parameters %zu bytes", mem.params);
    tap_ok(mem.grads == mem.params && mem.buffers == fp_model_num_buffers(m) * 4, "memory: gradients, buffers");
    /* train keeps the input (3 ch), conv1 out and relu out (16 ch each), at 32x32; maxpool out (16 ch),
     * conv2 out and relu_1 out (32 ch each) at 16x16: the saved activations are at least those */
    size_t kept = (size_t)n * 4 * (32 * 32 * (3 + 16 + 16) + 16 * 16 * (16 + 32 + 32));
    tap_ok(mem.saved >= kept && mem.activations >= mem.saved && mem.activations_peak >= mem.activations,
           "memory: saved for backward %zu >= %zu, activations %zu, peak %zu", mem.saved, kept, mem.activations,
           mem.activations_peak);
    tap_ok(mem.act_grads_peak > 0 && mem.act_grads_peak <= mem.saved && mem.workspace_peak > 0,
           "memory: activation gradients peak %zu (<= saved), workspace peak %zu", mem.act_grads_peak,
           mem.workspace_peak);

    /* save / load round trip (OIHW in the file) */
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_model_%d.safetensors", (int)getpid());
    rc = fp_model_save(m, path);
    fp_model *m2 = make("tinynet", 5, 32, 64, 99);
    int rc2 = rc ? rc : fp_model_load(m2, path);
    tap_ok(rc == FP_OK && rc2 == FP_OK &&
               memcmp(fp_model_params(m), fp_model_params(m2), fp_model_num_params(m) * 4) == 0 &&
               memcmp(fp_model_buffers(m), fp_model_buffers(m2), fp_model_num_buffers(m) * 4) == 0,
           "save + load gives the same parameters and running stats (%s)", rc || rc2 ? fp_error_message() : "ok");
    fp_model *m3 = make("tinynet", 6, 32, 64, 99);
    rc = fp_model_load(m3, path);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "fc.weight"), "load into 6 classes: shape mismatch (%s)",
           fp_error_message());
    unlink(path);
    fp_model_free(m3);
    fp_model_free(m2);
    free(g1);
    free(buf0);
    free(x);
    fp_model_free(m);
}

static void test_init(void)
{
    fp_model *a = make("resnet50", 1000, 224, 0, 42), *b = make("resnet50", 1000, 224, 0, 42);
    tap_ok(memcmp(fp_model_params(a), fp_model_params(b), fp_model_num_params(a) * 4) == 0,
           "same seed, same parameters");
    const fp_tensor_info *t = fp_model_find_tensor(a, "layer3.0.conv2.weight");   /* 256x256x3x3 */
    const float *w = fp_model_tensor_data(a, t);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < t->numel; i++) {
        s += w[i];
        s2 += (double)w[i] * w[i];
    }
    double sd = sqrt(s2 / t->numel - (s / t->numel) * (s / t->numel)), want = sqrt(2.0 / (256 * 9));
    tap_is_double(sd, want, 0, 0.02, "kaiming_normal_ fan_out: std %.5f ~ sqrt(2/(256*9)) (2%% for 590k draws)", sd);
    t = fp_model_find_tensor(a, "fc.weight");
    w = fp_model_tensor_data(a, t);
    double mx = 0;
    for (size_t i = 0; i < t->numel; i++)
        mx = fmax(mx, fabs(w[i]));
    tap_ok(mx <= 1 / sqrt(2048.0) && mx > 0.99 / sqrt(2048.0), "fc weight uniform within 1/sqrt(2048)");
    tap_ok(fp_model_tensor_data(a, fp_model_find_tensor(a, "bn1.weight"))[5] == 1.0f &&
               fp_model_tensor_data(a, fp_model_find_tensor(a, "bn1.bias"))[5] == 0.0f &&
               fp_model_tensor_data(a, fp_model_find_tensor(a, "bn1.running_var"))[5] == 1.0f,
           "BN weight 1, bias 0, running_var 1");
    fp_model_free(a);
    fp_model_free(b);
}

static void test_bad_input(void)
{
    fp_model_config cfg = {"resnet50", 10, 31, 0, 0, 0};
    fp_model *m = (fp_model *)1;
    int rc = fp_model_create(&m, &cfg);
    tap_ok(rc == FP_EINVAL && !m && strstr(fp_error_message(), ">= 32"), "image size 31 -> FP_EINVAL (%s)",
           fp_error_message());
    cfg = (fp_model_config){"resnet51", 10, 64, 0, 0, 0};
    rc = fp_model_create(&m, &cfg);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "resnet18, resnet34, resnet50, resnet101, resnet152, tinynet"),
           "unknown model -> the valid names (%s)", fp_error_message());
    cfg = (fp_model_config){"resnet18", 0, 64, 0, 0, 0};
    rc = fp_model_create(&m, &cfg);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "classes"), "0 classes -> FP_EINVAL (%s)", fp_error_message());
    cfg = (fp_model_config){"tinynet", 3, 32, -8, 0, 0};
    tap_ok(fp_model_create(&m, &cfg) == FP_EINVAL, "negative base width -> FP_EINVAL");
    cfg = (fp_model_config){NULL, 3, 32, 0, 0, 0};
    tap_ok(fp_model_create(&m, &cfg) == FP_EINVAL, "no name -> FP_EINVAL");
    m = make("tinynet", 3, 32, 16, 0);
    float x[32 * 32 * 3] = {0};
    tap_ok(fp_model_forward(m, NULL, x, 0, FP_MODE_TRAIN) == FP_EINVAL, "batch 0 -> FP_EINVAL");
    tap_ok(fp_model_backward(m, x) == FP_EINVAL, "backward before any forward -> FP_EINVAL");
    fp_model_free(m);
    m = make("resnet18", 3, 32, 8, 0);   /* layer4 is 1x1: batch 1 leaves BN a single value per channel */
    tap_ok(fp_model_forward(m, NULL, x, 1, FP_MODE_TRAIN) == FP_EINVAL, "train BN on 1 value per channel -> FP_EINVAL (%s)",
           fp_error_message());
    fp_model_free(m);
    fp_model *b;
    fp_model_build_begin(&b, "bad", 8, 8, 3);
    int v = fp_model_add_conv(b, "c", 0, 4, 3, 1, 1);
    int bn0 = fp_model_add_bn(b, "bn", v);
    int r = fp_model_add_relu(b, "r", v);   /* v is BN's input, read by backward: not in place */
    fp_model_add_add(b, "a", bn0, r);
    rc = fp_model_build_finish(b);
    float xs[2 * 8 * 8 * 3], dl[2 * 8 * 8 * 4];
    for (int i = 0; i < 2 * 8 * 8 * 3; i++)
        xs[i] = urand();
    for (int i = 0; i < 2 * 8 * 8 * 4; i++)
        dl[i] = urand();
    tap_ok(rc == FP_OK && fp_model_forward(b, NULL, xs, 2, FP_MODE_TRAIN) == FP_OK && fp_model_backward(b, dl) == FP_OK,
           "relu on a value backward reads is not done in place; a custom graph runs");
    fp_model_free(b);
    fp_model_build_begin(&b, "bad", 8, 8, 3);
    v = fp_model_add_conv(b, "c", 0, 4, 3, 1, 1);
    int bn = fp_model_add_bn(b, "bn", v);
    fp_model_add_relu(b, "r", bn);
    fp_model_add_relu(b, "r2", bn);   /* bn's output was overwritten in place */
    tap_ok(fp_model_build_finish(b) == FP_EINVAL, "reading a value overwritten in place -> FP_EINVAL (%s)",
           fp_error_message());
    fp_model_free(b);
}

/* fp_model_share_params: forward on the source's parameters without a copy; a later copy_params
 * goes back to the model's own storage; a policy that rounds parameters refuses, and `half` set on a
 * sharing model rounds its own copy, never the source. */
static void test_share_params(void)
{
    fp_model *src = make("tinynet", 3, 32, 8, 7), *cp = make("tinynet", 3, 32, 8, 1), *sh = make("tinynet", 3, 32, 8, 2);
    enum { N = 2, NX = N * 32 * 32 * 3 };
    float x[NX];
    for (int i = 0; i < NX; i++)
        x[i] = urand();
    const float *l1, *l2;
    int rc = fp_model_copy_params(cp, src, 1) || fp_model_share_params(sh, src);
    float a[N * 3], b[N * 3];
    rc = rc || fp_model_forward(cp, &l1, x, N, FP_MODE_TRAIN);
    memcpy(a, l1, sizeof a);
    rc = rc || fp_model_forward(sh, &l2, x, N, FP_MODE_TRAIN);
    memcpy(b, l2, sizeof b);
    tap_ok(!rc && fp_model_params(sh) == fp_model_params(src) && memcmp(a, b, sizeof a) == 0,
           "shared parameters: same pointer, logits bit-identical to a copy's");
    float keep = fp_model_params(src)[0];
    fp_model_params(src)[0] = keep + 1.0f;
    tap_ok(fp_model_params(sh)[0] == keep + 1.0f, "a change in the source is seen, not copied");
    tap_ok(fp_model_copy_params(sh, cp, 1) == FP_OK && fp_model_params(sh) != fp_model_params(src) &&
               fp_model_params(sh)[0] == fp_model_params(cp)[0] && fp_model_params(src)[0] == keep + 1.0f,
           "copy_params after sharing writes the model's own storage, the source untouched");
    fp_model_params(src)[0] = 1.0f + 0x1p-20f;   /* not an fp16 value */
    tap_ok(fp_model_share_params(sh, src) == FP_OK && fp_model_set_policy(sh, fp_policy_find("half")) == FP_OK &&
               fp_model_params(src)[0] == 1.0f + 0x1p-20f && fp_model_params(sh)[0] == 1.0f,
           "half on a sharing model rounds its own copy, not the source");
    tap_ok(fp_model_share_params(sh, src) == FP_EINVAL && strstr(fp_error_message(), "half"),
           "a half model cannot share (%s)", fp_error_message());
    fp_model *other = make("resnet18", 3, 32, 8, 1);
    tap_ok(fp_model_share_params(other, src) == FP_EINVAL, "different architectures -> FP_EINVAL");
    fp_model_free(other);
    fp_model_free(sh);
    fp_model_free(cp);
    fp_model_free(src);
}

int main(void)
{
    test_counts();
    test_shapes("resnet18", 32, 1, "layer4.1.relu_1");
    test_shapes("resnet18", 33, 2, "layer4.1.relu_1");
    test_shapes("resnet50", 64, 2, "layer4.2.relu_2");
    test_shapes("resnet34", 224, 7, "layer4.2.relu_1");
    test_shapes("tinynet", 37, 19, "relu_1");
    test_gradients();
    test_eval_and_memory();
    test_init();
    test_bad_input();
    test_share_params();
    return tap_done();
}
