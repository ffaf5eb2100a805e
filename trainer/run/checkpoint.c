/* checkpoint.c — one-file checkpoints of an arm through the safetensors writer (atomic) and reader.
 * Promise: every float is stored as F32 and every counter / the loss scale as exact text (the scale in
 * C99 hex), so a restore reproduces the saved state bit for bit. */
#include "config.h"
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
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

/* ---- reading __metadata__: exactly the text the writer writes, every value in its range ---- */

/* FP_EFORMAT naming the file, the key and its value (made printable) and what was wanted. */
static int bad_meta(const fp_st *st, const char *key, const char *s, const char *want)
{
    char v[64];
    printable(v, sizeof v, s);
    return fp_fail(FP_EFORMAT, "%s: checkpoint metadata '%s' is '%s': %s", fp_st_path(st), key, v, want);
}

/* An integer of __metadata__ as meta_i64 writes it (an optional '-', digits: no spaces, '+', hex or exponent)
 * within [lo, hi]. */
static int get_i64_st(const fp_st *st, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = fp_st_metadata(st, key);
    if (!s)
        return fp_fail(FP_EFORMAT, "%s: checkpoint metadata has no '%s'", fp_st_path(st), key);
    const char *d = s + (*s == '-');
    int ok = *d != '\0';
    for (const char *q = d; ok && *q; q++)
        ok = *q >= '0' && *q <= '9';
    char *end;
    errno = 0;
    long long v = ok ? strtoll(s, &end, 10) : 0;
    if (!ok || errno || *end) {
        char want[96];
        snprintf(want, sizeof want, "not an integer in [%" PRId64 ", %" PRId64 "]", lo, hi);
        return bad_meta(st, key, s, want);
    }
    if (v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "out of range (an integer in [%" PRId64 ", %" PRId64 "])", lo, hi);
        return bad_meta(st, key, s, want);
    }
    *out = v;
    return FP_OK;
}

/* A number of __metadata__ as meta_double writes it (C99 hex, "%a"; plain decimal is read too; no spaces, no
 * inf or nan): finite, in [lo, hi] (lo excluded when lo_open). */
static int get_double_st(const fp_st *st, const char *key, double lo, int lo_open, double hi, double *out)
{
    const char *s = fp_st_metadata(st, key);
    if (!s)
        return fp_fail(FP_EFORMAT, "%s: checkpoint metadata has no '%s'", fp_st_path(st), key);
    const char *d = s + (*s == '-');
    int ok = *d >= '0' && *d <= '9';
    for (const char *q = d; ok && *q; q++)
        ok = strchr("0123456789abcdefABCDEFxXpP.+-", *q) != NULL;
    char *end;
    double v = ok ? strtod(s, &end) : NAN;
    ok = ok && !*end && isfinite(v);
    if (!ok || v < lo || (lo_open && v == lo) || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "needs a finite number %s %g and <= %g", lo_open ? ">" : ">=", lo, hi);
        return bad_meta(st, key, s, want);
    }
    *out = v;
    return FP_OK;
}

