/* The CUDA backend's GEMM against the CPU backend's (needs a GPU: exits 77, meson's skip, with
 * "no CUDA device" where there is none).
 *
 * Bit equality is not expected: cuBLAS sums in its own blocked order with FMAs. What is expected is
 * the rounding-error bound both obey. For C = sum_k a_k b_k in a precision of unit roundoff u, any
 * order of the K - 1 adds and K products gives |C - exact| <= gamma_K * S, gamma_K = K u / (1 - K u),
 * S = sum_k |a_k b_k| (Higham, Accuracy and Stability, 3.1). So |C_cuda - C_cpu| <= 2 gamma_K S,
 * and for bf16 outputs each side also rounds once to bf16 (2^-8 of its value). The tensor-core
 * path (bf16) may truncate inside its fp32 accumulation rather than round to nearest, which at
 * most doubles u: the bf16 check uses 2u. The exact value and S are computed in fp64 (every
 * product of fp32 or bf16 values is exact in fp64).
 *
 * Also checked: a strided call (lda, ldb, ldc wider than the matrix), the same bits on a second
 * call (determinism), and that the bound catches a planted error (one input changed). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "models/backend.h"
#include "reductions/cuda_device.h"

typedef struct {
    double worst_ratio; /* max over elements of |cuda - cpu| / bound */
    int64_t over;       /* elements over the bound */
} gemm_diff;

/* |x - y| against the bound for C = A B^T, element by element. x, y: [M, N] with row stride ldc. */
static gemm_diff compare(eq_dtype dt, int64_t M, int64_t N, int64_t K, const eq_tensor *a, const eq_tensor *b,
                         const void *x, const void *y, int64_t ldc)
{
    gemm_diff d = {0, 0};
    const double u = dt == EQ_FP64 ? ldexp(1, -53) : dt == EQ_BF16 ? ldexp(1, -23) : ldexp(1, -24);
    const double gamma = K * u / (1 - K * u);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double exact = 0, S = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = eq_tensor_get(a, i * K + k) * eq_tensor_get(b, j * K + k);
                exact += p;
                S += fabs(p);
            }
            double bound = 2 * gamma * S;
            if (dt == EQ_BF16) bound += 2 * ldexp(1, -8) * (fabs(exact) + gamma * S);
            bound += 1e-300; /* an all-zero row */
            double diff = fabs(eq_buffer_get(dt, x, i * ldc + j) - eq_buffer_get(dt, y, i * ldc + j));
            if (diff / bound > d.worst_ratio) d.worst_ratio = diff / bound;
            d.over += diff > bound;
        }
    return d;
}

