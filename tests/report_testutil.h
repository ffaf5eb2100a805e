/* report_testutil.h — generated run-store sessions for the report and gate tests and the report
 * benchmark, written through the public writer API (store.h): a realistic two-arm (fp32 + fp16)
 * resnet50 session with torchvision layer names, per-layer times, histograms from synthetic
 * arrays, precision errors, evaluations, events and named kernels; and lean sessions of step times
 * with realistic noise (lognormal jitter plus occasional outliers) for the gate. */
#ifndef FP_REPORT_TESTUTIL_H
#define FP_REPORT_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include "store.h"

/* A deterministic random source (xorshift64*) and the draws the generators use. */
typedef struct {
    uint64_t s;
} rt_rng_t;
void rt_seed(rt_rng_t *r, uint64_t seed);
double rt_uniform(rt_rng_t *r);   /* [0, 1) */
double rt_normal(rt_rng_t *r);
/* One step time: median x exp(sigma x N(0,1)), and with probability outlier_p x U(1.5, 3). */
double rt_step_time(rt_rng_t *r, double median_ns, double sigma, double outlier_p);

/* Opens path for writing (fp_store_open) and seeds rng with seed: FP_OK or the store's error. */
int rt_open(fp_store_t **st, const char *path, rt_rng_t *rng, uint64_t seed);
/* Begins run ri (fp_store_begin_run) as the generated sessions' arms do: an arm whose policy is not fp32 names
 * the fp32 run begun before it (*ref, 0 until then) as its reference; an fp32 run becomes *ref. */
int rt_begin_arm(fp_store_t *st, fp_run_info_t *ri, int64_t *ref, int64_t *run);

/* torchvision's resnet50 layer names (conv1, bn1, ..., layer4.2.relu, avgpool, fc) and types. */
int rt_resnet50_layers(const char ***names, const char ***types);

typedef struct {
    const char *path;
    const char *model;           /* "resnet50" */
    size_t steps;                /* per arm */
    int layer_every;             /* per-layer time rows every this many steps (0: none) */
    int layers;                  /* how many of resnet50's layers (<= rt_resnet50_layers) */
    int hist_every;              /* histograms every this many steps (0: none) */
    int hist_layers;             /* histograms for the first this many layers */
    int kernel_every;            /* kernel rows every this many steps (0: none) */
    double median32_ns, median16_ns, sigma, outlier_p;
    int hostile;                 /* names and texts with markup, quotes, commas, newlines */
    uint64_t seed;
} rt_session_spec_t;
void rt_default_spec(rt_session_spec_t *s, const char *path);   /* the realistic session, 300 steps */
/* Write (append) the session; runs[0] fp32, runs[1] fp16. */
int rt_write_session(const rt_session_spec_t *spec, int64_t runs[2]);

/* A lean session for the gate: arms of `model` with the given policies (comma-separated, e.g.
 * "fp32,fp16"), n steps each, step times drawn around each arm's median (fp32: median, others:
 * median / speedup, times slowdown), losses decreasing, a validation at the end. */
typedef struct {
    const char *path, *model, *policies;
    size_t steps;
    double median_ns, speedup, slowdown, sigma, outlier_p;
    double loss_offset16;        /* added to the low-precision arms' losses, subtracted from their top-1 */
    int skip_every;              /* low-precision arms skip every this many steps (0: never) */
    uint64_t seed;
} rt_gate_spec_t;
void rt_default_gate(rt_gate_spec_t *g, const char *path, uint64_t seed);
int rt_write_gate(const rt_gate_spec_t *g);

#endif
