/* Where the median of |d| lies, guessed from a sample of the pairs before pass 2
 * (harness/compare_stats.c), so that pass 2 gathers the |d| around it as it goes, counts those
 * below, and builds no histogram: the median then costs no pass of its own. The sample:
 * EQ_MEDIAN_SAMPLE_RUNS runs of EQ_MEDIAN_SAMPLE_RUN neighbours, run r starting at element
 * r (n - RUN) / (RUNS - 1). The guess:
 *   zero:   the sample's median is 0 (most pairs the same bits): nothing to gather;
 *   window: the |d| between the sample's quantiles 0.5 - 0.02 and 0.5 + 0.02, widened to whole
 *           histogram bins (harness/compare_blocks.h), gathered, at most an eighth of the pairs;
 *   none:   fewer than 4 EQ_MEDIAN_DIRECT pairs, a sample mostly NaN or Inf, or a window that would
 *           hold more than an eighth of the sample (bf16's few distinct differences): pass 2
 *           builds the histogram as before.
 * A guess that missed (the median's ranks among neither the zeros nor the window, or more |d| in
 * the window than its room) costs the histogram's pass it saved (harness/compare_median.c); the
 * median is exact either way. Internal to the comparison. */
#ifndef EQUIV_HARNESS_COMPARE_MEDIAN_GUESS_H
#define EQUIV_HARNESS_COMPARE_MEDIAN_GUESS_H

#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"

#define EQ_MEDIAN_SAMPLE_RUNS 1024
#define EQ_MEDIAN_SAMPLE_RUN 64

typedef enum { EQ_GUESS_NONE, EQ_GUESS_ZERO, EQ_GUESS_WINDOW } eq_guess_kind;

typedef struct {
    eq_guess_kind kind;
    uint64_t lo, hi;       /* window: its |d| as fp64 bits, [lo, hi), lo >= 1 (|d| = 0 left out); else 0, 0 */
    double *values;        /* [room]: the window's |d| offered, in any order */
    int64_t room;
    _Atomic int64_t count; /* |d| offered so far; more than room: the window is void */
    int64_t n_below;       /* set after pass 2: the finite pairs with 0 < |d| < lo */
    /* the selection within the window: a finer histogram of it, and its sub-bin at the front of values */
    int64_t *fine;         /* [EQ_MEDIAN_FINE_BINS] counts, or NULL before the first selection */
    int shift;             /* sub-bin of a |d|: (bits - lo) >> shift */
    int64_t front;         /* the sub-bin whose |d| are at the front of values, or -1 */
    int64_t selected;      /* the last rank among them selected (all after it are >= it), or -1 */
} eq_median_guess;
#define EQ_MEDIAN_FINE_BINS ((int64_t)1 << 12) /* 32 KiB of counts: in the first-level cache */

eq_status eq_median_guess_begin(const eq_tensor *ref, const eq_tensor *test, eq_median_guess *g);
/* The |d| of one block's pairs (NaN or Inf where a side is not finite) that lie in the window. */
void eq_median_guess_offer(eq_median_guess *g, const double *d, int64_t len);
/* The rank-th smallest |d| (0-based) of the finite pairs where the window holds it (*found 1;
 * n_zero zeros and n_below smaller |d| come first), else *found 0. Reorders the gathered values. */
eq_status eq_median_guess_value(eq_median_guess *g, int64_t n_zero, int64_t rank, int *found, double *value);
void eq_median_guess_end(eq_median_guess *g);

#endif
