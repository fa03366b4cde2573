/* The rounding-error bounds (rounding_bound.h):
 *   - the bound of one run, term by term, for T = 1 and T = 4 in fp32 and bf16;
 *   - on real row-parallel runs (tp = 1 against tp = 2, 4; bf16 and fp32; every algorithm) the
 *     difference stays under the deterministic bound, and near the typical one;
 *   - a difference planted at 1.5x the bound at one element, far inside a loose tolerance, is
 *     called not rounding and not as expected; one at half the bound is not;
 *   - operands that differ between the runs switch the bound off; shapes that are no GEMM are
 *     EQ_ERR_INPUT. */
#include <math.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/rounding_bound.h"
#include "harness/base/testing.h"
#include "harness/verdict.h"
#include "models/parallel_linear.h"

enum { M = 24, K = 256, N = 16 };

static const eq_gemm_site row_site[] = {{"out", "input", "weight", 1}, {0}};

static void check_formula(void)
{
    const double u = 0x1p-24, ub = 0x1p-8;
    double det, prob;
    /* T = 1, fp32: gamma_K(u) S, no output rounding; the probabilistic bound with lambda 1 is
     * Higham and Mary's exp(sqrt(K) u + K u^2 / (1 - u)) - 1 times S */
    eq_split_gemm one = {EQ_FP32, 1, "ring", EQ_FP32, 1.0};
    eq_split_gemm_error_bound(&one, 10, 0.5, 2.0, 0.5, &det, &prob);
    EQ_EXPECT(fabs(det - 10 * u / (1 - 10 * u) * 2.0) < 1e-22, "T=1 fp32 det %.17g", det);
    EQ_EXPECT(fabs(prob - expm1(sqrt(10.0) * u + 10 * u * u / (1 - u)) * 2.0) < 1e-22, "T=1 fp32 prob %.17g", prob);
    /* lambda 3 triples the first-order term */
    one.lambda = 3.0;
    eq_split_gemm_error_bound(&one, 10, 0.5, 2.0, 0.5, &det, &prob);
    EQ_EXPECT(fabs(prob - 3 * sqrt(10.0) * u * 2.0) < 1e-6 * prob, "T=1 fp32 lambda 3 prob %.17g", prob);
    one.lambda = 1.0;
    /* T = 1, bf16: plus one rounding of the output */
    one.dtype = EQ_BF16;
    eq_split_gemm_error_bound(&one, 10, 0.5, 2.0, 0.5, &det, &prob);
    double acc = 10 * u / (1 - 10 * u) * 2.0;
    EQ_EXPECT(fabs(det - (acc + ub * (0.5 + acc))) < 1e-18, "T=1 bf16 det %.17g", det);
    /* T = 4 ring, bf16, K = 8: partials of 2 terms, each rounded; 3 rounded hops */
    eq_split_gemm ring = {EQ_BF16, 4, "ring", EQ_FP32, 1.0};
    eq_split_gemm_error_bound(&ring, 8, 0.5, 2.0, 1.25, &det, &prob);
    double g2 = 2 * u / (1 - 2 * u), e_p = g2 * 2.0 + ub * (1.25 + g2 * 2.0);
    double want = e_p + 3 * ub / (1 - 3 * ub) * (1.25 + e_p);
    EQ_EXPECT(fabs(det - want) < 1e-15, "T=4 ring det %.17g want %.17g", det, want);
    double gp2 = expm1(sqrt(2.0) * u + 2 * u * u / (1 - u)), gp3 = expm1(sqrt(3.0) * ub + 3 * ub * ub / (1 - ub));
    double e_p_typ = gp2 * 2.0 + ub * (1.25 + gp2 * 2.0);
    EQ_EXPECT(fabs(prob - (e_p_typ + gp3 * (1.25 + e_p_typ))) < 1e-15, "T=4 ring prob %.17g", prob);
    /* tree: ceil(log2 4) = 2 hops, fewer than the ring's 3 */
    eq_split_gemm tree = {EQ_BF16, 4, "tree", EQ_FP32, 1.0};
    double det_tree, prob_tree;
    eq_split_gemm_error_bound(&tree, 8, 0.5, 2.0, 1.25, &det_tree, &prob_tree);
    EQ_EXPECT(fabs(det_tree - (e_p + 2 * ub / (1 - 2 * ub) * (1.25 + e_p))) < 1e-15, "tree det %.17g", det_tree);
}

