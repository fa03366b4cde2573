/* The row and element ops of the GPT block, forward and backward, on one rank's buffers.
 *
 * dtype dt: fp32 (float), bf16 (uint16_t, harness/base/bf16.h) or fp64 (double). Every op computes
 * in its accumulate type (fp32 for fp32 and bf16, fp64 for fp64: what PyTorch's bf16 kernels do)
 * and rounds each output element once to dt. Sums run in one fixed order (ascending index), so
 * results depend on the data, never on how many rows a rank holds. Backward functions overwrite
 * their outputs (no +=).
 *
 * Letters: S sequence, B batch (this rank's), H hidden, D head dim, rows = S*B. */
#ifndef EQUIV_MODELS_OPS_H
#define EQUIV_MODELS_OPS_H

#include <stdint.h>

#include "models/backend.h"

#define EQ_LAYERNORM_EPS 1e-5

/* out[rows, H] = (in - mean) * rstd * gamma + beta, mean/rstd over each row's H values
 * (rstd = 1/sqrt(var + eps), var the biased variance). mean[rows], rstd[rows] are saved for the
 * backward as computed (in the accumulate type, stored as double). */
eq_status eq_layernorm_forward(eq_dtype dt, int64_t rows, int64_t H, void *out, double *mean, double *rstd,
                               const void *in, const void *gamma, const void *beta);

/* din[rows, H]; dgamma[H], dbeta[H] = sums over these rows (rows ascending). */
eq_status eq_layernorm_backward(eq_dtype dt, int64_t rows, int64_t H, void *din, void *dgamma, void *dbeta,
                                const void *dout, const void *in, const double *mean, const double *rstd,
                                const void *gamma);

/* GELU with erf (PyTorch's default, Megatron's F.gelu): out = in * Phi(in). */
void eq_gelu_forward(eq_dtype dt, int64_t n, void *out, const void *in);
/* din = dout * (Phi(in) + in * phi(in)). */
void eq_gelu_backward(eq_dtype dt, int64_t n, void *din, const void *dout, const void *in);

/* P[S,S] (dt) = the causal softmax of scores[S,S] (dt) scaled by 1/sqrt(D): row i is softmax over
 * j <= i of scores_ij / sqrt(D), exactly 0 for j > i (computed in the acc type, rounded once). */
eq_status eq_causal_softmax(eq_dtype dt, int64_t S, int64_t D, const void *scores, void *P);

/* Causal self-attention for `heads` heads (one tensor-parallel rank's heads), unfused:
 *   qkv [S, B, heads, 3, D]  (Megatron's per-head [q | k | v] layout; the row of token (s, b)
 *                             starts at (s*B + b) * heads*3*D)
 *   ctx [S, B, heads, D]
 * For each batch column b and head h, with Q, K, V the [S, D] slices:
 *   scores = dt(Q K^T)             GEMM (fp32 accumulation, rounded to dt), as baddbmm
 *   P      = dt(softmax(scores / sqrt(D) with keys j > i masked))   be->ops->causal_softmax
 *   ctx    = dt(P V)               GEMM
 * GEMMs go through eq_gemm (models/gemm.h) on the given backend. */
eq_status eq_attention_forward(const eq_backend *be, eq_dtype dt, int64_t S, int64_t B, int64_t heads, int64_t D,
                               void *ctx, const void *qkv);

/* dqkv [S, B, heads, 3, D] from dctx [S, B, heads, D], recomputing P from qkv (nothing saved):
 *   dV = dt(P^T dctx)   dP = dt(dctx V^T)   dS = dt(P * (dP - rowsum(P * dP)) / sqrt(D))
 *   dQ = dt(dS K)       dK = dt(dS^T Q)
 * (masked entries have P = 0, so they get no gradient). */
eq_status eq_attention_backward(const eq_backend *be, eq_dtype dt, int64_t S, int64_t B, int64_t heads, int64_t D,
                                void *dqkv, const void *dctx, const void *qkv);

/* Mean-squared-error against a fixed target, normalised by `count` (the caller says which count:
 * the global number of elements under the sum convention, the local one under avg):
 *   *loss_partial = sum_i (y_i - t_i)^2 / count        (accumulated in fp64, ascending i)
 *   dy_i          = dt(2 (y_i - t_i) / count) */
eq_status eq_mse_forward_backward(eq_dtype dt, int64_t n, double count, const void *y, const void *target,
                                  double *loss_partial, void *dy);

/* out[i] = dt(a[i] + b[i]) (residual adds; in the acc type, one rounding). */
void eq_add(eq_dtype dt, int64_t n, void *out, const void *a, const void *b);

#endif
