/* Structure: what rounding cannot do (structure.h). */
#include "harness/structure.h"

#include "harness/base/parallel.h"
#include "harness/base/widen_lanes.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Student's t ---------------------------------------------------------------------------- */

/* The continued fraction of the regularised incomplete beta function (modified Lentz). */
static double beta_fraction(double a, double b, double x)
{
    const double tiny = 1e-300;
    double qab = a + b, qap = a + 1.0, qam = a - 1.0, c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m <= 500; m++) {
        double m2 = 2.0 * m, aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        c = 1.0 + aa / c;
        if (fabs(d) < tiny) d = tiny;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        c = 1.0 + aa / c;
        if (fabs(d) < tiny) d = tiny;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double step = d * c;
        h *= step;
        if (fabs(step - 1.0) < 1e-15) break;
    }
    return h;
}

/* I_x(a, b). */
static double incomplete_beta(double a, double b, double x)
{
    if (x <= 0.0) return 0.0;
    if (x >= 1.0) return 1.0;
    double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_fraction(a, b, x) / a;
    return 1.0 - front * beta_fraction(b, a, 1.0 - x) / b;
}

/* P(T > t) for t >= 0. */
static double student_t_upper(double t, int df)
{
    double nu = df;
    return 0.5 * incomplete_beta(nu / 2.0, 0.5, nu / (nu + t * t));
}

double eq_student_t_quantile(double alpha, int df)
{
    double lo = 0.0, hi = 1.0;
    while (student_t_upper(hi, df) > alpha && hi < 1e12) hi *= 2.0;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (student_t_upper(mid, df) > alpha) lo = mid;
        else hi = mid;
    }
    return hi;
}

/* The limits the tests use, Student-t quantiles of EQ_STRUCTURE_ALPHA (one-sided) and of half of it
 * (two-sided) for 1..G-1 degrees of freedom, computed once: a bisection over the incomplete beta
 * function per tensor made a small user's compare three times slower. */
static double limit_one_sided[EQ_STRUCTURE_BLOCKS], limit_two_sided[EQ_STRUCTURE_BLOCKS];
static pthread_once_t limits_once = PTHREAD_ONCE_INIT;

static void compute_limits(void)
{
    for (int df = 1; df < EQ_STRUCTURE_BLOCKS; df++) {
        limit_one_sided[df] = eq_student_t_quantile(EQ_STRUCTURE_ALPHA, df);
        limit_two_sided[df] = eq_student_t_quantile(EQ_STRUCTURE_ALPHA / 2, df);
    }
}

static double limit_of(int df, int two_sided)
{
    pthread_once(&limits_once, compute_limits);
    return two_sided ? limit_two_sided[df] : limit_one_sided[df];
}

/* ---- the tests ------------------------------------------------------------------------------ */

/* The mean over a set of blocks and the sample standard deviation, n >= 2. */
static void mean_sd(const double *x, int n, double *mean, double *sd)
{
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *sd = sqrt(ss / (n - 1));
}

/* t = mean / (sd / sqrt(n)), with 0/0 = 0 and a positive mean over no spread = Inf. */
static double t_of(double mean, double sd, int n)
{
    if (sd > 0) return mean / (sd / sqrt((double)n));
    return mean > 0 ? INFINITY : mean < 0 ? -INFINITY : 0.0;
}

/* factor: f and its spread from the per-block sums of d ref and ref^2 (rows, then columns). */
static void factor_test(const double *num_r, const double *den_r, int g_rows, const double *num_c,
                        const double *den_c, int g_cols, eq_structure *s)
{
    double num = 0, den = 0;
    for (int g = 0; g < g_rows; g++) num += num_r[g], den += den_r[g];
    if (!(den > 0)) return;
    double f = num / den, var = 0;
    int df = 0;
    const double *nums[2] = {num_r, num_c}, *dens[2] = {den_r, den_c};
    const int gs[2] = {g_rows, g_cols};
    for (int k = 0; k < 2; k++) {
        if (gs[k] < EQ_STRUCTURE_MIN_BLOCKS) continue;
        double v = 0;
        for (int g = 0; g < gs[k]; g++) v += (nums[k][g] - f * dens[k][g]) * (nums[k][g] - f * dens[k][g]);
        v *= (double)gs[k] / (gs[k] - 1);
        var = fmax(var, v);
        df = df == 0 ? gs[k] - 1 : (gs[k] - 1 < df ? gs[k] - 1 : df);
    }
    if (df == 0) return;
    s->factor_tested = 1;
    s->factor = 1.0 + f;
    s->factor_spread = sqrt(var) / den;
    s->factor_t = s->factor_spread > 0 ? fabs(f) / s->factor_spread : (f != 0 ? INFINITY : 0.0);
    s->factor_limit = limit_of(df, 1);
    s->factor_flagged = s->factor_t > s->factor_limit && fabs(f) > s->floor;
}

