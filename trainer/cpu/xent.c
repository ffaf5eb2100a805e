/* xent.c — softmax cross-entropy with integer labels, mean over the batch, plus top-1/top-5 counts.
 * Promises: stable for any finite logits (max subtracted; exps in fp32, sums and logs in double);
 * dlogits = (softmax - onehot) / n overwritten; labels checked before anything is written. A row whose
 * loss is not finite (any NaN or +Inf logit, a -Inf label logit) is never a top-1 / top-5 hit: NaN logits
 * are wrong predictions, whatever the comparisons say (issue 21). Ties count in the label's favour. */
#include <math.h>
#include "error.h"
#include "trainer/layers.h"

int fp_softmax_xent(float *loss, float *dlogits, int *correct1, int *correct5, const float *logits,
                    const int *labels, int n, int classes)
{
    if (n <= 0 || classes <= 0)
        return fp_fail(FP_EINVAL, "fp_softmax_xent: bad dims n=%d classes=%d", n, classes);
    if (!loss || !logits || !labels)
        return fp_fail(FP_EINVAL, "fp_softmax_xent: NULL argument");
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return fp_fail(FP_EINVAL, "fp_softmax_xent: label[%d] = %d outside [0, %d)", i, labels[i], classes);
    double total = 0.0;
    int c1 = 0, c5 = 0;
    const float invn = 1.0f / (float)n;
    for (int i = 0; i < n; i++) {
        const float *l = logits + (size_t)i * classes;
        float mx = l[0];
        for (int j = 1; j < classes; j++)
            mx = l[j] > mx ? l[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < classes; j++)
            sum += (double)expf(l[j] - mx);
        double lse = (double)mx + log(sum);
        float ll = l[labels[i]];
        double row = lse - (double)ll;
        total += row;
        if (dlogits) {
            float *d = dlogits + (size_t)i * classes;
            float inv = (float)(1.0 / sum);
            for (int j = 0; j < classes; j++)
                d[j] = expf(l[j] - mx) * inv * invn;
            d[labels[i]] -= invn;
        }
        if (isfinite(row)) {   /* a NaN or +Inf logit anywhere, a -Inf label logit: a wrong prediction */
            int greater = 0;
            for (int j = 0; j < classes; j++)
                greater += l[j] > ll;
            c1 += greater < 1;
            c5 += greater < 5;
        }
    }
    *loss = (float)(total / (double)n);
    if (correct1)
        *correct1 = c1;
    if (correct5)
        *correct5 = c5;
    return FP_OK;
}
