/* The per-element quantities of the rounding-error bound (rounding_bound.h) of a GEMM
 *   out [M, N] = a [M, K] * b [N, K]^T:
 *   y = sum_k a_k b_k,   S = sum_k |a_k b_k|,   Q_T = sum_t |p_t| (T partials of K/T terms; |y| for T = 1),
 * as upper bounds, one block of output rows at a time.
 *
 * bf16 and fp32 operands (exact in fp32) go through fp32 GEMMs over fixed blocks of rows on
 * eq_parallel_for's threads, never a full-size copy; each computed value is then inflated so that
 * it bounds the exact one (the proof is in rounding_bound_products.c): S by about K u32 of itself,
 * |y| and Q by gamma_{K/T}(u32) S (u32 = 2^-24), which moves the bound by at most ~2e-3 of
 * itself at K = 4096 (the docs sizes of row_parallel and column_parallel: +0.02% to +0.18%; at
 * K = 256 below +0.005%). fp64 operands, or operands so large that an fp32 sum could overflow, go through fp64
 * GEMMs in one block, as exact as before (fp64 rounding of those is below 1e-12 of the bound). */
#ifndef EQUIV_HARNESS_ROUNDING_BOUND_PRODUCTS_H
#define EQUIV_HARNESS_ROUNDING_BOUND_PRODUCTS_H

#include <stdint.h>

#include "harness/base/tensor.h"

/* Rows [row0, row0 + rows) of the output: upper bounds on |y|, S, Q_ref and Q_test, [rows, N] each. */
typedef struct {
    int64_t row0, rows;
    const double *abs_y, *S, *Q_ref, *Q_test;
} eq_bound_rows;

/* Called once per block, maybe on several threads at once (never twice for one block); `block` is
 * in [0, eq_bound_row_blocks(M)), so a caller can keep one running maximum per block and combine
 * them in block order (the same answer for every thread count). */
typedef void (*eq_bound_rows_fn)(void *ctx, int64_t block, const eq_bound_rows *r);

/* How many blocks the rows of an M-row output make, at most. */
int64_t eq_bound_row_blocks(int64_t M);

/* Calls fn for every block of rows of out = a b^T, with T_ref and T_test the runs' partitions of K
 * (each divides K). EQ_ERR_NOMEM when scratch cannot be had. */
eq_status eq_bound_products(const eq_tensor *a, const eq_tensor *b, int64_t M, int64_t N, int64_t K, int T_ref,
                            int T_test, eq_bound_rows_fn fn, void *ctx);

#endif
