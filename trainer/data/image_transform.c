/* image_transform.c — torchvision's image transforms on RGB8 images: RandomResizedCrop + flip for
 * training, Resize + CenterCrop for evaluation, PIL-style (antialiased) bilinear resampling and the
 * ImageNet normalisation. Promise: same inputs and RNG state give bit-identical output floats. */
#include "trainer/data/data_internal.h"
#include "error.h"
#include <math.h>
#include <string.h>

/* Python's round(): half to even (the default floating-point rounding mode). */
static int round_half_even(double x)
{
    return (int)nearbyint(x);
}

void fp_image_rrc_params(int width, int height, double scale_lo, double scale_hi, double ratio_lo,
                         double ratio_hi, fp_data_rng *rng, int *top, int *left, int *h, int *w)
{
    double area = (double)width * (double)height;
    double log_lo = log(ratio_lo), log_hi = log(ratio_hi);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target_area = area * (scale_lo + (scale_hi - scale_lo) * fp_data_rng_uniform(rng));
        double aspect = exp(log_lo + (log_hi - log_lo) * fp_data_rng_uniform(rng));
        int cw = round_half_even(sqrt(target_area * aspect));
        int ch = round_half_even(sqrt(target_area / aspect));
        if (cw > 0 && cw <= width && ch > 0 && ch <= height) {
            *top = (int)fp_data_rng_below(rng, (uint64_t)(height - ch + 1));
            *left = (int)fp_data_rng_below(rng, (uint64_t)(width - cw + 1));
            *h = ch;
            *w = cw;
            return;
        }
    }
    /* fallback: the whole image, cut to the nearest allowed ratio, centered */
    double in_ratio = (double)width / (double)height;
    int cw, ch;
    if (in_ratio < ratio_lo) {
        cw = width;
        ch = round_half_even(cw / ratio_lo);
    } else if (in_ratio > ratio_hi) {
        ch = height;
        cw = round_half_even(ch * ratio_hi);
    } else {
        cw = width;
        ch = height;
    }
    *top = (height - ch) / 2;
    *left = (width - cw) / 2;
    *h = ch;
    *w = cw;
}

void fp_image_center_crop_box(int width, int height, int size, double box[4])
{
    int r = round_half_even((double)size * 256.0 / 224.0);
    int rw, rh;
    if (width <= height) {
        rw = r;
        rh = (int)((double)r * height / width);
    } else {
        rh = r;
        rw = (int)((double)r * width / height);
    }
    int top = round_half_even((rh - size) / 2.0);
    int left = round_half_even((rw - size) / 2.0);
    double sx = (double)width / rw, sy = (double)height / rh;
    box[0] = left * sx;
    box[1] = top * sy;
    box[2] = (left + size) * sx;
    box[3] = (top + size) * sy;
}

void fp_image_normalise(const uint8_t *src, int width, int height, int flip, float *out)
{
    for (int y = 0; y < height; y++) {
        const uint8_t *row = src + (size_t)y * width * 3;
        float *o = out + (size_t)y * width * 3;
        for (int x = 0; x < width; x++) {
            const uint8_t *p = row + (size_t)(flip ? width - 1 - x : x) * 3;
            for (int c = 0; c < 3; c++)
                o[3 * x + c] = ((float)p[c] / 255.0f - fp_imagenet_mean[c]) / fp_imagenet_std[c];
        }
    }
}

/* PIL's precompute_coeffs for the bilinear (triangle) filter: output pixel i reads inputs
 * bounds[2i] .. bounds[2i] + bounds[2i+1] - 1 with weights k[i*ksize + ...]. */
static int filter_ksize(double in0, double in1, int outsize)
{
    double scale = (in1 - in0) / outsize;
    double support = scale < 1.0 ? 1.0 : scale;
    return (int)ceil(support) * 2 + 1;
}

static void filter_coeffs(double in0, double in1, int insize, int outsize, int ksize, int *bounds, float *k)
{
    double scale = (in1 - in0) / outsize;
    double fscale = scale < 1.0 ? 1.0 : scale;
    double support = fscale, ss = 1.0 / fscale;
    for (int i = 0; i < outsize; i++) {
        double center = in0 + (i + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > insize)
            xmax = insize;
        xmax -= xmin;
        if (xmax < 0)
            xmax = 0;
        if (xmax > ksize)
            xmax = ksize;
        float *ki = k + (size_t)i * ksize;
        double ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            double t = fabs((x + xmin - center + 0.5) * ss);
            double v = t < 1.0 ? 1.0 - t : 0.0;
            ki[x] = (float)v;
            ww += v;
        }
        for (int x = 0; x < xmax; x++)
            ki[x] = ww != 0.0 ? (float)(ki[x] / ww) : 0.0f;
        for (int x = xmax; x < ksize; x++)
            ki[x] = 0.0f;
        bounds[2 * i] = xmin;
        bounds[2 * i + 1] = xmax;
    }
}

