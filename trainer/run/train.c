/* train.c — the loop of `fp16probe train`: dataset + loader, one arm, evaluations, checkpoints and the
 * store recording of the run (metadata, layers, steps, evaluations, events). Promise: bad choices are
 * refused before the store is touched; other setup failures leave one failed run with its message;
 * NaN loss without a scaler stops the run with an event; Ctrl-C ends after the current step. */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "store.h"
#include "clock.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/config_json.h"
#include "trainer/run/environment.h"
#include "trainer/run/record.h"
#include "trainer/run/train.h"

void fp_train_config_default(fp_train_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    fp_arm_config_default(&cfg->arm);
    cfg->arm.num_classes = 0;
    cfg->augment = 1;
    cfg->shuffle = 1;
    cfg->batch = 32;
    cfg->steps = 100;
    cfg->loader_threads = 2;
    cfg->eval_batches = 50;
    cfg->progress_interval_s = 5.0;
}

static int is_model_name(const char *name)
{
    for (const char *const *n = fp_model_names(); *n; n++)
        if (strcmp(*n, name) == 0)
            return 1;
    return 0;
}

int fp_train_check_choices(const fp_train_config *c, const fp_arm_config *a, int check_policy)
{
    if (!a->model)
        return fp_fail(FP_EINVAL, "no model given (--model); valid models: %s", fp_model_names_joined());
    if (!is_model_name(a->model))
        return fp_fail(FP_EINVAL, "unknown model '%s'; valid models: %s", a->model, fp_model_names_joined());
    if (check_policy && (!a->policy || !fp_policy_find(a->policy)))
        return fp_fail(FP_EINVAL, "unknown precision policy '%s'; valid policies: %s", a->policy ? a->policy : "",
                       fp_policy_names_joined());
    if (c->batch < 1 || c->steps < 0)
        return fp_fail(FP_EINVAL, "batch must be >= 1 and steps >= 0");
    int rc = fp_optim_config_check(&a->optim);
    if (rc == FP_OK)
        rc = fp_lr_schedule_check(&a->lr);
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
        return fp_fail(FP_EINVAL, "--classes %d is fewer than the %d classes of %s", a->num_classes, dclasses,
                       fp_dataset_spec(*ds));
    return FP_OK;
}

static int run_eval(fp_arm *arm, const fp_dataset *ds, const fp_train_config *c, fp_store_t *store, int64_t run,
                    int64_t step, fp_train_result *res)
{
    return fp_record_eval(store, run, arm, ds, c, step, &res->val_loss, &res->val_top1, &res->val_top5);
}

