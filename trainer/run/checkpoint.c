/* checkpoint.c — one-file checkpoints of an arm through the safetensors writer (atomic) and reader.
 * Promise: every float is stored as F32 and every counter / the loss scale as exact text (the scale in
 * C99 hex), so a restore reproduces the saved state bit for bit. */
#include "config.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "safetensors.h"
#include "trainer/run/checkpoint.h"

struct fp_checkpoint {
    fp_st *st;
};

#define OPTIM_PREFIX "optim."

static int meta_i64(fp_st_writer *w, const char *key, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return fp_st_writer_metadata(w, key, buf);
}

static int meta_double(fp_st_writer *w, const char *key, double v)
{
    char buf[48];
    snprintf(buf, sizeof buf, "%a", v);   /* exact */
    return fp_st_writer_metadata(w, key, buf);
}

int fp_checkpoint_save(const char *path, fp_arm *arm, const fp_checkpoint_state *st)
{
    fp_model *m = fp_arm_model(arm);
    fp_optim *opt = fp_arm_optim(arm);
    const fp_arm_config *cfg = fp_arm_get_config(arm);
    const fp_grad_scaler *sc = fp_arm_scaler(arm);
    const fp_optim_config *oc = fp_optim_get_config(opt);
    size_t nt = fp_model_tensor_count(m), ns = fp_optim_state_count(opt);
    float **tmp = calloc(nt ? nt : 1, sizeof *tmp);
    char **names = calloc(ns ? ns : 1, sizeof *names);
    fp_st_writer *w = NULL;
    int rc = FP_OK;
    if (!tmp || !names) {
        rc = fp_fail(FP_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    if ((rc = fp_st_writer_new(&w)))
        goto out;
    for (size_t i = 0; i < nt && !rc; i++) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        const float *d = fp_model_tensor_data(m, t);
        if (!d) {   /* a device model whose download failed: the message says why */
            rc = fp_fail(FP_EINTERNAL, "%s: tensor %s not readable: %s", path, t->name, fp_error_message());
            break;
        }
        if (t->ohwi) {
            if (!(tmp[i] = malloc(t->numel * sizeof(float)))) {
                rc = fp_fail(FP_ENOMEM, "%s: out of memory", path);
                break;
            }
            fp_ohwi_to_oihw(tmp[i], d, (int)t->shape[0], (int)t->shape[1], (int)t->shape[2], (int)t->shape[3]);
            d = tmp[i];
        }
        rc = fp_st_writer_add(w, t->name, FP_ST_F32, t->shape, t->rank, d);
    }
    for (size_t i = 0; i < ns && !rc; i++) {
        fp_optim_state os;
        if ((rc = fp_optim_state_at(opt, i, &os)))
            break;
        size_t len = strlen(OPTIM_PREFIX) + strlen(os.name) + 1;
        if (!(names[i] = malloc(len))) {
            rc = fp_fail(FP_ENOMEM, "%s: out of memory", path);
            break;
        }
        snprintf(names[i], len, OPTIM_PREFIX "%s", os.name);
        int64_t shape[1] = {(int64_t)os.n};
        rc = fp_st_writer_add(w, names[i], FP_ST_F32, shape, 1, os.data);
    }
    if (rc)
        goto out;
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"kind\":\"%s\",\"momentum\":%.17g,\"nesterov\":%d,\"weight_decay\":%.17g,\"beta1\":%.17g,"
             "\"beta2\":%.17g,\"eps\":%.17g}",
             fp_optim_name(oc->kind), oc->momentum, oc->nesterov, oc->weight_decay, oc->beta1, oc->beta2, oc->eps);
    rc = fp_st_writer_metadata(w, "format", FP_CHECKPOINT_FORMAT);
    rc = rc ? rc : fp_st_writer_metadata(w, "version", FP_CHECKPOINT_VERSION);
    rc = rc ? rc : fp_st_writer_metadata(w, "model", fp_model_name(m));
    rc = rc ? rc : fp_st_writer_metadata(w, "policy", fp_arm_policy(arm)->name);
    rc = rc ? rc : meta_i64(w, "num_classes", fp_model_num_classes(m));
    rc = rc ? rc : meta_i64(w, "image_size", cfg->image_size);
    rc = rc ? rc : meta_i64(w, "base_width", cfg->base_width);
    rc = rc ? rc : meta_i64(w, "seed", (int64_t)cfg->seed);
    rc = rc ? rc : fp_st_writer_metadata(w, "optimizer", fp_optim_name(oc->kind));
    rc = rc ? rc : fp_st_writer_metadata(w, "optimizer_config", buf);
    rc = rc ? rc : meta_i64(w, "iteration", fp_arm_iteration(arm));
    rc = rc ? rc : meta_i64(w, "optim_step", fp_optim_get_step(opt));
    rc = rc ? rc : meta_i64(w, "data_epoch", st ? st->data_epoch : 0);
    rc = rc ? rc : meta_i64(w, "data_batch", st ? st->data_batch : 0);
    rc = rc ? rc : meta_i64(w, "scaler_mode", sc->mode);
    rc = rc ? rc : meta_double(w, "scaler_scale", sc->scale);
    rc = rc ? rc : meta_double(w, "scaler_growth_factor", sc->growth_factor);
    rc = rc ? rc : meta_double(w, "scaler_backoff_factor", sc->backoff_factor);
    rc = rc ? rc : meta_i64(w, "scaler_growth_interval", sc->growth_interval);
    rc = rc ? rc : meta_i64(w, "scaler_clean_steps", sc->clean_steps);
    if (!rc && st && st->config_json)
        rc = fp_st_writer_metadata(w, "config", st->config_json);
    for (size_t i = 0; st && i < st->n_extra && !rc; i++)
        rc = fp_st_writer_metadata(w, st->extra[2 * i], st->extra[2 * i + 1]);
    if (!rc)
        rc = fp_st_writer_write(w, path);
out:
    fp_st_writer_free(w);
    for (size_t i = 0; tmp && i < nt; i++)
        free(tmp[i]);
    for (size_t i = 0; names && i < ns; i++)
        free(names[i]);
    free(tmp);
    free(names);
    return rc;
}

