/* gate_result.c — the gate's result list (gate_checks.h): checks appended one by one, the verdict helpers
 * every check judges with, the exit code and freeing (gate.h). Promise: above a limit a check FAILs only when
 * its test is significant, else it is INCONCLUSIVE; out of memory is the only error, and it stops the list. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "gate_checks.h"

const char *fp_check_status_name(fp_check_status s)
{
    static const char *const names[FP_CHECK_NSTATUS] = {"PASS", "FAIL", "INCONCLUSIVE", "SKIP", "NOT_COMPARABLE"};
    return (unsigned)s < FP_CHECK_NSTATUS ? names[s] : "?";
}

const char *fp_gc_label(const fp_arm_t *a)
{
    return a->run.arm[0] ? a->run.arm : a->run.policy;
}

fp_check_t *fp_gc_add(fp_gc_acc_t *c, const char *kind, const char *arm, fp_check_status st, double value,
                      double limit, const char *unit, const char *fmt, ...)
{
    if (c->rc != FP_OK)
        return NULL;
    if (c->res->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 32;
        fp_check_t *p = realloc(c->res->checks, nc * sizeof *p);
        if (!p) {
            c->rc = fp_fail(FP_ENOMEM, "out of memory");
            return NULL;
        }
        c->res->checks = p;
        c->cap = nc;
    }
    fp_check_t *k = &c->res->checks[c->res->n++];
    memset(k, 0, sizeof *k);
    if (arm && *arm)
        snprintf(k->name, sizeof k->name, "%s[%s]", kind, arm);
    else
        snprintf(k->name, sizeof k->name, "%s", kind);
    snprintf(k->kind, sizeof k->kind, "%s", kind);
    snprintf(k->arm, sizeof k->arm, "%s", arm ? arm : "");
    snprintf(k->unit, sizeof k->unit, "%s", unit);
    k->status = st;
    k->value = value;
    k->limit = limit;
    k->other = k->p = NAN;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->figures, sizeof k->figures, fmt, ap);
    va_end(ap);
    return k;
}

void fp_gc_stats(fp_check_t *k, double other, double p)
{
    if (k) {
        k->other = other;
        k->p = p;
    }
}

fp_check_status fp_gc_judge(double diff, double limit, double p, double alpha)
{
    if (!(diff > limit))
        return FP_CHECK_PASS;
    return !isnan(p) && p < alpha ? FP_CHECK_FAIL : FP_CHECK_INCONCLUSIVE;
}

const char *fp_gc_verdict_words(fp_check_status st)
{
    return st == FP_CHECK_FAIL ? ": significant" : st == FP_CHECK_INCONCLUSIVE ? ": above the limit but within noise" : "";
}

int fp_gate_exit_code(const fp_gate_result_t *res)
{
    int fail = 0, inconclusive = 0;
    for (size_t i = 0; i < res->n; i++) {
        if (res->checks[i].status == FP_CHECK_NOT_COMPARABLE)
            return FP_GATE_NOT_COMPARABLE;
        fail |= res->checks[i].status == FP_CHECK_FAIL;
        inconclusive |= res->checks[i].status == FP_CHECK_INCONCLUSIVE;
    }
    return fail ? FP_GATE_REGRESSION : inconclusive && res->inconclusive_fails ? FP_GATE_INCONCLUSIVE : FP_GATE_PASS;
}

void fp_gate_result_free(fp_gate_result_t *res)
{
    free(res->checks);
    free(res->diffs);
    res->checks = NULL;
    res->diffs = NULL;
    res->n = res->ndiffs = 0;
}
