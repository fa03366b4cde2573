/* The device ops (eq_backend_cuda_ops) against the CPU ops (needs a GPU: exits 77, meson's skip,
 * with "no CUDA device" where there is none).
 *
 *   LayerNorm  bit for bit (output, mean, rstd): the kernel runs the CPU's loops with correctly
 *              rounded + - * / sqrt and nothing fused.
 *   GELU       within the error of the two erf implementations: |d| <= 8 u |x| + 2 u_dt |ref|
 *              (u of the accumulate type: CUDA's erff is within 2 ulp, glibc's within 1; the
 *              output's own rounding to dt may then land one dt ulp apart).
 *   softmax    within (8 + 2 S) u |ref| + 2 u_dt |ref| (each exp within 2 ulp, a sum of S of them);
 *              masked entries exactly 0.
 * The count of bit-identical elements is printed for GELU and softmax: a measurement, to quote.
 * Each comparison is shown to catch a planted difference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "models/backend.h"
#include "reductions/cuda_device.h"
#include "models/ops.h"

static size_t bits_differ(eq_dtype dt, const void *a, const void *b, size_t n)
{
    size_t differ = 0, elem = eq_dtype_size(dt);
    for (size_t i = 0; i < n; i++) differ += memcmp((const char *)a + i * elem, (const char *)b + i * elem, elem) != 0;
    return differ;
}

static double acc_u(eq_dtype dt) { return dt == EQ_FP64 ? ldexp(1, -53) : ldexp(1, -24); }

static void check_layernorm(eq_dtype dt, int64_t rows, int64_t H)
{
    eq_tensor in, gamma, beta, out_cpu, out_gpu;
    double *mean[2] = {calloc((size_t)rows, sizeof(double)), calloc((size_t)rows, sizeof(double))};
    double *rstd[2] = {calloc((size_t)rows, sizeof(double)), calloc((size_t)rows, sizeof(double))};
    eq_tensor_init_2d(&in, dt, rows, H);
    eq_tensor_init_2d(&gamma, dt, 1, H);
    eq_tensor_init_2d(&beta, dt, 1, H);
    eq_tensor_init_2d(&out_cpu, dt, rows, H);
    eq_tensor_init_2d(&out_gpu, dt, rows, H);
    eq_rng_fill_normal(&in, 3, "x", 2.0);
    eq_rng_fill_normal(&gamma, 3, "gamma", 1.0);
    eq_rng_fill_normal(&beta, 3, "beta", 0.1);
    for (int64_t j = 0; j < H; j++) eq_tensor_set(&in, j, eq_tensor_get(&in, j) + 1000); /* a row far from 0 */
    EQ_EXPECT_OK(eq_backend_cpu.ops->layernorm_forward(dt, rows, H, out_cpu.data, mean[0], rstd[0], in.data, gamma.data,
                                                       beta.data));
    EQ_EXPECT_OK(eq_backend_cuda.ops->layernorm_forward(dt, rows, H, out_gpu.data, mean[1], rstd[1], in.data,
                                                        gamma.data, beta.data));
    size_t differ = bits_differ(dt, out_cpu.data, out_gpu.data, (size_t)(rows * H));
    differ += bits_differ(EQ_FP64, mean[0], mean[1], (size_t)rows) + bits_differ(EQ_FP64, rstd[0], rstd[1], (size_t)rows);
    printf("layernorm %s [%lld x %lld]: %zu elements differ from the CPU\n", eq_dtype_name(dt), (long long)rows,
           (long long)H, differ);
    EQ_EXPECT(differ == 0, "layernorm %s [%lld,%lld]: %zu values differ from the CPU", eq_dtype_name(dt),
              (long long)rows, (long long)H, differ);
    /* Planted: one input element changed on the device run only. */
    eq_tensor_set(&in, H + 1, eq_tensor_get(&in, H + 1) * 1.5 + 0.25);
    EQ_EXPECT_OK(eq_backend_cuda.ops->layernorm_forward(dt, rows, H, out_gpu.data, mean[1], rstd[1], in.data,
                                                        gamma.data, beta.data));
    EQ_EXPECT(bits_differ(dt, out_cpu.data, out_gpu.data, (size_t)(rows * H)) > 0, "a planted change went unseen");
    eq_tensor_free(&in), eq_tensor_free(&gamma), eq_tensor_free(&beta), eq_tensor_free(&out_cpu);
    eq_tensor_free(&out_gpu);
    for (int i = 0; i < 2; i++) free(mean[i]), free(rstd[i]);
}

