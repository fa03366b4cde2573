/* Pass 2 of the comparison's statistics, the pairs per block (harness/compare_pairs.h). */
#include "harness/compare_pairs.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "harness/base/parallel.h"
#include "harness/compare_blocks.h"

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

/* What the finite loop holds constant: the scales of pass 1, the tolerance, the window. */
typedef struct {
    lanes_d counted_from;     /* |r| >= it: in mean(t / r) (rms(ref), or the least fp64 above 0 if that is 0) */
    lanes_d atol, rtol, outside_from; /* |d| > outside_from: outside a bound of atol alone */
    lanes_d threshold[EQ_N_THRESHOLDS];
    lanes_i exponent_floor;   /* the biased exponent of the ULP scale at least: max(that of the floor scale, emin's) */
    lanes_i window_lo;        /* |d|'s bits below it (|d| = 0 included): under the median's window */
    int64_t spacing_bias;     /* the spacing's exponent: max(exponent of |r|, exponent_floor) - spacing_bias */
} pair_constants;

/* The per-element sums, counts and maxima of a finite block, in lanes (counts: each true
 * comparison is -1). The sum of r^2 is pass 1's (the same lanes); where the max |d| lies is found
 * once the blocks are combined, in the one block that holds it (find_argmax). */
typedef struct {
    lanes_d sum_abs, sum_d2, sum_t2, sum_tr, ratio_sum, max_abs, max_ulp, max_tol;
    lanes_d m2; /* the reference's squared deviations about its block's mean (block_m2's lanes) */
    lanes_i n_ratio, n_under, n_outside, above[EQ_N_THRESHOLDS];
} pair_lanes;

/* A finite block's max |d| > 0 whose first index is not sought until the blocks are combined. */
#define ARGMAX_TO_FIND (-2)

/* One group of LANES pairs r = x, t = y into the lanes; |d| stored at d. ULPs: |d| over the
 * spacing at max(|r|, floor), whose exponent is max(the exponent of |r|, that of the floor, emin)
 * - p + 1 (bits and values of non-negative numbers are in the same order); for p <= 24 times the
 * spacing's reciprocal, a normal fp64 power of two, which gives the same bits as dividing. With
 * a bound of atol alone (constant_bound) the largest |d| / bound is the largest |d|'s, division
 * being monotone, taken once after. */
static inline __attribute__((always_inline)) void pair_step(pair_lanes *a, const pair_constants *c, lanes_d x,
                                                            lanes_d y, lanes_d mean, double *d, const int reciprocal,
                                                            const int constant_bound)
{
    const lanes_d zero = {0}, dd = lanes_abs(y - x), ax = lanes_abs(x), dev = x - mean;
    a->m2 += dev * dev;
    memcpy(d, &dd, sizeof dd);
    a->sum_abs += dd;
    a->sum_d2 += dd * dd;
    a->sum_t2 += y * y;
    a->sum_tr += y * x;
    const lanes_i counted = ax >= c->counted_from;
    a->ratio_sum += lanes_select(counted, y / x, zero);
    a->n_ratio += counted;
    a->n_under += (lanes_i)dd < c->window_lo;
    a->max_abs = lanes_select(dd > a->max_abs, dd, a->max_abs);
    lanes_i e = (lanes_i)((lanes_u)ax >> 52);
    const lanes_i above_floor = e > c->exponent_floor;
    e = (e & above_floor) | (c->exponent_floor & ~above_floor);
    lanes_d ulps;
    if (reciprocal) {
        ulps = dd * (lanes_d)((lanes_u)(c->spacing_bias + 1023 - e) << 52);
    } else {
        const lanes_i spacing_exponent = e - c->spacing_bias;
        const lanes_u normal = (lanes_u)(spacing_exponent + 1023) << 52;
        const lanes_u subnormal = ((lanes_u){0} + 1) << (lanes_u)((spacing_exponent + 1074) & 63);
        const lanes_i is_normal = spacing_exponent >= -1022;
        ulps = dd / (lanes_d)(((lanes_i)normal & is_normal) | ((lanes_i)subnormal & ~is_normal));
    }
    a->max_ulp = lanes_select(ulps > a->max_ulp, ulps, a->max_ulp);
    if (constant_bound) {
        a->n_outside += dd > c->outside_from;
    } else {
        const lanes_d bound = c->atol + c->rtol * ax;
        const lanes_i nonzero = dd != 0.0;
        const lanes_d ratio = lanes_select(nonzero, lanes_select(bound > 0.0, dd / bound, zero + INFINITY), zero);
        a->max_tol = lanes_select(ratio > a->max_tol, ratio, a->max_tol);
        a->n_outside += nonzero & (dd > bound);
    }
#pragma GCC unroll 8
    for (int k = 0; k < EQ_N_THRESHOLDS; k++) a->above[k] += dd > c->threshold[k];
}

