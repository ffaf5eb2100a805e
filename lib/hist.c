/* hist.c — exponent histograms of float arrays (hist.h): one pass over the data gives the per-binade
 * counts, zero/NaN/Inf counts, amax, min nonzero, sum |x| and the five classes of every format.
 * Promise: the scalar, AVX2 and AVX-512 kernels (chosen at run time) give bit-identical histograms;
 * every class boundary comes from fp_format_info(), none is written here. */
#include "hist.h"
#include "hist_counts.h"
#include "error.h"
#include "numfmt.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HIST_X86 1
#endif

/* How it works. For a non-NaN float the absolute bit pattern a = bits & 0x7FFFFFFF orders like |x|,
 * so each class boundary becomes a threshold T on a, and each class is a difference of the counts
 * lt(T) = #{a < T} (zeros included; Inf and NaN never, as every T <= the bits of +Inf). Per format:
 *   t0: a < t0  <=>  |x| <= min_subnormal/2      t1: a < t1  <=>  |x| < min_normal
 *   t2: a < t2  <=>  |x| <= max_finite           t3: a < t3  <=>  |x| < overflow_at
 * underflow = lt0 - zeros, subnormal = lt1 - lt0, normal = lt2 - lt1, round_to_max = lt3 - lt2,
 * overflow = finite - lt3. The binades come from a histogram of the 8-bit exponent field (bins 1..254
 * are the normal binades); fp32 subnormals, Inf and NaN are rare and take a slow path.
 * The scalar kernel compares each value with the thresholds; the vector kernels compare only vectors
 * with a "slow" lane and take lt for the rest from the exponent histogram (see "fast path" below).
 * sum |x| is kept in SUM_LANES double partial sums, lane = index mod SUM_LANES from the start of the
 * call, reduced in a fixed tree: every kernel adds the same numbers in the same order. */

#define NTHR      FP_HIST_NTHR
#define SUM_LANES 16
#define SUBHISTS  8                          /* exponent sub-histograms (avoid store-forward chains) */
#define BLOCK     ((size_t)1 << 24)          /* elements per kernel call: 32-bit counters cannot wrap */
#define VEC_MIN_N 256                        /* below this, the scalar kernel is the fastest */

#define ABS_MASK  0x7FFFFFFFu
#define INF_BITS  0x7F800000u
#define MANT_MASK 0x007FFFFFu                /* also: a - 1 < MANT_MASK  <=>  a is an fp32 subnormal */
#define FIN_NZ_M1 0x7F7FFFFFu                /* a - 1 < this  <=>  a is finite and nonzero */

typedef struct {
    uint32_t t[NTHR];                        /* t[4*f + k], see above */
    uint32_t gate;                           /* vector kernels' slow lanes: a >= gate, ... */
    uint32_t gate_field[3];                  /* ... or exponent field one of these (set_gate) */
} thresholds_t;

/* Raw counts of one fp_hist_add call; turned into histogram terms by finish(). */
typedef struct {
    fp_hist_counts_t c;                      /* hist_counts.h */
    double lane[SUM_LANES];
} raw_t;

typedef void (*kernel_fn)(raw_t *r, const thresholds_t *th, const float *x, size_t n);

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fl(v * 2^-k), the correctly rounded product, Inf and subnormals included: a float multiply when
 * 2^-k is a normal float, else exact in double (v has 24 bits, |k| <= FP_HIST_LOG2_DIV_MAX) and one
 * rounding to float. */
static float scale_down(float v, int k)
{
    if (k >= -127 && k <= 126)
        return v * bits_float((uint32_t)(127 - k) << 23);
    return (float)ldexp((double)v, -k);
}

/* Threshold T with  a < T  <=>  |x| <= v  (v >= 0). */
static uint32_t thr_le(double v)
{
    if (v >= (double)FLT_MAX)
        return INF_BITS;
    float f = (float)v;
    if ((double)f > v)
        f = nextafterf(f, 0.0f);
    return float_bits(f) + 1;
}

/* Threshold T with  a < T  <=>  |x| < v  (v >= 0). */
static uint32_t thr_lt(double v)
{
    if (v > (double)FLT_MAX)
        return INF_BITS;
    float f = (float)v;
    if ((double)f < v)
        f = nextafterf(f, INFINITY);
    return float_bits(f);
}

static void set_gate(thresholds_t *th);

void fp_hist_thresholds(uint32_t t[FP_HIST_NTHR])
{
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        const fp_format_info_t *fi = fp_format_info((fp_format)f);
        t[4 * f + 0] = thr_le((double)fi->min_subnormal / 2.0);
        t[4 * f + 1] = thr_lt((double)fi->min_normal);
        t[4 * f + 2] = thr_le((double)fi->max_finite);
        t[4 * f + 3] = thr_lt((double)fi->overflow_at);
    }
}

static void make_thresholds(thresholds_t *th)
{
    fp_hist_thresholds(th->t);
    set_gate(th);
}

/* One value that is an fp32 subnormal, an Inf or a NaN (a = its absolute bits). */
static inline __attribute__((always_inline)) void special(raw_t *r, uint32_t u)
{
    uint32_t a = u & ABS_MASK;
    if (a > INF_BITS)
        r->c.nan++;
    else if (a == INF_BITS && (u >> 31))
        r->c.neg_inf++;
    else if (a == INF_BITS)
        r->c.pos_inf++;
    else if (a != 0)
        r->c.sub_binade[31 - __builtin_clz(a)]++;
}

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

