/* gate_load.c — what the gate reads of a session (gate.h), through the store reader only: the summary
 * (summary.h) and, per arm, its environment and configuration, the lost-update rate of the parameter
 * pass's events (as the summary read them) and how many images its last validation used (the store's count where it keeps one,
 * else derived from the run's configuration, saying so), the data-parallel figures and the ranks the session
 * trained on. Promise: what is not recorded stays unknown
 * (NaN, -1), never a guess presented as a measurement. */
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "gate.h"
#include "store.h"
#include "val_images.h"

/* Images in the validation split of a data spec; -1 unknown (trainer/data: synthetic has 10,000,
 * synthetic:N has max(N / 5, 10), CIFAR-10's test batch 10,000; an image folder's size is not stored). */
static int64_t val_split_size(const char *data)
{
    if (strcmp(data, "synthetic") == 0)
        return 10000;
    if (strncmp(data, "synthetic:", 10) == 0) {
        char *end;
        long long n = strtoll(data + 10, &end, 10);
        if (end == data + 10 || *end || n < 10)
            return -1;
        return n / 5 > 10 ? n / 5 : 10;
    }
    if (strncmp(data, "cifar10:", 8) == 0 || strcmp(data, "cifar10") == 0)
        return 10000;
    return -1;
}

static int64_t json_int(const char *json, const char *key)
{
    char v[32], *end;
    if (!fp_json_lookup(json, key, v, sizeof v))
        return -1;
    long long x = strtoll(v, &end, 10);
    return end != v && !*end && x >= 0 ? (int64_t)x : -1;
}

int64_t fp_gate_eval_images_from_config(const char *config, char *why, size_t cap)
{
    char data[160] = "";
    char dummy[8];
    if (!why)
        why = dummy, cap = sizeof dummy;
    why[0] = '\0';
    fp_json_lookup(config, "data", data, sizeof data);
    int64_t batches = json_int(config, "eval_batches"), batch = json_int(config, "batch");
    int64_t split = data[0] ? val_split_size(data) : -1;
    if (batches > 0 && batch > 0) {
        int64_t n = batches * batch;
        if (split > 0 && split < n) {
            snprintf(why, cap, "the whole %s validation split (derived from the run's configuration)", data);
            return split;
        }
        snprintf(why, cap, "eval_batches %lld x batch %lld, derived from the run's configuration%s",
                 (long long)batches, (long long)batch, split > 0 ? "" : " (at most: the split's size is not stored)");
        return n;
    }
    if (batches == 0 && split > 0) {
        snprintf(why, cap, "the whole %s validation split (derived from the run's configuration)", data);
        return split;
    }
    snprintf(why, cap, "unknown: the store keeps no image count and the run's configuration does not give one");
    return -1;
}

static int load_extra(fp_reader_t *r, const fp_arm_t *a, fp_gate_extra_t *x)
{
    memset(x, 0, sizeof *x);
    x->lost_pct = a->lost_pct;   /* the summary read the parameter pass's events already */
    x->lost_max = a->lost_max;
    x->lost_samples = a->lost_samples;
    x->eval_images = -1;
    int rc = fp_reader_run_env(r, a->run.id, &x->env);
    if (rc != FP_OK)
        return rc;
    /* the last validation's image count: the store's, else the configuration's */
    if ((rc = fp_val_images_recorded(r, a->run.id, a->val_step, &x->eval_images)) != FP_OK)
        return rc;
    if (x->eval_images >= 0)
        snprintf(x->eval_from, sizeof x->eval_from, "recorded by the store");
    else
        x->eval_images = fp_gate_eval_images_from_config(x->env.config, x->eval_from, sizeof x->eval_from);
    return FP_OK;
}

void fp_gate_side_free(fp_gate_side_t *side)
{
    if (!side)
        return;
    for (size_t i = 0; side->x && i < side->s.narms; i++) {
        free(side->x[i].dist.ranks_rows);
        free(side->x[i].dist.share_per_step);
        free(side->x[i].dist.straggler_per_step);
    }
    fp_summary_free(&side->s);
    free(side->x);
    side->x = NULL;
}

int fp_gate_load(const char *path, int64_t session, int64_t warmup, fp_gate_side_t *side)
{
    memset(side, 0, sizeof *side);
    fp_reader_t *r;
    int rc = fp_reader_open_snapshot(&r, path);
    if (rc != FP_OK)
        return rc;
    rc = fp_summary_load(r, session, warmup, &side->s);
    if (rc != FP_OK) {   /* nothing left allocated */
        fp_reader_close(r);
        memset(side, 0, sizeof *side);
        return rc;
    }
    if (!(side->x = calloc(side->s.narms, sizeof *side->x)))
        rc = fp_fail(FP_ENOMEM, "out of memory");
    for (size_t i = 0; rc == FP_OK && i < side->s.narms; i++)
        rc = load_extra(r, &side->s.arms[i], &side->x[i]);
    fp_dist_summary_t ds;   /* data parallel: each arm's figures move into its extra */
    if (rc == FP_OK && (rc = fp_dist_summary_load(r, &side->s, &ds)) == FP_OK) {
        for (size_t i = 0; i < side->s.narms; i++)
            side->x[i].dist = ds.arms[i];
        free(ds.arms);
    }
    fp_reader_close(r);
    if (rc != FP_OK) {
        fp_gate_side_free(side);
        return rc;
    }
    char *label = side->label;
    size_t cap = sizeof side->label;
    snprintf(label, cap, "%s session %lld (%s", path, (long long)side->s.session.id, side->s.model);
    for (size_t i = 0; i < side->s.narms; i++) {
        size_t len = strlen(label);
        snprintf(label + len, cap - len, "%s%s", i ? ", " : ": ", side->s.arms[i].run.policy);
    }
    size_t len = strlen(label);
    int ranks = fp_gate_side_ranks(side);
    if (ranks > 1)
        snprintf(label + len, cap - len, "; %d ranks)", ranks);
    else
        snprintf(label + len, cap - len, ")");
    return FP_OK;
}

int fp_gate_side_ranks(const fp_gate_side_t *side)
{
    int ranks = 1;
    for (size_t i = 0; side->x && i < side->s.narms; i++)
        ranks = side->x[i].dist.ranks > ranks ? side->x[i].dist.ranks : ranks;
    return ranks;
}
