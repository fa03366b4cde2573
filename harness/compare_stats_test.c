/* The comparison's statistics on large tensors (harness/compare_stats.c, compare_median.c): the
 * median by quickselect, by histogram and by the guessed window against a full sort, the shortcut for identical tensors
 * against the full loop, one changed element found in any block, the first index of a maximum,
 * and the same metrics for every thread count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/testing.h"
#include "harness/compare.h"
#include "harness/compare_blocks.h"
#include "harness/compare_fixtures.h"
#include "harness/compare_median.h"

/* Median by quickselect against a full sort, on many values with ties. */
static void test_median_large(void)
{
    for (int64_t n = 10000; n <= 10001; n++) {
        eq_tensor ref, test;
        EQ_EXPECT_OK(eq_tensor_init(&ref, EQ_FP64, 1, &n));
        EQ_EXPECT_OK(eq_tensor_init(&test, EQ_FP64, 1, &n));
        double *sorted = malloc((size_t)n * sizeof *sorted);
        uint64_t state = 99;
        for (int64_t i = 0; i < n; i++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            double v = (double)(state >> 40 & 1023) / 64.0; /* 1024 distinct values: many ties */
            ((double *)test.data)[i] = (i % 3 == 0) ? 0.0 : v;
            sorted[i] = ((double *)test.data)[i];
        }
        double want = median_by_sort(sorted, n);
        eq_metrics m = compare(&ref, &test, &tol_zero);
        EQ_EXPECT(m.median_abs == want, "n %lld: median %g, want %g", (long long)n, m.median_abs, want);
        free(sorted);
        eq_tensor_free(&ref);
        eq_tensor_free(&test);
    }
}


/* The shortcut for tensors with the same bits gives what the full loop gives, field for field, on
 * tensors with NaN, +-Inf, +-0, subnormals, huge and ordinary values, in each dtype and against a
 * coarser run dtype; all-zero and all-NaN tensors too. A tensor one bit away takes the full loop. */
static void test_identical_shortcut(void)
{
    static const eq_tolerance tol = {"t", 1e-3, 1e-2, "test", EQ_ATOL_REF_RMS};
    const eq_dtype dtypes[] = {EQ_BF16, EQ_FP32, EQ_FP64};
    for (size_t d = 0; d < 3; d++) {
        eq_tensor a, b, zeros, nans;
        make_values(&a, dtypes[d], 37, 29, 99 + d);
        const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -3e38, 2.5, -1e-3, 7.0};
        for (int k = 0; k < 10; k++) eq_tensor_set(&a, 13 * k + 5, specials[k]);
        EQ_EXPECT_OK(eq_tensor_clone(&b, &a));
        const eq_dtype runs[] = {dtypes[d], EQ_BF16};
        for (int r = 0; r < 2; r++) {
            eq_metrics fast, full;
            EQ_EXPECT_OK(eq_compare_tensors_of_run(&a, &b, &tol, runs[r], &fast));
            EQ_EXPECT_OK(eq_compare_tensors_full(&a, &b, &tol, runs[r], &full));
            EQ_EXPECT(same_metrics(&fast, &full), "%s (run %s): shortcut metrics differ from the full loop's",
                      eq_dtype_name(dtypes[d]), eq_dtype_name(runs[r]));
            EQ_EXPECT(fast.n_differ == 0 && fast.nan_ref == 1 && fast.inf_ref == 2 && fast.n_mean_ratio > 0,
                      "%s: n_differ %lld nan %lld inf %lld", eq_dtype_name(dtypes[d]), (long long)fast.n_differ,
                      (long long)fast.nan_ref, (long long)fast.inf_ref);
        }
        /* one bit away: the full loop, which sees it */
        if (dtypes[d] == EQ_BF16) ((uint16_t *)b.data)[100] ^= 1u;
        else if (dtypes[d] == EQ_FP32) ((uint32_t *)b.data)[100] ^= 1u;
        else ((uint64_t *)b.data)[100] ^= 1u;
        eq_metrics one;
        EQ_EXPECT_OK(eq_compare_tensors_of_run(&a, &b, &tol, dtypes[d], &one));
        EQ_EXPECT(one.n_differ == 1 && one.max_abs > 0.0 && one.argmax == 100, "%s one bit: n_differ %lld argmax %lld",
                  eq_dtype_name(dtypes[d]), (long long)one.n_differ, (long long)one.argmax);
        /* all zeros (cosine 1, rms 0) and all NaN (nothing finite) */
        EQ_EXPECT_OK(eq_tensor_init_2d(&zeros, dtypes[d], 3, 5));
        EQ_EXPECT_OK(eq_tensor_init_2d(&nans, dtypes[d], 3, 5));
        for (int64_t i = 0; i < 15; i++) eq_tensor_set(&nans, i, NAN);
        const eq_tensor *edge[] = {&zeros, &nans};
        for (int e = 0; e < 2; e++) {
            eq_metrics fast, full;
            EQ_EXPECT_OK(eq_compare_tensors_of_run(edge[e], edge[e], &tol, dtypes[d], &fast));
            EQ_EXPECT_OK(eq_compare_tensors_full(edge[e], edge[e], &tol, dtypes[d], &full));
            EQ_EXPECT(same_metrics(&fast, &full), "%s %s: shortcut metrics differ", eq_dtype_name(dtypes[d]),
                      e ? "all NaN" : "all zero");
        }
        eq_tensor_free(&a);
        eq_tensor_free(&b);
        eq_tensor_free(&zeros);
        eq_tensor_free(&nans);
    }
}

