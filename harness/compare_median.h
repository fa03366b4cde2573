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

/* Where the median of |d| lies, guessed from a sample of the pairs before pass 2, so that pass 2
 * gathers the |d| around it as it goes and the median costs no pass of its own. The sample:
 * EQ_MEDIAN_SAMPLE_RUNS runs of EQ_MEDIAN_SAMPLE_RUN neighbours, run r starting at element
 * r (n - RUN) / (RUNS - 1); the window: the histogram bins from the sample's quantile 0.5 - 0.02 to
 * its 0.5 + 0.02. No guess (first_bin > last_bin) where the sample's median is 0, where the window
 * would hold more than an eighth of the sample, or for fewer than 4 * EQ_MEDIAN_DIRECT pairs. A
 * guess that missed (the median's ranks outside the window, or more |d| in it than `room`) costs
 * the passes it would have saved: eq_median_abs falls back to them; the median is exact either way. */
#define EQ_MEDIAN_SAMPLE_RUNS 1024
#define EQ_MEDIAN_SAMPLE_RUN 64
typedef struct {
    int64_t first_bin, last_bin; /* the histogram bins gathered; first_bin > last_bin: no guess */
    uint64_t lo, hi;             /* their |d| as fp64 bits: [lo, hi), |d| = 0 left out */
    double *values;              /* [room]: the |d| offered, in any order */
    int64_t room;
    _Atomic int64_t count;       /* |d| offered so far; more than room: the guess is void */
    int64_t front_bin;           /* the bin whose |d| are at the front of values, or -1 */
    int64_t selected;            /* the last rank among them selected (all after it are >= it), or -1 */
} eq_median_guess;

eq_status eq_median_guess_begin(const eq_tensor *ref, const eq_tensor *test, eq_median_guess *g);
/* The |d| of one block's pairs (NaN or Inf where a side is not finite) that lie in the window. */
void eq_median_guess_offer(eq_median_guess *g, const double *d, int64_t len);
void eq_median_guess_end(eq_median_guess *g);

/* The median of |test - ref| over the n_finite pairs where both are finite, n_zero of them with
 * |d| = 0: the mean of the two middle values when n_finite is even (torch.median would return
 * the lower one). bins: the combined histogram's N_BINS counts; NULL: select over every |d|.
 * guess: what pass 2 gathered (or NULL); its values are reordered. */
eq_status eq_median_abs(const eq_tensor *ref, const eq_tensor *test, const int64_t *bins, int64_t n_finite,
                        int64_t n_zero, eq_median_guess *guess, double *median);

#endif