int fp_train(const fp_train_config *c, fp_train_result *res)
{
    memset(res, 0, sizeof *res);
    res->status = FP_RUN_FAILED;
    res->val_loss = res->val_top1 = res->val_top5 = NAN;
    res->last_loss = NAN;

    fp_arm_config a = c->arm;
    fp_dataset *ds = NULL;
    fp_arm *arm = NULL;
    fp_checkpoint *ck = NULL;
    fp_loader *ld = NULL;
    fp_store_t *store = NULL;
    int64_t run = 0;
    char *optjson = NULL, *cfgjson = NULL;
    char device_buf[300];
    const char *device = c->device ? c->device : fp_env_cpu_name(device_buf, sizeof device_buf);
    const char *data = c->data && *c->data ? c->data : "synthetic";
    int rc = FP_OK, setup_rc = FP_OK;

    /* ---- 1. choices (usage errors: nothing is recorded) ---- */
    if (c->resume && (!a.model || !a.policy)) {
        /* --model / --precision default to the checkpoint's. */
        if ((rc = fp_checkpoint_open(&ck, c->resume))) {
            /* Without a model and policy there is no run to record the failure in. */
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            goto out_nostore;
        }
        if (!a.model)
            a.model = fp_checkpoint_meta(ck, "model");
        if (!a.policy)
            a.policy = fp_checkpoint_meta(ck, "policy");
    }
    if ((rc = fp_train_check_choices(c, &a, 1)))
        goto usage;
    int data_usage = 0;
    rc = fp_train_open_data(c, &a, &ds, &data_usage);
    if (data_usage)   /* unknown scheme or bad options: the message lists the choices */
        goto usage;

    /* ---- 2. the rest of the setup; a failure here is recorded as a failed run ---- */
    if (rc)
        goto setup_failed;
    data = fp_dataset_spec(ds);
    optjson = fp_config_optimizer_json(&a);
    cfgjson = fp_config_json(c, &a, data, device, "train", NULL);
    if (!optjson || !cfgjson) {
        rc = fp_fail(FP_ENOMEM, "out of memory");
        goto setup_failed;
    }
    if ((rc = fp_arm_create(&arm, &a)))
        goto setup_failed;
    fp_checkpoint_settings extras;
    fp_checkpoint_settings_fill(&extras, &a, data, c->batch, c->augment, c->shuffle, optjson);
    int64_t start_epoch = 0, start_batch = 0;
    if (c->resume) {
        if (!ck && (rc = fp_checkpoint_open(&ck, c->resume)))
            goto setup_failed;
        if ((rc = fp_checkpoint_settings_check(ck, c->resume, &extras)) ||
            (rc = fp_checkpoint_restore(ck, arm, &start_epoch, &start_batch)))
            goto setup_failed;
    }
    {
        fp_loader_opts lo;
        fp_loader_opts_default(&lo);
        lo.split = FP_SPLIT_TRAIN;
        lo.batch = c->batch;
        lo.threads = c->loader_threads;
        lo.start_epoch = start_epoch;
        lo.start_batch = start_batch;
        if ((rc = fp_loader_start(&ld, ds, &lo)))
            goto setup_failed;
    }
setup_failed:
    setup_rc = rc;
    if (setup_rc)
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());

    /* ---- 3. the run in the store ---- */
    if (c->db) {
        if ((rc = fp_store_open(&store, c->db))) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            goto out_nostore;
        }
        char sname[256];
        snprintf(sname, sizeof sname, "%s %s", a.model, a.policy);
        fp_session_info_t si = {c->session_name ? c->session_name : sname, cfgjson};
        int64_t sid = 0, rid = 0;
        if (!(rc = fp_store_begin_session(store, &si, &sid))) {
            fp_run_info_t ri = {.session = sid, .arm = a.policy, .model = a.model, .policy = a.policy,
                                .ref_run = 0, .device = device, .blas = fp_env_blas_name(),
                                .batch_size = c->batch, .image_size = a.image_size, .dataset = data,
                                .seed = (int64_t)a.seed, .optimizer = fp_optim_name(a.optim.kind),
                                .optimizer_config = optjson, .config_json = cfgjson};
            rc = fp_store_begin_run(store, &ri, &rid);
        }
        if (rc) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            fp_store_close(store, FP_RUN_FAILED, res->message);
            store = NULL;
            fp_fail(rc, "%s", res->message);
            goto out_nostore;
        }
        res->session_id = sid;
        res->run_id = rid;
        run = rid;
    }
    if (setup_rc) {
        rc = setup_rc;
        goto finish;
    }
    if (store && (rc = fp_record_layers(store, run, fp_arm_model(arm), c->batch))) {
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());
        goto finish;
    }
    if (c->resume)
        fp_record_event(store, run, fp_arm_iteration(arm), -1, FP_EVENT_INFO, "resumed from %s at step %" PRId64 " (data epoch %"
              PRId64 ", batch %" PRId64 ")", c->resume, fp_arm_iteration(arm), start_epoch, start_batch);

    /* ---- 4. the loop ---- */
    res->status = FP_RUN_FINISHED;
    double t_start = fp_clock_mono_s(), t_last = t_start;
    int64_t images_since = 0, last_eval = -1, done_here = 0;
    double step_ms_sum = 0;
    while (fp_arm_iteration(arm) < c->steps) {
        if (fp_store_signalled()) {
            res->status = FP_RUN_INTERRUPTED;
            break;
        }
        fp_batch b;
        rc = fp_loader_next(ld, &b);
        if (rc == FP_DATA_END_OF_EPOCH)
            continue;
        if (rc < 0) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
            break;
        }
        fp_arm_step_result r;
        int64_t w0 = fp_clock_wall_ns();
        if ((rc = fp_arm_step(arm, &b, &r))) {
            snprintf(res->message, sizeof res->message, "step %" PRId64 ": %s", r.iteration + 1, fp_error_message());
            res->status = FP_RUN_FAILED;
            break;
        }
        int64_t w1 = fp_clock_wall_ns(), step_no = r.iteration + 1;
        res->last_loss = r.loss;
        done_here++;
        step_ms_sum += r.total_ns / 1e6;
        images_since += r.n;
        if (store && (rc = fp_record_step(store, run, arm, &r, w0, w1, NULL))) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
            break;
        }
        if (r.skipped)
            res->skipped++;
        if (r.diverged) {
            snprintf(res->message, sizeof res->message, "%s", fp_record_diverged_message(arm, &r));
            res->status = FP_RUN_FAILED;
            rc = fp_fail(FP_EINVAL, "%s", res->message);
            break;
        }

        double now = fp_clock_mono_s();
        if (c->progress && (c->progress_interval_s <= 0 || now - t_last >= c->progress_interval_s ||
                            done_here == 1 || step_no == c->steps)) {
            double el = now - t_start;
            fp_train_progress p = {.step = step_no, .steps = c->steps, .loss = r.loss, .lr = r.lr,
                                   .scale = r.next_scale, .images_per_s = now > t_last ? images_since / (now - t_last) : 0,
                                   .elapsed_s = el, .eta_s = el / (double)done_here * (double)(c->steps - step_no),
                                   .skipped = res->skipped, .val_loss = NAN, .val_top1 = NAN, .val_top5 = NAN};
            c->progress(&p, c->progress_user);
            t_last = now;
            images_since = 0;
        }
        if (c->eval_every > 0 && c->eval_batches >= 0 && step_no % c->eval_every == 0 && step_no < c->steps &&
            fp_dataset_size(ds, FP_SPLIT_VAL) > 0) {
            if ((rc = run_eval(arm, ds, c, store, run, step_no, res))) {
                snprintf(res->message, sizeof res->message, "evaluation at step %" PRId64 ": %s", step_no,
                         fp_error_message());
                res->status = FP_RUN_FAILED;
                break;
            }
            last_eval = step_no;
            if (c->progress) {
                fp_train_progress p = {.step = step_no, .steps = c->steps, .loss = r.loss, .lr = r.lr,
                                       .scale = r.next_scale, .elapsed_s = fp_clock_mono_s() - t_start, .is_eval = 1,
                                       .skipped = res->skipped, .val_loss = res->val_loss,
                                       .val_top1 = res->val_top1, .val_top5 = res->val_top5};
                c->progress(&p, c->progress_user);
            }
        }
        if (c->checkpoint && c->checkpoint_every > 0 && step_no % c->checkpoint_every == 0 && step_no < c->steps) {
            fp_checkpoint_state cs = {0, 0, cfgjson, extras.kv, FP_CHECKPOINT_NSETTINGS};
            fp_loader_position(ld, &cs.data_epoch, &cs.data_batch);
            if ((rc = fp_checkpoint_save(c->checkpoint, arm, &cs))) {
                snprintf(res->message, sizeof res->message, "%s", fp_error_message());
                res->status = FP_RUN_FAILED;
                break;
            }
        }
    }
    res->steps_done = fp_arm_iteration(arm);
    res->mean_step_ms = done_here ? step_ms_sum / (double)done_here : NAN;
    if (res->status == FP_RUN_FAILED) {
        if (rc == FP_OK)
            rc = FP_EINTERNAL;
        goto finish;
    }
    rc = FP_OK;
    if (res->status == FP_RUN_INTERRUPTED) {
        snprintf(res->message, sizeof res->message, "interrupted by signal %d after step %" PRId64,
                 fp_store_signalled(), res->steps_done);
        fp_record_event(store, run, res->steps_done, -1, FP_EVENT_INFO, "%s", res->message);
    } else if (c->eval_batches >= 0 && last_eval != c->steps && fp_dataset_size(ds, FP_SPLIT_VAL) > 0) {
        if ((rc = run_eval(arm, ds, c, store, run, res->steps_done, res))) {
            snprintf(res->message, sizeof res->message, "final evaluation: %s", fp_error_message());
            res->status = FP_RUN_FAILED;
            goto finish;
        }
        if (c->progress) {
            fp_train_progress p = {.step = res->steps_done, .steps = c->steps, .loss = res->last_loss,
                                   .elapsed_s = fp_clock_mono_s() - t_start, .is_eval = 1, .skipped = res->skipped,
                                   .val_loss = res->val_loss, .val_top1 = res->val_top1, .val_top5 = res->val_top5};
            c->progress(&p, c->progress_user);
        }
    }
    if (c->checkpoint) {
        fp_checkpoint_state cs = {0, 0, cfgjson, extras.kv, FP_CHECKPOINT_NSETTINGS};
        fp_loader_position(ld, &cs.data_epoch, &cs.data_batch);
        if ((rc = fp_checkpoint_save(c->checkpoint, arm, &cs))) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
            goto finish;
        }
    }
    if (c->save && (rc = fp_model_save(fp_arm_model(arm), c->save))) {
        snprintf(res->message, sizeof res->message, "%s", fp_error_message());
        res->status = FP_RUN_FAILED;
        goto finish;
    }

finish:
    if (rc && res->status != FP_RUN_FAILED)
        res->status = FP_RUN_FAILED;
    if (store) {
        int crc = fp_store_close(store, res->status, res->message[0] ? res->message : NULL);
        store = NULL;
        if (crc && !rc) {
            snprintf(res->message, sizeof res->message, "%s", fp_error_message());
            res->status = FP_RUN_FAILED;
            rc = crc;
        }
    }
    if (rc)
        fp_fail(rc, "%s", res->message);
    goto out_nostore;

usage:
    res->usage_error = 1;
    snprintf(res->message, sizeof res->message, "%s", fp_error_message());
out_nostore:
    fp_loader_stop(ld);
    fp_checkpoint_close(ck);
    fp_arm_free(arm);
    fp_dataset_close(ds);
    free(optjson);
    free(cfgjson);
    return rc;
}
