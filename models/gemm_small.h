/* A GEMM for small shapes that reproduces, bit for bit, what OpenBLAS's blocked SKYLAKEX kernels
 * compute when K fits in one of their K panels: every element of C = A B^T is one chain of fused
 * multiply-adds, acc = fma(A[i,k], B[j,k], acc) for k = 0..K-1 from acc = +0, stored as is.
 * models/gemm_blas.c uses it instead of padding a small GEMM into the blocked path, and only where
 * a probe (eq_gemm_small_agrees) has seen it give the padded OpenBLAS bits on this machine. */
#ifndef EQUIV_MODELS_GEMM_SMALL_H
#define EQUIV_MODELS_GEMM_SMALL_H

#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"

/* The largest K that OpenBLAS 0.3.21's SKYLAKEX sgemm and dgemm reduce in one panel (GEMM_Q), so in
 * one chain: measured here, fp32 and fp64 matched the chain for every K up to these on random data
 * and for none above (a second panel is summed apart and added to C). The probe checks them. */
#define EQ_GEMM_SMALL_MAX_K_F32 448
#define EQ_GEMM_SMALL_MAX_K_F64 384

/* The smallest N and K of the shapes whose probe runs when the kernel is enabled; the narrower ones
 * are probed at the first narrow GEMM (models/gemm_blas.c says why). */
#define EQ_GEMM_SMALL_MIN_NK 8

/* C[M,N] (ldc) = A[M,K] (lda) * B[N,K]^T (ldb), fp32 or fp64, each element one fma chain over
 * k = 0..K-1 (any K >= 0; K = 0 gives zeros). */
typedef eq_status eq_gemm_small_fn(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                                   const void *B, int64_t ldb, void *C, int64_t ldc);
eq_gemm_small_fn eq_gemm_small;

/* The largest K for which the small kernel stands in for OpenBLAS (fp32 or fp64). */
int64_t eq_gemm_small_max_k(eq_dtype dt);

#endif
