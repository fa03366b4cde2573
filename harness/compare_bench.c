/* Benchmark (meson test --benchmark, or build/compare_bench [repeats]): eq_compare_tensors_of_run
 * on the tensors of `equiv --case row_parallel --size docs --tp 4 --dtype bf16`: x [8192, 4096]
 * and w [1024, 4096] with the same bits in both runs (the shortcut), y [8192, 1024] differing in
 * about half its elements by a bf16 step or two (the full path and the median). Then
 * eq_structure_of (harness/structure.h) alone, sharded 4 by column, on a [4096, 4096] fp32 pair
 * and a [8192, 4096] bf16 pair, every element differing by an ULP or two. Prints the median wall
 * and CPU seconds of each over the repeats (and the structure pass's wall ns per element);
 * asserts nothing about speed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "harness/base/rng.h"
#include "harness/compare.h"
#include "harness/structure.h"

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

/* What one timed call works on: a pair, the structure pass's or the comparison's arguments, and
 * what the last call gave. */
typedef struct {
    const eq_tensor *ref, *test;
    const eq_tolerance *tol; /* NULL: the structure pass */
    eq_metrics metrics;
    eq_structure structure;
} timed_call;

static int call_once(timed_call *c)
{
    if (c->tol == NULL) return eq_structure_of(c->ref, c->test, c->ref->dtype, 1, 4, &c->structure) != EQ_OK;
    return eq_compare_tensors_of_run(c->ref, c->test, c->tol, EQ_BF16, &c->metrics) != EQ_OK;
}

/* The call `repeats` times: the medians of its wall and CPU seconds; 1 where it failed. */
static int median_times(timed_call *c, int repeats, double *wall_median, double *cpu_median)
{
    double wall[MAX_REPEATS], cpu[MAX_REPEATS];
    for (int r = 0; r < repeats; r++) {
        const double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
        if (call_once(c)) return 1;
        wall[r] = seconds(CLOCK_MONOTONIC) - w0;
        cpu[r] = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    }
    qsort(wall, (size_t)repeats, sizeof *wall, by_value);
    qsort(cpu, (size_t)repeats, sizeof *cpu, by_value);
    *wall_median = wall[repeats / 2];
    *cpu_median = cpu[repeats / 2];
    return 0;
}

/* test = ref moved by -1, +1 or +2 ULPs of its dtype (fp32 or bf16) per element, none left equal. */
static void ulp_steps(eq_tensor *test)
{
    uint64_t state = 777;
    for (int64_t i = 0; i < eq_tensor_numel(test); i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        const int step = (int)(state >> 62) == 0 ? -1 : (int)(state >> 62) == 3 ? 2 : 1;
        if (test->dtype == EQ_BF16) ((uint16_t *)test->data)[i] = (uint16_t)(((uint16_t *)test->data)[i] + step);
        else ((uint32_t *)test->data)[i] = (uint32_t)(((uint32_t *)test->data)[i] + step);
    }
}

/* eq_structure_of on a [rows, cols] pair of dtype dt, 4 shards along the last dim. */
static int structure_bench(eq_dtype dt, int64_t rows, int64_t cols, int repeats)
{
    eq_tensor ref, test;
    if (eq_tensor_init_2d(&ref, dt, rows, cols) != EQ_OK) return 1;
    eq_rng_fill_normal(&ref, 3, "structure", 1.0);
    if (eq_tensor_clone(&test, &ref) != EQ_OK) return 1;
    ulp_steps(&test);
    timed_call c = {.ref = &ref, .test = &test, .tol = NULL};
    double wall, cpu;
    if (median_times(&c, repeats, &wall, &cpu)) return 1;
    printf("structure %s [%lld, %lld] 4 shards by column: median of %d: %.4f s wall (%.3f ns/element), %.4f s CPU "
           "(factor %.9g, shard rel %.4g)\n",
           dt == EQ_BF16 ? "bf16" : "fp32", (long long)rows, (long long)cols, repeats, wall,
           1e9 * wall / (double)(rows * cols), cpu, c.structure.factor, c.structure.shard_rel);
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
    return 0;
}

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
        timed_call c = {.ref = &ref, .test = &test, .tol = &tol};
        double wall, cpu;
        if (median_times(&c, repeats, &wall, &cpu)) return 1;
        printf("compare %s bf16 [%lld, %lld] (%s): median of %d: %.4f s wall, %.4f s CPU (n_differ %lld, median "
               "|d| %.6g)\n",
               tensors[k].name, (long long)tensors[k].rows, (long long)tensors[k].cols,
               tensors[k].differs ? "differs" : "same bits", repeats, wall, cpu, (long long)c.metrics.n_differ,
               c.metrics.median_abs);
        eq_tensor_free(&ref);
        eq_tensor_free(&test);
    }
    if (structure_bench(EQ_FP32, 4096, 4096, repeats) != 0 || structure_bench(EQ_BF16, 8192, 4096, repeats) != 0)
        return 1;
    return 0;
}
