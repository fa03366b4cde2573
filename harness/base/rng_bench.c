/* Benchmark (meson test --benchmark, or build/rng_bench [repeats]): eq_rng_fill_normal of the
 * inputs of `--case row_parallel --size docs --dtype bf16`, x [8192, 4096] and w [1024, 4096] in
 * bf16, each fill under a new seed so none is a copy of a kept one. Prints seconds (wall and
 * process CPU) and normals per second; asserts nothing about speed. EQUIV_THREADS=1 for one core. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "harness/base/parallel.h"
#include "harness/base/rng.h"

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    const int repeats = argc > 1 ? atoi(argv[1]) : 3;
    eq_tensor x, w;
    if (eq_tensor_init_2d(&x, EQ_BF16, 8192, 4096) != EQ_OK || eq_tensor_init_2d(&w, EQ_BF16, 1024, 4096) != EQ_OK)
        return 1;
    const double normals = (double)(eq_tensor_numel(&x) + eq_tensor_numel(&w));
    printf("fill_normal bf16 x [8192, 4096] + w [1024, 4096], %d threads\n", eq_parallel_workers());
    for (int r = 0; r < repeats; r++) {
        const double wall0 = seconds(CLOCK_MONOTONIC), cpu0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
        eq_rng_fill_normal(&x, 1000 + (uint64_t)r, "layers/00/input", 1.0);
        eq_rng_fill_normal(&w, 1000 + (uint64_t)r, "layers/00/weight", 0.015625);
        const double wall = seconds(CLOCK_MONOTONIC) - wall0, cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        printf("repeat %d: %.3f s wall, %.3f s cpu, %.1f M normals/s of cpu\n", r, wall, cpu, normals / cpu * 1e-6);
    }
    eq_tensor_free(&x);
    eq_tensor_free(&w);
    return 0;
}