/* The thresholds around 1.0: values in [lo, hi) fall below exactly the thresholds >= hi, and zeros
 * below all of them (every t[k] >= 1), so the scalar kernel counts those two kinds once each and
 * adds the counts to the thresholds at the end. */
static void middle_band(const thresholds_t *th, uint32_t *lo, uint32_t *hi)
{
    const uint32_t one = float_bits(1.0f);
    *lo = 0;
    *hi = INF_BITS;
    for (int k = 0; k < NTHR; k++) {
        if (th->t[k] <= one && th->t[k] > *lo)
            *lo = th->t[k];
        if (th->t[k] > one && th->t[k] < *hi)
            *hi = th->t[k];
    }
}

typedef struct {
    uint64_t lt[NTHR], mid, zeros;
    uint32_t amax, min_m1, lo, hi;
    double lane[SUM_LANES];
} scalar_state_t;

/* One value through the scalar kernel, all but its exponent-field count. */
static inline __attribute__((always_inline)) void scalar_step(scalar_state_t *s, raw_t *r,
                                                              const thresholds_t *th, uint32_t u, size_t i)
{
    uint32_t a = u & ABS_MASK;
    if ((a - s->lo < s->hi - s->lo) | (a == 0)) {    /* the common case, one predictable branch */
        s->mid += a != 0;
        s->zeros += a == 0;
    } else {
        _Pragma("GCC unroll 16")
        for (int k = 0; k < NTHR; k++)
            s->lt[k] += a < th->t[k];
    }
    if (a - 1 < s->min_m1)
        s->min_m1 = a - 1;
    if (a < INF_BITS) {
        if (a > s->amax)
            s->amax = a;
        s->lane[i % SUM_LANES] += (double)bits_float(a);
        if (a - 1 < MANT_MASK)
            special(r, u);
    } else {
        special(r, u);
    }
}

/* Any n, any start (the caller keeps x's index from the start of the call a multiple of 16). */
static void kernel_scalar(raw_t *r, const thresholds_t *th, const float *x, size_t n)
{
    scalar_state_t s;
    memcpy(s.lt, r->c.lt, sizeof s.lt);
    memcpy(s.lane, r->lane, sizeof s.lane);
    s.mid = s.zeros = 0;
    s.amax = r->c.amax_bits;
    s.min_m1 = r->c.min_m1;
    middle_band(th, &s.lo, &s.hi);
    size_t i = 0;
    if (n >= 256) {                                   /* long runs: 4 exponent sub-histograms */
        uint32_t sub[4][256];
        memset(sub, 0, sizeof sub);
        for (; i + 4 <= n; i += 4) {
            _Pragma("GCC unroll 4")
            for (size_t j = 0; j < 4; j++) {
                uint32_t u;
                memcpy(&u, &x[i + j], sizeof u);
                scalar_step(&s, r, th, u, i + j);
                sub[j][(u >> 23) & 0xFF]++;
            }
        }
        for (int j = 0; j < 4; j++)
            for (int b = 0; b < 256; b++)
                r->c.ehist[b] += sub[j][b];
    }
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        scalar_step(&s, r, th, u, i);
        r->c.ehist[(u >> 23) & 0xFF]++;
    }
    for (int k = 0; k < NTHR; k++)
        r->c.lt[k] = s.lt[k] + s.zeros + (th->t[k] >= s.hi ? s.mid : 0);   /* every t[k] > 0 */
    memcpy(r->lane, s.lane, sizeof s.lane);
    r->c.amax_bits = s.amax;
    r->c.min_m1 = s.min_m1;
}

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
static void set_gate(thresholds_t *th)
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
static void kernel_avx2(raw_t *r, const thresholds_t *th, const float *x, size_t n)
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

static void pair_release(void)
{
    free(pair_table);
    pair_table = NULL;
}

static uint32_t *pair_get(void)
{
    if (!pair_table)
        pair_table = calloc(2 * PAIR_KEYS, sizeof *pair_table);   /* NULL: the kernel uses sub */
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
static void kernel_avx512(raw_t *r, const thresholds_t *th, const float *x, size_t n)
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
    vec_finish(r, th, fe, any_p2 ? p2 : NULL, slow_e, lt_slow, lo, hi, any_slow);
}
#else
static void pair_release(void) {}
#endif

/* Kernel numbers for fp_hist_add_kernel (internal; tests and the benchmark use it). */
enum { KERNEL_BEST = -1, KERNEL_SCALAR = 0, KERNEL_AVX2 = 1, KERNEL_AVX512 = 2 };

static kernel_fn kernel_get(int kernel)
{
    switch (kernel) {
    case KERNEL_SCALAR:
        return kernel_scalar;
#ifdef HIST_X86
    case KERNEL_AVX2:
        return __builtin_cpu_supports("avx2") ? kernel_avx2 : NULL;
    case KERNEL_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2") ? kernel_avx512 : NULL;
    case KERNEL_BEST:
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2"))
            return kernel_avx512;
        if (__builtin_cpu_supports("avx2"))
            return kernel_avx2;
        return kernel_scalar;
#else
    case KERNEL_BEST:
        return kernel_scalar;
#endif
    default:
        return NULL;
    }
}