/* A large bf16 tensor of O(1) values (a tail past the last full block of 4096 and of 4 lanes), a
 * copy with rounding-sized changes in about half its elements. */
#define LARGE_N 300007
static void make_large_pair(eq_tensor *ref, eq_tensor *test, uint64_t seed)
{
    make_values(ref, EQ_BF16, 1, LARGE_N, seed);
    EQ_EXPECT_OK(eq_tensor_clone(test, ref));
    uint64_t state = seed;
    for (int64_t i = 0; i < LARGE_N; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        uint16_t *bits = (uint16_t *)test->data + i;
        const unsigned step = (unsigned)(state >> 61); /* 0..3: unchanged; 4..7: 1 to 4 bf16 steps */
        if (step >= 4) *bits = (uint16_t)(*bits + (step == 7 ? -1 : (int)step - 3));
    }
}

/* One element changed in a large tensor otherwise the same bits (the blocked bit comparison must
 * take the full pass and find it): counted, the max |d| and its index, in a middle block and in the
 * tail past the last full block. */
static void test_large_one_element(void)
{
    const int64_t where[2] = {177777, LARGE_N - 2};
    for (int k = 0; k < 2; k++) {
        eq_tensor ref, test;
        make_values(&ref, EQ_BF16, 1, LARGE_N, 5);
        EQ_EXPECT_OK(eq_tensor_clone(&test, &ref));
        const double was = eq_tensor_get(&ref, where[k]);
        eq_tensor_set(&test, where[k], was + 0.5); /* bf16: |was| < 8 so the step is exact */
        const double d = fabs(eq_tensor_get(&test, where[k]) - was);
        eq_metrics m = compare(&ref, &test, &tol_bf16);
        EQ_EXPECT(m.n_differ == 1 && m.argmax == where[k] && m.max_abs == d && d > 0.0,
                  "one element at %lld: n_differ %lld, max %g at %lld, want %g", (long long)where[k],
                  (long long)m.n_differ, m.max_abs, (long long)m.argmax, d);
        EQ_EXPECT(m.median_abs == 0.0 && m.n_finite == LARGE_N, "one element: median %g", m.median_abs);
        eq_tensor_free(&ref), eq_tensor_free(&test);
    }
}

/* The median over the histogram path (more than 65536 elements) against a full sort: many
 * distinct |d| in the bin that holds it, an odd and an even count, and |d| of a single value. */
