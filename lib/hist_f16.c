/* hist_f16.c — exponent histograms of 16-bit arrays (fp_hist_add_f16, fp_hist_add_bf16,
 * fp_hist_add16_kernel; hist.h): the count-table reference, the small-n path through the fp32
 * kernels, and the fp16 AVX-512 kernel in the 16-bit domain.
 * Promise: counts, amax and min_nonzero those of fp_hist_add on the widened array (sum_abs up to
 * rounding on the count table); the AVX-512 kernel's histogram is that call's bit for bit.
 * The kernel carries a target attribute and runs only when the CPU has its features (f16_kernel_ok). */
#include "hist_internal.h"
#include "error.h"
#include "numfmt.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef HIST_X86
#include <immintrin.h>
#endif

/* The count table: a count per magnitude pattern q = bits & 0x7FFF (two interleaved tables:
 * neighbouring equal values do not chain on one counter), then folded. Widening is monotonic on
 * magnitude patterns, so each threshold T on fp32 bits becomes a first pattern q_T (widen(q) >= T  <=>
 * q >= q_T) and #{a < T} is a prefix count; binades are whole exponent fields (and, for
 * subnormal patterns, the leading mantissa bit); sum |x| is, per exponent field e, an exact integer
 * sum of count * significand scaled by 2^(e - bias - mbits). -Inf is told from +Inf by a second
 * pass only when an Inf was seen. */

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

void fp_hist_h16_release(void)
{
    free(h16_table);
    h16_table = NULL;
}

static uint32_t h16_bits(const h16_fmt_t *f, uint32_t q)
{
    return f->bf ? q << 16 : fp_f32_bits(fp_f16_to_f32((uint16_t)q));
}

static float h16_value(const h16_fmt_t *f, uint32_t q) { return fp_f32_from_bits(h16_bits(f, q)); }

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
    fp_hist_make_thresholds(&th);
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
    fp_hist_make_thresholds(&th);
    fp_hist_raw_init(&r);
    kernel_fn vec = n < VEC_MIN_N ? fp_hist_kernel_scalar : fp_hist_kernel_get(KERNEL_BEST);
    float buf[H16_CHUNK];
    for (size_t done = 0; done < n;) {
        size_t len = n - done < H16_CHUNK ? n - done : H16_CHUNK;
        if (f->bf)
            fp_bf16_to_f32_array(buf, x + done, len);
        else
            fp_f16_to_f32_array(buf, x + done, len);
        size_t nv = vec == fp_hist_kernel_scalar ? 0 : len & ~(size_t)15;
        if (nv)
            vec(&r, &th, buf, nv);
        if (len > nv)
            fp_hist_kernel_scalar(&r, &th, buf + nv, len - nv);
        done += len;
    }
    fp_hist_finish(h, &r, n, 0);
}

/* ---- fp16 inputs, AVX-512 (BW): 32 values per step, in the 16-bit domain
 * Each fp32 threshold T becomes a first fp16 magnitude pattern q_T (h16_thresholds), field e = q_T >> 10,
 * m = q_T & 0x3FF. As in the fp32 kernels, a "fast" step (no slow lane) counts only exponent fields
 * (one PEXT per four values, one increment per pair of fields into a 4 KiB table per sub-table) and
 * its nonzero exact powers of two; lt follows: m == 0 a prefix of fields, m == 1 that plus the
 * powers of two of field e, m >= 2 that plus the lanes of field e below q_T (a compare per such
 * threshold, only in steps with a lane in its field: scaled gradients often are), e == 0 the
 * field-0 lanes less the nonzero subnormals at or above q_T.
 * Nonzero fp16 subnormals (the underflow of a low-precision arm's gradients: 28% of the values, in
 * 92% of the steps, of the benchmark's fp16 arm) are counted in the step as well: field 0 in the pair
 * table, their binades (leading mantissa bit) and the corrections of the e == 0 thresholds by a
 * compare per binade and per such threshold.
 * Slow lanes: Inf / NaN (field 31; a 32-entry vpermw lookup of the field's kind tells them and the
 * threshold fields); a step with one is compared with every q_T and its fields counted one by one.
 * sum |x| goes through vcvtph2ps into the same SUM_LANES double lanes, in the same order, as
 * fp_hist_add on the widened array: the whole histogram is that call's, bit for bit. */
