/* structure.h: rounding's kinds of difference pass every test, over many seeds, also when they are
 * correlated along rows, along a sequence or sparse in one shard; each planted bug (a factor of
 * 1.0025, a shift of 0.5% of rms(ref), one shard of four 1% off) is flagged by its test and named
 * in the reading; the statistics match a plain scalar fp64 computation of them on odd shapes with
 * non-finite pairs, in every dtype and way of sharding; the Student-t quantiles match printed
 * tables. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
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

/* ---- the pass against a plain fp64 reference ------------------------------------------------ */

/* The three tests' statistics computed the plain way, as structure.h states them: scalar fp64 loops
 * over the elements in flat order, each element's row block, column block and tp shard found from
 * its own index. */
enum { G = EQ_STRUCTURE_BLOCKS, PLAIN_SHARDS = 8 };

/* The first of `total` rows (columns) in block g of `blocks`, and the block x falls in. */
static int64_t plain_block_start(int g, int64_t total, int blocks) { return (g * total + blocks - 1) / blocks; }
static int plain_block_of(int64_t x, int64_t total, int blocks)
{
    int g = 0;
    while (plain_block_start(g + 1, total, blocks) <= x) g++;
    return g;
}

/* mean / (sd / sqrt(k)) of k scores, 0/0 = 0 */
static double plain_t(const double *score, int k)
{
    double sum = 0, ss = 0;
    for (int i = 0; i < k; i++) sum += score[i];
    const double mean = sum / k;
    for (int i = 0; i < k; i++) ss += (score[i] - mean) * (score[i] - mean);
    const double sd = sqrt(ss / (k - 1));
    if (sd > 0) return mean / (sd / sqrt((double)k));
    return mean > 0 ? INFINITY : mean < 0 ? -INFINITY : 0.0;
}

/* shift: the t of blocks onto0, onto0 + step, ... (8 of them) projected on the mean pattern of
 * blocks from0, from0 + step, ... (means [G][n]: each block's column means) */
static double plain_projection_t(const double *means, int64_t n, int from0, int onto0, int step)
{
    double score[G / 2];
    for (int k = 0; k < G / 2; k++) {
        score[k] = 0;
        for (int64_t j = 0; j < n; j++) {
            double pattern = 0;
            for (int m = 0; m < G / 2; m++) pattern += means[(from0 + m * step) * n + j];
            score[k] += means[(onto0 + k * step) * n + j] * (pattern / (G / 2));
        }
    }
    return plain_t(score, G / 2);
}

typedef struct {
    int64_t rows, n, finite;
    int g_rows, g_cols;
    double num_r[G], den_r[G], num_c[G], den_c[G]; /* factor: <d, r>, <r, r> per row block, column block */
    double err[PLAIN_SHARDS], energy[PLAIN_SHARDS]; /* shard: <d, d>, <r, r> per tp shard */
    int64_t differ[PLAIN_SHARDS], count[PLAIN_SHARDS];
    double *cols, *cnt; /* [G][n]: per row block and column, sum of d - (its row's mean d) over finite pairs, count */
    double ref_sum2;
} plain_sums;

/* The sums, element by element (shards 0: none; the shard of flat element i along shard_dim is
 * (i / stride) % extent / (extent / shards)). */