/* hist_counts.h: the one fold of raw counts into a histogram (CPU and CUDA kernels). */
void fp_hist_fold(fp_hist_t *h, const fp_hist_counts_t *c, uint64_t n, int k, double sum_abs)
{
    uint64_t nsub = 0;
    for (int p = 0; p < 23; p++) {
        if (c->sub_binade[p])                         /* m * 2^-149 with leading bit p: binade p-149 */
            h->binade[p - k] += c->sub_binade[p];
        nsub += c->sub_binade[p];
    }
    for (int ef = 1; ef <= 254; ef++)
        if (c->ehist[ef])
            h->binade[ef - 127 - k - FP_HIST_EXP_MIN] += c->ehist[ef];
    uint64_t zero = c->ehist[0] - nsub;
    uint64_t finite = n - c->nan - c->pos_inf - c->neg_inf;
    h->count += n;
    h->zero += zero;
    h->nan += c->nan;
    h->pos_inf += c->pos_inf;
    h->neg_inf += c->neg_inf;
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        const uint64_t *lt = &c->lt[4 * f];
        h->cls[f][FP_CLASS_UNDERFLOW] += lt[0] - zero;
        h->cls[f][FP_CLASS_SUBNORMAL] += lt[1] - lt[0];
        h->cls[f][FP_CLASS_NORMAL] += lt[2] - lt[1];
        h->cls[f][FP_CLASS_ROUND_TO_MAX] += lt[3] - lt[2];
        h->cls[f][FP_CLASS_OVERFLOW] += finite - lt[3];
    }
    float amax = scale_down(bits_float(c->amax_bits), k);
    if (amax > h->amax)
        h->amax = amax;
    if (c->min_m1 < FIN_NZ_M1) {
        float mn = scale_down(bits_float(c->min_m1 + 1), k);
        if (h->min_nonzero == 0.0f || mn < h->min_nonzero)
            h->min_nonzero = mn;
    }
    h->sum_abs += sum_abs;
}

/* Add one call's raw counts to h, the values being x * 2^-k (k != 0 only when every finite nonzero
 * x * 2^-k is exact: see scaled_exact). */
static void finish(fp_hist_t *h, const raw_t *r, size_t n, int k)
{
    double l[SUM_LANES];
    memcpy(l, r->lane, sizeof l);
    for (int w = SUM_LANES / 2; w >= 1; w /= 2)
        for (int i = 0; i < w; i++)
            l[i] += l[i + w];
    fp_hist_fold(h, &r->c, n, k, k ? ldexp(l[0], -k) : l[0]);   /* exact: every lane sum scales by 2^-k */
}

/* Raw counts of x[0..n) (index 0 = lane 0) against th, with vec for whole 16-value groups. */
static void run_kernels(raw_t *r, const thresholds_t *th, const float *x, size_t n, kernel_fn vec)
{
    size_t done = 0;
    while (done < n) {
        size_t len = n - done < BLOCK ? n - done : BLOCK;
        size_t nv = vec == kernel_scalar ? 0 : len & ~(size_t)15;
        if (nv)
            vec(r, th, x + done, nv);
        if (len > nv)
            kernel_scalar(r, th, x + done + nv, len - nv);   /* done + nv is a multiple of 16 */
        done += len;
    }
}

static void raw_init(raw_t *r)
{
    memset(r, 0, sizeof *r);
    r->c.min_m1 = UINT32_MAX;
}

static int hist_add(fp_hist_t *h, const float *x, size_t n, kernel_fn vec)
{
    thresholds_t th;
    raw_t r;
    make_thresholds(&th);
    raw_init(&r);
    run_kernels(&r, &th, x, n, vec);
    finish(h, &r, n, 0);
    return FP_OK;
}

/* ---- scaled inputs: the histogram of y = fl(x * 2^-k)
 * |x| -> |y| is monotonic on absolute bit patterns, so each threshold T on a_y becomes the least a_x
 * with g(a_x) >= T (scale_thresholds), and the class counts need no multiply at all (for k > 0 a T
 * at or below FLT_MIN's bits becomes 1, "zeros only", which is what it counts when the fast finish
 * applies; that keeps rounding-made thresholds out of the vector kernels' gate). The rest —
 * binades shifted by -k, zeros, Inf, amax, min, sum |x| scaled by 2^-k — holds when every finite
 * nonzero y is x * 2^-k exactly; scaled_exact checks that after the pass from amax and min nonzero
 * (k < 0: amax * 2^-k <= FLT_MAX; k > 0: also min * 2^-k >= FLT_MIN, so no y is an fp32 subnormal —
 * conservative: an exact subnormal quotient also falls back). When it fails, the call is redone on
 * x * 2^-k computed in chunks of HSCALE_CHUNK floats (the fallback: a second pass, exact by
 * construction). */
#define HSCALE_CHUNK 4096                    /* a multiple of 16: the sum lanes stay aligned */

/* a_y for a_x (both absolute bit patterns; a_x <= INF_BITS) */
static uint32_t scaled_abs_bits(uint32_t a, int k)
{
    return float_bits(fabsf(scale_down(bits_float(a), k)));
}

static void scale_thresholds(thresholds_t *th, int k)
{
    for (int j = 0; j < NTHR; j++) {
        const uint32_t t = th->t[j];
        if (k > 0 && t <= float_bits(FLT_MIN)) {
            th->t[j] = 1;          /* the fast finish needs every nonzero |y| >= FLT_MIN: only zeros below */
            continue;
        }
        /* the exact case first: T's value times 2^k, checked; otherwise a binary search */
        int64_t c = (int64_t)t + (int64_t)k * ((int64_t)1 << 23);
        if (c >= 1 && c <= INF_BITS && scaled_abs_bits((uint32_t)c, k) >= t &&
            scaled_abs_bits((uint32_t)c - 1, k) < t) {
            th->t[j] = (uint32_t)c;
            continue;
        }
        uint32_t lo = 0, hi = INF_BITS;                /* g(INF_BITS) = INF_BITS >= every T */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (scaled_abs_bits(mid, k) >= t)
                hi = mid;
            else
                lo = mid + 1;
        }
        th->t[j] = lo;
    }
    set_gate(th);
}

