/* test_checkpoint.c — trainer/checkpoint.c on tinynet at 32x32, batch 8: 3 steps + save + restore into a
 * fresh arm + 3 steps equals 6 uninterrupted steps bit for bit (weights, BN statistics, optimizer state,
 * scaler, data position), for SGD/fp32 and Adam/fp16; bad files fail with one line naming file and
 * tensor or key. */
#include "config.h"
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "error.h"
#include "safetensors.h"
#include "tap.h"
#include "trainer/run/checkpoint.h"

#define S 32
#define B 8

static fp_dataset *ds;
static char dir[256];

static void cfg_tiny(fp_arm_config *c, const char *policy, fp_optim_kind kind)
{
    fp_arm_config_default(c);
    c->model = "tinynet";
    c->policy = policy;
    c->num_classes = 10;
    c->image_size = S;
    c->seed = 3;
    fp_optim_config_default(&c->optim, kind);
    if (kind == FP_OPTIM_SGD) {
        c->optim.momentum = 0.9;
        c->optim.weight_decay = 5e-4;
    }
    fp_lr_schedule_default(&c->lr, FP_LR_COSINE, kind == FP_OPTIM_SGD ? 0.1 : 1e-3);
    c->lr.t_max = 6;
    c->growth_interval = 2;   /* so the fp16 scaler grows within the run */
}

/* Runs steps [from, to) of arm a from a loader started at (epoch, batch); returns the next position. */
static int run_steps(fp_arm *a, int64_t *epoch, int64_t *bi, int n)
{
    fp_loader_opts lo;
    fp_loader_opts_default(&lo);
    lo.batch = B;
    lo.threads = 2;
    lo.start_epoch = *epoch;
    lo.start_batch = *bi;
    fp_loader *ld;
    if (fp_loader_start(&ld, ds, &lo))
        return -1;
    int done = 0, rc = 0;
    while (done < n) {
        fp_batch b;
        rc = fp_loader_next(ld, &b);
        if (rc == FP_DATA_END_OF_EPOCH)
            continue;
        if (rc < 0)
            break;
        fp_arm_step_result r;
        if ((rc = fp_arm_step(a, &b, &r)))
            break;
        done++;
    }
    fp_loader_position(ld, epoch, bi);
    fp_loader_stop(ld);
    return rc < 0 ? rc : 0;
}

static int same_state(fp_arm *x, fp_arm *y)
{
    fp_model *mx = fp_arm_model(x), *my = fp_arm_model(y);
    if (memcmp(fp_model_params(mx), fp_model_params(my), fp_model_num_params(mx) * 4) ||
        memcmp(fp_model_buffers(mx), fp_model_buffers(my), fp_model_num_buffers(mx) * 4))
        return 0;
    fp_optim *ox = fp_arm_optim(x), *oy = fp_arm_optim(y);
    if (fp_optim_get_step(ox) != fp_optim_get_step(oy) || fp_optim_state_count(ox) != fp_optim_state_count(oy))
        return 0;
    for (size_t i = 0; i < fp_optim_state_count(ox); i++) {
        fp_optim_state a, b;
        fp_optim_state_at(ox, i, &a);
        fp_optim_state_at(oy, i, &b);
        if (a.n != b.n || memcmp(a.data, b.data, a.n * 4))
            return 0;
    }
    const fp_grad_scaler *sx = fp_arm_scaler(x), *sy = fp_arm_scaler(y);
    return sx->scale == sy->scale && sx->clean_steps == sy->clean_steps &&
           fp_arm_iteration(x) == fp_arm_iteration(y);
}

