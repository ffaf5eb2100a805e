/* hist_f32_simd.c — the AVX2 and AVX-512 kernels of fp_hist_add (hist_internal.h), 16 fp32 values
 * per step: exponent fields counted (AVX-512, calls of 4096 values or more: one PEXT and one increment
 * per pair of fields), per-threshold compares only in steps with a slow lane; and the gate that says
 * which lanes are slow. Promise: the raw counts and sum lanes of hist.c's scalar kernel, bit for bit.
 * Compiled without -m flags: each kernel carries a target attribute, and hist.c's
 * fp_hist_kernel_get hands one out only when the CPU has its features. */
#include "hist_internal.h"
#include <stdlib.h>
#include <string.h>
#ifdef HIST_X86
#include <immintrin.h>
#endif

/* ---- fast path of the vector kernels
 * A threshold T = (E << 23) | m splits the values by exponent field: every a with field < E is below
 * it, every a with field > E is not. Within field E: m == 0, none; m == 1 (T = P + 1 for the power of
 * two P = E << 23, a "<= power of two" bound), exactly the a == P; E == 0 (fp32 subnormals and
 * zeros), the zeros and the subnormals below T. So for the values a vector kernel calls "fast" —
 * zeros, and normals whose exponent field holds no threshold with m >= 2 — every #{a < T} follows
 * from their exponent-field counts and their count of nonzero exact powers of two per field
 * (vec_finish). Slow lanes (fp32 subnormals, Inf, NaN, and the fields of thresholds with m >= 2) are
 * tested as: a - 1 <u MANT_MASK, field one of gate_field[0..2], or a >= gate (the lowest such field
 * beyond three, else 255). The default thresholds have three such fields: E4M3 max (2^8), fp16 and
 * E5M2 max (2^15), bf16 max (2^127). A vector of 16 values with any slow lane takes the slow step:
 * one compare per threshold, as the scalar kernel. */
void fp_hist_set_gate(thresholds_t *th)
{
    uint32_t f[NTHR];
    int nf = 0;
    for (int k = 0; k < NTHR; k++) {
        uint32_t e = th->t[k] >> 23, m = th->t[k] & MANT_MASK;
        int seen = 0;
        for (int j = 0; j < nf; j++)
            seen |= f[j] == e;
        if (e >= 1 && e < 255 && m >= 2 && !seen)
            f[nf++] = e;
    }
    for (int i = 1; i < nf; i++)                         /* ascending */
        for (int j = i; j > 0 && f[j - 1] > f[j]; j--) {
            uint32_t t = f[j];
            f[j] = f[j - 1];
            f[j - 1] = t;
        }
    for (int j = 0; j < 3; j++)
        th->gate_field[j] = j < nf ? f[j] : 255;        /* 255: Inf / NaN, slow anyway */
    th->gate = (nf > 3 ? f[3] : 255) << 23;
}

#ifdef HIST_X86
/* Exponent fields of x[0..15] into the sub-histograms. Scalar 64-bit loads (not lane extracts): the
 * counter addresses are known early, so the CPU forwards the read-modify-write chains instead of
 * replaying them when neighbouring values share a binade. */
static inline __attribute__((always_inline)) void count_exponents(uint32_t sub[SUBHISTS][256],
                                                                  const float *x)
{
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; j++) {
        uint64_t q;
        memcpy(&q, x + 2 * j, sizeof q);
        sub[(2 * j) % SUBHISTS][(q >> 23) & 0xFF]++;
        sub[(2 * j + 1) % SUBHISTS][(q >> 55) & 0xFF]++;
    }
}

/* Fast values' exponent-field counts fe (bins 0 and lo..hi) from the sub-histograms. */
static void fold_sub(uint32_t sub[SUBHISTS][256], uint32_t lo, uint32_t hi, uint64_t fe[256])
{
    fe[0] = 0;
    for (int s = 0; s < SUBHISTS; s++)
        fe[0] += sub[s][0];
    for (uint32_t b = lo; b <= hi; b++) {
        uint64_t c = 0;
        for (int s = 0; s < SUBHISTS; s++)
            c += sub[s][b];
        fe[b] = c;
    }
}

/* End of a vector kernel: exponent counts (fast values' fe + slow steps) into ehist, and into lt the
 * slow steps' counts plus, for the fast values, #{a < t[k]} from fe and their nonzero exact powers of
 * two p2 (see above). Fast values have field 0 (zeros) or a field in [lo, hi] (from the call's min
 * and max |x|), so only those bins of fe are set and read. p2 NULL: none seen; slow_e is read only
 * when any_slow. */