static int scaled_exact(const raw_t *r, int k)
{
    if (r->c.amax_bits && ldexp((double)bits_float(r->c.amax_bits), -k) > (double)FLT_MAX)
        return 0;
    if (k > 0 && r->c.min_m1 < FIN_NZ_M1 && ldexp((double)bits_float(r->c.min_m1 + 1), -k) < (double)FLT_MIN)
        return 0;
    return 1;
}

static int hist_add_scaled(fp_hist_t *h, const float *x, size_t n, int k, kernel_fn vec)
{
    if (k == 0)
        return hist_add(h, x, n, vec);
    thresholds_t th;
    raw_t r;
    make_thresholds(&th);
    scale_thresholds(&th, k);
    raw_init(&r);
    run_kernels(&r, &th, x, n, vec);
    if (scaled_exact(&r, k)) {
        finish(h, &r, n, k);
        return FP_OK;
    }
    make_thresholds(&th);                              /* fallback: multiply, then as fp_hist_add */
    raw_init(&r);
    float buf[HSCALE_CHUNK];
    for (size_t done = 0; done < n;) {
        size_t len = n - done < HSCALE_CHUNK ? n - done : HSCALE_CHUNK;
        if (k >= -127 && k <= 126) {
            const float m = bits_float((uint32_t)(127 - k) << 23);    /* 2^-k, as in scale_down */
            for (size_t i = 0; i < len; i++)
                buf[i] = x[done + i] * m;
        } else {
            for (size_t i = 0; i < len; i++)
                buf[i] = scale_down(x[done + i], k);
        }
        run_kernels(&r, &th, buf, len, vec);
        done += len;
    }
    finish(h, &r, n, 0);
    return FP_OK;
}

static int scaled_args(const fp_hist_t *h, const float *x, size_t n, int log2_div)
{
    if (!h || (!x && n > 0))
        return fp_fail(FP_EINVAL, "fp_hist_add_scaled: %s is NULL", h ? "array" : "histogram");
    if (log2_div < -FP_HIST_LOG2_DIV_MAX || log2_div > FP_HIST_LOG2_DIV_MAX)
        return fp_fail(FP_EINVAL, "fp_hist_add_scaled: log2_div %d outside [-%d, %d]", log2_div,
                       FP_HIST_LOG2_DIV_MAX, FP_HIST_LOG2_DIV_MAX);
    return FP_OK;
}

int fp_hist_add_scaled(fp_hist_t *h, const float *x, size_t n, int log2_div)
{
    int rc = scaled_args(h, x, n, log2_div);
    if (rc != FP_OK || n == 0)
        return rc;
    return hist_add_scaled(h, x, n, log2_div, n < VEC_MIN_N ? kernel_scalar : kernel_get(KERNEL_BEST));
}

int fp_hist_add_scaled_kernel(fp_hist_t *h, const float *x, size_t n, int log2_div, int kernel)
{
    int rc = scaled_args(h, x, n, log2_div);
    if (rc != FP_OK)
        return rc;
    kernel_fn kf = kernel_get(kernel);
    if (!kf)
        return fp_fail(FP_EUNAVAIL, "fp_hist_add_scaled: kernel %d is not available on this CPU", kernel);
    if (n == 0)
        return FP_OK;
    return hist_add_scaled(h, x, n, log2_div, kf);
}

/* fp_hist_add with a chosen kernel (see hist.h); unlike fp_hist_add, no small-n shortcut. */
int fp_hist_add_kernel(fp_hist_t *h, const float *x, size_t n, int kernel)
{
    if (!h || (!x && n > 0))
        return fp_fail(FP_EINVAL, "fp_hist_add: %s is NULL", h ? "array" : "histogram");
    kernel_fn k = kernel_get(kernel);
    if (!k)
        return fp_fail(FP_EUNAVAIL, "fp_hist_add: kernel %d is not available on this CPU", kernel);
    if (n == 0)
        return FP_OK;
    return hist_add(h, x, n, k);
}

int fp_hist_add(fp_hist_t *h, const float *x, size_t n)
{
    if (!h || (!x && n > 0))
        return fp_fail(FP_EINVAL, "fp_hist_add: %s is NULL", h ? "array" : "histogram");
    if (n == 0)
        return FP_OK;
    return hist_add(h, x, n, n < VEC_MIN_N ? kernel_scalar : kernel_get(KERNEL_BEST));
}

void fp_hist_init(fp_hist_t *h)
{
    if (h)
        memset(h, 0, sizeof *h);
}

void fp_hist_merge(fp_hist_t *dst, const fp_hist_t *src)
{
    if (!dst || !src)
        return;
    dst->count += src->count;
    dst->zero += src->zero;
    dst->nan += src->nan;
    dst->pos_inf += src->pos_inf;
    dst->neg_inf += src->neg_inf;
    for (int i = 0; i < FP_HIST_BINADES; i++)
        dst->binade[i] += src->binade[i];
    for (int f = 0; f < FP_FMT_COUNT; f++)
        for (int c = 0; c < FP_CLASS_COUNT; c++)
            dst->cls[f][c] += src->cls[f][c];
    if (src->amax > dst->amax)
        dst->amax = src->amax;
    if (src->min_nonzero != 0.0f && (dst->min_nonzero == 0.0f || src->min_nonzero < dst->min_nonzero))
        dst->min_nonzero = src->min_nonzero;
    dst->sum_abs += src->sum_abs;
}

