/* --truth: the reference and the layout's run, each against the fp64 run of the same step
 * (dp1-tp1), so a reader sees whether a layout is less accurate than the reference or only
 * rounded differently (seed 002 cannot tell those apart: it compares two roundings).
 *
 * Per tensor, over the elements finite in all three runs, in fp64: max |run - truth| and the
 * relative Frobenius error ||run - truth|| / ||truth||, for the reference and the test run. The
 * ratio test_rel / ref_rel reads: about 1, the layout is as accurate and only rounds differently;
 * well above 1, the layout loses accuracy; below 1, it gains (e.g. fewer roundings per sum). */
#ifndef EQUIV_HARNESS_TRUTH_H
#define EQUIV_HARNESS_TRUTH_H

#include "harness/capture.h"
#include "harness/compare.h"

/* A user's run judged against a truth (`equiv compare REF TEST --truth DIR`): the layout is not
 * rounding where it is more than EQ_TRUTH_RATIO times further from the truth than the reference is,
 * and further than EQ_TRUTH_FLOOR_U units of roundoff of the runs' dtype (below that, any few
 * roundings explain it). Measured on honest runs at dp 2..8, tp 2..8 and dp x tp, five seeds, bf16
 * and fp32: README "How sure is a verdict". */
#define EQ_TRUTH_RATIO 3.0
#define EQ_TRUTH_FLOOR_U 1.0
#define EQ_TRUTH_MIN_ELEMENTS 64 /* fewer: the ratio of a few roundings says nothing (a loss 1 ULP off
                                    against a reference 0.36 u from the truth read x4.97) */

/* test_rel / ref_rel: how many times further from the truth the layout is than the reference (Inf
 * when only the reference is exact, 1 when both are). */
double eq_truth_ratio(const eq_truth *t);

/* Is the layout less accurate than rounding allows (judged runs of tensors of at least
 * EQ_TRUTH_MIN_ELEMENTS elements only)? */
int eq_truth_flagged(const eq_truth *t);

/* Fills the truth fields of cmp's activation, gradient and loss results whose path the truth run
 * has. EQ_ERR_INPUT naming the tensor when the truth's shape differs from the reference's. */
eq_status eq_truth_apply(eq_comparison *cmp, const eq_capture *ref, const eq_capture *test, const eq_capture *truth);

/* "as accurate", "less accurate (xR)", "more accurate (xR)" from the two relative errors: within a
 * factor 2 of each other counts as as accurate (two roundings of the same sum scatter that much),
 * and so do two errors both at most 4 units of roundoff ("as accurate, both within 4 u"): the
 * ratio of two single roundings says nothing. */
const char *eq_truth_reading(const eq_truth *t, char *buf, size_t len);

#endif
