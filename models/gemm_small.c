#include "models/gemm_small.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Each element is its own chain of fmas, in k order: vectorising over the columns of a row of C
 * (ROWS rows by COLS columns of accumulators at a time, B^T packed so a k step reads COLS
 * neighbours, zero columns filling the last tile) changes which chains run side by side, never
 * the order within one. fma rounds once
 * (it is exactly the rounded a*b+c), so the clone with FMA instructions and the one calling libm's
 * fma give the same bits; the project's -ffp-contract=off keeps the compiler from fusing anything
 * else. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define SMALL_CLONES __attribute__((target_clones("avx512f", "fma", "default")))
#else
#define SMALL_CLONES
#endif

#define ROWS 4

#define DEFINE_SMALL_GEMM(name, T, FMA, COLS)                                                                  \
    /* One tile: rows i0..i0+rn of C, columns j0..j0+cn (cn <= COLS); bt is B^T [K, ldbt]. */            \
    SMALL_CLONES static void name##_tile(int64_t rn, int64_t cn, int64_t K, const T *A, int64_t lda,         \
                                         const T *bt, int64_t ldbt, T *C, int64_t ldc)                         \
    {                                                                                                           \
        T acc[ROWS][COLS] = {{0}}; /* [rows of the tile, columns of the tile] */                               \
        if (rn == ROWS) {                                                                                       \
            for (int64_t k = 0; k < K; k++) {                                                                   \
                const T *b = bt + k * ldbt;                                                                     \
                _Pragma("GCC unroll 4") for (int r = 0; r < ROWS; r++) {                                        \
                    const T a = A[r * lda + k];                                                                 \
                    for (int j = 0; j < COLS; j++) acc[r][j] = FMA(a, b[j], acc[r][j]);                          \
                }                                                                                               \
            }                                                                                                   \
        } else {                                                                                                \
            for (int64_t k = 0; k < K; k++) {                                                                   \
                const T *b = bt + k * ldbt;                                                                     \
                for (int64_t r = 0; r < rn; r++) {                                                              \
                    const T a = A[r * lda + k];                                                                 \
                    for (int j = 0; j < COLS; j++) acc[r][j] = FMA(a, b[j], acc[r][j]);                          \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        for (int64_t r = 0; r < rn; r++) memcpy(C + r * ldc, acc[r], (size_t)cn * sizeof acc[r][0]);          \
    }                                                                                                           \
    static eq_status name(int64_t M, int64_t N, int64_t K, const T *A, int64_t lda, const T *B, int64_t ldb,   \
                          T *C, int64_t ldc)                                                                   \
    {                                                                                                           \
        /* B^T [K, ldbt], its columns past N zero: the last tile is computed whole, stored in part. */      \
        const int64_t ldbt = (N + COLS - 1) / COLS * COLS;                                                      \
        T *bt = calloc((size_t)(K * ldbt + 1), sizeof *bt);                                                     \
        if (bt == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "small GEMM: no memory for B^T [%lld, %lld]",             \
                                       (long long)K, (long long)ldbt);                                         \
        for (int64_t j = 0; j < N; j++)                                                                         \
            for (int64_t k = 0; k < K; k++) bt[k * ldbt + j] = B[j * ldb + k];                                  \
        for (int64_t i0 = 0; i0 < M; i0 += ROWS) {                                                              \
            const int64_t rn = M - i0 < ROWS ? M - i0 : ROWS;                                                   \
            for (int64_t j0 = 0; j0 < N; j0 += COLS)                                                            \
                name##_tile(rn, N - j0 < COLS ? N - j0 : COLS, K, A + i0 * lda, lda, bt + j0, ldbt,             \
                            C + i0 * ldc + j0, ldc);                                                            \
        }                                                                                                       \
        free(bt);                                                                                               \
        return EQ_OK;                                                                                           \
    }

DEFINE_SMALL_GEMM(small_f32, float, fmaf, 16)
DEFINE_SMALL_GEMM(small_f64, double, fma, 8)

eq_status eq_gemm_small(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                        int64_t ldb, void *C, int64_t ldc)
{
    if (dt == EQ_FP64) return small_f64(M, N, K, A, lda, B, ldb, C, ldc);
    return small_f32(M, N, K, A, lda, B, ldb, C, ldc);
}

int64_t eq_gemm_small_max_k(eq_dtype dt)
{
    return dt == EQ_FP64 ? EQ_GEMM_SMALL_MAX_K_F64 : EQ_GEMM_SMALL_MAX_K_F32;
}
