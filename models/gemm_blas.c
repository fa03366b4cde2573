/* GEMM through OpenBLAS, called so that each element's reduction order depends on K alone. */
#include "models/gemm_blas.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/openblas.h"
#include "harness/base/phase_time.h"
#include "models/gemm_small.h"

/* Shape invariance. A layout changes the M (data parallel) or N (column parallel) of a GEMM,
 * never the K of an output element, so the harness needs each element's reduction order to
 * depend on K alone. OpenBLAS's blocked SKYLAKEX kernels give that; its small-matrix kernels,
 * taken when M*N*K <= 100^3 (kernel/x86_64/sgemm_small_kernel_permit_skylakex.c and its dgemm
 * twin), sum in another order. So a small GEMM gets zero rows appended to A until it is past that threshold: the extra
 * rows of C are dropped, the real rows are computed by the blocked kernels. Padding can cost 100
 * times the real work, so where eq_gemm_blas_enable_small's probe has passed, a small GEMM whose K
 * fits one panel goes to models/gemm_small.c instead, which computes the blocked kernels' bits. */
#define SMALL_PATH_MNK 1000000.0

static int64_t padded_rows(int64_t M, int64_t N, int64_t K)
{
    double per_row = (double)N * (double)K;
    if ((double)M * per_row > SMALL_PATH_MNK) return M;
    return (int64_t)(SMALL_PATH_MNK / per_row) + 1;
}

/* The kernel that stands in for padding (fp32, fp64), NULL until eq_gemm_blas_enable_small has
 * seen it agree with the padded call; set before any thread starts, read-only after. */
static eq_gemm_small_fn *small_kernel[2];

/* Whether it also agrees on the narrow shapes (N or K below EQ_GEMM_SMALL_MIN_NK): 0 not probed
 * yet, 1 agrees, -1 differs. Probed when the first such GEMM comes (narrow_agrees), on whichever
 * thread, under narrow_lock. */
static atomic_int narrow_state[2];
static pthread_mutex_t narrow_lock = PTHREAD_MUTEX_INITIALIZER;

/* eq_gemm_blas by OpenBLAS alone, small GEMMs padded. */
static eq_status padded_gemm(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                             const void *B, int64_t ldb, void *C, int64_t ldc)
{
    const eq_status opened = eq_openblas_open(); /* done already where the CPU backend was chosen */
    if (opened != EQ_OK) return opened;
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
        eq_openblas.dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)N, (blasint)K, 1.0, a,
                          (blasint)lda, B, (blasint)ldb, 0.0, c, (blasint)c_ld);
    else
        eq_openblas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)N, (blasint)K, 1.0f, a,
                          (blasint)lda, B, (blasint)ldb, 0.0f, c, (blasint)c_ld);
    eq_phase_blas_leave(blas);
    if (rows > M)
        for (int64_t r = 0; r < M; r++)
            memcpy((char *)C + (size_t)(r * ldc) * elem, c_pad + (size_t)(r * N) * elem, (size_t)N * elem);
    free(a_pad);
    free(c_pad);
    return EQ_OK;
}

static int narrow_agrees(eq_dtype dt);

eq_status eq_gemm_blas(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                       int64_t ldb, void *C, int64_t ldc)
{
    eq_gemm_small_fn *small = small_kernel[dt == EQ_FP64];
    if (small != NULL && padded_rows(M, N, K) > M && K >= 1 && K <= eq_gemm_small_max_k(dt) &&
        ((N >= EQ_GEMM_SMALL_MIN_NK && K >= EQ_GEMM_SMALL_MIN_NK) || narrow_agrees(dt)))
        return small(dt, M, N, K, A, lda, B, ldb, C, ldc);
    return padded_gemm(dt, M, N, K, A, lda, B, ldb, C, ldc);
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

/* As fill_probe, every 7th value zero, and fp64 values carrying 47 significant bits: with 24-bit
 * inputs, fp64 products are exact and short sums nearly so, so two summation orders would agree
 * and the probe would prove nothing. */
static void fill_probe_full(void *x, eq_dtype dt, int64_t n, uint32_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        double v = (double)(seed >> 8) * 0x1p-23 - 1.0;
        seed = seed * 1664525u + 1013904223u;
        if (dt == EQ_FP64) v += (double)(seed >> 8) * 0x1p-47;
        if (i % 7 == 3) v = 0.0;
        if (dt == EQ_FP64) ((double *)x)[i] = v;
        else ((float *)x)[i] = (float)v;
    }
}