/* shift: the t of the projections of blocks `onto` on the pattern of blocks `from` (cols [G][n]). */
static double projection_t(const double *cols, int64_t n, const int *from, const int *onto, int half)
{
    double *pattern = calloc((size_t)n, sizeof *pattern), scores[EQ_STRUCTURE_BLOCKS];
    if (pattern == NULL) return 0.0; /* no memory: the test says nothing */
    for (int k = 0; k < half; k++)
        for (int64_t j = 0; j < n; j++) pattern[j] += cols[(int64_t)from[k] * n + j] / half;
    for (int k = 0; k < half; k++) {
        double sc = 0;
        for (int64_t j = 0; j < n; j++) sc += cols[(int64_t)onto[k] * n + j] * pattern[j];
        scores[k] = sc;
    }
    free(pattern);
    double mean, sd;
    mean_sd(scores, half, &mean, &sd);
    return t_of(mean, sd, half);
}

/* shift: from the blocks' column means of the row-centred differences (cols [G][n], summed and
 * counted by the pass in eq_structure_of). */
static void shift_test(double *cols, const double *count, int64_t n, double ref_ms, eq_structure *s)
{
    enum { G = EQ_STRUCTURE_BLOCKS, HALF = G / 2 };
    double shift_ms = 0;
    /* each column's sum over the blocks in block order, a block's row at a time (the blocks' rows
     * are n apart: a column at a time, each of its 16 reads was a line of its own) */
    double *all = calloc((size_t)n, sizeof *all), *all_n = calloc((size_t)n, sizeof *all_n);
    if (all == NULL || all_n == NULL) { /* no memory: the test says nothing */
        free(all), free(all_n);
        return;
    }
    for (int g = 0; g < G; g++)
        for (int64_t j = 0; j < n; j++) {
            all[j] += cols[g * n + j], all_n[j] += count[g * n + j];
            if (count[g * n + j] > 0) cols[g * n + j] /= count[g * n + j];
        }
    for (int64_t j = 0; j < n; j++)
        if (all_n[j] > 0) shift_ms += (all[j] / all_n[j]) * (all[j] / all_n[j]);
    free(all), free(all_n);
    static const int even[HALF] = {0, 2, 4, 6, 8, 10, 12, 14}, odd[HALF] = {1, 3, 5, 7, 9, 11, 13, 15},
                     first[HALF] = {0, 1, 2, 3, 4, 5, 6, 7}, second[HALF] = {8, 9, 10, 11, 12, 13, 14, 15};
    double t = projection_t(cols, n, even, odd, HALF);
    t = fmin(t, projection_t(cols, n, odd, even, HALF));
    t = fmin(t, projection_t(cols, n, first, second, HALF));
    t = fmin(t, projection_t(cols, n, second, first, HALF));
    s->shift_tested = 1;
    s->shift_t = t;
    s->shift_rel = ref_ms > 0 ? sqrt(shift_ms / n / ref_ms) : 0.0;
    s->shift_limit = limit_of(HALF - 1, 0);
    s->shift_flagged = t > s->shift_limit && s->shift_rel > s->floor;
}

/* The shard test's three conditions (structure.h), each as its value over its limit: the least of
 * them is >= 1 exactly when all hold. */
static double shard_margin(const eq_structure *s)
{
    return fmin(s->shard_ratio / EQ_SHARD_RATIO,
                fmin(s->shard_rel / (EQ_SHARD_REL_U * s->unit_roundoff), s->shard_share / EQ_SHARD_SHARE));
}

