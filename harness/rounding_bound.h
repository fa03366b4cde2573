/* A tolerance you can explain: the rounding-error bound that theory gives for the difference
 * between two runs of the same GEMM whose reduction dimension is split differently.
 *
 * A GEMM site of a model is   out [M, N] = a [M, K] * b [N, K]^T   (a: any leading dims, last K).
 * A run splits K into T partitions (row-parallel: T = tp; otherwise T = 1). Partition t computes
 * its partial p_t with fp32 accumulation (fp64 for fp64 runs) and writes it in the run's dtype;
 * the T partials are then all-reduced in that dtype by the run's algorithm, rounding after every
 * add (reductions/fold.c). With u_a the accumulation's unit roundoff, u the dtype's (0 where the
 * output needs no extra rounding), n = K/T, and per output element
 *   y = sum_k a_k b_k (exact),  S = sum_k |a_k b_k|,  Q = sum_t |p_t| (exact partials),
 * one run differs from y by at most (Higham, Accuracy and Stability of Numerical Algorithms,
 * 2nd ed., section 3.1, gamma_n = n u / (1 - n u); the partial sums' bound of eq. 3.5):
 *   T = 1:   gamma_K(u_a) S + u (|y| + gamma_K(u_a) S)
 *   T > 1:   e_p + gamma_h(u) (Q + e_p)          e_p = gamma_n(u_a) S + u (Q + gamma_n(u_a) S)
 *            h = T - 1 (ring, seq: every partial passes through up to T - 1 rounded adds),
 *                ceil(log2 T) (tree); fp32acc adds in fp32 and rounds once:
 *                gamma_{T-1}(u_a) (Q + e_p) + u (|y| + e_p + gamma_{T-1}(u_a)(Q + e_p)).
 * The deterministic bound on |ref - test| is the sum of both runs' bounds: a difference above it
 * cannot be rounding, whatever the order (det_ratio > 1 is proof of a bug). The probabilistic
 * version (Higham and Mary, "A new approach to probabilistic rounding error analysis", SIAM J. Sci.
 * Comput. 41(5), 2019) replaces each gamma_n(u) by
 *   gamma~_n(lambda, u) = exp(lambda sqrt(n) u + n u^2 / (1 - u)) - 1   (~ lambda sqrt(n) u);
 * single roundings keep u. Under their model (rounding errors independent, of mean zero) a product
 * of n factors (1 + delta_j) stays within gamma~_n(lambda) of 1 with probability at least
 * 1 - 2 exp(-lambda^2 (1 - u)^2 / 2), and an inner product of n terms within gamma~_n(lambda) S
 * with probability at least 1 - 2 n exp(-lambda^2 (1 - u)^2 / 2) (one such product per term).
 * One element of the difference of two runs involves at most N = 2 (K + T_ref + T_test) such
 * products (per run: one per term of K, one per partial, one for the output), so with
 *   lambda = sqrt(2 ln(2 N / EQ_PROB_BOUND_FAILURE)) / (1 - u)
 * the probabilistic bound holds for each element with probability at least
 * 1 - EQ_PROB_BOUND_FAILURE (by the union bound): lambda is 5.29 for K = 256, T = 1 and 4 in
 * bf16. A
 * ratio above 1 is possible rounding, but rarer than that model allows (or its independence
 * assumption fails, e.g. for inputs of one sign).
 *
 * The bound holds only where a and b are bit-identical in both runs (the layer's inputs did not
 * already differ); elsewhere nothing is reported. */
#ifndef EQUIV_HARNESS_ROUNDING_BOUND_H
#define EQUIV_HARNESS_ROUNDING_BOUND_H

#include "harness/capture.h"
#include "harness/compare.h"

/* A GEMM whose output a model captures together with both operands, in every layer that has
 * the three names. Models list theirs in eq_model.gemm_sites, ended by {0}. */
typedef struct {
    const char *out, *a, *b; /* tensor names within one layer: out = a * b^T */
    int k_split_by_tp;       /* row-parallel: partition t of the tp ranks holds K/tp of K */
} eq_gemm_site;

/* The probability that the probabilistic bound may fail at an element, under its model (above);
 * the reports name it as "the 99.9% bound". */
#define EQ_PROB_BOUND_FAILURE 1e-3

/* lambda for which the probabilistic bound on the difference of two runs of a K-term GEMM split
 * into T_ref and T_test partitions holds per element with probability at least 1 - failure, u the
 * largest unit roundoff involved (see above). */
double eq_prob_bound_lambda(int64_t K, int T_ref, int T_test, double u, double failure);

/* Per-element bounds of one run's error against the exact product (see above). */
typedef struct {
    eq_dtype dtype;      /* the run's dtype: its outputs and all-reduce wire */
    int partitions;      /* T */
    const char *algo;    /* "ring", "seq", "tree", "fp32acc"; any other: T - 1 rounded adds, which
                            bounds every summation order */
    eq_dtype accumulate; /* the GEMM's accumulation: fp32 (equiv's backends, the default), or bf16
                            where a kernel may round partial sums (fp64 runs accumulate in fp64) */
    double lambda;       /* of the probabilistic bound (eq_prob_bound_lambda) */
} eq_split_gemm;

/* Fills the theory fields of the results of `cmp` for every GEMM output whose operands are in both
 * captures and bit-identical: the operands a capture recorded with the output (eq_capture_entry.gemm,
 * a user's run), else the model's sites (NULL: none) in the output's layer; the runs' tp give T.
 * y, S and Q come as upper bounds from fp32 GEMMs over blocks of rows on equiv's threads (fp64 for
 * fp64 operands; rounding_bound_products.h), which loosens the bound by at most ~2e-3 of itself (K = 4096).
 * EQ_ERR_INPUT when the shapes do not fit a GEMM. Evidence only: eq_judge (harness/verdict.h) reads
 * det_ratio > 1 as outside, whatever the tolerance. */
eq_status eq_rounding_bounds_apply(eq_comparison *cmp, const eq_capture *ref, const eq_capture *test,
                                   const eq_gemm_site *sites);
/* The operands eq_rounding_bounds_apply would look for behind entry e of ref (an index will do): 1
 * and their paths in a and b, or 0 when it is no GEMM output. A comparison read a batch at a time
 * reads them with it. */
int eq_gemm_operand_paths(const eq_capture *ref, const eq_capture_entry *e, const eq_gemm_site *sites,
                          char a[EQ_NAME_MAX], char b[EQ_NAME_MAX]);

/* One reading of a result's theory for a reader: "not rounding" (above the deterministic bound),
 * "bit-exact", "rounding, within the 99.9% bound" (every |d_i| within its probabilistic bound) or
 * "rounding, above the 99.9% bound" (allowed, but rarer than the probabilistic model expects). */
const char *eq_theory_reading(const eq_theory *th, double max_abs);

/* The bounds for one element, exposed for the unit test: deterministic (*det) and probabilistic
 * (*prob) bound on one run's error, given K, |y|, S and Q of that element. */
void eq_split_gemm_error_bound(const eq_split_gemm *g, int64_t K, double abs_y, double S, double Q, double *det,
                               double *prob);

#endif
