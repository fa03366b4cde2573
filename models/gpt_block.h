/* One GPT block (pre-LayerNorm, Megatron's tensor-parallel sharding) on one data-parallel
 * replica, forward and backward. models/gpt.c builds the stack, the loss and the data-parallel
 * reduction around it.
 *
 * Letters: S sequence, b this replica's batch, H hidden, NH heads, D = H/NH head dim, F ffn,
 * T = S*b tokens. Activations are [S, b, *] (sequence first, as Megatron). Sharded activations are
 * held full, rank r's shard at column block r (models/parallel_linear.h).
 *
 *   ln1_out   = LN(x; ln1_gamma, ln1_beta)                 [S, b, H]
 *   qkv       = ln1_out qkv_weight^T     column-parallel    [S, b, NH*3*D]  (per head [q|k|v])
 *   attn_ctx  = causal attention, heads split over tp        [S, b, H]
 *   attn_out  = attn_ctx proj_weight^T   row-parallel + all-reduce
 *   resid     = x + attn_out
 *   ln2_out   = LN(resid; ln2_gamma, ln2_beta)
 *   fc1_out   = ln2_out fc1_weight^T     column-parallel    [S, b, F]
 *   gelu_out  = GELU(fc1_out)
 *   mlp_out   = gelu_out fc2_weight^T    row-parallel + all-reduce
 *   out       = resid + mlp_out                              the block output */
#ifndef EQUIV_MODELS_GPT_BLOCK_H
#define EQUIV_MODELS_GPT_BLOCK_H

#include "models/model.h"

typedef struct {
    int64_t seq, batch, hidden, heads, ffn, layers;
    int megatron_init; /* --numerics megatron*: Megatron-Core's init (below) */
} gpt_sizes;

/* Parameters of one block: field, dims (1-D for LayerNorm vectors), init, and how tensor
 * parallelism splits it (its gradient is gathered that way under --comm mpi/nccl). One table:
 * struct fields, shapes, init, gradients and capture names all come from it. Init: LayerNorm gamma
 * 1, beta 0 (seed 002 section 1); weights N(0, 1/fan_in), the output projections (proj, fc2)
 * scaled by 1/sqrt(2 L) as GPT-2 and Megatron scale them, so the residual stream stays O(1).
 * Under --numerics megatron (z->megatron_init), Megatron-Core's defaults instead: every weight
 * N(0, 0.02) (init_method_std), the output projections N(0, 0.02 / sqrt(2 L))
 * (scaled_init_method_normal), whatever the fan-in.
 * Split: column-parallel weights by rows (output features), row-parallel ones by columns
 * (reduction features), LayerNorm vectors replicated on every tp rank. */
/* The std of an input-side weight (qkv, fc1) and of an output projection (proj, fc2). */
#define GPT_STD_IN(z, fan_in) ((z)->megatron_init ? 0.02 : 1.0 / sqrt((double)(fan_in)))
#define GPT_STD_OUT(z, fan_in)                                                                                \
    ((z)->megatron_init ? 0.02 / sqrt(2.0 * (double)(z)->layers)                                             \
                        : 1.0 / sqrt((double)(fan_in) * 2.0 * (double)(z)->layers))
#define GPT_BLOCK_PARAMS(X)                                                                                \
    X(ln1_gamma, 1, z->hidden, 0, GPT_INIT_ONE, 0, GPT_SPLIT_NONE)                                         \
    X(ln1_beta, 1, z->hidden, 0, GPT_INIT_ZERO, 0, GPT_SPLIT_NONE)                                         \
    X(qkv_weight, 2, 3 * z->hidden, z->hidden, GPT_INIT_NORMAL, GPT_STD_IN(z, z->hidden), GPT_SPLIT_ROWS)    \
    X(proj_weight, 2, z->hidden, z->hidden, GPT_INIT_NORMAL, GPT_STD_OUT(z, z->hidden), GPT_SPLIT_COLUMNS)   \
    X(ln2_gamma, 1, z->hidden, 0, GPT_INIT_ONE, 0, GPT_SPLIT_NONE)                                         \
    X(ln2_beta, 1, z->hidden, 0, GPT_INIT_ZERO, 0, GPT_SPLIT_NONE)                                         \
    X(fc1_weight, 2, z->ffn, z->hidden, GPT_INIT_NORMAL, GPT_STD_IN(z, z->hidden), GPT_SPLIT_ROWS)          \
    X(fc2_weight, 2, z->hidden, z->ffn, GPT_INIT_NORMAL, GPT_STD_OUT(z, z->ffn), GPT_SPLIT_COLUMNS)

