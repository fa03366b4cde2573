/* The three GEMM forms a forward and backward pass needs, on top of the backend's C = A B^T.
 *
 *   EQ_GEMM_NT  C[M,N] = A[M,K]   * B[N,K]^T   forward of a linear (weight [N,K])
 *   EQ_GEMM_NN  C[M,N] = A[M,K]   * B[K,N]     input gradient: dX = dY W; attention P V
 *   EQ_GEMM_TN  C[M,N] = A[K,M]^T * B[K,N]     weight gradient: dW = dY^T X
 *
 * Leading dimensions are the row strides of A, B, C as stored. Transposed operands are copied
 * into packed scratch first (exact), so every form has the backend's rounding contract and its
 * shape invariance: an element's sum runs over K in one fixed order. C is overwritten. */
#ifndef EQUIV_MODELS_GEMM_H
#define EQUIV_MODELS_GEMM_H

#include <stdint.h>

#include "models/backend.h"

typedef enum { EQ_GEMM_NT, EQ_GEMM_NN, EQ_GEMM_TN } eq_gemm_form;

/* dst[cols, rows] (packed) = src[rows, cols]^T (row stride ld), elements of `elem` bytes: the
 * packing eq_gemm does for a transposed operand. */
void eq_transpose(size_t elem, int64_t rows, int64_t cols, const void *src, int64_t ld, void *dst);

eq_status eq_gemm(const eq_backend *be, eq_dtype dt, eq_gemm_form form, int64_t M, int64_t N, int64_t K,
                  const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc);

#endif
