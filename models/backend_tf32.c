/* The CPU backend with fp32 GEMMs in TF32 (models/backend.h): what an NVIDIA GPU computes for an
 * fp32 GEMM where TF32 is allowed (torch.backends.cuda.matmul.allow_tf32, TransformerEngine's
 * default on Ampere and later): each input rounded to TF32's 10-bit mantissa (8-bit exponent, as
 * fp32), products exact, the sum in fp32. The rounding here is to nearest, ties to even; the
 * accumulation order is the CPU kernel's. The backend itself (eq_backend_cpu_tf32) is defined in
 * backend_cpu.c beside the CPU backend whose ops it shares. bf16 and fp64 GEMMs and every other op are the CPU
 * backend's, unchanged. Used for --numerics megatron_tf32 (harness/driver/runner.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/backend.h"

float eq_tf32_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) { /* Inf and NaN pass unchanged */
        u += 0xfffu + ((u >> 13) & 1u);     /* half of the 13 dropped bits, ties to even */
        u &= 0xffffe000u;                   /* a carry into the exponent is the right rounding, to Inf too */
    }
    memcpy(&x, &u, sizeof x);
    return x;
}

/* rows x K of src (row stride ld) rounded into a packed [rows, K] copy. */
static float *rounded_copy(int64_t rows, int64_t K, const float *src, int64_t ld)
{
    float *dst = malloc((size_t)(rows * K) * sizeof(float));
    if (dst == NULL) return NULL;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t k = 0; k < K; k++) dst[i * K + k] = eq_tf32_round(src[i * ld + k]);
    return dst;
}

eq_status eq_tf32_gemm_nt(eq_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda, const void *B,
                              int64_t ldb, void *C, int64_t ldc)
{
    if (dt != EQ_FP32) return eq_backend_cpu.gemm_nt(dt, M, N, K, A, lda, B, ldb, C, ldc);
    if (M < 1 || N < 1 || K < 1 || lda < K || ldb < K)
        return eq_backend_cpu.gemm_nt(dt, M, N, K, A, lda, B, ldb, C, ldc); /* its own checks and message */
    float *a = rounded_copy(M, K, A, lda), *b = rounded_copy(N, K, B, ldb); /* [M, K], [N, K] */
    eq_status st = a == NULL || b == NULL
                       ? EQ_FAIL(EQ_ERR_NOMEM, "TF32 GEMM [%lld x %lld x %lld]: no memory for the rounded inputs",
                                 (long long)M, (long long)N, (long long)K)
                       : eq_backend_cpu.gemm_nt(dt, M, N, K, a, K, b, K, C, ldc);
    free(a);
    free(b);
    return st;
}

const char *eq_tf32_describe(char *buf, size_t len)
{
    char cpu[256];
    snprintf(buf, len, "%s; fp32 GEMM inputs rounded to TF32", eq_backend_cpu.describe(cpu, sizeof cpu));
    return buf;
}
