/* Benchmark (meson test --benchmark, or build/gemm_bench): the CPU backend's GEMM at seed 002's
 * row-parallel shape (M = 4096 x 2 tokens, N = 1024, K = 4096) in fp32 and bf16, and the ring
 * all-reduce of its tp = 4 partials. Prints GFLOP/s and GB/s; asserts nothing about speed. */
#include <stdio.h>
#include <stdlib.h>

#include "harness/base/clock.h"
#include "harness/base/rng.h"
#include "models/backend.h"
#include "reductions/collectives.h"

int main(int argc, char **argv)
{
    const int64_t M = argc > 1 ? atoll(argv[1]) : 8192, N = 1024, K = 4096;
    char about[256];
    printf("backend: %s\n", eq_backend_cpu.describe(about, sizeof about));
    const eq_dtype dtypes[2] = {EQ_FP32, EQ_BF16};
    for (int d = 0; d < 2; d++) {
        eq_tensor a, b, c;
        if (eq_tensor_init_2d(&a, dtypes[d], M, K) || eq_tensor_init_2d(&b, dtypes[d], N, K) ||
            eq_tensor_init_2d(&c, dtypes[d], M, N))
            return 1;
        eq_rng_fill_normal(&a, 1, "a", 1.0);
        eq_rng_fill_normal(&b, 1, "b", 0.015625);
        double t0 = eq_monotonic_seconds();
        if (eq_backend_cpu.gemm_nt(dtypes[d], M, N, K, a.data, K, b.data, K, c.data, N) != EQ_OK) return 1;
        double s = eq_monotonic_seconds() - t0;
        printf("gemm %s [%lld x %lld x %lld]: %.3f s, %.1f GFLOP/s\n", eq_dtype_name(dtypes[d]), (long long)M,
               (long long)N, (long long)K, s, 2.0 * (double)M * N * K / s * 1e-9);

        /* The tp = 4 all-reduce of [M, N] partials, ring order, rounding per hop. */
        void *bufs[4];
        for (int r = 0; r < 4; r++) {
            bufs[r] = malloc(eq_tensor_bytes(&c));
            if (bufs[r] == NULL) return 1;
            for (size_t i = 0; i < eq_tensor_bytes(&c); i++) ((char *)bufs[r])[i] = ((char *)c.data)[i];
        }
        eq_group g = eq_group_sim(4, EQ_ALGO_RING);
        t0 = eq_monotonic_seconds();
        if (eq_all_reduce(&g, bufs, (size_t)(M * N), dtypes[d], EQ_REDOP_SUM) != EQ_OK) return 1;
        s = eq_monotonic_seconds() - t0;
        printf("all_reduce ring %s, 4 ranks x %lld elements: %.3f s, %.2f GB/s of input\n", eq_dtype_name(dtypes[d]),
               (long long)(M * N), s, 4.0 * (double)eq_tensor_bytes(&c) / s * 1e-9);
        for (int r = 0; r < 4; r++) free(bufs[r]);
        eq_tensor_free(&a), eq_tensor_free(&b), eq_tensor_free(&c);
    }
    return 0;
}
