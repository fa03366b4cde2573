/* The small-GEMM kernel (models/gemm_small.c) against padded OpenBLAS, bit for bit, and the probe
 * that decides whether models/gemm_blas.c may use it: it must pass for the real kernel and fail,
 * leaving the padding in place, for kernels planted wrong. The bits it must match are those of
 * OpenBLAS's SKYLAKEX kernels: elsewhere (another core, where the probe may rightly fail) the
 * test skips. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/openblas.h"
#include "harness/base/testing.h"
#include "models/backend.h"
#include "models/gemm_blas.h"
#include "models/gemm_small.h"

/* A fixed LCG, independent of the code under test: values in [-1, 1) with 47 significant bits
 * (fp64: so that the order of a sum shows), every 9th zero. */
static uint32_t lcg_state = 12345u;
static double next_value(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    double v = (double)(lcg_state >> 8) * 0x1p-23 - 1.0;
    lcg_state = lcg_state * 1664525u + 1013904223u;
    v += (double)(lcg_state >> 8) * 0x1p-47;
    return lcg_state % 9 == 0 ? 0.0 : v;
}

static void fill(void *x, eq_dtype dt, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (dt == EQ_FP64) ((double *)x)[i] = next_value();
        else ((float *)x)[i] = (float)next_value();
}

/* C[M,N] (ldc) = A[M,K] (ld) B[N,K]^T (ld) by OpenBLAS with A padded by zero rows until
 * M*N*K > 100^3 (past its small-matrix kernels), written here rather than taken from gemm_blas.c. */
static void padded_blas(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, const void *B, int64_t ld,
                        void *C, int64_t ldc)
{
    const size_t elem = eq_dtype_size(dt);
    const int64_t rows = M + 1000000 / (N * K) + 1;
    char *a = calloc((size_t)(rows * ld), elem), *c = malloc((size_t)(rows * N) * elem); /* [rows, ld], [rows, N] */
    if (a == NULL || c == NULL) abort();
    memcpy(a, A, (size_t)(M * ld) * elem);
    if (dt == EQ_FP64)
        eq_openblas.dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)N, (blasint)K, 1.0,
                          (double *)a, (blasint)ld, B, (blasint)ld, 0.0, (double *)c, (blasint)N);
    else
        eq_openblas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)N, (blasint)K, 1.0f,
                          (float *)a, (blasint)ld, B, (blasint)ld, 0.0f, (float *)c, (blasint)N);
    for (int64_t r = 0; r < M; r++) memcpy((char *)C + (size_t)(r * ldc) * elem, c + (size_t)(r * N) * elem, (size_t)N * elem);
    free(a), free(c);
}

/* Elements of kernel's C[M,N] that differ from padded OpenBLAS's, on fresh random data (strided
 * operands when strided). */
static int64_t differs(eq_gemm_small_fn *kernel, eq_dtype dt, int64_t M, int64_t N, int64_t K, int strided)
{
    const size_t elem = eq_dtype_size(dt);
    const int64_t ld = K + (strided ? 5 : 0), ldc = N + (strided ? 2 : 0);
    char *a = malloc((size_t)(M * ld) * elem), *b = malloc((size_t)(N * ld) * elem); /* [M, ld], [N, ld] */
    char *want = calloc((size_t)(M * ldc), elem), *got = calloc((size_t)(M * ldc), elem); /* [M, ldc] */
    if (a == NULL || b == NULL || want == NULL || got == NULL) abort();
    fill(a, dt, M * ld);
    fill(b, dt, N * ld);
    padded_blas(dt, M, N, K, a, b, ld, want, ldc);
    EQ_EXPECT_OK(kernel(dt, M, N, K, a, ld, b, ld, got, ldc));
    int64_t n = 0;
    for (int64_t r = 0; r < M; r++)
        for (int64_t j = 0; j < N; j++)
            n += memcmp(want + (size_t)(r * ldc + j) * elem, got + (size_t)(r * ldc + j) * elem, elem) != 0;
    free(a), free(b), free(want), free(got);
    return n;
}

/* Planted faults, each one the probe must catch. */
static eq_status plant_one_ulp(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                               const void *B, int64_t ldb, void *C, int64_t ldc)
{
    eq_status st = eq_gemm_small(dt, M, N, K, A, lda, B, ldb, C, ldc);
    const int64_t last = (M - 1) * ldc + N - 1; /* one element, the last */
    if (dt == EQ_FP64) ((double *)C)[last] = nextafter(((double *)C)[last], INFINITY);
    else ((float *)C)[last] = nextafterf(((float *)C)[last], INFINITY);
    return st;
}

