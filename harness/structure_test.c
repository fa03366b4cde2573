/* structure.h: rounding's kinds of difference pass every test, over many seeds, also when they are
 * correlated along rows, along a sequence or sparse in one shard; each planted bug (a factor of
 * 1.0025, a shift of 0.5% of rms(ref), one shard of four 1% off) is flagged by its test and named
 * in the reading; the Student-t quantiles match printed tables. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness/base/testing.h"
#include "harness/structure.h"

enum { ROWS = 256, COLS = 64, SEEDS = 40 };

static uint64_t state;
static double uniform(void)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((state >> 11) + 0.5) * 0x1p-53;
}
static double normal(void) { return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()); }

/* ref [ROWS, COLS] N(0, 1) rounded to bf16; test the same values through another rounding:
 * x (1 + e), e ~ N(0, u) per element, then rounded to bf16 (two roundings of one sum); scaled_pair
 * multiplies the test's by a factor before its rounding (a partial scaled before the all-reduce). */
static void scaled_pair(eq_tensor *ref, eq_tensor *test, uint64_t seed, double factor)
{
    state = seed;
    EQ_EXPECT_OK(eq_tensor_init_2d(ref, EQ_BF16, ROWS, COLS));
    EQ_EXPECT_OK(eq_tensor_init_2d(test, EQ_BF16, ROWS, COLS));
    for (int64_t i = 0; i < ROWS * COLS; i++) {
        double x = normal() + (i % COLS == 3 ? 4.0 : 0.0); /* a column with a large mean, as features have */
        eq_tensor_set(ref, i, x);
        eq_tensor_set(test, i, x * (1.0 + 0x1p-8 * normal()) * factor);
    }
}

static void honest_pair(eq_tensor *ref, eq_tensor *test, uint64_t seed) { scaled_pair(ref, test, seed, 1.0); }

static void expect_clean(const eq_tensor *ref, const eq_tensor *test, int shards, const char *what)
{
    eq_structure s;
    char buf[320];
    EQ_EXPECT_OK(eq_structure_of(ref, test, EQ_BF16, 1, shards, &s));
    EQ_EXPECT(s.factor_tested && s.shift_tested, "%s: both tests run on a [%d, %d] tensor", what, ROWS, COLS);
    EQ_EXPECT(!eq_structure_flagged(&s), "%s: flagged as not rounding: %s (factor t %.3g, shift t %.3g, shard x%.3g)",
              what, eq_structure_reading(&s, buf, sizeof buf), s.factor_t, s.shift_t, s.shard_ratio);
}

static void check_honest(void)
{
    eq_tensor ref = {0}, test = {0};
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        honest_pair(&ref, &test, seed);
        expect_clean(&ref, &test, 4, "independent roundings");
        /* a per-row factor (a LayerNorm's rstd rounded otherwise) counts once per row, not per element */
        for (int r = 0; r < ROWS; r++) {
            double row = 1.0 + 0x1p-9 * normal();
            for (int c = 0; c < COLS; c++)
                eq_tensor_set(&test, r * COLS + c, eq_tensor_get(&ref, r * COLS + c) * row);
        }
        expect_clean(&ref, &test, 4, "a rounding factor per row");
        /* errors carried down a sequence (causal attention: a value's error reaches every later
         * position of its channel): 4 sequences of 64 positions, running means of per-position errors */
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < COLS; c++) {
                double sum = 0;
                for (int t = 0; t < 64; t++) {
                    int64_t i = (int64_t)(b * 64 + t) * COLS + c;
                    sum += 0x1p-8 * normal();
                    eq_tensor_set(&test, i, eq_tensor_get(&ref, i) + sum / (t + 1));
                }
            }
        expect_clean(&ref, &test, 4, "errors carried down a sequence");
        eq_tensor_free(&ref);
        eq_tensor_free(&test);
    }
    /* sparse: 5 last-bit flips, all in shard 2 of 4 (columns 32..47) */
    honest_pair(&ref, &test, 99);
    memcpy(test.data, ref.data, eq_tensor_bytes(&ref));
    for (int k = 0; k < 5; k++) {
        int64_t i = (int64_t)(k * 40) * COLS + 33 + k;
        ((uint16_t *)test.data)[i] ^= 1;
    }
    expect_clean(&ref, &test, 4, "five flipped last bits in one shard");
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
}