static void test_median_histogram(void)
{
    for (int64_t n = 200000; n <= 200001; n++) {
        eq_tensor ref, test;
        EQ_EXPECT_OK(eq_tensor_init(&ref, EQ_FP64, 1, &n));
        EQ_EXPECT_OK(eq_tensor_init(&test, EQ_FP64, 1, &n));
        double *sorted = malloc((size_t)n * sizeof *sorted);
        uint64_t state = 31;
        for (int64_t i = 0; i < n; i++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            /* |d| in [1, 1.0625) (one bin of 16 per octave) for most, zeros and larger ones around */
            const double v = i % 5 == 0 ? 0.0 : i % 5 == 1 ? 4.0 + (double)(state >> 40) : 1.0 + (double)(state >> 11) * 0x1p-57;
            ((double *)test.data)[i] = i % 2 ? v : -v;
            sorted[i] = v;
        }
        double want = median_by_sort(sorted, n);
        eq_metrics m = compare(&ref, &test, &tol_zero);
        EQ_EXPECT(m.median_abs == want, "n %lld: median %.17g, want %.17g", (long long)n, m.median_abs, want);
        /* every |d| the same nonzero value: one bin, one value */
        for (int64_t i = 0; i < n; i++) ((double *)test.data)[i] = i % 3 ? 0.375 : -0.375;
        m = compare(&ref, &test, &tol_zero);
        EQ_EXPECT(m.median_abs == 0.375, "one value: median %g", m.median_abs);
        /* one bin ([1, 1.0625)) of two values, half and half, so that the middle two are the last
         * of one and the first of the other: a in the first half but its first element, b in the
         * second but its first (each value met after the other in each half, and each half a
         * different worker's where there are 2: the counts of the least and largest restart) */
        const double two[2][2] = {{1.0, 1.03125}, {1.03125, 1.0}};
        for (int c = 0; c < 2; c++) {
            for (int64_t i = 0; i < n; i++) {
                const int first_half = i < n / 2, swapped = i == 0 || i == n / 2;
                ((double *)test.data)[i] = sorted[i] = two[c][first_half != swapped];
            }
            want = median_by_sort(sorted, n);
            m = compare(&ref, &test, &tol_zero);
            EQ_EXPECT(m.median_abs == want, "two values: median %.17g, want %.17g", m.median_abs, want);
        }
        /* the same two values, the smaller alone in the first worker's blocks where 2 share them
         * (blocks [0, blocks / 2) of 4096), the larger in the second's after n / 2 - split zeros,
         * so that the middle two are again the last of one and the first of the other: the
         * combined count of the least is the first worker's alone */
        const int64_t split = (n + 4095) / 4096 / 2 * 4096;
        for (int64_t i = 0; i < n; i++)
            ((double *)test.data)[i] = sorted[i] = i < split ? 1.0 : i < n / 2 ? 0.0 : 1.03125;
        want = median_by_sort(sorted, n);
        m = compare(&ref, &test, &tol_zero);
        EQ_EXPECT(m.median_abs == want, "two values apart: median %.17g, want %.17g", m.median_abs, want);
        /* three values, the middle two ranks the last of the middle value (selected among the
         * bin's values): the largest met after the middle one restarts its count */
        for (int64_t i = 0; i < n; i++)
            ((double *)test.data)[i] = sorted[i] = i == 0 ? 1.0 : i <= 100000 ? 1.015625 : 1.03125;
        want = median_by_sort(sorted, n);
        m = compare(&ref, &test, &tol_zero);
        EQ_EXPECT(m.median_abs == want, "three values: median %.17g, want %.17g", m.median_abs, want);
        free(sorted);
        eq_tensor_free(&ref), eq_tensor_free(&test);
    }
}

/* One median through the guess (compare_median_guess.h): the kind of guess taken for ref and test
 * and whether it holds the median (a zero median, or one in the window's bits), and the median
 * compare gives against a full sort. */
static void check_guessed_median(const char *what, eq_tensor *ref, eq_tensor *test, eq_guess_kind want_kind,
                                 int want_held)
{
    const int64_t n = eq_tensor_numel(ref);
    double *sorted = malloc((size_t)n * sizeof *sorted);
    int64_t finite = 0;
    for (int64_t i = 0; i < n; i++) {
        const double r = eq_tensor_get(ref, i), t = eq_tensor_get(test, i);
        if (isfinite(r) && isfinite(t)) sorted[finite++] = fabs(t - r);
    }
    const double want = median_by_sort(sorted, finite);
    eq_median_guess g;
    EQ_EXPECT_OK(eq_median_guess_begin(ref, test, &g));
    const int held = g.kind == EQ_GUESS_ZERO ? want == 0.0 : double_bits(want) >= g.lo && double_bits(want) < g.hi;
    EQ_EXPECT(g.kind == want_kind && held == want_held, "%s: guess %d (want %d), the median %g %s it", what,
              (int)g.kind, (int)want_kind, want, held ? "in" : "not in");
    eq_median_guess_end(&g);
    eq_metrics m = compare(ref, test, &tol_zero);
    EQ_EXPECT(m.median_abs == want, "%s: median %.17g, want %.17g", what, m.median_abs, want);
    free(sorted);
}