/* A name (model, policy, optimizer): 1 to 63 of [a-z0-9_.-]. */
static int get_name_st(const fp_st *st, const char *key)
{
    const char *s = fp_st_metadata(st, key);
    if (!s)
        return fp_fail(FP_EFORMAT, "%s: checkpoint metadata has no '%s'", fp_st_path(st), key);
    size_t n = strlen(s);
    int ok = n > 0 && n < 64;
    for (const char *q = s; ok && *q; q++)
        ok = (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_' || *q == '.' || *q == '-';
    return ok ? FP_OK : bad_meta(st, key, s, "not a name");
}

/* The optimizer's hyperparameters as fp_checkpoint_save writes them (optimizer_json): exactly that text, of
 * the checkpoint's optimizer, every value finite and in its range. */
static void optimizer_json(char *buf, size_t size, const char *kind, double momentum, int nesterov,
                           double weight_decay, double beta1, double beta2, double eps)
{
    snprintf(buf, size,
             "{\"kind\":\"%s\",\"momentum\":%.17g,\"nesterov\":%d,\"weight_decay\":%.17g,\"beta1\":%.17g,"
             "\"beta2\":%.17g,\"eps\":%.17g}",
             kind, momentum, nesterov, weight_decay, beta1, beta2, eps);
}

static int check_optimizer_config(const fp_st *st)
{
    const char *s = fp_st_metadata(st, "optimizer_config"), *kind = fp_st_metadata(st, "optimizer");
    if (!s)
        return fp_fail(FP_EFORMAT, "%s: checkpoint metadata has no 'optimizer_config'", fp_st_path(st));
    char k[16], again[512];
    double m, wd, b1, b2, eps;
    int nest, used = -1;
    int n = sscanf(s, "{\"kind\":\"%15[a-z]\",\"momentum\":%lf,\"nesterov\":%d,\"weight_decay\":%lf,\"beta1\":%lf,"
                      "\"beta2\":%lf,\"eps\":%lf}%n",
                   k, &m, &nest, &wd, &b1, &b2, &eps, &used);
    if (n == 7 && used >= 0)
        optimizer_json(again, sizeof again, k, m, nest, wd, b1, b2, eps);
    if (n != 7 || used < 0 || s[used] || strcmp(again, s) != 0)
        return bad_meta(st, "optimizer_config", s, "not the optimizer JSON fp16probe writes");
    if (!kind || strcmp(k, kind) != 0)
        return bad_meta(st, "optimizer_config", s, "its kind is not the checkpoint's optimizer");
    if (!isfinite(m) || m < 0 || (nest != 0 && nest != 1) || !isfinite(wd) || wd < 0 || !isfinite(b1) || b1 < 0 ||
        b1 >= 1 || !isfinite(b2) || b2 < 0 || b2 >= 1 || !isfinite(eps) || eps <= 0)
        return bad_meta(st, "optimizer_config", s, "a hyperparameter out of range");
    return FP_OK;
}

/* Every value fp_checkpoint_restore and a resume read, checked where the file is opened (so that a bad
 * checkpoint is refused before anything is recorded). */
static int check_meta(const fp_st *st)
{
    int64_t iter, ostep, v;
    double d;
    int rc = get_name_st(st, "model");
    rc = rc ? rc : get_name_st(st, "policy");
    rc = rc ? rc : get_name_st(st, "optimizer");
    rc = rc ? rc : check_optimizer_config(st);
    rc = rc ? rc : get_i64_st(st, "iteration", 0, FP_CHECKPOINT_MAX_STEPS, &iter);
    rc = rc ? rc : get_i64_st(st, "optim_step", 0, iter, &ostep);
    rc = rc ? rc : get_i64_st(st, "data_epoch", 0, FP_CHECKPOINT_MAX_STEPS, &v);
    rc = rc ? rc : get_i64_st(st, "data_batch", 0, FP_CHECKPOINT_MAX_STEPS, &v);
    rc = rc ? rc : get_i64_st(st, "scaler_mode", FP_SCALE_NONE, FP_SCALE_STATIC, &v);
    rc = rc ? rc : get_double_st(st, "scaler_scale", 0, 1, FLT_MAX, &d);
    rc = rc ? rc : get_double_st(st, "scaler_growth_factor", 1, 0, FLT_MAX, &d);
    rc = rc ? rc : get_double_st(st, "scaler_backoff_factor", 0, 1, 1, &d);
    rc = rc ? rc : get_i64_st(st, "scaler_growth_interval", 1, INT_MAX, &v);
    rc = rc ? rc : get_i64_st(st, "scaler_clean_steps", 0, INT_MAX, &v);
    return rc;
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
    optimizer_json(buf, sizeof buf, fp_optim_name(oc->kind), oc->momentum, oc->nesterov, oc->weight_decay, oc->beta1,
                   oc->beta2, oc->eps);
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
    if ((rc = check_meta(st))) {
        fp_st_close(st);
        return rc;
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
    if ((rc = check_meta(ck->st)))   /* checked at open: read again here, the ranges with them */
        return rc;
    fp_st *st = ck->st;
    get_i64_st(st, "iteration", 0, FP_CHECKPOINT_MAX_STEPS, &iter);
    get_i64_st(st, "optim_step", 0, iter, &ostep);
    get_i64_st(st, "data_epoch", 0, FP_CHECKPOINT_MAX_STEPS, &ep);
    get_i64_st(st, "data_batch", 0, FP_CHECKPOINT_MAX_STEPS, &bi);
    get_i64_st(st, "scaler_mode", FP_SCALE_NONE, FP_SCALE_STATIC, &mode);
    get_i64_st(st, "scaler_growth_interval", 1, INT_MAX, &gi);
    get_i64_st(st, "scaler_clean_steps", 0, INT_MAX, &clean);
    get_double_st(st, "scaler_scale", 0, 1, FLT_MAX, &scale);
    get_double_st(st, "scaler_growth_factor", 1, 0, FLT_MAX, &gf);
    get_double_st(st, "scaler_backoff_factor", 0, 1, 1, &bf);
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
        if (strcmp(have, e->val[i]) != 0) {
            char h[400];   /* the file's value on one line */
            printable(h, sizeof h, have);
            return fp_fail(FP_EINVAL, "%s: checkpoint was made with %s %s, this run has %s (resume with the same "
                           "settings)", path, what[i], h, e->val[i]);
        }
    }
    return FP_OK;
}