#define F16_SUBT 4                           /* pair sub-tables (increments on one counter chain less) */

#define FIELD_SLOW 0x8000u
#define FIELD_THR  0x0001u

typedef struct {
    uint16_t qt[NTHR];                       /* q < qt[k]  <=>  widen(q) < t[k] */
    uint16_t field_kind[32];                 /* FIELD_SLOW (Inf / NaN), FIELD_THR (a q_T with m >= 2) */
    int nsub_thr, sub_thr[NTHR];             /* the thresholds with 1 < q_T < 0x400 (field 0) */
    int nfield_thr, field_thr[NTHR];         /* the thresholds with m >= 2 in a field >= 1 */
} f16_thr_t;

#ifdef HIST_X86
static void f16_thresholds(const thresholds_t *th, f16_thr_t *ft)
{
    memset(ft->field_kind, 0, sizeof ft->field_kind);
    ft->field_kind[31] = FIELD_SLOW;                         /* Inf, NaN */
    ft->nfield_thr = ft->nsub_thr = 0;
    for (int k = 0; k < NTHR; k++) {
        uint32_t lo = 0, hi = 0x7C00;                        /* widen(0x7C00) = INF_BITS >= every T */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (fp_f32_bits(fp_f16_to_f32((uint16_t)mid)) >= th->t[k])
                hi = mid;
            else
                lo = mid + 1;
        }
        ft->qt[k] = (uint16_t)lo;
        if ((lo >> 10) >= 1 && (lo >> 10) < 31 && (lo & 0x3FF) >= 2) {
            ft->field_kind[lo >> 10] |= FIELD_THR;
            ft->field_thr[ft->nfield_thr++] = k;
        }
        if (lo > 1 && lo < 0x400)                            /* q_T == 1: every subnormal, sge[0] */
            ft->sub_thr[ft->nsub_thr++] = k;
    }
}

/* The lanes of a step in the field of a threshold with m >= 2 (counted in the pair table as any
 * other): lt_slow[k] += #{field == e_k, q < q_T}, the part of #{q < q_T} the prefix of fields lacks. */
__attribute__((target("avx512f,avx512bw,popcnt")))
static inline void threshold_field_lanes(__m512i a, const f16_thr_t *ft, uint64_t *lt_slow)
{
    for (int j = 0; j < ft->nfield_thr; j++) {
        int k = ft->field_thr[j];
        __mmask32 in_field = _mm512_cmpge_epu16_mask(a, _mm512_set1_epi16((short)(ft->qt[k] & 0x7C00)));
        lt_slow[k] += (unsigned)__builtin_popcount(
            (unsigned)_mm512_mask_cmplt_epu16_mask(in_field, a, _mm512_set1_epi16((short)ft->qt[k])));
    }
}

/* The nonzero subnormal lanes sn of a (|x| patterns) of a step counted apart from their field:
 * sge[p] += #{q >= 2^p} (p = 0..9, binade p is sge[p] - sge[p + 1]), and for each threshold with
 * 1 < q_T < 0x400, sub_ge[k] += #{q >= q_T}: the field-0 lanes the fast count takes as below it
 * (with q_T == 1 they are all of them, sge[0], taken at the end). */
__attribute__((target("avx512f,avx512bw,popcnt")))
static inline void subnormal_lanes(__m512i a, __mmask32 sn, const f16_thr_t *ft, uint32_t sge[10], uint32_t *sub_ge)
{
    sge[0] += (unsigned)__builtin_popcount((unsigned)sn);
    for (int p = 1; p < 10; p++)
        sge[p] += (unsigned)__builtin_popcount(
            (unsigned)_mm512_mask_cmpge_epu16_mask(sn, a, _mm512_set1_epi16((short)(1 << p))));
    for (int j = 0; j < ft->nsub_thr; j++) {
        int k = ft->sub_thr[j];
        sub_ge[k] += (unsigned)__builtin_popcount(
            (unsigned)_mm512_mask_cmpge_epu16_mask(sn, a, _mm512_set1_epi16((short)ft->qt[k])));
    }
}

/* n a multiple of 32, n <= BLOCK; adds to r in fp32 terms (as fp_hist_kernel_avx512 on the widened
 * values). */