/* Element i is in the guess's sample (compare_median.h: runs of RUN from r (n - RUN) / (RUNS - 1)). */
static int sampled(int64_t i, int64_t n)
{
    for (int64_t r = 0; r < EQ_MEDIAN_SAMPLE_RUNS; r++) {
        const int64_t at = r * (n - EQ_MEDIAN_SAMPLE_RUN) / (EQ_MEDIAN_SAMPLE_RUNS - 1);
        if (i >= at && i < at + EQ_MEDIAN_SAMPLE_RUN) return 1;
    }
    return 0;
}

/* The median gathered during pass 2 in the window a sample guessed (an odd and an even count, and
 * NaN and Inf among the pairs), and the ways a guess misses, each still the exact median: a sample
 * that is not like the rest (the window elsewhere), a window that holds more |d| than its room (one
 * value fills it), and a sample of zeros where the rest differ; and a zero median guessed. */
static void test_median_guess(void)
{
    for (int64_t n = (int64_t)1 << 20; n <= ((int64_t)1 << 20) + 1; n++) {
        eq_tensor ref, test;
        EQ_EXPECT_OK(eq_tensor_init(&ref, EQ_FP64, 1, &n));
        EQ_EXPECT_OK(eq_tensor_init(&test, EQ_FP64, 1, &n));
        char *in_sample = malloc((size_t)n);
        for (int64_t i = 0; i < n; i++) in_sample[i] = (char)sampled(i, n);
        uint64_t state = 5;
        double *r = ref.data, *t = test.data;
        for (int64_t i = 0; i < n; i++) { /* |d| of many distinct values over 4 octaves, a tenth of them 0 */
            state = state * 6364136223846793005u + 1442695040888963407u;
            r[i] = (double)(state >> 44) * 0x1p-20 - 8.0;
            t[i] = r[i] + (i % 10 == 0 ? 0.0 : (double)(state >> 11 & 0xffffffff) * 0x1p-36);
        }
        r[77] = NAN, t[1000] = INFINITY, t[5000] = NAN;
        check_guessed_median("guessed", &ref, &test, EQ_GUESS_WINDOW, 1);
        eq_median_guess g;
        EQ_EXPECT_OK(eq_median_guess_begin(&ref, &test, &g));
        for (int64_t i = 7, k = 0; k < 2000; i += 97) /* |d| on the window's lower edge and just under it */
            if (!in_sample[i]) {
                const uint64_t bits = g.lo - (uint64_t)(k++ % 2);
                r[i] = 0.0;
                memcpy(&t[i], &bits, sizeof bits);
            }
        eq_median_guess_end(&g);
        check_guessed_median("on the window's edge", &ref, &test, EQ_GUESS_WINDOW, 1);
        for (int64_t i = 0; i < n; i++) /* the sampled pairs' |d| ten times the others' */
            if (in_sample[i]) t[i] = r[i] + 10.0 * (t[i] - r[i]);
        check_guessed_median("sample unlike the rest", &ref, &test, EQ_GUESS_WINDOW, 0);
        for (int64_t i = 0; i < n; i++) { /* the sample spread over [0.25, 0.75), the rest |d| = 0.5 */
            state = state * 6364136223846793005u + 1442695040888963407u;
            r[i] = 1.0;
            t[i] = 1.0 + (in_sample[i] ? 0.25 + (double)(state >> 12) * 0x1p-53 : 0.5);
        }
        check_guessed_median("window over its room", &ref, &test, EQ_GUESS_WINDOW, 1);
        for (int64_t i = 0; i < n; i++) /* the sample the same bits, the rest not: a zero median guessed */
            t[i] = in_sample[i] ? 1.0 : 1.0 + 0x1p-10 * (double)(i % 5);
        check_guessed_median("sample of zeros", &ref, &test, EQ_GUESS_ZERO, 0);
        for (int64_t i = 0; i < n; i++) /* two thirds the same bits */
            t[i] = i % 3 ? 1.0 : 1.0 + 0x1p-10 * (double)(i % 7);
        check_guessed_median("zero median", &ref, &test, EQ_GUESS_ZERO, 1);
        free(in_sample);
        eq_tensor_free(&ref), eq_tensor_free(&test);
    }
}

