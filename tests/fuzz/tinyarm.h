/* tinyarm.h — the arm configurations of the checkpoint seeds (make_seeds.c) and of the arms the checkpoint
 * target restores into (fuzz_checkpoint.c): tinynet, 32x32, base width 8, 3 classes (a 2 KiB file). */
#ifndef FP_FUZZ_TINYARM_H
#define FP_FUZZ_TINYARM_H

#include "trainer/run/arm.h"

static const struct {
    const char *policy;
    fp_optim_kind kind;
} fz_tiny_arms[] = {{"fp32", FP_OPTIM_SGD}, {"fp16", FP_OPTIM_ADAM}};
#define FZ_TINY_NARMS (sizeof fz_tiny_arms / sizeof fz_tiny_arms[0])

static inline void fz_tiny_config(fp_arm_config *c, size_t i)
{
    fp_arm_config_default(c);
    c->model = "tinynet";
    c->policy = fz_tiny_arms[i].policy;
    c->num_classes = 3;
    c->image_size = 32;
    c->base_width = 8;
    c->seed = 3;
    fp_optim_config_default(&c->optim, fz_tiny_arms[i].kind);
    fp_lr_schedule_default(&c->lr, FP_LR_COSINE, fz_tiny_arms[i].kind == FP_OPTIM_SGD ? 0.1 : 1e-3);
}

#endif
