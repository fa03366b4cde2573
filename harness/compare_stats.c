/* Blocked, thread-count-invariant statistics of a tensor pair (harness/compare_stats.h).
 *
 * Pass 1 (both paths): the reference's own statistics per block (NaN/Inf, finite count, sum, sum
 * of squares, squared deviations about the block's mean, max |ref|) and whether the test's block
 * has the same bits. Same bits everywhere (the shortcut): one more pass counts the mean_ratio
 * population on the stored bits. Otherwise pass 2 (harness/compare_pairs.h) takes the pairs per
 * block. The median: a sample before pass 2 guesses where it lies (harness/compare_median_guess.h),
 * and pass 2 counts the |d| below the guess's window and gathers those in it; with no guess, pass 2
 * counts a histogram of |d| (per worker, integer counts) instead, from which the median's bin is
 * gathered (harness/compare_median.h). Every block's partials depend only on the block; blocks
 * combine in block order. */
#include "harness/compare_stats.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/parallel.h"
#include "harness/compare_blocks.h"
#include "harness/compare_median.h"
#include "harness/compare_pairs.h"

/* ---- pass 1: one tensor's own statistics, per block ---- */

typedef struct {
    int64_t nan, inf, n_finite;
    double sum, sum_sq, m2, absmax; /* over the finite values; m2 about the block's mean sum / n_finite */
    int same_bits;                  /* the other tensor's block has the same bits */
    int m2_later;                   /* a finite block: m2 is summed after pass 1 (block_m2's lanes) */
} value_block;

typedef struct {
    const eq_tensor *values;
    const eq_tensor *other; /* NULL, or a tensor of the same shape compared bit for bit */
    value_block *blocks;    /* [block_count(numel)] */
} values_job;

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

/* A block's sums, sum of squares and max |v| in lanes, read straight from storage (its tail lane
 * by lane): 0 where a value is NaN or Inf (out untouched), which leaves a lane of the sum of
 * squares NaN or Inf, as a sum that overflowed does, told apart by the block's bits (scan_bits).
 * The squared deviations about the block's mean come later (m2_later): pass 2 sums them as it reads
 * the block's pairs, or m2_range. */
static inline __attribute__((always_inline)) int finite_value_block(const eq_tensor *t, eq_dtype dt, int64_t begin,
                                                                    int64_t len, value_block *out)
{
    const void *data = t->data; /* of dtype dt (t->dtype, a constant in each copy of the loops) */
    /* sum_sq in the lanes of pass 2's sums, so that for t = r the sums t r, t^2 and r^2 there have its bits */
    lanes_d sum = {0}, sum_sq = {0};
    int64_t i = 0;
    for (; i + LANES <= len; i += LANES) {
        const lanes_d x = eq_load_widened4(data, dt, begin + i);
        sum += x;
        sum_sq += x * x;
    }
    for (int k = 0; i < len; i++, k++) {
        const double x = eq_buffer_get(dt, data, begin + i);
        sum[k] += x;
        sum_sq[k] += x * x;
    }
    /* the block's bits: NaN or Inf, where a lane of the sum of squares is not finite (else a sum that
     * overflowed), and max |v| as the largest magnitude's bits, in the storage's own width (a
     * compare and blend over the doubles in lanes was a chain of five cycles a group) */
    const bits_scan bits = scan_bits(t, t, begin, len);
    int finite = 1;
    for (int k = 0; k < LANES; k++) finite &= fabs(sum_sq[k]) <= DBL_MAX;
    if (!finite && bits.nonfinite) return 0;
    out->n_finite = len;
    out->sum = lanes_total(sum);
    out->sum_sq = lanes_total(sum_sq);
    out->absmax = magnitude_value(dt, bits.top);
    out->m2_later = 1;
    return 1;
}

/* A block with NaN or Inf: element by element in index order over the finite values, as pass 2 does. */
static void nonfinite_value_block(const double *v, int64_t len, value_block *out)
{
    for (int64_t i = 0; i < len; i++) {
        out->nan += isnan(v[i]) != 0;
        out->inf += isinf(v[i]) != 0;
        if (!isfinite(v[i])) continue;
        out->n_finite++;
        out->sum += v[i];
        out->sum_sq += v[i] * v[i];
        if (fabs(v[i]) > out->absmax) out->absmax = fabs(v[i]);
    }
    const double mean = out->n_finite > 0 ? out->sum / (double)out->n_finite : 0.0;
    for (int64_t i = 0; i < len; i++)
        if (isfinite(v[i])) out->m2 += (v[i] - mean) * (v[i] - mean);
}

/* finite_value_block compiled for each dtype. */
static inline __attribute__((always_inline)) int finite_value_block_of(const eq_tensor *t, int64_t begin, int64_t len,
                                                                       value_block *out)
{
    switch (t->dtype) {
    case EQ_BF16: return finite_value_block(t, EQ_BF16, begin, len, out);
    case EQ_FP32: return finite_value_block(t, EQ_FP32, begin, len, out);
    case EQ_FP64: break;
    }
    return finite_value_block(t, EQ_FP64, begin, len, out);
}

