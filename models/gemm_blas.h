/* GEMM through OpenBLAS (single-threaded: the caller splits rows over its own threads), made as
 * shape-invariant as OpenBLAS allows, and a probe that says whether it is. OpenBLAS is opened on
 * first use (harness/base/openblas.h): a GEMM returns its failure to load; the probes below, which
 * answer 0 then, are for callers that have opened it (models/backend_cpu.c's kernel choice). */
#ifndef EQUIV_MODELS_GEMM_BLAS_H
#define EQUIV_MODELS_GEMM_BLAS_H

#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"
#include "models/gemm_small.h"

/* C[M,N] (ldc) = A[M,K] (lda) * B[N,K]^T (ldb) in fp32 or fp64, on the calling thread. */
eq_status eq_gemm_blas(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                       int64_t ldb, void *C, int64_t ldc);

/* 1 if a GEMM over a block of rows, and one over a block of columns, reproduce the full GEMM's
 * elements bit for bit with the kernels OpenBLAS picked on this machine (fp32 or fp64). */
int eq_gemm_blas_shape_invariant(eq_dtype dt);

/* 1 if kernel gives the bits of eq_gemm_blas's padded small GEMMs (fp32 or fp64) on this machine,
 * over a set of shapes covering K = 1 .. eq_gemm_small_max_k(dt) (both of the sets below); see
 * gemm_blas.c. */
int eq_gemm_small_agrees(eq_dtype dt, eq_gemm_small_fn *kernel);

/* Runs that probe on the wide shapes (N, K >= EQ_GEMM_SMALL_MIN_NK) and, if it passes, has
 * eq_gemm_blas hand each GEMM it would pad (M*N*K <= 100^3) with 1 <= K <= eq_gemm_small_max_k(dt)
 * to kernel instead; a narrow one only once the narrow shapes have passed too, probed at the first
 * narrow GEMM (on whichever thread). Else (or with kernel NULL) it pads, as before. Returns 1 if
 * kernel is in use. Call before any thread runs a GEMM. */
int eq_gemm_blas_enable_small(eq_dtype dt, eq_gemm_small_fn *kernel);

/* 1 if eq_gemm_blas hands small GEMMs to a small kernel (fp32 or fp64). */
int eq_gemm_blas_small_in_use(eq_dtype dt);

#endif
