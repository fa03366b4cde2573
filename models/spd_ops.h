/* The ops of the SPD decomposition step (seeds 000, 001; shared/DESIGN.md "The SPD decomposition
 * step"), forward and backward, on one data-parallel replica's tokens.
 *
 * Values live in double arrays; `dt` is the precision the step runs in, and every stored output
 * element is rounded once to it (spd_rnd): fp32 for the case, fp64 for the finite-difference
 * tests. Each output element is one sum accumulated in fp64 in ascending index order, so a value
 * depends on its data only, never on how many tokens a replica holds; what a layout changes is
 * which partial sums are rounded and then all-reduced (over tp here, over dp in models/spd.c).
 * The sums run in models/spd_rows.h's loops (unit-stride, vectorised, threaded), which keep that
 * order element by element.
 *
 * Letters: T tokens of this replica (batch rows x positions, row-major [b, s]), D d_in, O d_out,
 * C components of a site, H hidden width of the causal-importance (CI) function.
 *
 * Tensor parallelism splits components: tp rank r owns components [r C/tp, (r+1) C/tp), i.e.
 * columns of V [D, C] and of W2 [H, C], rows of U [C, O] and entries of b2 [C]. Arrays are held
 * full with each rank reading its block; partial results of the ranks are rounded per rank and
 * summed with a SUM all-reduce over the tp group (spd_tp_sum). Backward functions overwrite
 * their outputs unless they say +=. */
#ifndef EQUIV_MODELS_SPD_OPS_H
#define EQUIV_MODELS_SPD_OPS_H

#include <stdint.h>

#include "harness/base/bf16.h"
#include "harness/base/tensor.h"
#include "reductions/collectives.h"

typedef struct {
    eq_dtype dt;                   /* EQ_FP32 or EQ_FP64 */
    int tp;                        /* component shards */
    eq_group tp_group;             /* the tp all-reduces' group (size tp): every rank in this process
                                      (sim), or this process's one (--comm mpi, nccl). The partial
                                      sums are computed for its local ranks only. */
    double lower_alpha;            /* ci_lower's surrogate slope below 0: SPD_LEAKY_ALPHA in the
                                      step; 0 in the finite-difference tests (the true derivative) */
} spd_ctx;

/* x rounded once (nearest even) to dt. Inline: called once per stored element. The build's
 * -ffp-contract=off keeps an inlined rounding from merging with the product or sum around it (a
 * fused multiply-add would round once where the step rounds twice), and x86-64's SSE2 arithmetic
 * has no excess precision (FLT_EVAL_METHOD 0), so inlined or called, the value is the same. */
static inline double spd_rnd(eq_dtype dt, double x)
{
    switch (dt) {
    case EQ_FP32: return (double)(float)x; /* C's conversion rounds to nearest even */
    case EQ_BF16: return (double)eq_bf16_to_f32(eq_f64_to_bf16(x));
    case EQ_FP64: return x;
    }
    return x;
}

/* First component of tp rank r: r C / tp. */
static inline int64_t spd_c0(int64_t C, int tp, int r) { return (int64_t)r * C / tp; }

/* parts [n_local][n] (one partial per local rank of ctx->tp_group, already rounded) -> out[n], the
 * SUM all-reduce over the tp group in dt (tp = 1: a copy). */
eq_status spd_tp_sum(const spd_ctx *ctx, const double *parts, int64_t n, double *out);

/* RMSNorm without a weight (the target's norm weights are folded in: they are frozen):
 *   out = in * rstd, rstd = 1 / sqrt(mean(in^2) + 1e-6)         per row of D
 *   din = rstd (dout - out mean(dout * out)) */
#define SPD_RMSNORM_EPS 1e-6
void spd_rmsnorm_forward(eq_dtype dt, int64_t T, int64_t D, double *out, double *rstd, const double *in);
void spd_rmsnorm_backward(eq_dtype dt, int64_t T, int64_t D, double *din, const double *dout, const double *out,
                          const double *rstd);

/* GELU, tanh approximation (the target MLP's activation, as LlamaSimpleMLP's gelu_new):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void spd_gelu_tanh_forward(eq_dtype dt, int64_t n, double *out, const double *in);
void spd_gelu_tanh_backward(eq_dtype dt, int64_t n, double *din, const double *dout, const double *in);
/* GELU with erf (the CI function's): x Phi(x). */
void spd_gelu_erf_forward(eq_dtype dt, int64_t n, double *out, const double *in);
void spd_gelu_erf_backward(eq_dtype dt, int64_t n, double *din, const double *dout, const double *in);

/* Leaky-hard sigmoids (alpha 0.01 in the step).
 * lower: forward clamp(z, 0, 1); backward a surrogate: dout where 0 <= z <= 1, alpha dout where
 *        z < 0 (so a component switched off still hears the loss), 0 where z > 1. With alpha = 0
 *        it is the true derivative of the forward (what the finite-difference tests check).
 * upper: forward 0 for z < 0, z on [0, 1], 1 + alpha (z - 1) above; backward its derivative. */