/* The planted bugs, each on an honest pair, must be flagged by their test and read as such. */
static void check_planted(void)
{
    eq_tensor ref = {0}, test = {0};
    eq_structure s;
    char buf[320];
    scaled_pair(&ref, &test, 7, 1.0025);
    EQ_EXPECT_OK(eq_structure_of(&ref, &test, EQ_BF16, -1, 0, &s));
    EQ_EXPECT(s.factor_flagged && fabs(s.factor - 1.0025) < 5e-4, "factor 1.0025: flagged %d, factor %.6g, t %.3g",
              s.factor_flagged, s.factor, s.factor_t);
    EQ_EXPECT(strstr(eq_structure_reading(&s, buf, sizeof buf), "systematic factor 1.002") != NULL, "'%s'", buf);
    eq_tensor_free(&ref);
    eq_tensor_free(&test);

    honest_pair(&ref, &test, 8);
    double b[COLS];
    for (int c = 0; c < COLS; c++) b[c] = 0.005 * normal() * 1.4; /* rms(ref) is about 1.4 with column 3 */
    for (int64_t i = 0; i < ROWS * COLS; i++) eq_tensor_set(&test, i, eq_tensor_get(&test, i) + b[i % COLS]);
    EQ_EXPECT_OK(eq_structure_of(&ref, &test, EQ_BF16, -1, 0, &s));
    EQ_EXPECT(s.shift_flagged, "a shift of 0.5%% of rms(ref): t %.3g, limit %.3g", s.shift_t, s.shift_limit);
    EQ_EXPECT(strstr(eq_structure_reading(&s, buf, sizeof buf), "shift repeated on every row") != NULL, "'%s'", buf);
    eq_tensor_free(&ref);
    eq_tensor_free(&test);

    honest_pair(&ref, &test, 9);
    memcpy(test.data, ref.data, eq_tensor_bytes(&ref)); /* column-parallel: bit-exact but for the bug */
    for (int r = 0; r < ROWS; r++)
        for (int c = 16; c < 32; c++) { /* tp rank 1's shard: 1% off in a random direction */
            int64_t i = (int64_t)r * COLS + c;
            eq_tensor_set(&test, i, eq_tensor_get(&ref, i) + 0.01 * 1.4 * normal());
        }
    EQ_EXPECT_OK(eq_structure_of(&ref, &test, EQ_BF16, 1, 4, &s));
    EQ_EXPECT(s.shard_flagged && s.shard_worst == 1, "shard 1 of 4 off by 1%%: flagged %d, worst %d, x%.3g, rel %.3g",
              s.shard_flagged, s.shard_worst, s.shard_ratio, s.shard_rel);
    EQ_EXPECT(strstr(eq_structure_reading(&s, buf, sizeof buf), "tp rank 1's shard off") != NULL, "'%s'", buf);
    /* the same along dim 0 does not name a shard of dim 1 */
    EQ_EXPECT_OK(eq_structure_of(&ref, &test, EQ_BF16, 0, 4, &s));
    EQ_EXPECT(!s.shard_flagged, "split along rows, the bug is in every row shard alike");
    eq_tensor_free(&ref);
    eq_tensor_free(&test);
}

/* Student's t upper quantiles from printed tables (two-sided 0.05 at df 1: 12.706; one-sided
 * 0.0005 at df 15: 4.073; one-sided 0.005 at df 7: 3.499) and the normal limit (df 1000, 1e-6: 4.75). */
static void check_quantiles(void)
{
    EQ_EXPECT(fabs(eq_student_t_quantile(0.025, 1) - 12.706) < 2e-3, "%.5g", eq_student_t_quantile(0.025, 1));
    EQ_EXPECT(fabs(eq_student_t_quantile(0.0005, 15) - 4.073) < 2e-3, "%.5g", eq_student_t_quantile(0.0005, 15));
    EQ_EXPECT(fabs(eq_student_t_quantile(0.005, 7) - 3.499) < 2e-3, "%.5g", eq_student_t_quantile(0.005, 7));
    EQ_EXPECT(fabs(eq_student_t_quantile(1e-6, 100000) - 4.7534) < 3e-3, "%.5g", eq_student_t_quantile(1e-6, 100000));
}

int main(void)
{
    check_quantiles();
    check_honest();
    check_planted();
    return eq_test_finish("structure_test");
}
