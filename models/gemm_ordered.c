#include "models/gemm_ordered.h"

#include <stdlib.h>
#include <string.h>

/* Tiles over N and K keep a [TILE_K, TILE_N] block of B^T and a row of C in cache. K tiles are
 * visited in increasing order and C accumulates across them, so each element's sum is still
 * k = 0..K-1 in order. */
#define TILE_N 256
#define TILE_K 128

#define DEFINE_ORDERED_GEMM(name, T)                                                                      \
    static eq_status name(int64_t M, int64_t N, int64_t K, const T *A, int64_t lda, const T *B, int64_t ldb, \
                          T *C, int64_t ldc, int accumulate)                                              \
    {                                                                                                     \
        T *bt = malloc((size_t)TILE_K * TILE_N * sizeof *bt); /* B^T tile [TILE_K, TILE_N] */           \
        if (bt == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "ordered GEMM: no memory for a tile");              \
        for (int64_t jb = 0; jb < N; jb += TILE_N) {                                                      \
            const int64_t jn = N - jb < TILE_N ? N - jb : TILE_N;                                         \
            for (int64_t i = 0; i < M && !accumulate; i++) memset(C + i * ldc + jb, 0, (size_t)jn * sizeof *C); \
            for (int64_t kb = 0; kb < K; kb += TILE_K) {                                                  \
                const int64_t kn = K - kb < TILE_K ? K - kb : TILE_K;                                     \
                for (int64_t j = 0; j < jn; j++)                                                          \
                    for (int64_t k = 0; k < kn; k++) bt[k * TILE_N + j] = B[(jb + j) * ldb + kb + k];     \
                for (int64_t i = 0; i < M; i++) {                                                         \
                    T *c = C + i * ldc + jb;                                                              \
                    const T *a = A + i * lda + kb;                                                        \
                    for (int64_t k = 0; k < kn; k++) {                                                    \
                        const T av = a[k], *b = bt + k * TILE_N;                                          \
                        for (int64_t j = 0; j < jn; j++) c[j] += av * b[j];                               \
                    }                                                                                     \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        free(bt);                                                                                         \
        return EQ_OK;                                                                                     \
    }

DEFINE_ORDERED_GEMM(ordered_f32, float)
DEFINE_ORDERED_GEMM(ordered_f64, double)

eq_status eq_gemm_ordered_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                              int64_t ldb, float *C, int64_t ldc)
{
    return ordered_f32(M, N, K, A, lda, B, ldb, C, ldc, 0);
}

eq_status eq_gemm_ordered_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B,
                              int64_t ldb, double *C, int64_t ldc)
{
    return ordered_f64(M, N, K, A, lda, B, ldb, C, ldc, 0);
}

eq_status eq_gemm_ordered_acc_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                                  int64_t ldb, float *C, int64_t ldc)
{
    return ordered_f32(M, N, K, A, lda, B, ldb, C, ldc, 1);
}

eq_status eq_gemm_ordered_acc_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B,
                                  int64_t ldb, double *C, int64_t ldc)
{
    return ordered_f64(M, N, K, A, lda, B, ldb, C, ldc, 1);
}