uint64_t fp_hist_finite_nonzero(const fp_hist_t *h)
{
    uint64_t s = 0;
    if (!h)
        return 0;
    for (int i = 0; i < FP_HIST_BINADES; i++)
        s += h->binade[i];
    return s;
}

double fp_hist_mean_abs(const fp_hist_t *h)
{
    if (!h)
        return 0.0;
    uint64_t finite = h->zero + fp_hist_finite_nonzero(h);
    return finite ? h->sum_abs / (double)finite : 0.0;
}

const char *fp_value_class_name(fp_value_class c)
{
    switch (c) {
    case FP_CLASS_NORMAL: return "normal";
    case FP_CLASS_SUBNORMAL: return "subnormal";
    case FP_CLASS_UNDERFLOW: return "underflow";
    case FP_CLASS_ROUND_TO_MAX: return "round_to_max";
    case FP_CLASS_OVERFLOW: return "overflow";
    default: return "unknown";
    }
}

/* ---------------------------------------------------------------- 16-bit inputs
 * A count per magnitude pattern q = bits & 0x7FFF (two interleaved tables: neighbouring equal values
 * do not chain on one counter), then folded. Widening is monotonic on magnitude patterns, so each
 * threshold T on fp32 bits becomes a first pattern q_T (widen(q) >= T  <=>  q >= q_T) and
 * #{a < T} is a prefix count; binades are whole exponent fields (and, for subnormal patterns, the
 * leading mantissa bit); sum |x| is, per exponent field e, an exact integer sum of count * significand
 * scaled by 2^(e - bias - mbits). -Inf is told from +Inf by a second pass only when an Inf was seen. */

#define H16_N       32768u
#define H16_MIN_N   65536u                   /* below this the fold costs more than it saves */
#define H16_BLOCK   ((size_t)1 << 30)        /* per fold: 32-bit counters cannot wrap */
#define H16_CHUNK   2048u                    /* small path: widened chunk, a multiple of 16 */

typedef struct {
    int mbits, ebias;                        /* fp16: 10, 15; bf16: 7, 127 */
    uint32_t inf;                            /* magnitude pattern of Inf */
    int bf;
} h16_fmt_t;

static const h16_fmt_t H16_F16 = {10, 15, 0x7C00u, 0};
static const h16_fmt_t H16_BF16 = {7, 127, 0x7F80u, 1};

static _Thread_local uint32_t *h16_table;   /* [2][H16_N], all zero between calls */

void fp_hist_thread_release(void)
{
    free(h16_table);
    h16_table = NULL;
    pair_release();
}

static uint32_t h16_bits(const h16_fmt_t *f, uint32_t q)
{
    return f->bf ? q << 16 : float_bits(fp_f16_to_f32((uint16_t)q));
}

static float h16_value(const h16_fmt_t *f, uint32_t q) { return bits_float(h16_bits(f, q)); }

static void h16_count(uint32_t *t, const uint16_t *x, size_t n)
{
    uint32_t *t0 = t, *t1 = t + H16_N;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint64_t q;
        memcpy(&q, x + i, sizeof q);
        t0[q & 0x7FFF]++;
        t1[(q >> 16) & 0x7FFF]++;
        t0[(q >> 32) & 0x7FFF]++;
        t1[(q >> 48) & 0x7FFF]++;
    }
    for (; i < n; i++)
        t0[x[i] & 0x7FFF]++;
}

