/* arm_eval.c — an arm's evaluation: EVAL-mode forwards (running statistics) over batches or a data set's split,
 * their loss and top-1 / top-5 accumulated. Promise: nothing trains (no gradients, no optimizer, no scaler). */
#include "config.h"
#include <math.h>
#include <string.h>
#include "error.h"
#include "trainer/run/arm_internal.h"

void fp_arm_eval_reset(fp_arm_eval_acc *acc) { memset(acc, 0, sizeof *acc); }

int fp_arm_eval_batch(fp_arm *a, const fp_batch *b, fp_arm_eval_acc *acc)
{
    const float *logits;
    int rc = fp_model_forward(a->model, &logits, b->images, b->n, FP_MODE_EVAL);
    if (rc)
        return rc;
    float loss = 0;
    int c1 = 0, c5 = 0;
    rc = fp_softmax_xent(&loss, NULL, &c1, &c5, logits, (const int *)b->labels, b->n, fp_model_num_classes(a->model));
    if (rc)
        return rc;
    acc->loss_sum += (double)loss * b->n;
    acc->correct1 += c1;
    acc->correct5 += c5;
    acc->n += b->n;
    acc->batches++;
    return FP_OK;
}

void fp_arm_eval_result(const fp_arm_eval_acc *acc, double *loss, double *top1, double *top5)
{
    double n = (double)acc->n;
    if (loss)
        *loss = acc->n ? acc->loss_sum / n : NAN;
    if (top1)
        *top1 = acc->n ? (double)acc->correct1 / n : NAN;
    if (top5)
        *top5 = acc->n ? (double)acc->correct5 / n : NAN;
}

int fp_arm_evaluate(fp_arm *a, const fp_dataset *ds, int split, int batch, int loader_threads, int64_t max_batches,
                    fp_arm_eval_acc *acc)
{
    fp_arm_eval_reset(acc);
    if (fp_dataset_size(ds, split) <= 0)
        return fp_fail(FP_EINVAL, "dataset %s has no %s split", fp_dataset_spec(ds),
                       split == FP_SPLIT_VAL ? "validation" : "training");
    fp_loader_opts lo;
    fp_loader_opts_default(&lo);
    lo.split = split;
    lo.batch = batch;
    lo.threads = loader_threads;
    lo.drop_last = 0;
    lo.epochs = 1;
    fp_loader *ld;
    int rc = fp_loader_start(&ld, ds, &lo);
    if (rc)
        return rc;
    fp_batch b;
    while ((max_batches <= 0 || acc->batches < max_batches) && (rc = fp_loader_next(ld, &b)) == FP_OK)
        if ((rc = fp_arm_eval_batch(a, &b, acc)))
            break;
    fp_loader_stop(ld);
    return rc < 0 ? rc : FP_OK;
}
