/* skipped_step.c — analysis.h fp_skipped_step_analysis: from a skipped step's scaled gradients, the
 * first layer (in backward order) holding Inf / NaN and every layer's headroom log2(max finite / amax).
 * Promises: reads the gradients once, writes nothing but text and headroom; text is truncated to cap. */
#include <math.h>
#include <stdio.h>
#include "formats.h"
#include "trainer/analysis/analysis.h"

int fp_skipped_step_analysis(const fp_model *m, const float *grads, float loss_scale, fp_format fmt, char *text,
                             size_t cap, double *headroom)
{
    const fp_format_info_t *fi = fp_format_info(fmt);
    double maxf = fi ? fi->max_finite : 65504.0;
    int first = -1, nl = fp_model_layer_count(m);
    size_t first_inf = 0, first_nan = 0, first_cnt = 0;
    size_t pos = 0;
    char hr[8192];
    hr[0] = 0;
    for (int l = nl - 1; l >= 0; l--) {   /* backward order */
        size_t off, cnt;
        fp_model_layer_params(m, l, &off, &cnt);
        if (headroom)
            headroom[l] = NAN;
        if (!cnt)
            continue;
        size_t ninf = 0, nnan = 0;
        float amax = 0;
        for (size_t i = off; i < off + cnt; i++) {
            float g = grads[i];
            if (isnan(g))
                nnan++;
            else if (isinf(g))
                ninf++;
            else if (fabsf(g) > amax)
                amax = fabsf(g);
        }
        if ((ninf || nnan) && first < 0) {
            first = l;
            first_inf = ninf;
            first_nan = nnan;
            first_cnt = cnt;
        }
        double h = amax > 0 ? log2(maxf / amax) : INFINITY;
        if (headroom)
            headroom[l] = h;
        if (pos < sizeof hr - 1) {
            int w = snprintf(hr + pos, sizeof hr - pos, " %s=%.2f", fp_model_layer(m, l)->name, h);
            if (w > 0)
                pos += (size_t)w < sizeof hr - pos ? (size_t)w : sizeof hr - pos - 1;
        }
    }
    if (text && cap) {
        if (first >= 0)
            snprintf(text, cap,
                     "skipped step: first non-finite gradient in backward order: layer %d %s (inf %zu, nan %zu of %zu) "
                     "at loss scale %g; headroom log2(%g/amax) per layer:%s",
                     first, fp_model_layer(m, first)->name, first_inf, first_nan, first_cnt, (double)loss_scale, maxf,
                     hr);
        else
            snprintf(text, cap, "skipped step: every parameter gradient finite at loss scale %g; headroom "
                     "log2(%g/amax) per layer:%s", (double)loss_scale, maxf, hr);
    }
    return first;
}
