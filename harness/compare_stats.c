/* Blocked, thread-count-invariant statistics of a tensor pair (harness/compare_stats.h).
 *
 * Pass 1 (both paths): the reference's own statistics per block (NaN/Inf, finite count, sum, sum
 * of squares, squared deviations about the block's mean, max |ref|) and whether the test's block
 * has the same bits. Same bits everywhere (the shortcut): one more pass counts the mean_ratio
 * population on the stored bits. Otherwise pass 2 takes the pairs per block. The median: a sample
 * before pass 2 guesses where it lies (harness/compare_median_guess.h), and pass 2 counts the |d|
 * below the guess's window and gathers those in it; with no guess, pass 2 counts a histogram of
 * |d| (per worker, integer counts) instead, from which the median's bin is gathered
 * (harness/compare_median.h). Every block's partials depend only on the block; blocks combine in
 * block order. */
#include "harness/compare_stats.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/parallel.h"
#include "harness/compare_blocks.h"
#include "harness/compare_median.h"

/* Elements of [begin, begin + n) whose stored bits differ (+0 and -0 do; NaN payloads do). */
static inline int64_t count_bits_differ(const eq_tensor *a, const eq_tensor *b, int64_t begin, int64_t n)
{
    int64_t differ = 0;
    switch (a->dtype) {
    case EQ_BF16: {
        const uint16_t *x = (const uint16_t *)a->data + begin, *y = (const uint16_t *)b->data + begin;
        for (int64_t i = 0; i < n; i++) differ += x[i] != y[i];
        break;
    }
    case EQ_FP32: {
        const uint32_t *x = (const uint32_t *)a->data + begin, *y = (const uint32_t *)b->data + begin;
        for (int64_t i = 0; i < n; i++) differ += x[i] != y[i];
        break;
    }
    case EQ_FP64: {
        const uint64_t *x = (const uint64_t *)a->data + begin, *y = (const uint64_t *)b->data + begin;
        for (int64_t i = 0; i < n; i++) differ += x[i] != y[i];
        break;
    }
    }
    return differ;
}

/* sum (a_i - mean)^2 */
static inline double lane_squared_deviations(const double *a, double mean, int64_t len)
{
    lanes_d lane = {0};
    int64_t i = 0;
    for (; i + LANES <= len; i += LANES) {
        const lanes_d dev = load_lanes(a + i) - mean;
        lane += dev * dev;
    }
    for (int j = 0; i < len; i++, j++) lane[j] += (a[i] - mean) * (a[i] - mean);
    return lanes_total(lane);
}

/* ---- pass 1: one tensor's own statistics, per block ---- */

typedef struct {
    int64_t nan, inf, n_finite;
    double sum, sum_sq, m2, absmax; /* over the finite values; m2 about the block's mean sum / n_finite */
    int same_bits;                  /* the other tensor's block has the same bits */
} value_block;

typedef struct {
    const eq_tensor *values;
    const eq_tensor *other; /* NULL, or a tensor of the same shape compared bit for bit */
    value_block *blocks;    /* [block_count(numel)] */
} values_job;

STATS_WIDE static void value_block_stats(const double *v, int64_t len, value_block *out)
{
    /* one loop for the sums, the max and the NaN/Inf check; sum_sq in the lanes of pass 2's sums,
     * so that for t = r the sums t r, t^2 and r^2 there have its bits */
    lanes_d sum = {0}, sum_sq = {0}, absmax = {0};
    lanes_i nonfinite = {0}; /* -1 per NaN or Inf */
    int64_t i = 0;
    for (; i + LANES <= len; i += LANES) {
        const lanes_d x = load_lanes(v + i), a = lanes_abs(x);
        sum += x;
        sum_sq += x * x;
        absmax = lanes_select(a > absmax, a, absmax);
        nonfinite += ~(a <= DBL_MAX);
    }
    for (int k = 0; i < len; i++, k++) {
        sum[k] += v[i];
        sum_sq[k] += v[i] * v[i];
        absmax[k] = fabs(v[i]) > absmax[k] ? fabs(v[i]) : absmax[k];
        nonfinite[k] -= !(fabs(v[i]) <= DBL_MAX);
    }
    if (lanes_count(nonfinite) == 0) {
        out->n_finite = len;
        out->sum = lanes_total(sum);
        out->sum_sq = lanes_total(sum_sq);
        out->absmax = lanes_max(absmax);
        out->m2 = len > 0 ? lane_squared_deviations(v, out->sum / (double)len, len) : 0.0;
        return;
    }
    for (i = 0; i < len; i++) { /* in index order over the finite values, as pass 2 does */
        out->nan += isnan(v[i]) != 0;
        out->inf += isinf(v[i]) != 0;
        if (!isfinite(v[i])) continue;
        out->n_finite++;
        out->sum += v[i];
        out->sum_sq += v[i] * v[i];
        if (fabs(v[i]) > out->absmax) out->absmax = fabs(v[i]);
    }
    const double mean = out->n_finite > 0 ? out->sum / (double)out->n_finite : 0.0;
    for (i = 0; i < len; i++)
        if (isfinite(v[i])) out->m2 += (v[i] - mean) * (v[i] - mean);
}