__attribute__((target("avx512f,avx512bw,popcnt,bmi2,f16c")))
static void kernel_f16_avx512(raw_t *r, const thresholds_t *th, const f16_thr_t *ft, const uint16_t *x, size_t n)
{
    uint32_t pt[F16_SUBT][1024], p2[32], slow_e[32], sub16[10], sge[10], sub_ge[NTHR];
    uint64_t lt_slow[NTHR];
    memset(sge, 0, sizeof sge);
    memset(sub_ge, 0, sizeof sub_ge);
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
    const __m512i lut = _mm512_loadu_si512((const void *)ft->field_kind);
    const __m512i kind_slow = _mm512_set1_epi16((short)FIELD_SLOW), kind_thr = _mm512_set1_epi16(FIELD_THR);
    __m512i vmax = _mm512_setzero_si512(), vmin = _mm512_set1_epi16(-1);
    __m512d s0 = _mm512_loadu_pd(r->lane), s1 = _mm512_loadu_pd(r->lane + 8);

    for (size_t i = 0; i < n; i += 32) {
        const uint16_t *xi = x + i;
        __m512i a = _mm512_and_si512(_mm512_loadu_si512((const void *)xi), absmask);
        __m512i m1 = _mm512_sub_epi16(a, one);
        __mmask32 sn = _mm512_cmplt_epu16_mask(m1, mant);    /* nonzero subnormal */
        __m512i sf = _mm512_permutexvar_epi16(_mm512_srli_epi16(a, 10), lut);
        __mmask32 slow = _mm512_test_epi16_mask(sf, kind_slow), tf = _mm512_test_epi16_mask(sf, kind_thr);
        __mmask32 pw = _mm512_mask_testn_epi16_mask(_mm512_test_epi16_mask(a, a), a, mant);
        __m512i af = a;
        if (__builtin_expect((slow | sn | tf | pw) != 0, 0)) {
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
            if (sn)
                subnormal_lanes(a, sn, ft, sge, sub_ge);
            if (tf)
                threshold_field_lanes(a, ft, lt_slow);
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
    uint32_t amax = fp_f32_bits(fp_f16_to_f32((uint16_t)mx));
    if (amax > r->c.amax_bits)
        r->c.amax_bits = amax;
    uint32_t min_m1 = mn == 0xFFFF ? UINT32_MAX : fp_f32_bits(fp_f16_to_f32((uint16_t)(mn + 1))) - 1;
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
        uint64_t c = fe[0];                                  /* fast field-0 lanes: zeros, subnormals */
        for (uint32_t b = 1; b < e; b++)
            c += fe[b];
        if (e >= 1 && m == 1)
            c += p2[e];
        uint64_t sub_above = ft->qt[k] == 1 ? sge[0] : sub_ge[k];   /* subnormals not below q_T */
        r->c.lt[k] += c - sub_above + lt_slow[k];              /* m >= 2: field e's lanes in lt_slow */
    }
    for (int p = 0; p < 10; p++)
        sub16[p] += sge[p] - (p < 9 ? sge[p + 1] : 0);
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
    fp_hist_make_thresholds(&th);
    f16_thresholds(&th, &ft);
    fp_hist_raw_init(&r);
    for (size_t done = 0; done < n;) {
        size_t len = n - done < BLOCK ? n - done : BLOCK;
        size_t nv = len & ~(size_t)31;
        if (nv)
            kernel_f16_avx512(&r, &th, &ft, x + done, nv);
        if (len > nv) {
            float buf[32];
            for (size_t i = 0; i < len - nv; i++)
                buf[i] = fp_f16_to_f32(x[done + nv + i]);
            fp_hist_kernel_scalar(&r, &th, buf, len - nv);
        }
        done += len;
    }
    fp_hist_finish(h, &r, n, 0);
}
#endif

/* The count-table path (n >= H16_MIN_N), the reference for h16_avx512. */
static int h16_table_add(fp_hist_t *h, const uint16_t *x, size_t n, const h16_fmt_t *f)
{
    if (!h16_table) {
        if (!(h16_table = calloc(2 * H16_N, sizeof *h16_table)))
            return fp_fail(FP_ENOMEM, "fp_hist_add_%s: out of memory for the count table", f->bf ? "bf16" : "f16");
        fp_hist_release_at_thread_exit();
    }
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
