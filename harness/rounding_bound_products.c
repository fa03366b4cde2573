/* y, S and Q of a GEMM for the rounding-error bound, as upper bounds (rounding_bound_products.h).
 *
 * Why the fp32 path bounds the exact values. Operands a, b are bf16 or fp32, so exact in fp32.
 * Let u = 2^-24 and eta = 2^-149 (fp32's smallest subnormal). A computed fp32 inner product of n
 * terms, in any summation order, with or without FMA, and with gradual underflow, satisfies
 *   |fl(sum a_k b_k) - sum a_k b_k| <= gamma_n(u) sum |a_k b_k| + n eta          (1)
 * (Higham, Accuracy and Stability, 2nd ed., section 3.1 with the underflow model of section 2.2:
 * every term passes through at most n roundings (1 + delta), and a product that underflows adds
 * an absolute error of at most eta / 2, which later roundings grow by less than 2x). So, with
 * S_c, p_c and y_c the computed fp32 values (no overflow: checked first, below):
 *   S   <= (S_c + K eta) / (1 - gamma_K)              (1) on the nonnegative |a||b|, solved for S
 *   Q_T <= sum_t |p_c,t| + gamma_{K/T} S + K eta      (1) per partial, summed over the T partials
 *   |y| <= |sum_t p_c,t| + gamma_{K/T} S + K eta      y is the sum of the exact partials
 *          (|y_c| + gamma_K S + K eta from a full-K product when no run splits K).
 * The fp64 sum over t of the p_c,t may cancel: its error is at most gamma_T(2^-53) sum_t |p_c,t|
 * <= T 2^-51 (S + K eta) by (1), so |y|'s factor gets T 2^-51 added and its eta term doubles.
 * Each bound is then evaluated in fp64 in at most T + 8 operations of relative error 2^-53
 * (terms all nonnegative), so multiplying by 1 + (T + 8) 2^-52 makes the evaluated number at
 * least the exact right-hand side. rounding_bound.c's bound grows with |y|, S and Q, so it stays
 * an upper bound; it exceeds the exact-products bound by about gamma_{K/T}(u) S / Q of itself
 * (~1.5e-3 for K = 4096, T = 4 on N(0,1) data, where S ~ 25 Q), and by gamma_K(u) S / |y|
 * through the output rounding's |y| term where T = 1.
 *
 * Overflow: every partial sum is at most (1 + gamma_K) K max|a| max|b|, so the fp32 path runs only
 * where that is below 2^120 (fp32 reaches 2^128) and the operands are finite; elsewhere fp64. */
#include "harness/rounding_bound_products.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/openblas.h"
#include "harness/base/parallel.h"
#include "harness/base/phase_time.h"

#define EQ_U32 0x1p-24
#define EQ_ETA32 0x1p-149
/* Rows of one block: fixed, so a block's GEMMs, and so its values, do not depend on the threads;
 * large enough that OpenBLAS's packing of b, redone for every call, stays a small share. */
#define BLOCK_ROWS 256

int64_t eq_bound_row_blocks(int64_t M) { return M > 0 ? (M + BLOCK_ROWS - 1) / BLOCK_ROWS : 1; }

static double gamma32(double n) { return n * EQ_U32 / (1.0 - n * EQ_U32); }

/* The largest |x| of t as the magnitude bits (sign cleared): a bit pattern at or above the
 * exponent field all ones is Inf or NaN. bf16 and fp32 only. */
static uint32_t max_magnitude_bits(const eq_tensor *t)
{
    const int64_t n = eq_tensor_numel(t);
    uint32_t most = 0;
    if (t->dtype == EQ_BF16) {
        const uint16_t *x = t->data;
        for (int64_t i = 0; i < n; i++) most = (x[i] & 0x7fffu) > most ? (x[i] & 0x7fffu) : most;
        return most << 16;
    }
    const uint32_t *x = t->data;
    for (int64_t i = 0; i < n; i++) most = (x[i] & 0x7fffffffu) > most ? (x[i] & 0x7fffffffu) : most;
    return most;
}

