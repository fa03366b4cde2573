/* The TF32 backend (models/backend_tf32.c): rounding to TF32 against values worked out by hand
 * (ties to even, the carry into the exponent, Inf, NaN, subnormals), and its fp32 GEMM against the
 * CPU backend's GEMM over inputs rounded here: bit for bit, and not equal to the plain fp32 GEMM.
 * bf16 and fp64 GEMMs are the CPU backend's, bit for bit. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "models/backend.h"

static void expect_round(float in, float want, const char *what)
{
    float got = eq_tf32_round(in);
    EQ_EXPECT(memcmp(&got, &want, sizeof got) == 0, "%s: tf32(%a) = %a, want %a", what, (double)in, (double)got,
              (double)want);
}

static size_t bytes_differ(const eq_tensor *a, const eq_tensor *b)
{
    size_t n = 0, elem = eq_dtype_size(a->dtype);
    for (int64_t i = 0; i < eq_tensor_numel(a); i++)
        n += memcmp((const char *)a->data + i * elem, (const char *)b->data + i * elem, elem) != 0;
    return n;
}

static void check_gemm(eq_dtype dt, int64_t M, int64_t N, int64_t K)
{
    eq_tensor a, b, a_tf32, b_tf32, got, want, plain;
    eq_tensor_init_2d(&a, dt, M, K), eq_tensor_init_2d(&b, dt, N, K);
    eq_tensor_init_2d(&a_tf32, dt, M, K), eq_tensor_init_2d(&b_tf32, dt, N, K);
    eq_tensor_init_2d(&got, dt, M, N), eq_tensor_init_2d(&want, dt, M, N), eq_tensor_init_2d(&plain, dt, M, N);
    eq_rng_fill_normal(&a, 5, "a", 1.0);
    eq_rng_fill_normal(&b, 5, "b", 1.0);
    memcpy(a_tf32.data, a.data, eq_tensor_bytes(&a));
    memcpy(b_tf32.data, b.data, eq_tensor_bytes(&b));
    if (dt == EQ_FP32) {
        for (int64_t i = 0; i < M * K; i++) ((float *)a_tf32.data)[i] = eq_tf32_round(((float *)a.data)[i]);
        for (int64_t i = 0; i < N * K; i++) ((float *)b_tf32.data)[i] = eq_tf32_round(((float *)b.data)[i]);
    }
    EQ_EXPECT_OK(eq_backend_cpu_tf32.gemm_nt(dt, M, N, K, a.data, K, b.data, K, got.data, N));
    EQ_EXPECT_OK(eq_backend_cpu.gemm_nt(dt, M, N, K, a_tf32.data, K, b_tf32.data, K, want.data, N));
    EQ_EXPECT_OK(eq_backend_cpu.gemm_nt(dt, M, N, K, a.data, K, b.data, K, plain.data, N));
    const size_t vs_rounded = bytes_differ(&got, &want), vs_plain = bytes_differ(&got, &plain);
    printf("%s [%lld x %lld x %lld]: TF32 GEMM vs CPU GEMM of rounded inputs: %zu differ; vs plain: %zu of %lld\n",
           eq_dtype_name(dt), (long long)M, (long long)N, (long long)K, vs_rounded, vs_plain, (long long)(M * N));
    EQ_EXPECT(vs_rounded == 0, "%s: %zu outputs differ from the GEMM of TF32-rounded inputs", eq_dtype_name(dt),
              vs_rounded);
    if (dt == EQ_FP32) EQ_EXPECT(vs_plain > 0, "fp32: the TF32 GEMM equals the plain fp32 one (no rounding?)");
    else EQ_EXPECT(vs_plain == 0, "%s: %zu outputs differ from the CPU backend's", eq_dtype_name(dt), vs_plain);
    eq_tensor_free(&a), eq_tensor_free(&b), eq_tensor_free(&a_tf32), eq_tensor_free(&b_tf32);
    eq_tensor_free(&got), eq_tensor_free(&want), eq_tensor_free(&plain);
}

int main(void)
{
    /* TF32 keeps 10 of fp32's 23 mantissa bits: the step at 1 is 2^-10. */
    expect_round(1.0f, 1.0f, "exact");
    expect_round(-1.5f, -1.5f, "exact, negative");
    expect_round(1.0f + 0x1p-11f, 1.0f, "a tie rounds to the even neighbour (down)");
    expect_round(1.0f + 0x1p-10f + 0x1p-11f, 1.0f + 0x1p-9f, "a tie rounds to the even neighbour (up)");
    expect_round(1.0f + 0x1p-11f + 0x1p-23f, 1.0f + 0x1p-10f, "above the tie: up");
    expect_round(1.0f + 0x1p-11f - 0x1p-23f, 1.0f, "below the tie: down");
    expect_round(-(1.0f + 0x1p-11f + 0x1p-23f), -(1.0f + 0x1p-10f), "negative, above the tie");
    expect_round(2.0f - 0x1p-23f, 2.0f, "the carry into the exponent");
    expect_round(FLT_MAX, INFINITY, "past TF32's largest: Inf");
    expect_round(INFINITY, INFINITY, "Inf");
    expect_round(0x1p-149f, 0.0f, "the smallest subnormal, below half of TF32's: 0");
    expect_round(0x1p-136f + 0x1p-149f, 0x1p-136f, "TF32's smallest subnormal");
    float nan = eq_tf32_round(NAN);
    EQ_EXPECT(isnan(nan), "NaN stays NaN");

    const eq_dtype dtypes[3] = {EQ_FP32, EQ_BF16, EQ_FP64};
    for (int d = 0; d < 3; d++) {
        check_gemm(dtypes[d], 37, 29, 300);
        check_gemm(dtypes[d], 256, 128, 1024);
    }
    return eq_test_finish("backend_tf32_test");
}