/* The groups of a finite block (begin, len) read straight from both tensors' storage, its tail
 * padded with pairs of zeros (which add +0 to the sums and count nowhere but under the window;
 * the reference's squared deviations about `mean` take the tail's own pairs, lane by lane, as
 * block_m2 does); returns the padding. Compiled once per dtype and case. */
static inline __attribute__((always_inline)) int64_t pair_groups(const eq_pairs_job *j, const pair_constants *c,
                                                                 eq_dtype dt, int64_t begin, int64_t len, double mean,
                                                                 double *d, const int reciprocal,
                                                                 const int constant_bound, pair_lanes *a)
{
    const lanes_d m = (lanes_d){0} + mean;
    const void *r = j->ref->data, *t = j->test->data;
    const pair_constants k = *c; /* a copy of its own: no store to d can change it */
    pair_lanes acc = *a;
    int64_t i = 0;
    for (; i + LANES <= len; i += LANES)
        pair_step(&acc, &k, eq_load_widened4(r, dt, begin + i), eq_load_widened4(t, dt, begin + i), m, d + i,
                  reciprocal, constant_bound);
    *a = acc;
    if (i == len) return 0;
    lanes_d x = {0}, y = {0}, tail_d;
    for (int e = 0; i + e < len; e++) {
        x[e] = eq_buffer_get(dt, r, begin + i + e);
        y[e] = eq_buffer_get(dt, t, begin + i + e);
    }
    const lanes_d m2 = a->m2;
    pair_step(a, &k, x, y, m, (double *)&tail_d, reciprocal, constant_bound);
    memcpy(d + i, &tail_d, (size_t)(len - i) * sizeof *d);
    a->m2 = m2;
    for (int e = 0; i + e < len; e++) a->m2[e] += (x[e] - mean) * (x[e] - mean);
    return LANES - (len - i);
}

#define PAIR_GROUPS_OF(dt)                                                                                      \
    (reciprocal ? (constant_bound ? pair_groups(j, c, dt, begin, len, mean, d, 1, 1, a)                         \
                                  : pair_groups(j, c, dt, begin, len, mean, d, 1, 0, a))                        \
                : (constant_bound ? pair_groups(j, c, dt, begin, len, mean, d, 0, 1, a)                         \
                                  : pair_groups(j, c, dt, begin, len, mean, d, 0, 0, a)))

/* pair_groups for the block's dtype and case: each of the twelve loops compiled for its own, with
 * no test of them inside. */
static inline __attribute__((always_inline)) int64_t pair_groups_of(const eq_pairs_job *j, const pair_constants *c,
                                                                    int64_t begin, int64_t len, double mean,
                                                                    double *d, pair_lanes *a)
{
    const int reciprocal = j->significand_bits <= 24, constant_bound = j->rtol == 0.0;
    switch (j->ref->dtype) {
    case EQ_BF16: return PAIR_GROUPS_OF(EQ_BF16);
    case EQ_FP32: return PAIR_GROUPS_OF(EQ_FP32);
    case EQ_FP64: break;
    }
    return PAIR_GROUPS_OF(EQ_FP64);
}
#undef PAIR_GROUPS_OF

/* A block where every value of both sides is finite (its bits scanned: n_zero of its |d| are 0):
 * sums, counts and maxima in lanes, the counts and maxima exact in any order. */