/* Folds the tables (n values, neg_inf of them -Inf) into h and clears them. */
static void h16_fold(fp_hist_t *h, uint32_t *t, const h16_fmt_t *f, uint64_t n, uint64_t neg_inf)
{
    const uint32_t *t1 = t + H16_N;
    const int mb = f->mbits;
    const uint32_t per = 1u << mb, nfields = f->inf >> mb;   /* finite exponent fields 0 .. nfields-1 */
    uint64_t field[256];
    uint32_t amax_q = 0, min_q = 0;
    double sum = 0;
    for (uint32_t e = 0; e < nfields; e++) {
        uint64_t c = 0, s = 0;
        const uint32_t base = e << mb, lead = e ? per : 0;
        for (uint32_t m = 0; m < per; m++) {
            uint64_t k = (uint64_t)t[base + m] + t1[base + m];
            c += k;
            s += k * (lead + m);                              /* < 2^32 * 2^12 * 2^10: exact */
        }
        field[e] = c;
        if (s)
            sum += ldexp((double)s, (e ? (int)e : 1) - f->ebias - mb);
    }
    /* amax, min_nonzero: the highest / lowest nonzero finite pattern above 0 */
    const uint64_t zero = (uint64_t)t[0] + t1[0];
    for (uint32_t e = nfields; e-- > 0 && !amax_q;)
        if (field[e] > (e ? 0 : zero))
            for (uint32_t q = (e << mb) + per - 1; q >= (e ? e << mb : 1); q--)
                if (t[q] || t1[q]) {
                    amax_q = q;
                    break;
                }
    for (uint32_t e = 0; e < nfields && amax_q && !min_q; e++)
        if (field[e] > (e ? 0 : zero))
            for (uint32_t q = e ? e << mb : 1; q < (e << mb) + per; q++)
                if (t[q] || t1[q]) {
                    min_q = q;
                    break;
                }
    uint64_t inf = (uint64_t)t[f->inf] + t1[f->inf], nan = 0;
    for (uint32_t q = f->inf + 1; q < H16_N; q++)
        nan += (uint64_t)t[q] + t1[q];
    /* binades */
    for (uint32_t e = 1; e < nfields; e++)
        h->binade[(int)e - f->ebias - FP_HIST_EXP_MIN] += field[e];
    for (uint32_t m = 1; m < per; m++)
        h->binade[(31 - __builtin_clz(m)) - mb - f->ebias + 1 - FP_HIST_EXP_MIN] += (uint64_t)t[m] + t1[m];
    /* classes: #{a < T} as prefix counts up to q_T */
    thresholds_t th;
    make_thresholds(&th);
    uint64_t lt[NTHR];
    for (int k = 0; k < NTHR; k++) {
        uint32_t lo = 0, hi = f->inf;                        /* widen(inf) = INF_BITS >= every T */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (h16_bits(f, mid) >= th.t[k])
                hi = mid;
            else
                lo = mid + 1;
        }
        uint32_t e = lo >> mb;
        uint64_t c = 0;
        for (uint32_t j = 0; j < e; j++)
            c += field[j];
        for (uint32_t q = e << mb; q < lo; q++)
            c += (uint64_t)t[q] + t1[q];
        lt[k] = c;
    }
    uint64_t finite = n - nan - inf;
    h->count += n;
    h->zero += zero;
    h->nan += nan;
    h->pos_inf += inf - neg_inf;
    h->neg_inf += neg_inf;
    for (int fm = 0; fm < FP_FMT_COUNT; fm++) {
        const uint64_t *l = &lt[4 * fm];
        h->cls[fm][FP_CLASS_UNDERFLOW] += l[0] - zero;
        h->cls[fm][FP_CLASS_SUBNORMAL] += l[1] - l[0];
        h->cls[fm][FP_CLASS_NORMAL] += l[2] - l[1];
        h->cls[fm][FP_CLASS_ROUND_TO_MAX] += l[3] - l[2];
        h->cls[fm][FP_CLASS_OVERFLOW] += finite - l[3];
    }
    if (amax_q) {
        float a = h16_value(f, amax_q), mn = h16_value(f, min_q);
        if (a > h->amax)
            h->amax = a;
        if (h->min_nonzero == 0.0f || mn < h->min_nonzero)
            h->min_nonzero = mn;
    }
    h->sum_abs += sum;
    memset(t, 0, 2 * H16_N * sizeof *t);
}

/* Small n: widened in chunks through the fp32 kernels, one finish for the whole call. */
static void h16_small(fp_hist_t *h, const uint16_t *x, size_t n, const h16_fmt_t *f)
{
    thresholds_t th;
    raw_t r;
    make_thresholds(&th);
    raw_init(&r);
    kernel_fn vec = n < VEC_MIN_N ? kernel_scalar : kernel_get(KERNEL_BEST);
    float buf[H16_CHUNK];
    for (size_t done = 0; done < n;) {
        size_t len = n - done < H16_CHUNK ? n - done : H16_CHUNK;
        if (f->bf)
            fp_bf16_to_f32_array(buf, x + done, len);
        else
            fp_f16_to_f32_array(buf, x + done, len);
        size_t nv = vec == kernel_scalar ? 0 : len & ~(size_t)15;
        if (nv)
            vec(&r, &th, buf, nv);
        if (len > nv)
            kernel_scalar(&r, &th, buf + nv, len - nv);
        done += len;
    }
    finish(h, &r, n, 0);
}

/* ---- fp16 inputs, AVX-512 (BW): 32 values per step, in the 16-bit domain
 * Each fp32 threshold T becomes a first fp16 magnitude pattern q_T (h16_thresholds), field e = q_T >> 10,
 * m = q_T & 0x3FF. As in the fp32 kernels, a "fast" step (no slow lane) counts only exponent fields
 * (one PEXT per four values, one increment per pair of fields into a 4 KiB table per sub-table) and
 * its nonzero exact powers of two; lt follows: m == 0 a prefix of fields, m == 1 that plus the
 * powers of two of field e, e == 0 the zeros only (fast lanes hold no nonzero subnormal). Slow lanes:
 * nonzero fp16 subnormals, Inf / NaN, fields of thresholds with m >= 2 (a 32-entry vpermw lookup);
 * a step with one is compared with every q_T and its fields counted one by one. sum |x| goes through
 * vcvtph2ps into the same SUM_LANES double lanes, in the same order, as fp_hist_add on the widened
 * array: the whole histogram is that call's, bit for bit. */
#define F16_SUBT 4                           /* pair sub-tables (increments on one counter chain less) */

typedef struct {
    uint16_t qt[NTHR];                       /* q < qt[k]  <=>  widen(q) < t[k] */
    uint16_t slow_field[32];                 /* 0xFFFF: every lane of this field is slow */
} f16_thr_t;

#ifdef HIST_X86
static void f16_thresholds(const thresholds_t *th, f16_thr_t *ft)
{
    memset(ft->slow_field, 0, sizeof ft->slow_field);
    ft->slow_field[31] = 0xFFFF;                             /* Inf, NaN */
    for (int k = 0; k < NTHR; k++) {
        uint32_t lo = 0, hi = 0x7C00;                        /* widen(0x7C00) = INF_BITS >= every T */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (float_bits(fp_f16_to_f32((uint16_t)mid)) >= th->t[k])
                hi = mid;
            else
                lo = mid + 1;
        }
        ft->qt[k] = (uint16_t)lo;
        if ((lo >> 10) >= 1 && (lo & 0x3FF) >= 2)
            ft->slow_field[lo >> 10] = 0xFFFF;
    }
}

