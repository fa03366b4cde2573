/* Rounding-error bounds for GEMMs whose reduction a layout splits (rounding_bound.h has the maths). */
#include "harness/rounding_bound.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Higham's gamma_n = n u / (1 - n u): the bound on n successive roundings. */
static double gamma_n(double n, double u) { return n * u < 1.0 ? n * u / (1.0 - n * u) : INFINITY; }

/* The probabilistic stand-in for gamma_n: Higham and Mary's gamma~_n(lambda) (rounding_bound.h). */
static double gamma_prob(double n, double u, double lambda) { return expm1(lambda * sqrt(n) * u + n * u * u / (1.0 - u)); }

double eq_prob_bound_lambda(int64_t K, int T_ref, int T_test, double u, double failure)
{
    double products = 2.0 * ((double)K + (double)T_ref + (double)T_test);
    return sqrt(2.0 * log(2.0 * products / failure)) / (1.0 - u);
}

/* Rounded adds each partial passes through on its way to the all-reduced result. */
static double hops(const eq_split_gemm *g)
{
    if (strcmp(g->algo, "tree") == 0) return ceil(log2((double)g->partitions));
    return (double)(g->partitions - 1); /* ring, seq; fp32acc adds in fp32 (handled apart) */
}

/* gamma_n or gamma~_n(lambda): the deterministic (lambda 0) or the probabilistic growth. */
static double growth(double n, double u, double lambda) { return lambda > 0.0 ? gamma_prob(n, u, lambda) : gamma_n(n, u); }

/* One run's bound: deterministic with lambda 0, else probabilistic with that lambda. */
static double one_bound(const eq_split_gemm *g, int64_t K, double abs_y, double S, double Q, double lambda)
{
    double u_acc = g->dtype == EQ_FP64 ? 0x1p-53 : eq_dtype_unit_roundoff(g->accumulate); /* fp32: backend.h */
    double u_out = g->dtype == EQ_BF16 ? 0x1p-8 : 0.0;      /* a bf16 output is rounded once more */
    double u_wire = eq_dtype_unit_roundoff(g->dtype);
    if (g->partitions <= 1 || strcmp(g->algo, "tp_invariant") == 0) { /* one K-long sum at any tp */
        double acc = growth((double)K, u_acc, lambda) * S;
        return acc + u_out * (abs_y + acc);
    }
    double n = (double)K / g->partitions;
    double acc = growth(n, u_acc, lambda) * S;
    double e_p = acc + u_out * (Q + acc);
    double magnitude = Q + e_p; /* bounds sum_t |computed p_t| */
    if (strcmp(g->algo, "fp32acc") == 0) {
        double sum = growth((double)(g->partitions - 1), u_acc, lambda) * magnitude;
        return e_p + sum + u_out * (abs_y + e_p + sum);
    }
    return e_p + growth(hops(g), u_wire, lambda) * magnitude;
}

void eq_split_gemm_error_bound(const eq_split_gemm *g, int64_t K, double abs_y, double S, double Q, double *det,
                               double *prob)
{
    *det = one_bound(g, K, abs_y, S, Q, 0.0);
    *prob = one_bound(g, K, abs_y, S, Q, g->lambda);
}

const char *eq_theory_reading(const eq_theory *th, double max_abs)
{
    if (th->det_ratio > 1.0) return "not rounding";
    if (max_abs == 0.0) return "bit-exact";
    return th->prob_ratio <= 1.0 ? "rounding, within the 99.9% bound" : "rounding, above the 99.9% bound";
}

/* Every element of a and b bit-identical? */
static int identical(const eq_tensor *a, const eq_tensor *b)
{
    return eq_tensor_same_shape(a, b) && memcmp(a->data, b->data, eq_tensor_bytes(a)) == 0;
}

/* dst[i] = |src[i]| or src[i], widened to fp64. */
static double *widen(const eq_tensor *t, int absolute)
{
    int64_t n = eq_tensor_numel(t);
    double *w = malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
    if (w == NULL) return NULL;
    for (int64_t i = 0; i < n; i++) w[i] = absolute ? fabs(eq_tensor_get(t, i)) : eq_tensor_get(t, i);
    return w;
}

/* y and S of every element of out = a b^T in fp64, and Q for each run's partitions. */
typedef struct {
    double *y, *S, *Q_ref, *Q_test, *partial; /* [M, N] each */
    double *a, *abs_a, *b, *abs_b;             /* the operands widened, and their magnitudes */
} products;