/* +0 against -0: their bits differ, their |d| is 0. Where they are most of the pairs (the median
 * 0) and where they are a third (the median among the others, ranked past them), in fp32 and
 * bf16, with a tail of 3 past the last whole group: the median against a full sort, and the count
 * of elements that differ. */
static void test_signed_zeros(void)
{
    const eq_dtype dtypes[2] = {EQ_FP32, EQ_BF16};
    const int64_t n = ((int64_t)1 << 20) + 3;
    for (int dt = 0; dt < 2; dt++)
        for (int share = 3; share <= 6; share += 3) {
            eq_tensor ref, test;
            EQ_EXPECT_OK(eq_tensor_init(&ref, dtypes[dt], 1, &n));
            EQ_EXPECT_OK(eq_tensor_init(&test, dtypes[dt], 1, &n));
            double *sorted = malloc((size_t)n * sizeof *sorted);
            for (int64_t i = 0; i < n; i++) {
                const double r = i % 10 < share ? 0.0 : 1.0 + (double)(i % 128) / 128.0;
                const double t = i % 10 < share ? -0.0 : r + (double)(1 + i % 13) / 64.0; /* bf16 numbers */
                eq_tensor_set(&ref, i, r), eq_tensor_set(&test, i, t);
                sorted[i] = fabs(eq_tensor_get(&test, i) - eq_tensor_get(&ref, i));
            }
            const double want = median_by_sort(sorted, n);
            eq_metrics m = compare(&ref, &test, &tol_zero);
            EQ_EXPECT(m.median_abs == want && m.n_differ == n,
                      "%s, %d in 10 of +0 against -0: median %.17g (want %.17g), %lld differ (want %lld)",
                      eq_dtype_name(dtypes[dt]), share, m.median_abs, want, (long long)m.n_differ, (long long)n);
            free(sorted);
            eq_tensor_free(&ref), eq_tensor_free(&test);
        }
}

/* A block of finite fp64 values whose squares overflow is summed as any finite block is, in 4
 * lanes (compare_stats.h), not element by element as a block with NaN or Inf: the reference's mean
 * is the lanes' sum, which differs from the sum in index order on these values. */
static void test_overflowing_block(void)
{
    const int64_t n = 4096;
    eq_tensor ref, test;
    EQ_EXPECT_OK(eq_tensor_init(&ref, EQ_FP64, 1, &n));
    EQ_EXPECT_OK(eq_tensor_init(&test, EQ_FP64, 1, &n));
    double lane[4] = {0, 0, 0, 0}, in_order = 0.0;
    uint64_t state = 3;
    for (int64_t i = 0; i < n; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        const double small = 1e190 * ((double)(state >> 11) * 0x1p-53 - 0.5); /* rounded off 1e200 in order */
        const double v = i % 4 ? small : (i / 4) % 2 ? -1e200 : 1e200;
        ((double *)ref.data)[i] = v, ((double *)test.data)[i] = v * (1.0 + 0x1p-40);
        lane[i % 4] += v, in_order += v;
    }
    const double want = ((lane[0] + lane[1]) + (lane[2] + lane[3])) / (double)n;
    eq_metrics m = compare(&ref, &test, &tol_zero);
    EQ_EXPECT(m.ref_mean == want && want != in_order / (double)n && m.nan_ref == 0 && m.inf_ref == 0,
              "mean of a block whose squares overflow %.17g, want the lanes' %.17g (in index order %.17g)", m.ref_mean,
              want, in_order / (double)n);
    eq_tensor_free(&ref), eq_tensor_free(&test);
}

