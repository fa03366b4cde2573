/* Benchmark (meson test --benchmark, or build/compare_bench [repeats]): eq_compare_tensors_of_run
 * on the tensors of `equiv --case row_parallel --size docs --tp 4 --dtype bf16`: x [8192, 4096]
 * and w [1024, 4096] with the same bits in both runs (the shortcut), y [8192, 1024] differing in
 * about half its elements by a bf16 step or two (the full path and the median). Prints the median
 * wall and CPU seconds of each over the repeats; asserts nothing about speed. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "harness/base/rng.h"
#include "harness/compare.h"

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MAX_REPEATS 64

int main(int argc, char **argv)
{
    const int repeats = argc > 1 && atoi(argv[1]) > 0 && atoi(argv[1]) <= MAX_REPEATS ? atoi(argv[1]) : 5;
    const eq_tolerance tol = {"bf16_28_layers", 0.15, 0.0, "seed 002 section 7", EQ_ATOL_ABSOLUTE};
    const struct {
        const char *name;
        int64_t rows, cols;
        int differs;
    } tensors[3] = {{"x", 8192, 4096, 0}, {"w", 1024, 4096, 0}, {"y", 8192, 1024, 1}};
    for (int k = 0; k < 3; k++) {
        eq_tensor ref, test;
        if (eq_tensor_init_2d(&ref, EQ_BF16, tensors[k].rows, tensors[k].cols) != EQ_OK) return 1;
        eq_rng_fill_normal(&ref, 1, tensors[k].name, 1.0);
        if (eq_tensor_clone(&test, &ref) != EQ_OK) return 1;
        uint16_t *bits = test.data;
        uint64_t state = 12345;
        for (int64_t i = 0; tensors[k].differs && i < eq_tensor_numel(&test); i++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            const unsigned steps = (unsigned)(state >> 62); /* 0 or 1 (half), 2, 3: steps of one bf16 ULP */
            if (steps >= 2) bits[i] = (uint16_t)(bits[i] + (steps == 2 ? 1 : 2));
            else if (steps == 1) bits[i] = (uint16_t)(bits[i] - 1);
        }
        double wall[MAX_REPEATS], cpu[MAX_REPEATS];
        eq_metrics m;
        for (int r = 0; r < repeats; r++) {
            const double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
            if (eq_compare_tensors_of_run(&ref, &test, &tol, EQ_BF16, &m) != EQ_OK) return 1;
            wall[r] = seconds(CLOCK_MONOTONIC) - w0;
            cpu[r] = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
        }
        qsort(wall, (size_t)repeats, sizeof *wall, by_value);
        qsort(cpu, (size_t)repeats, sizeof *cpu, by_value);
        printf("compare %s bf16 [%lld, %lld] (%s): median of %d: %.4f s wall, %.4f s CPU (n_differ %lld, median "
               "|d| %.6g)\n",
               tensors[k].name, (long long)tensors[k].rows, (long long)tensors[k].cols,
               tensors[k].differs ? "differs" : "same bits", repeats, wall[repeats / 2], cpu[repeats / 2],
               (long long)m.n_differ, m.median_abs);
        eq_tensor_free(&ref);
        eq_tensor_free(&test);
    }
    return 0;
}
