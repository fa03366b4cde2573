/* The counter-based generator: known-answer vectors, layout independence, and the distribution. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/rng.h"
#include "harness/base/testing.h"

/* Fills std * N(0,1) of (seed, name) into a fresh tensor of dt and shape rows x cols, and checks it
 * against the per-index values; returns whether the fill was a copy of a kept one. */
static int fill_and_check(eq_dtype dt, int64_t rows, int64_t cols, uint64_t seed, const char *name, double std)
{
    eq_tensor t, want;
    int64_t shape[2] = {rows, cols};
    EQ_EXPECT_OK(eq_tensor_init(&t, dt, 2, shape));
    EQ_EXPECT_OK(eq_tensor_init(&want, dt, 2, shape));
    long hits = eq_rng_cache_hits();
    eq_rng_fill_normal(&t, seed, name, std);
    int copied = eq_rng_cache_hits() > hits;
    const uint32_t s = eq_rng_stream(name);
    for (int64_t i = 0; i < rows * cols; i++) eq_tensor_set(&want, i, std * eq_rng_normal(seed, s, (uint64_t)i));
    EQ_EXPECT(memcmp(t.data, want.data, eq_tensor_bytes(&t)) == 0, "%s %s seed %llu std %g (%s): wrong values",
              eq_dtype_name(dt), name, (unsigned long long)seed, std, copied ? "a kept fill" : "generated");
    eq_tensor_free(&t);
    eq_tensor_free(&want);
    return copied;
}

/* A large fill asked twice is copied the second time, with the same bits; a fill that differs in
 * std, dtype, seed, stream or element count is not served a kept one (each checked per index). */
static void check_kept_fills(void)
{
    EQ_EXPECT(!fill_and_check(EQ_BF16, 1024, 1024, 3, "kept/x", 1.0), "first fill copied");
    EQ_EXPECT(fill_and_check(EQ_BF16, 1024, 1024, 3, "kept/x", 1.0), "second fill not copied");
    fill_and_check(EQ_BF16, 1024, 1024, 3, "kept/x", 0.5);
    fill_and_check(EQ_FP32, 1024, 1024, 3, "kept/x", 1.0);
    fill_and_check(EQ_BF16, 1024, 1024, 4, "kept/x", 1.0);
    fill_and_check(EQ_BF16, 1024, 1024, 3, "kept/y", 1.0);
    fill_and_check(EQ_BF16, 1024, 1025, 3, "kept/x", 1.0);
}

/* The uniform and the normal as rng.h specifies them, rebuilt here from the Philox block (its own
 * known-answer test above) with long double libm: element i is r cos theta (i even) or r sin theta
 * (i odd) of pair i >> 1's block, r = sqrt(-2 ln u1), theta = 2 pi u2. The uniform must match to
 * the bit; a normal to 8 ulp of its own size (ln and sin/cos within 4 ulp each,
 * rng_math_test; r takes half of ln's error; two more roundings). */
static long double unit_of(uint32_t hi, uint32_t lo)
{
    const uint64_t bits = (((uint64_t)hi << 21) ^ lo) & ((1ull << 53) - 1);
    return (double)(((long double)bits + 0.5L) * 0x1p-53L); /* rounded to fp64, as the generator's */
}