/* shard: the worst tp shard's relative error energy against the others'. */
static void shard_test(const double *err, const double *energy, const int64_t *differ, const int64_t *count,
                       int shards, eq_structure *s)
{
    int worst = -1;
    double worst_e = -1;
    for (int k = 0; k < shards; k++) {
        if (!(energy[k] > 0)) return; /* an all-zero shard: no relative error to compare */
        if (err[k] / energy[k] > worst_e) worst_e = err[k] / energy[k], worst = k;
    }
    double rest_err = 0, rest_energy = 0;
    for (int k = 0; k < shards; k++)
        if (k != worst) rest_err += err[k], rest_energy += energy[k];
    double rest = rest_err / rest_energy;
    s->shard_tested = 1;
    s->shard_count = shards;
    s->shard_worst = worst;
    s->shard_rel = sqrt(worst_e);
    s->shard_ratio = rest > 0 ? worst_e / rest : (worst_e > 0 ? INFINITY : 1.0);
    s->shard_share = count[worst] > 0 ? (double)differ[worst] / (double)count[worst] : 0.0;
    s->shard_flagged = shard_margin(s) >= 1.0;
}

/* One pass over the two tensors, a block of rows per work item (so no sum depends on the thread
 * count: each block's sums are its own, added in block order after):
 *   factor: <d, r> and <r, r> per block of rows and, per row block, per block of columns;
 *   shard:  error energy, reference energy, elements that differ and finite pairs per tp shard;
 *   shift:  per block of rows and column, the sum of the row-centred differences and their count.
 * d = test - ref over the pairs where both are finite (the others count nowhere). A row is read
 * segment by segment (the row cut at every column block's first column and, sharded by column,
 * every shard's), one loop taking all of the sums above and keeping each d; the shift's column
 * sums, which need the row's mean d first, then read the kept d. */
enum { G = EQ_STRUCTURE_BLOCKS, MAX_SHARDS = 4096 };
#define ROW_D_MAX ((int64_t)1 << 20) /* the longest row whose d a worker keeps (8 MiB) */
typedef struct {
    double num_r, den_r, num_c[G], den_c[G];
    int64_t finite;
} block_sums;

typedef struct {
    const eq_tensor *ref, *test;
    int64_t rows, n;                /* rows of n elements */
    int g_rows, g_cols;
    const int64_t *row_start;       /* [g_rows + 1]: block g's rows are [row_start[g], row_start[g + 1]) */
    int segments;                   /* of a row: cut at the column blocks' and the column shards' starts */
    const int64_t *seg_start;       /* [segments + 1]: segment k's columns are [seg_start[k], seg_start[k + 1]) */
    const int *seg_col, *seg_shard; /* [segments]: its column block; its shard (by column; else 0) */
    int shards, shard_by_col;       /* shards > 0: by column (the split dim is the last), else by row */
    int64_t stride, extent;         /* by row: the shard of element i is (i / stride) % extent / (extent / shards) */
    block_sums *blocks;             /* [g_rows] */
    double *err, *energy;           /* [g_rows * shards] */
    int64_t *differ, *count;        /* [g_rows * shards] */
    double *cols, *col_count;       /* [G * n]: the shift test's, or NULL */
} structure_pass;

/* Four fp64 lanes (GCC and clang vector extension): element j of a segment [j0, j1) goes to lane
 * (j - j0) % 4, the lanes added at the end in lane order, so the sums are the same bits whatever
 * vector width the compiler picks; AVX2 and x86-64-v4 (AVX-512: bf16 pairs 20% faster) copies
 * beside the baseline one, picked when the process starts. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define PASS_WIDE __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PASS_WIDE __attribute__((target_clones("avx2", "default")))
#else
#define PASS_WIDE
#endif
#ifdef __GNUC__ /* GCC and clang: the lanes pass only between static inline functions, no ABI to keep */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#define INLINE static inline __attribute__((always_inline)) /* into each clone: no vector crosses a call */
typedef double lanes4 __attribute__((vector_size(4 * sizeof(double))));
typedef int64_t lanes4_i __attribute__((vector_size(4 * sizeof(int64_t)))); /* masks: -1 yes, 0 no */

INLINE lanes4 and4(lanes4 x, lanes4_i mask) { return (lanes4)((lanes4_i)x & mask); }
INLINE double lanes_sum(lanes4 x) { return ((x[0] + x[1]) + x[2]) + x[3]; }
INLINE int64_t lanes_count(lanes4_i x) { return ((x[0] + x[1]) + x[2]) + x[3]; }