/* The first index of the max |d| when it occurs in several blocks, and mean |d|, rel_fro, cosine
 * and ls_scale against independent long double sums (each block's sum of r^2 comes from pass 1). */
static void test_large_argmax_and_sums(void)
{
    eq_tensor ref, test;
    make_large_pair(&ref, &test, 17);
    const int64_t at[3] = {250001, 70000, 299999}; /* the same largest |d| at three places */
    for (int k = 0; k < 3; k++) eq_tensor_set(&ref, at[k], 1.0), eq_tensor_set(&test, at[k], 17.0); /* bf16 numbers */
    long double sum_abs = 0.0L, rr = 0.0L, tt = 0.0L, tr = 0.0L, dd = 0.0L;
    double max_abs = 0.0;
    for (int64_t i = 0; i < LARGE_N; i++) {
        const double r = eq_tensor_get(&ref, i), t = eq_tensor_get(&test, i), d = fabs(t - r);
        sum_abs += d;
        max_abs = d > max_abs ? d : max_abs;
        rr += (long double)r * r, tt += (long double)t * t, tr += (long double)t * r, dd += (long double)d * d;
    }
    eq_metrics m = compare(&ref, &test, &tol_bf16);
    EQ_EXPECT(m.argmax == 70000 && m.max_abs == 16.0 && max_abs == 16.0, "max %g at %lld, want 16 first at 70000",
              m.max_abs, (long long)m.argmax);
    EXPECT_NEAR(m.mean_abs, (double)(sum_abs / LARGE_N), 1e-13);
    EXPECT_NEAR(m.rel_fro, (double)(sqrtl(dd) / sqrtl(rr)), 1e-13);
    EXPECT_NEAR(m.cosine, (double)(tr / (sqrtl(rr) * sqrtl(tt))), 1e-13);
    EXPECT_NEAR(m.ls_scale, (double)(tr / rr), 1e-13);
    eq_tensor_free(&ref), eq_tensor_free(&test);
}

/* The reference's mean and std against a long double two-pass sum, in fp32 and bf16: over a
 * finite reference, with the test's NaN and Inf in some blocks (pass 2 reads those element by
 * element, and the reference's squared deviations there are summed apart), and with the
 * reference's own NaN in one (pass 1 sums its block element by element). */
static void test_reference_std(void)
{
    const eq_dtype dtypes[2] = {EQ_FP32, EQ_BF16};
    for (int dt = 0; dt < 2; dt++)
        for (int ref_nan = 0; ref_nan < 2; ref_nan++) {
            eq_tensor ref, test;
            make_values(&ref, dtypes[dt], 1, LARGE_N, 60 + (uint64_t)dt);
            for (int64_t i = 0; i < LARGE_N; i++) /* a mean that moves from block to block */
                eq_tensor_set(&ref, i, eq_tensor_get(&ref, i) + (double)(i / EQ_STATS_BLOCK % 7));
            EQ_EXPECT_OK(eq_tensor_clone(&test, &ref));
            for (int64_t i = 0; i < LARGE_N; i += 997) eq_tensor_set(&test, i, eq_tensor_get(&ref, i) + 0.5);
            eq_tensor_set(&test, 3 * EQ_STATS_BLOCK + 5, NAN);
            eq_tensor_set(&test, 40 * EQ_STATS_BLOCK + 1, INFINITY);
            if (ref_nan) eq_tensor_set(&ref, 9 * EQ_STATS_BLOCK + 2, NAN);
            long double sum = 0.0L, m2 = 0.0L;
            int64_t n = 0;
            for (int64_t i = 0; i < LARGE_N; i++)
                if (isfinite(eq_tensor_get(&ref, i))) sum += eq_tensor_get(&ref, i), n++;
            const long double mean = sum / n;
            for (int64_t i = 0; i < LARGE_N; i++) {
                const double r = eq_tensor_get(&ref, i);
                if (isfinite(r)) m2 += (r - mean) * (r - mean);
            }
            const eq_tolerance tol = {"t", 1e-3, 0.0, "test", EQ_ATOL_ABSOLUTE};
            eq_metrics m;
            EQ_EXPECT_OK(eq_compare_tensors_of_run(&ref, &test, &tol, dtypes[dt], &m));
            EXPECT_NEAR(m.ref_mean, (double)mean, 1e-13);
            EXPECT_NEAR(m.ref_std, (double)sqrtl(m2 / n), 1e-13);
            eq_tensor_free(&ref), eq_tensor_free(&test);
        }
}