/* n a multiple of 32, n <= BLOCK; adds to r in fp32 terms (as kernel_avx512 on the widened values). */
__attribute__((target("avx512f,avx512bw,popcnt,bmi2,f16c")))
static void kernel_f16_avx512(raw_t *r, const thresholds_t *th, const f16_thr_t *ft, const uint16_t *x, size_t n)
{
    uint32_t pt[F16_SUBT][1024], p2[32], slow_e[32], sub16[10];
    uint64_t lt_slow[NTHR];
    memset(pt, 0, sizeof pt);
    memset(p2, 0, sizeof p2);
    memset(slow_e, 0, sizeof slow_e);
    memset(sub16, 0, sizeof sub16);
    memset(lt_slow, 0, sizeof lt_slow);
    uint64_t nan = 0, pinf = 0, ninf = 0;
    const __m512i absmask = _mm512_set1_epi16(0x7FFF);
    const __m512i mant = _mm512_set1_epi16(0x3FF);
    const __m512i inf = _mm512_set1_epi16(0x7C00);
    const __m512i one = _mm512_set1_epi16(1);
    const __m512i lut = _mm512_loadu_si512((const void *)ft->slow_field);
    __m512i vmax = _mm512_setzero_si512(), vmin = _mm512_set1_epi16(-1);
    __m512d s0 = _mm512_loadu_pd(r->lane), s1 = _mm512_loadu_pd(r->lane + 8);

    for (size_t i = 0; i < n; i += 32) {
        const uint16_t *xi = x + i;
        __m512i a = _mm512_and_si512(_mm512_loadu_si512((const void *)xi), absmask);
        __m512i m1 = _mm512_sub_epi16(a, one);
        __mmask32 sn = _mm512_cmplt_epu16_mask(m1, mant);    /* nonzero subnormal */
        __m512i sf = _mm512_permutexvar_epi16(_mm512_srli_epi16(a, 10), lut);
        __mmask32 slow = sn | _mm512_test_epi16_mask(sf, sf);
        __mmask32 pw = _mm512_mask_testn_epi16_mask(_mm512_test_epi16_mask(a, a), a, mant);
        __m512i af = a;
        if (__builtin_expect((slow | pw) != 0, 0)) {
            if (slow) {
                for (int k = 0; k < NTHR; k++)
                    lt_slow[k] += (unsigned)__builtin_popcount(
                        (unsigned)_mm512_cmplt_epu16_mask(a, _mm512_set1_epi16((short)ft->qt[k])));
                __mmask32 fin = _mm512_cmplt_epu16_mask(a, inf);
                af = _mm512_maskz_mov_epi16(fin, a);
                _Pragma("GCC unroll 32")
                for (int j = 0; j < 32; j++)
                    slow_e[(xi[j] & 0x7FFF) >> 10]++;
                uint32_t sp = (uint32_t)(sn | (__mmask32)~fin);
                while (sp) {
                    unsigned j = (unsigned)__builtin_ctz(sp);
                    sp &= sp - 1;
                    uint32_t q = xi[j] & 0x7FFFu;
                    if (q > 0x7C00u)
                        nan++;
                    else if (q == 0x7C00u && (xi[j] >> 15))
                        ninf++;
                    else if (q == 0x7C00u)
                        pinf++;
                    else
                        sub16[31 - __builtin_clz(q)]++;
                }
                goto sums;
            }
            uint32_t m = (uint32_t)pw;
            while (m) {
                unsigned j = (unsigned)__builtin_ctz(m);
                m &= m - 1;
                p2[(xi[j] & 0x7FFF) >> 10]++;
            }
        }
        _Pragma("GCC unroll 8")
        for (int j = 0; j < 8; j++) {
            uint64_t q;
            memcpy(&q, xi + 4 * j, sizeof q);
            uint32_t k = (uint32_t)_pext_u64(q, 0x7C007C007C007C00ull);
            pt[(2 * j) % F16_SUBT][k & 0x3FF]++;
            pt[(2 * j + 1) % F16_SUBT][k >> 10]++;
        }
    sums:
        vmax = _mm512_max_epu16(vmax, af);
        vmin = _mm512_min_epu16(vmin, m1);
        __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(af));
        __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(af, 1));
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(lo)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(lo), 1))));
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(hi)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(hi), 1))));
    }
    _mm512_storeu_pd(r->lane, s0);
    _mm512_storeu_pd(r->lane + 8, s1);

    uint16_t mx16[32], mn16[32];
    _mm512_storeu_si512((void *)mx16, vmax);
    _mm512_storeu_si512((void *)mn16, vmin);
    uint32_t mx = 0, mn = 0xFFFF;
    for (int j = 0; j < 32; j++) {
        mx = mx16[j] > mx ? mx16[j] : mx;
        mn = mn16[j] < mn ? mn16[j] : mn;
    }
    uint32_t amax = float_bits(fp_f16_to_f32((uint16_t)mx));
    if (amax > r->c.amax_bits)
        r->c.amax_bits = amax;
    uint32_t min_m1 = mn == 0xFFFF ? UINT32_MAX : float_bits(fp_f16_to_f32((uint16_t)(mn + 1))) - 1;
    if (min_m1 < r->c.min_m1)
        r->c.min_m1 = min_m1;

    /* fast fields from the pair tables (field of the first value | second << 5) */
    uint64_t fe[32];
    memset(fe, 0, sizeof fe);
    for (int t = 0; t < F16_SUBT; t++)
        for (uint32_t k = 0; k < 1024; k++)
            if (pt[t][k]) {
                fe[k & 31] += pt[t][k];
                fe[k >> 5] += pt[t][k];
            }
    for (int k = 0; k < NTHR; k++) {
        uint32_t e = ft->qt[k] >> 10, m = ft->qt[k] & 0x3FF;
        uint64_t c = fe[0];                                  /* fast field-0 lanes are zeros */
        for (uint32_t b = 1; b < e; b++)
            c += fe[b];
        if (e >= 1 && m == 1)
            c += p2[e];
        r->c.lt[k] += c + lt_slow[k];                          /* m >= 2: a slow field, no fast value */
    }
    uint64_t nsub = 0;
    for (int p = 0; p < 10; p++) {
        r->c.ehist[p - 24 + 127] += sub16[p];                  /* 2^(p-24) <= |x| < 2^(p-23) */
        nsub += sub16[p];
    }
    r->c.ehist[0] += fe[0] + slow_e[0] - nsub;                 /* zeros */
    for (int e = 1; e < 31; e++)
        r->c.ehist[e - 15 + 127] += fe[e] + slow_e[e];
    r->c.nan += nan;
    r->c.pos_inf += pinf;
    r->c.neg_inf += ninf;
    (void)th;
}
#endif