static void vec_finish(raw_t *r, const thresholds_t *th, const uint64_t fe[256],
                       const uint32_t p2[256], const uint32_t slow_e[256], const uint64_t lt_slow[NTHR],
                       uint32_t lo, uint32_t hi, int any_slow)
{
    r->c.ehist[0] += fe[0];
    for (uint32_t b = lo; b <= hi; b++)
        r->c.ehist[b] += fe[b];
    for (int k = 0; k < NTHR; k++) {
        uint32_t e = th->t[k] >> 23, m = th->t[k] & MANT_MASK;
        uint64_t c = fe[0];                  /* zeros: below every t >= 1 */
        for (uint32_t b = lo; b <= hi && b < e; b++)
            c += fe[b];
        if (p2 && e >= lo && e <= hi && m == 1)
            c += p2[e];
        r->c.lt[k] += c + lt_slow[k];          /* m >= 2: a gate field, no fast value in field e */
    }
    if (any_slow)
        for (int b = 0; b < 256; b++)
            r->c.ehist[b] += slow_e[b];
}

/* The field range [lo, hi] of a call's nonzero finite values (lo > hi when none) from its min
 * (a - 1, wrapping) and max finite a. */
static void field_range(uint32_t min_m1, uint32_t max_a, uint32_t *lo, uint32_t *hi)
{
    *lo = min_m1 >= FIN_NZ_M1 ? 1 : (min_m1 + 1) >> 23;
    if (*lo == 0)
        *lo = 1;                             /* fp32 subnormals are slow; bin 0 is read apart */
    *hi = max_a >> 23;
}

/* Slow step, the lanes' part: exponent field counts, and the specials among them. */
static inline __attribute__((always_inline)) void slow_lanes(raw_t *r, uint32_t slow_e[256],
                                                             const float *x, unsigned special_mask)
{
    _Pragma("GCC unroll 16")
    for (int j = 0; j < 16; j++) {
        uint32_t u;
        memcpy(&u, &x[j], sizeof u);
        slow_e[(u >> 23) & 0xFF]++;
    }
    while (special_mask) {
        unsigned j = (unsigned)__builtin_ctz(special_mask);
        special_mask &= special_mask - 1;
        uint32_t u;
        memcpy(&u, &x[j], sizeof u);
        special(r, u);
    }
}

/* Nonzero exact powers of two among the fast lanes of one step. */
static inline __attribute__((always_inline)) void pow2_lanes(uint32_t p2[256], const float *x, unsigned mask)
{
    while (mask) {
        unsigned j = (unsigned)__builtin_ctz(mask);
        mask &= mask - 1;
        uint32_t u;
        memcpy(&u, &x[j], sizeof u);
        p2[(u >> 23) & 0xFF]++;
    }
}

