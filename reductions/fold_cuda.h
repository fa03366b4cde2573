/* The simulated collectives on the device (built with the cuda feature only): --backend cuda
 * --comm sim keeps every rank in one process, as the CPU sim transport does, and folds their
 * buffers on the GPU in exactly the order and rounding of reductions/fold.c (the NCCL ring order
 * by default). The result is bit-identical to the CPU emulation (reductions/fold_cuda_test.c; a
 * NaN's payload aside), so what a multi-GPU run would produce from the same partial sums is
 * predicted, on one device.
 *
 * The members' buffers are host memory today (the model path keeps tensors on the host): each
 * collective uploads them to a device buffer this module owns, folds there and downloads. */
#ifndef EQUIV_REDUCTIONS_FOLD_CUDA_H
#define EQUIV_REDUCTIONS_FOLD_CUDA_H

#include <stddef.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"
#include "reductions/collectives.h"

/* eq_fold (reductions/fold.h) on the device: the same contract, the same bits. Opens the device
 * (EQ_ERR_BACKEND "no CUDA device" without one). */
eq_status eq_fold_cuda(eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[], void *out,
                       size_t count);
/* eq_fold_nccl on the device: ring places elements with `nccl`'s channels and protocol. */
eq_status eq_fold_cuda_nccl(eq_nccl_config nccl, eq_algo algo, eq_dtype dt, eq_redop op, int n,
                            const void *const in[], void *out, size_t count);

/* The sim transport with its reductions on the device; all_gather and broadcast are copies and
 * stay the CPU sim's. Its name, "sim-cuda", is what dumps record as their transport. */
extern const eq_transport eq_transport_sim_cuda;

/* Frees the device buffers the fold holds. Safe to call twice. */
void eq_fold_cuda_release(void);

#endif
