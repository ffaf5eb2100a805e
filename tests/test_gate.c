/* test_gate.c — the CI gate: Mann–Whitney U (exact against brute-force enumeration, the tie-corrected
 * normal approximation against an independent computation), no false alarm over many seeds of
 * same-distribution step times with realistic noise, a real 10% slowdown failing, too few steps
 * inconclusive, a missing arm / another model an error, the threshold checks, JUnit and Markdown. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "reports/gate.h"
#include "report_testutil.h"
#include "store_testutil.h"
#include "tap.h"

/* Exact two-sided p by enumerating every split of the pooled ranks (no ties). */
static double brute_p(const double *a, size_t na, const double *b, size_t nb)
{
    size_t N = na + nb;
    double pool[32];
    memcpy(pool, a, na * sizeof *a);
    memcpy(pool + na, b, nb * sizeof *b);
    double u_obs = 0;
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++)
            u_obs += a[i] > b[j];
    size_t le = 0, ge = 0, total = 0;
    for (uint32_t mask = 0; mask < (1u << N); mask++) {
        if ((size_t)__builtin_popcount(mask) != na)
            continue;
        double u = 0;
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < N; j++)
                if ((mask >> i & 1) && !(mask >> j & 1))
                    u += pool[i] > pool[j];
        total++;
        le += u <= u_obs;
        ge += u >= u_obs;
    }
    double p = 2.0 * (double)(le < ge ? le : ge) / (double)total;
    return p > 1 ? 1 : p;
}

static void stats_tests(void)
{
    fp_mwu_t t;
    double a[] = {1, 2, 3, 4, 5}, b[] = {6, 7, 8, 9, 10};
    tap_ok(fp_mann_whitney(a, 5, b, 5, &t) == FP_OK && t.exact, "MWU 5 vs 5 without ties is exact");
    tap_is_double(t.u1, 0, 0, 0, "U1 = 0 when every a is below every b");
    tap_is_double(t.p, 2.0 / 252.0, 1e-12, 0, "exact two-sided p = 2/C(10,5) (abs 1e-12)");
    rt_rng_t rng;
    rt_seed(&rng, 7);
    int agree = 1;
    for (int trial = 0; trial < 20; trial++) {
        double x[8], y[9];
        size_t nx = 3 + (size_t)trial % 6, ny = 4 + (size_t)trial % 5;
        for (size_t i = 0; i < nx; i++)
            x[i] = rt_normal(&rng) + (trial % 3) * 0.5;
        for (size_t i = 0; i < ny; i++)
            y[i] = rt_normal(&rng);
        if (fp_mann_whitney(x, nx, y, ny, &t) != FP_OK || !t.exact || fabs(t.p - brute_p(x, nx, y, ny)) > 1e-12) {
            tap_diag("trial %d: p %.15g vs brute force %.15g", trial, t.p, brute_p(x, nx, y, ny));
            agree = 0;
        }
    }
    tap_ok(agree, "exact p equals brute-force enumeration on 20 random small samples (abs 1e-12)");
    double c[] = {1.1, 2.2, 2.2, 3.5, 4.0, 5.1, 6.3, 7.7}, d[] = {2.2, 3.0, 4.0, 8.1, 9.2, 9.9, 10.5, 11.0, 12.0};
    tap_ok(fp_mann_whitney(c, 8, d, 9, &t) == FP_OK && !t.exact, "ties: normal approximation");
    tap_is_double(t.u1, 14.5, 0, 0, "U1 counts ties as 1/2");
    tap_is_double(t.z, -2.0269454888567053, 1e-12, 1e-12, "tie- and continuity-corrected z (independent value)");
    tap_is_double(t.p, 0.04266798774345128, 1e-12, 1e-10, "two-sided p (independent value, rel 1e-10)");
    double e[30], f[30];
    for (int i = 0; i < 30; i++)
        e[i] = f[i] = 5.0;
    tap_ok(fp_mann_whitney(e, 30, f, 30, &t) == FP_OK && t.p == 1.0, "identical constant samples: p = 1");
    double nanv[] = {1, NAN};
    tap_ok(fp_mann_whitney(nanv, 2, a, 5, &t) == FP_EINVAL, "a NaN sample value is refused");
    tap_ok(fp_mann_whitney(a, 0, b, 5, &t) == FP_EINVAL, "an empty sample is refused");
}

