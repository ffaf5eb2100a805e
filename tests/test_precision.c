/* test_precision.c — the policy table against docs/design.md, the GradScaler's PyTorch semantics
 * (2^16 start, x2 after 2000 clean steps, x0.5 + skip on inf/NaN, static mode), the one-pass unscale
 * + finite check with Inf / NaN at every position class, and the rounding helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "numfmt.h"
#include "tap.h"
#include "trainer/precision.h"

static void check_table(void)
{
    /* docs/design.md: compute of conv/linear, activation storage, master weights, optimizer state, scaling */
    static const struct {
        const char *name;
        fp_dtype compute, act, grad, master, state;
        fp_scale_mode scaling;
    } want[] = {
        {"fp32", FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_SCALE_NONE},
        {"tf32", FP_DT_TF32, FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_SCALE_NONE},
        {"fp16", FP_DT_F16, FP_DT_F16, FP_DT_F16, FP_DT_F32, FP_DT_F32, FP_SCALE_DYNAMIC},
        {"fp16-noscale", FP_DT_F16, FP_DT_F16, FP_DT_F16, FP_DT_F32, FP_DT_F32, FP_SCALE_NONE},
        {"half", FP_DT_F16, FP_DT_F16, FP_DT_F16, FP_DT_F16, FP_DT_F16, FP_SCALE_NONE},
        {"bf16", FP_DT_BF16, FP_DT_BF16, FP_DT_BF16, FP_DT_F32, FP_DT_F32, FP_SCALE_NONE},
    };
    const char *const *names = fp_policy_names();
    size_t k = 0;
    for (; names[k]; k++)
        ;
    tap_is_int((long long)k, 6, "six policies listed");
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const fp_policy *p = fp_policy_find(want[i].name);
        int ok = p && strcmp(p->name, want[i].name) == 0 && p->compute == want[i].compute &&
                 p->activation == want[i].act && p->activation_grad == want[i].grad &&
                 p->master == want[i].master && p->optim_state == want[i].state && p->scaling == want[i].scaling &&
                 p->description && *p->description && names[i] && strcmp(names[i], want[i].name) == 0;
        tap_ok(ok, "policy %s: compute %s, activations %s, master %s, scaling %d (docs/design.md)", want[i].name,
               fp_dtype_name(want[i].compute), fp_dtype_name(want[i].act), fp_dtype_name(want[i].master),
               (int)want[i].scaling);
    }
    tap_ok(fp_policy_find("fp8") == NULL && fp_policy_find(NULL) == NULL, "unknown policy -> NULL");
    tap_ok(strstr(fp_policy_names_joined(), "fp16-noscale") && strstr(fp_policy_names_joined(), "bf16"),
           "joined names for errors: %s", fp_policy_names_joined());
    tap_ok(fp_dtype_bytes(FP_DT_F32) == 4 && fp_dtype_bytes(FP_DT_TF32) == 4 && fp_dtype_bytes(FP_DT_F16) == 2 &&
               fp_dtype_bytes(FP_DT_BF16) == 2,
           "dtype bytes 4 4 2 2");
    tap_is_str(fp_dtype_name(FP_DT_BF16), "bf16", "dtype name");
}

static void check_scaler(void)
{
    fp_grad_scaler s;
    fp_grad_scaler_init(&s, FP_SCALE_DYNAMIC);
    tap_ok(s.scale == 65536.0f && s.growth_interval == 2000 && s.growth_factor == 2.0f && s.backoff_factor == 0.5f,
           "dynamic scaler starts at 2^16, x2 / 2000, x0.5");
    int changed = 0;
    for (int i = 0; i < 1999; i++)
        changed |= fp_grad_scaler_update(&s, 0);
    tap_ok(!changed && s.scale == 65536.0f && s.clean_steps == 1999, "1999 clean steps: scale unchanged");
    tap_ok(fp_grad_scaler_update(&s, 0) == 1 && s.scale == 131072.0f && s.clean_steps == 0,
           "2000th clean step: scale doubles to 2^17, counter reset");
    for (int i = 0; i < 1000; i++)
        fp_grad_scaler_update(&s, 0);
    tap_ok(fp_grad_scaler_update(&s, 1) == 1 && s.scale == 65536.0f && s.clean_steps == 0,
           "inf/NaN: scale halves, counter reset (partial growth count lost)");
    for (int i = 0; i < 1999; i++)
        fp_grad_scaler_update(&s, 0);
    tap_ok(s.scale == 65536.0f, "growth needs 2000 consecutive clean steps after a skip");
    fp_grad_scaler_update(&s, 0);
    tap_ok(s.scale == 131072.0f, "... and then doubles");
    s.scale = 3e38f;   /* growth to a non-finite scale is refused, as torch._amp_update_scale_ */
    s.clean_steps = 1999;
    fp_grad_scaler_update(&s, 0);
    tap_ok(s.scale == 3e38f && s.clean_steps == 0, "growth that would overflow keeps the scale");
    fp_grad_scaler st;
    fp_grad_scaler_init(&st, FP_SCALE_STATIC);
    st.scale = 1024.0f;
    int ch = fp_grad_scaler_update(&st, 1);
    for (int i = 0; i < 5000; i++)
        ch |= fp_grad_scaler_update(&st, 0);
    tap_ok(!ch && st.scale == 1024.0f, "static scaler: fixed scale through infs and 5000 clean steps");
    fp_grad_scaler none;
    fp_grad_scaler_init(&none, FP_SCALE_NONE);
    tap_ok(none.scale == 1.0f && fp_grad_scaler_update(&none, 1) == 0 && none.scale == 1.0f, "no scaler: scale 1");
}