static void resume_case(const char *policy, fp_optim_kind kind)
{
    char path[300];
    snprintf(path, sizeof path, "%s/ck_%s.safetensors", dir, policy);
    fp_arm_config c;
    cfg_tiny(&c, policy, kind);
    fp_arm *ref = NULL, *half1 = NULL, *half2 = NULL;
    fp_arm_create(&ref, &c);
    fp_arm_create(&half1, &c);
    c.seed = 99;   /* a different init: the restore must overwrite everything */
    fp_arm_create(&half2, &c);
    int64_t e0 = 0, b0 = 0, e1 = 0, b1 = 0;
    /* synthetic:40 with batch 8: 5 batches per epoch, so 6 steps cross an epoch boundary */
    int rc = run_steps(ref, &e0, &b0, 6);
    rc |= run_steps(half1, &e1, &b1, 3);
    fp_checkpoint_state st = {e1, b1, "{\"test\":1}", NULL, 0};
    rc |= fp_checkpoint_save(path, half1, &st);
    tap_ok(rc == 0 && access(path, F_OK) == 0, "%s/%s: 6 steps, and 3 steps + checkpoint saved", policy,
           fp_optim_name(kind));
    fp_checkpoint *ck = NULL;
    int64_t re = -1, rb = -1;
    rc = fp_checkpoint_open(&ck, path);
    rc = rc ? rc : fp_checkpoint_restore(ck, half2, &re, &rb);
    tap_ok(rc == FP_OK && re == e1 && rb == b1 && fp_arm_iteration(half2) == 3,
           "%s: restore (iteration %lld, data position %lld/%lld) %s", policy, (long long)fp_arm_iteration(half2),
           (long long)re, (long long)rb, rc ? fp_error_message() : "");
    tap_ok(ck && fp_checkpoint_meta(ck, "config") && strcmp(fp_checkpoint_meta(ck, "config"), "{\"test\":1}") == 0,
           "%s: the configuration is kept in __metadata__", policy);
    fp_checkpoint_close(ck);
    tap_ok(same_state(half1, half2), "%s: the restored arm equals the saved one bit for bit", policy);
    rc = run_steps(half2, &re, &rb, 3);
    tap_ok(rc == 0 && same_state(ref, half2) && re == e0 && rb == b0,
           "%s: 3 + resume + 3 steps == 6 steps, bit for bit (weights, BN stats, optimizer, scaler)", policy);
    fp_arm_free(ref);
    fp_arm_free(half1);
    fp_arm_free(half2);
}

static int one_line(const char *msg)
{
    return msg && *msg && !strchr(msg, '\n');
}

/* Copies checkpoint src to dst with __metadata__ key set to value (NULL: left out); the tensors as they are. */
static int rewrite_meta(const char *src, const char *dst, const char *key, const char *value)
{
    fp_st *st = NULL;
    fp_st_writer *w = NULL;
    int rc = fp_st_open(&st, src);
    rc = rc ? rc : fp_st_writer_new(&w);
    for (size_t i = 0; !rc && i < fp_st_count(st); i++) {
        const fp_st_tensor *tt = fp_st_at(st, i);
        rc = fp_st_writer_add(w, tt->name, tt->dtype, tt->shape, tt->rank, tt->data);
    }
    for (size_t i = 0; !rc && i < fp_st_metadata_count(st); i++) {
        const char *k, *v;
        fp_st_metadata_at(st, i, &k, &v);
        if (strcmp(k, key) != 0)
            rc = fp_st_writer_metadata(w, k, v);
    }
    if (!rc && value)
        rc = fp_st_writer_metadata(w, key, value);
    rc = rc ? rc : fp_st_writer_write(w, dst);
    fp_st_writer_free(w);
    fp_st_close(st);
    return rc;
}

/* A checkpoint whose __metadata__ key reads value is refused at open: FP_EFORMAT, one line naming the file and
 * the key (and, when want is not NULL, containing want). */
static void bad_meta(const char *good, const char *key, const char *value, const char *want)
{
    char p[300];
    snprintf(p, sizeof p, "%s/meta_%s.safetensors", dir, key);
    fp_checkpoint *ck = NULL;
    int rc = rewrite_meta(good, p, key, value);
    rc = rc ? -1000 + rc : fp_checkpoint_open(&ck, p);
    const char *m = fp_error_message();
    char shown[200] = "";   /* the value for the test's one line */
    size_t k = 0;
    for (const char *q = value ? value : "(none)"; *q && k + 3 < sizeof shown; q++)
        k += (size_t)snprintf(shown + k, sizeof shown - k, *q == '\n' ? "\\n" : "%c", *q);
    tap_ok(rc == FP_EFORMAT && !ck && one_line(m) && strstr(m, "meta_") && strstr(m, key) && (!want || strstr(m, want)),
           "checkpoint with %s '%s' refused at open, one line naming file and field (%s)", key, shown,
           rc == FP_OK ? "opened" : m);
    fp_checkpoint_close(ck);
}