/* Right on the wide shapes, one ulp off on a narrow one (N or K below EQ_GEMM_SMALL_MIN_NK): the
 * enabling probe passes it, the narrow probe at the first narrow GEMM must not. */
static eq_status plant_narrow_one_ulp(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                                      const void *B, int64_t ldb, void *C, int64_t ldc)
{
    if (N >= EQ_GEMM_SMALL_MIN_NK && K >= EQ_GEMM_SMALL_MIN_NK) return eq_gemm_small(dt, M, N, K, A, lda, B, ldb, C, ldc);
    return plant_one_ulp(dt, M, N, K, A, lda, B, ldb, C, ldc);
}

/* Right except at the panel limit, where the last step rounds the product before adding. */
static eq_status plant_unfused_at_limit(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                                        const void *B, int64_t ldb, void *C, int64_t ldc)
{
    if (K != eq_gemm_small_max_k(dt)) return eq_gemm_small(dt, M, N, K, A, lda, B, ldb, C, ldc);
    eq_status st = eq_gemm_small(dt, M, N, K - 1, A, lda, B, ldb, C, ldc);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            if (dt == EQ_FP64) {
                double *c = (double *)C + i * ldc + j;
                *c += ((const double *)A)[i * lda + K - 1] * ((const double *)B)[j * ldb + K - 1];
            } else {
                float *c = (float *)C + i * ldc + j;
                *c += ((const float *)A)[i * lda + K - 1] * ((const float *)B)[j * ldb + K - 1];
            }
    return st;
}

