/* Benchmark (meson test --benchmark, or build/gemm_small_bench): the CPU backend's GEMM on the tiny
 * shapes the ci-size models run thousands of (M*N*K <= 100^3, which OpenBLAS would send to its
 * small-matrix kernels), fp32 and fp64. Prints microseconds per call and GFLOP/s of real work;
 * asserts nothing about speed. Compare the variants: the small kernel (models/gemm_small.c) and
 * padding (EQUIV_CPU_GEMM=padded). */
#include <stdio.h>

#include "harness/base/clock.h"
#include "harness/base/rng.h"
#include "models/backend.h"

int main(void)
{
    static const struct {
        int64_t M, N, K;
    } shapes[] = {{8, 32, 32}, {16, 64, 64}, {32, 24, 128}, {4, 96, 256}, {16, 64, 448}};
    char about[256];
    printf("backend: %s\n", eq_backend_cpu.describe(about, sizeof about));
    const eq_dtype dtypes[2] = {EQ_FP32, EQ_FP64};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int64_t M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
            eq_tensor a, b, c; /* [M, K], [N, K], [M, N] */
            if (eq_tensor_init_2d(&a, dtypes[d], M, K) || eq_tensor_init_2d(&b, dtypes[d], N, K) ||
                eq_tensor_init_2d(&c, dtypes[d], M, N))
                return 1;
            eq_rng_fill_normal(&a, 1, "a", 1.0);
            eq_rng_fill_normal(&b, 1, "b", 0.0625);
            const int calls = 2000;
            const double t0 = eq_monotonic_seconds();
            for (int i = 0; i < calls; i++)
                if (eq_backend_cpu.gemm_nt(dtypes[d], M, N, K, a.data, K, b.data, K, c.data, N) != EQ_OK) return 1;
            const double per_call = (eq_monotonic_seconds() - t0) / calls;
            printf("gemm %s [%lld x %lld x %lld]: %.1f us per call, %.2f GFLOP/s\n", eq_dtype_name(dtypes[d]),
                   (long long)M, (long long)N, (long long)K, per_call * 1e6,
                   2.0 * (double)M * N * K / per_call * 1e-9);
            eq_tensor_free(&a), eq_tensor_free(&b), eq_tensor_free(&c);
        }
    return 0;
}
