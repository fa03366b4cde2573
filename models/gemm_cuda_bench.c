/* Benchmark (meson test --benchmark, or build/gemm_cuda_bench; needs a GPU, exits 77 without):
 * cuBLAS under equiv's math modes (models/backend_cuda.c) on device-resident operands, for the
 * GEMMs of row_parallel and gpt at the docs size, each as a share of the same GPU's throughput on
 * a large square GEMM of the same dtype measured in this run ("peak": what this GPU reaches under
 * these modes, not the data-sheet number). Asserts nothing about speed. */
#include <stdio.h>

#include "models/backend.h"
#include "reductions/cuda_device.h"

typedef struct {
    const char *what;
    int64_t M, N, K;
} shape;

/* tokens = seq 4096 x batch 2; gpt hidden 1024, ffn 4096, 16 heads of 64 (size docs of cases/row_parallel.ini and cases/gpt.ini) */
static const shape shapes[] = {
    {"row_parallel tp1  [8192 x 1024 x 4096]", 8192, 1024, 4096},
    {"row_parallel tp4  [8192 x 1024 x 1024]", 8192, 1024, 1024},
    {"gpt qkv tp4       [8192 x  768 x 1024]", 8192, 768, 1024},
    {"gpt proj tp4      [8192 x 1024 x  256]", 8192, 1024, 256},
    {"gpt fc1 tp4       [8192 x 1024 x 1024]", 8192, 1024, 1024},
    {"gpt fc2 tp4       [8192 x 1024 x 1024]", 8192, 1024, 1024},
    {"gpt qkv tp1       [8192 x 3072 x 1024]", 8192, 3072, 1024},
    {"gpt fc2 tp1       [8192 x 1024 x 4096]", 8192, 1024, 4096},
    {"gpt scores Q K^T  [4096 x 4096 x   64]", 4096, 4096, 64},
    {"gpt P V           [4096 x   64 x 4096]", 4096, 64, 4096},
};

int main(void)
{
    const char *why = "";
    if (!eq_cuda_available(&why)) {
        printf("gemm_cuda_bench: no CUDA device (%s): skipped\n", why);
        return 77;
    }
    if (eq_backend_cuda_open() != EQ_OK) {
        fprintf(stderr, "gemm_cuda_bench: %s\n", eq_error_message());
        return 1;
    }
    char about[512];
    printf("backend: %s\ngpu: %s\n", eq_backend_cuda.describe(about, sizeof about), eq_gpu_describe(about, sizeof about));
    const eq_dtype dtypes[2] = {EQ_BF16, EQ_FP32};
    for (int d = 0; d < 2; d++) {
        double peak_s = 0;
        const int64_t P = 8192;
        if (eq_backend_cuda_time_gemm(dtypes[d], P, P, P, 10, &peak_s) != EQ_OK) {
            fprintf(stderr, "gemm_cuda_bench: %s\n", eq_error_message());
            return 1;
        }
        const double peak = 2.0 * P * P * P / peak_s;
        printf("\n%s: square [8192 x 8192 x 8192] %.1f TFLOP/s (the peak below)\n", eq_dtype_name(dtypes[d]), peak * 1e-12);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const shape *s = &shapes[i];
            double sec = 0;
            if (eq_backend_cuda_time_gemm(dtypes[d], s->M, s->N, s->K, 50, &sec) != EQ_OK) {
                fprintf(stderr, "gemm_cuda_bench: %s\n", eq_error_message());
                return 1;
            }
            const double flops = 2.0 * (double)s->M * (double)s->N * (double)s->K / sec;
            printf("  %s  %8.1f us  %7.1f TFLOP/s  %5.1f%% of peak\n", s->what, sec * 1e6, flops * 1e-12,
                   100 * flops / peak);
        }
    }
    eq_backend_cuda.release();
    return 0;
}