STATS_WIDE static void finite_pair_block(const eq_pairs_job *j, const pair_constants *c, eq_pair_block *out,
                                         int64_t *histogram, double *d, int64_t begin, int64_t len, int64_t n_zero)
{
    pair_lanes acc;
    memset(&acc, 0, sizeof acc);
    const int64_t padding = pair_groups_of(j, c, begin, len, j->ref_mean[begin / BLOCK], d, &acc);
    out->ref_m2 = lanes_total(acc.m2);
    out->n_finite = len;
    out->n_zero = n_zero;
    out->sum_abs = lanes_total(acc.sum_abs);
    out->sum_d2 = lanes_total(acc.sum_d2);
    out->sum_r2 = j->ref_sum_sq[begin / BLOCK];
    out->sum_t2 = lanes_total(acc.sum_t2);
    out->sum_tr = lanes_total(acc.sum_tr);
    out->ratio_sum = lanes_total(acc.ratio_sum);
    out->n_ratio = -lanes_count(acc.n_ratio);
    /* under the window: the zeros (and the padding) too, which are not below it */
    out->n_below = j->below > 0 ? -lanes_count(acc.n_under) - n_zero - padding : 0;
    out->n_outside = -lanes_count(acc.n_outside);
    for (int a = 0; a < EQ_N_THRESHOLDS; a++) out->above[a] = -lanes_count(acc.above[a]);
    out->max_abs = lanes_max(acc.max_abs);
    out->max_ulp = lanes_max(acc.max_ulp);
    out->max_tol_ratio = lanes_max(acc.max_tol);
    if (j->rtol == 0.0 && out->max_abs > 0.0) {
        const double largest = tolerance_ratio(j, 0.0, out->max_abs);
        out->max_tol_ratio = largest > out->max_tol_ratio ? largest : out->max_tol_ratio;
    }
    if (out->max_abs > 0.0) out->argmax = ARGMAX_TO_FIND;
    if (histogram != NULL)
        for (int64_t i = 0; i < len; i++)
            histogram[(i % HISTOGRAM_COPIES) * N_BINS + (int64_t)(double_bits(d[i]) >> BIN_SHIFT)]++;
    if (j->guess != NULL) eq_median_guess_offer(j->guess, d, len);
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

/* The loop's constants from the job. */
static pair_constants constants_of(const eq_pairs_job *j)
{
    const lanes_d zero = {0};
    pair_constants c = {.counted_from = zero + (j->ref_rms > 0.0 ? j->ref_rms : DBL_TRUE_MIN),
                        .atol = zero + j->atol,
                        .rtol = zero + j->rtol,
                        .outside_from = zero + (j->atol < 0.0 ? 0.0 : j->atol),
                        .window_lo = (lanes_i){0} + j->below};
    for (int k = 0; k < EQ_N_THRESHOLDS; k++) c.threshold[k] = zero + eq_thresholds[k];
    const int64_t floor_exponent = (int64_t)(double_bits(j->floor_scale) >> 52);
    const int64_t least = j->min_exponent + 1023;
    c.exponent_floor = (lanes_i){0} + (floor_exponent > least ? floor_exponent : least);
    c.spacing_bias = 1023 + j->significand_bits - 1;
    return c;
}

STATS_WIDE static void pairs_range(void *ctx, int slot, int64_t begin, int64_t end)
{
    const eq_pairs_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->ref);
    const pair_constants c = constants_of(j);
    int64_t *histogram = j->histograms != NULL ? j->histograms + (size_t)slot * HISTOGRAM_SIZE : NULL;
    double d[BLOCK];
    for (int64_t b = begin; b < end; b++) {
        const int64_t len = block_len(n, b), at = b * BLOCK;
        eq_pair_block *out = &j->blocks[b];
        memset(out, 0, sizeof *out);
        out->argmax = -1;
        const bits_scan bits = scan_bits(j->ref, j->test, at, len);
        out->n_differ = bits.differ;
        if (!bits.nonfinite) {
            finite_pair_block(j, &c, out, histogram, d, at, len, len - bits.differ + bits.signed_zeros);
            continue;
        }
        if (!isnan(j->ref_mean[b])) out->ref_m2 = block_m2_of(j->ref, at, len, j->ref_mean[b]); /* the test's NaN */
        double r[BLOCK], t[BLOCK];
        eq_tensor_widen(j->ref, at, len, r);
        eq_tensor_widen(j->test, at, len, t);
        nonfinite_pair_block(j, out, histogram, r, t, d, at, len);
    }
}

/* The blocks in block order into one (the max: the first block's, so the first index; *max_block
 * the block that holds it, or -1). */
static void combine_pairs(const eq_pair_block *blocks, int64_t nb, eq_pair_block *t, int64_t *max_block)
{
    *max_block = -1;
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
            *max_block = b;
        }
        if (p->max_ulp > t->max_ulp) t->max_ulp = p->max_ulp;
        if (p->max_tol_ratio > t->max_tol_ratio) t->max_tol_ratio = p->max_tol_ratio;
    }
}

/* The first index in finite block b of its max |d| (a pair of finite values whose |t - r| is it,
 * as the block's loop computed it), and the ULPs there, into t. */
static void find_argmax(const eq_pairs_job *j, int64_t b, eq_pair_block *t)
{
    const int64_t at = b * BLOCK, len = block_len(eq_tensor_numel(j->ref), b);
    for (int64_t i = 0; i < len; i++) {
        const double r = eq_tensor_get(j->ref, at + i), d = fabs(eq_tensor_get(j->test, at + i) - r);
        if (d != t->max_abs) continue;
        t->argmax = at + i;
        t->ulp_at_max = ulps_of(j, r, d);
        return;
    }
}

void eq_pairs_pass(const eq_pairs_job *job, eq_pair_block *total)
{
    const int64_t nb = block_count(eq_tensor_numel(job->ref));
    int64_t max_block;
    eq_parallel_for_slots(nb, EQ_STATS_BLOCKS_PER_RANGE, pairs_range, (void *)job);
    combine_pairs(job->blocks, nb, total, &max_block);
    if (total->argmax == ARGMAX_TO_FIND) find_argmax(job, max_block, total);
}