static void check_against_spec(void)
{
    static const long double two_pi = 6.283185307179586476925286766559005768L;
    const uint64_t seed = 0x0123456789abcdefull;
    const uint32_t stream = eq_rng_stream("spec"), key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    double worst = 0;
    int uniform_wrong = 0;
    for (uint64_t i = 0; i < 20000; i++) {
        const uint64_t block = i + (i % 7 == 0 ? 0x100000000ull * 3 : 0); /* some with a high counter word */
        const uint32_t counter[4] = {(uint32_t)(block >> 1), (uint32_t)(block >> 33), stream, 0};
        uint32_t r[4];
        eq_philox4x32_10(counter, key, r);
        const long double u1 = unit_of(r[0], r[1]), u2 = unit_of(r[2], r[3]);
        const uint32_t uniform_counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), stream, 0};
        uint32_t ur[4];
        eq_philox4x32_10(uniform_counter, key, ur);
        uniform_wrong += eq_rng_uniform(seed, stream, block) != (double)unit_of(ur[0], ur[1]);
        /* theta reduced exactly (as in rng_math_test) so the reference keeps its digits near zeros */
        const double q = rint(4.0 * (double)u2), f = (double)u2 - 0.25 * q;
        const long double sf = sinl(two_pi * f), cf = cosl(two_pi * f);
        const long double sin_t = ((long)q & 1) ? cf : sf, cos_t = ((long)q & 1) ? sf : cf;
        const long double sin_theta = ((long)q & 2) ? -sin_t : sin_t;
        const long double cos_theta = (((long)q + 1) & 2) ? -cos_t : cos_t;
        const long double radius = sqrtl(-2.0L * logl(u1));
        const long double want = radius * ((block & 1) ? sin_theta : cos_theta);
        const double got = eq_rng_normal(seed, stream, block);
        const double ulp = ldexp(1.0, ilogb((double)want) - 52);
        const double err = want == 0 ? fabs(got) : (double)fabsl((long double)got - want) / ulp;
        if (!(err <= worst)) worst = err;
    }
    EQ_EXPECT(uniform_wrong == 0, "%d uniforms differ from ((53 bits) + 0.5) 2^-53", uniform_wrong);
    EQ_EXPECT(worst <= 8.0, "normals differ from the specified pair values by up to %.3g ulp", worst);
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* 2^20 normals of a fill (fp64, so no rounding): their moments and their distribution. Each
 * bound is 5 standard deviations of the statistic under N(0, 1) at this n (mean 1/sqrt(n),
 * variance sqrt(2/n), skewness sqrt(6/n), excess kurtosis sqrt(24/n)); the Kolmogorov-Smirnov
 * statistic D: sqrt(n) D > x has probability ~ 2 exp(-2 x^2), 5.7e-7 (5 sigma, two-sided) at
 * x = 2.74. The halves of a pair (r cos, r sin of one block): their correlation, and that of
 * their squares (zero for independent normals, and what a wrong pairing shows), within
 * 5 / sqrt(pairs). */
static void check_distribution(void)
{
    enum { N = 1 << 20 };
    eq_tensor t;
    int64_t shape[1] = {N};
    EQ_EXPECT_OK(eq_tensor_init(&t, EQ_FP64, 1, shape));
    eq_rng_fill_normal(&t, 42, "distribution", 1.0);
    double *z = t.data;
    double sum = 0;
    for (int i = 0; i < N; i++) sum += z[i];
    const double mean = sum / N;
    double m2 = 0, m3 = 0, m4 = 0, pair_xy = 0, pair_sq = 0;
    for (int i = 0; i < N; i++) {
        const double d = z[i] - mean;
        m2 += d * d, m3 += d * d * d, m4 += d * d * d * d;
    }
    m2 /= N, m3 /= N, m4 /= N;
    for (int i = 0; i < N; i += 2) {
        pair_xy += z[i] * z[i + 1];
        pair_sq += (z[i] * z[i] - 1.0) * (z[i + 1] * z[i + 1] - 1.0);
    }
    const double pairs = N / 2, corr = pair_xy / pairs, corr_sq = pair_sq / pairs / 2.0; /* var(z^2) = 2 */
    const double skew = m3 / pow(m2, 1.5), kurt = m4 / (m2 * m2) - 3.0;
    EQ_EXPECT(fabs(mean) < 5.0 / sqrt(N), "mean %g", mean);
    EQ_EXPECT(fabs(m2 - 1.0) < 5.0 * sqrt(2.0 / N), "variance %g", m2);
    EQ_EXPECT(fabs(skew) < 5.0 * sqrt(6.0 / N), "skewness %g", skew);
    EQ_EXPECT(fabs(kurt) < 5.0 * sqrt(24.0 / N), "excess kurtosis %g", kurt);
    EQ_EXPECT(fabs(corr) < 5.0 / sqrt(pairs), "correlation of a pair's halves %g", corr);
    EQ_EXPECT(fabs(corr_sq) < 5.0 / sqrt(pairs), "correlation of a pair's squares %g", corr_sq);
    qsort(z, N, sizeof z[0], by_value);
    double ks = 0;
    for (int i = 0; i < N; i++) {
        const double cdf = 0.5 * erfc(-z[i] / sqrt(2.0));
        ks = fmax(ks, fmax(fabs(cdf - (double)i / N), fabs((double)(i + 1) / N - cdf)));
    }
    EQ_EXPECT(sqrt(N) * ks < 2.74, "Kolmogorov-Smirnov sqrt(n) D = %.3f", sqrt(N) * ks);
    eq_tensor_free(&t);
}

