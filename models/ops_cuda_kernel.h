/* Launchers of the row and element ops on the device (models/ops_cuda.cu), callable from C. All
 * pointers are device pointers; dt is the int of eq_dtype. Queued on `stream`; launch errors are
 * returned, run errors surface at the next synchronisation. */
#ifndef EQUIV_MODELS_OPS_CUDA_KERNEL_H
#define EQUIV_MODELS_OPS_CUDA_KERNEL_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* As eq_layernorm_forward (models/ops.h): one thread per row, the CPU's loops and order. */
cudaError_t eq_cuda_layernorm_forward(int dt, int64_t rows, int64_t H, void *out, double *mean, double *rstd,
                                      const void *in, const void *gamma, const void *beta, double eps,
                                      cudaStream_t stream);
/* As eq_gelu_forward: one thread per element. */
cudaError_t eq_cuda_gelu_forward(int dt, int64_t n, void *out, const void *in, cudaStream_t stream);
/* As ops.c's causal_softmax: P[S,S] from scores[S,S], scale 1/sqrt(D); one thread per row. */
cudaError_t eq_cuda_causal_softmax(int dt, int64_t S, int64_t D, const void *scores, void *P, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
