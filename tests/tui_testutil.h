/* tui_testutil.h — the dashboard tests' deterministic fixture database, written through the public
 * writer API (store.h): session "tui fixture" of resnet50 with an fp32 and an fp16 arm, steps with
 * per-layer times, histograms (real blobs), precision errors, evaluations, events (skipped steps,
 * loss-scale changes, a warning), memory measured and energy not (NULL). */
#ifndef FP_TUI_TESTUTIL_H
#define FP_TUI_TESTUTIL_H

#include <stdint.h>
#include "store.h"

#define TT_LAYERS 10
#define TT_STEPS 120
/* The fixture's facts the tests check. */
#define TT_WALL_FP32 2000000   /* ns per step */
#define TT_WALL_FP16 1000000
#define TT_HOT_LAYER 6         /* layer3.2.conv2: fp16 activation ovf 3, unf 2, sub 4 */

typedef struct {
    int arms;                  /* 1 or 2 */
    int steps;                 /* default TT_STEPS */
    fp_run_status status;      /* FINISHED, INTERRUPTED, or FAILED (the fp16 arm fails) */
    const char *failure;
} tt_opts_t;

const char *tt_layer_name(int l);
/* Write the fixture to path (removing any old file first). */
int tt_write_fixture(const char *path, const tt_opts_t *o);
/* Open a store and begin a 2-arm session (for live writers); runs[] receive the ids. */
int tt_begin(fp_store_t *s, int64_t runs[2], int total_steps);
/* Record step k of both arms (with layer times; histograms every 50 steps). */
int tt_record_step(fp_store_t *s, const int64_t runs[2], int64_t k);

#endif
