/* GEMM through OpenBLAS (single-threaded: the caller splits rows over its own threads), made as
 * shape-invariant as OpenBLAS allows, and a probe that says whether it is. */
#ifndef EQUIV_MODELS_GEMM_BLAS_H
#define EQUIV_MODELS_GEMM_BLAS_H

#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"

/* C[M,N] (ldc) = A[M,K] (lda) * B[N,K]^T (ldb) in fp32 or fp64, on the calling thread. */
eq_status eq_gemm_blas(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                       int64_t ldb, void *C, int64_t ldc);

/* 1 if a GEMM over a block of rows, and one over a block of columns, reproduce the full GEMM's
 * elements bit for bit with the kernels OpenBLAS picked on this machine (fp32 or fp64). */
int eq_gemm_blas_shape_invariant(eq_dtype dt);

#endif