/* Can every fp32 partial sum of a b^T stay finite, and gamma_K(u32) small (see the top)? */
static int fits_fp32(const eq_tensor *a, const eq_tensor *b, int64_t K)
{
    if ((a->dtype != EQ_BF16 && a->dtype != EQ_FP32) || b->dtype != a->dtype) return 0;
    if (K >= (INT64_C(1) << 22)) return 0; /* gamma_K(u32) needs K u32 well below 1 */
    const uint32_t bits_a = max_magnitude_bits(a), bits_b = max_magnitude_bits(b);
    if (bits_a >= 0x7f800000u || bits_b >= 0x7f800000u) return 0;
    float max_a, max_b;
    memcpy(&max_a, &bits_a, sizeof max_a);
    memcpy(&max_b, &bits_b, sizeof max_b);
    return (double)max_a * (double)max_b * (double)K <= 0x1p120;
}

/* Elements [begin, end) of a bf16 or fp32 tensor into fp32: signed and absolute. */
static void widen_f32(const eq_tensor *t, int64_t begin, int64_t end, float *x, float *abs_x)
{
    for (int64_t i = begin; i < end; i++) {
        float v = t->dtype == EQ_BF16 ? eq_bf16_to_f32(((const uint16_t *)t->data)[i]) : ((const float *)t->data)[i];
        x[i - begin] = v;
        abs_x[i - begin] = fabsf(v);
    }
}

typedef struct {
    const eq_tensor *a;
    int64_t M, N, K;
    int T_ref, T_test, T_y; /* T_y: the partition whose partials give y (1: a full-K product) */
    const float *b, *abs_b; /* [N, K] */
    double gamma_S, gamma_y, gamma_ref, gamma_test, eta, slack;
    eq_bound_rows_fn fn;
    void *ctx;
    atomic_int no_memory;
} fp32_job;

/* One block's scratch: [BLOCK_ROWS, K] floats, [BLOCK_ROWS, N] floats and doubles. */
typedef struct {
    float *a, *abs_a, *S_c, *p_c;
    double *y, *S, *Q_ref, *Q_test; /* y becomes the bound on |y| in place */
} block_scratch;

static void scratch_free(block_scratch *s)
{
    free(s->a), free(s->abs_a), free(s->S_c), free(s->p_c);
    free(s->y), free(s->S), free(s->Q_ref), free(s->Q_test);
}

static int scratch_alloc(block_scratch *s, int64_t K, int64_t N)
{
    const size_t rk = (size_t)(BLOCK_ROWS * K), rn = (size_t)(BLOCK_ROWS * N);
    memset(s, 0, sizeof *s);
    s->a = malloc(rk * sizeof(float)), s->abs_a = malloc(rk * sizeof(float));
    s->S_c = malloc(rn * sizeof(float)), s->p_c = malloc(rn * sizeof(float));
    s->y = malloc(rn * sizeof(double)), s->S = malloc(rn * sizeof(double));
    s->Q_ref = malloc(rn * sizeof(double)), s->Q_test = malloc(rn * sizeof(double));
    return s->a && s->abs_a && s->S_c && s->p_c && s->y && s->S && s->Q_ref && s->Q_test;
}

/* p_c = a[:, cols k0 .. k0 + n) b[:, same]^T for `rows` rows, in fp32. */
static void sgemm_part(const fp32_job *j, const float *a, const float *b, int64_t rows, int64_t k0, int64_t n, float *c)
{
    const int64_t blas = eq_phase_blas_enter();
    eq_openblas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)j->N, (blasint)n, 1.0f,
                      a + k0, (blasint)j->K, b + k0, (blasint)j->K, 0.0f, c, (blasint)j->N);
    eq_phase_blas_leave(blas);
}

/* Q (T > 1) as the sum of |p_c,t| over T partials, adding the partials into y when T is T_y. */
static void partials(const fp32_job *j, block_scratch *s, int64_t rows, int T, double *Q, int into_y)
{
    const int64_t rn = rows * j->N, n = j->K / T;
    for (int64_t i = 0; i < rn; i++) Q[i] = 0.0;
    for (int t = 0; t < T; t++) {
        sgemm_part(j, s->a, j->b, rows, t * n, n, s->p_c);
        for (int64_t i = 0; i < rn; i++) Q[i] += fabs((double)s->p_c[i]);
        if (into_y)
            for (int64_t i = 0; i < rn; i++) s->y[i] += (double)s->p_c[i];
    }
}