static void check_shape(eq_dtype dt, int64_t M, int64_t N, int64_t K, int64_t pad)
{
    eq_tensor a, b, a_wide, b_wide, on_cpu, on_gpu, again;
    const int64_t lda = K + pad, ldb = K + pad, ldc = N + pad;
    eq_tensor_init_2d(&a, dt, M, K);
    eq_tensor_init_2d(&b, dt, N, K);
    eq_tensor_init_2d(&a_wide, dt, M, lda);
    eq_tensor_init_2d(&b_wide, dt, N, ldb);
    eq_tensor_init_2d(&on_cpu, dt, M, ldc);
    eq_tensor_init_2d(&on_gpu, dt, M, ldc);
    eq_tensor_init_2d(&again, dt, M, ldc);
    eq_rng_fill_normal(&a, 7, "a", 1.0);
    eq_rng_fill_normal(&b, 7, "b", 0.1);
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) eq_tensor_set(&a_wide, i * lda + k, eq_tensor_get(&a, i * K + k));
    for (int64_t j = 0; j < N; j++)
        for (int64_t k = 0; k < K; k++) eq_tensor_set(&b_wide, j * ldb + k, eq_tensor_get(&b, j * K + k));
    for (int64_t i = 0; i < M * ldc; i++) eq_tensor_set(&on_gpu, i, 42.0); /* the padding must survive */

    EQ_EXPECT_OK(eq_backend_cpu.gemm_nt(dt, M, N, K, a_wide.data, lda, b_wide.data, ldb, on_cpu.data, ldc));
    EQ_EXPECT_OK(eq_backend_cuda.gemm_nt(dt, M, N, K, a_wide.data, lda, b_wide.data, ldb, on_gpu.data, ldc));
    EQ_EXPECT_OK(eq_backend_cuda.gemm_nt(dt, M, N, K, a_wide.data, lda, b_wide.data, ldb, again.data, ldc));

    gemm_diff d = compare(dt, M, N, K, &a, &b, on_gpu.data, on_cpu.data, ldc);
    printf("%s [%lld x %lld x %lld] ld+%lld: max |cuda - cpu| / bound = %.3g\n", eq_dtype_name(dt), (long long)M,
           (long long)N, (long long)K, (long long)pad, d.worst_ratio);
    EQ_EXPECT(d.over == 0, "%s [%lld,%lld,%lld]: %lld elements over 2 gamma_K S (worst %.3g x)", eq_dtype_name(dt),
              (long long)M, (long long)N, (long long)K, (long long)d.over, d.worst_ratio);
    int64_t padding_touched = 0, not_repeated = 0;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = N; j < ldc; j++) padding_touched += eq_tensor_get(&on_gpu, i * ldc + j) != 42.0;
        not_repeated += memcmp((char *)on_gpu.data + (size_t)(i * ldc) * eq_dtype_size(dt),
                               (char *)again.data + (size_t)(i * ldc) * eq_dtype_size(dt),
                               (size_t)N * eq_dtype_size(dt)) != 0;
    }
    EQ_EXPECT(padding_touched == 0, "%lld elements outside C written", (long long)padding_touched);
    EQ_EXPECT(not_repeated == 0, "%s: %lld rows differ between two identical calls", eq_dtype_name(dt),
              (long long)not_repeated);

    /* The bound is not vacuous: a CPU GEMM over a B whose row 0 is scaled by 1.25 (one output
     * column 25% off, a wrong-scale bug's size) must fail it. A 1% change of one element of B, as
     * here before, hides under 2 gamma_K S once K is in the thousands (seen on the first GPU run:
     * K = 4096). */
    for (int64_t k = 0; k < K; k++) eq_tensor_set(&b_wide, k, eq_tensor_get(&b_wide, k) * 1.25);
    EQ_EXPECT_OK(eq_backend_cpu.gemm_nt(dt, M, N, K, a_wide.data, lda, b_wide.data, ldb, on_cpu.data, ldc));
    d = compare(dt, M, N, K, &a, &b, on_gpu.data, on_cpu.data, ldc);
    EQ_EXPECT(d.over > 0, "%s: a planted change in B went unnoticed", eq_dtype_name(dt));

    eq_tensor_free(&a), eq_tensor_free(&b), eq_tensor_free(&a_wide), eq_tensor_free(&b_wide);
    eq_tensor_free(&on_cpu), eq_tensor_free(&on_gpu), eq_tensor_free(&again);
}

int main(void)
{
    const char *why = "";
    if (!eq_cuda_available(&why)) {
        printf("backend_cuda_test: no CUDA device (%s): skipped\n", why);
        return 77;
    }
    EQ_EXPECT_OK(eq_backend_cuda_open());
    static const struct {
        int64_t M, N, K, pad;
    } shapes[] = {{1, 1, 1, 0}, {24, 32, 64, 0}, {100, 100, 100, 3}, {512, 256, 1024, 0}, {128, 1024, 4096, 8}};
    const eq_dtype dtypes[] = {EQ_FP32, EQ_BF16, EQ_FP64};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t d = 0; d < 3; d++) check_shape(dtypes[d], shapes[s].M, shapes[s].N, shapes[s].K, shapes[s].pad);

    /* Bad sizes are an error, not a crash. */
    float x = 0;
    EQ_EXPECT(eq_backend_cuda.gemm_nt(EQ_FP32, 0, 1, 1, &x, 1, &x, 1, &x, 1) == EQ_ERR_INTERNAL, "M=0 accepted");
    eq_error_clear();

    char about[512];
    printf("backend: %s\n", eq_backend_cuda.describe(about, sizeof about));
    eq_backend_cuda.release();
    eq_backend_cuda.release(); /* twice is safe */
    return eq_test_finish("backend_cuda_test");
}