STATS_WIDE static void values_range(void *ctx, int64_t begin, int64_t end)
{
    const values_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->values);
    const size_t size = eq_dtype_size(j->values->dtype);
    double v[BLOCK];
    for (int64_t b = begin; b < end; b++) {
        const int64_t len = block_len(n, b);
        value_block *out = &j->blocks[b];
        memset(out, 0, sizeof *out);
        eq_tensor_widen(j->values, b * BLOCK, len, v);
        value_block_stats(v, len, out);
        if (j->other != NULL)
            out->same_bits = memcmp((const char *)j->values->data + (size_t)(b * BLOCK) * size,
                                    (const char *)j->other->data + (size_t)(b * BLOCK) * size, (size_t)len * size) == 0;
    }
}

typedef struct {
    int64_t nan, inf, n_finite;
    double sum_sq, mean, m2, absmax;
    int same_bits; /* every block */
} value_totals;

/* The blocks in block order; means and squared deviations by Chan, Golub and LeVeque's update. */
static void combine_values(const value_block *blocks, int64_t nb, value_totals *t)
{
    memset(t, 0, sizeof *t);
    t->same_bits = 1;
    for (int64_t b = 0; b < nb; b++) {
        const value_block *v = &blocks[b];
        t->nan += v->nan;
        t->inf += v->inf;
        t->sum_sq += v->sum_sq;
        t->same_bits &= v->same_bits;
        if (v->absmax > t->absmax) t->absmax = v->absmax;
        if (v->n_finite == 0) continue;
        const double mean = v->sum / (double)v->n_finite, delta = mean - t->mean;
        const double n_before = (double)t->n_finite, n_block = (double)v->n_finite, n_after = n_before + n_block;
        t->mean += delta * (n_block / n_after);
        t->m2 += v->m2 + delta * delta * (n_before * n_block / n_after);
        t->n_finite += v->n_finite;
    }
}

/* Pass 1 over `values` (and, with `other`, the bit comparison); `blocks` sized by the caller. */
static void value_pass(const eq_tensor *values, const eq_tensor *other, value_block *blocks, value_totals *totals)
{
    const int64_t nb = block_count(eq_tensor_numel(values));
    values_job job = {values, other, blocks};
    eq_parallel_for(nb, EQ_STATS_BLOCKS_PER_RANGE, values_range, &job);
    combine_values(blocks, nb, totals);
}

/* ---- the shortcut: the mean_ratio population on the stored bits ---- */