static void check_unscale(void)
{
    const size_t sizes[] = {1, 7, 16, 31, 1000, 4099};
    int all_ok = 1, clean_ok = 1;
    float *g = malloc(4099 * sizeof(float));
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        /* clean: every value scaled, no report */
        for (size_t i = 0; i < n; i++)
            g[i] = (float)((int)i - 50) * 0.25f;
        int f = fp_unscale_and_check(g, n, 0.5f);
        for (size_t i = 0; i < n; i++)
            clean_ok &= g[i] == (float)((int)i - 50) * 0.125f;
        clean_ok &= f == 0;
        /* one bad value at the first, a middle, and the last position; +Inf, -Inf, NaN */
        const float bad[3] = {INFINITY, -INFINITY, NAN};
        size_t pos[3] = {0, n / 2, n - 1};
        for (int b = 0; b < 3; b++)
            for (int pi = 0; pi < 3; pi++) {
                for (size_t i = 0; i < n; i++)
                    g[i] = 1.0f;
                g[pos[pi]] = bad[b];
                f = fp_unscale_and_check(g, n, 0.25f);
                all_ok &= f == 1 && (pos[pi] == 0 || g[0] == 0.25f) && (pos[pi] == n - 1 || g[n - 1] == 0.25f);
                if (!(f == 1))
                    tap_diag("n=%zu bad %g at %zu not found", n, bad[b], pos[pi]);
            }
    }
    tap_ok(clean_ok, "unscale: finite gradients scaled in place, none reported");
    tap_ok(all_ok, "unscale: +Inf / -Inf / NaN found at first / middle / last position, sizes 1..4099");
    g[0] = 65504.0f;
    g[1] = 3e38f;
    tap_ok(fp_unscale_and_check(g, 2, 1.0f / 65536.0f) == 0 && g[1] == 3e38f / 65536.0f,
           "large finite values are not reported");
    free(g);
}

static void check_rounding(void)
{
    /* fp16: 1 + 2^-11 is a tie -> 1 (even); 1 + 3*2^-11 -> 1 + 2^-9; 65519 -> 65504; 65520 -> Inf;
     * 2^-25 -> 0 (tie to even below the smallest subnormal 2^-24); 3*2^-26 -> 2^-24 */
    float x[8] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f, 65520.0f, 0x1p-25f, 3 * 0x1p-26f, -2.5f, NAN};
    fp_round_to_dtype(x, 8, FP_DT_F16);
    tap_ok(x[0] == 1.0f && x[1] == 1.0f + 0x1p-9f && x[2] == 65504.0f && isinf(x[3]) && x[4] == 0.0f &&
               x[5] == 0x1p-24f && x[6] == -2.5f && isnan(x[7]),
           "fp16 rounding: ties to even, 65504 / Inf at 65520, subnormals, NaN");
    float b[4] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 3.0e38f, 1e-40f};
    fp_round_to_dtype(b, 4, FP_DT_BF16);
    tap_ok(b[0] == 1.0f && b[1] == 1.0f + 0x1p-6f && b[2] == fp_bf16_to_f32(fp_f32_to_bf16(3.0e38f)) &&
               b[3] == fp_bf16_to_f32(fp_f32_to_bf16(1e-40f)),
           "bf16 rounding: ties to even, range, subnormals");
    float t[2] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f}, f32[2] = {1.0f + 0x1p-20f, 3.0f};
    fp_round_to_dtype(t, 2, FP_DT_TF32);
    fp_round_to_dtype(f32, 2, FP_DT_F32);
    tap_ok(t[0] == 1.0f && t[1] == 1.0f + 0x1p-9f && f32[0] == 1.0f + 0x1p-20f, "tf32 rounds to 10 bits, fp32 keeps");
    /* a long array, every value equals the scalar conversion (chunk boundaries included) */
    size_t n = 5000;
    float *a = malloc(n * sizeof(float)), *c = malloc(n * sizeof(float));
    unsigned s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        a[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 1e5f;
    }
    fp_round_to_dtype_copy(c, a, n, FP_DT_F16);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= c[i] == fp_f16_to_f32(fp_f32_to_f16(a[i])) || (isinf(c[i]) && fabsf(a[i]) >= 65520.0f);
    tap_ok(ok, "round copy of 5000 values equals the scalar conversion");
    /* round_add: dst += round(src) */
    float d[3] = {1.0f, 2.0f, 3.0f}, sr[3] = {1.0f + 0x1p-12f, 65520.0f, -0.0f};
    fp_round_add(d, sr, 3, FP_DT_F16);
    tap_ok(d[0] == 2.0f && isinf(d[1]) && d[2] == 3.0f, "round_add: rounded contribution, overflow to Inf");
    /* lost update: a weight of 1 (fp16 ulp 2^-10) moved by 1e-4 (< half an ulp) stays 1 */
    float w = 1.0f - 1e-4f;
    fp_round_to_dtype(&w, 1, FP_DT_F16);
    tap_ok(w == 1.0f, "an update below half an fp16 ulp is lost after rounding");
    free(a);
    free(c);
}

int main(void)
{
    check_table();
    check_scaler();
    check_unscale();
    check_rounding();
    return tap_done();
}