/* 16 values per step; n is a multiple of 16. */
__attribute__((target("avx2,popcnt")))
void fp_hist_kernel_avx2(raw_t *r, const thresholds_t *th, const float *x, size_t n)
{
    uint32_t sub[SUBHISTS][256], p2[256], slow_e[256];
    uint64_t lt_slow[NTHR];
    memset(sub, 0, sizeof sub);
    /* p2 and slow_e are zeroed at first use (any_p2, any_slow) */
    memset(lt_slow, 0, sizeof lt_slow);
    int any_slow = 0, any_p2 = 0;
    const __m256i absmask = _mm256_set1_epi32((int)ABS_MASK);
    const __m256i mant = _mm256_set1_epi32((int)MANT_MASK);
    const __m256i inf = _mm256_set1_epi32((int)INF_BITS);
    const __m256i gate_m1 = _mm256_set1_epi32((int)(th->gate - 1));   /* a >= gate (signed: a >= 0) */
    const __m256i g0 = _mm256_set1_epi32((int)th->gate_field[0]);
    const __m256i g1 = _mm256_set1_epi32((int)th->gate_field[1]);
    const __m256i g2 = _mm256_set1_epi32((int)th->gate_field[2]);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i sub_lim = _mm256_set1_epi32((int)(MANT_MASK - 1));
    __m256i vmax = _mm256_setzero_si256(), vmin = _mm256_set1_epi32(-1);
    __m256d s0 = _mm256_loadu_pd(r->lane), s1 = _mm256_loadu_pd(r->lane + 4);
    __m256d s2 = _mm256_loadu_pd(r->lane + 8), s3 = _mm256_loadu_pd(r->lane + 12);

    for (size_t i = 0; i < n; i += 16) {
        __m256i u0 = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        __m256i u1 = _mm256_loadu_si256((const __m256i *)(const void *)(x + i + 8));
        __m256i a0 = _mm256_and_si256(u0, absmask), a1 = _mm256_and_si256(u1, absmask);
        __m256i m0 = _mm256_sub_epi32(a0, one), m1 = _mm256_sub_epi32(a1, one);
        /* slow lanes: fp32 subnormal (a - 1 <=u MANT_MASK - 1), a >= gate (Inf, NaN included), or
         * a gate field */
        __m256i e0 = _mm256_srli_epi32(a0, 23), e1 = _mm256_srli_epi32(a1, 23);
        __m256i sl0 = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_min_epu32(m0, sub_lim), m0), _mm256_cmpgt_epi32(a0, gate_m1)),
            _mm256_or_si256(_mm256_cmpeq_epi32(e0, g0), _mm256_or_si256(_mm256_cmpeq_epi32(e0, g1),
                                                                        _mm256_cmpeq_epi32(e0, g2))));
        __m256i sl1 = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_min_epu32(m1, sub_lim), m1), _mm256_cmpgt_epi32(a1, gate_m1)),
            _mm256_or_si256(_mm256_cmpeq_epi32(e1, g0), _mm256_or_si256(_mm256_cmpeq_epi32(e1, g1),
                                                                        _mm256_cmpeq_epi32(e1, g2))));
        /* nonzero exact powers of two: mantissa 0, a != 0 */
        __m256i p0 = _mm256_andnot_si256(_mm256_cmpeq_epi32(a0, zero),
                                         _mm256_cmpeq_epi32(_mm256_and_si256(a0, mant), zero));
        __m256i p1 = _mm256_andnot_si256(_mm256_cmpeq_epi32(a1, zero),
                                         _mm256_cmpeq_epi32(_mm256_and_si256(a1, mant), zero));
        __m256i any = _mm256_or_si256(_mm256_or_si256(sl0, sl1), _mm256_or_si256(p0, p1));
        __m256i af0 = a0, af1 = a1;
        if (__builtin_expect(!_mm256_testz_si256(any, any), 0)) {
            unsigned slow = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(sl0)) |
                            (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(sl1)) << 8;
            if (slow) {
                if (!any_slow)
                    memset(slow_e, 0, sizeof slow_e);
                any_slow = 1;
                for (int k = 0; k < NTHR; k++) {
                    __m256i t = _mm256_set1_epi32((int)th->t[k]);
                    unsigned lt = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(t, a0))) |
                                  (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(t, a1))) << 8;
                    lt_slow[k] += (unsigned)__builtin_popcount(lt);
                }
                __m256i f0 = _mm256_cmpgt_epi32(inf, a0), f1 = _mm256_cmpgt_epi32(inf, a1);
                af0 = _mm256_and_si256(a0, f0);
                af1 = _mm256_and_si256(a1, f1);
                /* specials: subnormal or not finite */
                unsigned nf = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(f0, zero))) |
                              (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(f1, zero))) << 8;
                unsigned sn = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
                                  _mm256_cmpeq_epi32(_mm256_min_epu32(m0, sub_lim), m0))) |
                              (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
                                  _mm256_cmpeq_epi32(_mm256_min_epu32(m1, sub_lim), m1))) << 8;
                slow_lanes(r, slow_e, x + i, nf | sn);
            } else {
                unsigned pw = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(p0)) |
                              (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(p1)) << 8;
                if (!any_p2)
                    memset(p2, 0, sizeof p2);
                any_p2 = 1;
                pow2_lanes(p2, x + i, pw);
                count_exponents(sub, x + i);
            }
        } else {
            count_exponents(sub, x + i);
        }
        vmax = _mm256_max_epi32(vmax, _mm256_max_epi32(af0, af1));
        vmin = _mm256_min_epu32(vmin, _mm256_min_epu32(m0, m1));
        __m256 q0 = _mm256_castsi256_ps(af0), q1 = _mm256_castsi256_ps(af1);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(q0)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(q0, 1)));
        s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(q1)));
        s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(q1, 1)));
    }

    uint32_t c[8];
    _mm256_storeu_si256((__m256i *)(void *)c, vmax);
    for (int j = 0; j < 8; j++)
        if (c[j] > r->c.amax_bits)
            r->c.amax_bits = c[j];
    _mm256_storeu_si256((__m256i *)(void *)c, vmin);
    for (int j = 0; j < 8; j++)
        if (c[j] < r->c.min_m1)
            r->c.min_m1 = c[j];
    _mm256_storeu_pd(r->lane, s0);
    _mm256_storeu_pd(r->lane + 4, s1);
    _mm256_storeu_pd(r->lane + 8, s2);
    _mm256_storeu_pd(r->lane + 12, s3);
    uint32_t mx = 0, mn = UINT32_MAX, lo, hi;
    _mm256_storeu_si256((__m256i *)(void *)c, vmax);
    for (int j = 0; j < 8; j++)
        mx = c[j] > mx ? c[j] : mx;
    _mm256_storeu_si256((__m256i *)(void *)c, vmin);
    for (int j = 0; j < 8; j++)
        mn = c[j] < mn ? c[j] : mn;
    field_range(mn, mx, &lo, &hi);
    _mm256_zeroupper();   /* see fp_hist_kernel_avx512's end */
    uint64_t fe[256];
    fold_sub(sub, lo, hi, fe);
    vec_finish(r, th, fe, any_p2 ? p2 : NULL, slow_e, lt_slow, lo, hi, any_slow);
}