STATS_WIDE static void values_range(void *ctx, int64_t begin, int64_t end)
{
    const values_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->values);
    const size_t size = eq_dtype_size(j->values->dtype);
    for (int64_t b = begin; b < end; b++) {
        const int64_t len = block_len(n, b);
        value_block *out = &j->blocks[b];
        memset(out, 0, sizeof *out);
        if (!finite_value_block_of(j->values, b * BLOCK, len, out)) {
            double v[BLOCK];
            eq_tensor_widen(j->values, b * BLOCK, len, v);
            nonfinite_value_block(v, len, out);
        }
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

/* The squared deviations of the blocks that left them for later, where pass 2 does not run. */
typedef struct {
    const eq_tensor *values;
    value_block *blocks;
} m2_job;

STATS_WIDE static void m2_range(void *ctx, int64_t begin, int64_t end)
{
    const m2_job *j = ctx;
    const int64_t n = eq_tensor_numel(j->values);
    for (int64_t b = begin; b < end; b++) {
        value_block *v = &j->blocks[b];
        const int64_t len = block_len(n, b);
        if (v->m2_later && len > 0) v->m2 = block_m2_of(j->values, b * BLOCK, len, v->sum / (double)len);
        v->m2_later = 0;
    }
}

/* Pass 1 over `values` (and, with `other`, the bit comparison); `blocks` sized by the caller. The
 * totals' m2 holds only the blocks with NaN or Inf until the others' are in (m2_range, pass 2) and
 * the blocks combined again. */
static void value_pass(const eq_tensor *values, const eq_tensor *other, value_block *blocks, value_totals *totals)
{
    const int64_t nb = block_count(eq_tensor_numel(values));
    values_job job = {values, other, blocks};
    eq_parallel_for(nb, EQ_STATS_BLOCKS_PER_RANGE, values_range, &job);
    combine_values(blocks, nb, totals);
}

/* ---- the shortcut: the mean_ratio population on the stored bits ---- */

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

/* ---- both passes ---- */

static int significand_bits(eq_dtype dt) { return dt == EQ_BF16 ? 8 : dt == EQ_FP32 ? 24 : 53; }

eq_status eq_stats_compute(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol, int shortcut,
                           eq_metrics *out)
{
    eq_status st = EQ_OK;
    const int64_t n = eq_tensor_numel(ref), nb = block_count(n);
    value_block *values = calloc((size_t)(nb > 0 ? nb : 1), sizeof *values);
    double *ref_sum_sq = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *ref_sum_sq),
           *ref_mean = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *ref_mean);
    eq_pair_block *pairs = NULL;
    int64_t *histograms = NULL;
    eq_median_guess guess = {.kind = EQ_GUESS_NONE, .values = NULL, .fine = NULL};
    if (values == NULL || ref_sum_sq == NULL || ref_mean == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %" PRId64 " block statistics", nb);
        goto cleanup;
    }
    value_totals rt;
    value_pass(ref, shortcut ? test : NULL, values, &rt);
    for (int64_t b = 0; b < nb; b++) { /* pass 2's sum r^2 per finite block, and the mean its m2 is about */
        ref_sum_sq[b] = values[b].sum_sq;
        ref_mean[b] = values[b].m2_later ? values[b].sum / (double)block_len(n, b) : NAN;
    }
    const double ref_rms = rt.n_finite > 0 ? sqrt(rt.sum_sq / (double)rt.n_finite) : 0.0;
    out->nan_ref = rt.nan;
    out->inf_ref = rt.inf;
    out->ref_absmax = rt.absmax;
    out->ref_mean = rt.mean;
    if (shortcut && rt.same_bits) {
        m2_job mj = {ref, values};
        eq_parallel_for(nb, EQ_STATS_BLOCKS_PER_RANGE, m2_range, &mj);
        combine_values(values, nb, &rt);
        out->ref_std = rt.n_finite > 0 ? sqrt(rt.m2 / (double)rt.n_finite) : 0.0; /* population std */
        st = identical_metrics(ref, &rt, ref_rms, out);
        goto cleanup;
    }

    double floor_scale = ref_rms; /* the floor of the ULP scale (compare.h) */
    if (ref_rms == 0.0) {
        value_totals tt;
        value_block *test_values = calloc((size_t)(nb > 0 ? nb : 1), sizeof *test_values);
        if (test_values == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %" PRId64 " block statistics", nb);
            goto cleanup;
        }
        value_pass(test, NULL, test_values, &tt);
        free(test_values);
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
    eq_pairs_job job = {ref, test, ref_rms, floor_scale, atol, tol->rtol, significand_bits(out->dtype),
                     out->dtype == EQ_FP64 ? -1022 : -126, ref_sum_sq, ref_mean, pairs, histograms,
                     guess.kind == EQ_GUESS_WINDOW ? &guess : NULL, (int64_t)guess.lo};
    eq_pair_block p;
    eq_pairs_pass(&job, &p);
    for (int64_t b = 0; b < nb; b++) /* the reference's squared deviations, summed in pass 2 */
        if (values[b].m2_later) values[b].m2 = pairs[b].ref_m2;
    combine_values(values, nb, &rt);
    out->ref_std = rt.n_finite > 0 ? sqrt(rt.m2 / (double)rt.n_finite) : 0.0; /* population std */
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
    free(ref_sum_sq);
    free(ref_mean);
    free(pairs);
    free(histograms);
    return st;
}
