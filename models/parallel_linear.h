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

/* Multi-process runs (step->world: --comm mpi or nccl) compute only this process's tp rank and dp
 * replica. These collect the other processes' pieces, so that every process ends holding what the
 * sim run holds: copies through the groups' all-gather, no arithmetic, the same on every transport.
 * Collective: every process of the group calls them, in the same order.
 *
 * eq_tp_gather_columns: t [..., N] holds this rank's column block (r*N/tp, width N/tp) of a
 *   sharded activation or of a row-parallel weight's gradient; the other blocks are filled in.
 * eq_tp_gather_rows: t [N, K] holds this rank's row block (a column-parallel weight's gradient).
 * Both do nothing when every tp rank is computed here (sim).
 * eq_dp_gather_batch: local [S, B/dp, H] is replica d's part of full [S, B, H]. Sim: placed at d;
 *   multi-process: every replica's part all-gathered over dp and placed (d is this process's). */
eq_status eq_tp_gather_columns(const eq_step *step, eq_tensor *t);
eq_status eq_tp_gather_rows(const eq_step *step, eq_tensor *t);
eq_status eq_dp_gather_batch(const eq_step *step, const eq_tensor *local, int d, eq_tensor *full);

#endif