/* ---- exponent pairs (AVX-512 kernel, calls of PAIR_MIN_N values or more)
 * One counter per pair of neighbouring exponent fields: one 64-bit load, one PEXT (BMI2; fast on
 * every CPU with AVX-512) and one increment per two values instead of two. Key = field of the first
 * | field of the second << 8; two tables (even / odd pairs), 2 x 64K x 4 bytes, thread-local,
 * allocated at first use and kept; all zero between calls: the fold reads and clears only the rows
 * and columns of fields the call can hold ({0} and [lo, hi]). */
#define PAIR_MIN_N 4096
#define PAIR_KEYS  65536u

static _Thread_local uint32_t *pair_table;

void fp_hist_pair_release(void)
{
    free(pair_table);
    pair_table = NULL;
}

static uint32_t *pair_get(void)
{
    if (!pair_table && (pair_table = calloc(2 * PAIR_KEYS, sizeof *pair_table)))   /* NULL: the kernel uses sub */
        fp_hist_release_at_thread_exit();
    return pair_table;
}

static inline __attribute__((always_inline, target("bmi2"))) void count_pairs(uint32_t *t, const float *x)
{
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; j++) {
        uint64_t q;
        memcpy(&q, x + 2 * j, sizeof q);
        t[((uint32_t)(j & 1) << 16) + (uint32_t)_pext_u64(q, 0x7F8000007F800000ull)]++;
    }
}

/* fe (bins 0 and lo..hi) from the pair tables, which are left all zero. */
__attribute__((target("avx512f")))
static void fold_pairs(uint32_t *t, uint32_t lo, uint32_t hi, uint64_t fe[256])
{
    uint32_t col[256 + 16];                  /* by first field; a call is <= BLOCK values: no wrap */
    uint64_t row_sum[256];
    memset(col, 0, sizeof col);
    memset(row_sum, 0, sizeof row_sum);
    const __m512i zero = _mm512_setzero_si512();
    for (uint32_t tb = 0; tb < 2; tb++) {
        for (uint32_t f2 = 0; f2 <= hi; f2 = f2 ? f2 + 1 : lo) {   /* 0, then lo .. hi */
            uint32_t *row = t + (tb << 16) + (f2 << 8);
            uint64_t rs = row[0];
            col[0] += row[0];
            row[0] = 0;
            __m512i acc = zero;
            for (uint32_t a = lo; a <= hi; a += 16) {
                __mmask16 m = hi + 1 - a >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (hi + 1 - a)) - 1);
                __m512i v = _mm512_maskz_loadu_epi32(m, row + a);
                acc = _mm512_add_epi32(acc, v);
                _mm512_storeu_si512(col + a, _mm512_add_epi32(_mm512_loadu_si512(col + a), v));
                _mm512_mask_storeu_epi32(row + a, m, zero);
            }
            row_sum[f2] += rs + (uint32_t)_mm512_reduce_add_epi32(acc);
            if (lo > hi)
                break;
        }
    }
    fe[0] = col[0] + row_sum[0];
    for (uint32_t b = lo; b <= hi; b++)
        fe[b] = col[b] + row_sum[b];
}

