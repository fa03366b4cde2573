/* The device fold's launcher (reductions/fold_cuda.cu), callable from C. Arguments are the ints of
 * eq_algo, eq_dtype and eq_redop (reductions/collectives.h, harness/base/tensor.h), checked in
 * reductions/fold_cuda.c. */
#ifndef EQUIV_REDUCTIONS_FOLD_CUDA_KERNEL_H
#define EQUIV_REDUCTIONS_FOLD_CUDA_KERNEL_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[e] (count elements, device) = the fold over members k of rows[k * count + e] (device, n rows
 * of `count` elements in wire dtype `dt`), for e in [begin, begin + len), all of them in ring chunk
 * `chunk`, in the order and rounding of `algo`, as reductions/fold.c does it; op AVG pre-multiplies
 * every input by `avg_scale` (dt(1/n)), rounded to dt. The tree algorithm works in place on `rows`.
 * Queued on `stream`; errors of the launch are returned, errors of the run surface at the next
 * synchronisation. */
cudaError_t eq_fold_cuda_launch(int algo, int dt, int op, int n, void *rows, size_t count, size_t begin, size_t len,
                                int chunk, void *out, double avg_scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