/* Element j of a row of dtype dt widened exactly to fp64 (bf16: its bits are fp32's upper half). */
INLINE double load1(const void *row, eq_dtype dt, int64_t j)
{
    switch (dt) {
    case EQ_FP32: return ((const float *)row)[j];
    case EQ_BF16: return eq_bf16_to_f32(((const uint16_t *)row)[j]);
    default: return ((const double *)row)[j];
    }
}

/* What a segment of a row gives the three tests: over its finite pairs, the sums of d r, r r, d d
 * and d, the pairs with d != 0 and the finite pairs. */
typedef struct {
    double dr, rr, dd, d;
    int64_t differ, finite;
} segment_sums;

/* The same in lanes (the counts negated: a mask is -1). */
typedef struct {
    lanes4 dr, rr, dd, d;
    lanes4_i differ, finite;
} segment_lanes;

/* 4 pairs (a of ref, b of test) into the lanes; a pair with a non-finite value adds 0 to every sum
 * and to no count. Their d (0 for such a pair) to d_out, where it is not NULL. */
INLINE void accumulate(segment_lanes *acc, lanes4 a, lanes4 b, double *d_out)
{
    const lanes4_i ok = (a - a) == (b - b); /* 0 == 0 where both are finite, NaN somewhere else */
    const lanes4 r = and4(a, ok), d = and4(b - a, ok);
    acc->dr += d * r, acc->rr += r * r, acc->dd += d * d, acc->d += d;
    acc->differ += d != 0, acc->finite += ok;
    if (d_out != NULL) memcpy(d_out, &d, sizeof d);
}

/* Columns [j0, j1) of a row of ref (ra, dtype da) and of test (tb, db), every sum in the 4 lanes;
 * each d to drow [j] where drow is not NULL. Read straight from storage, first as if every pair
 * were finite (accumulate's sums with no masks, the same bits for finite pairs); a NaN or Inf
 * leaves a lane of r r or d d that is not finite, and the segment is read again with them. */
INLINE segment_sums segment_of(const void *ra, eq_dtype da, const void *tb, eq_dtype db, int64_t j0, int64_t j1,
                               double *drow)
{
    segment_lanes acc = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) {
        const lanes4 a = eq_load_widened4(ra, da, j), b = eq_load_widened4(tb, db, j), d = b - a;
        acc.dr += d * a, acc.rr += a * a, acc.dd += d * d, acc.d += d;
        acc.differ += d != 0;
        if (drow != NULL) memcpy(drow + j, &d, sizeof d);
    }
    int finite = 1;
    for (int k = 0; k < 4; k++) finite &= fabs(acc.rr[k]) <= DBL_MAX && fabs(acc.dd[k]) <= DBL_MAX;
    if (finite) {
        acc.finite -= (lanes4_i){0} + (j - j0) / 4; /* every pair so far */
    } else {
        memset(&acc, 0, sizeof acc);
        for (j = j0; j + 4 <= j1; j += 4)
            accumulate(&acc, eq_load_widened4(ra, da, j), eq_load_widened4(tb, db, j), drow != NULL ? drow + j : NULL);
    }
    if (j < j1) { /* the last j1 - j < 4 pairs, and NaN pairs that count nowhere */
        lanes4 a = {NAN, NAN, NAN, NAN}, b = {NAN, NAN, NAN, NAN}, d;
        for (int k = 0; j + k < j1; k++) a[k] = load1(ra, da, j + k), b[k] = load1(tb, db, j + k);
        accumulate(&acc, a, b, (double *)&d);
        if (drow != NULL) memcpy(drow + j, &d, (size_t)(j1 - j) * sizeof *drow);
    }
    return (segment_sums){lanes_sum(acc.dr), lanes_sum(acc.rr), lanes_sum(acc.dd), lanes_sum(acc.d),
                          -lanes_count(acc.differ), -lanes_count(acc.finite)};
}

/* shift: cols[j] += d_j - mean over a row's finite pairs (cols, col_count [n]: its row block's);
 * col_count[j] += 1 for each, unless the row is all finite (full: its block counts those rows at
 * the end). Element by element (the compiler vectorises). */
