/* A GEMM whose reduction order is fixed by construction: every element of C = A B^T is summed
 * k = 0, 1, ..., K-1 into one accumulator, one rounding per multiply and per add (the project
 * builds with -ffp-contract=off: no FMA). The order depends on K alone, so a layout that changes
 * M or N cannot change a bit. The CPU backend uses it where the BLAS fails its shape-invariance
 * probe (OpenBLAS's Haswell kernels do), trading speed for the guarantee. */
#ifndef EQUIV_MODELS_GEMM_ORDERED_H
#define EQUIV_MODELS_GEMM_ORDERED_H

#include <stdint.h>

#include "harness/base/status.h"

/* C[M,N] (row stride ldc) = A[M,K] (lda) * B[N,K]^T (ldb), overwritten; float and double. */
eq_status eq_gemm_ordered_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                              int64_t ldb, float *C, int64_t ldc);
eq_status eq_gemm_ordered_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B,
                              int64_t ldb, double *C, int64_t ldc);
/* The same, continuing: C holds an accumulator on entry (the sum over some earlier part of K) and
 * each element goes on adding k = 0..K-1 of this call in order onto it, rounding after every
 * multiply and add as above. Splitting K into consecutive parts and calling this once per part on
 * one C gives the bits of one call over the whole K (models/gemm_carry.h). */
eq_status eq_gemm_ordered_acc_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                                  int64_t ldb, float *C, int64_t ldc);
eq_status eq_gemm_ordered_acc_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B,
                                  int64_t ldb, double *C, int64_t ldc);

#endif