/* Activations of one block kept for the backward and captured: field, last dim, and whether it is
 * sharded over tp (rank r holds column block r: the column-parallel outputs and the heads'
 * context) or replicated. */
#define GPT_BLOCK_ACTS(X)         \
    X(ln1_out, z->hidden, 0)      \
    X(qkv, 3 * z->hidden, 1)      \
    X(attn_ctx, z->hidden, 1)     \
    X(attn_out, z->hidden, 0)     \
    X(resid, z->hidden, 0)        \
    X(ln2_out, z->hidden, 0)      \
    X(fc1_out, z->ffn, 1)         \
    X(gelu_out, z->ffn, 1)        \
    X(mlp_out, z->hidden, 0)      \
    X(out, z->hidden, 0)

enum { GPT_INIT_ONE, GPT_INIT_ZERO, GPT_INIT_NORMAL };
enum { GPT_SPLIT_NONE, GPT_SPLIT_ROWS, GPT_SPLIT_COLUMNS };

typedef struct {
#define GPT_FIELD(name, ndim, d0, d1, init, std, split) eq_tensor name;
    GPT_BLOCK_PARAMS(GPT_FIELD)
#undef GPT_FIELD
} gpt_block_params;

typedef struct {
#define GPT_FIELD(name, last, sharded) eq_tensor name;
    GPT_BLOCK_ACTS(GPT_FIELD)
#undef GPT_FIELD
    double *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* [T] each, for the LayerNorm backwards */
    void *pool[5]; /* forward-only: the storage the activations share (gpt_acts_alloc_forward_only) */
} gpt_block_acts;

/* Allocation of a block's parameters (shaped, zeroed; `like_params` only for the shapes), of its
 * activations for T tokens, and their release. */
eq_status gpt_params_alloc(gpt_block_params *p, const gpt_sizes *z, eq_dtype dt);
void gpt_params_free(gpt_block_params *p);
eq_status gpt_acts_alloc(gpt_block_acts *a, const gpt_sizes *z, int64_t local_batch, eq_dtype dt);
void gpt_acts_free(gpt_block_acts *a);

/* Activations for a forward alone, where only `out` (and the LayerNorm statistics) must hold their
 * values afterwards: activations share storage once the earlier one is dead. ln1_out, attn_out
 * and mlp_out share one [T, H]; attn_ctx and ln2_out another; qkv, fc1_out and gelu_out one
 * [T, max(3H, F)] (the GELU runs in place); resid and out their own. Five buffers instead of ten,
 * the same values (gpt_block_test). gpt_acts_free frees them. */
eq_status gpt_acts_alloc_forward_only(gpt_block_acts *a, const gpt_sizes *z, int64_t local_batch, eq_dtype dt);

/* Forward of one block on one replica: x [S, b, H] -> a (every activation, a->out the output). */
eq_status gpt_block_forward(const eq_step *step, const gpt_sizes *z, const gpt_block_params *p, const eq_tensor *x,
                            gpt_block_acts *a);

/* Backward: dout [S, b, H] (gradient of a->out) -> dx [S, b, H] and g (this replica's parameter
 * gradients, overwritten). */
eq_status gpt_block_backward(const eq_step *step, const gpt_sizes *z, const gpt_block_params *p, const eq_tensor *x,
                             const gpt_block_acts *a, const eq_tensor *dout, eq_tensor *dx, gpt_block_params *g);

#endif
