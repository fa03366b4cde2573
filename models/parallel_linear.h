/* Megatron's two tensor-parallel linear layers, forward, on one data-parallel replica.
 *
 * Shapes (M = tokens of the replica, K = input features, N = output features):
 *   in     [M, K]   (any leading dims; the last is K)
 *   weight [N, K]   the full master weight; rank r uses its shard of it
 *   out    [M, N]
 *
 * A sharded activation is held as its full tensor with rank r's shard at column block r, which is
 * exactly what rank r holds on a real run; ranks read their block through the GEMM's row stride.
 *
 * Column-parallel (QKV, fc1) splits N: rank r computes out[:, r*N/tp : (r+1)*N/tp] from weight rows
 * r*N/tp..., no collective, each element computed by exactly one rank with the whole K: bit-exact
 * against tp = 1 (seed 002 section 2).
 * Row-parallel (attention out-proj, fc2) splits K: rank r computes the partial product over its
 * K/tp columns, rounded to the dtype as the GEMM writes it, and the tp group all-reduces (SUM) the
 * partials: the summation order changes, so results differ by rounding (seed 002 section 2.1).
 *
 * Injected bugs (step->bugs): EQ_BUG_SHARD_OFFSET makes column-parallel rank r use rank r+1's
 * weight rows; EQ_BUG_SKIP_ALLREDUCE makes row-parallel keep rank 0's partial. */
#ifndef EQUIV_MODELS_PARALLEL_LINEAR_H
#define EQUIV_MODELS_PARALLEL_LINEAR_H

#include "models/model.h"

/* out (allocated by the caller, shape [..., N], the step's dtype) is overwritten. */
eq_status eq_column_parallel_forward(const eq_step *step, eq_tensor *out, const eq_tensor *in,
                                     const eq_tensor *weight);
eq_status eq_row_parallel_forward(const eq_step *step, eq_tensor *out, const eq_tensor *in,
                                  const eq_tensor *weight);

/* Backward, on one replica. Gradients are overwritten.
 *
 * Column-parallel: dout [M, N] (rank r reads its column block), in [M, K] (every rank holds it).
 *   dweight[rows of rank r] = dout_r^T in                   (TN GEMM, summed over the M tokens)
 *   din = all_reduce_tp(SUM) of dout_r weight_r              (NN GEMM; Megatron's backward
 *                                                             all-reduce of a column-parallel layer)
 * Row-parallel: dout [M, N] (the all-reduced output's gradient, on every rank), in [M, K] (rank r
 * holds its column block).
 *   din[:, block r] = dout weight[:, block r]                (NN GEMM, no collective)
 *   dweight[:, block r] = dout^T in[:, block r]              (TN GEMM) */
eq_status eq_column_parallel_backward(const eq_step *step, eq_tensor *din, eq_tensor *dweight, const eq_tensor *dout,
                                      const eq_tensor *in, const eq_tensor *weight);
eq_status eq_row_parallel_backward(const eq_step *step, eq_tensor *din, eq_tensor *dweight, const eq_tensor *dout,
                                   const eq_tensor *in, const eq_tensor *weight);

/* Data-parallel sharding of activations laid out [S, B, H] (Megatron's sequence-first layout):
 * dp rank d holds batch columns [d*B/dp, (d+1)*B/dp) for every position. */
eq_status eq_batch_shard_gather(const eq_tensor *full, int dp, int d, eq_tensor *local);
void eq_batch_shard_scatter(const eq_tensor *local, int dp, int d, eq_tensor *full);

#endif
