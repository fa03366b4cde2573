/* The bound's products from fp32 GEMMs are upper bounds on the exact |y|, S and Q, and close to
 * them (rounding_bound_products.h):
 *   - rows built so that fp32 sums lose: 2^24 then 4095 ones, where every +1 that meets 2^24 rounds
 *     away (ties to even), so a plain fp32 S falls short of the exact 2^24 + 4095 by thousands;
 *   - the same with signs, so y and the partials cancel;
 *   - random N(0,1) rows, where the inflation is ~1e-4 of S;
 * in bf16 and fp32, for T = 1 -> 4 and 2 -> 4; the exact values summed here in long double from
 * the operands (products of two bf16 or fp32 values are exact in it, and these sums of integers or
 * of 4096 terms lose at most ~1e-16 of S). Also every output row is handed over exactly once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/rounding_bound_products.h"
#include "harness/base/testing.h"

enum { M = 515, N = 2, K = 4096 }; /* 515 rows: three blocks of 256, the last one short */

typedef struct {
    const eq_tensor *a, *b;
    int T_ref, T_test;
    int *seen;     /* [M]: times row r was handed over */
    double worst;  /* largest (computed - exact) / S: how loose */
    int failures;
} check_ctx;

/* Exact y, S and the T-partition Q of element (r, c). */
static void exact_at(const check_ctx *x, int64_t r, int64_t c, int T, long double *y, long double *S, long double *Q)
{
    long double part[8] = {0};
    *y = 0, *S = 0, *Q = 0;
    for (int64_t k = 0; k < K; k++) {
        long double p = (long double)eq_tensor_get(x->a, r * K + k) * (long double)eq_tensor_get(x->b, c * K + k);
        *y += p, *S += fabsl(p), part[k / (K / T)] += p;
    }
    for (int t = 0; t < T; t++) *Q += fabsl(part[t]);
    if (T == 1) *Q = fabsl(*y);
}

static void check_rows(void *ctx, int64_t block, const eq_bound_rows *rows)
{
    check_ctx *x = ctx;
    for (int64_t i = 0; i < rows->rows; i++) {
        const int64_t r = rows->row0 + i;
        x->seen[r]++;
        for (int64_t c = 0; c < N; c++) {
            const int64_t e = i * N + c;
            long double y, S, Q_ref, Q_test;
            exact_at(x, r, c, x->T_ref, &y, &S, &Q_ref);
            exact_at(x, r, c, x->T_test, &y, &S, &Q_test);
            const long double lo = 1.0L - 0x1p-50L; /* the exact sums' own rounding in long double */
            int ok = rows->S[e] >= S * lo && rows->abs_y[e] >= fabsl(y) * lo && rows->Q_ref[e] >= Q_ref * lo &&
                     rows->Q_test[e] >= Q_test * lo;
            if (!ok && x->failures++ < 3)
                fprintf(stderr, "row %lld col %lld: computed S %.17g |y| %.17g Q %.17g %.17g under exact %.17Lg %.17Lg %.17Lg %.17Lg\n",
                        (long long)r, (long long)c, rows->S[e], rows->abs_y[e], rows->Q_ref[e], rows->Q_test[e], S,
                        fabsl(y), Q_ref, Q_test);
            double loose = fmax(fmax((double)((rows->S[e] - S) / S), (double)((rows->abs_y[e] - fabsl(y)) / S)),
                                fmax((double)((rows->Q_ref[e] - Q_ref) / S), (double)((rows->Q_test[e] - Q_test) / S)));
            if (loose > x->worst) x->worst = loose;
        }
    }
}

/* a: rows 0 and 1 adversarial (2^24 then ones; row 1 with alternating signs), the rest N(0,1);
 * b: row 0 all ones, rows 1.. N(0, 1/K). */
static void operands(eq_dtype dt, eq_tensor *a, eq_tensor *b)
{
    EQ_EXPECT_OK(eq_tensor_init_2d(a, dt, M, K));
    EQ_EXPECT_OK(eq_tensor_init_2d(b, dt, N, K));
    eq_rng_fill_normal(a, 5, "a", 1.0);
    eq_rng_fill_normal(b, 5, "b", 1.0 / sqrt((double)K));
    for (int64_t k = 0; k < K; k++) {
        eq_tensor_set(a, k, k == 0 ? 0x1p24 : 1.0);
        eq_tensor_set(a, K + k, k == 0 ? 0x1p24 : (k % 2 ? 1.0 : -1.0));
        eq_tensor_set(b, k, 1.0);
    }
}

int main(void)
{
    const eq_dtype dtypes[] = {EQ_BF16, EQ_FP32};
    const int splits[][2] = {{1, 4}, {2, 4}, {1, 1}};
    for (size_t d = 0; d < 2; d++)
        for (size_t s = 0; s < 3; s++) {
            eq_tensor a = {0}, b = {0};
            int seen[M] = {0};
            operands(dtypes[d], &a, &b);
            check_ctx x = {&a, &b, splits[s][0], splits[s][1], seen, 0.0, 0};
            EQ_EXPECT_OK(eq_bound_products(&a, &b, M, N, K, x.T_ref, x.T_test, check_rows, &x));
            const char *dt = eq_dtype_name(dtypes[d]);
            EQ_EXPECT(x.failures == 0, "%s T %d -> %d: %d elements under the exact value", dt, x.T_ref, x.T_test,
                      x.failures);
            /* looser than the exact values by at most gamma_K(2^-24) S ~ 2.4e-4 S (rounding_bound_products.c) */
            EQ_EXPECT(x.worst <= 2.5e-4, "%s T %d -> %d: %.3g of S above the exact values", dt, x.T_ref, x.T_test,
                      x.worst);
            int once = 1;
            for (int r = 0; r < M; r++) once &= seen[r] == 1;
            EQ_EXPECT(once, "%s: a row handed over other than once", dt);
            eq_tensor_free(&a);
            eq_tensor_free(&b);
        }
    return eq_test_finish("rounding_bound_products_test");
}