/* max ULP and max |d| / (atol + rtol |r|) against a loop that divides by each spacing (frexp) and
 * each bound, in fp32 and bf16 ULPs, with rtol 0 (the bound a constant) and not; and the first
 * index of the max where it repeats within a block in lanes after the first. */
static void test_large_maxima_by_division(void)
{
    const eq_dtype dtypes[2] = {EQ_FP32, EQ_BF16};
    const double rtols[2] = {0.0, 1e-2};
    for (int dt = 0; dt < 2; dt++)
        for (int rt = 0; rt < 2; rt++) {
            eq_tensor ref, test;
            make_values(&ref, dtypes[dt], 1, LARGE_N, 3 + (uint64_t)dt);
            make_values(&test, dtypes[dt], 1, LARGE_N, 3 + (uint64_t)dt);
            for (int64_t i = 0; i < LARGE_N; i++) /* |d| over 20 octaves, tiny |r| under the rms floor */
                eq_tensor_set(&test, i, eq_tensor_get(&ref, i) * (i % 11 == 0 ? 1e-6 : 1.0) +
                                            ldexp(0x1p-20, (int)(i * 5 % 20)) * (i % 3 ? 1 : -1));
            for (int64_t i = 0; i < LARGE_N; i++) eq_tensor_set(&ref, i, eq_tensor_get(&ref, i) * (i % 11 == 0 ? 1e-6 : 1.0));
            const int64_t at[3] = {70009, 70006, 70012}; /* lanes 1, 2, 0 of one block: the first is 70006 */
            for (int k = 0; k < 3; k++) eq_tensor_set(&ref, at[k], 1.0), eq_tensor_set(&test, at[k], 65.0);
            const eq_tolerance tol = {"t", 1e-3, rtols[rt], "test", EQ_ATOL_ABSOLUTE};
            eq_metrics m;
            EQ_EXPECT_OK(eq_compare_tensors_of_run(&ref, &test, &tol, dtypes[dt], &m));
            const int p = dtypes[dt] == EQ_FP32 ? 24 : 8;
            double max_ulp = 0.0, max_ratio = 0.0;
            for (int64_t i = 0; i < LARGE_N; i++) {
                const double r = eq_tensor_get(&ref, i), d = fabs(eq_tensor_get(&test, i) - r);
                const double scale = fabs(r) > m.ulp_floor ? fabs(r) : m.ulp_floor;
                int e;
                frexp(scale, &e); /* scale = f 2^e, f in [0.5, 1): floor(log2 scale) = e - 1 */
                const double spacing = ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - p + 1);
                max_ulp = d / spacing > max_ulp ? d / spacing : max_ulp;
                const double ratio = d == 0.0 ? 0.0 : d / (tol.atol + tol.rtol * fabs(r));
                max_ratio = ratio > max_ratio ? ratio : max_ratio;
            }
            EQ_EXPECT(m.max_ulp == max_ulp, "%s rtol %g: max ULP %.17g, by division %.17g", eq_dtype_name(dtypes[dt]),
                      rtols[rt], m.max_ulp, max_ulp);
            EQ_EXPECT(m.max_tol_ratio == max_ratio, "%s rtol %g: max |d| / bound %.17g, by division %.17g",
                      eq_dtype_name(dtypes[dt]), rtols[rt], m.max_tol_ratio, max_ratio);
            EQ_EXPECT(m.argmax == 70006 && m.max_abs == 64.0, "%s: max %g at %lld, want 64 first at 70006",
                      eq_dtype_name(dtypes[dt]), m.max_abs, (long long)m.argmax);
            eq_tensor_free(&ref), eq_tensor_free(&test);
        }
}

/* Every metric's bytes for large pairs on each path (same bits, rounding changes, NaN and Inf in
 * a block, fp32 with a scale, fp64 with full-precision |d| whose sums round, so that an order of
 * summation that followed the threads would show): printed in hex by `compare_test --digest`. */