/* A one-arm summary made by hand (only what the step-time check reads). */
static void fake_arm(fp_arm_t *arm, double *times, size_t n)
{
    memset(arm, 0, sizeof *arm);
    snprintf(arm->run.policy, sizeof arm->run.policy, "fp32");
    snprintf(arm->run.arm, sizeof arm->run.arm, "fp32");
    snprintf(arm->run.status, sizeof arm->run.status, "finished");
    snprintf(arm->run.device, sizeof arm->run.device, "cpu");
    arm->is_ref = 1;
    arm->fmt = -1;
    arm->times = times;
    arm->ntimes = n;
    arm->nsteps = n;
    arm->median_ns = fp_median(times, n);
    arm->final_loss = arm->val_top1 = NAN;
    arm->skip_rate = 0;
}

static fp_check_t *find(fp_gate_result_t *res, const char *name)
{
    for (size_t i = 0; i < res->n; i++)
        if (strcmp(res->checks[i].name, name) == 0)
            return &res->checks[i];
    return NULL;
}

static void noise_tests(void)
{
    enum { SEEDS = 400, N = 300 };
    static double x[N], y[N];
    fp_gate_opts_t o;
    fp_gate_defaults(&o);
    int alarms = 0, small_p = 0, slow_caught = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        rt_rng_t rng;
        rt_seed(&rng, (uint64_t)seed);
        double sigma = 0.02 + 0.08 * rt_uniform(&rng);   /* 2%..10% lognormal jitter */
        for (int i = 0; i < N; i++) {
            x[i] = rt_step_time(&rng, 100e6, sigma, 0.01);
            y[i] = rt_step_time(&rng, 100e6, sigma, 0.01);
        }
        fp_arm_t ab, ac;
        fake_arm(&ab, x, N);
        fake_arm(&ac, y, N);
        fp_summary_t base = {.arms = &ab, .narms = 1}, cand = {.arms = &ac, .narms = 1};
        snprintf(base.model, sizeof base.model, "resnet50");
        snprintf(cand.model, sizeof cand.model, "resnet50");
        fp_gate_result_t res;
        if (fp_gate_run(&base, &cand, &o, &res) == FP_OK) {
            fp_check_t *c = find(&res, "step_time[fp32]");
            alarms += !c || c->status != FP_CHECK_PASS;
            fp_mwu_t t;
            fp_mann_whitney(y, N, x, N, &t);
            small_p += t.p < 0.01;
            fp_gate_result_free(&res);
        } else {
            alarms++;
        }
        for (int i = 0; i < N; i++)   /* the same seed with a real 10% slowdown */
            y[i] *= 1.10;
        fake_arm(&ac, y, N);
        if (fp_gate_run(&base, &cand, &o, &res) == FP_OK) {
            fp_check_t *c = find(&res, "step_time[fp32]");
            slow_caught += c && c->status == FP_CHECK_FAIL;
            fp_gate_result_free(&res);
        }
    }
    tap_diag("%d of %d same-distribution seeds had p < 0.01 (expected about 1%%); none may fail", small_p, SEEDS);
    tap_is_int(alarms, 0, "no false alarm over %d seeds of same-distribution step times (n = %d, jitter 2-10%%, 1%% outliers)",
               SEEDS, N);
    tap_is_int(slow_caught, SEEDS, "a 10%% slowdown fails on every one of the %d seeds", SEEDS);
}

static int load(const char *path, fp_summary_t *s)
{
    fp_reader_t *r;
    int rc = fp_reader_open_snapshot(&r, path);
    if (rc != FP_OK)
        return rc;
    rc = fp_summary_load(r, 0, -1, s);
    fp_reader_close(r);
    return rc;
}

/* Gate a generated candidate against a generated baseline (NULL: none); returns the exit code
 * (3 for an error) and leaves the result in *res. */
static int gate_files(const char *base_path, const char *cand_path, fp_gate_result_t *res)
{
    fp_summary_t b, c;
    fp_gate_opts_t o;
    fp_gate_defaults(&o);
    memset(res, 0, sizeof *res);
    if (load(cand_path, &c) != FP_OK)
        return 3;
    if (base_path && load(base_path, &b) != FP_OK) {
        fp_summary_free(&c);
        return 3;
    }
    int rc = fp_gate_run(base_path ? &b : NULL, &c, &o, res);
    fp_summary_free(&c);
    if (base_path)
        fp_summary_free(&b);
    return rc == FP_OK ? fp_gate_exit_code(res) : 3;
}