/* Elements of b over the GELU bound around a; *same counts bit-identical ones. */
static int64_t gelu_over(eq_dtype dt, const eq_tensor *x, const eq_tensor *a, const eq_tensor *b, int64_t *same)
{
    int64_t over = 0;
    *same = 0;
    for (int64_t i = 0; i < eq_tensor_numel(a); i++) {
        double ref = eq_tensor_get(a, i), got = eq_tensor_get(b, i);
        double bound = 8 * acc_u(dt) * fabs(eq_tensor_get(x, i)) + 2 * eq_dtype_unit_roundoff(dt) * fabs(ref);
        *same += ref == got;
        over += !(fabs(got - ref) <= bound);
    }
    return over;
}

static void check_gelu(eq_dtype dt, int64_t n)
{
    eq_tensor x, cpu, gpu;
    eq_tensor_init_2d(&x, dt, 1, n);
    eq_tensor_init_2d(&cpu, dt, 1, n);
    eq_tensor_init_2d(&gpu, dt, 1, n);
    eq_rng_fill_normal(&x, 4, "x", 3.0);
    EQ_EXPECT_OK(eq_backend_cpu.ops->gelu_forward(dt, n, cpu.data, x.data));
    EQ_EXPECT_OK(eq_backend_cuda.ops->gelu_forward(dt, n, gpu.data, x.data));
    int64_t same = 0, over = gelu_over(dt, &x, &cpu, &gpu, &same);
    printf("gelu %s: %lld of %lld outputs bit-identical to the CPU, %lld over the bound\n", eq_dtype_name(dt),
           (long long)same, (long long)n, (long long)over);
    EQ_EXPECT(over == 0, "gelu %s: %lld elements over the bound", eq_dtype_name(dt), (long long)over);
    /* Planted: inputs scaled by 1 + 2^-6 on the device run. */
    for (int64_t i = 0; i < n; i++) eq_tensor_set(&x, i, eq_tensor_get(&x, i) * (1 + ldexp(1, -6)));
    EQ_EXPECT_OK(eq_backend_cuda.ops->gelu_forward(dt, n, gpu.data, x.data));
    EQ_EXPECT(gelu_over(dt, &x, &cpu, &gpu, &same) > 0, "gelu %s: a planted change went unseen", eq_dtype_name(dt));
    eq_tensor_free(&x), eq_tensor_free(&cpu), eq_tensor_free(&gpu);
}

static int64_t softmax_over(eq_dtype dt, int64_t S, const eq_tensor *a, const eq_tensor *b, int64_t *same)
{
    int64_t over = 0;
    *same = 0;
    for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < S; j++) {
            double ref = eq_tensor_get(a, i * S + j), got = eq_tensor_get(b, i * S + j);
            double bound = (8 + 2 * (double)S) * acc_u(dt) * fabs(ref) + 2 * eq_dtype_unit_roundoff(dt) * fabs(ref);
            *same += ref == got;
            if (j > i) over += got != 0.0;
            else over += !(fabs(got - ref) <= bound);
        }
    return over;
}

