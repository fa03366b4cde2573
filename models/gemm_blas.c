/* GEMM through OpenBLAS, called so that each element's reduction order depends on K alone. */
#include "models/gemm_blas.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/phase_time.h"

/* Shape invariance. A layout changes the M (data parallel) or N (column parallel) of a GEMM,
 * never the K of an output element, so the harness needs each element's reduction order to
 * depend on K alone. OpenBLAS's blocked SKYLAKEX kernels give that; its small-matrix kernels,
 * taken when M*N*K <= 100^3 (kernel/x86_64/sgemm_small_kernel_permit_skylakex.c and its dgemm
 * twin), sum in another order. So a small GEMM gets zero rows appended to A until it is past that threshold: the extra
 * rows of C are dropped, the real rows are computed by the blocked kernels. */
#define SMALL_PATH_MNK 1000000.0

static int64_t padded_rows(int64_t M, int64_t N, int64_t K)
{
    double per_row = (double)N * (double)K;
    if ((double)M * per_row > SMALL_PATH_MNK) return M;
    return (int64_t)(SMALL_PATH_MNK / per_row) + 1;
}

eq_status eq_gemm_blas(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                       int64_t ldb, void *C, int64_t ldc)
{
    const int64_t rows = padded_rows(M, N, K);
    const size_t elem = eq_dtype_size(dt);
    const void *a = A;
    void *c = C;
    char *a_pad = NULL, *c_pad = NULL;
    if (rows > M) {
        a_pad = calloc((size_t)(rows * K), elem);
        c_pad = malloc((size_t)(rows * N) * elem);
        if (a_pad == NULL || c_pad == NULL) {
            free(a_pad);
            free(c_pad);
            return EQ_FAIL(EQ_ERR_NOMEM, "GEMM: no memory to pad %lld rows", (long long)rows);
        }
        for (int64_t r = 0; r < M; r++)
            memcpy(a_pad + (size_t)(r * K) * elem, (const char *)A + (size_t)(r * lda) * elem, (size_t)K * elem);
        a = a_pad, lda = K, c = c_pad;
    }
    const int64_t c_ld = rows > M ? N : ldc;
    const int64_t blas = eq_phase_blas_enter();
    if (dt == EQ_FP64)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)N, (blasint)K, 1.0, a,
                    (blasint)lda, B, (blasint)ldb, 0.0, c, (blasint)c_ld);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)N, (blasint)K, 1.0f, a,
                    (blasint)lda, B, (blasint)ldb, 0.0f, c, (blasint)c_ld);
    eq_phase_blas_leave(blas);
    if (rows > M)
        for (int64_t r = 0; r < M; r++)
            memcpy((char *)C + (size_t)(r * ldc) * elem, c_pad + (size_t)(r * N) * elem, (size_t)N * elem);
    free(a_pad);
    free(c_pad);
    return EQ_OK;
}


/* Fills x with values in [-1, 1) from a fixed LCG (Numerical Recipes' constants): the probe needs
 * data, not quality. */
static void fill_probe(void *x, eq_dtype dt, int64_t n, uint32_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        double v = (double)(seed >> 8) * 0x1p-23 - 1.0;
        if (dt == EQ_FP64) ((double *)x)[i] = v;
        else ((float *)x)[i] = (float)v;
    }
}

int eq_gemm_blas_shape_invariant(eq_dtype dt)
{
    enum { M = 96, N = 160, K = 192, ROW0 = 48, COL0 = 64, COLS = 40 };
    const size_t elem = eq_dtype_size(dt);
    char *a = malloc((size_t)M * K * elem), *b = malloc((size_t)N * K * elem);
    char *full = malloc((size_t)M * N * elem), *part = malloc((size_t)M * N * elem);
    int invariant = a && b && full && part;
    if (invariant) {
        fill_probe(a, dt, (int64_t)M * K, 1);
        fill_probe(b, dt, (int64_t)N * K, 2);
        invariant = eq_gemm_blas(dt, M, N, K, a, K, b, K, full, N) == EQ_OK;
        /* The rows from ROW0 on (a data-parallel shard), all columns. */
        invariant = invariant &&
                    eq_gemm_blas(dt, M - ROW0, N, K, a + (size_t)ROW0 * K * elem, K, b, K, part, N) == EQ_OK &&
                    memcmp(part, full + (size_t)ROW0 * N * elem, (size_t)(M - ROW0) * N * elem) == 0;
        /* All rows, COLS columns from COL0 (a column-parallel shard). */
        invariant = invariant &&
                    eq_gemm_blas(dt, M, COLS, K, a, K, b + (size_t)COL0 * K * elem, K, part, COLS) == EQ_OK;
        for (int64_t r = 0; invariant && r < M; r++)
            invariant = memcmp(part + (size_t)r * COLS * elem, full + (size_t)(r * N + COL0) * elem,
                               (size_t)COLS * elem) == 0;
    }
    free(a), free(b), free(full), free(part);
    return invariant;
}
