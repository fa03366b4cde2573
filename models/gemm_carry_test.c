/* The carried GEMM (models/gemm_carry.h) against a plain triple loop written here: every element
 * summed k = 0..K-1 in order into one fp32 (fp64) accumulator, one rounding per multiply and add
 * (the build has -ffp-contract=off), rounded to the dtype once. K split into 1, 2, 3 and 4
 * consecutive blocks, carried from block to block, must give those bits exactly, in every dtype
 * and GEMM form, with K not a multiple of the kernel's 128-wide tiles and M large enough to be
 * split over threads. */
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "models/gemm_carry.h"

static double get(const eq_tensor *t, int64_t at)
{
    switch (t->dtype) {
    case EQ_BF16: return eq_bf16_to_f32(((const uint16_t *)t->data)[at]);
    case EQ_FP32: return ((const float *)t->data)[at];
    case EQ_FP64: return ((const double *)t->data)[at];
    }
    return 0.0;
}

/* want[M, N] (dtype dt) = op(A) op(B), the plain loop. a and b are stored as the form has them. */
static void plain(eq_gemm_form form, int64_t M, int64_t N, int64_t K, const eq_tensor *a, const eq_tensor *b,
                  eq_tensor *want)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float acc32 = 0.0f;
            double acc64 = 0.0;
            for (int64_t k = 0; k < K; k++) {
                const double x = get(a, form == EQ_GEMM_TN ? k * M + i : i * K + k);
                const double y = get(b, form == EQ_GEMM_NT ? j * K + k : k * N + j);
                if (a->dtype == EQ_FP64) acc64 = acc64 + x * y;
                else acc32 = acc32 + (float)x * (float)y;
            }
            const int64_t at = i * N + j;
            if (a->dtype == EQ_BF16) ((uint16_t *)want->data)[at] = eq_f32_to_bf16(acc32);
            else if (a->dtype == EQ_FP32) ((float *)want->data)[at] = acc32;
            else ((double *)want->data)[at] = acc64;
        }
}

/* Elements of op(A) op(B) that differ from the plain loop when K is carried over `parts` blocks. */
static int64_t carried_differs(eq_dtype dt, eq_gemm_form form, int64_t M, int64_t N, int64_t K, int parts)
{
    eq_tensor a, b, want, got, acc;
    const int64_t a_rows = form == EQ_GEMM_TN ? K : M, a_cols = form == EQ_GEMM_TN ? M : K;
    const int64_t b_rows = form == EQ_GEMM_NT ? N : K, b_cols = form == EQ_GEMM_NT ? K : N;
    EQ_EXPECT_OK(eq_tensor_init_2d(&a, dt, a_rows, a_cols));
    EQ_EXPECT_OK(eq_tensor_init_2d(&b, dt, b_rows, b_cols));
    EQ_EXPECT_OK(eq_tensor_init_2d(&want, dt, M, N));
    EQ_EXPECT_OK(eq_tensor_init_2d(&got, dt, M, N));
    EQ_EXPECT_OK(eq_tensor_init_2d(&acc, dt == EQ_FP64 ? EQ_FP64 : EQ_FP32, M, N)); /* zero */
    eq_rng_fill_normal(&a, 5, "a", 1.0);
    eq_rng_fill_normal(&b, 5, "b", 0.1);
    plain(form, M, N, K, &a, &b, &want);
    const size_t elem = eq_dtype_size(dt);
    for (int p = 0; p < parts; p++) { /* k in [K p / parts, K (p+1) / parts): uneven if parts does not divide K */
        const int64_t k0 = K * p / parts, k1 = K * (p + 1) / parts;
        const char *a_p = (const char *)a.data + (size_t)(form == EQ_GEMM_TN ? k0 * M : k0) * elem;
        const char *b_p = (const char *)b.data + (size_t)(form == EQ_GEMM_NT ? k0 : k0 * N) * elem;
        EQ_EXPECT_OK(eq_gemm_carry(dt, form, M, N, k1 - k0, a_p, a_cols, b_p, b_cols, acc.data));
    }
    eq_gemm_carry_round(dt, M, N, acc.data, got.data, N);
    int64_t differ = 0;
    for (int64_t e = 0; e < M * N; e++)
        differ += memcmp((char *)want.data + (size_t)e * elem, (char *)got.data + (size_t)e * elem, elem) != 0;
    eq_tensor_free(&a), eq_tensor_free(&b), eq_tensor_free(&want), eq_tensor_free(&got), eq_tensor_free(&acc);
    return differ;
}

int main(void)
{
    static const struct {
        int64_t M, N, K;
    } shapes[] = {{3, 5, 7}, {17, 33, 300}, {300, 40, 515}};
    const eq_gemm_form forms[] = {EQ_GEMM_NT, EQ_GEMM_NN, EQ_GEMM_TN};
    for (int dt = 0; dt < EQ_DTYPE_COUNT; dt++)
        for (int f = 0; f < 3; f++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int parts = 1; parts <= 4; parts++) {
                    int64_t d = carried_differs((eq_dtype)dt, forms[f], shapes[s].M, shapes[s].N, shapes[s].K, parts);
                    EQ_EXPECT(d == 0, "%s form %d [%lld x %lld x %lld] in %d parts: %lld elements differ from the loop",
                              eq_dtype_name((eq_dtype)dt), f, (long long)shapes[s].M, (long long)shapes[s].N,
                              (long long)shapes[s].K, parts, (long long)d);
                }
    return eq_test_finish("gemm_carry_test");
}
