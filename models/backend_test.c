/* The CPU backend's shape invariance: a layout changes M (data parallel: fewer rows) or N (column
 * parallel: fewer output features) of a GEMM, so every element of a GEMM over a block of rows or
 * columns must be bit-identical to the same element of the full GEMM, for small shapes (which
 * OpenBLAS would send to its small-matrix kernels) and large ones, in every dtype. */
#include <string.h>

#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "models/backend.h"

/* Full C = A B^T against C over rows [r0, r0+rows) and columns [c0, c0+cols): differing elements. */
static int64_t block_differs(eq_dtype dt, int64_t M, int64_t N, int64_t K, int64_t r0, int64_t rows, int64_t c0,
                             int64_t cols)
{
    eq_tensor a, b, full, part;
    eq_tensor_init_2d(&a, dt, M, K);
    eq_tensor_init_2d(&b, dt, N, K);
    eq_tensor_init_2d(&full, dt, M, N);
    eq_tensor_init_2d(&part, dt, rows, cols);
    eq_rng_fill_normal(&a, 11, "a", 1.0);
    eq_rng_fill_normal(&b, 11, "b", 0.1);
    const size_t elem = eq_dtype_size(dt);
    EQ_EXPECT_OK(eq_backend_cpu.gemm_nt(dt, M, N, K, a.data, K, b.data, K, full.data, N));
    EQ_EXPECT_OK(eq_backend_cpu.gemm_nt(dt, rows, cols, K, (char *)a.data + (size_t)(r0 * K) * elem, K,
                                        (char *)b.data + (size_t)(c0 * K) * elem, K, part.data, cols));
    int64_t differ = 0;
    for (int64_t r = 0; r < rows; r++)
        differ += memcmp((char *)full.data + (size_t)((r0 + r) * N + c0) * elem, (char *)part.data + (size_t)(r * cols) * elem,
                         (size_t)cols * elem) != 0;
    eq_tensor_free(&a), eq_tensor_free(&b), eq_tensor_free(&full), eq_tensor_free(&part);
    return differ;
}

int main(void)
{
    static const struct {
        int64_t M, N, K;
    } shapes[] = {{24, 32, 64}, {16, 256, 64}, {32, 128, 256}, {64, 512, 384}, {100, 100, 100}, {512, 256, 1024}};
    const eq_dtype dtypes[] = {EQ_FP32, EQ_BF16, EQ_FP64};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t d = 0; d < 3; d++) {
            const int64_t M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
            eq_dtype dt = dtypes[d];
            /* dp-like: the second half of the rows; tp-like: the third quarter of the columns; both. */
            EQ_EXPECT(block_differs(dt, M, N, K, M / 2, M / 2, 0, N) == 0, "%s [%lld,%lld,%lld] row half differs",
                      eq_dtype_name(dt), (long long)M, (long long)N, (long long)K);
            EQ_EXPECT(block_differs(dt, M, N, K, 0, M, N / 2, N / 4) == 0, "%s [%lld,%lld,%lld] column quarter differs",
                      eq_dtype_name(dt), (long long)M, (long long)N, (long long)K);
            EQ_EXPECT(block_differs(dt, M, N, K, M / 4, M / 4, N / 4, N / 4) == 0, "%s [%lld,%lld,%lld] block differs",
                      eq_dtype_name(dt), (long long)M, (long long)N, (long long)K);
        }
    char core[128];
    printf("backend: %s\n", eq_backend_cpu.describe(core, sizeof core));
    return eq_test_finish("backend_test");
}
