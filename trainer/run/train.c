/* train.c — the settings every arm of a run shares (train.h): defaults, the automatic values, the checks of
 * the choices, opening the data. Promise: each default is written once, here (or in compare_config.c's
 * fp_compare_config_default*), and resolving it depends only on the settings themselves. */
#include "config.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "error.h"
#include "trainer/backend.h"
#include "trainer/run/environment.h"
#include "trainer/run/train.h"

void fp_train_config_default(fp_train_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    fp_arm_config_default(&cfg->arm);
    cfg->arm.model = NULL;
    cfg->arm.num_classes = 0;
    cfg->arm.threads = fp_env_online_cpus();
    fp_train_config_set_optimizer(cfg, FP_OPTIM_SGD);
    cfg->augment = 1;
    cfg->shuffle = 1;
    cfg->batch = 32;
    cfg->steps = 100;
    cfg->loader_threads = 2;
    cfg->eval_batches = 50;
}

void fp_train_config_set_optimizer(fp_train_config *cfg, fp_optim_kind kind)
{
    fp_optim_config_default(&cfg->arm.optim, kind);
    if (kind == FP_OPTIM_SGD) {
        cfg->arm.optim.momentum = 0.9;
        cfg->arm.optim.weight_decay = 5e-4;
    }
    cfg->arm.lr.base_lr = NAN;
}

void fp_train_config_set_schedule(fp_train_config *cfg, fp_lr_kind kind)
{
    fp_lr_schedule *s = &cfg->arm.lr;
    double lr = s->base_lr, factor = s->warmup_start_factor;
    int64_t warmup = s->warmup_steps;
    fp_lr_schedule_default(s, kind, lr);
    s->warmup_steps = warmup;
    s->warmup_start_factor = factor;
    s->step_size = 0;
    s->t_max = 0;
}

void fp_train_config_set_device(fp_train_config *cfg, const struct fp_backend_ops *backend, const char *device)
{
    cfg->arm.backend = backend;
    cfg->device = device;
    if (!backend || backend->host_memory)
        return;
    /* A GPU step of ResNet-50 at 224x224 eats thousands of images a second: two loader threads make about
     * 1,500 (bench_data at 224x224, batch 256), so a GPU run takes half the cores, up to 8. */
    int ncpu = fp_env_online_cpus();
    int want = ncpu > 4 ? (ncpu / 2 < 8 ? ncpu / 2 : 8) : 2;
    if (cfg->loader_threads < want)
        cfg->loader_threads = want;
}

void fp_train_config_resolve(fp_train_config *cfg)
{
    fp_lr_schedule *s = &cfg->arm.lr;
    if (s->warmup_steps == FP_AUTO)
        s->warmup_steps = cfg->steps >= 40 ? 10 : cfg->steps / 4;
    if (isnan(s->base_lr)) {
        if (cfg->arm.optim.kind != FP_OPTIM_SGD)
            s->base_lr = 1e-3;
        else
            s->base_lr = cfg->lr_linear_scaling ? 0.1 * cfg->batch / 256.0 : 0.1;
    }
    int64_t main_steps = cfg->steps - s->warmup_steps > 0 ? cfg->steps - s->warmup_steps : 1;
    if (s->kind == FP_LR_STEP && s->step_size == 0)
        s->step_size = main_steps / 3 > 0 ? main_steps / 3 : 1;
    else if (s->kind == FP_LR_COSINE && s->t_max == 0)
        s->t_max = main_steps;
}

static int is_model_name(const char *name)
{
    for (const char *const *n = fp_model_names(); *n; n++)
        if (strcmp(*n, name) == 0)
            return 1;
    return 0;
}

int fp_train_check_choices(const fp_train_config *c)
{
    const fp_arm_config *a = &c->arm;
    if (!a->model)
        return fp_fail(FP_EINVAL, "no model given (--model); valid models: %s", fp_model_names_joined());
    if (!is_model_name(a->model))
        return fp_fail(FP_EINVAL, "unknown model '%s'; valid models: %s", a->model, fp_model_names_joined());
    if (c->batch < 1)
        return fp_fail(FP_EINVAL, "--batch must be >= 1");
    if (c->steps < 1)
        return fp_fail(FP_EINVAL, "--steps must be >= 1 (a run of %" PRId64 " steps trains nothing)", c->steps);
    if (c->checkpoint_every < 0 || (c->checkpoint_every > 0 && !c->checkpoint))
        return fp_fail(FP_EINVAL, "--checkpoint-every needs --checkpoint FILE (where to write) and a period >= 0");
    int rc = fp_optim_config_check(&a->optim);
    if (rc == FP_OK)
        rc = fp_lr_schedule_check(&a->lr);
    return rc;
}

/* One output file: a name; not a directory nor anything but a regular file (the atomic write renames over it);
 * in a directory that exists and takes a new file. */
static int check_output(const char *opt, const char *path, int *usage)
{
    struct stat sb;
    *usage = 1;
    if (!*path)
        return fp_fail(FP_EINVAL, "%s needs a file name (got '')", opt);
    size_t len = strlen(path);
    if (path[len - 1] == '/' || (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return fp_fail(FP_EINVAL, "%s %s: is a directory, not a file", opt, path);
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return fp_fail(FP_EINVAL, "%s %s: exists and is not a regular file (it would be replaced)", opt, path);
    *usage = 0;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &sb) != 0)
        return fp_fail(FP_EIO, "%s %s: cannot write: directory %s %s", opt, path, dir,
                       errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return fp_fail(FP_EIO, "%s %s: cannot write: %s is not a directory", opt, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return fp_fail(FP_EIO, "%s %s: cannot write: directory %s is not writable (%s)", opt, path, dir,
                       strerror(errno));
    return FP_OK;
}

int fp_train_check_outputs(const fp_train_config *c, int *usage)
{
    *usage = 0;
    int rc = c->save ? check_output("--save", c->save, usage) : FP_OK;
    if (rc == FP_OK && c->checkpoint)
        rc = check_output("--checkpoint", c->checkpoint, usage);
    if (rc == FP_OK && c->save && c->checkpoint && strcmp(c->save, c->checkpoint) == 0) {
        *usage = 1;
        rc = fp_fail(FP_EINVAL, "--save and --checkpoint name the same file %s (the weights would overwrite the "
                     "checkpoint)", c->save);
    }
    return rc;
}

int fp_train_open_data(const fp_train_config *c, fp_arm_config *a, fp_dataset **ds, int *usage)
{
    *usage = 0;
    *ds = NULL;
    fp_data_opts dopts;
    fp_data_opts_default(&dopts);
    dopts.image_size = a->image_size;
    dopts.seed = a->seed;
    dopts.augment = c->augment;
    dopts.shuffle = c->shuffle;
    int rc = fp_dataset_open(ds, c->data && *c->data ? c->data : "synthetic", &dopts);
    if (rc) {
        *usage = rc == FP_EINVAL;
        return rc;
    }
    int dclasses = fp_dataset_num_classes(*ds);
    if (a->num_classes <= 0)
        a->num_classes = dclasses;
    else if (a->num_classes < dclasses)
        return *usage = 1, fp_fail(FP_EINVAL, "--classes %d is fewer than the %d classes of %s", a->num_classes, dclasses,
                       fp_dataset_spec(*ds));
    return FP_OK;
}
