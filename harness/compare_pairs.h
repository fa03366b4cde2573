/* Pass 2 of the comparison's statistics (harness/compare_stats.c): the pairs of two tensors, per
 * block of EQ_STATS_BLOCK elements, after pass 1 has found the reference's scale. Per block: the
 * elements whose bits differ, NaN and Inf, |d| and its sums (mean |d|, rel_fro, cosine, ls_scale),
 * mean(t / r) over |r| >= rms(ref), ULPs, max |d| / (atol + rtol |r|), the threshold shares, and
 * what the median needs (harness/compare_median.h): the histogram of |d| or, with a guess, the
 * |d| below its window and those in it. Partials depend only on the block and combine in block
 * order. Internal to the comparison. */
#ifndef EQUIV_HARNESS_COMPARE_PAIRS_H
#define EQUIV_HARNESS_COMPARE_PAIRS_H

#include <stdint.h>

#include "harness/compare.h"
#include "harness/compare_median.h"

/* One block's (or, combined, the tensor's) counts, sums and maxima of the pairs. */
typedef struct {
    int64_t n_differ, nan_test, inf_test, nonfinite_mismatch;
    int64_t n_finite, n_zero, n_below, n_ratio, n_outside, above[EQ_N_THRESHOLDS];
    double sum_abs, sum_d2, sum_r2, sum_t2, sum_tr, ratio_sum;
    double ref_m2; /* the reference's squared deviations about ref_mean (a block's only) */
    double max_abs, ulp_at_max, max_ulp, max_tol_ratio;
    int64_t argmax; /* the first index of max_abs; -1: no |d| > 0 */
} eq_pair_block;

/* What pass 2 takes: the pair, the scales pass 1 found, the tolerance and where its partials go. */
typedef struct {
    const eq_tensor *ref, *test;
    double ref_rms, floor_scale, atol, rtol;
    int significand_bits, min_exponent; /* of the dtype ULPs are counted in */
    const double *ref_sum_sq;           /* [block_count(numel)]: pass 1's sum of r^2 per block, in the lanes of
                                         * pass 2's (a finite block's sum_r2) */
    const double *ref_mean;             /* [block_count(numel)]: the mean of a finite reference block (NaN:
                                         * one with NaN or Inf), about which pass 2 sums ref_m2 */
    eq_pair_block *blocks;                 /* [block_count(numel)] */
    int64_t *histograms;                /* [workers][HISTOGRAM_SIZE] counts, or NULL */
    eq_median_guess *guess;             /* a window: gathers the |d| in it, or NULL */
    int64_t below;                      /* the window's lo (0: none): pairs with 0 < |d| below it are counted */
} eq_pairs_job;

/* Every block of the pair into job->blocks, and their combination into *total (the max and its
 * index: the first block's that holds it). */
void eq_pairs_pass(const eq_pairs_job *job, eq_pair_block *total);

#endif