static void plain_pass(const eq_tensor *ref, const eq_tensor *test, int shard_dim, int shards, plain_sums *p)
{
    int64_t stride = 1;
    for (int k = shard_dim + 1; shards > 0 && k < ref->ndim; k++) stride *= ref->shape[k];
    const int64_t extent = shards > 0 ? ref->shape[shard_dim] : 1;
    for (int64_t row = 0; row < p->rows; row++) {
        const int g = plain_block_of(row, p->rows, p->g_rows);
        double row_sum = 0;
        int64_t row_finite = 0;
        for (int64_t j = 0; j < p->n; j++) {
            const int64_t i = row * p->n + j;
            const double r = eq_tensor_get(ref, i), d = eq_tensor_get(test, i) - r;
            if (!isfinite(r) || !isfinite(eq_tensor_get(test, i))) continue;
            const int c = plain_block_of(j, p->n, p->g_cols);
            p->num_r[g] += d * r, p->den_r[g] += r * r, p->num_c[c] += d * r, p->den_c[c] += r * r;
            p->ref_sum2 += r * r, p->finite++;
            row_sum += d, row_finite++;
            if (shards > 0) {
                const int64_t s = (i / stride) % extent / (extent / shards);
                p->err[s] += d * d, p->energy[s] += r * r, p->differ[s] += d != 0, p->count[s]++;
            }
        }
        const double row_mean = row_finite > 0 ? row_sum / (double)row_finite : 0.0;
        for (int64_t j = 0; j < p->n; j++) {
            const int64_t i = row * p->n + j;
            const double r = eq_tensor_get(ref, i), t = eq_tensor_get(test, i);
            if (!isfinite(r) || !isfinite(t)) continue;
            p->cols[g * p->n + j] += (t - r) - row_mean, p->cnt[g * p->n + j] += 1;
        }
    }
}

static void plain_factor(const plain_sums *p, int ndim, eq_structure *s)
{
    double num = 0, den = 0, var = 0;
    for (int g = 0; g < p->g_rows; g++) num += p->num_r[g], den += p->den_r[g];
    const double f = num / den;
    const double *nums[2] = {p->num_r, p->num_c}, *dens[2] = {p->den_r, p->den_c};
    const int gs[2] = {p->g_rows, ndim >= 2 ? p->g_cols : 0};
    int df = 0;
    for (int k = 0; k < 2; k++) {
        if (gs[k] < EQ_STRUCTURE_MIN_BLOCKS) continue;
        double v = 0;
        for (int g = 0; g < gs[k]; g++) v += (nums[k][g] - f * dens[k][g]) * (nums[k][g] - f * dens[k][g]);
        var = fmax(var, v * gs[k] / (gs[k] - 1));
        df = df == 0 || gs[k] - 1 < df ? gs[k] - 1 : df;
    }
    s->factor_tested = df > 0;
    s->factor = 1.0 + f;
    s->factor_spread = sqrt(var) / den;
    s->factor_t = fabs(f) / s->factor_spread;
    s->factor_limit = eq_student_t_quantile(EQ_STRUCTURE_ALPHA / 2, df);
}

static void plain_shift(const plain_sums *p, eq_structure *s)
{
    const int64_t n = p->n;
    double *means = calloc((size_t)(G * n), sizeof *means), shift_ms = 0;
    EQ_EXPECT(means != NULL, "no memory");
    if (means == NULL) return;
    for (int64_t j = 0; j < n; j++) {
        double all = 0, all_n = 0;
        for (int g = 0; g < G; g++) {
            all += p->cols[g * n + j], all_n += p->cnt[g * n + j];
            means[g * n + j] = p->cnt[g * n + j] > 0 ? p->cols[g * n + j] / p->cnt[g * n + j] : 0.0;
        }
        if (all_n > 0) shift_ms += (all / all_n) * (all / all_n);
    }
    double t = plain_projection_t(means, n, 0, 1, 2);       /* even onto odd */
    t = fmin(t, plain_projection_t(means, n, 1, 0, 2));     /* odd onto even */
    t = fmin(t, plain_projection_t(means, n, 0, G / 2, 1)); /* first half onto second */
    t = fmin(t, plain_projection_t(means, n, G / 2, 0, 1));
    free(means);
    s->shift_tested = 1;
    s->shift_t = t;
    s->shift_rel = sqrt(shift_ms / (double)n / (p->ref_sum2 / (double)p->finite));
    s->shift_limit = eq_student_t_quantile(EQ_STRUCTURE_ALPHA, G / 2 - 1);
}

