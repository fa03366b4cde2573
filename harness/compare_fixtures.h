/* Fixtures of the comparison's tests (compare_test.c, compare_stats_test.c): the documents'
 * tolerances, tensors of known values, and the comparison of two tensors under a tolerance. */
#ifndef EQUIV_HARNESS_COMPARE_FIXTURES_H
#define EQUIV_HARNESS_COMPARE_FIXTURES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "harness/compare.h"
/* seed 002 section 7 */
static const eq_tolerance tol_fp32 = {"fp32_1_layer", 1e-3, 1e-3, "seed 002 section 7", EQ_ATOL_ABSOLUTE};
static const eq_tolerance tol_bf16 = {"bf16_28_layers", 0.15, 0.0, "seed 002 section 7", EQ_ATOL_ABSOLUTE};
static const eq_tolerance tol_zero = {"zero", 0.0, 0.0, "bit-exact", EQ_ATOL_ABSOLUTE};

#define EXPECT_NEAR(got, want, rel)                                                   \
    EQ_EXPECT(fabs((got) - (want)) <= (rel) * fabs(want), "%s = %.17g, want %.17g", #got, \
              (double)(got), (double)(want))
#define EXPECT_HAS(text, part) EQ_EXPECT(strstr((text), (part)) != NULL, "'%s' lacks '%s'", (text), (part))

static inline void make_1d(eq_tensor *t, eq_dtype dt, const double *values, int64_t n)
{
    EQ_EXPECT_OK(eq_tensor_init(t, dt, 1, &n));
    for (int64_t i = 0; i < n; i++) eq_tensor_set(t, i, values[i]);
}

/* rows x cols values of O(1) (sum of four uniforms: mean 0, std ~0.98), from a 64-bit LCG
 * (Knuth's MMIX constants), rounded once to dt. */
static inline void make_values(eq_tensor *t, eq_dtype dt, int64_t rows, int64_t cols, uint64_t seed)
{
    EQ_EXPECT_OK(eq_tensor_init_2d(t, dt, rows, cols));
    uint64_t state = seed;
    for (int64_t i = 0; i < rows * cols; i++) {
        double sum = 0.0;
        for (int k = 0; k < 4; k++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            sum += (double)(state >> 11) * 0x1p-53;
        }
        eq_tensor_set(t, i, (sum - 2.0) * 1.7);
    }
}

static inline eq_metrics compare(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol)
{
    eq_metrics m;
    EQ_EXPECT_OK(eq_compare_tensors(ref, test, tol, &m));
    return m;
}

/* qsort order of doubles */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) by a full sort (v sorted in place): the middle value, or the mean of the
 * two middle ones when n is even, as compare.h defines it. */
static inline double median_by_sort(double *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Every field of two metrics the same (doubles by bits: NaN, -0 and 0 told apart). */
static inline int same_metrics(const eq_metrics *a, const eq_metrics *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

#endif