#define SPD_LEAKY_ALPHA 0.01
void spd_lower_leaky_forward(eq_dtype dt, int64_t n, double *out, const double *z);
void spd_upper_leaky_forward(eq_dtype dt, int64_t n, double *out, const double *z, double alpha);
/* dz += the op's backward of dout. */
void spd_lower_leaky_backward(eq_dtype dt, int64_t n, double *dz, const double *dout, const double *z, double alpha);
void spd_upper_leaky_backward(eq_dtype dt, int64_t n, double *dz, const double *dout, const double *z, double alpha);

/* Stochastic mask m = ci + (1 - ci) s (s: uniform noise, or PGD sources).
 * Backward: dci += dm (1 - s); ds = dm (1 - ci) (overwritten; ds may be NULL). */
void spd_mask_forward(eq_dtype dt, int64_t n, double *m, const double *ci, const double *s);
void spd_mask_backward(eq_dtype dt, int64_t n, double *dci, double *ds, const double *dm, const double *ci,
                       const double *s);

/* out[T, N] = x[T, K] W[N, K]^T (the target's frozen linears, torch.nn.Linear's weight layout). */
eq_status spd_linear_nt(eq_dtype dt, int64_t T, int64_t K, int64_t N, double *out, const double *x, const double *W);

/* A decomposed site: V [D, C], U [C, O], target W [O, D], and E = W^T - V U [D, O] (Delta^T).
 * spd_delta: E from the tp partials V_r U_r, SUM all-reduced, subtracted from W^T. */
typedef struct {
    int64_t D, O, C;
    const double *W, *V, *U, *E;
} spd_site;
eq_status spd_delta(const spd_ctx *ctx, int64_t D, int64_t O, int64_t C, const double *W, const double *V,
                    const double *U, double *E);

/* What a site's forward keeps for its backward: xv = x V [T, C], mv = xv * m [T, C], xe = x E [T, O]. */
typedef struct {
    double *xv, *mv, *xe;
} spd_site_cache;

/* Forward of a site on T tokens: mask m [T, C], delta mask d [T], route [T] (NULL: every token
 * routed through the components; 0: the token uses the target weight, out = x W^T).
 *   routed: out = sum_r (xv_r * m_r) U_r  (SUM all-reduce over tp)  + d * (x E)
 * out [T, O]. */
eq_status spd_site_forward(const spd_ctx *ctx, const spd_site *s, int64_t T, const double *x, const double *m,
                           const double *d, const unsigned char *route, spd_site_cache *cache, double *out);

/* Backward of a site: dout [T, O] ->
 *   dx [T, O->D]: routed sum_r ((dout U_r^T) * m_r) V_r^T (SUM all-reduce over tp) + d * dout E^T;
 *                 unrouted dout W
 *   dm [T, C] = (dout U^T) * xv;   dd [T] = <dout, x E>
 *   dV += x^T ((dout U^T) * m) - G U^T,   dU += mv^T dout - V^T G,   G = x^T (d * dout) [D, O]
 * (dV, dU accumulate: a site's gradient sums over the losses that use it). Unrouted tokens send
 * nothing to V, U, m, d. dx may be NULL (the first site: nothing upstream is trained); dV and dU
 * may both be NULL (the PGD warm-up: only the masks' gradients are used). */
eq_status spd_site_backward(const spd_ctx *ctx, const spd_site *s, int64_t T, const double *x, const double *m,
                            const double *d, const unsigned char *route, const spd_site_cache *cache,
                            const double *dout, double *dx, double *dm, double *dd, double *dV, double *dU);

/* The causal-importance function of a site: x [T, D] -> z [T, C]
 *   hpre = x W1 + b1 [T, H],  hg = GELU_erf(hpre),  z = hg W2 + b2
 * W1 [D, H], b1 [H] are replicated over tp; W2 [H, C], b2 [C] split by components (each z element
 * is computed whole by its owner rank). */
typedef struct {
    int64_t D, H, C;
    const double *W1, *b1, *W2, *b2;
} spd_ci_fn;
void spd_ci_forward(eq_dtype dt, const spd_ci_fn *f, int64_t T, const double *x, double *hpre, double *hg,
                    double *z);
/* dz [T, C] -> dW2 = hg^T dz, db2 = sum_t dz (each rank its columns), dhg = sum_r dz_r W2_r^T
 * (SUM all-reduce over tp), dhpre = dhg GELU'(hpre), dW1 = x^T dhpre, db1 = sum_t dhpre.
 * Overwritten. The input x gets no gradient (the CI function reads the target's activations). */
eq_status spd_ci_backward(const spd_ctx *ctx, const spd_ci_fn *f, int64_t T, const double *x, const double *hpre,
                          const double *hg, const double *dz, double *dW1, double *db1, double *dW2, double *db2);

#endif
