/* Rounding-error bounds for GEMMs whose reduction a layout splits (rounding_bound.h has the maths). */
#include "harness/rounding_bound.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/rounding_bound_products.h"

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

/* The factors of one run's bound that do not vary by element (growth() is the costly part). */
typedef struct {
    int split;        /* T > 1 */
    int fp32acc;      /* partials added in fp32, rounded once */
    double u_out;     /* a bf16 output is rounded once more */
    double acc;       /* growth of the accumulation: over K (T = 1) or K/T terms */
    double combine;   /* growth of the all-reduce: hops in the wire dtype, or T - 1 fp32 adds */
} bound_factors;

static bound_factors factors_of(const eq_split_gemm *g, int64_t K, double lambda)
{
    double u_acc = g->dtype == EQ_FP64 ? 0x1p-53 : eq_dtype_unit_roundoff(g->accumulate); /* fp32: backend.h */
    double u_wire = eq_dtype_unit_roundoff(g->dtype);
    bound_factors f = {0};
    f.u_out = g->dtype == EQ_BF16 ? 0x1p-8 : 0.0;
    f.split = g->partitions > 1 && strcmp(g->algo, "tp_invariant") != 0; /* tp_invariant: one K-long sum at any tp */
    if (!f.split) {
        f.acc = growth((double)K, u_acc, lambda);
        return f;
    }
    f.acc = growth((double)K / g->partitions, u_acc, lambda);
    f.fp32acc = strcmp(g->algo, "fp32acc") == 0;
    f.combine = f.fp32acc ? growth((double)(g->partitions - 1), u_acc, lambda) : growth(hops(g), u_wire, lambda);
    return f;
}

/* One run's bound at an element from its |y|, S and Q (rounding_bound.h). */
static double bound_at(const bound_factors *f, double abs_y, double S, double Q)
{
    double acc = f->acc * S;
    if (!f->split) return acc + f->u_out * (abs_y + acc);
    double e_p = acc + f->u_out * (Q + acc);
    double magnitude = Q + e_p; /* bounds sum_t |computed p_t| */
    if (f->fp32acc) {
        double sum = f->combine * magnitude;
        return e_p + sum + f->u_out * (abs_y + e_p + sum);
    }
    return e_p + f->combine * magnitude;
}

void eq_split_gemm_error_bound(const eq_split_gemm *g, int64_t K, double abs_y, double S, double Q, double *det,
                               double *prob)
{
    const bound_factors f_det = factors_of(g, K, 0.0), f_prob = factors_of(g, K, g->lambda);
    *det = bound_at(&f_det, abs_y, S, Q);
    *prob = bound_at(&f_prob, abs_y, S, Q);
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

/* The largest bounds and ratios of one block of output rows (max is exact: any order of the
 * blocks gives the same answer). */
typedef struct {
    double det_bound_max, prob_bound_max, det_ratio, prob_ratio;
} block_max;

/* What every block of rows needs to turn y, S and Q into bounds and ratios. */
typedef struct {
    bound_factors det_ref, prob_ref, det_test, prob_test;
    const eq_tensor *out_ref, *out_test; /* [M, N] */
    int64_t N;
    block_max *blocks;                   /* [eq_bound_row_blocks(M)] */
} site_bounds;

static void bound_rows(void *ctx, int64_t block, const eq_bound_rows *r)
{
    const site_bounds *sb = ctx;
    block_max m = {0};
    const int64_t n = r->rows * sb->N, first = r->row0 * sb->N;
    for (int64_t k = 0; k < n; k++) {
        double det = bound_at(&sb->det_ref, r->abs_y[k], r->S[k], r->Q_ref[k]) +
                     bound_at(&sb->det_test, r->abs_y[k], r->S[k], r->Q_test[k]);
        double prob = bound_at(&sb->prob_ref, r->abs_y[k], r->S[k], r->Q_ref[k]) +
                      bound_at(&sb->prob_test, r->abs_y[k], r->S[k], r->Q_test[k]);
        double d = fabs(eq_tensor_get(sb->out_test, first + k) - eq_tensor_get(sb->out_ref, first + k));
        if (det > m.det_bound_max) m.det_bound_max = det;
        if (prob > m.prob_bound_max) m.prob_bound_max = prob;
        if (d > 0.0) { /* 0 / 0: bit-identical where both bounds vanish */
            m.det_ratio = fmax(m.det_ratio, det > 0.0 ? d / det : INFINITY);
            m.prob_ratio = fmax(m.prob_ratio, prob > 0.0 ? d / prob : INFINITY);
        }
    }
    sb->blocks[block] = m;
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

int eq_gemm_operand_paths(const eq_capture *ref, const eq_capture_entry *e, const eq_gemm_site *sites,
                          char a[EQ_NAME_MAX], char b[EQ_NAME_MAX])
{
    eq_tensor_result res;
    gemm_paths g;
    memset(&res, 0, sizeof res);
    snprintf(res.path, sizeof res.path, "%s", e->path);
    snprintf(res.name, sizeof res.name, "%s", e->name);
    res.layer = e->layer;
    if (!find_gemm(&res, ref, sites, &g)) return 0;
    memcpy(a, g.a, EQ_NAME_MAX);
    memcpy(b, g.b, EQ_NAME_MAX);
    return 1;
}

static eq_status apply_site(eq_tensor_result *res, const eq_capture *ref, const eq_capture *test, const gemm_paths *site)
{
    eq_status st = EQ_OK;
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
    const int64_t n_blocks = eq_bound_row_blocks(M);
    site_bounds sb = {factors_of(&g_ref, K, 0.0), factors_of(&g_ref, K, lambda), factors_of(&g_test, K, 0.0),
                      factors_of(&g_test, K, lambda), out, &out_t->tensor, N, calloc((size_t)n_blocks, sizeof(block_max))};
    if (sb.blocks == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the rounding bound of %s", res->path);
    EQ_TRY(eq_bound_products(a, b, M, N, K, g_ref.partitions, g_test.partitions, bound_rows, &sb));
    eq_theory *th = &res->theory;
    memset(th, 0, sizeof *th);
    th->applies = 1;
    th->terms = K;
    th->ref_partitions = g_ref.partitions;
    th->test_partitions = g_test.partitions;
    th->prob_lambda = lambda;
    th->prob_failure = EQ_PROB_BOUND_FAILURE;
    for (int64_t blk = 0; blk < n_blocks; blk++) {
        const block_max *m = &sb.blocks[blk];
        th->det_bound_max = fmax(th->det_bound_max, m->det_bound_max);
        th->prob_bound_max = fmax(th->prob_bound_max, m->prob_bound_max);
        th->det_ratio = fmax(th->det_ratio, m->det_ratio);
        th->prob_ratio = fmax(th->prob_ratio, m->prob_ratio);
    }
cleanup:
    free(sb.blocks);
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
        }
    }
    return EQ_OK;
}