/* lambda for a stated probability: K = 256 split 1 -> 4 in bf16 has N = 2 (256 + 1 + 4) = 522
 * products, so lambda = sqrt(2 ln(2 x 522 / 1e-3)) / (1 - 2^-8) = 5.2854 (by hand), and the bound
 * fails with probability at most 2 N exp(-lambda^2 (1 - u)^2 / 2) = 1e-3. */
static void check_lambda(void)
{
    const double ub = 0x1p-8;
    double lambda = eq_prob_bound_lambda(256, 1, 4, ub, 1e-3);
    EQ_EXPECT(fabs(lambda - 5.2854) < 1e-4, "lambda %.17g, want 5.2854", lambda);
    double failure = 2 * 522 * exp(-lambda * lambda * (1 - ub) * (1 - ub) / 2);
    EQ_EXPECT(fabs(failure - 1e-3) < 1e-12, "failure %.17g, want 1e-3", failure);
    /* a smaller failure probability needs a larger lambda */
    EQ_EXPECT(eq_prob_bound_lambda(256, 1, 4, ub, 1e-6) > lambda, "lambda not growing as the failure shrinks");
}

/* One row-parallel run of out = input weight^T under tp, captured as the row_parallel case does. */
static void run(eq_capture *cap, eq_dtype dt, int tp, eq_algo algo)
{
    eq_step step = {0};
    step.dtype = dt;
    step.layout = (eq_layout){1, tp};
    step.algo = algo;
    step.seed = 7;
    step.backend = &eq_backend_cpu;
    step.transport = &eq_transport_sim;
    eq_tensor in = {0}, w = {0}, out = {0};
    eq_capture_init(cap);
    cap->meta.dtype = dt;
    cap->meta.dp = 1;
    cap->meta.tp = tp;
    snprintf(cap->meta.algorithm, sizeof cap->meta.algorithm, "%s", eq_algo_name(algo));
    EQ_EXPECT_OK(eq_tensor_init_2d(&in, dt, M, K));
    EQ_EXPECT_OK(eq_tensor_init_2d(&w, dt, N, K));
    EQ_EXPECT_OK(eq_tensor_init_2d(&out, dt, M, N));
    eq_rng_fill_normal(&in, 7, "layers/00/input", 1.0);
    eq_rng_fill_normal(&w, 7, "layers/00/weight", 1.0 / sqrt((double)K));
    EQ_EXPECT_OK(eq_row_parallel_forward(&step, &out, &in, &w));
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "input", EQ_ROLE_INPUT, &in));
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "weight", EQ_ROLE_PARAM, &w));
    EQ_EXPECT_OK(eq_capture_add(cap, 0, "out", EQ_ROLE_ACTIVATION, &out));
}

static eq_tensor *find_tensor(eq_capture *cap, const char *path)
{
    return (eq_tensor *)&eq_capture_find(cap, path)->tensor;
}

static const eq_tensor_result *result_of(const eq_comparison *c, const char *path)
{
    for (int i = 0; i < c->count; i++)
        if (strcmp(c->results[i].path, path) == 0) return &c->results[i];
    return NULL;
}