static void check_softmax(eq_dtype dt, int64_t S, int64_t D)
{
    eq_tensor scores, cpu, gpu;
    eq_tensor_init_2d(&scores, dt, S, S);
    eq_tensor_init_2d(&cpu, dt, S, S);
    eq_tensor_init_2d(&gpu, dt, S, S);
    eq_rng_fill_normal(&scores, 6, "scores", 8.0);
    EQ_EXPECT_OK(eq_backend_cpu.ops->causal_softmax(dt, S, D, scores.data, cpu.data));
    EQ_EXPECT_OK(eq_backend_cuda.ops->causal_softmax(dt, S, D, scores.data, gpu.data));
    int64_t same = 0, over = softmax_over(dt, S, &cpu, &gpu, &same);
    printf("softmax %s S=%lld: %lld of %lld bit-identical to the CPU, %lld over the bound\n", eq_dtype_name(dt),
           (long long)S, (long long)same, (long long)(S * S), (long long)over);
    EQ_EXPECT(over == 0, "softmax %s: %lld elements over the bound", eq_dtype_name(dt), (long long)over);
    eq_tensor_set(&scores, S * (S - 1), eq_tensor_get(&scores, S * (S - 1)) + 1.0); /* last row, first key */
    EQ_EXPECT_OK(eq_backend_cuda.ops->causal_softmax(dt, S, D, scores.data, gpu.data));
    EQ_EXPECT(softmax_over(dt, S, &cpu, &gpu, &same) > 0, "softmax %s: a planted change went unseen", eq_dtype_name(dt));
    eq_tensor_free(&scores), eq_tensor_free(&cpu), eq_tensor_free(&gpu);
}

/* The fused head (eq_backend_cuda.attention_head: scores and P kept on the device) against the
 * same backend op by op (GEMM, softmax, GEMM, each through host memory): bit for bit, since the
 * cuBLAS calls and the kernel are the same. Planted: one V element changed for the fused run. */
static void check_attention_fused(eq_dtype dt, int64_t S, int64_t B, int64_t heads, int64_t D)
{
    eq_backend op_by_op = eq_backend_cuda;
    op_by_op.attention_head = NULL;
    eq_tensor qkv, fused, unfused;
    eq_tensor_init_2d(&qkv, dt, S, B * heads * 3 * D);
    eq_tensor_init_2d(&fused, dt, S, B * heads * D);
    eq_tensor_init_2d(&unfused, dt, S, B * heads * D);
    eq_rng_fill_normal(&qkv, 8, "qkv", 1.0);
    EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cuda, dt, S, B, heads, D, fused.data, qkv.data));
    EQ_EXPECT_OK(eq_attention_forward(&op_by_op, dt, S, B, heads, D, unfused.data, qkv.data));
    size_t differ = bits_differ(dt, fused.data, unfused.data, (size_t)eq_tensor_numel(&fused));
    printf("attention %s S=%lld B=%lld heads=%lld D=%lld: fused head vs op by op, %zu elements differ\n",
           eq_dtype_name(dt), (long long)S, (long long)B, (long long)heads, (long long)D, differ);
    EQ_EXPECT(differ == 0, "attention %s: the fused head differs from op by op in %zu elements", eq_dtype_name(dt),
              differ);
    /* V of the last head, row S-1, first element: [S, B, heads, 3, D] */
    const int64_t v_last = (S - 1) * B * heads * 3 * D + (B * heads - 1) * 3 * D + 2 * D;
    eq_tensor_set(&qkv, v_last, eq_tensor_get(&qkv, v_last) + 1.0);
    EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cuda, dt, S, B, heads, D, fused.data, qkv.data));
    EQ_EXPECT(bits_differ(dt, fused.data, unfused.data, (size_t)eq_tensor_numel(&fused)) > 0,
              "attention %s: a planted change went unseen", eq_dtype_name(dt));
    eq_tensor_free(&qkv), eq_tensor_free(&fused), eq_tensor_free(&unfused);
}

int main(void)
{
    const char *why = "";
    if (!eq_cuda_available(&why)) {
        printf("ops_cuda_test: no CUDA device (%s): skipped\n", why);
        return 77;
    }
    EQ_EXPECT_OK(eq_backend_cuda_open());
    const eq_dtype dtypes[] = {EQ_FP32, EQ_BF16, EQ_FP64};
    for (int d = 0; d < 3; d++) {
        check_layernorm(dtypes[d], 37, 96);
        check_layernorm(dtypes[d], 512, 1024);
        check_gelu(dtypes[d], 100000);
        check_softmax(dtypes[d], 64, 64);
        check_softmax(dtypes[d], 257, 80);
        check_attention_fused(dtypes[d], 64, 2, 3, 16);
        check_attention_fused(dtypes[d], 300, 1, 2, 64);
    }
    eq_backend_cuda.release();
    return eq_test_finish("ops_cuda_test");
}