static void products_free(products *p)
{
    free(p->y), free(p->S), free(p->Q_ref), free(p->Q_test), free(p->partial);
    free(p->a), free(p->abs_a), free(p->b), free(p->abs_b);
    memset(p, 0, sizeof *p);
}

/* Q = sum over the T partitions of |partial product over K/T|; |y| where T = 1. */
static void sum_abs_partials(products *p, double *Q, int64_t M, int64_t N, int64_t K, int T)
{
    size_t mn = (size_t)(M * N);
    int64_t n = K / T;
    for (size_t i = 0; i < mn; i++) Q[i] = T <= 1 ? fabs(p->y[i]) : 0.0;
    for (int t = 0; t < T && T > 1; t++) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)n, 1.0, p->a + t * n,
                    (blasint)K, p->b + t * n, (blasint)K, 0.0, p->partial, (blasint)N);
        for (size_t i = 0; i < mn; i++) Q[i] += fabs(p->partial[i]);
    }
}

static eq_status products_compute(products *p, const eq_tensor *a, const eq_tensor *b, int64_t M, int64_t N,
                                  int64_t K, int T_ref, int T_test)
{
    size_t mn = (size_t)(M * N > 0 ? M * N : 1);
    p->y = malloc(mn * sizeof(double));
    p->S = malloc(mn * sizeof(double));
    p->Q_ref = malloc(mn * sizeof(double));
    p->Q_test = malloc(mn * sizeof(double));
    p->partial = malloc(mn * sizeof(double));
    p->a = widen(a, 0), p->abs_a = widen(a, 1), p->b = widen(b, 0), p->abs_b = widen(b, 1);
    if (!p->y || !p->S || !p->Q_ref || !p->Q_test || !p->partial || !p->a || !p->abs_a || !p->b || !p->abs_b)
        return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the rounding bound of a [%lld x %lld x %lld] GEMM", (long long)M,
                       (long long)N, (long long)K);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, 1.0, p->a, (blasint)K,
                p->b, (blasint)K, 0.0, p->y, (blasint)N);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, 1.0, p->abs_a,
                (blasint)K, p->abs_b, (blasint)K, 0.0, p->S, (blasint)N);
    sum_abs_partials(p, p->Q_ref, M, N, K, T_ref);
    sum_abs_partials(p, p->Q_test, M, N, K, T_test);
    return EQ_OK;
}

/* The operands of one GEMM output, as paths in both captures. */
typedef struct {
    char out[EQ_NAME_MAX], a[EQ_NAME_MAX], b[EQ_NAME_MAX];
    int k_split_by_tp;
    eq_dtype accumulate;
} gemm_paths;

/* The GEMM behind result `res`: recorded with the reference's capture, else a model site named
 * like it in its layer. 0 when it is no GEMM output. */
static int find_gemm(const eq_tensor_result *res, const eq_capture *ref, const eq_gemm_site *sites, gemm_paths *g)
{
    const eq_capture_entry *e = eq_capture_find(ref, res->path);
    memset(g, 0, sizeof *g);
    snprintf(g->out, sizeof g->out, "%s", res->path);
    if (e != NULL && e->gemm.a[0] != '\0') {
        snprintf(g->a, sizeof g->a, "%s", e->gemm.a);
        snprintf(g->b, sizeof g->b, "%s", e->gemm.b);
        g->k_split_by_tp = e->gemm.k_split_by_tp;
        g->accumulate = e->gemm.accumulate;
        return 1;
    }
    for (const eq_gemm_site *s = sites; s != NULL && s->out != NULL; s++) {
        if (strcmp(res->name, s->out) != 0 || res->layer < 0) continue;
        snprintf(g->a, sizeof g->a, "layers/%02d/%s", res->layer, s->a);
        snprintf(g->b, sizeof g->b, "layers/%02d/%s", res->layer, s->b);
        g->k_split_by_tp = s->k_split_by_tp;
        g->accumulate = EQ_FP32;
        return 1;
    }
    return 0;
}