/* s for a one-line message: at most size - 1 bytes, control characters as '?', cut with "..." when longer. */
static void printable(char *buf, size_t size, const char *s)
{
    size_t n = 0, len = strlen(s);
    for (; n + 1 < size && s[n]; n++)
        buf[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    buf[n] = '\0';
    if (n < len && size > 4)
        memcpy(buf + size - 4, "...", 4);
}

int fp_checkpoint_open(fp_checkpoint **out, const char *path)
{
    *out = NULL;
    fp_st *st;
    int rc = fp_st_open(&st, path);
    if (rc)
        return rc;
    const char *fmt = fp_st_metadata(st, "format"), *ver = fp_st_metadata(st, "version");
    if (!fmt || strcmp(fmt, FP_CHECKPOINT_FORMAT) != 0) {
        fp_st_close(st);
        return fp_fail(FP_EFORMAT, "%s: not an fp16probe checkpoint (no __metadata__ format '%s')", path,
                       FP_CHECKPOINT_FORMAT);
    }
    if (!ver || strcmp(ver, FP_CHECKPOINT_VERSION) != 0) {
        char v[40];   /* ver points into the file's header, which fp_st_close frees: the message takes a copy */
        printable(v, sizeof v, ver ? ver : "?");
        fp_st_close(st);
        return fp_fail(FP_EVERSION, "%s: checkpoint version '%s' is not supported (this build reads %s)", path, v,
                       FP_CHECKPOINT_VERSION);
    }
    fp_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck) {
        fp_st_close(st);
        return fp_fail(FP_ENOMEM, "%s: out of memory", path);
    }
    ck->st = st;
    *out = ck;
    return FP_OK;
}

