/* Pass 2 of the comparison's statistics, the pairs per block (harness/compare_pairs.h). */
#include "harness/compare_pairs.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "harness/base/parallel.h"
#include "harness/compare_blocks.h"

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

static inline double ulps_of(const eq_pairs_job *j, double r, double d)
{
    const double scale = fabs(r) > j->floor_scale ? fabs(r) : j->floor_scale;
    return d / spacing_at(scale, j->significand_bits, j->min_exponent);
}

/* |d| / (atol + rtol |r|) for a |d| > 0 (Inf where the bound is 0). */
static inline double tolerance_ratio(const eq_pairs_job *j, double r, double d)
{
    const double bound = j->atol + j->rtol * fabs(r);
    return bound > 0.0 ? d / bound : INFINITY;
}

/* The per-element maxima and thresholds of one |d| > 0 at flat index `index`. */
static inline void tally_difference(const eq_pairs_job *j, eq_pair_block *out, double r, double d,
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

static inline __attribute__((always_inline)) int64_t pair_loop(const eq_pairs_job *j, const double *r, const double *t,
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
STATS_WIDE static int finite_pair_block(const eq_pairs_job *j, eq_pair_block *out, int64_t *histogram, const double *r,
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
static inline void nonfinite_pair_block(const eq_pairs_job *j, eq_pair_block *out, int64_t *histogram, const double *r,
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
    const eq_pairs_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->ref);
    int64_t *histogram = j->histograms != NULL ? j->histograms + (size_t)slot * HISTOGRAM_SIZE : NULL;
    double r[BLOCK], t[BLOCK], d[BLOCK];
    for (int64_t b = begin; b < end; b++) {
        const int64_t len = block_len(n, b), at = b * BLOCK;
        eq_pair_block *out = &j->blocks[b];
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
static void combine_pairs(const eq_pair_block *blocks, int64_t nb, eq_pair_block *t)
{
    memset(t, 0, sizeof *t);
    t->argmax = -1;
    for (int64_t b = 0; b < nb; b++) {
        const eq_pair_block *p = &blocks[b];
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

void eq_pairs_pass(const eq_pairs_job *job, eq_pair_block *total)
{
    const int64_t nb = block_count(eq_tensor_numel(job->ref));
    eq_parallel_for_slots(nb, EQ_STATS_BLOCKS_PER_RANGE, pairs_range, (void *)job);
    combine_pairs(job->blocks, nb, total);
}