static void plain_shard(const plain_sums *p, int shards, eq_structure *s)
{
    int worst = 0;
    for (int k = 1; k < shards; k++)
        if (p->err[k] / p->energy[k] > p->err[worst] / p->energy[worst]) worst = k;
    double rest_err = 0, rest_energy = 0;
    for (int k = 0; k < shards; k++)
        if (k != worst) rest_err += p->err[k], rest_energy += p->energy[k];
    s->shard_tested = 1;
    s->shard_count = shards;
    s->shard_worst = worst;
    s->shard_rel = sqrt(p->err[worst] / p->energy[worst]);
    s->shard_ratio = (p->err[worst] / p->energy[worst]) / (rest_err / rest_energy);
    s->shard_share = (double)p->differ[worst] / (double)p->count[worst];
}

/* The factor, shift and shard statistics of a pair whose every test runs (at least 16 rows and
 * columns, no all-zero shard), the plain way. */
static void plain_structure(const eq_tensor *ref, const eq_tensor *test, int shard_dim, int shards, eq_structure *s)
{
    memset(s, 0, sizeof *s);
    plain_sums p = {0};
    p.n = ref->shape[ref->ndim - 1];
    p.rows = eq_tensor_numel(ref) / p.n;
    p.g_rows = p.rows < G ? (int)p.rows : G, p.g_cols = p.n < G ? (int)p.n : G;
    p.cols = calloc((size_t)(G * p.n), sizeof *p.cols);
    p.cnt = calloc((size_t)(G * p.n), sizeof *p.cnt);
    EQ_EXPECT(p.cols != NULL && p.cnt != NULL && shards <= PLAIN_SHARDS, "no memory, or %d shards", shards);
    if (p.cols != NULL && p.cnt != NULL && shards <= PLAIN_SHARDS) {
        plain_pass(ref, test, shard_dim, shards, &p);
        plain_factor(&p, ref->ndim, s);
        plain_shift(&p, s);
        if (shards > 0) plain_shard(&p, shards, s);
    }
    free(p.cols);
    free(p.cnt);
}

/* ref N(0, 1) with a column of mean 4; test = ref (1 + 5e-4) + b (a shift over the last dim,
 * 1e-2) + noise 1e-2 (5e-2 in the first 14 rows' first 206 columns: a shard worse than the
 * others whichever way it is cut), a quarter of the elements left equal; in every fourth row
 * (from row 1) non-finite pairs planted on both sides: NaN, Inf and -Inf scattered, test's column
 * 7 Inf, and row 5's ref all NaN; the other rows all finite. */
static void planted_pair(eq_tensor *ref, eq_tensor *test, eq_dtype ref_dt, eq_dtype test_dt, int ndim,
                         const int64_t *shape)
{
    EQ_EXPECT_OK(eq_tensor_init(ref, ref_dt, ndim, shape));
    EQ_EXPECT_OK(eq_tensor_init(test, test_dt, ndim, shape));
    const int64_t n = shape[ndim - 1], numel = eq_tensor_numel(ref);
    double *b = malloc((size_t)n * sizeof *b);
    EQ_EXPECT(b != NULL, "no memory");
    if (b == NULL) return;
    state = 41;
    for (int64_t j = 0; j < n; j++) b[j] = 0.01 * normal();
    for (int64_t i = 0; i < numel; i++) {
        const int64_t row = i / n, col = i % n;
        const double x = normal() + (col == 3 ? 4.0 : 0.0), noise = (row < 14 && col < 206 ? 0.05 : 0.01) * normal();
        eq_tensor_set(ref, i, x);
        eq_tensor_set(test, i, uniform() < 0.25 ? x : x * (1.0 + 5e-4) + b[col] + noise);
        const double u = row % 4 == 1 ? uniform() : 1.0; /* the other rows all finite */
        if (u < 0.004) eq_tensor_set(ref, i, NAN);
        else if (u < 0.008) eq_tensor_set(test, i, INFINITY);
        else if (u < 0.010) eq_tensor_set(ref, i, -INFINITY);
        else if (u < 0.012) eq_tensor_set(test, i, NAN), eq_tensor_set(ref, i, INFINITY);
        if (row == 5) eq_tensor_set(ref, i, NAN);
        if (col == 7 && row % 4 == 1) eq_tensor_set(test, i, INFINITY);
    }
    free(b);
}

