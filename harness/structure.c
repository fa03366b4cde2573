/* Structure: what rounding cannot do (structure.h). */
#include "harness/structure.h"

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

static eq_status shift_test(const eq_tensor *ref, const eq_tensor *test, int64_t rows, int64_t n, double ref_ms,
                            eq_structure *s)
{
    enum { G = EQ_STRUCTURE_BLOCKS, HALF = G / 2 };
    double *cols = calloc((size_t)(G * n), sizeof *cols), *count = calloc((size_t)(G * n), sizeof *count),
           *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    if (cols == NULL || count == NULL || a == NULL || b == NULL) {
        free(cols), free(count), free(a), free(b);
        return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the shift test (%lld columns)", (long long)n);
    }
    for (int64_t r = 0; r < rows; r++) {
        int64_t g = r * G / rows;
        eq_tensor_widen(ref, r * n, n, a);
        eq_tensor_widen(test, r * n, n, b);
        double row_sum = 0;
        int64_t row_n = 0;
        for (int64_t j = 0; j < n; j++) { /* b becomes d, NaN where the pair is left out */
            b[j] = isfinite(a[j]) && isfinite(b[j]) ? b[j] - a[j] : NAN;
            if (!isnan(b[j])) row_sum += b[j], row_n++;
        }
        double row_mean = row_n > 0 ? row_sum / row_n : 0.0;
        for (int64_t j = 0; j < n; j++)
            if (!isnan(b[j])) cols[g * n + j] += b[j] - row_mean, count[g * n + j] += 1;
    }
    free(a), free(b);
    double shift_ms = 0;
    for (int64_t j = 0; j < n; j++) {
        double all = 0, all_n = 0;
        for (int g = 0; g < G; g++) {
            all += cols[g * n + j], all_n += count[g * n + j];
            if (count[g * n + j] > 0) cols[g * n + j] /= count[g * n + j];
        }
        if (all_n > 0) shift_ms += (all / all_n) * (all / all_n);
    }
    free(count);
    static const int even[HALF] = {0, 2, 4, 6, 8, 10, 12, 14}, odd[HALF] = {1, 3, 5, 7, 9, 11, 13, 15},
                     first[HALF] = {0, 1, 2, 3, 4, 5, 6, 7}, second[HALF] = {8, 9, 10, 11, 12, 13, 14, 15};
    double t = projection_t(cols, n, even, odd, HALF);
    t = fmin(t, projection_t(cols, n, odd, even, HALF));
    t = fmin(t, projection_t(cols, n, first, second, HALF));
    t = fmin(t, projection_t(cols, n, second, first, HALF));
    free(cols);
    s->shift_tested = 1;
    s->shift_t = t;
    s->shift_rel = ref_ms > 0 ? sqrt(shift_ms / n / ref_ms) : 0.0;
    s->shift_limit = limit_of(HALF - 1, 0);
    s->shift_flagged = t > s->shift_limit && s->shift_rel > s->floor;
    return EQ_OK;
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

eq_status eq_structure_of(const eq_tensor *ref, const eq_tensor *test, eq_dtype run_dtype, int shard_dim, int shards,
                          eq_structure *out)
{
    enum { G = EQ_STRUCTURE_BLOCKS, MAX_SHARDS = 4096 };
    memset(out, 0, sizeof *out);
    out->unit_roundoff = eq_dtype_unit_roundoff(run_dtype);
    out->floor = EQ_STRUCTURE_FLOOR_U * eq_dtype_unit_roundoff(run_dtype == EQ_FP64 ? EQ_FP64 : EQ_FP32);
    const int64_t numel = eq_tensor_numel(ref);
    if (numel < EQ_STRUCTURE_MIN_ELEMENTS) return EQ_OK;
    const int64_t n = ref->ndim >= 2 ? ref->shape[ref->ndim - 1] : 1, rows = numel / n;
    const int g_rows = rows < G ? (int)rows : G, g_cols = n < G ? (int)n : G;
    double num_r[G] = {0}, den_r[G] = {0}, num_c[G] = {0}, den_c[G] = {0};

    /* shards along shard_dim: the index there is (i / stride) % extent */
    int64_t stride = 1, extent = 0;
    if (shard_dim >= 0 && shard_dim < ref->ndim && shards >= 2 && shards <= MAX_SHARDS &&
        ref->shape[shard_dim] % shards == 0) {
        extent = ref->shape[shard_dim];
        for (int k = shard_dim + 1; k < ref->ndim; k++) stride *= ref->shape[k];
        out->shard_dim = shard_dim;
    } else shards = 0;
    double *err = calloc((size_t)(shards + 1), sizeof *err), *energy = calloc((size_t)(shards + 1), sizeof *energy);
    int64_t *differ = calloc((size_t)(shards + 1), sizeof *differ), *count = calloc((size_t)(shards + 1), sizeof *count);
    if (err == NULL || energy == NULL || differ == NULL || count == NULL) {
        free(err), free(energy), free(differ), free(count);
        return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the structure tests");
    }
    double ref_sum2 = 0;
    int64_t finite = 0;
    enum { CHUNK = 2048 };
    double a[CHUNK], b[CHUNK];
    for (int64_t i0 = 0; i0 < numel; i0 += CHUNK) {
        const int64_t m = numel - i0 < CHUNK ? numel - i0 : CHUNK;
        eq_tensor_widen(ref, i0, m, a);
        eq_tensor_widen(test, i0, m, b);
        int64_t row = i0 / n, col = i0 % n;
        int gr = (int)(row * g_rows / rows);
        for (int64_t k = 0; k < m; k++) {
            const double r = a[k], d = b[k] - a[k];
            if (isfinite(r) && isfinite(b[k])) {
                const int gc = (int)(col * g_cols / n);
                finite++;
                num_r[gr] += d * r, den_r[gr] += r * r;
                num_c[gc] += d * r, den_c[gc] += r * r;
                ref_sum2 += r * r;
                if (shards > 0) {
                    int s = (int)((i0 + k) / stride % extent / (extent / shards));
                    err[s] += d * d, energy[s] += r * r, differ[s] += d != 0, count[s]++;
                }
            }
            if (++col == n) col = 0, row++, gr = (int)(row * g_rows / rows);
        }
    }
    eq_status st = EQ_OK;
    if (finite >= EQ_STRUCTURE_MIN_ELEMENTS) {
        factor_test(num_r, den_r, g_rows, num_c, den_c, ref->ndim >= 2 ? g_cols : 0, out);
        if (ref->ndim >= 2 && n >= EQ_STRUCTURE_MIN_BLOCKS && rows >= G)
            st = shift_test(ref, test, rows, n, ref_sum2 / (double)finite, out);
        if (shards > 0) shard_test(err, energy, differ, count, shards, out);
    }
    free(err), free(energy), free(differ), free(count);
    out->applies = out->factor_tested || out->shift_tested || out->shard_tested;
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
