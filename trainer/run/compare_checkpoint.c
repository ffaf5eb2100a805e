/* compare_checkpoint.c — one arm's checkpoints in the training loop (compare_internal.h): the model and
 * policy a resume takes from its checkpoint, the restore once the run's settings are checked against the
 * checkpoint's, and checkpoints at the arm's own data position. Promise: a run resumed from a checkpoint
 * continues bit-identically to one that never stopped (the same batches, the same state). */
#include "config.h"
#include <inttypes.h>
#include <stdlib.h>
#include "error.h"
#include "trainer/run/compare_internal.h"
#include "trainer/run/config_json.h"

int fp_cmp_resume_choices(fp_compare *c)
{
    fp_compare_config *cf = &c->cfg;
    int rc = c->ck ? FP_OK : fp_checkpoint_open(&c->ck, cf->base.resume);
    if (rc)
        return rc;
    if (!cf->base.arm.model)
        cf->base.arm.model = fp_checkpoint_meta(c->ck, "model");
    if (!cf->precision)
        cf->precision = fp_checkpoint_meta(c->ck, "policy");
    return FP_OK;
}

/* The settings of this run that its checkpoint must share (checkpoint.h). */
static int settings(const fp_compare *c, fp_checkpoint_settings *s)
{
    fp_arm_config ac = c->acfg;
    ac.policy = c->arms[0].policy;
    char *optjson = fp_config_optimizer_json(&ac);
    if (!optjson)
        return fp_fail(FP_ENOMEM, "out of memory");
    fp_checkpoint_settings_fill(s, &ac, c->data, c->cfg.base.batch, c->cfg.base.augment, c->cfg.base.shuffle,
                                optjson);
    free(optjson);
    return FP_OK;
}

int fp_cmp_resume_check(fp_compare *c, int *usage)
{
    const char *path = c->cfg.base.resume;
    *usage = 0;
    int rc = c->ck ? FP_OK : fp_checkpoint_open(&c->ck, path);
    if (rc)
        return rc;
    /* checked at open: a decimal integer in [0, FP_CHECKPOINT_MAX_STEPS] */
    const int64_t at = strtoll(fp_checkpoint_meta(c->ck, "iteration"), NULL, 10), steps = c->cfg.base.steps;
    if (at >= steps) {
        *usage = 1;
        return fp_fail(FP_EINVAL, "%s: the checkpoint is at step %" PRId64 " and --steps is %" PRId64 ": nothing "
                       "left to train (--steps counts from the run's start: give more)", path, at, steps);
    }
    fp_checkpoint_settings s;
    rc = settings(c, &s);
    return rc ? rc : fp_checkpoint_settings_check(c->ck, path, &s);
}

int fp_cmp_resume(fp_compare *c)
{
    const char *path = c->cfg.base.resume;
    fp_checkpoint_settings s;
    int rc = c->ck ? FP_OK : fp_checkpoint_open(&c->ck, path);
    rc = rc ? rc : settings(c, &s);
    rc = rc ? rc : fp_checkpoint_settings_check(c->ck, path, &s);
    rc = rc ? rc : fp_checkpoint_restore(c->ck, c->arms[0].arm, &c->start_epoch, &c->start_batch);
    if (rc == FP_OK)
        c->start_iter = fp_arm_iteration(c->arms[0].arm);
    return rc;
}

int fp_cmp_checkpoint(fp_compare *c, int i)
{
    const char *path = c->cfg.base.checkpoint;
    if (!path)
        return FP_OK;
    arm_state *a = &c->arms[i];
    fp_checkpoint_settings s;
    int rc = settings(c, &s);
    if (rc)
        return rc;
    fp_arm_config ac = c->acfg;
    ac.policy = a->policy;
    char *json = fp_config_json(&c->cfg.base, &ac, c->data, c->device, c->cfg.command, c->extra);
    if (!json)
        return fp_fail(FP_ENOMEM, "out of memory");
    fp_checkpoint_state cs = {a->data_epoch, a->data_batch, json, s.kv, FP_CHECKPOINT_NSETTINGS};
    rc = fp_checkpoint_save(path, a->arm, &cs);
    free(json);
    return rc;
}
