// The fold of reductions/fold.c on the device: one thread per element, the members folded in the
// algorithm's order, rounding to the wire dtype after every add exactly as fold.c's add_rows does
// (bf16: fp32 add of the widened values, one rounding to bf16, NCCL's __hadd on sm80+; fp32: a
// float add; fp64: a double add). Rounding to bf16 is the same bit operation as harness/base/bf16.h's
// eq_f32_to_bf16 (nearest, ties to even, quiet NaN keeping its sign), not a library conversion, so
// host and device agree on every finite and infinite input. A NaN stays a NaN in the same place,
// but its payload may differ: the PTX ISA leaves the NaN an fp32 add or multiply returns
// unspecified (GPUs give 0x7FFFFFFF, the host passes the input's on). Built with -fmad=false:
// nothing is fused.
#include <stdint.h>

#include "reductions/fold_cuda_kernel.h"

namespace {

// Mirrors of eq_algo, eq_dtype and eq_redop; reductions/fold_cuda.c asserts they agree.
enum { ALGO_RING = 0, ALGO_TREE = 1, ALGO_FP32ACC = 2, ALGO_SEQ = 3 };
enum { DT_FP32 = 0, DT_BF16 = 1, DT_FP64 = 2 };
enum { OP_SUM = 0, OP_AVG = 1 };

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                              // nearest, ties to even
    return (uint16_t)(u >> 16);
}

// One wire dtype: its storage S, the value V every member's value is exactly representable in,
// the add and multiply rounded to the wire dtype, and the fp32acc accumulator A.
struct WireBf16 {
    typedef uint16_t S;
    typedef float V;
    typedef float A;
    __device__ static V load(S s) { return bf16_to_f32(s); }
    __device__ static S store(V v) { return f32_to_bf16(v); }
    __device__ static V add(V a, V b) { return bf16_to_f32(f32_to_bf16(__fadd_rn(a, b))); }
    __device__ static V mul(V a, V b) { return bf16_to_f32(f32_to_bf16(__fmul_rn(a, b))); }
    __device__ static A acc_add(A a, V b) { return __fadd_rn(a, b); }
    __device__ static V from_acc(A a) { return bf16_to_f32(f32_to_bf16(a)); }
};
struct WireF32 {
    typedef float S;
    typedef float V;
    typedef float A;
    __device__ static V load(S s) { return s; }
    __device__ static S store(V v) { return v; }
    __device__ static V add(V a, V b) { return __fadd_rn(a, b); }
    __device__ static V mul(V a, V b) { return __fmul_rn(a, b); }
    __device__ static A acc_add(A a, V b) { return __fadd_rn(a, b); }
    __device__ static V from_acc(A a) { return a; }
};
struct WireF64 {
    typedef double S;
    typedef double V;
    typedef double A;
    __device__ static V load(S s) { return s; }
    __device__ static S store(V v) { return v; }
    __device__ static V add(V a, V b) { return __dadd_rn(a, b); }
    __device__ static V mul(V a, V b) { return __dmul_rn(a, b); }
    __device__ static A acc_add(A a, V b) { return __dadd_rn(a, b); }
    __device__ static V from_acc(A a) { return a; }
};

// Elements [begin, begin + len) of rows (n rows of `count`), all in ring chunk `chunk` (the host
// walks the pieces of reductions/nccl_layout.h, or the rank blocks of a reduce_scatter).
template <class W>
__global__ void fold_kernel(int algo, int op, int n, typename W::S *rows, size_t count, size_t begin, size_t len,
                            int chunk, typename W::S *out, typename W::V scale)
{
    typedef typename W::V V;
    for (size_t e = begin + (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < begin + len;
         e += (size_t)gridDim.x * blockDim.x) {
        // Member k's input as the fold sees it: AVG pre-multiplied (FuncPreMulSum), rounded to dt.
#define MEMBER(k) (op == OP_AVG ? W::mul(W::load(rows[(size_t)(k) * count + e]), scale) : W::load(rows[(size_t)(k) * count + e]))
        switch (algo) {
        case ALGO_RING: { // chunk c starts at member c+1, member c adds last (fold.c, runRing)
            int c = chunk, first = (c + 1) % n;
            V acc = MEMBER(first);
            for (int step = 2; step <= n; step++) acc = W::add(acc, MEMBER((c + step) % n));
            out[e] = W::store(acc);
            break;
        }
        case ALGO_TREE: { // value(i) = dt(dt(x[i] + value(2i+1)) + value(2i+2)), in place, n-1 down to 0
            if (op == OP_AVG)
                for (int k = 0; k < n; k++) rows[(size_t)k * count + e] = W::store(MEMBER(k));
            for (int node = n - 1; node >= 0; node--) {
                typename W::S *self = &rows[(size_t)node * count + e];
                if (2 * node + 1 < n) *self = W::store(W::add(W::load(*self), W::load(rows[(size_t)(2 * node + 1) * count + e])));
                if (2 * node + 2 < n) *self = W::store(W::add(W::load(*self), W::load(rows[(size_t)(2 * node + 2) * count + e])));
            }
            out[e] = rows[e];
            break;
        }
        case ALGO_FP32ACC: { // accumulate in fp32 (fp64 for fp64), rank order, one rounding
            typename W::A acc = MEMBER(0);
            for (int k = 1; k < n; k++) acc = W::acc_add(acc, MEMBER(k));
            out[e] = W::store(W::from_acc(acc));
            break;
        }
        default: { // ALGO_SEQ: rank 0 + rank 1 + ... rounding after every add
            V acc = MEMBER(0);
            for (int k = 1; k < n; k++) acc = W::add(acc, MEMBER(k));
            out[e] = W::store(acc);
            break;
        }
        }
#undef MEMBER
    }
}

template <class W>
cudaError_t launch(int algo, int op, int n, void *rows, size_t count, size_t begin, size_t len, int chunk, void *out,
                   double scale, cudaStream_t stream)
{
    const int threads = 256;
    size_t blocks = (len + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535; // the grid-stride loop covers the rest
    if (blocks == 0) return cudaSuccess;
    fold_kernel<W><<<(unsigned)blocks, threads, 0, stream>>>(algo, op, n, (typename W::S *)rows, count, begin, len,
                                                              chunk, (typename W::S *)out, (typename W::V)scale);
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t eq_fold_cuda_launch(int algo, int dt, int op, int n, void *rows, size_t count, size_t begin,
                                           size_t len, int chunk, void *out, double avg_scale, cudaStream_t stream)
{
    switch (dt) {
    case DT_BF16: return launch<WireBf16>(algo, op, n, rows, count, begin, len, chunk, out, avg_scale, stream);
    case DT_FP32: return launch<WireF32>(algo, op, n, rows, count, begin, len, chunk, out, avg_scale, stream);
    default: return launch<WireF64>(algo, op, n, rows, count, begin, len, chunk, out, avg_scale, stream);
    }
}
