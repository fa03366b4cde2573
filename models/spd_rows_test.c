/* The row loops of models/spd_rows.h against the plain scalar loops they replace, bit for bit:
 * each output element one fp64 sum over k (or t) in ascending order. The inputs span many
 * binades with both signs, so a sum taken in another order, or with a fused multiply-add, lands
 * on other bits. Widths of 1 to 13 reach the vector loop's tail; keep masks and the token scale
 * are taken as the ops use them; a large shape is split over threads (the variant with
 * EQUIV_THREADS=1 runs the same checks on one). */
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "models/spd_rows.h"

/* Values of mixed sign and size: a 64-bit LCG's high bits as a mantissa, times 2^(-20..20). */
static void fill(double *x, int64_t n, uint64_t *state)
{
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        const double m = (double)(*state >> 11) / 9007199254740992.0 - 0.5;
        x[i] = m * (double)(1 << ((*state >> 3) % 21)) / (double)(1 << ((*state >> 8) % 21));
    }
}

static void check_mm(int64_t T, int64_t K, int64_t N, int with_keep, uint64_t *state)
{
    const int64_t lda = K + 2, ldb = N + 1; /* strided rows, as the ops' component slices read them */
    double *a = malloc((size_t)(T * lda) * sizeof *a), *B = malloc((size_t)(K * ldb) * sizeof *B);
    double *got = malloc((size_t)(T * N) * sizeof *got), *want = malloc((size_t)(T * N) * sizeof *want);
    unsigned char *keep = malloc((size_t)T);
    fill(a, T * lda, state), fill(B, K * ldb, state);
    for (int64_t t = 0; t < T; t++) keep[t] = (unsigned char)(t % 3 != 1);
    for (int sel = 0; sel <= with_keep; sel++) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                const int in = !with_keep || (keep[t] != 0) == (sel != 0);
                for (int64_t k = 0; in && k < K; k++) acc += a[t * lda + k] * B[k * ldb + j];
                want[t * N + j] = acc;
            }
        spd_rows_mm(T, K, N, a, lda, B, ldb, with_keep ? keep : NULL, sel, got);
        EQ_EXPECT(memcmp(got, want, (size_t)(T * N) * sizeof *got) == 0, "rows_mm T %lld K %lld N %lld keep %d/%d",
                  (long long)T, (long long)K, (long long)N, with_keep, sel);
    }
    free(a), free(B), free(got), free(want), free(keep);
}

static void check_outer(int64_t T, int64_t I, int64_t N, int with_scale, int with_keep, uint64_t *state)
{
    const int64_t ldx = I + 3, ldy = N + 2;
    double *x = malloc((size_t)(T * ldx) * sizeof *x), *dy = malloc((size_t)(T * ldy) * sizeof *dy);
    double *s = malloc((size_t)T * sizeof *s), *got = malloc((size_t)(I * N) * sizeof *got);
    double *want = malloc((size_t)(I * N) * sizeof *want);
    unsigned char *keep = malloc((size_t)T);
    fill(x, T * ldx, state), fill(dy, T * ldy, state), fill(s, T, state);
    for (int64_t t = 0; t < T; t++) keep[t] = (unsigned char)(t % 2);
    for (int64_t i = 0; i < I; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t t = 0; t < T; t++)
                if (!with_keep || keep[t]) acc += (with_scale ? x[t * ldx + i] * s[t] : x[t * ldx + i]) * dy[t * ldy + j];
            want[i * N + j] = acc;
        }
    spd_rows_outer(T, I, N, x, ldx, with_scale ? s : NULL, with_keep ? keep : NULL, dy, ldy, got);
    EQ_EXPECT(memcmp(got, want, (size_t)(I * N) * sizeof *got) == 0, "rows_outer T %lld I %lld N %lld scale %d keep %d",
              (long long)T, (long long)I, (long long)N, with_scale, with_keep);
    free(x), free(dy), free(s), free(got), free(want), free(keep);
}

int main(void)
{
    uint64_t state = 12345;
    static const int64_t widths[] = {1, 3, 4, 5, 8, 13};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        check_mm(7, 11, widths[w], 0, &state);
        check_mm(9, 5, widths[w], 1, &state);
        check_outer(17, 6, widths[w], 0, 0, &state);
        check_outer(17, 6, widths[w], 1, 1, &state);
    }
    /* Shapes large enough to be split over threads (ranges of >= 65536 multiply-adds). */
    check_mm(3000, 37, 29, 1, &state);
    check_outer(3000, 40, 29, 1, 1, &state);
    return eq_test_finish("spd_rows_test");
}