static void run_blocks(void *ctx, int64_t first, int64_t end)
{
    fp32_job *j = ctx;
    block_scratch s;
    if (!scratch_alloc(&s, j->K, j->N)) {
        atomic_store(&j->no_memory, 1);
        scratch_free(&s);
        return;
    }
    for (int64_t blk = first; blk < end; blk++) {
        const int64_t row0 = blk * BLOCK_ROWS, rows = j->M - row0 < BLOCK_ROWS ? j->M - row0 : BLOCK_ROWS;
        const int64_t rn = rows * j->N;
        widen_f32(j->a, row0 * j->K, (row0 + rows) * j->K, s.a, s.abs_a);
        sgemm_part(j, s.abs_a, j->abs_b, rows, 0, j->K, s.S_c);
        for (int64_t i = 0; i < rn; i++) s.y[i] = 0.0;
        if (j->T_y == 1) {
            sgemm_part(j, s.a, j->b, rows, 0, j->K, s.p_c);
            for (int64_t i = 0; i < rn; i++) s.y[i] = (double)s.p_c[i];
        }
        if (j->T_ref > 1) partials(j, &s, rows, j->T_ref, s.Q_ref, j->T_y == j->T_ref);
        if (j->T_test > 1 && j->T_test != j->T_ref) partials(j, &s, rows, j->T_test, s.Q_test, j->T_ref <= 1);
        if (j->T_test > 1 && j->T_test == j->T_ref) memcpy(s.Q_test, s.Q_ref, (size_t)rn * sizeof(double));
        for (int64_t i = 0; i < rn; i++) {
            const double S = (double)s.S_c[i] + j->eta;
            s.S[i] = S / (1.0 - j->gamma_S) * j->slack;
            s.y[i] = (fabs(s.y[i]) + j->gamma_y * s.S[i] + 2.0 * j->eta) * j->slack; /* now |y| */
            s.Q_ref[i] = j->T_ref > 1 ? (s.Q_ref[i] + j->gamma_ref * s.S[i] + j->eta) * j->slack : s.y[i];
            s.Q_test[i] = j->T_test > 1 ? (s.Q_test[i] + j->gamma_test * s.S[i] + j->eta) * j->slack : s.y[i];
        }
        const eq_bound_rows r = {row0, rows, s.y, s.S, s.Q_ref, s.Q_test};
        j->fn(j->ctx, blk, &r);
    }
    scratch_free(&s);
}

static eq_status products_fp32(const eq_tensor *a, const eq_tensor *b, int64_t M, int64_t N, int64_t K, int T_ref,
                               int T_test, eq_bound_rows_fn fn, void *ctx)
{
    eq_status st = EQ_OK;
    const int T_max = T_ref > T_test ? T_ref : T_test;
    fp32_job j = {.a = a, .M = M, .N = N, .K = K, .T_ref = T_ref, .T_test = T_test, .fn = fn, .ctx = ctx};
    j.T_y = T_ref > 1 ? T_ref : T_test > 1 ? T_test : 1;
    j.gamma_S = gamma32((double)K);
    j.gamma_y = j.T_y > 1 ? gamma32((double)(K / j.T_y)) + (double)j.T_y * 0x1p-51 : j.gamma_S;
    j.gamma_ref = gamma32((double)(K / T_ref));
    j.gamma_test = gamma32((double)(K / T_test));
    j.eta = (double)K * EQ_ETA32;
    j.slack = 1.0 + (double)(T_max + 8) * 0x1p-52;
    atomic_init(&j.no_memory, 0);
    float *b32 = malloc((size_t)(N * K) * sizeof *b32), *abs_b32 = malloc((size_t)(N * K) * sizeof *abs_b32);
    if (b32 == NULL || abs_b32 == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the rounding bound's fp32 copy of a [%lld x %lld] operand",
                     (long long)N, (long long)K);
        goto cleanup;
    }
    widen_f32(b, 0, N * K, b32, abs_b32);
    j.b = b32, j.abs_b = abs_b32;
    eq_openblas.set_num_threads(1); /* the blocks are the threads (as models/backend_cpu.c's GEMMs) */
    eq_parallel_for(eq_bound_row_blocks(M), 1, run_blocks, &j);
    if (atomic_load(&j.no_memory))
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the rounding bound's blocks of a [%lld x %lld x %lld] GEMM",
                     (long long)M, (long long)N, (long long)K);
