/* The tensor-parallel linear layers on the CPU backend:
 *   - the GEMM contract (bf16 in, fp32 accumulate, bf16 out) against an fp64 recomputation;
 *   - weights: master-then-slice shards, gathered with all_gather, are bit-identical to tp = 1;
 *   - column-parallel is bit-exact for tp = 1, 2, 4 (seed 002 section 2);
 *   - row-parallel equals, bit for bit, partial GEMMs over the right K slices summed in the
 *     algorithm's order, and stays within the rounding bound of the exact product. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "models/parallel_linear.h"

enum { M = 24, K = 64, N = 32 };

static eq_step make_step(eq_dtype dt, int tp, eq_algo algo)
{
    eq_step s = {0};
    s.dtype = dt;
    s.layout = (eq_layout){1, tp};
    s.algo = algo;
    s.seed = 99;
    s.backend = &eq_backend_cpu;
    s.transport = &eq_transport_sim;
    return s;
}

static void make_operands(eq_dtype dt, eq_tensor *in, eq_tensor *w, eq_tensor *out)
{
    eq_tensor_init_2d(in, dt, M, K);
    eq_tensor_init_2d(w, dt, N, K);
    eq_tensor_init_2d(out, dt, M, N);
    eq_rng_fill_normal(in, 5, "in", 1.0);
    eq_rng_fill_normal(w, 5, "w", 1.0 / sqrt((double)K));
}

/* |out - exact| <= half an output ULP (bf16 rounding of the result) + gamma_K * sum |a||b|,
 * gamma_K = K u / (1 - K u) with u = 2^-24 (fp32 accumulation): Higham, Accuracy and Stability
 * of Numerical Algorithms, eq. (3.5). Counts elements outside that bound. */
static int outside_gemm_bound(const eq_tensor *in, const eq_tensor *w, const eq_tensor *out, int rounded_out)
{
    const double u = 0x1p-24, gamma = K * u / (1 - K * u);
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double exact = 0, abs_sum = 0;
            for (int k = 0; k < K; k++) {
                double p = eq_tensor_get(in, i * K + k) * eq_tensor_get(w, j * K + k);
                exact += p;
                abs_sum += fabs(p);
            }
            double got = eq_tensor_get(out, i * N + j);
            double bound = gamma * abs_sum + (rounded_out ? 0x1p-8 * fabs(exact) * (1 + gamma) : 0);
            if (fabs(got - exact) > bound) bad++;
        }
    return bad;
}

static void test_gemm_contract(void)
{
    for (int d = 0; d < 2; d++) {
        eq_dtype dt = d ? EQ_BF16 : EQ_FP32;
        eq_tensor in, w, out;
        make_operands(dt, &in, &w, &out);
        EQ_EXPECT_OK(eq_backend_cpu.gemm_nt(dt, M, N, K, in.data, K, w.data, K, out.data, N));
        EQ_EXPECT(outside_gemm_bound(&in, &w, &out, dt == EQ_BF16) == 0, "%s GEMM outside the rounding bound",
                  eq_dtype_name(dt));
        /* And it is not trivially satisfied: an error of 0.1 on one element is caught. */
        eq_tensor_set(&out, 7, eq_tensor_get(&out, 7) + 0.1);
        EQ_EXPECT(outside_gemm_bound(&in, &w, &out, dt == EQ_BF16) == 1, "planted GEMM error missed");
        eq_tensor_free(&in), eq_tensor_free(&w), eq_tensor_free(&out);
    }
}

