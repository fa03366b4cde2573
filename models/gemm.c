#include "models/gemm.h"

#include <stdlib.h>
#include <string.h>

#include "harness/base/phase_time.h"

/* dst[cols, rows] (packed) = src[rows, cols]^T (row stride ld), one typed loop per element size. */
#define DEFINE_TRANSPOSE(name, T)                                                              \
    static void name(int64_t rows, int64_t cols, const T *src, int64_t ld, T *dst)             \
    {                                                                                          \
        for (int64_t r = 0; r < rows; r++)                                                     \
            for (int64_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * ld + c];           \
    }
DEFINE_TRANSPOSE(transpose16, uint16_t)
DEFINE_TRANSPOSE(transpose32, uint32_t)
DEFINE_TRANSPOSE(transpose64, uint64_t)

void eq_transpose(size_t elem, int64_t rows, int64_t cols, const void *src, int64_t ld, void *dst)
{
    if (elem == 2) transpose16(rows, cols, src, ld, dst);
    else if (elem == 4) transpose32(rows, cols, src, ld, dst);
    else transpose64(rows, cols, src, ld, dst);
}

eq_status eq_gemm(const eq_backend *be, eq_dtype dt, eq_gemm_form form, int64_t M, int64_t N, int64_t K,
                  const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc)
{
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_GEMM);
    const size_t elem = eq_dtype_size(dt);
    void *a_packed = NULL, *b_packed = NULL;
    eq_status st = EQ_OK;
    if (form == EQ_GEMM_TN) { /* A is [K, M]: make A^T [M, K] */
        a_packed = malloc((size_t)(M * K) * elem);
        if (a_packed == NULL) goto nomem;
        eq_transpose(elem, K, M, A, lda, a_packed);
        A = a_packed;
        lda = K;
    }
    if (form == EQ_GEMM_NN || form == EQ_GEMM_TN) { /* B is [K, N]: make B^T [N, K] */
        b_packed = malloc((size_t)(N * K) * elem);
        if (b_packed == NULL) goto nomem;
        eq_transpose(elem, K, N, B, ldb, b_packed);
        B = b_packed;
        ldb = K;
    }
    st = be->gemm_nt(dt, M, N, K, A, lda, B, ldb, C, ldc);
    free(a_packed);
    free(b_packed);
    eq_phase_leave(EQ_PHASE_GEMM, mark);
    return st;
nomem:
    free(a_packed);
    free(b_packed);
    eq_phase_leave(EQ_PHASE_GEMM, mark);
    return EQ_FAIL(EQ_ERR_NOMEM, "GEMM [%lld x %lld x %lld]: no memory for a transposed operand", (long long)M,
                   (long long)N, (long long)K);
}
