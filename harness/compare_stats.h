/* The per-element statistics behind eq_compare_tensors (harness/compare.h), over fixed blocks of
 * EQ_STATS_BLOCK elements: each block's partial counts, sums and maxima depend only on the block,
 * and the blocks are combined in block order, so every metric is the same for any thread count
 * (harness/base/parallel.h). Counts, maxima, argmax (the first index of the max), the median and
 * the threshold shares are exact; sums (mean |d|, rel_fro, cosine, ls_scale, mean_ratio, the
 * reference's mean and std) are blocked sums, within a block over 4 interleaved lanes. */
#ifndef EQUIV_HARNESS_COMPARE_STATS_H
#define EQUIV_HARNESS_COMPARE_STATS_H

#include "harness/compare.h"

#define EQ_STATS_BLOCK 4096
/* Blocks a worker takes at least; a tensor of fewer than 2 ranges' elements (EQ_STATS_PARALLEL_MIN)
 * runs whole on the calling thread, so eq_compare_captures runs such tensors side by side. */
#define EQ_STATS_BLOCKS_PER_RANGE 8
#define EQ_STATS_PARALLEL_MIN ((int64_t)2 * EQ_STATS_BLOCKS_PER_RANGE * EQ_STATS_BLOCK)

/* Every field of out from ref and test (the same shape and dtype) but dtype and count, which the
 * caller sets first (ULPs are counted in out->dtype). With `shortcut`, a pair with the same bits
 * takes a path that reads only ref and gives the same metrics, field for field (compare_test). */
eq_status eq_stats_compute(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol, int shortcut,
                           eq_metrics *out);

#endif
