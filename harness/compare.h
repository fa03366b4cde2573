/* Comparison of a run against its reference, tensor by tensor, computed in fp64.
 *
 * NaN and Inf are counted first; the numeric metrics are taken over the elements where both
 * sides are finite.
 *
 * ULPs are counted in the run's dtype (the coarser of the tensor's storage dtype and the run's:
 * a bf16 run's loss kept in fp64 counts bf16 ULPs) at the scale
 *   s_i = max(|ref_i|, rms(ref))       (rms over the finite reference values)
 * with ulp(s) = 2^(floor(log2 s) - p + 1), p = 8 for bf16, 24 for fp32, 53 for fp64. So 0.03125
 * at |ref| in [4, 8) is 1 bf16 ULP, not 4, and an element whose reference is 0 or near 0, or whose
 * sign flips, is measured against the spacing of the tensor's typical values rather than the
 * subnormal spacing (which made one rounding of a zero reference 1e37 ULP). An all-zero reference
 * takes rms(test) as its floor; both all zero, the smallest normal's spacing. */
#ifndef EQUIV_HARNESS_COMPARE_H
#define EQUIV_HARNESS_COMPARE_H

#include <stdint.h>

#include "harness/capture.h"
#include "harness/case_file.h"
#include "harness/tolerance.h"

#define EQ_N_THRESHOLDS 4
/* |d| thresholds of the per-layer tables (seed 002 section 2.1). */
extern const double eq_thresholds[EQ_N_THRESHOLDS]; /* 1e-4, 1e-3, 5e-3, 1e-2 */

typedef struct {
    eq_dtype dtype;                         /* the run's dtype (see above): ULPs and what
                                               rounding can explain are judged in it */
    int64_t count;                          /* elements */
    int64_t nan_ref, inf_ref, nan_test, inf_test;
    int64_t nonfinite_mismatch;             /* elements where exactly one side is NaN/Inf, or both
                                               are but differ (NaN vs Inf, +Inf vs -Inf) */
    int64_t n_finite;                       /* pairs where both sides are finite: the population
                                               of the numeric metrics below */
    int64_t n_differ;                       /* elements whose bits differ */
    double max_abs, mean_abs, median_abs;   /* of |test - ref| over finite pairs */
    int64_t argmax;                         /* flat index of the max |d| (-1 if none) */
    double frac_above[EQ_N_THRESHOLDS];     /* share of elements with |d| > threshold, 0..1 */
    double max_ulp;                         /* max over elements of |d_i| / ulp(s_i) (see above) */
    double ulp_at_max;                      /* the max |d| in ULPs at its own element's scale:
                                             * seed 002's 0.03125 at |ref| in [4, 8) is 1 */
    double ulp_floor;                       /* the floor of s_i: rms(ref) (see above) */
    double rel_fro;                         /* ||test - ref||_F / ||ref||_F (0 if both 0) */
    double cosine;                          /* <test,ref> / (||test|| ||ref||) (1 if both 0) */
    double ls_scale;                        /* <test,ref> / <ref,ref>: uniform factor (1 if ref 0) */
    double mean_ratio;                      /* mean(dist/ref): the mean of test_i / ref_i over the finite
                                             * pairs with |ref_i| >= rms(ref) (seed 001's grad-check line,
                                             * kept to the elements well above the rounding noise, where a
                                             * ratio names a scale: 1/8 or 16 names a scaling bug; near-
                                             * zero references made it 1.06 or 12.9 on plain rounding).
                                             * 1 if there are none (n_mean_ratio 0). */
    int64_t n_mean_ratio;                   /* elements mean_ratio is taken over */
    double worst_rel;                       /* worst relative error: max |d| / max |ref| (the error at the
                                             * tensor's own scale, robust to ref_i near 0; 0 if both 0,
                                             * Inf if only ref is 0) */
    double ref_absmax, ref_mean, ref_std;   /* the reference's own scale */
    int64_t n_outside;                      /* elements failing |d| <= atol + rtol |ref| */
    double max_tol_ratio;                   /* max |d| / (atol + rtol |ref|); > 1 is outside */
} eq_metrics;

/* Compares two tensors of the same shape and dtype (EQ_ERR_INPUT otherwise, naming both shapes),
 * counting ULPs in their own dtype. */
eq_status eq_compare_tensors(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol,
                             eq_metrics *out);
/* The same for tensors of a run in run_dtype (ULPs in the coarser of the two; see above). */
eq_status eq_compare_tensors_of_run(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol,
                                    eq_dtype run_dtype, eq_metrics *out);
