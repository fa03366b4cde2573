/* The median of |d| over the finite pairs of two tensors, for eq_stats_compute
 * (harness/compare_stats.c), exact and the same for any thread count. Where pass 2 had a guess
 * (harness/compare_median_guess.h), from the zeros or the |d| it gathered in the guess's window.
 * Else (or where the guess missed) from a histogram of |d| (harness/compare_blocks.h: bins by the
 * top 16 bits of |d|) that pass 2 counted (or a pass of its own): one more pass gathers the |d|
 * of the bin that holds the median, which are selected. A bin of more than a sixteenth of the
 * pairs (bf16's few distinct differences) first has its least and largest |d| found and how many
 * equal each, which names the median unless it lies strictly between them. Internal to the
 * comparison. */
#ifndef EQUIV_HARNESS_COMPARE_MEDIAN_H
#define EQUIV_HARNESS_COMPARE_MEDIAN_H

#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"
#include "harness/compare_median_guess.h"

/* Up to this many elements the median selects over every |d| at once, with no histogram. */
#define EQ_MEDIAN_DIRECT ((int64_t)1 << 16)

/* The workers' histograms ([workers][HISTOGRAM_SIZE], harness/compare_blocks.h) and their copies
 * summed into the first copy's N_BINS counts (counts: any order), the n_zero zeros taken out of
 * bin 0. */
void eq_median_histograms_combine(int64_t *histograms, int workers, int64_t n_zero);

/* The k-th smallest of a[0..n) (0-based) by Hoare's selection, partially reordering a: on
 * return every a[j] with j > k is >= a[k]. Expected O(n). */
double eq_median_select(double *a, int64_t n, int64_t k);

/* The median of |test - ref| over the n_finite pairs where both are finite, n_zero of them with
 * |d| = 0: the mean of the two middle values when n_finite is even (torch.median would return
 * the lower one). Up to EQ_MEDIAN_DIRECT elements, selected among every |d|; past that, from the
 * guess's window where it holds the middle ranks (guess: what pass 2 gathered, or NULL; its values
 * are reordered), else from bins (the combined histogram of pass 2, or NULL: built here by a pass).
 */
eq_status eq_median_abs(const eq_tensor *ref, const eq_tensor *test, const int64_t *bins, int64_t n_finite,
                        int64_t n_zero, eq_median_guess *guess, double *median);

#endif