int main(void)
{
#ifdef M_PERTURB
    mallopt(M_PERTURB, 0xa5);   /* freed memory reads as garbage: a use after free shows without ASan too */
#endif
    fp_data_opts o;
    fp_data_opts_default(&o);
    o.image_size = S;
    o.seed = 5;
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fp16probe-ck-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir) || fp_dataset_open(&ds, "synthetic:40", &o))
        tap_skip_all("no scratch directory or dataset");

    resume_case("fp32", FP_OPTIM_SGD);
    resume_case("fp16", FP_OPTIM_ADAM);

    fp_arm_config c;
    fp_arm *a = NULL;
    char path[300], p2[300];
    int rc;
    fp_checkpoint *ck = NULL;

    snprintf(path, sizeof path, "%s/missing.safetensors", dir);
    rc = fp_checkpoint_open(&ck, path);
    tap_ok(rc == FP_EIO && strstr(fp_error_message(), "missing.safetensors") && one_line(fp_error_message()),
           "missing file: FP_EIO naming it (%s)", fp_error_message());

    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    FILE *f = fopen(path, "wb");
    fwrite("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":", 1, 13, f);
    fclose(f);
    rc = fp_checkpoint_open(&ck, path);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "bad.safetensors") && one_line(fp_error_message()),
           "bad header: FP_EFORMAT naming the file (%s)", fp_error_message());

    /* a newer version: the message names the version read from the file (it was read after the file's memory
     * was freed: issue 21) */
    cfg_tiny(&c, "fp32", FP_OPTIM_SGD);
    fp_arm_create(&a, &c);
    char good[300];
    snprintf(good, sizeof good, "%s/good0.safetensors", dir);
    fp_checkpoint_save(good, a, NULL);
    snprintf(path, sizeof path, "%s/v2.safetensors", dir);
    rc = rewrite_meta(good, path, "version", "2");
    rc = rc ? rc : fp_checkpoint_open(&ck, path);
    tap_ok(rc == FP_EVERSION && !ck && one_line(fp_error_message()) && strstr(fp_error_message(), "v2.safetensors") &&
               strstr(fp_error_message(), "version '2' is not supported"),
           "version 2: FP_EVERSION naming the file and the version (%s)", fp_error_message());

    /* metadata a hostile or broken file may carry (issue 21 #10): each refused at open, naming file and field */
    bad_meta(good, "scaler_scale", "nan", "finite number > 0");
    bad_meta(good, "scaler_scale", "0x0p+0", "finite number > 0");
    bad_meta(good, "scaler_scale", "-0x1p+0", NULL);
    bad_meta(good, "scaler_scale", "inf", NULL);
    bad_meta(good, "scaler_scale", "0x1p+200", NULL);   /* finite, but no float */
    bad_meta(good, "scaler_scale", " 0x1p+0", NULL);
    bad_meta(good, "scaler_scale", NULL, "has no");
    bad_meta(good, "iteration", "1e6", "not an integer");
    bad_meta(good, "iteration", " 5", NULL);
    bad_meta(good, "iteration", "+5", NULL);
    bad_meta(good, "iteration", "0x10", NULL);
    bad_meta(good, "iteration", "-3", "out of range");
    bad_meta(good, "iteration", "2000000000000", "out of range");
    bad_meta(good, "optim_step", "5", "out of range");   /* beyond the iteration (0) */
    bad_meta(good, "data_batch", "-1", NULL);
    bad_meta(good, "scaler_mode", "7", NULL);
    bad_meta(good, "scaler_growth_interval", "0", NULL);
    bad_meta(good, "scaler_backoff_factor", "0x1p+1", NULL);
    bad_meta(good, "scaler_growth_factor", "0x1p-1", NULL);
    bad_meta(good, "optimizer_config", "{\"kind\":\"sgd\"", "optimizer JSON");
    bad_meta(good, "optimizer_config", "not json\nat all", "optimizer JSON");
    bad_meta(good, "optimizer_config",
             "{\"kind\":\"adam\",\"momentum\":0.90000000000000002,\"nesterov\":0,\"weight_decay\":0.00050000000000000001,"
             "\"beta1\":0.90000000000000002,\"beta2\":0.999,\"eps\":1e-08}",
             "kind");
    bad_meta(good, "optimizer_config",
             "{\"kind\":\"sgd\",\"momentum\":nan,\"nesterov\":0,\"weight_decay\":0.00050000000000000001,"
             "\"beta1\":0.90000000000000002,\"beta2\":0.999,\"eps\":1e-08}",
             "out of range");
    bad_meta(good, "model", "tiny\nnet", "not a name");
    bad_meta(good, "policy", "", "not a name");
    {   /* a large iteration is still a checkpoint (a resume refuses it when it is at or past --steps) */
        snprintf(path, sizeof path, "%s/iter.safetensors", dir);
        rc = rewrite_meta(good, path, "iteration", "1000000");
        rc = rc ? rc : fp_checkpoint_open(&ck, path);
        tap_ok(rc == FP_OK, "iteration 1000000 (>= optimizer step) opens (%s)", rc ? fp_error_message() : "ok");
        fp_checkpoint_close(ck);
        ck = NULL;
    }

    /* plain weights (no checkpoint metadata) are refused as a checkpoint */
    snprintf(p2, sizeof p2, "%s/weights.safetensors", dir);
    fp_model_save(fp_arm_model(a), p2);
    rc = fp_checkpoint_open(&ck, p2);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "not an fp16probe checkpoint"),
           "weights file as checkpoint: refused (%s)", fp_error_message());

    /* shape mismatch: a 5-class checkpoint into a 10-class arm names the tensor */
    fp_arm_config c5 = c;
    c5.num_classes = 5;
    fp_arm *a5 = NULL;
    fp_arm_create(&a5, &c5);
    snprintf(path, sizeof path, "%s/ck5.safetensors", dir);
    fp_checkpoint_save(path, a5, NULL);
    fp_arm_free(a5);
    rc = fp_checkpoint_open(&ck, path);
    rc = rc ? rc : fp_checkpoint_restore(ck, a, NULL, NULL);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "ck5.safetensors") && strstr(fp_error_message(), "fc.weight"),
           "shape mismatch: names file and tensor (%s)", fp_error_message());
    fp_checkpoint_close(ck);
    ck = NULL;

    /* a checkpoint of another policy */
    fp_arm_config cb = c;
    cb.policy = "bf16";
    fp_arm *ab = NULL;
    fp_arm_create(&ab, &cb);
    snprintf(path, sizeof path, "%s/ckbf16.safetensors", dir);
    fp_checkpoint_save(path, ab, NULL);
    fp_arm_free(ab);
    rc = fp_checkpoint_open(&ck, path);
    rc = rc ? rc : fp_checkpoint_restore(ck, a, NULL, NULL);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "policy 'bf16'"), "policy mismatch refused (%s)",
           fp_error_message());
    fp_checkpoint_close(ck);
    ck = NULL;

    /* a checkpoint missing one optimizer tensor: rewrite a good one without it */
    snprintf(path, sizeof path, "%s/good.safetensors", dir);
    fp_checkpoint_save(path, a, NULL);
    fp_st *st = NULL;
    fp_st_open(&st, path);
    fp_st_writer *w = NULL;
    fp_st_writer_new(&w);
    for (size_t i = 0; st && i < fp_st_count(st); i++) {
        const fp_st_tensor *tt = fp_st_at(st, i);
        if (strcmp(tt->name, "optim.conv2.weight.momentum_buffer") != 0)
            fp_st_writer_add(w, tt->name, tt->dtype, tt->shape, tt->rank, tt->data);
    }
    for (size_t i = 0; st && i < fp_st_metadata_count(st); i++) {
        const char *k, *v;
        fp_st_metadata_at(st, i, &k, &v);
        fp_st_writer_metadata(w, k, v);
    }
    snprintf(p2, sizeof p2, "%s/lacking.safetensors", dir);
    fp_st_writer_write(w, p2);
    fp_st_writer_free(w);
    fp_st_close(st);
    rc = fp_checkpoint_open(&ck, p2);
    rc = rc ? rc : fp_checkpoint_restore(ck, a, NULL, NULL);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "lacking.safetensors") &&
               strstr(fp_error_message(), "optim.conv2.weight.momentum_buffer"),
           "missing tensor: names file and tensor (%s)", fp_error_message());
    fp_checkpoint_close(ck);

    /* a checkpoint works as --weights (its optimizer tensors are ignored there) */
    fp_arm_config cw = c;
    cw.weights = path;
    cw.seed = 1234;
    fp_arm *aw = NULL;
    rc = fp_arm_create(&aw, &cw);
    tap_ok(rc == FP_OK && memcmp(fp_model_params(fp_arm_model(aw)), fp_model_params(fp_arm_model(a)),
                                 fp_model_num_params(fp_arm_model(a)) * 4) == 0,
           "a checkpoint loads as --weights");
    fp_arm_free(aw);
    fp_arm_free(a);
    fp_dataset_close(ds);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