int main(void)
{
    /* Known-answer vectors of Philox4x32-10 from Random123's kat_vectors. */
    static const struct {
        uint32_t counter[4], key[2], expect[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
        uint32_t out[4];
        eq_philox4x32_10(kat[k].counter, kat[k].key, out);
        for (int i = 0; i < 4; i++) EQ_EXPECT_EQ_U64(out[i], kat[k].expect[i]);
    }

    /* A value depends on (seed, stream, index) only: asking twice, or in another order, gives the
     * same bits; another seed, stream or index gives another value. */
    double a = eq_rng_normal(7, eq_rng_stream("layers/00/weight"), 12345);
    EQ_EXPECT(a == eq_rng_normal(7, eq_rng_stream("layers/00/weight"), 12345), "not repeatable");
    EQ_EXPECT(a != eq_rng_normal(8, eq_rng_stream("layers/00/weight"), 12345), "seed ignored");
    EQ_EXPECT(a != eq_rng_normal(7, eq_rng_stream("layers/01/weight"), 12345), "stream ignored");
    EQ_EXPECT(a != eq_rng_normal(7, eq_rng_stream("layers/00/weight"), 12346), "index ignored");

    /* Moments of 200k normals and uniforms: mean within 5 sigma of 0 (sigma = 1/sqrt(n)),
     * variance within 5 sigma of 1 (sigma of the sample variance ~ sqrt(2/n)). */
    const int n = 200000;
    double sum = 0, sum2 = 0, usum = 0, umin = 1, umax = 0;
    uint32_t stream = eq_rng_stream("moments");
    for (int i = 0; i < n; i++) {
        double z = eq_rng_normal(1, stream, (uint64_t)i);
        sum += z;
        sum2 += z * z;
        double u = eq_rng_uniform(1, stream, (uint64_t)i);
        usum += u;
        umin = fmin(umin, u);
        umax = fmax(umax, u);
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    EQ_EXPECT(fabs(mean) < 5.0 / sqrt(n), "normal mean %g", mean);
    EQ_EXPECT(fabs(var - 1.0) < 5.0 * sqrt(2.0 / n), "normal variance %g", var);
    EQ_EXPECT(fabs(usum / n - 0.5) < 5.0 * sqrt(1.0 / 12 / n), "uniform mean %g", usum / n);
    EQ_EXPECT(umin > 0.0 && umax < 1.0, "uniform range [%g, %g]", umin, umax);

    /* Filling a tensor rounds each value once to its dtype and keys by flat index: the bf16 fill
     * is the rounding of the fp64 fill, element by element. */
    eq_tensor t64, t16;
    int64_t shape[2] = {16, 32};
    EQ_EXPECT_OK(eq_tensor_init(&t64, EQ_FP64, 2, shape));
    EQ_EXPECT_OK(eq_tensor_init(&t16, EQ_BF16, 2, shape));
    eq_rng_fill_normal(&t64, 3, "w", 0.5);
    eq_rng_fill_normal(&t16, 3, "w", 0.5);
    int mismatches = 0;
    const uint16_t *bits16 = t16.data;
    for (int64_t i = 0; i < 16 * 32; i++)
        if (bits16[i] != eq_f64_to_bf16(eq_tensor_get(&t64, i))) mismatches++;
    EQ_EXPECT(mismatches == 0, "%d bf16 elements are not the rounding of the fp64 value", mismatches);
    eq_tensor_free(&t64);
    eq_tensor_free(&t16);

    /* A fill large enough to be split over threads (harness/base/parallel.h) stores, at every flat
     * index, the value that index alone gives (std * eq_rng_normal rounded once by
     * eq_tensor_set), in every dtype: no range offset lost, no element left to another range. */
    const eq_dtype dtypes[] = {EQ_BF16, EQ_FP32, EQ_FP64};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        eq_tensor filled, expected;
        /* 100007 elements: with 2, 3 or 16 workers (meson's variants) the ranges n w / workers
         * start and end at odd indices, inside a pair and inside a group of lanes */
        int64_t big[2] = {97, 1031};
        EQ_EXPECT_OK(eq_tensor_init(&filled, dtypes[d], 2, big));
        EQ_EXPECT_OK(eq_tensor_init(&expected, dtypes[d], 2, big));
        eq_rng_fill_normal(&filled, 11, "layers/00/input", 0.25);
        const uint32_t s = eq_rng_stream("layers/00/input");
        for (int64_t i = 0; i < 97 * 1031; i++) eq_tensor_set(&expected, i, 0.25 * eq_rng_normal(11, s, (uint64_t)i));
        EQ_EXPECT(memcmp(filled.data, expected.data, eq_tensor_bytes(&filled)) == 0,
                  "%s fill differs from the per-index values", eq_dtype_name(dtypes[d]));
        eq_tensor_free(&filled);
        eq_tensor_free(&expected);
    }

    check_against_spec();
    check_distribution();
    check_kept_fills();
    return eq_test_finish("rng_test");
}
