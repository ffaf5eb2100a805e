/* config_json.c — a run's configuration as JSON (config_json.h), built in a growing string. Promise:
 * strings go through lib/json_min.h's escaper, numbers as the shortest of %.15g / %.17g that reads back
 * exactly (null when not finite); out of memory gives NULL, never a truncated document. */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json_min.h"
#include "trainer/run/config_json.h"

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static int sb_reserve(sbuf *b, size_t more)
{
    if (b->oom)
        return 0;
    if (b->len + more < b->cap)
        return 1;
    size_t cap = (b->cap ? b->cap * 2 : 256) + more;
    char *q = realloc(b->p, cap);
    if (!q) {
        b->oom = 1;
        return 0;
    }
    b->p = q;
    b->cap = cap;
    return 1;
}

__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if (!sb_reserve(b, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void sb_put(void *ctx, const char *bytes, size_t n)
{
    sbuf *b = ctx;
    if (!sb_reserve(b, n + 1))
        return;
    memcpy(b->p + b->len, bytes, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)   /* a JSON string, or null */
{
    if (s)
        fp_json_escape(sb_put, b, s);
    else
        sb_printf(b, "null");
}

static void sb_num(sbuf *b, double v)
{
    if (isfinite(v)) {   /* the shortest of %.15g / %.17g that reads back exactly */
        char t[40];
        snprintf(t, sizeof t, "%.15g", v);
        if (strtod(t, NULL) != v)
            snprintf(t, sizeof t, "%.17g", v);
        sb_printf(b, "%s", t);
    } else {
        sb_printf(b, "null");
    }
}

static char *sb_done(sbuf *b)
{
    if (b->oom || !b->p) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

static void optimizer_json(sbuf *b, const fp_arm_config *a)
{
    const fp_optim_config *o = &a->optim;
    sb_printf(b, "{\"lr\":");
    sb_num(b, a->lr.base_lr);
    if (o->kind == FP_OPTIM_SGD) {
        sb_printf(b, ",\"momentum\":");
        sb_num(b, o->momentum);
        sb_printf(b, ",\"dampening\":0,\"nesterov\":%s", o->nesterov ? "true" : "false");
    } else {
        sb_printf(b, ",\"betas\":[");
        sb_num(b, o->beta1);
        sb_printf(b, ",");
        sb_num(b, o->beta2);
        sb_printf(b, "],\"eps\":");
        sb_num(b, o->eps);
    }
    sb_printf(b, ",\"weight_decay\":");
    sb_num(b, o->weight_decay);
    sb_printf(b, ",\"schedule\":");
    sb_str(b, fp_lr_schedule_name(a->lr.kind));
    if (a->lr.kind == FP_LR_STEP) {
        sb_printf(b, ",\"step_size\":%" PRId64 ",\"gamma\":", a->lr.step_size);
        sb_num(b, a->lr.gamma);
    } else if (a->lr.kind == FP_LR_COSINE) {
        sb_printf(b, ",\"t_max\":%" PRId64 ",\"eta_min\":", a->lr.t_max);
        sb_num(b, a->lr.eta_min);
    }
    sb_printf(b, ",\"warmup_steps\":%" PRId64 ",\"warmup_start_factor\":", a->lr.warmup_steps);
    sb_num(b, a->lr.warmup_start_factor);
    sb_printf(b, "}");
}

char *fp_config_optimizer_json(const fp_arm_config *a)
{
    sbuf b = {0};
    optimizer_json(&b, a);
    return sb_done(&b);
}

char *fp_config_json(const fp_train_config *c, const fp_arm_config *a, const char *data, const char *device,
                     const char *command, const char *extra)
{
    sbuf b = {0};
    sb_printf(&b, "{\"command\":");
    sb_str(&b, command);
    sb_printf(&b, ",\"model\":");
    sb_str(&b, a->model);
    sb_printf(&b, ",\"precision\":");
    sb_str(&b, a->policy);
    sb_printf(&b, ",\"data\":");
    sb_str(&b, data);
    sb_printf(&b, ",\"classes\":%d,\"image_size\":%d,\"base_width\":%d,\"batch\":%d,\"steps\":%" PRId64
                  ",\"seed\":%" PRIu64 ",\"augment\":%s,\"shuffle\":%s,\"optimizer\":",
              a->num_classes, a->image_size, a->base_width, c->batch, c->steps, a->seed,
              c->augment ? "true" : "false", c->shuffle ? "true" : "false");
    sb_str(&b, fp_optim_name(a->optim.kind));
    sb_printf(&b, ",\"optimizer_config\":");
    optimizer_json(&b, a);
    sb_printf(&b, ",\"threads\":%d,\"loader_threads\":%d,\"device\":", a->threads, c->loader_threads);
    sb_str(&b, device);
    sb_printf(&b, ",\"eval_every\":%d,\"eval_batches\":%" PRId64 ",\"weights\":", c->eval_every, c->eval_batches);
    sb_str(&b, a->weights);
    sb_printf(&b, ",\"save\":");
    sb_str(&b, c->save);
    sb_printf(&b, ",\"checkpoint\":");
    sb_str(&b, c->checkpoint);
    sb_printf(&b, ",\"checkpoint_every\":%" PRId64 ",\"resume\":", c->checkpoint_every);
    sb_str(&b, c->resume);
    if (a->init_scale > 0 || a->growth_interval > 0)
        sb_printf(&b, ",\"init_scale\":%.9g,\"growth_interval\":%d", a->init_scale, a->growth_interval);
    if (extra && *extra)
        sb_printf(&b, ",%s", extra);
    sb_printf(&b, "}");
    return sb_done(&b);
}
