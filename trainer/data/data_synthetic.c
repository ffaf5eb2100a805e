/* data_synthetic.c — the built-in `synthetic` dataset: 10 classes, each a shape (disc, square,
 * triangle, cross, ring, frame, ellipse, two dots, striped disc, checker) in its own hue family, drawn
 * at a random place, size and rotation with hue/saturation jitter on a noisy random gradient.
 * Promise: sample (seed, split, index) is a pure function of those keys at any size; nothing stored. */
#include "trainer/data/data_internal.h"
#include "error.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYN_CLASSES 10

static const char *const syn_class_names[SYN_CLASSES] = {
    "disc", "square", "triangle", "cross", "ring", "frame", "ellipse", "two_dots", "stripes", "checker"
};

static inline float maxf(float a, float b) { return a > b ? a : b; }
static inline float minf(float a, float b) { return a < b ? a : b; }

/* Signed distance (approximate outside some shapes; exact enough for a one-pixel edge) of the unit
 * shape of class cls at (x, y): negative inside. */
static inline float shape_sdf(int cls, float x, float y)
{
    float ax = fabsf(x), ay = fabsf(y);
    switch (cls) {
    case 0: return sqrtf(x * x + y * y) - 1.0f;
    case 1: return maxf(ax, ay) - 0.8f;
    case 2: { /* equilateral triangle, half side r */
        const float k = 1.7320508f, r = 0.9f;
        float px = ax - r, py = y + r / k;
        if (px + k * py > 0.0f) {
            float nx = (px - k * py) * 0.5f, ny = (-k * px - py) * 0.5f;
            px = nx;
            py = ny;
        }
        px -= px < -2.0f * r ? -2.0f * r : (px > 0.0f ? 0.0f : px);
        float d = sqrtf(px * px + py * py);
        return py < 0.0f ? d : -d;
    }
    case 3: return minf(maxf(ax - 1.0f, ay - 0.3f), maxf(ax - 0.3f, ay - 1.0f));
    case 4: return fabsf(sqrtf(x * x + y * y) - 0.75f) - 0.22f;
    case 5: return fabsf(maxf(ax, ay) - 0.7f) - 0.15f;
    case 6: { float ex = x, ey = y / 0.45f; return (sqrtf(ex * ex + ey * ey) - 1.0f) * 0.45f; }
    case 7: {
        float dx = ax - 0.55f;
        return sqrtf(dx * dx + y * y) - 0.42f;
    }
    case 8: {
        const float period = 0.5f;
        float t = y / period;
        float s = (fabsf(t - floorf(t) - 0.5f) - 0.25f) * period;
        return maxf(sqrtf(x * x + y * y) - 1.0f, s);
    }
    default: {
        float b = maxf(ax, ay) - 0.85f;
        float m = minf(ax, ay);
        return maxf(b, x * y > 0.0f ? -m : m);
    }
    }
}

static void hsv_to_rgb(float h, float s, float v, float rgb[3])
{
    h = h - floorf(h);
    float hh = h * 6.0f;
    int i = (int)hh;
    float f = hh - (float)i;
    float p = v * (1.0f - s), q = v * (1.0f - s * f), t = v * (1.0f - s * (1.0f - f));
    switch (i % 6) {
    case 0: rgb[0] = v; rgb[1] = t; rgb[2] = p; break;
    case 1: rgb[0] = q; rgb[1] = v; rgb[2] = p; break;
    case 2: rgb[0] = p; rgb[1] = v; rgb[2] = t; break;
    case 3: rgb[0] = p; rgb[1] = q; rgb[2] = v; break;
    case 4: rgb[0] = t; rgb[1] = p; rgb[2] = v; break;
    default: rgb[0] = v; rgb[1] = p; rgb[2] = q; break;
    }
}

static inline float unif(fp_data_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)fp_data_rng_uniform(r);
}

