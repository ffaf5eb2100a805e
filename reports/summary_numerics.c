/* summary_numerics.c — an arm's overflow and underflow (summary_internal.h): per role and layer in its format,
 * zeros flushed beyond the reference arm's, top layers per role and the headline over the roles that matter.
 * Promise: counts are sums over the sampled steps; flushed zeros are scaled when the arms sampled differently. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "store.h"
#include "summary_internal.h"

static const char *layer_name(const fp_arm_t *a, int layer)
{
    const fp_layer_row_t *l = fp_arm_layer(a, layer);
    return l ? l->name : "";
}

/* The FP_SUMMARY_TOP layers with the largest per-layer totals (count > 0), largest first. */
static int top_layers(const fp_arm_t *a, const int64_t *per_layer, int nl, fp_top_layer_t *top)
{
    int k = 0;
    for (int l = 0; l < nl; l++) {
        if (per_layer[l] <= 0)
            continue;
        int pos;
        if (k < FP_SUMMARY_TOP)
            pos = k++;
        else if (per_layer[l] > top[FP_SUMMARY_TOP - 1].count)
            pos = FP_SUMMARY_TOP - 1;
        else
            continue;
        while (pos > 0 && top[pos - 1].count < per_layer[l]) {
            top[pos] = top[pos - 1];
            pos--;
        }
        top[pos].layer = l;
        top[pos].count = per_layer[l];
        snprintf(top[pos].name, sizeof top[pos].name, "%s", layer_name(a, l));
    }
    return k;
}

int fp_summary_role_matters(const fp_arm_t *a, int role, int overflow)
{
    if (overflow && role == FP_ROLE_ACTIVATION)   /* a forward value past the format's range: Inf downstream */
        return 1;
    /* activations stay out: their zeros are mostly ReLU's, whose pattern differs between arms as their
     * weights drift, so the difference against the reference measures that more than flushing */
    if (role == FP_ROLE_ACTIVATION_GRAD || role == FP_ROLE_WEIGHT_GRAD)
        return 1;
    return (role == FP_ROLE_WEIGHT || role == FP_ROLE_UPDATE) && !a->master_fp32;
}

/* The reference arm's row for (layer, role), or NULL. */
static const fp_layer_numerics_t *ref_row(const fp_arm_t *R, int layer, int role)
{
    for (size_t i = 0; R && i < R->nnumerics; i++)
        if (R->numerics[i].layer == layer && R->numerics[i].role == role)
            return &R->numerics[i];
    return NULL;
}

int fp_summary_account(fp_arm_t *a, const fp_arm_t *R)
{
    int nl = 0;
    for (size_t i = 0; i < a->nnumerics; i++)
        nl = a->numerics[i].layer + 1 > nl ? a->numerics[i].layer + 1 : nl;
    size_t cells = (size_t)(nl + 1) * FP_SUMMARY_ROLES;
    int64_t *over = calloc(cells, sizeof *over), *under = calloc(cells, sizeof *under);
    int64_t *hover = calloc((size_t)nl + 1, sizeof *hover), *hunder = calloc((size_t)nl + 1, sizeof *hunder);
    if (!over || !under || !hover || !hunder) {
        free(over), free(under), free(hover), free(hunder);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < a->nnumerics; i++) {
        const fp_layer_numerics_t *x = &a->numerics[i];
        if (x->layer < 0 || x->role < 0 || x->role >= FP_SUMMARY_ROLES)
            continue;
        int64_t o = x->overflow[a->fmt_shown], u = x->underflow[a->fmt_shown], fl = 0;
        const fp_layer_numerics_t *y = a->fmt >= 0 && R && R != a && R->fmt < 0 ? ref_row(R, x->layer, x->role) : NULL;
        if (y && y->samples > 0 && x->samples > 0) {
            double extra = (double)x->zero - (double)y->zero * (double)x->samples / (double)y->samples;
            fl = extra > 0 ? (int64_t)llround(extra) : 0;
        }
        u += fl;
        a->flushed_role[x->role] += fl;
        a->over_role[x->role] += o;
        a->under_role[x->role] += u;
        over[(size_t)x->role * (size_t)(nl + 1) + (size_t)x->layer] += o;
        under[(size_t)x->role * (size_t)(nl + 1) + (size_t)x->layer] += u;
        if (fp_summary_role_matters(a, x->role, 1))
            hover[x->layer] += o;
        if (fp_summary_role_matters(a, x->role, 0))
            hunder[x->layer] += u;
    }
    for (int role = 0; role < FP_SUMMARY_ROLES; role++) {
        a->ntop_over_role[role] = top_layers(a, over + (size_t)role * (size_t)(nl + 1), nl, a->top_over_role[role]);
        a->ntop_under_role[role] = top_layers(a, under + (size_t)role * (size_t)(nl + 1), nl, a->top_under_role[role]);
    }
    a->ntop_over = top_layers(a, hover, nl, a->top_over);
    a->ntop_under = top_layers(a, hunder, nl, a->top_under);
    free(over), free(under), free(hover), free(hunder);
    return FP_OK;
}