/* 16 values per step; n is a multiple of 16. */
__attribute__((target("avx512f,popcnt,bmi2")))
void fp_hist_kernel_avx512(raw_t *r, const thresholds_t *th, const float *x, size_t n)
{
    uint32_t sub[SUBHISTS][256], p2[256], slow_e[256];
    uint64_t lt_slow[NTHR];
    uint32_t *pt = n >= PAIR_MIN_N ? pair_get() : NULL;
    if (!pt)
        memset(sub, 0, sizeof sub);
    /* p2 and slow_e are zeroed at first use (any_p2, any_slow) */
    memset(lt_slow, 0, sizeof lt_slow);
    int any_slow = 0, any_p2 = 0;
    const __m512i absmask = _mm512_set1_epi32((int)ABS_MASK);
    const __m512i mant = _mm512_set1_epi32((int)MANT_MASK);
    const __m512i inf = _mm512_set1_epi32((int)INF_BITS);
    const __m512i gate = _mm512_set1_epi32((int)th->gate);
    const __m512i g0 = _mm512_set1_epi32((int)th->gate_field[0]);
    const __m512i g1 = _mm512_set1_epi32((int)th->gate_field[1]);
    const __m512i g2 = _mm512_set1_epi32((int)th->gate_field[2]);
    const __m512i one = _mm512_set1_epi32(1);
    __m512i vmax = _mm512_setzero_si512(), vmin = _mm512_set1_epi32(-1);
    __m512d s0 = _mm512_loadu_pd(r->lane), s1 = _mm512_loadu_pd(r->lane + 8);

    for (size_t i = 0; i < n; i += 16) {
        __m512i a = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + i)), absmask);
        __m512i m1 = _mm512_sub_epi32(a, one);
        __mmask16 sn = _mm512_cmplt_epu32_mask(m1, mant);          /* fp32 subnormal */
        __m512i fld = _mm512_srli_epi32(a, 23);
        __mmask16 slow = sn | _mm512_cmpge_epu32_mask(a, gate) | _mm512_cmpeq_epi32_mask(fld, g0) |
                         _mm512_cmpeq_epi32_mask(fld, g1) | _mm512_cmpeq_epi32_mask(fld, g2);
        __mmask16 pw = _mm512_mask_testn_epi32_mask(_mm512_test_epi32_mask(a, a), a, mant);
        __m512i af = a;
        if (__builtin_expect((slow | pw) != 0, 0)) {
            if (slow) {
                if (!any_slow)
                    memset(slow_e, 0, sizeof slow_e);
                any_slow = 1;
                for (int k = 0; k < NTHR; k++)
                    lt_slow[k] += (unsigned)__builtin_popcount(
                        _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32((int)th->t[k])));
                __mmask16 fin = _mm512_cmplt_epu32_mask(a, inf);
                af = _mm512_maskz_mov_epi32(fin, a);
                slow_lanes(r, slow_e, x + i, (unsigned)(sn | (__mmask16)~fin));
            } else {
                if (!any_p2)
                    memset(p2, 0, sizeof p2);
                any_p2 = 1;
                pow2_lanes(p2, x + i, pw);
                if (pt)
                    count_pairs(pt, x + i);
                else
                    count_exponents(sub, x + i);
            }
        } else if (pt) {
            count_pairs(pt, x + i);
        } else {
            count_exponents(sub, x + i);
        }
        vmax = _mm512_max_epu32(vmax, af);
        vmin = _mm512_min_epu32(vmin, m1);
        __m512 p = _mm512_castsi512_ps(af);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(
                                   _mm512_extractf64x4_pd(_mm512_castps_pd(p), 1))));
    }

    uint32_t mx = (uint32_t)_mm512_reduce_max_epu32(vmax);
    uint32_t mn = (uint32_t)_mm512_reduce_min_epu32(vmin);
    if (mx > r->c.amax_bits)
        r->c.amax_bits = mx;
    if (mn < r->c.min_m1)
        r->c.min_m1 = mn;
    _mm512_storeu_pd(r->lane, s0);
    _mm512_storeu_pd(r->lane + 8, s1);
    uint32_t lo, hi;
    field_range(mn, mx, &lo, &hi);
    uint64_t fe[256];
    if (pt)
        fold_pairs(pt, lo, hi, fe);
    else
        fold_sub(sub, lo, hi, fe);
    /* GCC 12 emits no vzeroupper for this function (nor for the AVX2 one): returning with the upper
     * halves dirty made the caller's following SSE code (batchnorm, relu: -O2 x86-64) about 3x
     * slower on the Zen 4 VM, until the next vzeroupper */
    _mm256_zeroupper();
    vec_finish(r, th, fe, any_p2 ? p2 : NULL, slow_e, lt_slow, lo, hi, any_slow);
}
#else
void fp_hist_pair_release(void) {}
#endif