INLINE void shift_row(double *cols, double *col_count, const void *ra, eq_dtype da, const void *tb, eq_dtype db,
                      const double *drow, int64_t n, double mean, int full)
{
    if (full && drow != NULL) {
        for (int64_t j = 0; j < n; j++) cols[j] += drow[j] - mean;
        return;
    }
    if (full) {
        for (int64_t j = 0; j < n; j++) cols[j] += (load1(tb, db, j) - load1(ra, da, j)) - mean;
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        const double a = load1(ra, da, j), b = load1(tb, db, j);
        const int ok = (fabs(a) <= DBL_MAX) & (fabs(b) <= DBL_MAX);
        cols[j] += ok ? (b - a) - mean : 0.0;
        col_count[j] += ok;
    }
}

/* Row `row` of block g (ref of dtype da, test of db) into the block's sums; *full_rows counts the
 * block's rows with every pair finite. */
INLINE void row_pass(structure_pass *p, int64_t g, int64_t row, eq_dtype da, eq_dtype db, double *drow,
                     int64_t *full_rows)
{
    block_sums *bs = &p->blocks[g];
    const int64_t n = p->n;
    const void *ra = (const char *)p->ref->data + (size_t)(row * n) * eq_dtype_size(da),
               *tb = (const char *)p->test->data + (size_t)(row * n) * eq_dtype_size(db);
    /* by row, the whole row is in one shard (by column, s0 is 0 and each segment says its own) */
    const int64_t s0 = p->shards > 0 && !p->shard_by_col ? (row * n) / p->stride % p->extent / (p->extent / p->shards) : 0;
    double row_d = 0;
    int64_t finite = 0;
    for (int k = 0; k < p->segments; k++) {
        const segment_sums ss = segment_of(ra, da, tb, db, p->seg_start[k], p->seg_start[k + 1], drow);
        const int c = p->seg_col[k];
        bs->num_c[c] += ss.dr, bs->den_c[c] += ss.rr;
        bs->num_r += ss.dr, bs->den_r += ss.rr;
        if (p->shards > 0) {
            const int64_t s = g * p->shards + s0 + p->seg_shard[k];
            p->err[s] += ss.dd, p->energy[s] += ss.rr;
            p->differ[s] += ss.differ, p->count[s] += ss.finite;
        }
        row_d += ss.d, finite += ss.finite;
    }
    bs->finite += finite;
    if (p->cols != NULL) {
        const double row_mean = finite > 0 ? row_d / (double)finite : 0.0;
        shift_row(p->cols + g * n, p->col_count + g * n, ra, da, tb, db, drow, n, row_mean, finite == n);
        *full_rows += finite == n;
    }
}

/* Blocks of rows [begin, end), ref of dtype da and test of db. */
INLINE void blocks_of(structure_pass *p, int64_t begin, int64_t end, eq_dtype da, eq_dtype db)
{
    /* the row's d for the shift's column sums, kept from the segments' loop (or read again: a row
     * too long for it, or no memory) */
    double *drow = p->cols != NULL && p->n <= ROW_D_MAX ? malloc((size_t)p->n * sizeof *drow) : NULL;
    for (int64_t g = begin; g < end; g++) {
        int64_t full_rows = 0;
        for (int64_t row = p->row_start[g]; row < p->row_start[g + 1]; row++)
            row_pass(p, g, row, da, db, drow, &full_rows);
        for (int64_t j = 0; p->cols != NULL && full_rows > 0 && j < p->n; j++)
            p->col_count[g * p->n + j] += (double)full_rows;
    }
    free(drow);
}

/* The loops compiled for each dtype the two share; tensors of two dtypes take the slow way. */
PASS_WIDE static void pass_blocks(void *ctx, int64_t begin, int64_t end)
{
    structure_pass *p = ctx;
    const eq_dtype da = p->ref->dtype, db = p->test->dtype;
    if (da == EQ_FP32 && db == EQ_FP32) blocks_of(p, begin, end, EQ_FP32, EQ_FP32);
    else if (da == EQ_BF16 && db == EQ_BF16) blocks_of(p, begin, end, EQ_BF16, EQ_BF16);
    else if (da == EQ_FP64 && db == EQ_FP64) blocks_of(p, begin, end, EQ_FP64, EQ_FP64);
    else blocks_of(p, begin, end, da, db);
}

/* A row's segments: the union of the column blocks' cuts col_start [g_cols + 1] and, shards > 0,
 * the cuts of shards of width n / shards; seg_start [g_cols + shards + 1], seg_col and seg_shard
 * [g_cols + shards]. Returns the segments. */