/* Why the small kernel may replace padding. Padding exists only to reach OpenBLAS's blocked
 * kernels, and what those compute for a K within one panel is one fma chain per element in k order
 * (models/gemm_small.h): a property of this OpenBLAS build and this CPU's kernel, not a promise.
 * So it is checked here, on this machine, before the kernel is used: random data (zeros included,
 * full fp64 mantissas), K from 1 through the panel limit and the limit itself, M and N at, below
 * and past the kernel's tile widths, and strided operands; every element of C must equal the
 * padded OpenBLAS call's bit for bit. A summation order that differed would show in a few elements
 * at least; on any mismatch the padding stays.
 *
 * In two sets. A shape's padded call writes about 1e6 / K elements of C and reads 1e6 / N of A, so
 * the narrow shapes (N or K below EQ_GEMM_SMALL_MIN_NK) cost the most: 16 MB of fresh memory at
 * N = K = 1, a third of the CPU time of a ci-size run when every start of equiv probed them. No
 * case of equiv has such a GEMM (the probe case's N = K = 8 are the smallest), toy sizes in unit
 * tests do; so the wide set is probed when the kernel is enabled, the narrow set when the first
 * narrow GEMM comes. Every remainder below OpenBLAS's unroll widths is in the wide set too (N = 9,
 * 12, 14, 15, 17; K = 9 to 14, 31). */
typedef int64_t probe_shape[3]; /* M, N, K */

static int agrees_on(eq_dtype dt, eq_gemm_small_fn *kernel, const probe_shape *shapes, size_t n_shapes)
{
    enum { PAD = 3 }; /* extra elements per row of A, B and C: strided operands */
    const size_t elem = eq_dtype_size(dt);
    const size_t most_ab = (size_t)72 * (EQ_GEMM_SMALL_MAX_K_F32 + PAD), most_c = (size_t)12 * (72 + PAD);
    char *a = malloc(most_ab * elem), *b = malloc(most_ab * elem);
    char *want = malloc(most_c * elem), *got = malloc(most_c * elem);
    int agrees = a && b && want && got;
    for (size_t s = 0; agrees && s < n_shapes; s++) {
        const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        const int64_t ld = K + (s % 2 ? PAD : 0), ldc = N + (s % 2 ? PAD : 0);
        fill_probe_full(a, dt, M * ld, (uint32_t)(2 * s + 1));
        fill_probe_full(b, dt, N * ld, (uint32_t)(2 * s + 2));
        memset(want, 0, (size_t)(M * ldc) * elem);
        memset(got, 0, (size_t)(M * ldc) * elem);
        agrees = padded_gemm(dt, M, N, K, a, ld, b, ld, want, ldc) == EQ_OK &&
                 kernel(dt, M, N, K, a, ld, b, ld, got, ldc) == EQ_OK;
        for (int64_t r = 0; agrees && r < M; r++)
            agrees = memcmp(want + (size_t)(r * ldc) * elem, got + (size_t)(r * ldc) * elem, (size_t)N * elem) == 0;
    }
    free(a), free(b), free(want), free(got);
    return agrees;
}

static int agrees_wide(eq_dtype dt, eq_gemm_small_fn *kernel)
{
    const int64_t max_k = eq_gemm_small_max_k(dt);
    const probe_shape shapes[] = {
        {1, 8, 8},     {3, 9, 9},    {4, 12, 10},  {5, 14, 11},  {2, 15, 12},       {4, 16, 13},
        {5, 17, 14},   {2, 33, 16},  {7, 9, 31},   {8, 48, 64},  {1, 40, 100},      {9, 24, 127},
        {12, 64, 128}, {6, 20, 255}, {3, 70, 256}, {2, 9, 384}, {4, 31, max_k - 1}, {5, 32, max_k},
    };
    return agrees_on(dt, kernel, shapes, sizeof shapes / sizeof shapes[0]);
}

static int agrees_narrow(eq_dtype dt, eq_gemm_small_fn *kernel)
{
    const probe_shape shapes[] = {{1, 1, 1}, {3, 5, 2}, {4, 16, 3}, {5, 17, 7}, {6, 3, 40}, {2, 7, 200}};
    return agrees_on(dt, kernel, shapes, sizeof shapes / sizeof shapes[0]);
}

int eq_gemm_small_agrees(eq_dtype dt, eq_gemm_small_fn *kernel)
{
    return agrees_wide(dt, kernel) && agrees_narrow(dt, kernel);
}

static int narrow_agrees(eq_dtype dt)
{
    atomic_int *state = &narrow_state[dt == EQ_FP64];
    int s = atomic_load(state);
    if (s == 0) {
        pthread_mutex_lock(&narrow_lock);
        if ((s = atomic_load(state)) == 0) {
            s = agrees_narrow(dt, small_kernel[dt == EQ_FP64]) ? 1 : -1;
            atomic_store(state, s);
        }
        pthread_mutex_unlock(&narrow_lock);
    }
    return s > 0;
}

int eq_gemm_blas_enable_small(eq_dtype dt, eq_gemm_small_fn *kernel)
{
    eq_gemm_small_fn **slot = &small_kernel[dt == EQ_FP64];
    *slot = kernel != NULL && agrees_wide(dt, kernel) ? kernel : NULL;
    atomic_store(&narrow_state[dt == EQ_FP64], 0); /* the narrow shapes: at the first one, with this kernel */
    return *slot != NULL;
}

int eq_gemm_blas_small_in_use(eq_dtype dt)
{
    return small_kernel[dt == EQ_FP64] != NULL;
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
