/* The row and element ops on the device (built with the cuda feature only): eq_backend_cuda_ops
 * (models/backend.h) runs LayerNorm forward, GELU forward and the causal softmax as CUDA kernels
 * (models/ops_cuda.cu) on host buffers, copying them to device buffers this module owns.
 *
 * Bits, against the CPU ops: LayerNorm the same (only + - * / sqrt, in the CPU's order); GELU and
 * softmax within a few ulp of the accumulate type (CUDA's erf/exp are not glibc's), so their dt
 * outputs mostly agree and differ by one ulp of dt where the two land on both sides of a rounding
 * boundary. models/ops_cuda_test.c measures both. */
#ifndef EQUIV_MODELS_OPS_CUDA_H
#define EQUIV_MODELS_OPS_CUDA_H

/* Frees the ops' device buffers. Safe to call twice. */
void eq_ops_cuda_release(void);

#endif