static int row_segments(const int64_t *col_start, int g_cols, int64_t n, int shards, int64_t *seg_start, int *seg_col,
                        int *seg_shard)
{
    const int64_t width = shards > 0 ? n / shards : n;
    int c = 0, s = 0, k = 0;
    for (int64_t j = 0; j < n; k++) {
        while (col_start[c + 1] <= j) c++;
        while ((s + 1) * width <= j) s++;
        seg_start[k] = j, seg_col[k] = c, seg_shard[k] = s;
        j = col_start[c + 1] < (s + 1) * width ? col_start[c + 1] : (s + 1) * width;
    }
    seg_start[k] = n;
    return k;
}

eq_status eq_structure_of(const eq_tensor *ref, const eq_tensor *test, eq_dtype run_dtype, int shard_dim, int shards,
                          eq_structure *out)
{
    eq_status st = EQ_OK;
    memset(out, 0, sizeof *out);
    out->unit_roundoff = eq_dtype_unit_roundoff(run_dtype);
    out->floor = EQ_STRUCTURE_FLOOR_U * eq_dtype_unit_roundoff(run_dtype == EQ_FP64 ? EQ_FP64 : EQ_FP32);
    const int64_t numel = eq_tensor_numel(ref);
    if (numel < EQ_STRUCTURE_MIN_ELEMENTS) return EQ_OK;
    const int64_t n = ref->ndim >= 2 ? ref->shape[ref->ndim - 1] : 1, rows = numel / n;
    const int g_rows = rows < G ? (int)rows : G, g_cols = n < G ? (int)n : G;
    const int shift = ref->ndim >= 2 && n >= EQ_STRUCTURE_MIN_BLOCKS && rows >= G;
    int64_t row_start[G + 1], col_start[G + 1];
    for (int g = 0; g <= g_rows; g++) row_start[g] = (g * rows + g_rows - 1) / g_rows; /* first row of block g */
    for (int c = 0; c <= g_cols; c++) col_start[c] = (c * n + g_cols - 1) / g_cols;
    structure_pass p = {ref, test, rows, n, g_rows, g_cols, row_start, 0, NULL, NULL, NULL, 0, 0, 1, 0,
                        NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    /* shards along shard_dim: the last dim's by column, an outer one's by row */
    if (shard_dim >= 0 && shard_dim < ref->ndim && shards >= 2 && shards <= MAX_SHARDS &&
        ref->shape[shard_dim] % shards == 0) {
        p.shards = shards;
        p.extent = ref->shape[shard_dim];
        for (int k = shard_dim + 1; k < ref->ndim; k++) p.stride *= ref->shape[k];
        p.shard_by_col = shard_dim == ref->ndim - 1 && ref->ndim >= 2;
        out->shard_dim = shard_dim;
    }
    const size_t per_block = (size_t)(p.shards > 0 ? p.shards : 1), cuts = (size_t)g_cols + (size_t)p.shards;
    int64_t *seg_start = malloc((cuts + 1) * sizeof *seg_start);
    int *seg_col = malloc(cuts * sizeof *seg_col), *seg_shard = malloc(cuts * sizeof *seg_shard);
    p.blocks = calloc((size_t)g_rows, sizeof *p.blocks);
    p.err = calloc((size_t)g_rows * per_block, sizeof *p.err);
    p.energy = calloc((size_t)g_rows * per_block, sizeof *p.energy);
    p.differ = calloc((size_t)g_rows * per_block, sizeof *p.differ);
    p.count = calloc((size_t)g_rows * per_block, sizeof *p.count);
    if (shift) {
        p.cols = calloc((size_t)G * (size_t)n, sizeof *p.cols);
        p.col_count = calloc((size_t)G * (size_t)n, sizeof *p.col_count);
    }
    if (p.blocks == NULL || p.err == NULL || p.energy == NULL || p.differ == NULL || p.count == NULL ||
        (shift && (p.cols == NULL || p.col_count == NULL)) || seg_start == NULL || seg_col == NULL ||
        seg_shard == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the structure tests (%lld columns)", (long long)n);
        goto cleanup;
    }
    p.segments = row_segments(col_start, g_cols, n, p.shard_by_col ? p.shards : 0, seg_start, seg_col, seg_shard);
    p.seg_start = seg_start, p.seg_col = seg_col, p.seg_shard = seg_shard;
    eq_parallel_for(g_rows, 1, pass_blocks, &p);
    /* the blocks' sums, in block order */
    double num_r[G] = {0}, den_r[G] = {0}, num_c[G] = {0}, den_c[G] = {0}, ref_sum2 = 0;
    double err[MAX_SHARDS] = {0}, energy[MAX_SHARDS] = {0};
    int64_t differ[MAX_SHARDS] = {0}, count[MAX_SHARDS] = {0}, finite = 0;
    for (int g = 0; g < g_rows; g++) {
        num_r[g] = p.blocks[g].num_r, den_r[g] = p.blocks[g].den_r;
        ref_sum2 += den_r[g];
        finite += p.blocks[g].finite;
        for (int c = 0; c < g_cols; c++) num_c[c] += p.blocks[g].num_c[c], den_c[c] += p.blocks[g].den_c[c];
        for (int s = 0; s < p.shards; s++) {
            err[s] += p.err[g * p.shards + s], energy[s] += p.energy[g * p.shards + s];
            differ[s] += p.differ[g * p.shards + s], count[s] += p.count[g * p.shards + s];
        }
    }
    if (finite >= EQ_STRUCTURE_MIN_ELEMENTS) {
        factor_test(num_r, den_r, g_rows, num_c, den_c, ref->ndim >= 2 ? g_cols : 0, out);
        if (shift) shift_test(p.cols, p.col_count, n, ref_sum2 / (double)finite, out);
        if (p.shards > 0) shard_test(err, energy, differ, count, p.shards, out);
    }
    out->applies = out->factor_tested || out->shift_tested || out->shard_tested;
cleanup:
    free(p.blocks), free(p.err), free(p.energy), free(p.differ), free(p.count), free(p.cols),
        free(p.col_count), free(seg_start), free(seg_col), free(seg_shard);
    return st;
}

int eq_structure_flagged(const eq_structure *s)
{
    return s->applies && (s->factor_flagged || s->shift_flagged || s->shard_flagged);
}

double eq_structure_margin(const eq_structure *s)
{
    double m = 0;
    if (s->factor_tested) m = fmax(m, s->factor_t / s->factor_limit);
    if (s->shift_tested) m = fmax(m, s->shift_t / s->shift_limit);
    if (s->shard_tested) m = fmax(m, shard_margin(s));
    return m;
}

const char *eq_structure_reading(const eq_structure *s, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!eq_structure_flagged(s)) return buf;
    /* the strongest first: each statistic over its own limit */
    double factor = s->factor_flagged ? s->factor_t / s->factor_limit : 0,
           shift = s->shift_flagged ? s->shift_t / s->shift_limit : 0, shard = s->shard_flagged ? INFINITY : 0;
    if (s->shard_flagged && isfinite(s->shard_ratio)) shard = s->shard_ratio / EQ_SHARD_RATIO;
    if (shard >= factor && shard >= shift)
        snprintf(buf, len, "tp rank %d's shard off: rel %.2g, x%.3g the other shards' error energy (rounding gives "
                 "every shard about the same)", s->shard_worst, s->shard_rel, s->shard_ratio);
    else if (factor >= shift)
        snprintf(buf, len, "systematic factor %.6g, rounding allows 1 +- %.2g (t %.3g > %.3g)", s->factor,
                 s->factor_spread * s->factor_limit, s->factor_t, s->factor_limit);
    else
        snprintf(buf, len, "a shift repeated on every row, %.2g of rms(ref) (t %.3g > %.3g): not rounding",
                 s->shift_rel, s->shift_t, s->shift_limit);
    return buf;
}

eq_status eq_structure_apply(eq_comparison *cmp, const eq_capture *ref, const eq_capture *test)
{
    for (int i = 0; i < cmp->count; i++) {
        eq_tensor_result *res = &cmp->results[i];
        if (res->role != EQ_ROLE_ACTIVATION && res->role != EQ_ROLE_GRAD && res->role != EQ_ROLE_LOSS) continue;
        const eq_capture_entry *a = eq_capture_find(ref, res->path), *b = eq_capture_find(test, res->path);
        if (a == NULL || b == NULL) continue;
        eq_status st = eq_structure_of(&a->tensor, &b->tensor, res->m.dtype, b->assembled_tp_dim, test->meta.tp,
                                       &res->structure);
        if (st != EQ_OK) return st;
    }
    return EQ_OK;
}
