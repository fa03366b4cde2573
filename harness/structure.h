/* Structure: what rounding cannot do. A bug is structured (a factor on one rank's partial, a bias
 * added once per rank, one rank's stale shard); the rounding of another summation order is not:
 * given the reference, its differences are zero-mean, with no pattern that repeats from one part of
 * the tensor to another. Three tests, each judged against the spread the tensor's own differences
 * show between independent blocks of it, so no noise model is assumed and a tensor whose rounding
 * is larger (deeper layers, bf16) is allowed more:
 *
 *   factor  test ~ (1 + f) ref. f = <d, ref> / <ref, ref> (d = test - ref). Its rounding spread
 *           comes from the residual d - f ref summed over G blocks of rows and, separately, of
 *           columns (a 2-D view [R, N], N the last dimension), the larger of the two (errors that
 *           run along a row or a column are counted as one, not as N independent ones). Under
 *           rounding, f / spread is Student-t with G - 1 degrees of freedom.
 *   shift   test ~ ref + b, b a vector over the last dimension repeated on every row (a bias
 *           added on each tp rank). Each row's mean is taken out (a per-row offset is no shift),
 *           then the column means of each block of rows. A pattern estimated from one half of the
 *           blocks is projected on each block of the other half: under rounding the projections
 *           are zero-mean and the t statistic of their mean is Student-t with G/2 - 1 degrees of
 *           freedom; with a shift they all carry |b|^2. Two splits (alternate blocks; first half
 *           against second half, which separates whole sequences) in both directions: the
 *           smallest of the four statistics counts, so errors correlated along neighbouring rows
 *           (causal attention carries a value's error down its sequence) cannot pass for a shift.
 *   shard   one tensor-parallel rank's shard off (a stale weight, a LayerNorm eps that differs
 *           on one rank): for a tensor the test run assembled from tp shards, the relative error
 *           energy ||d||^2 / ||ref||^2 of the worst shard against the other shards'. Every rank
 *           runs the same code on shards of the same shape, so rounding gives every shard about
 *           the same; flagged when the worst has EQ_SHARD_RATIO times the others', its relative
 *           RMS error is at least EQ_SHARD_REL_U (2) u of the run's dtype and at least EQ_SHARD_SHARE
 *           (half) of its elements differ
 *           (a few flipped last bits in one shard are not a stale shard).
 *
 * The factor and shift limits are the Student-t quantiles of EQ_STRUCTURE_ALPHA (per test per
 * tensor, one-sided for shift, two-sided for factor): at 100 tensors a report, a false alarm from
 * these tests is at most about 3e-4 of honest reports (measured: README "How sure is a verdict on your run").
 * A test needs at least EQ_STRUCTURE_MIN_BLOCKS blocks (rows or columns) and the tensor
 * EQ_STRUCTURE_MIN_ELEMENTS elements; smaller tensors, and a loss (one element), are left to the other
 * evidence. A factor or shift no larger than EQ_STRUCTURE_FLOOR_U units of roundoff of the
 * accumulation's precision (fp32 for bf16 and fp32 runs: 9.5e-7) is not judged: long fp32 sums of
 * same-sign terms, reordered, carry a bias about that size (spd's fp32 dp8-tp4 CI gradients: a factor
 * 1 + 1.1e-7 at t 8). Non-finite pairs are left out. */
#ifndef EQUIV_HARNESS_STRUCTURE_H
#define EQUIV_HARNESS_STRUCTURE_H

#include "harness/capture.h"
#include "harness/compare.h"


/* eq_structure (the tests' results) is declared with the other evidence in harness/compare.h. */


/* The three tests on one pair; shard_dim < 0 or shards < 2: no shard test. */
eq_status eq_structure_of(const eq_tensor *ref, const eq_tensor *test, eq_dtype run_dtype, int shard_dim, int shards,
                          eq_structure *out);

/* Fills the structure of cmp's activations, gradients and losses from the two runs (the test
 * run's tp shards from its entries' assembled_tp_dim). */
eq_status eq_structure_apply(eq_comparison *cmp, const eq_capture *ref, const eq_capture *test);

/* Is any test above its limit? */
int eq_structure_flagged(const eq_structure *s);

/* How close the tensor came to being flagged: the largest over the tests of its statistic over its
 * limit (the shard test: the least of its three conditions' ratios); >= 1 exactly when flagged, 0
 * when no test ran. */
double eq_structure_margin(const eq_structure *s);

/* Why, for a flagged structure: "systematic factor 1.0025, rounding allows 1 +- 0.00031 (t 41 >
 * 6.2)", "a shift repeated on every row, 0.9% of rms(ref) (t 88 > 17)", "tp rank 3's shard off:
 * rel 1.1e-02, x4.2e+03 the other shards' error energy"; the strongest first. "" otherwise. */
const char *eq_structure_reading(const eq_structure *s, char *buf, size_t len);

/* The upper alpha quantile of Student's t with df degrees of freedom (df >= 1; alpha in (0, 0.5)). */
double eq_student_t_quantile(double alpha, int df);

#endif