static void check_dtype(eq_dtype dt)
{
    const char *name = dt == EQ_FP64 ? "fp64" : "fp32";
    const int64_t max_k = eq_gemm_small_max_k(dt);

    /* Many random shapes, K over the whole range and crowded at both ends. */
    int64_t shapes = 0, bad_shapes = 0;
    for (int s = 0; s < 400; s++) {
        lcg_state = lcg_state * 1664525u + 1013904223u;
        const uint32_t r = lcg_state >> 4;
        const int64_t K = s % 4 == 0 ? 1 + r % 12 : s % 4 == 1 ? max_k - (int64_t)(r % 6) : 1 + r % max_k;
        const int64_t M = 1 + (r >> 9) % 23, N = 1 + (r >> 14) % 70;
        if (M * N * K > 1000000) continue; /* not padded: never given to the small kernel */
        const int64_t n = differs(eq_gemm_small, dt, M, N, K, s % 3 == 0);
        shapes++;
        if (n && bad_shapes++ < 5)
            printf("  %s M=%lld N=%lld K=%lld: %lld elements differ from padded OpenBLAS\n", name, (long long)M,
                   (long long)N, (long long)K, (long long)n);
    }
    EQ_EXPECT(bad_shapes == 0, "%s: %lld of %lld random shapes differ from padded OpenBLAS", name, (long long)bad_shapes,
              (long long)shapes);
    if (bad_shapes == 0)
        printf("%s: %lld random shapes with K in 1..%lld, all bit-identical to padded OpenBLAS\n", name,
               (long long)shapes, (long long)max_k);
    /* Past the limit OpenBLAS sums a second panel apart: the chain no longer matches (informative,
     * it says the limit is the panel's, not asserted). */
    printf("%s: at K=%lld (limit+1), %lld of 16x64 elements differ; at K=%lld, %lld\n", name, (long long)(max_k + 1),
           (long long)differs(eq_gemm_small, dt, 16, 64, max_k + 1, 0), (long long)(max_k + 64),
           (long long)differs(eq_gemm_small, dt, 16, 64, max_k + 64, 0));

    /* The probe: passes for the kernel, fails for each plant. */
    EQ_EXPECT(eq_gemm_small_agrees(dt, eq_gemm_small), "%s: the probe rejects the small kernel", name);
    EQ_EXPECT(!eq_gemm_small_agrees(dt, plant_one_ulp), "%s: the probe accepts a kernel one ulp off", name);
    EQ_EXPECT(!eq_gemm_small_agrees(dt, plant_unfused_at_limit), "%s: the probe accepts a kernel wrong at K=%lld",
              name, (long long)max_k);

    /* The fallback: with a plant refused, eq_gemm_blas pads (its bits are OpenBLAS's, not the
     * plant's); with the kernel accepted, eq_gemm_blas gives the same bits through it. */
    enum { M = 5, N = 9, K = 33 }; /* N, K >= EQ_GEMM_SMALL_MIN_NK: the small kernel's shapes */
    const size_t elem = eq_dtype_size(dt);
    char a[M * K * 8], b[N * K * 8], want[M * N * 8], got[M * N * 8], planted[M * N * 8];
    fill(a, dt, M * K);
    fill(b, dt, N * K);
    padded_blas(dt, M, N, K, a, b, K, want, N);
    EQ_EXPECT_OK(plant_one_ulp(dt, M, N, K, a, K, b, K, planted, N));
    EQ_EXPECT(memcmp(planted, want, (size_t)(M * N) * elem) != 0, "%s: the plant changes nothing", name);
    EQ_EXPECT(!eq_gemm_blas_enable_small(dt, plant_one_ulp) && !eq_gemm_blas_small_in_use(dt),
              "%s: a planted kernel was enabled", name);
    EQ_EXPECT_OK(eq_gemm_blas(dt, M, N, K, a, K, b, K, got, N));
    EQ_EXPECT(memcmp(got, want, (size_t)(M * N) * elem) == 0, "%s: no padded bits with the plant refused", name);
    EQ_EXPECT(eq_gemm_blas_enable_small(dt, eq_gemm_small) && eq_gemm_blas_small_in_use(dt),
              "%s: the small kernel was not enabled", name);
    memset(got, 0, sizeof got);
    EQ_EXPECT_OK(eq_gemm_blas(dt, M, N, K, a, K, b, K, got, N));
    EQ_EXPECT(memcmp(got, want, (size_t)(M * N) * elem) == 0, "%s: eq_gemm_blas through the small kernel differs", name);

    /* The narrow shapes, probed at the first narrow GEMM: a kernel wrong only there is enabled (the
     * wide probe passes it) but a narrow GEMM still gets the padded bits; the real kernel's narrow
     * GEMM gives them too. */
    enum { NM = 3, NN = 5, NK = 2 };
    char na[NM * NK * 8], nb[NN * NK * 8], nwant[NM * NN * 8], ngot[NM * NN * 8];
    fill(na, dt, NM * NK);
    fill(nb, dt, NN * NK);
    padded_blas(dt, NM, NN, NK, na, nb, NK, nwant, NN);
    EQ_EXPECT(eq_gemm_blas_enable_small(dt, plant_narrow_one_ulp), "%s: the wide probe refused a kernel right there", name);
    EQ_EXPECT(!eq_gemm_small_agrees(dt, plant_narrow_one_ulp), "%s: the full probe accepts a kernel wrong on narrow shapes",
              name);
    EQ_EXPECT_OK(eq_gemm_blas(dt, NM, NN, NK, na, NK, nb, NK, ngot, NN));
    EQ_EXPECT(memcmp(ngot, nwant, (size_t)(NM * NN) * elem) == 0, "%s: a narrow GEMM took a kernel wrong there", name);
    EQ_EXPECT(eq_gemm_blas_enable_small(dt, eq_gemm_small), "%s: the small kernel was not enabled again", name);
    memset(ngot, 0, sizeof ngot);
    EQ_EXPECT_OK(eq_gemm_blas(dt, NM, NN, NK, na, NK, nb, NK, ngot, NN));
    EQ_EXPECT(memcmp(ngot, nwant, (size_t)(NM * NN) * elem) == 0, "%s: a narrow GEMM through the kernel differs", name);
    eq_gemm_blas_enable_small(dt, NULL);
}

int main(void)
{
    EQ_EXPECT_OK(eq_openblas_open());
    if (eq_openblas.get_corename == NULL) return eq_test_finish("gemm_small_test");
    eq_openblas.set_num_threads(1);
    const char *core = eq_openblas.get_corename();
    if (core == NULL || strcmp(core, "SkylakeX") != 0) {
        printf("gemm_small_test: OpenBLAS core %s, not SkylakeX: skipped\n", core ? core : "?");
        return 77;
    }
    check_dtype(EQ_FP32);
    check_dtype(EQ_FP64);
    return eq_test_finish("gemm_small_test");
}
