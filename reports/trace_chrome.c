/* trace_chrome.c — a session as Chrome Trace Event JSON (report.h), for Perfetto and chrome://tracing:
 * one process per arm; "X" events for the sampled steps, their layers and their kernels; "C" counters
 * for loss, step time and loss scale. Promise: valid JSON (every string escaped, no NaN/Inf numbers);
 * timestamps are microseconds from the session's first step.
 *
 * Time bases: steps are placed at their wall-clock start. Layers have durations but no start times in
 * the store, so each sampled step's layers are laid out back to back from the step's start (forward in
 * layer order, then backward in reverse order), marked args.layout = "sequential". Kernels are on the
 * profiler clock; each step's kernels are shifted so that its first kernel starts with the step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "atomic_file.h"
#include "error.h"
#include "json_min.h"
#include "report.h"
#include "store.h"

typedef struct {
    FILE *f;
    int first;
    int64_t t0;
} out_t;

static void begin_event(out_t *o)
{
    fputs(o->first ? "\n" : ",\n", o->f);
    o->first = 0;
}

static double us(const out_t *o, int64_t ns)
{
    return (double)(ns - o->t0) / 1000.0;
}

static void meta(out_t *o, const char *what, int64_t pid, int tid, const char *name)
{
    begin_event(o);
    fprintf(o->f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%d,\"args\":{\"name\":", what, (long long)pid, tid);
    fp_json_string(o->f, name);
    fputs("}}", o->f);
}

static void counter(out_t *o, int64_t pid, const char *name, int64_t ts_ns, double v)
{
    if (!isfinite(v))
        return;
    begin_event(o);
    fputs("{\"name\":", o->f);
    fp_json_string(o->f, name);
    fprintf(o->f, ",\"ph\":\"C\",\"pid\":%lld,\"tid\":0,\"ts\":%.3f,\"args\":{\"value\":%.9g}}", (long long)pid,
            us(o, ts_ns), v);
}

enum { TID_STEPS = 1, TID_LAYERS = 2, TID_STREAM0 = 100 };

static const char *layer_name(const fp_arm_t *a, int layer, char *buf, size_t cap)
{
    const fp_layer_row_t *l = fp_arm_layer(a, layer);
    if (l)
        return l->name;
    snprintf(buf, cap, "layer %d", layer);
    return buf;
}

/* The layers of one sampled step, back to back from its start. */
static int trace_layers(out_t *o, fp_reader_t *r, const fp_arm_t *a, int64_t step, int64_t start)
{
    fp_layer_time_row_t *t;
    size_t n;
    int rc = fp_reader_layer_times(r, a->run.id, step, step, &t, &n);
    if (rc != FP_OK)
        return rc;
    int64_t at = start;
    char buf[32];
    for (int pass = 0; pass < 2; pass++) {   /* forward ascending, then backward descending */
        for (size_t k = 0; k < n; k++) {
            size_t i = pass == 0 ? k : n - 1 - k;
            const fp_layer_time_row_t *x = &t[i];
            int fwd = x->phase == FP_PHASE_FORWARD;
            if ((pass == 0) != fwd || x->time_ns < 0)
                continue;
            begin_event(o);
            fputs("{\"name\":", o->f);
            fp_json_string(o->f, layer_name(a, x->layer, buf, sizeof buf));
            fprintf(o->f, ",\"cat\":\"layer\",\"ph\":\"X\",\"pid\":%lld,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                          "\"args\":{\"step\":%lld,\"layer\":%d,\"phase\":\"%s\",\"kernels\":%d,\"layout\":\"sequential\"}}",
                    (long long)a->run.id, TID_LAYERS, us(o, at), (double)x->time_ns / 1000.0, (long long)step, x->layer,
                    fp_phase_name((fp_phase)x->phase), x->kernels);
            at += x->time_ns;
        }
    }
    free(t);
    return FP_OK;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int trace_kernels(out_t *o, fp_reader_t *r, const fp_arm_t *a, int64_t step, int64_t start, int *streams,
                         size_t *nstreams)
{
    fp_kernel_row_t *k;
    size_t n;
    int rc = fp_reader_kernels(r, a->run.id, step, step, &k, &n);
    if (rc != FP_OK || n == 0) {
        free(k);
        return rc;
    }
    int64_t kmin = k[0].start;
    for (size_t i = 1; i < n; i++)
        kmin = k[i].start < kmin ? k[i].start : kmin;
    char buf[32];
    for (size_t i = 0; i < n; i++) {
        size_t s = 0;
        while (s < *nstreams && streams[s] != k[i].stream_id)
            s++;
        if (s == *nstreams && *nstreams < 64)
            streams[(*nstreams)++] = k[i].stream_id;
        begin_event(o);
        fputs("{\"name\":", o->f);
        fp_json_string(o->f, k[i].name);
        fprintf(o->f, ",\"cat\":\"kernel\",\"ph\":\"X\",\"pid\":%lld,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{"
                      "\"step\":%lld,\"layer\":", (long long)a->run.id, TID_STREAM0 + k[i].stream_id,
                us(o, start + (k[i].start - kmin)), (double)(k[i].end - k[i].start) / 1000.0, (long long)step);
        if (k[i].layer >= 0)
            fp_json_string(o->f, layer_name(a, k[i].layer, buf, sizeof buf));
        else
            fputs("null", o->f);
        fprintf(o->f, ",\"phase\":\"%s\",\"correlationId\":%u,\"device\":%d,\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],"
                      "\"tensor_core\":%s}}",
                k[i].phase >= 0 ? fp_phase_name((fp_phase)k[i].phase) : "none", k[i].correlation_id, k[i].device_id,
                k[i].grid[0], k[i].grid[1], k[i].grid[2], k[i].block[0], k[i].block[1], k[i].block[2],
                k[i].tensor_core > 0 ? "true" : k[i].tensor_core == 0 ? "false" : "null");
    }
    free(k);
    return FP_OK;
}

/* Wall-clock start of each step row (ns); a step without one follows the previous one. */
static int64_t *step_starts(const fp_arm_t *a)
{
    int64_t *t = malloc((a->nsteps ? a->nsteps : 1) * sizeof *t);
    if (!t)
        return NULL;
    int64_t at = 0;
    for (size_t i = 0; i < a->nsteps; i++) {
        if (a->steps[i].start >= 0)
            at = a->steps[i].start;
        t[i] = at;
        at += a->steps[i].wall_ns > 0 ? a->steps[i].wall_ns : 0;
    }
    return t;
}

static size_t find_step(const fp_arm_t *a, int64_t step)
{
    size_t lo = 0, hi = a->nsteps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->steps[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->nsteps && a->steps[lo].step == step ? lo : SIZE_MAX;
}

int fp_trace_chrome(FILE *f, fp_reader_t *r, const fp_summary_t *s, const fp_trace_opts_t *opt)
{
    size_t max_steps = opt && opt->max_steps ? opt->max_steps : 20;
    size_t max_points = opt && opt->max_counter_points ? opt->max_counter_points : 5000;
    out_t o = {f, 1, INT64_MAX};
    int64_t **starts = calloc(s->narms ? s->narms : 1, sizeof *starts);
    if (!starts)
        return fp_fail(FP_ENOMEM, "out of memory");
    int rc = FP_OK;
    for (size_t i = 0; i < s->narms; i++) {
        if (!(starts[i] = step_starts(&s->arms[i]))) {
            rc = fp_fail(FP_ENOMEM, "out of memory");
            break;
        }
        if (s->arms[i].nsteps && starts[i][0] < o.t0)
            o.t0 = starts[i][0];
    }
    if (o.t0 == INT64_MAX)
        o.t0 = 0;
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"fp16probe\",\"model\":", f);
    fp_json_string(f, s->model);
    fprintf(f, ",\"session\":%lld,\"layout\":\"layers sequential from per-layer times; kernels aligned to step start\"},"
               "\"traceEvents\":[", (long long)s->session.id);
    for (size_t i = 0; rc == FP_OK && i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        int64_t pid = a->run.id;
        char name[128];
        snprintf(name, sizeof name, "%s (run %lld, %s)", a->run.arm[0] ? a->run.arm : a->run.policy, (long long)pid,
                 a->run.policy);
        meta(&o, "process_name", pid, 0, name);
        begin_event(&o);
        fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%lld,\"tid\":0,\"args\":{\"sort_index\":%zu}}",
                (long long)pid, i);
        meta(&o, "thread_name", pid, TID_STEPS, "steps");
        meta(&o, "thread_name", pid, TID_LAYERS, "layers");
        /* counters, evenly thinned */
        size_t every = a->nsteps > max_points ? (a->nsteps + max_points - 1) / max_points : 1;
        for (size_t k = 0; k < a->nsteps; k += every) {
            const fp_step_row_t *st = &a->steps[k];
            counter(&o, pid, "loss", starts[i][k], st->loss);
            counter(&o, pid, "step time (ms)", starts[i][k], st->wall_ns > 0 ? (double)st->wall_ns / 1e6 : NAN);
            if (a->has_scaler)   /* issue 19: no counter for an arm without a loss scaler (never 1) */
                counter(&o, pid, "loss scale", starts[i][k], st->loss_scale);
        }
        /* sampled steps: those with kernels, else the last steps */
        int64_t *sampled = NULL;
        size_t ns = 0;
        if ((rc = fp_reader_kernel_steps(r, a->run.id, &sampled, &ns)) != FP_OK)
            break;
        size_t from = ns > max_steps ? ns - max_steps : 0;
        int streams[64];
        size_t nstreams = 0;
        size_t fallback_from = a->nsteps > max_steps ? a->nsteps - max_steps : 0;
        size_t count = ns ? ns - from : a->nsteps - fallback_from;
        for (size_t j = 0; rc == FP_OK && j < count; j++) {
            size_t idx = ns ? find_step(a, sampled[from + j]) : fallback_from + j;
            if (idx == SIZE_MAX)
                continue;
            const fp_step_row_t *st = &a->steps[idx];
            begin_event(&o);
            fprintf(f, "{\"name\":\"step %lld\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%lld,\"tid\":%d,\"ts\":%.3f,"
                       "\"dur\":%.3f,\"args\":{\"step\":%lld,\"skipped\":%s",
                    (long long)st->step, (long long)pid, TID_STEPS, us(&o, starts[i][idx]),
                    st->wall_ns > 0 ? (double)st->wall_ns / 1000.0 : 0.0, (long long)st->step,
                    st->skipped ? "true" : "false");
            if (isfinite(st->loss))
                fprintf(f, ",\"loss\":%.9g", st->loss);
            fputs("}}", f);
            rc = trace_layers(&o, r, a, st->step, starts[i][idx]);
            if (rc == FP_OK)
                rc = trace_kernels(&o, r, a, st->step, starts[i][idx], streams, &nstreams);
        }
        free(sampled);
        qsort(streams, nstreams, sizeof *streams, cmp_int);
        for (size_t k = 0; rc == FP_OK && k < nstreams; k++) {
            snprintf(name, sizeof name, "stream %d", streams[k]);
            meta(&o, "thread_name", pid, TID_STREAM0 + streams[k], name);
        }
    }
    fputs("\n]}\n", f);
    for (size_t i = 0; i < s->narms; i++)
        free(starts[i]);
    free(starts);
    return rc;
}

int fp_trace_chrome_write(fp_reader_t *r, const fp_trace_opts_t *o, const char *path)
{
    fp_summary_t s;
    int rc = fp_summary_load(r, o ? o->session : 0, -1, &s);
    if (rc != FP_OK)
        return rc;
    fp_afile_t a;
    if ((rc = fp_afile_open(&a, path)) == FP_OK) {
        rc = fp_trace_chrome(a.f, r, &s, o);
        if (rc == FP_OK)
            rc = fp_afile_commit(&a);
        fp_afile_abort(&a);
    }
    fp_summary_free(&s);
    return rc;
}