/* Shards of the master weight as each tp rank holds them, gathered back with all_gather. */
static void test_weight_shards_gather_to_master(void)
{
    eq_tensor in, w, out;
    make_operands(EQ_BF16, &in, &w, &out);
    for (int tp = 1; tp <= 4; tp *= 2) {
        /* Column-parallel: rank r holds rows [r N/tp, (r+1) N/tp), contiguous. */
        const size_t shard = (size_t)(N / tp) * K;
        uint16_t *shards[4], *gathered[4];
        for (int r = 0; r < tp; r++) {
            shards[r] = malloc(shard * 2);
            gathered[r] = malloc(shard * tp * 2);
            memcpy(shards[r], (uint16_t *)w.data + r * shard, shard * 2);
        }
        eq_group g = eq_group_sim(tp, EQ_ALGO_RING);
        EQ_EXPECT_OK(eq_all_gather(&g, (const void *const *)shards, (void *const *)gathered, shard, EQ_BF16));
        for (int r = 0; r < tp; r++) {
            EQ_EXPECT(memcmp(gathered[r], w.data, shard * tp * 2) == 0, "tp=%d rank %d gathered weight differs", tp,
                      r);
            free(shards[r]), free(gathered[r]);
        }
    }
    /* Row-parallel: rank r holds columns [r K/tp, (r+1) K/tp) of every row, packed [N, K/tp];
     * the gathered buffer is [tp][N][K/tp], i.e. element (n, k) at chunk k / (K/tp). */
    for (int tp = 2; tp <= 4; tp *= 2) {
        const int ks = K / tp;
        const size_t shard = (size_t)N * ks;
        uint16_t *shards[4], *gathered[4];
        for (int r = 0; r < tp; r++) {
            shards[r] = malloc(shard * 2);
            gathered[r] = malloc(shard * tp * 2);
            for (int n = 0; n < N; n++)
                memcpy(shards[r] + n * ks, (uint16_t *)w.data + n * K + r * ks, (size_t)ks * 2);
        }
        eq_group g = eq_group_sim(tp, EQ_ALGO_RING);
        EQ_EXPECT_OK(eq_all_gather(&g, (const void *const *)shards, (void *const *)gathered, shard, EQ_BF16));
        int differ = 0;
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                differ += gathered[tp - 1][(size_t)(k / ks) * shard + (size_t)n * ks + k % ks] !=
                          ((uint16_t *)w.data)[n * K + k];
        EQ_EXPECT(differ == 0, "tp=%d row-parallel shards gather to %d different elements", tp, differ);
        for (int r = 0; r < tp; r++) free(shards[r]), free(gathered[r]);
    }
    eq_tensor_free(&in), eq_tensor_free(&w), eq_tensor_free(&out);
}

static void test_column_parallel_bit_exact(void)
{
    for (int d = 0; d < 2; d++) {
        eq_dtype dt = d ? EQ_BF16 : EQ_FP32;
        eq_tensor in, w, ref, out;
        make_operands(dt, &in, &w, &ref);
        eq_step s1 = make_step(dt, 1, EQ_ALGO_RING);
        EQ_EXPECT_OK(eq_column_parallel_forward(&s1, &ref, &in, &w));
        for (int tp = 2; tp <= 4; tp *= 2) {
            eq_tensor_init_2d(&out, dt, M, N);
            eq_step s = make_step(dt, tp, EQ_ALGO_RING);
            EQ_EXPECT_OK(eq_column_parallel_forward(&s, &out, &in, &w));
            EQ_EXPECT(memcmp(out.data, ref.data, eq_tensor_bytes(&ref)) == 0, "%s column-parallel tp=%d not bit-exact",
                      eq_dtype_name(dt), tp);
            eq_tensor_free(&out);
        }
        eq_tensor_free(&in), eq_tensor_free(&w), eq_tensor_free(&ref);
    }
}

/* Row-parallel under the seq order, recomputed by hand: partial r = GEMM over K slice r, rounded
 * to bf16; then ((p0 + p1) + p2) + p3 with a bf16 rounding after each add. */
static void test_row_parallel_order(void)
{
    for (int tp = 1; tp <= 4; tp *= 2) {
        eq_tensor in, w, out;
        make_operands(EQ_BF16, &in, &w, &out);
        eq_step s = make_step(EQ_BF16, tp, EQ_ALGO_SEQ);
        EQ_EXPECT_OK(eq_row_parallel_forward(&s, &out, &in, &w));
        const int ks = K / tp;
        uint16_t partial[M * N], expect[M * N];
        for (int r = 0; r < tp; r++) {
            const uint16_t *a = (const uint16_t *)in.data + r * ks, *b = (const uint16_t *)w.data + r * ks;
            EQ_EXPECT_OK(eq_backend_cpu.gemm_nt(EQ_BF16, M, N, ks, a, K, b, K, partial, N));
            for (int i = 0; i < M * N; i++) expect[i] = r == 0 ? partial[i] : eq_bf16_add(expect[i], partial[i]);
        }
        EQ_EXPECT(memcmp(out.data, expect, sizeof expect) == 0, "row-parallel tp=%d (seq) not the hand order", tp);
        eq_tensor_free(&in), eq_tensor_free(&w), eq_tensor_free(&out);
    }
    /* fp32 row-parallel stays within gamma_K of the exact product whatever tp and order. */
    for (int tp = 2; tp <= 4; tp *= 2)
        for (int a = 0; a < EQ_ALGO_COUNT; a++) {
            eq_tensor in, w, out;
            make_operands(EQ_FP32, &in, &w, &out);
            eq_step s = make_step(EQ_FP32, tp, (eq_algo)a);
            EQ_EXPECT_OK(eq_row_parallel_forward(&s, &out, &in, &w));
            EQ_EXPECT(outside_gemm_bound(&in, &w, &out, 0) == 0, "fp32 row-parallel tp=%d %s outside gamma_K", tp,
                      eq_algo_name((eq_algo)a));
            eq_tensor_free(&in), eq_tensor_free(&w), eq_tensor_free(&out);
        }
}