void fp_checkpoint_close(fp_checkpoint *ck)
{
    if (!ck)
        return;
    fp_st_close(ck->st);
    free(ck);
}

const char *fp_checkpoint_meta(const fp_checkpoint *ck, const char *key) { return fp_st_metadata(ck->st, key); }

static int get_i64(const fp_checkpoint *ck, const char *key, int64_t *out)
{
    const char *s = fp_st_metadata(ck->st, key);
    char *end;
    if (!s)
        return fp_fail(FP_EFORMAT, "%s: checkpoint metadata has no '%s'", fp_st_path(ck->st), key);
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return fp_fail(FP_EFORMAT, "%s: checkpoint metadata '%s' is not an integer ('%s')", fp_st_path(ck->st), key, s);
    *out = v;
    return FP_OK;
}

static int get_double(const fp_checkpoint *ck, const char *key, double *out)
{
    const char *s = fp_st_metadata(ck->st, key);
    char *end;
    if (!s)
        return fp_fail(FP_EFORMAT, "%s: checkpoint metadata has no '%s'", fp_st_path(ck->st), key);
    *out = strtod(s, &end);
    if (end == s || *end)
        return fp_fail(FP_EFORMAT, "%s: checkpoint metadata '%s' is not a number ('%s')", fp_st_path(ck->st), key, s);
    return FP_OK;
}

static int expect_str(const fp_checkpoint *ck, const char *key, const char *want)
{
    const char *s = fp_st_metadata(ck->st, key);
    if (!s || strcmp(s, want) != 0)
        return fp_fail(FP_EFORMAT, "%s: checkpoint has %s '%s', this run uses '%s'", fp_st_path(ck->st), key,
                       s ? s : "?", want);
    return FP_OK;
}

int fp_checkpoint_restore(const fp_checkpoint *ck, fp_arm *arm, int64_t *data_epoch, int64_t *data_batch)
{
    fp_model *m = fp_arm_model(arm);
    fp_optim *opt = fp_arm_optim(arm);
    const char *path = fp_st_path(ck->st);
    int rc = expect_str(ck, "model", fp_model_name(m));
    rc = rc ? rc : expect_str(ck, "policy", fp_arm_policy(arm)->name);
    rc = rc ? rc : expect_str(ck, "optimizer", fp_optim_name(fp_optim_get_config(opt)->kind));
    if (rc)
        return rc;
    int64_t iter, ostep, ep, bi, mode, gi, clean;
    double scale, gf, bf;
    if ((rc = get_i64(ck, "iteration", &iter)) || (rc = get_i64(ck, "optim_step", &ostep)) ||
        (rc = get_i64(ck, "data_epoch", &ep)) || (rc = get_i64(ck, "data_batch", &bi)) ||
        (rc = get_i64(ck, "scaler_mode", &mode)) || (rc = get_i64(ck, "scaler_growth_interval", &gi)) ||
        (rc = get_i64(ck, "scaler_clean_steps", &clean)) || (rc = get_double(ck, "scaler_scale", &scale)) ||
        (rc = get_double(ck, "scaler_growth_factor", &gf)) || (rc = get_double(ck, "scaler_backoff_factor", &bf)))
        return rc;
    if (iter < 0 || ostep < 0 || ostep > iter || ep < 0 || bi < 0)
        return fp_fail(FP_EFORMAT, "%s: checkpoint counters are inconsistent (iteration %" PRId64 ", optimizer step %"
                       PRId64 ")", path, iter, ostep);
    /* Model tensors (shapes checked, missing ones named); the optimizer's entries are extra here. */
    if ((rc = fp_model_load_st(m, ck->st, 1)))
        return rc;
    size_t ns = fp_optim_state_count(opt), maxn = 1;
    for (size_t i = 0; i < ns; i++) {
        fp_optim_state os;
        if ((rc = fp_optim_state_at(opt, i, &os)))
            return rc;
        if (os.n > maxn)
            maxn = os.n;
    }
    float *buf = malloc(maxn * sizeof(float));
    if (!buf)
        return fp_fail(FP_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < ns && !rc; i++) {
        fp_optim_state os;
        char name[512];
        fp_optim_state_at(opt, i, &os);
        snprintf(name, sizeof name, OPTIM_PREFIX "%s", os.name);
        int64_t shape[1] = {(int64_t)os.n};
        rc = fp_st_read_f32(ck->st, name, buf, shape, 1);
        if (!rc)
            rc = fp_optim_state_load(opt, os.name, buf, os.n);
    }
    free(buf);
    if (rc || (rc = fp_optim_set_step(opt, ostep)))
        return rc;
    fp_grad_scaler *sc = fp_arm_scaler(arm);
    sc->mode = (fp_scale_mode)mode;
    sc->scale = (float)scale;
    sc->growth_factor = (float)gf;
    sc->backoff_factor = (float)bf;
    sc->growth_interval = (int)gi;
    sc->clean_steps = (int)clean;
    fp_arm_set_iteration(arm, iter);
    if (data_epoch)
        *data_epoch = ep;
    if (data_batch)
        *data_batch = bi;
    return FP_OK;
}

