/* The GEMM of the TP-invariant mode (--algo tp_invariant): an accumulator carried over K.
 *
 * A sum over K split over tp ranks is bit-identical to the unsplit one only if every element is
 * summed in the same order with the same rounding at every tp. So here every element is summed
 * k = 0, 1, ..., K-1 in order into one accumulator (fp32 for bf16 and fp32, fp64 for fp64: the
 * backend contract's accumulator, models/backend.h), rank r continues from rank r-1's accumulator
 * instead of starting at zero, and the result is rounded to the dtype once, after the last rank:
 *
 *   acc[M, N] = 0
 *   for r = 0 .. tp-1:  acc += op(A)[:, K block r] op(B)[K block r, :]    (eq_gemm_carry)
 *   out = dtype(acc)                                                       (eq_gemm_carry_round)
 *
 * tp = 1 is the same code with one block, so the dp1-tp1 reference of a tp_invariant run follows
 * the same order. The kernel is the CPU's ordered GEMM (models/gemm_ordered.h), not OpenBLAS,
 * whose blocked kernels do not sum in K order. Forms and strides as models/gemm.h. */
#ifndef EQUIV_MODELS_GEMM_CARRY_H
#define EQUIV_MODELS_GEMM_CARRY_H

#include <stddef.h>
#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"
#include "models/gemm.h"

/* Bytes of one accumulator element: 8 for fp64, 4 (fp32) for bf16 and fp32. */
size_t eq_gemm_carry_elem(eq_dtype dt);

/* acc[M, N] (packed, eq_gemm_carry_elem(dt) per element) += op(A)[M, K] op(B)[K, N], each element
 * continuing its sum over k = 0..K-1 in order; operands in dtype dt, widened exactly. */
eq_status eq_gemm_carry(eq_dtype dt, eq_gemm_form form, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                        const void *B, int64_t ldb, void *acc);

/* out[M, N] (row stride ldo, dtype dt) = acc[M, N] (packed) rounded once to dt. */
void eq_gemm_carry_round(eq_dtype dt, int64_t M, int64_t N, const void *acc, void *out, int64_t ldo);

#endif