/* f(in, W) = sum_ij g_ij out_ij for a fixed g; the backward with dout = g gives df/din, df/dW. */
static double linear_objective(int column, const eq_tensor *in, const eq_tensor *w, const eq_tensor *g)
{
    eq_tensor out;
    eq_tensor_init_2d(&out, EQ_FP64, M, N);
    eq_step s = make_step(EQ_FP64, 1, EQ_ALGO_SEQ);
    if (column) eq_column_parallel_forward(&s, &out, in, w);
    else eq_row_parallel_forward(&s, &out, in, w);
    double f = 0;
    for (int i = 0; i < M * N; i++) f += eq_tensor_get(g, i) * eq_tensor_get(&out, i);
    eq_tensor_free(&out);
    return f;
}

/* Largest |analytic - central difference| / max(1, |analytic|) over every element of x. With
 * h = 1e-6 the difference quotient of this bilinear f is exact up to cancellation, ~1e-10. */
static double worst_fd_error(int column, eq_tensor *in, eq_tensor *w, const eq_tensor *g, eq_tensor *x,
                             const eq_tensor *grad)
{
    const double h = 1e-6;
    double worst = 0;
    for (int64_t i = 0; i < eq_tensor_numel(x); i++) {
        double v = eq_tensor_get(x, i);
        eq_tensor_set(x, i, v + h);
        double up = linear_objective(column, in, w, g);
        eq_tensor_set(x, i, v - h);
        double down = linear_objective(column, in, w, g);
        eq_tensor_set(x, i, v);
        double fd = (up - down) / (2 * h), an = eq_tensor_get(grad, i);
        double err = fabs(an - fd) / fmax(1.0, fabs(an));
        if (err > worst) worst = err;
    }
    return worst;
}

static void test_backward_finite_differences(void)
{
    for (int column = 0; column <= 1; column++) {
        eq_tensor in, w, g, din, dw;
        make_operands(EQ_FP64, &in, &w, &g); /* g: a third random [M, N] tensor as dout */
        eq_rng_fill_normal(&g, 6, "g", 1.0);
        eq_tensor_init_2d(&din, EQ_FP64, M, K);
        eq_tensor_init_2d(&dw, EQ_FP64, N, K);
        for (int tp = 1; tp <= 4; tp *= 2) {
            eq_step s = make_step(EQ_FP64, tp, EQ_ALGO_RING);
            if (column) EQ_EXPECT_OK(eq_column_parallel_backward(&s, &din, &dw, &g, &in, &w));
            else EQ_EXPECT_OK(eq_row_parallel_backward(&s, &din, &dw, &g, &in, &w));
            double e_in = worst_fd_error(column, &in, &w, &g, &in, &din);
            double e_w = worst_fd_error(column, &in, &w, &g, &w, &dw);
            EQ_EXPECT(e_in < 1e-7 && e_w < 1e-7, "%s-parallel tp=%d backward vs FD: din %.2e, dW %.2e",
                      column ? "column" : "row", tp, e_in, e_w);
        }
        /* A planted error in the analytic gradient is seen by the same check. */
        eq_tensor_set(&dw, 3, eq_tensor_get(&dw, 3) + 1e-3);
        EQ_EXPECT(worst_fd_error(column, &in, &w, &g, &w, &dw) > 1e-4, "planted dW error missed");
        eq_tensor_free(&in), eq_tensor_free(&w), eq_tensor_free(&g), eq_tensor_free(&din), eq_tensor_free(&dw);
    }
}