static void print_digest(FILE *out)
{
    static const eq_tolerance tol = {"t", 1e-3, 1e-2, "test", EQ_ATOL_REF_RMS};
    eq_tensor ref, test;
    for (int path = 0; path < 5; path++) {
        make_large_pair(&ref, &test, 40 + (uint64_t)path);
        if (path == 0) memcpy(test.data, ref.data, eq_tensor_bytes(&ref));
        if (path == 2) eq_tensor_set(&test, 123456, NAN), eq_tensor_set(&ref, 4097, INFINITY);
        if (path == 3) {
            eq_tensor_free(&ref), eq_tensor_free(&test);
            make_values(&ref, EQ_FP32, 1, LARGE_N, 9);
            EQ_EXPECT_OK(eq_tensor_clone(&test, &ref));
            for (int64_t i = 0; i < LARGE_N; i++) eq_tensor_set(&test, i, eq_tensor_get(&ref, i) * (1.0 + 0x1p-20 * (double)(i % 7)));
        }
        if (path == 4) {
            eq_tensor_free(&ref), eq_tensor_free(&test);
            make_values(&ref, EQ_FP64, 1, LARGE_N, 11);
            make_values(&test, EQ_FP64, 1, LARGE_N, 12);
            for (int64_t i = 0; i < LARGE_N; i++) /* |d| over 30 octaves: which bits a sum keeps depends on its order */
                eq_tensor_set(&test, i, eq_tensor_get(&ref, i) + ldexp(1e-9 * eq_tensor_get(&test, i), (int)(i * 7 % 30)));
        }
        eq_metrics m;
        EQ_EXPECT_OK(eq_compare_tensors_of_run(&ref, &test, &tol, EQ_BF16, &m));
        const unsigned char *bytes = (const unsigned char *)&m;
        for (size_t i = 0; i < sizeof m; i++) fprintf(out, "%02x", bytes[i]);
        fprintf(out, "\n");
        eq_tensor_free(&ref), eq_tensor_free(&test);
    }
}

/* The digest under EQUIV_THREADS=1 and 3 (this program again, by popen) and in this process: the
 * same bytes (parallel.h: results independent of the thread count). */
static void test_thread_count_invariance(const char *self)
{
    char digests[3][4096] = {{0}};
    FILE *mine = tmpfile();
    EQ_EXPECT(mine != NULL, "no temporary file");
    if (mine == NULL) return;
    print_digest(mine);
    rewind(mine);
    size_t got = fread(digests[2], 1, sizeof digests[2] - 1, mine);
    fclose(mine);
    EQ_EXPECT(got > 0 && got < sizeof digests[2] - 1, "digest of %zu bytes", got);
    const char *threads[2] = {"1", "3"};
    for (int k = 0; k < 2; k++) {
        char command[1200];
        snprintf(command, sizeof command, "EQUIV_THREADS=%s '%s' --digest", threads[k], self);
        FILE *p = popen(command, "r");
        EQ_EXPECT(p != NULL, "cannot run %s", command);
        if (p == NULL) continue;
        size_t n = fread(digests[k], 1, sizeof digests[k] - 1, p);
        EQ_EXPECT(pclose(p) == 0 && n == got, "%s: %zu bytes, want %zu", command, n, got);
    }
    EQ_EXPECT(strcmp(digests[0], digests[1]) == 0, "metrics differ between EQUIV_THREADS=1 and 3");
    EQ_EXPECT(strcmp(digests[0], digests[2]) == 0, "metrics differ between EQUIV_THREADS=1 and the default");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--digest") == 0) {
        print_digest(stdout); /* failures on stderr, and the exit status */
        return eq_test_failures == 0 ? 0 : 1;
    }
    (void)argc;
    test_thread_count_invariance(argv[0]);
    test_large_one_element();
    test_median_histogram();
    test_median_guess();
    test_signed_zeros();
    test_overflowing_block();
    test_large_argmax_and_sums();
    test_reference_std();
    test_large_maxima_by_division();
    test_identical_shortcut();
    test_median_large();
    return eq_test_finish("compare_stats_test");
}