/* The same, always through the full per-element pass: eq_compare_tensors_of_run takes a shortcut
 * for tensors with the same bits (compared block by block) that gives the same metrics; the unit
 * test compares the two. Both are computed over fixed blocks (harness/compare_stats.h), so no
 * metric depends on the thread count. */
eq_status eq_compare_tensors_full(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol,
                                  eq_dtype run_dtype, eq_metrics *out);

/* Observation from metrics. NaN or Inf on one side only, or of another kind or sign, is
 * NON-FINITE; so is a NaN in both runs at the same places (the reference itself computed no value
 * there: nothing says the layout would have computed the right one) and a tensor with no finite
 * pair at all (all Inf in both: nothing was compared). Inf at the same places in both runs with a
 * finite rest (a mask's -Inf) compares as equal there, and the diagnosis says so. */
eq_observed eq_observe(const eq_metrics *m);

/* NaN in both runs at the same places, or no finite pair (and no NaN or Inf that differs): the
 * NON-FINITE that no difference between the runs made. */
int eq_nonfinite_in_both(const eq_metrics *m);

/* A short human diagnosis that names what the difference looks like, worst first, e.g.
 * "bit-exact", "2 NaN in test", "uniform scale x8 (ls 8, cos 1.000000)",
 * "1 element differs, 1 ULP at index 17", "rounding: max 2 ULP, rel 3.1e-03",
 * "all 4096 elements NaN in both runs: ...", "bit-exact; 12 of 4096 elements Inf in both runs, at
 * the same places (compared as equal)". */
const char *eq_diagnose(const eq_metrics *m, char *buf, size_t len);

/* The whole number n, or 1/n, a uniform factor is within rounding of ("8", "-1", "1/16"), else the
 * least-squares scale to 4 significant digits ("1.5"), when eq_diagnose names the difference a
 * uniform scale (the direction kept, |ls - 1| > 1e-2); NULL (buf "") otherwise. */
const char *eq_factor_name(const eq_metrics *m, char *buf, size_t len);

/* The row-major position of flat index `flat` in a tensor of this shape, into index[0..ndim);
 * 0 when flat is outside 0..numel-1 (e.g. argmax -1), 1 otherwise. */
int eq_unflatten_index(int ndim, const int64_t *shape, int64_t flat, int64_t *index);

/* What rounding-error theory says of a tensor a model computes by a GEMM whose reduction a layout
 * splits (harness/rounding_bound.h); absent for every other tensor. */
typedef struct {
    int applies;                        /* a bound was computed */
    int64_t terms;                      /* K, the length of each dot product */
    int ref_partitions, test_partitions; /* T of each run */
    double det_ratio;                   /* max over elements of |d_i| / deterministic bound_i (not
                                           max |d| / det_bound_max): > 1 cannot be rounding */
    double prob_ratio;                  /* max over elements of |d_i| / probabilistic bound_i */
    double det_bound_max, prob_bound_max; /* the largest bound over the elements */
    double prob_lambda;                 /* the probabilistic bound's lambda ... */
    double prob_failure;                /* ... for which it fails per element with at most this
                                           probability (harness/rounding_bound.h) */
} eq_theory;

/* What rounding cannot do: a factor, a shift, one tp shard off (harness/structure.h). */
#define EQ_STRUCTURE_BLOCKS 16     /* G: blocks of rows (and of columns) a tensor is cut into */
#define EQ_STRUCTURE_MIN_BLOCKS 8  /* fewer rows (columns) than this: that view is not tested */
#define EQ_STRUCTURE_ALPHA 1e-6    /* false-alarm probability per test per tensor */
#define EQ_SHARD_RATIO 16.0        /* the worst shard's relative error energy over the others' */
#define EQ_SHARD_REL_U 2.0         /* its relative RMS error, in units of roundoff of the run's dtype */
#define EQ_SHARD_SHARE 0.5         /* the share of its elements that differ */
#define EQ_STRUCTURE_MIN_ELEMENTS 256 /* fewer: block sums of a handful of roundings are not normal */
#define EQ_STRUCTURE_FLOOR_U 16.0  /* a factor or shift within 16 u of the accumulation (fp32: 9.5e-7) is
                                      not judged: long fp32 sums of same-sign terms carry a bias that size */