/* The value of a magnitude's bits (sign clear) in dt. */
static double magnitude_value(eq_dtype dt, uint64_t bits)
{
    switch (dt) {
    case EQ_BF16: return eq_bf16_to_f32((uint16_t)bits);
    case EQ_FP32: {
        const uint32_t u = (uint32_t)bits;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    case EQ_FP64: {
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
    }
    return 0.0;
}

static uint64_t inf_bits(eq_dtype dt) { return dt == EQ_BF16 ? 0x7f80u : dt == EQ_FP32 ? 0x7f800000u : FP64_INF_BITS; }

/* The smallest magnitude bits whose value is >= x (x >= 0): bits and values of non-negative IEEE
 * numbers are in the same order. */
static uint64_t first_magnitude_at_least(eq_dtype dt, double x)
{
    uint64_t lo = 0, hi = inf_bits(dt);
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (magnitude_value(dt, mid) >= x) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

typedef struct {
    const eq_tensor *values;
    uint64_t lowest;  /* magnitude bits counted: [lowest, inf) */
    int64_t *counts;  /* [block_count(numel)] */
} ratio_count_job;

/* Finite, nonzero elements with |v| >= the scale, per block, on the magnitude bits. */
STATS_WIDE static void ratio_count_range(void *ctx, int64_t begin, int64_t end)
{
    const ratio_count_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->values);
    const uint64_t lowest = j->lowest, inf = inf_bits(j->values->dtype);
    for (int64_t b = begin; b < end; b++) {
        const int64_t len = block_len(n, b), at = b * BLOCK;
        int64_t count = 0;
        switch (j->values->dtype) {
        case EQ_BF16: {
            const uint16_t *h = (const uint16_t *)j->values->data + at, lo = (uint16_t)lowest, hi = (uint16_t)inf;
            int32_t in_block = 0;
            for (int64_t i = 0; i < len; i++) in_block += (uint16_t)(h[i] & 0x7fffu) >= lo && (uint16_t)(h[i] & 0x7fffu) < hi;
            count = in_block;
            break;
        }
        case EQ_FP32: {
            const uint32_t *u = (const uint32_t *)j->values->data + at, lo = (uint32_t)lowest, hi = (uint32_t)inf;
            int32_t in_block = 0;
            for (int64_t i = 0; i < len; i++) in_block += (u[i] & 0x7fffffffu) >= lo && (u[i] & 0x7fffffffu) < hi;
            count = in_block;
            break;
        }
        case EQ_FP64: {
            const uint64_t *u = (const uint64_t *)j->values->data + at;
            for (int64_t i = 0; i < len; i++) count += (u[i] & ~(1ull << 63)) >= lowest && (u[i] & ~(1ull << 63)) < inf;
            break;
        }
        }
        j->counts[b] = count;
    }
}

/* The metrics of a pair with the same bits from the reference's pass 1: every |d| is zero and
 * t = r, so each field is what pass 2 computes for such a pair (sum t r = sum t^2 = sum r^2 in
 * the same lanes; t / r = 1; the median of zeros is 0). */
static eq_status identical_metrics(const eq_tensor *ref, const value_totals *rt, double ref_rms, eq_metrics *out)
{
    const int64_t nb = block_count(eq_tensor_numel(ref));
    int64_t *counts = calloc((size_t)(nb > 0 ? nb : 1), sizeof *counts);
    if (counts == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %" PRId64 " block counts", nb);
    uint64_t lowest = first_magnitude_at_least(ref->dtype, ref_rms);
    ratio_count_job job = {ref, lowest > 0 ? lowest : 1, counts};
    eq_parallel_for(nb, EQ_STATS_BLOCKS_PER_RANGE, ratio_count_range, &job);
    int64_t n_ratio = 0;
    for (int64_t b = 0; b < nb; b++) n_ratio += counts[b];
    free(counts);
    const double sum_r2 = rt->sum_sq;
    out->nan_test = out->nan_ref;
    out->inf_test = out->inf_ref;
    out->ulp_floor = ref_rms; /* rms of the test = that of the reference when the reference's is 0 */
    out->n_finite = rt->n_finite;
    out->rel_fro = 0.0;
    out->cosine = sum_r2 == 0.0 ? 1.0 : fmax(-1.0, fmin(1.0, sum_r2 / (sqrt(sum_r2) * sqrt(sum_r2))));
    out->ls_scale = sum_r2 > 0.0 ? sum_r2 / sum_r2 : 1.0;
    out->mean_ratio = n_ratio > 0 ? (double)n_ratio / (double)n_ratio : 1.0;
    out->n_mean_ratio = n_ratio;
    out->worst_rel = 0.0;
    return EQ_OK;
}

/* ---- pass 2: the pairs, per block ---- */

typedef struct {
    int64_t n_differ, nan_test, inf_test, nonfinite_mismatch;
    int64_t n_finite, n_zero, n_below, n_ratio, n_outside, above[EQ_N_THRESHOLDS];
    double sum_abs, sum_d2, sum_r2, sum_t2, sum_tr, ratio_sum;
    double max_abs, ulp_at_max, max_ulp, max_tol_ratio;
    int64_t argmax; /* the first index of max_abs; -1: no |d| > 0 */
} pair_block;

typedef struct {
    const eq_tensor *ref, *test;
    double ref_rms, floor_scale, atol, rtol;
    int significand_bits, min_exponent; /* of the dtype ULPs are counted in */
    pair_block *blocks;                 /* [block_count(numel)] */
    int64_t *histograms;                /* [workers][HISTOGRAM_SIZE] counts, or NULL */
    eq_median_guess *guess;             /* a window: gathers the |d| in it, or NULL */
    int64_t below;                      /* the window's lo (0: none): pairs with 0 < |d| below it are counted */
} pairs_job;

/* Spacing of the dtype's numbers at scale s >= 0: 2^(floor(log2 s) - p + 1), or the subnormal
 * spacing 2^(emin - p + 1) below the smallest normal 2^emin (bf16 has fp32's exponent range).
 * floor(log2 s) is the exponent field of s, a normal fp64 number wherever it is >= 2^emin; the
 * spacing is built from its bits, a subnormal fp64 one (down to 2^-1074) included, with no branch. */
static inline double spacing_at(double s, int p, int emin)
{
    int64_t e = (int64_t)(double_bits(s) >> 52) - 1023;
    e = e < emin ? emin : e;
    const int64_t spacing_exponent = e - p + 1;
    const uint64_t normal = (uint64_t)(spacing_exponent + 1023) << 52;
    const uint64_t subnormal = 1ull << ((spacing_exponent + 1074) & 63);
    const uint64_t bits = spacing_exponent >= -1022 ? normal : subnormal;
    double spacing;
    memcpy(&spacing, &bits, sizeof spacing);
    return spacing;
}

static inline double ulps_of(const pairs_job *j, double r, double d)
{
    const double scale = fabs(r) > j->floor_scale ? fabs(r) : j->floor_scale;
    return d / spacing_at(scale, j->significand_bits, j->min_exponent);
}

/* |d| / (atol + rtol |r|) for a |d| > 0 (Inf where the bound is 0). */
static inline double tolerance_ratio(const pairs_job *j, double r, double d)
{
    const double bound = j->atol + j->rtol * fabs(r);
    return bound > 0.0 ? d / bound : INFINITY;
}

/* The per-element maxima and thresholds of one |d| > 0 at flat index `index`. */
static inline void tally_difference(const pairs_job *j, pair_block *out, double r, double d,
                                    int64_t index)
{
    const double ulps = ulps_of(j, r, d);
    if (d > out->max_abs) {
        out->max_abs = d;
        out->argmax = index;
        out->ulp_at_max = ulps;
    }
    for (int k = 0; k < EQ_N_THRESHOLDS; k++) out->above[k] += d > eq_thresholds[k];
    if (ulps > out->max_ulp) out->max_ulp = ulps;
    const double ratio = tolerance_ratio(j, r, d);
    if (d > j->atol + j->rtol * fabs(r)) out->n_outside++;
    if (ratio > out->max_tol_ratio) out->max_tol_ratio = ratio;
}

/* The exponent of the spacing at scale s, lane by lane: floor(log2 s) - p + 1, floor(log2 s) at
 * least emin (spacing_at's, with the same integer operations). */
static inline lanes_i lanes_spacing_exponent(lanes_d s, int p, int emin)
{
    lanes_i e = (lanes_i)((lanes_u)s >> 52) - 1023;
    const lanes_i below = e < emin;
    e = (e & ~below) | (((lanes_i){0} + emin) & below);
    return e - p + 1;
}

/* spacing_at, lane by lane. */
static inline lanes_d lanes_spacing(lanes_d s, int p, int emin)
{
    const lanes_i spacing_exponent = lanes_spacing_exponent(s, p, emin);
    const lanes_u normal = (lanes_u)(spacing_exponent + 1023) << 52;
    const lanes_u subnormal = ((lanes_u){0} + 1) << (lanes_u)((spacing_exponent + 1074) & 63);
    const lanes_i is_normal = spacing_exponent >= -1022;
    return (lanes_d)(((lanes_i)normal & is_normal) | ((lanes_i)subnormal & ~is_normal));
}

/* 1 / lanes_spacing(s, p, emin) for p <= 24 (emin >= -126): a normal fp64 number. */
static inline lanes_d lanes_inverse_spacing(lanes_d s, int p, int emin)
{
    return (lanes_d)((lanes_u)(1023 - lanes_spacing_exponent(s, p, emin)) << 52);
}

/* The per-element counts and maxima of a finite block, in lanes (counts: each true comparison is
 * -1), over its whole groups of LANES; the index where its tail starts. */
typedef struct {
    lanes_d ratio_sum, max_abs, max_ulp, max_tol;
    lanes_i n_ratio, n_zero, n_below, n_outside, above[EQ_N_THRESHOLDS];
    lanes_i at_max; /* per lane, the first index of its max |d| */
} pair_lanes;

static inline __attribute__((always_inline)) int64_t pair_loop(const pairs_job *j, const double *r, const double *t,
                                                               const double *d, int64_t len, const int reciprocal,
                                                               const int constant_bound, pair_lanes *out)
{
    const lanes_d zero = {0}, rms = zero + j->ref_rms, floor_scale = zero + j->floor_scale, atol = zero + j->atol,
                  rtol = zero + j->rtol, inf = zero + INFINITY;
    const lanes_i window_lo = (lanes_i){0} + j->below; /* |d| >= 0: its bits compare as its value */
    lanes_d threshold[EQ_N_THRESHOLDS];
    for (int k = 0; k < EQ_N_THRESHOLDS; k++) threshold[k] = zero + eq_thresholds[k];
    pair_lanes a = *out;
    int64_t i = 0;
    for (; i + LANES <= len; i += LANES) {
        const lanes_d x = load_lanes(r + i), y = load_lanes(t + i), dd = load_lanes(d + i), ax = lanes_abs(x);
        const lanes_i counted = (x != 0.0) & (ax >= rms), nonzero = dd != 0.0;
        a.ratio_sum += lanes_select(counted, y / x, zero);
        a.n_ratio += counted;
        a.n_zero += ~nonzero;
        a.n_below += nonzero & ((lanes_i)dd < window_lo);
        const lanes_i larger = dd > a.max_abs;
        a.max_abs = lanes_select(larger, dd, a.max_abs);
        a.at_max = (a.at_max & ~larger) | ((((lanes_i){0, 1, 2, 3}) + i) & larger);
        const lanes_d scale = lanes_select(ax > floor_scale, ax, floor_scale);
        const lanes_d ulps = reciprocal ? dd * lanes_inverse_spacing(scale, j->significand_bits, j->min_exponent)
                                        : dd / lanes_spacing(scale, j->significand_bits, j->min_exponent);
        a.max_ulp = lanes_select(ulps > a.max_ulp, ulps, a.max_ulp);
        const lanes_d bound = atol + rtol * ax;
        if (!constant_bound) {
            const lanes_d ratio = lanes_select(nonzero, lanes_select(bound > 0.0, dd / bound, inf), zero);
            a.max_tol = lanes_select(ratio > a.max_tol, ratio, a.max_tol);
        }
        a.n_outside += nonzero & (dd > bound);
#pragma GCC unroll 8
        for (int k = 0; k < EQ_N_THRESHOLDS; k++) a.above[k] += dd > threshold[k];
    }
    *out = a;
    return i;
}

/* A block where every value of both sides is finite: sums, counts and maxima in lanes (the counts
 * and maxima are exact in any order); 0, with out untouched, where a value is NaN or Inf. */
STATS_WIDE static int finite_pair_block(const pairs_job *j, pair_block *out, int64_t *histogram, const double *r,
                                        const double *t, double *d, int64_t begin, int64_t len)
{
    /* |d|, the five sums and whether every value is finite in one loop (lanes as pass 1's: sum t r
     * = sum t^2 = sum r^2 for t = r) */
    lanes_d sum_abs = {0}, sum_d2 = {0}, sum_r2 = {0}, sum_t2 = {0}, sum_tr = {0};
    lanes_i nonfinite = {0};
    int64_t g = 0;
    for (; g + LANES <= len; g += LANES) {
        const lanes_d x = load_lanes(r + g), y = load_lanes(t + g), dd = lanes_abs(y - x);
        nonfinite |= ~(lanes_abs(x) <= DBL_MAX) | ~(lanes_abs(y) <= DBL_MAX);
        memcpy(d + g, &dd, sizeof dd);
        sum_abs += dd;
        sum_d2 += dd * dd;
        sum_r2 += x * x;
        sum_t2 += y * y;
        sum_tr += y * x;
    }
    for (int k = 0; g < len; g++, k++) {
        nonfinite[k] |= !(fabs(r[g]) <= DBL_MAX) | !(fabs(t[g]) <= DBL_MAX);
        d[g] = fabs(t[g] - r[g]);
        sum_abs[k] += d[g];
        sum_d2[k] += d[g] * d[g];
        sum_r2[k] += r[g] * r[g];
        sum_t2[k] += t[g] * t[g];
        sum_tr[k] += t[g] * r[g];
    }
    if (lanes_count(nonfinite) != 0) return 0;
    out->n_finite = len;
    out->sum_abs = lanes_total(sum_abs);
    out->sum_d2 = lanes_total(sum_d2);
    out->sum_r2 = lanes_total(sum_r2);
    out->sum_t2 = lanes_total(sum_t2);
    out->sum_tr = lanes_total(sum_tr);
    /* ULPs: |d| times the spacing's reciprocal, a power of two as exact as the spacing, for the
     * dtypes whose spacings' reciprocals are all fp64 numbers (not fp64's: 2^1074 is not); the
     * same bits as dividing. A bound that is atol alone (rtol 0): the largest |d| / bound is the
     * largest |d|'s, division being monotone, so it is taken once after. Each of the four loops
     * compiled for its case (no test of either inside). */
    const int reciprocal = j->significand_bits <= 24, constant_bound = j->rtol == 0.0;
    pair_lanes acc = {.at_max = {0, 1, 2, 3}};
    int64_t i = reciprocal ? (constant_bound ? pair_loop(j, r, t, d, len, 1, 1, &acc) : pair_loop(j, r, t, d, len, 1, 0, &acc))
                           : (constant_bound ? pair_loop(j, r, t, d, len, 0, 1, &acc) : pair_loop(j, r, t, d, len, 0, 0, &acc));
    for (int k = 0; i < len; i++, k++) { /* the tail, lane by lane */
        const double x = r[i], y = t[i], dd = d[i];
        const int counted = x != 0.0 && fabs(x) >= j->ref_rms;
        acc.ratio_sum[k] += counted ? y / x : 0.0;
        acc.n_ratio[k] -= counted;
        acc.n_zero[k] -= dd == 0.0;
        acc.n_below[k] -= dd != 0.0 && (int64_t)double_bits(dd) < j->below;
        if (dd > acc.max_abs[k]) acc.max_abs[k] = dd, acc.at_max[k] = i;
        const double ulps = ulps_of(j, x, dd);
        acc.max_ulp[k] = ulps > acc.max_ulp[k] ? ulps : acc.max_ulp[k];
        const double ratio = dd != 0.0 ? tolerance_ratio(j, x, dd) : 0.0;
        acc.max_tol[k] = ratio > acc.max_tol[k] ? ratio : acc.max_tol[k];
        acc.n_outside[k] -= dd != 0.0 && dd > j->atol + j->rtol * fabs(x);
        for (int a = 0; a < EQ_N_THRESHOLDS; a++) acc.above[a][k] -= dd > eq_thresholds[a];
    }
    out->ratio_sum = lanes_total(acc.ratio_sum);
    out->n_ratio = -lanes_count(acc.n_ratio);
    out->n_zero = -lanes_count(acc.n_zero);
    out->n_below = -lanes_count(acc.n_below);
    out->n_outside = -lanes_count(acc.n_outside);
    for (int a = 0; a < EQ_N_THRESHOLDS; a++) out->above[a] = -lanes_count(acc.above[a]);
    out->max_abs = lanes_max(acc.max_abs);
    out->max_ulp = lanes_max(acc.max_ulp);
    out->max_tol_ratio = lanes_max(acc.max_tol);
    if (constant_bound && out->max_abs > 0.0) {
        const double largest = tolerance_ratio(j, 0.0, out->max_abs);
        out->max_tol_ratio = largest > out->max_tol_ratio ? largest : out->max_tol_ratio;
    }
    if (out->max_abs > 0.0) { /* the first index among the lanes that hold the max */
        int64_t first = len;
        for (int k = 0; k < LANES; k++)
            if (acc.max_abs[k] == out->max_abs && acc.at_max[k] < first) first = acc.at_max[k];
        out->argmax = begin + first;
        out->ulp_at_max = ulps_of(j, r[first], d[first]);
    }
    if (histogram != NULL)
        for (i = 0; i < len; i++) histogram[(i % HISTOGRAM_COPIES) * N_BINS + (int64_t)(double_bits(d[i]) >> BIN_SHIFT)]++;
    if (j->guess != NULL) eq_median_guess_offer(j->guess, d, len);
    return 1;
}

/* A block with NaN or Inf on either side: element by element, the sums in index order. */
static inline void nonfinite_pair_block(const pairs_job *j, pair_block *out, int64_t *histogram, const double *r,
                                        const double *t, double *scratch, int64_t begin, int64_t len)
{
    if (j->guess != NULL) { /* NaN or Inf where a side is not finite: outside the window */
        for (int64_t i = 0; i < len; i++) scratch[i] = fabs(t[i] - r[i]);
        eq_median_guess_offer(j->guess, scratch, len);
    }
    for (int64_t i = 0; i < len; i++) {
        out->nan_test += isnan(t[i]) != 0;
        out->inf_test += isinf(t[i]) != 0;
        if (!isfinite(r[i]) || !isfinite(t[i])) {
            const int same_nonfinite = (isnan(r[i]) && isnan(t[i])) || (isinf(r[i]) && r[i] == t[i]);
            if (!same_nonfinite) out->nonfinite_mismatch++;
            continue;
        }
        const double d = fabs(t[i] - r[i]);
        out->n_finite++;
        if (r[i] != 0.0 && fabs(r[i]) >= j->ref_rms) out->ratio_sum += t[i] / r[i], out->n_ratio++;
        out->sum_abs += d;
        out->sum_d2 += d * d;
        out->sum_r2 += r[i] * r[i];
        out->sum_t2 += t[i] * t[i];
        out->sum_tr += t[i] * r[i];
        if (histogram != NULL) histogram[double_bits(d) >> BIN_SHIFT]++; /* |d| = 0 too, as above */
        if (d == 0.0) out->n_zero++;
        else tally_difference(j, out, r[i], d, begin + i);
        out->n_below += d != 0.0 && (int64_t)double_bits(d) < j->below;
    }
}

STATS_WIDE static void pairs_range(void *ctx, int slot, int64_t begin, int64_t end)
{
    const pairs_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->ref);
    int64_t *histogram = j->histograms != NULL ? j->histograms + (size_t)slot * HISTOGRAM_SIZE : NULL;
    double r[BLOCK], t[BLOCK], d[BLOCK];
    for (int64_t b = begin; b < end; b++) {
        const int64_t len = block_len(n, b), at = b * BLOCK;
        pair_block *out = &j->blocks[b];
        memset(out, 0, sizeof *out);
        out->argmax = -1;
        eq_tensor_widen(j->ref, at, len, r);
        eq_tensor_widen(j->test, at, len, t);
        out->n_differ = count_bits_differ(j->ref, j->test, at, len);
        if (!finite_pair_block(j, out, histogram, r, t, d, at, len))
            nonfinite_pair_block(j, out, histogram, r, t, d, at, len);
    }
}

/* The blocks in block order into one (the max: the first block's, so the first index). */
static void combine_pairs(const pair_block *blocks, int64_t nb, pair_block *t)
{
    memset(t, 0, sizeof *t);
    t->argmax = -1;
    for (int64_t b = 0; b < nb; b++) {
        const pair_block *p = &blocks[b];
        t->n_differ += p->n_differ;
        t->nan_test += p->nan_test;
        t->inf_test += p->inf_test;
        t->nonfinite_mismatch += p->nonfinite_mismatch;
        t->n_finite += p->n_finite;
        t->n_zero += p->n_zero;
        t->n_below += p->n_below;
        t->n_ratio += p->n_ratio;
        t->n_outside += p->n_outside;
        for (int k = 0; k < EQ_N_THRESHOLDS; k++) t->above[k] += p->above[k];
        t->sum_abs += p->sum_abs;
        t->sum_d2 += p->sum_d2;
        t->sum_r2 += p->sum_r2;
        t->sum_t2 += p->sum_t2;
        t->sum_tr += p->sum_tr;
        t->ratio_sum += p->ratio_sum;
        if (p->max_abs > t->max_abs) {
            t->max_abs = p->max_abs;
            t->argmax = p->argmax;
            t->ulp_at_max = p->ulp_at_max;
        }
        if (p->max_ulp > t->max_ulp) t->max_ulp = p->max_ulp;
        if (p->max_tol_ratio > t->max_tol_ratio) t->max_tol_ratio = p->max_tol_ratio;
    }
}

/* ---- both passes ---- */

static int significand_bits(eq_dtype dt) { return dt == EQ_BF16 ? 8 : dt == EQ_FP32 ? 24 : 53; }

eq_status eq_stats_compute(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol, int shortcut,
                           eq_metrics *out)
{
    eq_status st = EQ_OK;
    const int64_t n = eq_tensor_numel(ref), nb = block_count(n);
    value_block *values = calloc((size_t)(nb > 0 ? nb : 1), sizeof *values);
    pair_block *pairs = NULL;
    int64_t *histograms = NULL;
    eq_median_guess guess = {.kind = EQ_GUESS_NONE, .values = NULL, .fine = NULL};
    if (values == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %" PRId64 " block statistics", nb);
        goto cleanup;
    }
    value_totals rt;
    value_pass(ref, shortcut ? test : NULL, values, &rt);
    const double ref_rms = rt.n_finite > 0 ? sqrt(rt.sum_sq / (double)rt.n_finite) : 0.0;
    out->nan_ref = rt.nan;
    out->inf_ref = rt.inf;
    out->ref_absmax = rt.absmax;
    out->ref_mean = rt.mean;
    out->ref_std = rt.n_finite > 0 ? sqrt(rt.m2 / (double)rt.n_finite) : 0.0; /* population std */
    if (shortcut && rt.same_bits) {
        st = identical_metrics(ref, &rt, ref_rms, out);
        goto cleanup;
    }

    double floor_scale = ref_rms; /* the floor of the ULP scale (compare.h) */
    if (ref_rms == 0.0) {
        value_totals tt;
        value_pass(test, NULL, values, &tt);
        floor_scale = tt.n_finite > 0 ? sqrt(tt.sum_sq / (double)tt.n_finite) : 0.0;
    }
    out->ulp_floor = floor_scale;
    pairs = calloc((size_t)(nb > 0 ? nb : 1), sizeof *pairs);
    if (pairs == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %" PRId64 " block statistics", nb);
        goto cleanup;
    }
    if (n > EQ_MEDIAN_DIRECT) EQ_TRY(eq_median_guess_begin(ref, test, &guess));
    if (n > EQ_MEDIAN_DIRECT && guess.kind == EQ_GUESS_NONE) {
        histograms = calloc((size_t)eq_parallel_workers() * HISTOGRAM_SIZE, sizeof *histograms);
        if (histograms == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate the median's histograms");
            goto cleanup;
        }
    }
    const double atol = tol->atol_scale == EQ_ATOL_REF_RMS ? tol->atol * ref_rms : tol->atol; /* in units of rms(ref) */
    pairs_job job = {ref, test, ref_rms, floor_scale, atol, tol->rtol, significand_bits(out->dtype),
                     out->dtype == EQ_FP64 ? -1022 : -126, pairs, histograms,
                     guess.kind == EQ_GUESS_WINDOW ? &guess : NULL, (int64_t)guess.lo};
    eq_parallel_for_slots(nb, EQ_STATS_BLOCKS_PER_RANGE, pairs_range, &job);
    pair_block p;
    combine_pairs(pairs, nb, &p);
    if (histograms != NULL) eq_median_histograms_combine(histograms, eq_parallel_workers(), p.n_zero);
    guess.n_below = p.n_below;

    out->n_differ = p.n_differ;
    out->nan_test = p.nan_test;
    out->inf_test = p.inf_test;
    out->nonfinite_mismatch = p.nonfinite_mismatch;
    out->n_finite = p.n_finite;
    out->max_abs = p.max_abs;
    out->argmax = p.argmax;
    out->ulp_at_max = p.ulp_at_max;
    out->max_ulp = p.max_ulp;
    out->n_outside = p.n_outside;
    out->max_tol_ratio = p.max_tol_ratio;
    if (p.n_finite > 0) {
        out->mean_abs = p.sum_abs / (double)p.n_finite;
        for (int k = 0; k < EQ_N_THRESHOLDS; k++) out->frac_above[k] = (double)p.above[k] / (double)p.n_finite;
    }
    EQ_TRY(eq_median_abs(ref, test, histograms, p.n_finite, p.n_zero, &guess, &out->median_abs));
    out->rel_fro = p.sum_r2 > 0.0 ? sqrt(p.sum_d2) / sqrt(p.sum_r2) : (p.sum_d2 > 0.0 ? INFINITY : 0.0);
    if (p.sum_r2 == 0.0 && p.sum_t2 == 0.0) out->cosine = 1.0;
    else if (p.sum_r2 == 0.0 || p.sum_t2 == 0.0) out->cosine = 0.0;
    else out->cosine = fmax(-1.0, fmin(1.0, p.sum_tr / (sqrt(p.sum_r2) * sqrt(p.sum_t2))));
    out->ls_scale = p.sum_r2 > 0.0 ? p.sum_tr / p.sum_r2 : 1.0;
    out->mean_ratio = p.n_ratio > 0 ? p.ratio_sum / (double)p.n_ratio : 1.0;
    out->n_mean_ratio = p.n_ratio;
    out->worst_rel = out->ref_absmax > 0.0 ? out->max_abs / out->ref_absmax : (out->max_abs > 0.0 ? INFINITY : 0.0);
cleanup:
    eq_median_guess_end(&guess);
    free(values);
    free(pairs);
    free(histograms);
    return st;
}