static void check_real_runs(void)
{
    static const eq_tolerance loose = {"loose", 1.0, 0.0, "test", EQ_ATOL_ABSOLUTE};
    const eq_dtype dtypes[] = {EQ_BF16, EQ_FP32};
    const int tps[] = {2, 4};
    for (int d = 0; d < 2; d++)
        for (int a = 0; a < EQ_ALGO_COUNT; a++)
            for (int k = 0; k < 2; k++) {
                eq_capture ref, test;
                eq_comparison cmp = {0};
                run(&ref, dtypes[d], 1, (eq_algo)a);
                run(&test, dtypes[d], tps[k], (eq_algo)a);
                EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &loose, EQ_EXPECT_WITHIN, &cmp));
                EQ_EXPECT_OK(eq_rounding_bounds_apply(&cmp, &ref, &test, row_site));
                eq_judge(&cmp);
                const eq_tensor_result *r = result_of(&cmp, "layers/00/out");
                const char *what = eq_algo_name((eq_algo)a);
                EQ_EXPECT(r != NULL && r->theory.applies, "%s tp%d: no bound", what, tps[k]);
                if (r != NULL && r->theory.applies) {
                    EQ_EXPECT(r->theory.terms == K && r->theory.ref_partitions == 1 &&
                                  r->theory.test_partitions == tps[k],
                              "%s tp%d: K %lld, T %d -> %d", what, tps[k], (long long)r->theory.terms,
                              r->theory.ref_partitions, r->theory.test_partitions);
                    EQ_EXPECT(r->m.max_abs > 0.0, "%s %s tp%d: bit-exact, nothing to bound", eq_dtype_name(dtypes[d]),
                              what, tps[k]);
                    EQ_EXPECT(r->theory.det_ratio <= 1.0, "%s %s tp%d: |d| %.3g x the deterministic bound",
                              eq_dtype_name(dtypes[d]), what, tps[k], r->theory.det_ratio);
                    EQ_EXPECT(r->theory.prob_ratio <= 1.0 && r->theory.prob_failure == EQ_PROB_BOUND_FAILURE &&
                                  r->theory.prob_lambda > 5.0,
                              "%s %s tp%d: |d| %.3g x the 99.9%% bound (lambda %g)", eq_dtype_name(dtypes[d]), what,
                              tps[k], r->theory.prob_ratio, r->theory.prob_lambda);
                    EQ_EXPECT(r->as_expected, "%s %s tp%d: not as expected", eq_dtype_name(dtypes[d]), what, tps[k]);
                }
                eq_comparison_free(&cmp);
                eq_capture_free(&ref);
                eq_capture_free(&test);
            }
}

/* The test output becomes the reference's with element 5 moved by `times` its deterministic bound
 * (y, S and Q computed here from their definitions, apart from rounding_bound.c's GEMMs). */