cleanup:
    free(b32);
    free(abs_b32);
    return st;
}

/* The operand widened to fp64, signed or absolute. */
static double *widen_f64(const eq_tensor *t, int absolute)
{
    int64_t n = eq_tensor_numel(t);
    double *w = malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
    if (w == NULL) return NULL;
    for (int64_t i = 0; i < n; i++) w[i] = absolute ? fabs(eq_tensor_get(t, i)) : eq_tensor_get(t, i);
    return w;
}

/* Q = sum over the T partitions of |partial product over K/T|; |y| where T = 1. */
static void sum_abs_partials(const double *a, const double *b, const double *y, double *partial, double *Q,
                             int64_t M, int64_t N, int64_t K, int T)
{
    size_t mn = (size_t)(M * N);
    int64_t n = K / T;
    for (size_t i = 0; i < mn; i++) Q[i] = T <= 1 ? fabs(y[i]) : 0.0;
    for (int t = 0; t < T && T > 1; t++) {
        const int64_t blas = eq_phase_blas_enter();
        eq_openblas.dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)n, 1.0,
                          a + t * n, (blasint)K, b + t * n, (blasint)K, 0.0, partial, (blasint)N);
        eq_phase_blas_leave(blas);
        for (size_t i = 0; i < mn; i++) Q[i] += fabs(partial[i]);
    }
}

/* fp64 GEMMs over the whole output, one block. */
static eq_status products_fp64(const eq_tensor *a_t, const eq_tensor *b_t, int64_t M, int64_t N, int64_t K,
                               int T_ref, int T_test, eq_bound_rows_fn fn, void *ctx)
{
    eq_status st = EQ_OK;
    const size_t mn = (size_t)(M * N > 0 ? M * N : 1);
    double *y = malloc(mn * sizeof(double)), *abs_y = malloc(mn * sizeof(double)), *S = malloc(mn * sizeof(double));
    double *Q_ref = malloc(mn * sizeof(double)), *Q_test = malloc(mn * sizeof(double));
    double *partial = malloc(mn * sizeof(double));
    double *a = widen_f64(a_t, 0), *abs_a = widen_f64(a_t, 1), *b = widen_f64(b_t, 0), *abs_b = widen_f64(b_t, 1);
    if (!y || !abs_y || !S || !Q_ref || !Q_test || !partial || !a || !abs_a || !b || !abs_b) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the rounding bound of a [%lld x %lld x %lld] GEMM", (long long)M,
                     (long long)N, (long long)K);
        goto cleanup;
    }
    const int64_t blas = eq_phase_blas_enter();
    eq_openblas.dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, 1.0, a,
                      (blasint)K, b, (blasint)K, 0.0, y, (blasint)N);
    eq_openblas.dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, 1.0, abs_a,
                      (blasint)K, abs_b, (blasint)K, 0.0, S, (blasint)N);
    eq_phase_blas_leave(blas);
    sum_abs_partials(a, b, y, partial, Q_ref, M, N, K, T_ref);
    sum_abs_partials(a, b, y, partial, Q_test, M, N, K, T_test);
    for (size_t i = 0; i < (size_t)(M * N); i++) abs_y[i] = fabs(y[i]);
    const eq_bound_rows r = {0, M, abs_y, S, Q_ref, Q_test};
    fn(ctx, 0, &r);
cleanup:
    free(y), free(abs_y), free(S), free(Q_ref), free(Q_test), free(partial);
    free(a), free(abs_a), free(b), free(abs_b);
    return st;
}

eq_status eq_bound_products(const eq_tensor *a, const eq_tensor *b, int64_t M, int64_t N, int64_t K, int T_ref,
                            int T_test, eq_bound_rows_fn fn, void *ctx)
{
    const eq_status opened = eq_openblas_open(); /* its GEMMs are OpenBLAS's, whatever the backend */
    if (opened != EQ_OK) return opened;
    if (fits_fp32(a, b, K)) return products_fp32(a, b, M, N, K, T_ref, T_test, fn, ctx);
    return products_fp64(a, b, M, N, K, T_ref, T_test, fn, ctx);
}
