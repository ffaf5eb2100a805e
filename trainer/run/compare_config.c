/* compare_config.c — a comparison's configuration (compare.h): the defaults of `train`, of `compare` /
 * `fp16probe <model>` and of its GPU run, and the one parse of the precision list into the policies the
 * arms hold. Promise: each of these defaults is written once, here (train.c holds the shared ones); a bad
 * list is refused with the valid policies named. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "error.h"
#include "store.h"
#include "trainer/run/compare.h"

void fp_compare_config_default_train(fp_compare_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    fp_train_config_default(&cfg->base);
    cfg->base.db = FP_STORE_DEFAULT_PATH;
    cfg->command = "train";
    cfg->turn_seconds = 1.0;
    cfg->hist_every = cfg->error_every = cfg->trace_every = FP_AUTO;
    cfg->progress_interval_s = NAN;
}

void fp_compare_config_default(fp_compare_config *cfg)
{
    fp_compare_config_default_train(cfg);
    cfg->command = "compare";
    cfg->precision = "fp32,fp16";
    fp_train_config *b = &cfg->base;
    b->arm.model = "resnet50";
    b->arm.image_size = 64;
    b->batch = 16;
    b->steps = 80;
    b->lr_linear_scaling = 1;
    b->arm.lr.warmup_steps = FP_AUTO;
    b->eval_every = FP_AUTO;
    b->eval_batches = 8;
}

void fp_compare_config_default_gpu(fp_compare_config *cfg)
{
    fp_compare_config_default(cfg);
    cfg->base.arm.image_size = 224;
    cfg->base.batch = 256;
    cfg->base.steps = 500;
}

int fp_compare_parse_policies(const char *list, const fp_policy **pols, int max, int *n)
{
    *n = 0;
    if (!list || !*list)
        return fp_fail(FP_EINVAL, "empty precision list; valid policies: %s", fp_policy_names_joined());
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        char name[64];
        if (len == 0 || len >= sizeof name)
            return fp_fail(FP_EINVAL, "%s policy in the precision list '%s'; valid policies: %s",
                           len ? "too long a" : "an empty", list, fp_policy_names_joined());
        memcpy(name, p, len);
        name[len] = '\0';
        const fp_policy *pol = fp_policy_find(name);
        if (!pol)
            return fp_fail(FP_EINVAL, "unknown precision policy '%s' in '%s'; valid policies: %s", name, list,
                           fp_policy_names_joined());
        for (int i = 0; i < *n; i++)
            if (pols[i] == pol)
                return fp_fail(FP_EINVAL, "precision policy '%s' is listed twice in '%s' (each arm needs its own "
                               "policy)", name, list);
        if (*n >= max)
            return fp_fail(FP_EINVAL, "more than %d policies in '%s'", max, list);
        pols[(*n)++] = pol;
        if (!p[len])
            break;
        p += len + 1;
    }
    return FP_OK;
}