static eq_status apply_site(eq_tensor_result *res, const eq_capture *ref, const eq_capture *test, const gemm_paths *site)
{
    eq_status st = EQ_OK;
    products p = {0};
    const eq_capture_entry *out_r = eq_capture_find(ref, site->out), *out_t = eq_capture_find(test, site->out);
    const eq_capture_entry *a_r = eq_capture_find(ref, site->a), *a_t = eq_capture_find(test, site->a);
    const eq_capture_entry *b_r = eq_capture_find(ref, site->b), *b_t = eq_capture_find(test, site->b);
    if (!out_r || !out_t || !a_r || !a_t || !b_r || !b_t) return EQ_OK;
    if (!identical(&a_r->tensor, &a_t->tensor) || !identical(&b_r->tensor, &b_t->tensor)) return EQ_OK;
    const eq_tensor *a = &a_r->tensor, *b = &b_r->tensor, *out = &out_r->tensor;
    int64_t K = a->shape[a->ndim - 1];
    int64_t N = b->ndim == 2 ? b->shape[0] : -1;
    int64_t M = K > 0 ? eq_tensor_numel(a) / K : 0;
    if (b->ndim != 2 || b->shape[1] != K || out->shape[out->ndim - 1] != N || eq_tensor_numel(out) != M * N)
        return EQ_FAIL(EQ_ERR_INPUT, "%s is not %s * %s^T: shapes do not fit a GEMM", res->path, site->a, site->b);
    eq_split_gemm g_ref = {out->dtype, site->k_split_by_tp ? ref->meta.tp : 1, ref->meta.algorithm, site->accumulate, 0.0};
    eq_split_gemm g_test = {out_t->tensor.dtype, site->k_split_by_tp ? test->meta.tp : 1, test->meta.algorithm,
                            site->accumulate, 0.0};
    if ((g_ref.partitions > 0 && K % g_ref.partitions != 0) || (g_test.partitions > 0 && K % g_test.partitions != 0))
        return EQ_OK; /* not a split this model could have run */
    double u_max = fmax(fmax(eq_dtype_unit_roundoff(g_ref.dtype), eq_dtype_unit_roundoff(g_test.dtype)),
                        eq_dtype_unit_roundoff(site->accumulate));
    double lambda = eq_prob_bound_lambda(K, g_ref.partitions, g_test.partitions, u_max, EQ_PROB_BOUND_FAILURE);
    g_ref.lambda = g_test.lambda = lambda;
    EQ_TRY(products_compute(&p, a, b, M, N, K, g_ref.partitions, g_test.partitions));
    eq_theory *th = &res->theory;
    memset(th, 0, sizeof *th);
    th->applies = 1;
    th->terms = K;
    th->ref_partitions = g_ref.partitions;
    th->test_partitions = g_test.partitions;
    th->prob_lambda = lambda;
    th->prob_failure = EQ_PROB_BOUND_FAILURE;
    for (int64_t i = 0; i < M * N; i++) {
        double det_r, prob_r, det_t, prob_t;
        double abs_y = fabs(p.y[i]);
        eq_split_gemm_error_bound(&g_ref, K, abs_y, p.S[i], p.Q_ref[i], &det_r, &prob_r);
        eq_split_gemm_error_bound(&g_test, K, abs_y, p.S[i], p.Q_test[i], &det_t, &prob_t);
        double det = det_r + det_t, prob = prob_r + prob_t;
        double d = fabs(eq_tensor_get(&out_t->tensor, i) - eq_tensor_get(out, i));
        if (det > th->det_bound_max) th->det_bound_max = det;
        if (prob > th->prob_bound_max) th->prob_bound_max = prob;
        if (d > 0.0) { /* 0 / 0: bit-identical where both bounds vanish */
            th->det_ratio = fmax(th->det_ratio, det > 0.0 ? d / det : INFINITY);
            th->prob_ratio = fmax(th->prob_ratio, prob > 0.0 ? d / prob : INFINITY);
        }
    }
cleanup:
    products_free(&p);
    return st;
}

eq_status eq_rounding_bounds_apply(eq_comparison *cmp, const eq_capture *ref, const eq_capture *test,
                                   const eq_gemm_site *sites)
{
    for (int i = 0; i < cmp->count; i++) {
        eq_tensor_result *res = &cmp->results[i];
        gemm_paths g;
        if (find_gemm(res, ref, sites, &g)) {
            eq_status st = apply_site(res, ref, test, &g);
            if (st != EQ_OK) return st;
            /* Above the deterministic bound no summation order explains it: not as expected,
             * however loose the tolerance table is. */
            if (res->theory.applies && res->theory.det_ratio > 1.0 && res->observed == EQ_OBS_WITHIN) {
                res->observed = EQ_OBS_OUTSIDE;
                int was = res->as_expected;
                res->as_expected = eq_expectation_met(res->expect, res->observed);
                cmp->n_unexpected += was - res->as_expected;
                snprintf(res->diagnosis, sizeof res->diagnosis,
                         "above the rounding-error bound (x%.3g of it): no summation order explains it",
                         res->theory.det_ratio);
            }
        }
    }
    return EQ_OK;
}