#ifdef HIST_X86
static int f16_kernel_ok(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c");
}

/* fp16, any n, through kernel_f16_avx512 in blocks of BLOCK (32-bit counters cannot wrap), the
 * tail (< 32 values, at an index that is a multiple of 32) widened and given to the scalar kernel:
 * fp_hist_add's histogram of the widened array, bit for bit, sum_abs included. */
static void h16_avx512(fp_hist_t *h, const uint16_t *x, size_t n)
{
    thresholds_t th;
    f16_thr_t ft;
    raw_t r;
    make_thresholds(&th);
    f16_thresholds(&th, &ft);
    raw_init(&r);
    for (size_t done = 0; done < n;) {
        size_t len = n - done < BLOCK ? n - done : BLOCK;
        size_t nv = len & ~(size_t)31;
        if (nv)
            kernel_f16_avx512(&r, &th, &ft, x + done, nv);
        if (len > nv) {
            float buf[32];
            for (size_t i = 0; i < len - nv; i++)
                buf[i] = fp_f16_to_f32(x[done + nv + i]);
            kernel_scalar(&r, &th, buf, len - nv);
        }
        done += len;
    }
    finish(h, &r, n, 0);
}
#endif

/* The count-table path (n >= H16_MIN_N), the reference for h16_avx512. */
static int h16_table_add(fp_hist_t *h, const uint16_t *x, size_t n, const h16_fmt_t *f)
{
    if (!h16_table && !(h16_table = calloc(2 * H16_N, sizeof *h16_table)))
        return fp_fail(FP_ENOMEM, "fp_hist_add_%s: out of memory for the count table", f->bf ? "bf16" : "f16");
    uint32_t *t = h16_table;
    for (size_t done = 0; done < n;) {
        size_t len = n - done < H16_BLOCK ? n - done : H16_BLOCK;
        h16_count(t, x + done, len);
        uint64_t neg_inf = 0;
        if (t[f->inf] || t[H16_N + f->inf]) {
            const uint16_t ninf = (uint16_t)(0x8000u | f->inf);
            for (size_t i = 0; i < len; i++)
                neg_inf += x[done + i] == ninf;
        }
        h16_fold(h, t, f, len, neg_inf);
        done += len;
    }
    return FP_OK;
}

/* kernel: KERNEL_SCALAR the reference (widened chunks below H16_MIN_N, the count table above);
 * KERNEL_AVX512 kernel_f16_avx512 for fp16 with n >= VEC_MIN_N (none for bf16: FP_EUNAVAIL);
 * KERNEL_BEST the latter where the CPU has it, else the reference. */
static int hist_add16(fp_hist_t *h, const uint16_t *x, size_t n, const h16_fmt_t *f, int kernel)
{
    const char *name = f->bf ? "bf16" : "f16";
    if (!h || (!x && n > 0))
        return fp_fail(FP_EINVAL, "fp_hist_add_%s: %s is NULL", name, h ? "array" : "histogram");
    if (kernel != KERNEL_SCALAR && kernel != KERNEL_AVX512 && kernel != KERNEL_BEST)
        return fp_fail(FP_EINVAL, "fp_hist_add_%s: no kernel %d for 16-bit inputs", name, kernel);
    int fast = 0;
#ifdef HIST_X86
    fast = kernel != KERNEL_SCALAR && !f->bf && f16_kernel_ok();
#endif
    if (kernel == KERNEL_AVX512 && !fast)
        return fp_fail(FP_EUNAVAIL, "fp_hist_add_%s: no AVX-512 kernel for it on this CPU", name);
    if (n == 0)
        return FP_OK;
#ifdef HIST_X86
    if (fast && n >= VEC_MIN_N) {
        h16_avx512(h, x, n);
        return FP_OK;
    }
#endif
    if (n < H16_MIN_N) {
        h16_small(h, x, n, f);
        return FP_OK;
    }
    return h16_table_add(h, x, n, f);
}

int fp_hist_add_f16(fp_hist_t *h, const uint16_t *x, size_t n) { return hist_add16(h, x, n, &H16_F16, KERNEL_BEST); }
int fp_hist_add_bf16(fp_hist_t *h, const uint16_t *x, size_t n) { return hist_add16(h, x, n, &H16_BF16, KERNEL_BEST); }

int fp_hist_add16_kernel(fp_hist_t *h, const uint16_t *x, size_t n, int bf, int kernel)
{
    return hist_add16(h, x, n, bf ? &H16_BF16 : &H16_F16, kernel);
}