/* Under tp, weight gradients and the row-parallel input gradient are computed by exactly one rank
 * with the whole reduction: bit-exact against tp = 1 in fp32. The column-parallel input gradient
 * goes through an all-reduce: different order, and it stays within gamma_K of the fp64 value. */
static void test_backward_under_tp(void)
{
    for (int column = 0; column <= 1; column++) {
        eq_tensor in, w, g, din1, dw1, din, dw;
        make_operands(EQ_FP32, &in, &w, &g);
        eq_rng_fill_normal(&g, 6, "g", 1.0);
        eq_tensor_init_2d(&din1, EQ_FP32, M, K), eq_tensor_init_2d(&dw1, EQ_FP32, N, K);
        eq_tensor_init_2d(&din, EQ_FP32, M, K), eq_tensor_init_2d(&dw, EQ_FP32, N, K);
        eq_step s1 = make_step(EQ_FP32, 1, EQ_ALGO_RING);
        if (column) EQ_EXPECT_OK(eq_column_parallel_backward(&s1, &din1, &dw1, &g, &in, &w));
        else EQ_EXPECT_OK(eq_row_parallel_backward(&s1, &din1, &dw1, &g, &in, &w));
        for (int tp = 2; tp <= 4; tp *= 2) {
            eq_step s = make_step(EQ_FP32, tp, EQ_ALGO_RING);
            if (column) EQ_EXPECT_OK(eq_column_parallel_backward(&s, &din, &dw, &g, &in, &w));
            else EQ_EXPECT_OK(eq_row_parallel_backward(&s, &din, &dw, &g, &in, &w));
            EQ_EXPECT(memcmp(dw.data, dw1.data, eq_tensor_bytes(&dw)) == 0, "%s dW tp=%d not bit-exact",
                      column ? "column" : "row", tp);
            if (!column)
                EQ_EXPECT(memcmp(din.data, din1.data, eq_tensor_bytes(&din)) == 0, "row din tp=%d not bit-exact", tp);
            double worst = 0;
            for (int i = 0; i < M * K; i++) worst = fmax(worst, fabs(eq_tensor_get(&din, i) - eq_tensor_get(&din1, i)));
            EQ_EXPECT(worst < 1e-5, "%s din tp=%d differs by %g", column ? "column" : "row", tp, worst);
        }
        eq_tensor_free(&in), eq_tensor_free(&w), eq_tensor_free(&g);
        eq_tensor_free(&din1), eq_tensor_free(&dw1), eq_tensor_free(&din), eq_tensor_free(&dw);
    }
}

static void test_batch_shards(void)
{
    eq_tensor full, local, back;
    int64_t shape[3] = {3, 4, 5};
    eq_tensor_init(&full, EQ_FP32, 3, shape);
    eq_tensor_init(&back, EQ_FP32, 3, shape);
    for (int i = 0; i < 60; i++) eq_tensor_set(&full, i, i);
    for (int d = 0; d < 2; d++) {
        EQ_EXPECT_OK(eq_batch_shard_gather(&full, 2, d, &local));
        /* dp rank d holds batch columns 2d, 2d+1 of every position: element (s, b, h) = s*20 + b*5 + h. */
        EQ_EXPECT(eq_tensor_get(&local, 0) == 10 * d && eq_tensor_get(&local, 10) == 20 + 10 * d,
                  "rank %d shard starts %g, %g", d, eq_tensor_get(&local, 0), eq_tensor_get(&local, 10));
        eq_batch_shard_scatter(&local, 2, d, &back);
        eq_tensor_free(&local);
    }
    EQ_EXPECT(memcmp(full.data, back.data, eq_tensor_bytes(&full)) == 0, "shards do not scatter back");
    eq_tensor_free(&full), eq_tensor_free(&back);
}

int main(void)
{
    test_gemm_contract();
    test_weight_shards_gather_to_master();
    test_column_parallel_bit_exact();
    test_row_parallel_order();
    test_batch_shards();
    test_backward_finite_differences();
    test_backward_under_tp();
    return eq_test_finish("parallel_linear_test");
}