void fp_checkpoint_settings_fill(fp_checkpoint_settings *e, const fp_arm_config *a, const char *data, int batch,
                                 int augment, int shuffle, const char *optjson)
{
    static const char *const keys[FP_CHECKPOINT_NSETTINGS] = {"data", "batch", "augment", "shuffle", "image_size",
                                                              "num_classes", "seed", "base_width",
                                                              "optimizer_config_run", "policy"};
    for (int i = 0; i < FP_CHECKPOINT_NSETTINGS; i++)
        e->kv[2 * i] = keys[i];
    snprintf(e->val[0], sizeof e->val[0], "%s", data);
    snprintf(e->val[1], sizeof e->val[1], "%d", batch);
    snprintf(e->val[2], sizeof e->val[2], "%d", augment);
    snprintf(e->val[3], sizeof e->val[3], "%d", shuffle);
    snprintf(e->val[4], sizeof e->val[4], "%d", a->image_size);
    snprintf(e->val[5], sizeof e->val[5], "%d", a->num_classes);
    snprintf(e->val[6], sizeof e->val[6], "%" PRIu64, a->seed);
    snprintf(e->val[7], sizeof e->val[7], "%d", a->base_width);
    snprintf(e->val[8], sizeof e->val[8], "%s", optjson ? optjson : "");
    snprintf(e->val[9], sizeof e->val[9], "%s", a->policy);
    for (int i = 0; i < FP_CHECKPOINT_NSETTINGS; i++)
        e->kv[2 * i + 1] = e->val[i];
}

int fp_checkpoint_settings_check(const fp_checkpoint *ck, const char *path, const fp_checkpoint_settings *e)
{
    static const char *const what[FP_CHECKPOINT_NSETTINGS] = {"--data", "--batch", "--augment", "--shuffle",
                                                              "--image-size", "--classes", "--seed", "base width",
                                                              "optimizer settings", "--precision"};
    for (int i = 0; i < FP_CHECKPOINT_NSETTINGS; i++) {
        const char *have = fp_checkpoint_meta(ck, e->kv[2 * i]);
        if (!have)
            return fp_fail(FP_EFORMAT, "%s: checkpoint metadata has no '%s'", path, e->kv[2 * i]);
        if (strcmp(have, e->val[i]) != 0)
            return fp_fail(FP_EINVAL, "%s: checkpoint was made with %s %s, this run has %s (resume with the same "
                           "settings)", path, what[i], have, e->val[i]);
    }
    return FP_OK;
}