void fp_data_synthetic_render(uint64_t seed, int split, int64_t index, int size, float *out, int *label)
{
    int cls = (int)(index % SYN_CLASSES);
    *label = cls;
    fp_data_rng rng = fp_data_rng_seed(seed, FP_RNG_GENERATE, split, index, 0);

    /* background: a gradient between two muted colours */
    float bg0[3], bg1[3];
    float l0 = unif(&rng, 0.2f, 0.8f), l1 = unif(&rng, 0.2f, 0.8f);
    for (int c = 0; c < 3; c++) {
        bg0[c] = l0 + unif(&rng, -0.1f, 0.1f);
        bg1[c] = l1 + unif(&rng, -0.1f, 0.1f);
    }
    float ga = unif(&rng, 0.0f, 6.2831853f);
    float gdx = cosf(ga), gdy = sinf(ga);

    /* foreground: the class hue family (36 degrees apart) with +-18 degrees of jitter */
    float fg[3];
    hsv_to_rgb((float)cls / SYN_CLASSES + unif(&rng, -0.05f, 0.05f), unif(&rng, 0.7f, 1.0f),
               unif(&rng, 0.55f, 1.0f), fg);
    float cx = unif(&rng, 0.36f, 0.64f), cy = unif(&rng, 0.36f, 0.64f);
    float radius = unif(&rng, 0.22f, 0.34f);
    float rot = unif(&rng, 0.0f, 6.2831853f);
    float cr = cosf(rot) / radius, sr = sinf(rot) / radius;   /* image -> unit shape coordinates */
    float edge = (float)size * radius;                        /* pixels per shape unit */
    float noise = unif(&rng, 0.02f, 0.10f);

    float inv_std[3], mean[3];
    for (int c = 0; c < 3; c++) {
        inv_std[c] = 1.0f / fp_imagenet_std[c];
        mean[c] = fp_imagenet_mean[c];
    }
    float step = 1.0f / (float)size;
    for (int y = 0; y < size; y++) {
        float py = ((float)y + 0.5f) * step;
        float *o = out + (size_t)y * size * 3;
        for (int x = 0; x < size; x++) {
            float px = ((float)x + 0.5f) * step;
            float t = 0.5f + (px - 0.5f) * gdx + (py - 0.5f) * gdy;
            t = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
            float dx = px - cx, dy = py - cy;
            float ux = cr * dx + sr * dy, uy = -sr * dx + cr * dy;
            float alpha;
            if (ux * ux + uy * uy > 2.25f) {
                alpha = 0.0f;   /* every shape fits in radius 1.5: skip the distance function */
            } else {
                alpha = 0.5f - shape_sdf(cls, ux, uy) * edge;
                alpha = alpha < 0.0f ? 0.0f : (alpha > 1.0f ? 1.0f : alpha);
            }
            uint64_t bits = fp_data_rng_next(&rng);
            for (int c = 0; c < 3; c++) {
                float n = ((float)((bits >> (21 * c)) & 0x1FFFFF) * (1.0f / 1048576.0f) - 1.0f) * noise;
                float v = bg0[c] + (bg1[c] - bg0[c]) * t;
                v = v + (fg[c] - v) * alpha + n;
                v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
                o[3 * x + c] = (v - mean[c]) * inv_std[c];
            }
        }
    }
}

static int syn_get(const fp_dataset *ds, int split, int64_t index, int augment, fp_data_rng *rng,
                   float *out, int *label, fp_data_scratch *scratch)
{
    (void)scratch;
    int size = ds->opts.image_size;
    fp_data_synthetic_render(ds->opts.seed, split, index, size, out, label);
    if (augment && fp_data_rng_uniform(rng) < 0.5) {
        for (int y = 0; y < size; y++) {
            float *row = out + (size_t)y * size * 3;
            for (int a = 0, b = size - 1; a < b; a++, b--)
                for (int c = 0; c < 3; c++) {
                    float t = row[3 * a + c];
                    row[3 * a + c] = row[3 * b + c];
                    row[3 * b + c] = t;
                }
        }
    }
    return FP_OK;
}

static const fp_dataset_ops syn_ops = { syn_get, NULL };

int fp_data_open_synthetic(fp_dataset *ds, const char *arg)
{
    int64_t n = 50000, nval = 10000;
    if (arg) {
        char *end;
        errno = 0;
        long long v = strtoll(arg, &end, 10);
        if (!*arg || *end || errno || v < 10 || v > ((int64_t)1 << 40))
            return fp_fail(FP_EINVAL, "data: bad synthetic size '%s' (synthetic:N wants an integer N >= 10)", arg);
        n = v;
        nval = n / 5 > 10 ? n / 5 : 10;
    }
    ds->ops = &syn_ops;
    ds->impl = NULL;
    ds->num_classes = SYN_CLASSES;
    ds->size[FP_SPLIT_TRAIN] = n;
    ds->size[FP_SPLIT_VAL] = nval;
    ds->class_names = calloc(SYN_CLASSES, sizeof *ds->class_names);
    if (!ds->class_names)
        return fp_fail(FP_ENOMEM, "data: out of memory");
    for (int i = 0; i < SYN_CLASSES; i++)
        if (!(ds->class_names[i] = strdup(syn_class_names[i])))
            return fp_fail(FP_ENOMEM, "data: out of memory");
    return FP_OK;
}
