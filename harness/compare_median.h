/* The median of |d| over the finite pairs of two tensors, for eq_stats_compute
 * (harness/compare_stats.c), exact and the same for any thread count: from the histogram of |d|
 * that pass 2 counts (harness/compare_blocks.h: bins by the top 16 bits of |d|), one more pass
 * gathers the |d| of the bin that holds the median, which are selected. A bin of more than a
 * sixteenth of the pairs (bf16's few distinct differences) first has its least and largest |d| found
 * and how many equal each, which names the median unless it lies strictly between them.
 * Internal to the comparison. */
#ifndef EQUIV_HARNESS_COMPARE_MEDIAN_H
#define EQUIV_HARNESS_COMPARE_MEDIAN_H

#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"

/* Up to this many elements the median selects over every |d| at once, with no histogram. */
#define EQ_MEDIAN_DIRECT ((int64_t)1 << 16)

/* The workers' histograms ([workers][HISTOGRAM_SIZE], harness/compare_blocks.h) and their copies
 * summed into the first copy's N_BINS counts (counts: any order), the n_zero zeros taken out of
 * bin 0. */
void eq_median_histograms_combine(int64_t *histograms, int workers, int64_t n_zero);

/* The median of |test - ref| over the n_finite pairs where both are finite, n_zero of them with
 * |d| = 0: the mean of the two middle values when n_finite is even (torch.median would return
 * the lower one). bins: the combined histogram's N_BINS counts; NULL: select over every |d|. */
eq_status eq_median_abs(const eq_tensor *ref, const eq_tensor *test, const int64_t *bins, int64_t n_finite,
                        int64_t n_zero, double *median);

#endif