int fp_image_resample(const uint8_t *src, int width, int height, const double box[4], int dw, int dh,
                      int flip, float *out, fp_data_scratch *scratch)
{
    if (box[0] == 0.0 && box[1] == 0.0 && box[2] == width && box[3] == height && dw == width && dh == height) {
        fp_image_normalise(src, width, height, flip, out);
        return FP_OK;
    }
    int kx = filter_ksize(box[0], box[2], dw), ky = filter_ksize(box[1], box[3], dh);
    size_t coef_bytes = ((size_t)dw * kx + (size_t)dh * ky) * sizeof(float) + (size_t)(dw + dh) * 2 * sizeof(int);
    int rc = fp_data_buf_reserve(&scratch->coef, coef_bytes);
    if (rc)
        return rc;
    float *cx = scratch->coef.p;
    float *cy = cx + (size_t)dw * kx;
    int *bx = (int *)(cy + (size_t)dh * ky);
    int *by = bx + 2 * dw;
    filter_coeffs(box[0], box[2], width, dw, kx, bx, cx);
    filter_coeffs(box[1], box[3], height, dh, ky, by, cy);

    /* rows of the source the vertical pass reads */
    int y0 = height, y1 = 0;
    for (int i = 0; i < dh; i++) {
        if (by[2 * i + 1] == 0)
            continue;
        if (by[2 * i] < y0)
            y0 = by[2 * i];
        if (by[2 * i] + by[2 * i + 1] > y1)
            y1 = by[2 * i] + by[2 * i + 1];
    }
    if (y1 < y0)
        y0 = y1 = 0;
    rc = fp_data_buf_reserve(&scratch->tmp, (size_t)(y1 - y0 + 1) * dw * 3 * sizeof(float));
    if (rc)
        return rc;
    float *tmp = scratch->tmp.p;

    /* horizontal pass: rows y0..y1-1 -> tmp [y1-y0][dw][3], values in 0..255 */
    for (int y = y0; y < y1; y++) {
        const uint8_t *row = src + (size_t)y * width * 3;
        float *t = tmp + (size_t)(y - y0) * dw * 3;
        for (int i = 0; i < dw; i++) {
            const float *k = cx + (size_t)i * kx;
            const uint8_t *p = row + (size_t)bx[2 * i] * 3;
            float r = 0.f, g = 0.f, b = 0.f;
            for (int j = 0; j < bx[2 * i + 1]; j++) {
                r += k[j] * p[3 * j];
                g += k[j] * p[3 * j + 1];
                b += k[j] * p[3 * j + 2];
            }
            t[3 * i] = r;
            t[3 * i + 1] = g;
            t[3 * i + 2] = b;
        }
    }
    /* vertical pass + normalisation (+ mirror) */
    for (int i = 0; i < dh; i++) {
        const float *k = cy + (size_t)i * ky;
        float *o = out + (size_t)i * dw * 3;
        const float *t0 = tmp + (size_t)(by[2 * i] - y0) * dw * 3;
        int n = by[2 * i + 1];
        for (int x = 0; x < dw; x++) {
            float acc[3] = { 0.f, 0.f, 0.f };
            for (int j = 0; j < n; j++) {
                const float *t = t0 + ((size_t)j * dw + x) * 3;
                acc[0] += k[j] * t[0];
                acc[1] += k[j] * t[1];
                acc[2] += k[j] * t[2];
            }
            float *d = o + (size_t)(flip ? dw - 1 - x : x) * 3;
            for (int c = 0; c < 3; c++)
                d[c] = (acc[c] / 255.0f - fp_imagenet_mean[c]) / fp_imagenet_std[c];
        }
    }
    return FP_OK;
}

int fp_image_transform(const uint8_t *rgb, int width, int height, int size, int augment,
                       fp_data_rng *rng, float *out, fp_data_scratch *scratch)
{
    double box[4];
    int flip = 0;
    if (augment) {
        int top, left, h, w;
        fp_image_rrc_params(width, height, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, rng, &top, &left, &h, &w);
        box[0] = left;
        box[1] = top;
        box[2] = left + w;
        box[3] = top + h;
        flip = fp_data_rng_uniform(rng) < 0.5;
    } else {
        fp_image_center_crop_box(width, height, size, box);
    }
    return fp_image_resample(rgb, width, height, box, size, size, flip, out, scratch);
}