static void check_planted(eq_dtype dt, double times, int want_caught)
{
    static const eq_tolerance loose = {"loose", 1.0, 0.0, "test", EQ_ATOL_ABSOLUTE};
    eq_capture ref, test;
    eq_comparison cmp = {0};
    run(&ref, dt, 1, EQ_ALGO_RING);
    run(&test, dt, 4, EQ_ALGO_RING);
    const eq_tensor *in = find_tensor(&ref, "layers/00/input"), *w = find_tensor(&ref, "layers/00/weight");
    const int i = 0, j = 5;
    double y = 0, S = 0, Q = 0, part[4] = {0};
    for (int k = 0; k < K; k++) {
        double p = eq_tensor_get(in, i * K + k) * eq_tensor_get(w, j * K + k);
        y += p, S += fabs(p), part[k / (K / 4)] += p;
    }
    for (int t = 0; t < 4; t++) Q += fabs(part[t]);
    double det_ref, det_test, prob;
    eq_split_gemm g_ref = {dt, 1, "ring", EQ_FP32, 0.0}, g_test = {dt, 4, "ring", EQ_FP32, 0.0};
    eq_split_gemm_error_bound(&g_ref, K, fabs(y), S, fabs(y), &det_ref, &prob);
    eq_split_gemm_error_bound(&g_test, K, fabs(y), S, Q, &det_test, &prob);
    /* the test output: the reference's, with element j moved */
    eq_tensor *out = find_tensor(&test, "layers/00/out");
    const eq_tensor *ref_out = find_tensor(&ref, "layers/00/out");
    for (int64_t e = 0; e < eq_tensor_numel(out); e++) eq_tensor_set(out, e, eq_tensor_get(ref_out, e));
    double moved = eq_tensor_get(ref_out, j) + times * (det_ref + det_test);
    eq_tensor_set(out, j, moved);
    double d = fabs(eq_tensor_get(out, j) - eq_tensor_get(ref_out, j)); /* after rounding to dt */
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &loose, EQ_EXPECT_WITHIN, &cmp));
    eq_judge(&cmp); /* without the bound */
    EQ_EXPECT(cmp.n_unexpected == 0, "the loose tolerance already fails (|d| %g)", d);
    EQ_EXPECT_OK(eq_rounding_bounds_apply(&cmp, &ref, &test, row_site));
    eq_judge(&cmp); /* with it */
    const eq_tensor_result *r = result_of(&cmp, "layers/00/out");
    int over = d > det_ref + det_test;
    EQ_EXPECT(over == want_caught, "%s x%.2f: planted |d| %g vs bound %g", eq_dtype_name(dt), times, d,
              det_ref + det_test);
    if (r != NULL) {
        EQ_EXPECT((r->theory.det_ratio > 1.0) == want_caught, "%s x%.2f: det ratio %g", eq_dtype_name(dt), times,
                  r->theory.det_ratio);
        EQ_EXPECT(r->as_expected == !want_caught && cmp.n_unexpected == want_caught,
                  "%s x%.2f: as_expected %d, %d unexpected", eq_dtype_name(dt), times, r->as_expected,
                  cmp.n_unexpected);
        if (want_caught)
            EQ_EXPECT(strstr(r->diagnosis, "above the rounding-error bound") != NULL, "diagnosis '%s'", r->diagnosis);
    }
    eq_comparison_free(&cmp);
    eq_capture_free(&ref);
    eq_capture_free(&test);
}

static void check_not_applicable(void)
{
    static const eq_tolerance loose = {"loose", 1.0, 0.0, "test", EQ_ATOL_ABSOLUTE};
    eq_capture ref, test;
    eq_comparison cmp = {0};
    run(&ref, EQ_FP32, 1, EQ_ALGO_RING);
    run(&test, EQ_FP32, 4, EQ_ALGO_RING);
    eq_tensor *in = find_tensor(&test, "layers/00/input");
    eq_tensor_set(in, 3, eq_tensor_get(in, 3) * 1.5); /* the layer's input already differs */
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &loose, EQ_EXPECT_DIFFERS, &cmp));
    EQ_EXPECT_OK(eq_rounding_bounds_apply(&cmp, &ref, &test, row_site));
    const eq_tensor_result *r = result_of(&cmp, "layers/00/out");
    EQ_EXPECT(r != NULL && !r->theory.applies, "a bound where the operands differ");
    eq_comparison_free(&cmp);
    /* a site whose shapes are no GEMM */
    static const eq_gemm_site wrong[] = {{"out", "weight", "input", 1}, {0}};
    EQ_EXPECT_OK(eq_compare_captures(&ref, &ref, &loose, EQ_EXPECT_WITHIN, &cmp));
    eq_status st = eq_rounding_bounds_apply(&cmp, &ref, &ref, wrong);
    EQ_EXPECT(st == EQ_ERR_INPUT, "shapes that are no GEMM: status %d", (int)st);
    eq_error_clear();
    eq_comparison_free(&cmp);
    eq_capture_free(&ref);
    eq_capture_free(&test);
}

int main(void)
{
    check_formula();
    check_lambda();
    check_real_runs();
    check_planted(EQ_BF16, 1.5, 1);
    check_planted(EQ_BF16, 0.5, 0);
    check_planted(EQ_FP32, 1.5, 1);
    check_planted(EQ_FP32, 0.5, 0);
    check_not_applicable();
    return eq_test_finish("rounding_bound_test");
}
