// The row and element ops of models/ops.c on the device, under the same rounding contract: compute
// in the accumulate type (fp32 for fp32 and bf16, fp64 for fp64), round each output once to dt,
// sums in ascending index order. Each row is one thread, running the CPU's loops in the CPU's
// order, so where only + - * / and sqrt are involved (LayerNorm) the bits are the CPU's: nvcc
// rounds float division and sqrt correctly by default (-prec-div, -prec-sqrt; equiv never passes
// --use_fast_math) and -fmad=false keeps every multiply and add separately rounded, as
// -ffp-contract=off does on the host. Where a transcendental is involved (GELU's erf, softmax's
// exp) the bits can differ: CUDA's erff/expf are within 2 ulp (CUDA C Programming Guide, "Mathematical
// functions"), glibc's within about 1, so GPU and CPU agree to a few ulp of the accumulate type
// before the final rounding, not bit for bit. One thread per row is slow for wide rows; it is the
// price of the CPU's order (a parallel row reduction would reassociate the sums).
#include <stdint.h>

#include "models/ops_cuda_kernel.h"

namespace {

enum { DT_FP32 = 0, DT_BF16 = 1, DT_FP64 = 2 }; // eq_dtype; models/ops_cuda.c asserts they agree

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t f32_to_bf16(float f) // harness/base/bf16.h's eq_f32_to_bf16
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// load/store of element i of a buffer of dtype dt in accumulate type T.
template <class T> __device__ T load(int dt, const void *buf, int64_t i);
template <> __device__ float load<float>(int dt, const void *buf, int64_t i)
{
    return dt == DT_BF16 ? bf16_to_f32(((const uint16_t *)buf)[i]) : ((const float *)buf)[i];
}
template <> __device__ double load<double>(int, const void *buf, int64_t i) { return ((const double *)buf)[i]; }
template <class T> __device__ void store(int dt, void *buf, int64_t i, T v);
template <> __device__ void store<float>(int dt, void *buf, int64_t i, float v)
{
    if (dt == DT_BF16) ((uint16_t *)buf)[i] = f32_to_bf16(v);
    else ((float *)buf)[i] = v;
}
template <> __device__ void store<double>(int, void *buf, int64_t i, double v) { ((double *)buf)[i] = v; }

__device__ __forceinline__ float math_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double math_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float math_erf(float x) { return erff(x); }
__device__ __forceinline__ double math_erf(double x) { return erf(x); }
__device__ __forceinline__ float math_exp(float x) { return expf(x); }
__device__ __forceinline__ double math_exp(double x) { return exp(x); }

// ops.c DEFINE_LAYERNORM_FORWARD, line for line.
template <class T>
__global__ void layernorm_forward(int dt, int64_t rows, int64_t H, void *out, double *mean_out, double *rstd_out,
                                  const void *in, const void *gamma, const void *beta, T eps)
{
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const int64_t row = r * H;
    T sum = 0;
    for (int64_t j = 0; j < H; j++) sum += load<T>(dt, in, row + j);
    const T mean = sum / (T)H;
    T squares = 0;
    for (int64_t j = 0; j < H; j++) {
        const T centred = load<T>(dt, in, row + j) - mean;
        squares += centred * centred;
    }
    const T rstd = (T)1 / math_sqrt(squares / (T)H + eps);
    for (int64_t j = 0; j < H; j++) {
        const T xhat = (load<T>(dt, in, row + j) - mean) * rstd;
        store<T>(dt, out, row + j, xhat * load<T>(dt, gamma, j) + load<T>(dt, beta, j));
    }
    mean_out[r] = mean;
    rstd_out[r] = rstd;
}

// ops.c DEFINE_GELU's forward: out = x * 0.5 * (1 + erf(x / sqrt 2)).
template <class T> __global__ void gelu_forward(int dt, int64_t n, void *out, const void *in)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const T half = (T)0.5, one = (T)1, rsqrt2 = (T)0.70710678118654752440;
    const T x = load<T>(dt, in, i);
    store<T>(dt, out, i, x * half * (one + math_erf(x * rsqrt2)));
}

// ops.c DEFINE_CAUSAL_SOFTMAX: the exps are recomputed instead of kept in scratch (the same values:
// exp of the same argument).
template <class T> __global__ void causal_softmax(int dt, int64_t S, int64_t D, const void *scores, void *P)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S) return;
    const T scale = (T)1 / math_sqrt((T)D);
    const int64_t row = i * S;
    T max = (T)-INFINITY;
    for (int64_t j = 0; j <= i; j++) {
        const T z = load<T>(dt, scores, row + j) * scale;
        if (z > max) max = z;
    }
    T sum = 0;
    for (int64_t j = 0; j <= i; j++) sum += math_exp(load<T>(dt, scores, row + j) * scale - max);
    for (int64_t j = 0; j <= i; j++) store<T>(dt, P, row + j, math_exp(load<T>(dt, scores, row + j) * scale - max) / sum);
    for (int64_t j = i + 1; j < S; j++) store<T>(dt, P, row + j, (T)0);
}

unsigned blocks_for(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

} // namespace

extern "C" cudaError_t eq_cuda_layernorm_forward(int dt, int64_t rows, int64_t H, void *out, double *mean, double *rstd,
                                                 const void *in, const void *gamma, const void *beta, double eps,
                                                 cudaStream_t stream)
{
    if (rows == 0) return cudaSuccess;
    const int threads = 128;
    if (dt == DT_FP64)
        layernorm_forward<double><<<blocks_for(rows, threads), threads, 0, stream>>>(dt, rows, H, out, mean, rstd, in,
                                                                                     gamma, beta, eps);
    else
        layernorm_forward<float><<<blocks_for(rows, threads), threads, 0, stream>>>(dt, rows, H, out, mean, rstd, in,
                                                                                    gamma, beta, (float)eps);
    return cudaGetLastError();
}

extern "C" cudaError_t eq_cuda_gelu_forward(int dt, int64_t n, void *out, const void *in, cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    const int threads = 256;
    if (dt == DT_FP64) gelu_forward<double><<<blocks_for(n, threads), threads, 0, stream>>>(dt, n, out, in);
    else gelu_forward<float><<<blocks_for(n, threads), threads, 0, stream>>>(dt, n, out, in);
    return cudaGetLastError();
}

extern "C" cudaError_t eq_cuda_causal_softmax(int dt, int64_t S, int64_t D, const void *scores, void *P,
                                              cudaStream_t stream)
{
    if (S == 0) return cudaSuccess;
    const int threads = 128;
    if (dt == DT_FP64) causal_softmax<double><<<blocks_for(S, threads), threads, 0, stream>>>(dt, S, D, scores, P);
    else causal_softmax<float><<<blocks_for(S, threads), threads, 0, stream>>>(dt, S, D, scores, P);
    return cudaGetLastError();
}
