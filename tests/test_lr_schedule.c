/* test_lr_schedule.c — learning-rate schedules against torch.optim.lr_scheduler (30 steps each,
 * tests/fixtures/optim/lr_schedule.safetensors from tests/fixtures/make_optim_reference.py, which
 * also prints the tables as C arrays), plus names and bad settings refused with a message. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "safetensors.h"
#include "tap.h"
#include "trainer/lr_schedule.h"

#ifndef FIXTURE_DIR
#define FIXTURE_DIR "tests/fixtures"
#endif

/* Tolerance: abs 1e-15 + rel 1e-12. Both sides are double. We evaluate closed forms; PyTorch
 * evaluates the chainable recursive forms (lr_t from lr_{t-1}), which drift from the closed form
 * by a few ulps (2.2e-16 each) per step — far below 1e-12 — while any off-by-one in the step
 * index or the warmup hand-over moves the value by more than 1e-4 relative. */
#define ABS_TOL 1e-15
#define REL_TOL 1e-12
#define NSTEPS 30

static fp_st *fx;

/* Reads an F64 [NSTEPS] table; the file is little-endian, as is every host we build on
 * (checked below). */
static int read_table(const char *name, double *out)
{
    const fp_st_tensor *t = fp_st_find(fx, name);
    if (!t || t->dtype != FP_ST_F64 || t->numel != NSTEPS) {
        tap_diag("fixture: no F64 [%d] tensor '%s'", NSTEPS, name);
        return 0;
    }
    memcpy(out, t->data, sizeof(double) * NSTEPS);
    return 1;
}

static void compare(const char *table, const fp_lr_schedule *s, const char *how)
{
    double want[NSTEPS];
    if (!read_table(table, want)) {
        tap_ok(0, "%s: fixture table", table);
        return;
    }
    tap_ok(fp_lr_schedule_check(s) == FP_OK, "%s: settings valid (%s)", table, fp_error_message());
    for (int t = 0; t < NSTEPS; t++)
        tap_is_double(fp_lr_at(s, t), want[t], ABS_TOL, REL_TOL, "%s step %d (%s)", table, t, how);
}

static void test_torch(void)
{
    const double base = 0.1;
    fp_lr_schedule s;

    fp_lr_schedule_default(&s, FP_LR_CONSTANT, base);
    compare("constant", &s, "constant");

    fp_lr_schedule_default(&s, FP_LR_STEP, base);
    s.step_size = 10;
    s.gamma = 0.1;
    compare("step", &s, "StepLR(step_size=10, gamma=0.1)");

    fp_lr_schedule_default(&s, FP_LR_COSINE, base);
    s.t_max = 30;
    s.eta_min = 0.001;
    compare("cosine", &s, "CosineAnnealingLR(T_max=30, eta_min=0.001)");

    /* Warmup is SequentialLR([LinearLR(start_factor=0.1, total_iters=5), main], milestones=[5]);
     * the cosine after it runs over the remaining 25 steps. */
    fp_lr_schedule_default(&s, FP_LR_COSINE, base);
    s.t_max = 25;
    s.eta_min = 0.001;
    s.warmup_steps = 5;
    s.warmup_start_factor = 0.1;
    compare("warmup_cosine", &s, "LinearLR 5 then cosine T_max=25");

    fp_lr_schedule_default(&s, FP_LR_STEP, base);
    s.step_size = 10;
    s.gamma = 0.1;
    s.warmup_steps = 5;
    s.warmup_start_factor = 0.1;
    compare("warmup_step", &s, "LinearLR 5 then StepLR 10");
}

static void expect_einval(const fp_lr_schedule *s, const char *what, const char *needle)
{
    fp_error_clear();
    int rc = fp_lr_schedule_check(s);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), needle), "refused: %s -> \"%s\"", what,
           fp_error_message());
}

static void test_bad(void)
{
    fp_lr_schedule s;
    fp_lr_schedule_default(&s, FP_LR_CONSTANT, -0.1);
    expect_einval(&s, "lr < 0", "learning rate");
    fp_lr_schedule_default(&s, FP_LR_CONSTANT, NAN);
    expect_einval(&s, "lr NaN", "learning rate");
    fp_lr_schedule_default(&s, FP_LR_STEP, 0.1);
    s.step_size = 0;
    expect_einval(&s, "step_size 0", "step_size");
    s.step_size = 10;
    s.gamma = NAN;
    expect_einval(&s, "gamma NaN", "gamma");
    fp_lr_schedule_default(&s, FP_LR_COSINE, 0.1);
    s.t_max = 0;
    expect_einval(&s, "T_max 0", "T_max");
    s.t_max = 10;
    s.eta_min = -1;
    expect_einval(&s, "eta_min < 0", "eta_min");
    s.eta_min = 0;
    s.warmup_steps = -1;
    expect_einval(&s, "warmup steps < 0", "warmup steps");
    s.warmup_steps = 5;
    s.warmup_start_factor = 0;
    expect_einval(&s, "warmup start factor 0", "start factor");
    s.warmup_start_factor = 1.5;
    expect_einval(&s, "warmup start factor > 1", "start factor");
    s.warmup_start_factor = NAN;
    expect_einval(&s, "warmup start factor NaN", "start factor");
    s.kind = (fp_lr_kind)9;
    expect_einval(&s, "unknown kind", "constant, step, cosine");

    fp_lr_kind k;
    tap_ok(fp_lr_schedule_parse("cosine", &k) == FP_OK && k == FP_LR_COSINE, "parse cosine");
    tap_ok(fp_lr_schedule_parse("step", &k) == FP_OK && k == FP_LR_STEP, "parse step");
    int rc = fp_lr_schedule_parse("onecycle", &k);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "'onecycle'") &&
           strstr(fp_error_message(), "constant, step, cosine"), "unknown schedule lists choices: %s",
           fp_error_message());
    tap_is_str(fp_lr_schedule_name(FP_LR_STEP), "step", "name of step");
}

static void test_edges(void)
{
    fp_lr_schedule s;
    fp_lr_schedule_default(&s, FP_LR_COSINE, 1.0);
    s.t_max = 10;
    tap_is_double(fp_lr_at(&s, 10), 0.0, 1e-15, 0, "cosine reaches eta_min at T_max");
    tap_is_double(fp_lr_at(&s, 20), 1.0, 1e-15, 0, "cosine past T_max rises again, as PyTorch's");
    tap_is_double(fp_lr_at(&s, -3), 1.0, 0, 0, "negative step counts as 0");
    s.warmup_steps = 4;
    s.warmup_start_factor = 0.25;
    tap_is_double(fp_lr_at(&s, 0), 0.25, 0, 0, "warmup starts at start_factor * lr");
    tap_is_double(fp_lr_at(&s, 4), 1.0, 0, 0, "main schedule starts at lr after warmup");
}

int main(void)
{
    const uint16_t one = 1;
    char path[4200];
    snprintf(path, sizeof path, "%s/optim/lr_schedule.safetensors", FIXTURE_DIR);
    if (*(const uint8_t *)&one != 1)
        tap_skip_all("big-endian host: the F64 fixture is read by memcpy");
    if (fp_st_open(&fx, path) != FP_OK) {
        tap_ok(0, "open fixture: %s", fp_error_message());
        return tap_done();
    }
    test_torch();
    test_bad();
    test_edges();
    fp_st_close(fx);
    return tap_done();
}