typedef struct {
    int applies;                /* at least one test ran */
    int factor_tested;
    double factor;              /* 1 + f: the least-squares scale <test,ref> / <ref,ref> */
    double factor_spread;       /* rounding's standard error of it (between blocks) */
    double factor_t, factor_limit; /* |f| / spread and the t quantile it must stay below */
    int shift_tested;
    double shift_rel;           /* rms of the estimated shift b over rms(ref) */
    double shift_t, shift_limit;
    int shard_tested;
    int shard_count, shard_dim; /* tp shards along dim */
    int shard_worst;            /* the tp rank whose shard is worst */
    double shard_ratio;         /* its relative error energy over the other shards' (Inf: they are exact) */
    double shard_rel;           /* its relative RMS error */
    double shard_share;         /* the share of its elements that differ */
    double unit_roundoff;       /* of the run's dtype */
    double floor;               /* EQ_STRUCTURE_FLOOR_U u of the accumulation: fp32's for bf16 and fp32 runs */
    int factor_flagged, shift_flagged, shard_flagged;
} eq_structure;

/* --truth: how far each run is from the fp64 run of the same step (harness/truth.h). */
typedef struct {
    int applies;                /* the truth run has this tensor */
    double ref_max, test_max;   /* max |run - truth| */
    double ref_rel, test_rel;   /* ||run - truth||_F / ||truth||_F */
    double unit_roundoff;       /* of the runs' dtype */
    eq_dtype truth_dtype;       /* the truth run's (fp64 for equiv's --truth; a user's: one precision up) */
    int judged;                 /* a user's run compared with --truth DIR: a layout less accurate than the
                                   reference by more than EQ_TRUTH_RATIO is not rounding (harness/truth.h) */
    int64_t elements;           /* finite in all three runs */
} eq_truth;

typedef struct {
    char path[EQ_NAME_MAX]; /* "layers/07/fc2_out" */
    int layer;
    char name[EQ_NAME_MAX];
    eq_role role;
    int ndim;                   /* the compared tensors' shape (row-major): the flat m.argmax is */
    int64_t shape[EQ_MAX_DIMS]; /* at the position eq_unflatten_index gives */
    eq_metrics m;
    eq_theory theory;
    eq_truth truth;
    eq_structure structure; /* a user's run (source set): the tests of harness/structure.h */
    eq_expect expect;   /* inputs and params are always expected bit_exact */
    eq_expect_size expect_size; /* of a differs from the case's [expect.<grads>] (EQ_SIZE_ANY: none) */
    /* The verdict: written by eq_judge (harness/verdict.h) from the fields above, and by nothing else. */
    eq_observed observed;
    int as_expected;
    char diagnosis[320];
} eq_tensor_result;

typedef struct {
    eq_run_meta ref_meta, test_meta;
    eq_tolerance tol;         /* activations and losses (and inputs, params: bit_exact anyway) */
    eq_tolerance grad_tol;    /* gradients; the same entry as tol unless the case names one */
    eq_expect expect;         /* for activations, gradients and losses */
    eq_tensor_result *results; /* one per tensor, in the reference's capture order */
    int count;
    int n_unexpected;         /* results not as expected, findings, a curve not as expected (eq_judge's, harness/verdict.h) */
    /* What assembling the runs found (harness/run_load.h), "reference: ..." or "test run: ...":
     * each is not as expected. */
    char (*findings)[EQ_FINDING_MAX];
    int n_findings;
    /* --steps N > 1: the two runs' training curve (harness/train_curve.h), owned; its verdict
     * (eq_steps_curve_judge) counts in n_unexpected. NULL: one step. */
    struct eq_steps_curve *steps;
} eq_comparison;

/* Compares every tensor of `test` against the tensor of the same path in `ref`. Both must hold
 * the same paths with the same shapes and dtypes (EQ_ERR_INPUT naming the first that differs).
 * Evidence only: metrics, expectations and findings; eq_judge (harness/verdict.h) gives the verdict. */
eq_status eq_compare_captures(const eq_capture *ref, const eq_capture *test, const eq_tolerance *tol,
                              eq_expect expect, eq_comparison *out);
/* The same, with gradients (role grad) judged by grad_tol. */
eq_status eq_compare_captures_by_role(const eq_capture *ref, const eq_capture *test, const eq_tolerance *tol,
                                      const eq_tolerance *grad_tol, eq_expect expect, eq_comparison *out);
void eq_comparison_free(eq_comparison *c);
/* The check eq_compare_captures starts with (the same paths, shapes and dtypes in both), which
 * needs no data: runs' indexes will do (harness/run_stream.h). */
eq_status eq_compare_check_paths(const eq_capture *ref, const eq_capture *test);

/* Takes the case's per-tensor expectations ([expect.<grads>], harness/case_file.h) for the test
 * run's convention and layout into the expect and expect_size of cmp's activations, gradients and
 * losses that a line names (evidence: eq_judge holds a differs to its stated size). */
void eq_comparison_apply_case(eq_comparison *cmp, const eq_case *kase);

#endif