/* got within a relative 1e-12 of want (the same infinity counts as equal) */
static void expect_close(double got, double want, const char *field, const char *what)
{
    EQ_EXPECT(got == want || fabs(got - want) <= 1e-12 * fabs(want), "%s: %s %.17g, plain %.17g (rel %.3g)", what,
              field, got, want, fabs(got - want) / fabs(want));
}

static void expect_plain(const eq_tensor *ref, const eq_tensor *test, int shard_dim, int shards, const char *what)
{
    eq_structure got, want;
    EQ_EXPECT_OK(eq_structure_of(ref, test, ref->dtype, shard_dim, shards, &got));
    plain_structure(ref, test, shard_dim, shards, &want);
    EQ_EXPECT(got.factor_tested && got.shift_tested && got.shard_tested == (shards > 0),
              "%s: tested factor %d, shift %d, shard %d", what, got.factor_tested, got.shift_tested, got.shard_tested);
    expect_close(got.factor - 1.0, want.factor - 1.0, "factor - 1", what);
    expect_close(got.factor_spread, want.factor_spread, "factor spread", what);
    expect_close(got.factor_t, want.factor_t, "factor t", what);
    expect_close(got.factor_limit, want.factor_limit, "factor limit", what);
    expect_close(got.shift_rel, want.shift_rel, "shift rel", what);
    expect_close(got.shift_t, want.shift_t, "shift t", what);
    expect_close(got.shift_limit, want.shift_limit, "shift limit", what);
    if (shards == 0) return;
    EQ_EXPECT(got.shard_worst == want.shard_worst, "%s: worst shard %d, plain %d", what, got.shard_worst, want.shard_worst);
    expect_close(got.shard_rel, want.shard_rel, "shard rel", what);
    expect_close(got.shard_ratio, want.shard_ratio, "shard ratio", what);
    expect_close(got.shard_share, want.shard_share, "shard share", what);
}

/* 70 rows of 1030 (neither a multiple of 4 nor of the 16 blocks; column blocks, shards and their
 * union cut rows at odd places) as [70, 1030] and [5, 14, 1030], in each dtype and an fp32 ref
 * against a bf16 test, sharded by column (2: its boundary is a column block's; 5: 206 wide), by
 * row (dim 0, and dim 1 of the 3-D one) and not at all: the pass's statistics match the plain
 * ones. */
static void check_against_plain(void)
{
    static const struct {
        int ndim, shard_dim, shards;
    } cuts[] = {{2, -1, 0}, {2, 1, 2}, {2, 1, 5}, {2, 0, 2}, {2, 0, 7}, {3, 2, 5}, {3, 1, 7}, {3, 0, 5}};
    static const eq_dtype dtypes[][2] = {{EQ_FP32, EQ_FP32}, {EQ_BF16, EQ_BF16}, {EQ_FP64, EQ_FP64}, {EQ_FP32, EQ_BF16}};
    const int64_t shape2[2] = {70, 1030}, shape3[3] = {5, 14, 1030};
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < (int)(sizeof cuts / sizeof cuts[0]); c++) {
            eq_tensor ref = {0}, test = {0};
            char what[96];
            planted_pair(&ref, &test, dtypes[k][0], dtypes[k][1], cuts[c].ndim, cuts[c].ndim == 2 ? shape2 : shape3);
            snprintf(what, sizeof what, "%s against %s %dd, %d shards along dim %d", eq_dtype_name(dtypes[k][1]),
                     eq_dtype_name(dtypes[k][0]), cuts[c].ndim, cuts[c].shards, cuts[c].shard_dim);
            expect_plain(&ref, &test, cuts[c].shard_dim, cuts[c].shards, what);
            eq_tensor_free(&ref);
            eq_tensor_free(&test);
        }
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
    check_against_plain();
    return eq_test_finish("structure_test");
}
