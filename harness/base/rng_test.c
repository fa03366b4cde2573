/* The counter-based generator: known-answer vectors, layout independence, and the distribution. */
#include <math.h>
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
        int64_t big[2] = {97, 1031}; /* 100007 elements: several ranges of unequal ends */
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

    check_kept_fills();
    return eq_test_finish("rng_test");
}
