/* resnet.c — the model zoo: torchvision's resnet18/34 (BasicBlock) and resnet50/101/152 (Bottleneck,
 * ResNet v1.5: stride in conv2), any class count, any input >= 32, channels scaled by base_width/64,
 * torchvision's module names; plus "tinynet", a two-conv network for fast tests. */
#include <stdio.h>
#include <string.h>
#include "error.h"
#include "trainer/model.h"

static const char *const model_names[] = {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "tinynet",
                                          NULL};

const char *const *fp_model_names(void) { return model_names; }

const char *fp_model_names_joined(void)
{
    return "resnet18, resnet34, resnet50, resnet101, resnet152, tinynet";
}

/* conv -> bn (-> relu when relu_name): returns the last value. */
static int conv_bn(fp_model *m, const char *prefix, const char *conv, const char *bn, int in, int cout, int k,
                   int stride, int pad)
{
    char a[96], b[96];
    snprintf(a, sizeof a, "%s%s", prefix, conv);
    snprintf(b, sizeof b, "%s%s", prefix, bn);
    int v = fp_model_add_conv(m, a, in, cout, k, stride, pad);
    return v < 0 ? v : fp_model_add_bn(m, b, v);
}

static int relu(fp_model *m, const char *prefix, const char *name, int in)
{
    char a[96];
    snprintf(a, sizeof a, "%s%s", prefix, name);
    return fp_model_add_relu(m, a, in);
}

/* torchvision BasicBlock / Bottleneck; *inplanes updated. */
static int block(fp_model *m, int bottleneck, const char *prefix, int x, int *inplanes, int planes, int stride)
{
    int expansion = bottleneck ? 4 : 1, outc = planes * expansion, v;
    if (!bottleneck) {
        v = conv_bn(m, prefix, "conv1", "bn1", x, planes, 3, stride, 1);
        v = relu(m, prefix, "relu", v);
        v = conv_bn(m, prefix, "conv2", "bn2", v, planes, 3, 1, 1);
    } else {
        v = conv_bn(m, prefix, "conv1", "bn1", x, planes, 1, 1, 0);
        v = relu(m, prefix, "relu", v);
        v = conv_bn(m, prefix, "conv2", "bn2", v, planes, 3, stride, 1);
        v = relu(m, prefix, "relu_1", v);
        v = conv_bn(m, prefix, "conv3", "bn3", v, outc, 1, 1, 0);
    }
    int identity = x;
    if (stride != 1 || *inplanes != outc)
        identity = conv_bn(m, prefix, "downsample.0", "downsample.1", x, outc, 1, stride, 0);
    char a[96];
    snprintf(a, sizeof a, "%sadd", prefix);
    v = fp_model_add_add(m, a, v, identity);
    v = relu(m, prefix, bottleneck ? "relu_2" : "relu_1", v);
    *inplanes = outc;
    return v;
}

static int build_resnet(fp_model *m, int bottleneck, const int *layers, int width, int classes)
{
    int v = conv_bn(m, "", "conv1", "bn1", 0, width, 7, 2, 3);
    v = relu(m, "", "relu", v);
    v = fp_model_add_maxpool(m, "maxpool", v, 3, 2, 1);
    int inplanes = width;
    for (int l = 0; l < 4; l++) {
        for (int b = 0; b < layers[l]; b++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d.", l + 1, b);
            v = block(m, bottleneck, prefix, v, &inplanes, width << l, (b == 0 && l > 0) ? 2 : 1);
        }
    }
    v = fp_model_add_avgpool(m, "avgpool", v);
    return fp_model_add_linear(m, "fc", v, classes);
}

static int build_tinynet(fp_model *m, int width, int classes)
{
    int c1 = width / 4 > 0 ? width / 4 : 1, c2 = width / 2 > 0 ? width / 2 : 1;   /* 16, 32 at width 64 */
    int v = conv_bn(m, "", "conv1", "bn1", 0, c1, 3, 1, 1);
    v = relu(m, "", "relu", v);
    v = fp_model_add_maxpool(m, "maxpool", v, 3, 2, 1);
    v = conv_bn(m, "", "conv2", "bn2", v, c2, 3, 1, 1);
    v = relu(m, "", "relu_1", v);
    v = fp_model_add_avgpool(m, "avgpool", v);
    return fp_model_add_linear(m, "fc", v, classes);
}

static int check_common(const char *name, int num_classes, int image_size, int base_width)
{
    if (num_classes < 1)
        return fp_fail(FP_EINVAL, "model %s: number of classes must be >= 1 (got %d)", name, num_classes);
    if (image_size < 32)
        return fp_fail(FP_EINVAL, "model %s: image size must be >= 32 (got %d)", name, image_size);
    if (base_width < 1 || base_width > 4096)
        return fp_fail(FP_EINVAL, "model %s: base width must be in 1..4096 (got %d)", name, base_width);
    return FP_OK;
}

static int finish(fp_model **out, fp_model *m, uint64_t seed, int no_init)
{
    int rc = fp_model_build_finish(m);
    if (rc) {
        fp_model_free(m);
        return rc;
    }
    if (!no_init)
        fp_model_init_params(m, seed);
    *out = m;
    return FP_OK;
}

int fp_resnet_create(fp_model **out, const char *name, int bottleneck, const int layers[4], int base_width,
                     int num_classes, int image_size, uint64_t seed)
{
    return fp_resnet_create_ex(out, name, bottleneck, layers, base_width, num_classes, image_size, seed, 0);
}

int fp_resnet_create_ex(fp_model **out, const char *name, int bottleneck, const int layers[4], int base_width,
                        int num_classes, int image_size, uint64_t seed, int no_init)
{
    *out = NULL;
    int rc = check_common(name ? name : "resnet", num_classes, image_size, base_width);
    for (int l = 0; l < 4 && !rc; l++)
        if (layers[l] < 1 || layers[l] > 1000)
            rc = fp_fail(FP_EINVAL, "model %s: stage %d has %d blocks", name ? name : "resnet", l + 1, layers[l]);
    fp_model *m;
    if (rc || (rc = fp_model_build_begin(&m, name ? name : "resnet", image_size, image_size, 3)))
        return rc;
    build_resnet(m, bottleneck, layers, base_width, num_classes);
    return finish(out, m, seed, no_init);
}

int fp_model_create(fp_model **out, const fp_model_config *cfg)
{
    static const int depths[5][4] = {{2, 2, 2, 2}, {3, 4, 6, 3}, {3, 4, 6, 3}, {3, 4, 23, 3}, {3, 8, 36, 3}};
    *out = NULL;
    if (!cfg || !cfg->name)
        return fp_fail(FP_EINVAL, "model: no model name (valid: %s)", fp_model_names_joined());
    int which = -1;
    for (int i = 0; model_names[i]; i++)
        if (strcmp(cfg->name, model_names[i]) == 0)
            which = i;
    if (which < 0)
        return fp_fail(FP_EINVAL, "unknown model '%s' (valid: %s)", cfg->name, fp_model_names_joined());
    int width = cfg->base_width ? cfg->base_width : 64;
    if (which < 5)
        return fp_resnet_create_ex(out, cfg->name, which >= 2, depths[which], width, cfg->num_classes,
                                   cfg->image_size, cfg->seed, cfg->no_init);
    int rc = check_common(cfg->name, cfg->num_classes, cfg->image_size, width);
    fp_model *m;
    if (rc || (rc = fp_model_build_begin(&m, cfg->name, cfg->image_size, cfg->image_size, 3)))
        return rc;
    build_tinynet(m, width, cfg->num_classes);
    return finish(out, m, cfg->seed, cfg->no_init);
}
