/* The SPD decomposition step on one data-parallel replica (all of its tp ranks): the target
 * model, the causal-importance functions, the four training losses and their gradients, the
 * eval sums. models/spd.c runs one replica per dp rank and reduces across them; the
 * finite-difference test (models/spd_step_test.c) runs one replica in fp64.
 *
 * Target (LlamaSimpleMLP-like, attention left out: every decomposed site is an MLP linear):
 *   h_0 [T, M] ~ N(0, 1)                                    (T tokens = rows x seq, M d_model)
 *   per layer l:  a = RMSNorm(h_l);  f = a W_fc^T [T, F];  g = GELU_tanh(f);  h_{l+1} = h_l + g W_down^T
 *   output y = h_L
 * Sites, in order: layer l's c_fc is site 2l (D = M, O = F, C = c_fc), its down_proj site 2l + 1
 * (D = F, O = M, C = c_down). The CI function of a site reads the target's input to that site.
 *
 * Randomness is keyed by global coordinates (harness/base/rng.h), never by rank: the input by
 * (global token, feature), the mask noise u [.., C+1] by (step, site, global token, component),
 * the subset routing by (step, site, global token), the PGD sources' init by (site, global token,
 * component). Every layout therefore draws the same numbers for the same token. */
#ifndef EQUIV_MODELS_SPD_STEP_H
#define EQUIV_MODELS_SPD_STEP_H

#include <stdint.h>

#include "models/spd_losses.h"
#include "models/spd_ops.h"

typedef struct {
    int64_t batch, seq, d_model, d_mlp, layers, c_fc, c_down, ci_hidden, step, steps;
} spd_sizes;

#define SPD_MAX_SITES 64

/* Parameters of one site, one table: name, rows, cols (rows 0: a vector of cols), init std
 * (relative to 1/sqrt(fan_in)), init mean. V, U ~ N(0, 1/fan_in); CI W1, W2 ~ N(0, 1/fan_in),
 * b1 = 0, b2 = 0.5 (so that the importances start spread over and beyond [0, 1]). */
#define SPD_SITE_PARAMS(X)          \
    X(V, p->D, p->C, 1.0, 0.0)      \
    X(U, p->C, p->O, 1.0, 0.0)      \
    X(ci_w1, p->D, p->H, 1.0, 0.0)  \
    X(ci_b1, 0, p->H, 0.0, 0.0)     \
    X(ci_w2, p->H, p->C, 1.0, 0.0)  \
    X(ci_b2, 0, p->C, 0.0, 0.5)

typedef struct {
    int64_t D, O, C, H;
    double *W; /* the target's weight [O, D] (frozen) */
#define SPD_FIELD(name, rows, cols, std, mean) double *name;
    SPD_SITE_PARAMS(SPD_FIELD)
#undef SPD_FIELD
} spd_site_params;

typedef struct {
#define SPD_FIELD(name, rows, cols, std, mean) double *name;
    SPD_SITE_PARAMS(SPD_FIELD)
#undef SPD_FIELD
} spd_site_grads;

/* The loss terms, in the order their gradients are added. */
typedef enum { SPD_FAITH = 0, SPD_STOCH = 1, SPD_IMP_MIN = 2, SPD_PPGD = 3 } spd_term;
#define SPD_N_TERMS 4
extern const char *const spd_term_names[SPD_N_TERMS]; /* "faith", "stoch", "imp_min", "ppgd" */

int spd_n_sites(const spd_sizes *z);
/* Shapes of site s and its parameters (allocated zeroed; spd_params_free). */
eq_status spd_params_alloc(const spd_sizes *z, int site, spd_site_params *p);
void spd_params_free(spd_site_params *p);
/* The master parameters of every site, from the global-coordinate RNG (seed). */
eq_status spd_params_init(const spd_sizes *z, uint64_t seed, spd_site_params *sites);
eq_status spd_grads_alloc(const spd_site_params *p, spd_site_grads *g);
void spd_grads_free(spd_site_grads *g);
int64_t spd_param_numel(const spd_site_params *p, int field); /* field: the table's index */

/* How this replica normalises and contributes (the gradient convention, and injected bugs). */
typedef struct {
    double recon_norm_stoch;   /* element count the stochastic reconstruction divides by */
    double recon_norm_ppgd;    /* ... and the PGD reconstruction */
    int faith_here;            /* contributes faithfulness (value and gradient) */
    const double *const *imp_S; /* [site][C]: the sums the importance loss uses (local or global) */
    double imp_n, imp_ws;      /* its count and world-size factor */
    int imp_loss_here;         /* contributes the importance loss's value */
    int ppgd_warmup;           /* Adam ascent steps on the sources before the loss (SPD_PPGD_WARMUP;
                                  0 in the finite-difference test, which holds the sources fixed) */
} spd_conv;

/* Everything one replica holds: its tokens, the forward, the gradients per loss term. */
typedef struct {
    int64_t b0, rows, T;       /* first global batch row, rows, tokens */
    int n_sites;
    double *h0, *y_target;     /* [T, M] */
    double *x[SPD_MAX_SITES];  /* the target's input to each site [T, D] */
    double *E[SPD_MAX_SITES];  /* Delta^T = W^T - V U [D, O] */
    double *hpre[SPD_MAX_SITES], *hg[SPD_MAX_SITES]; /* CI hidden [T, H] */
    double *z[SPD_MAX_SITES], *ci_lo[SPD_MAX_SITES], *ci_up[SPD_MAX_SITES]; /* [T, C] */
    double *S_local[SPD_MAX_SITES]; /* [C] importance sums over this replica's tokens */
    double *u[SPD_MAX_SITES];       /* [T, C+1] mask noise; column C the delta's */
    unsigned char *route[SPD_MAX_SITES]; /* [T] subset routing of the stochastic loss */
    double *stoch_mask[SPD_MAX_SITES];   /* [T, C+1] the stochastic masks, delta last */
    double *src_init[SPD_MAX_SITES];     /* [T, C+1] PGD sources as drawn, before the warm-up */
    double *src[SPD_MAX_SITES];          /* [T, C+1] PGD sources after the warm-up */
    double *src_grad[SPD_MAX_SITES];     /* [T, C+1] d(PGD loss term)/d sources, this replica's partial */
    spd_site_grads grads[SPD_N_TERMS][SPD_MAX_SITES]; /* this replica's partial gradients per term */
    double loss[SPD_N_TERMS];            /* this replica's partial loss values (coefficient included) */
    double eval_l0_sum[SPD_MAX_SITES];   /* sum over tokens of #{c: ci_lower > 0} */
    double eval_recon_sum;               /* sum of squared errors of the unmasked components (no delta) */
    double eval_tokens;                  /* tokens counted */
} spd_replica;

/* Allocates and draws the replica's tokens [b0, b0 + rows) (input, noise, routing, sources). */
eq_status spd_replica_init(const spd_sizes *z, const spd_site_params *sites, uint64_t seed, int64_t b0, int64_t rows,
                           spd_replica *rep);
void spd_replica_free(spd_replica *rep);

/* The target forward, Delta, the CI functions and the local importance sums. */
eq_status spd_replica_forward(const spd_ctx *ctx, const spd_sizes *z, const spd_site_params *sites,
                              spd_replica *rep);

/* The four losses (values and gradients per term), the PGD warm-up and the eval sums. */
eq_status spd_replica_losses(const spd_ctx *ctx, const spd_sizes *z, const spd_site_params *sites,
                             const spd_conv *conv, spd_replica *rep);

#endif
