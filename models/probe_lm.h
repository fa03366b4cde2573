/* The probe case's network (models/probe.c): a small causal language model built from the gpt
 * blocks (models/gpt_block.h), run one unit (one sequence) at a time, forward and backward.
 *
 * Letters: V vocabulary, S sequence (tokens per unit), H hidden, L blocks, T = S - 1 predicted
 * positions. A unit is one batch column: activations are [S, 1, H] (the blocks' sequence-first
 * layout with a batch of one).
 *
 *   x_0[s]       = tok_emb[tok[s]] + pos_emb[s]                  [S, 1, H]
 *   x_{l+1}      = block_l(x_l)                                  (models/gpt_block.h)
 *   lnf_out      = LN(x_L; lnf_gamma, lnf_beta)                  [S, 1, H]
 *   logits       = lnf_out head^T                                [S, 1, V]  (GEMM, rounded to dt)
 *   logp[t]      = log_softmax(logits[t])[tok[t + 1]], t < T     (fp64 from the dt logits)
 *   S_unit       = sum_t logp[t]                                 the unit's log-probability (fp64)
 *
 * Backward of loss = coef * S_unit (coef a per-unit scalar: -1/T gives the mean token NLL):
 *   dlogits[t, v] = dt(coef (onehot(tok[t+1])_v - softmax(logits[t])_v)), row S-1 zero
 *   then the head GEMM, the final LayerNorm, the blocks in reverse, and the embeddings:
 *   d pos_emb = dx_0, d tok_emb[v] = sum over s with tok[s] = v of dx_0[s] (fp64, rounded once).
 * Every gradient is overwritten. The whole unit runs on one rank (tp = 1, no collective), so a
 * unit's forward and gradient are the same bits whichever data-parallel rank computes it. */
#ifndef EQUIV_MODELS_PROBE_LM_H
#define EQUIV_MODELS_PROBE_LM_H

#include "models/gpt_block.h"

#define PROBE_LM_MAX_LAYERS 16

typedef struct {
    int64_t vocab, seq, hidden, heads, ffn, layers;
    int megatron_init; /* always 0: the blocks keep equiv's init (GPT_BLOCK_PARAMS reads it) */
} probe_lm_sizes;

typedef struct {
    eq_tensor tok_emb;                              /* [V, H] */
    eq_tensor pos_emb;                              /* [S, H] */
    gpt_block_params blocks[PROBE_LM_MAX_LAYERS];   /* [L] */
    eq_tensor lnf_gamma, lnf_beta;                  /* [H] */
    eq_tensor head;                                 /* [V, H] */
} probe_lm_params;

/* The parameters as one list, in capture order: tok_emb, pos_emb (layer 0); each block's
 * GPT_BLOCK_PARAMS (layer 1 + l); lnf_gamma, lnf_beta, head (layer L + 1). */
int probe_lm_n_tensors(const probe_lm_sizes *z);
eq_tensor *probe_lm_tensor(probe_lm_params *p, const probe_lm_sizes *z, int i, int *layer, const char **name);

/* Allocation (zeroed), release, and the master initialisation from the seed, keyed by name, never
 * by rank: token embeddings N(0, 1), positions N(0, 0.01), the head N(0, 1/H), the final
 * LayerNorm 1 and 0, the blocks as models/gpt_block.h initialises them. */
eq_status probe_lm_alloc(probe_lm_params *p, const probe_lm_sizes *z, eq_dtype dt);
void probe_lm_free(probe_lm_params *p, const probe_lm_sizes *z);
void probe_lm_init(probe_lm_params *p, const probe_lm_sizes *z, uint64_t seed);

/* One unit's forward: *logprob = S_unit. With g != NULL also the backward of coef * S_unit into
 * g (every tensor overwritten). tok[S] in 0..V-1. `step` gives the dtype and the backend; the
 * unit runs as tp = 1 on this process whatever step's layout is. */
eq_status probe_lm_unit(const eq_step *step, const probe_lm_sizes *z, const probe_lm_params *p, const int32_t *tok,
                        double coef, double *logprob, probe_lm_params *g);

#endif