static void db_tests(void)
{
    char *dir = tu_mkdir();
    char *base = tu_path(dir, "base.db"), *path = tu_path(dir, "cand.db");
    rt_gate_spec_t g;
    rt_default_gate(&g, base, 1);
    tap_ok(rt_write_gate(&g) == FP_OK, "baseline session written (fp32 + fp16, 300 steps)");
    fp_gate_result_t res;

    int clean = 1;
    for (uint64_t seed = 2; seed <= 11; seed++) {
        remove(path);
        rt_default_gate(&g, path, seed);
        int code = rt_write_gate(&g) == FP_OK ? gate_files(base, path, &res) : -1;
        if (code != 0) {
            tap_diag("seed %llu: exit %d", (unsigned long long)seed, code);
            for (size_t i = 0; i < res.n; i++)
                tap_diag("  %s %s %s", res.checks[i].name, fp_check_status_name(res.checks[i].status), res.checks[i].figures);
            clean = 0;
        }
        fp_gate_result_free(&res);
    }
    tap_ok(clean, "10 candidate databases of the same distribution all pass (exit 0)");

    remove(path);
    rt_default_gate(&g, path, 99);
    g.slowdown = 1.10;
    rt_write_gate(&g);
    tap_is_int(gate_files(base, path, &res), 1, "a real 10%% slowdown is a regression (exit 1)");
    fp_check_t *c = find(&res, "step_time[fp16]");
    tap_ok(c && c->status == FP_CHECK_FAIL && c->value > 0.05, "step_time[fp16] fails with a median ratio above 5%%");
    fp_gate_result_free(&res);

    remove(path);
    rt_default_gate(&g, path, 5);
    g.steps = 20;   /* warm-up 5 -> 15 step times < 20 */
    rt_write_gate(&g);
    tap_is_int(gate_files(base, path, &res), 2, "too few steps after warm-up is inconclusive (exit 2)");
    c = find(&res, "step_time[fp32]");
    tap_ok(c && c->status == FP_CHECK_INCONCLUSIVE, "step_time[fp32] is INCONCLUSIVE");
    fp_gate_result_free(&res);

    remove(path);
    rt_default_gate(&g, path, 5);
    g.policies = "fp32";
    rt_write_gate(&g);
    tap_is_int(gate_files(base, path, &res), 3, "a missing arm is an error (exit 3)");
    tap_ok(strstr(fp_error_message(), "missing arm") != NULL, "the message names the missing arm: %s", fp_error_message());

    remove(path);
    rt_default_gate(&g, path, 5);
    g.model = "vgg16";
    rt_write_gate(&g);
    tap_is_int(gate_files(base, path, &res), 3, "sessions of different models are an error (exit 3)");

    /* threshold checks on the candidate alone */
    remove(path);
    rt_default_gate(&g, path, 6);
    g.loss_offset16 = 0.2;
    g.skip_every = 10;
    rt_write_gate(&g);
    tap_is_int(gate_files(NULL, path, &res), 1, "threshold checks alone: regressions found (exit 1)");
    c = find(&res, "loss_gap[fp16]");
    tap_ok(c && c->status == FP_CHECK_FAIL, "loss gap 0.2 > 0.1 fails");
    c = find(&res, "acc_drop[fp16]");
    tap_ok(c && c->status == FP_CHECK_FAIL && fabs(c->value - 20) < 1e-6, "top-1 drop of 20 points fails");
    c = find(&res, "skipped[fp16]");
    tap_ok(c && c->status == FP_CHECK_FAIL, "10%% skipped steps > 5%% fails");
    c = find(&res, "speedup[fp16]");
    tap_ok(c && c->status == FP_CHECK_PASS && c->value > 1.5, "speedup 1.8x >= 1.0 on a GPU passes");
    tap_ok(find(&res, "step_time[fp16]") == NULL, "no step-time check without a baseline");

    /* outputs */
    snprintf(res.candidate, sizeof res.candidate, "cand.db <session> & \"x\"");
    char *jpath = tu_path(dir, "junit.xml"), *mpath = tu_path(dir, "summary.md");
    FILE *f = fopen(jpath, "w");
    fp_gate_junit(f, &res);
    fclose(f);
    f = fopen(mpath, "w");
    fp_gate_markdown(f, &res);
    fclose(f);
    char *buf = tu_slurp(jpath, NULL);
    size_t cases = 0;
    for (char *p = buf; p && (p = strstr(p, "<testcase ")); p++)
        cases++;
    tap_is_int((long long)cases, (long long)res.n, "JUnit: one testcase per check");
    tap_ok(buf && strstr(buf, "<failure type=\"regression\"") &&
               strstr(buf, "cand.db &lt;session&gt; &amp; &quot;x&quot;"),
           "JUnit: failures and escaped properties");
    free(buf);
    buf = tu_slurp(mpath, NULL);
    tap_ok(buf && strstr(buf, "### fp16probe gate: REGRESSION") && strstr(buf, "| loss\\_gap\\[fp16\\] | **FAIL** |"),
           "Markdown: verdict heading and a row per check");
    free(buf);
    fp_gate_result_free(&res);
    free(jpath);
    free(mpath);
    free(base);
    free(path);
    tu_rmdir(dir);
}

int main(void)
{
    stats_tests();
    noise_tests();
    db_tests();
    return tap_done();
}
