/* The GPT block's row and element ops (models/ops.h):
 *   - every gradient against central finite differences in fp64: LayerNorm (din, dgamma, dbeta),
 *     GELU, attention (every element of qkv), MSE; and MSE's loss on a hand-computed example;
 *   - LayerNorm rows come out with mean 0 and variance var/(var + eps) (gamma 1, beta 0);
 *   - softmax rows sum to 1 (ctx of an all-ones V is 1), masked P entries are exactly 0, and the
 *     causal mask holds both ways (a key/value at j moves no output row i < j; rows i >= j send
 *     it no gradient);
 *   - fp32 and bf16 forwards lie within 8 roundings of their dtype of the fp64 forward;
 *   - row independence: a B = 1 input built from batch column 0 gives, bit for bit, column 0 of
 *     the B = 2 result (LayerNorm and attention, forward and backward, fp32 and bf16), which the
 *     harness's data parallelism relies on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "harness/base/rng.h"
#include "harness/base/testing.h"
#include "models/ops.h"

#define SEED 2024

/* LayerNorm: [LN_S, LN_B, LN_H], rows = LN_S * LN_B. Attention: qkv [AT_S, AT_B, AT_HEADS, 3, AT_D]. */
enum { LN_S = 5, LN_B = 2, LN_H = 16, LN_ROWS = LN_S * LN_B };
enum { AT_S = 7, AT_B = 2, AT_HEADS = 2, AT_D = 4 };
enum { AT_QKV_W = AT_HEADS * 3 * AT_D, AT_CTX_W = AT_HEADS * AT_D }; /* widths of one token's row */

static void *test_alloc(eq_dtype dt, int64_t n)
{
    void *p = calloc((size_t)(n > 0 ? n : 1), eq_dtype_size(dt));
    if (p == NULL) {
        fprintf(stderr, "ops_test: out of memory\n");
        abort();
    }
    return p;
}

/* n values std * N(0,1) + offset, rounded once to dt, keyed by `name`. */
static void *random_buffer(eq_dtype dt, int64_t n, const char *name, double std, double offset)
{
    void *buf = test_alloc(dt, n);
    const uint32_t stream = eq_rng_stream(name);
    for (int64_t i = 0; i < n; i++) eq_buffer_set(dt, buf, i, offset + std * eq_rng_normal(SEED, stream, (uint64_t)i));
    return buf;
}

/* The same values in another dtype (rounded once; exact when widening). */
static void *converted(eq_dtype to, eq_dtype from, const void *src, int64_t n)
{
    void *dst = test_alloc(to, n);
    for (int64_t i = 0; i < n; i++) eq_buffer_set(to, dst, i, eq_buffer_get(from, src, i));
    return dst;
}

static void fill(double *buf, int64_t n, double v)
{
    for (int64_t i = 0; i < n; i++) buf[i] = v;
}

static double weighted_sum(const double *w, const double *out, int64_t n)
{
    double f = 0;
    for (int64_t i = 0; i < n; i++) f += w[i] * out[i];
    return f;
}

/* ---- finite differences ----
 * An objective is f = sum_i w_i out_i (or the loss itself) at the problem's current inputs. The
 * central difference (f(x + h) - f(x - h)) / (2h), h = 1e-6 max(1, |x|), has truncation error
 * f''' h^2 / 6 ~ 1e-12 and cancellation error ~ eps |f| / h ~ 1e-16 * 10 / 1e-6 = 1e-9 for these
 * sizes (|f| of order 10, derivatives of order 1). So a right gradient shows errors near 1e-9 and
 * the bound 1e-6 leaves three orders of margin, while a wrong term (of order 1) lands far above
 * it. The error is relative where |grad| > 1 and absolute below, so near-zero gradients do not
 * turn rounding noise into a large relative error. */
#define FD_BOUND 1e-6

typedef double (*objective_fn)(void *problem);

/* Max over i < n of |fd_i - grad_i| / max(1, |grad_i|), perturbing x[i] in place (restored). */
static double fd_max_error(objective_fn f, void *problem, double *x, const double *grad, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x0 = x[i], h = 1e-6 * fmax(1.0, fabs(x0)), up = x0 + h, down = x0 - h;
        x[i] = up;
        const double f_up = f(problem);
        x[i] = down;
        const double f_down = f(problem);
        x[i] = x0;
        const double fd = (f_up - f_down) / (up - down); /* the step actually taken */
        const double err = fabs(fd - grad[i]) / fmax(1.0, fabs(grad[i]));
        if (!(err <= worst)) worst = err; /* NaN sticks */
    }
    return worst;
}

/* ---- LayerNorm ---- */

typedef struct {
    int64_t rows, H;
    double *x, *gamma, *beta, *w; /* [rows, H], [H], [H], [rows, H] */
    double *out, *mean, *rstd;    /* [rows, H], [rows], [rows] */
} ln_problem;

static double ln_objective(void *problem)
{
    ln_problem *p = problem;
    EQ_EXPECT_OK(eq_layernorm_forward(EQ_FP64, p->rows, p->H, p->out, p->mean, p->rstd, p->x, p->gamma, p->beta));
    return weighted_sum(p->w, p->out, p->rows * p->H);
}

static void test_layernorm_gradients(void)
{
    const int64_t n = LN_ROWS * LN_H;
    ln_problem p = {LN_ROWS, LN_H, random_buffer(EQ_FP64, n, "ln/x", 2.0, 0.5),
                    random_buffer(EQ_FP64, LN_H, "ln/gamma", 0.5, 1.0), random_buffer(EQ_FP64, LN_H, "ln/beta", 0.5, 0),
                    random_buffer(EQ_FP64, n, "ln/w", 1.0, 0), test_alloc(EQ_FP64, n), test_alloc(EQ_FP64, LN_ROWS),
                    test_alloc(EQ_FP64, LN_ROWS)};
    double *din = test_alloc(EQ_FP64, n), *dgamma = test_alloc(EQ_FP64, LN_H), *dbeta = test_alloc(EQ_FP64, LN_H);
    fill(din, n, NAN), fill(dgamma, LN_H, NAN), fill(dbeta, LN_H, NAN); /* the backward overwrites */
    ln_objective(&p);
    EQ_EXPECT_OK(eq_layernorm_backward(EQ_FP64, LN_ROWS, LN_H, din, dgamma, dbeta, p.w, p.x, p.mean, p.rstd, p.gamma));
    const double err_x = fd_max_error(ln_objective, &p, p.x, din, n);
    const double err_gamma = fd_max_error(ln_objective, &p, p.gamma, dgamma, LN_H);
    const double err_beta = fd_max_error(ln_objective, &p, p.beta, dbeta, LN_H);
    EQ_EXPECT(err_x < FD_BOUND, "layernorm din: finite-difference error %.3g", err_x);
    EQ_EXPECT(err_gamma < FD_BOUND, "layernorm dgamma: finite-difference error %.3g", err_gamma);
    EQ_EXPECT(err_beta < FD_BOUND, "layernorm dbeta: finite-difference error %.3g", err_beta);
    printf("layernorm FD errors: din %.2g, dgamma %.2g, dbeta %.2g\n", err_x, err_gamma, err_beta);
    free(p.x), free(p.gamma), free(p.beta), free(p.w), free(p.out), free(p.mean), free(p.rstd);
    free(din), free(dgamma), free(dbeta);
}

/* With gamma 1, beta 0 each output row has mean 0 and (biased) variance var / (var + eps), var the
 * input row's variance; the saved mean and rstd are the row's. */
static void test_layernorm_normalises(void)
{
    const int64_t n = LN_ROWS * LN_H;
    double *x = random_buffer(EQ_FP64, n, "ln/x", 2.0, 0.5), *out = test_alloc(EQ_FP64, n);
    double *gamma = test_alloc(EQ_FP64, LN_H), *beta = test_alloc(EQ_FP64, LN_H);
    double mean[LN_ROWS], rstd[LN_ROWS];
    fill(gamma, LN_H, 1.0);
    EQ_EXPECT_OK(eq_layernorm_forward(EQ_FP64, LN_ROWS, LN_H, out, mean, rstd, x, gamma, beta));
    for (int r = 0; r < LN_ROWS; r++) {
        double in_mean = 0, in_var = 0, out_mean = 0, out_var = 0;
        for (int j = 0; j < LN_H; j++) in_mean += x[r * LN_H + j], out_mean += out[r * LN_H + j];
        in_mean /= LN_H, out_mean /= LN_H;
        for (int j = 0; j < LN_H; j++) {
            in_var += (x[r * LN_H + j] - in_mean) * (x[r * LN_H + j] - in_mean);
            out_var += (out[r * LN_H + j] - out_mean) * (out[r * LN_H + j] - out_mean);
        }
        in_var /= LN_H, out_var /= LN_H;
        EQ_EXPECT(fabs(out_mean) < 1e-14, "layernorm row %d: output mean %.3g", r, out_mean);
        EQ_EXPECT(fabs(out_var - in_var / (in_var + EQ_LAYERNORM_EPS)) < 1e-14,
                  "layernorm row %d: output variance %.17g", r, out_var);
        EQ_EXPECT(fabs(mean[r] - in_mean) < 1e-14 && fabs(rstd[r] * sqrt(in_var + EQ_LAYERNORM_EPS) - 1) < 1e-14,
                  "layernorm row %d: saved mean %.17g rstd %.17g", r, mean[r], rstd[r]);
    }
    free(x), free(out), free(gamma), free(beta);
}

/* ---- GELU ---- */

typedef struct {
    int64_t n;
    double *x, *w, *out;
} gelu_problem;

static double gelu_objective(void *problem)
{
    gelu_problem *p = problem;
    eq_gelu_forward(EQ_FP64, p->n, p->out, p->x);
    return weighted_sum(p->w, p->out, p->n);
}

static void test_gelu(void)
{
    enum { N = 64 };
    gelu_problem p = {N, random_buffer(EQ_FP64, N, "gelu/x", 2.0, 0), random_buffer(EQ_FP64, N, "gelu/w", 1.0, 0),
                      test_alloc(EQ_FP64, N)};
    double *din = test_alloc(EQ_FP64, N);
    fill(din, N, NAN);
    eq_gelu_backward(EQ_FP64, N, din, p.w, p.x);
    const double err = fd_max_error(gelu_objective, &p, p.x, din, N);
    EQ_EXPECT(err < FD_BOUND, "gelu: finite-difference error %.3g", err);
    printf("gelu FD error %.2g\n", err);

    /* gelu(x) = x Phi(x): Phi(1) = 0.841344746068542948..., gelu(-1) = -(1 - Phi(1)). */
    const double x[3] = {0, 1, -1}, want[3] = {0, 0.84134474606854293, -0.15865525393145707};
    double got[3];
    eq_gelu_forward(EQ_FP64, 3, got, x);
    for (int i = 0; i < 3; i++)
        EQ_EXPECT(fabs(got[i] - want[i]) <= 4e-16, "gelu(%g) = %.17g, want %.17g", x[i], got[i], want[i]);
    free(p.x), free(p.w), free(p.out), free(din);
}

/* ---- attention ---- */

/* Element (s, b, head, part, d) of qkv [S, B, heads, 3, D]; part 0 q, 1 k, 2 v. */
static int64_t qkv_index(int64_t B, int64_t s, int64_t b, int64_t head, int part, int64_t d)
{
    return ((s * B + b) * AT_HEADS + head) * 3 * AT_D + part * AT_D + d;
}

typedef struct {
    double *qkv, *w, *ctx; /* [S, B, heads, 3, D], [S, B, heads, D], [S, B, heads, D] */
} attention_problem;

static double attention_objective(void *problem)
{
    attention_problem *p = problem;
    EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, EQ_FP64, AT_S, AT_B, AT_HEADS, AT_D, p->ctx, p->qkv));
    return weighted_sum(p->w, p->ctx, AT_S * AT_B * AT_CTX_W);
}

static void test_attention_gradients(void)
{
    const int64_t n_qkv = AT_S * AT_B * AT_QKV_W, n_ctx = AT_S * AT_B * AT_CTX_W;
    attention_problem p = {random_buffer(EQ_FP64, n_qkv, "attn/qkv", 1.0, 0),
                           random_buffer(EQ_FP64, n_ctx, "attn/w", 1.0, 0), test_alloc(EQ_FP64, n_ctx)};
    double *dqkv = test_alloc(EQ_FP64, n_qkv);
    fill(dqkv, n_qkv, NAN);
    EQ_EXPECT_OK(eq_attention_backward(&eq_backend_cpu, EQ_FP64, AT_S, AT_B, AT_HEADS, AT_D, dqkv, p.w, p.qkv));
    const double err = fd_max_error(attention_objective, &p, p.qkv, dqkv, n_qkv);
    EQ_EXPECT(err < FD_BOUND, "attention dqkv: finite-difference error %.3g", err);
    printf("attention FD error %.2g\n", err);
    free(p.qkv), free(p.w), free(p.ctx), free(dqkv);
}

/* Forward: adding 1 to every key and value at position j leaves rows i < j of ctx bit for bit
 * and moves row j. Backward: with dctx zero on rows i >= j, dK and dV at j are exactly 0. */
static void test_attention_causal_mask(eq_dtype dt)
{
    const int64_t n_qkv = AT_S * AT_B * AT_QKV_W, n_ctx = AT_S * AT_B * AT_CTX_W;
    const int64_t position = AT_B * AT_CTX_W; /* elements of ctx per sequence position */
    const size_t elem = eq_dtype_size(dt);
    void *qkv = random_buffer(dt, n_qkv, "attn/qkv", 1.0, 0), *moved = test_alloc(dt, n_qkv);
    void *ctx = test_alloc(dt, n_ctx), *ctx_moved = test_alloc(dt, n_ctx);
    void *dctx = random_buffer(dt, n_ctx, "attn/dctx", 1.0, 0), *dqkv = test_alloc(dt, n_qkv);
    EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, dt, AT_S, AT_B, AT_HEADS, AT_D, ctx, qkv));
    for (int64_t j = 0; j < AT_S; j++) {
        memcpy(moved, qkv, (size_t)n_qkv * elem);
        for (int64_t b = 0; b < AT_B; b++)
            for (int64_t h = 0; h < AT_HEADS; h++)
                for (int64_t d = 0; d < AT_D; d++)
                    for (int part = 1; part <= 2; part++) {
                        const int64_t i = qkv_index(AT_B, j, b, h, part, d);
                        eq_buffer_set(dt, moved, i, eq_buffer_get(dt, qkv, i) + 1.0);
                    }
        EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, dt, AT_S, AT_B, AT_HEADS, AT_D, ctx_moved, moved));
        EQ_EXPECT(memcmp(ctx, ctx_moved, (size_t)(j * position) * elem) == 0,
                  "%s: moving keys/values at position %lld changed an earlier output row", eq_dtype_name(dt),
                  (long long)j);
        const size_t row_j = (size_t)(j * position) * elem;
        EQ_EXPECT(memcmp((char *)ctx + row_j, (char *)ctx_moved + row_j, (size_t)position * elem) != 0,
                  "%s: moving keys/values at position %lld left its own row unchanged", eq_dtype_name(dt),
                  (long long)j);

        /* Backward: zero dctx on rows >= j. */
        void *dctx_early = converted(dt, dt, dctx, n_ctx); /* a copy */
        for (int64_t i = j * position; i < n_ctx; i++) eq_buffer_set(dt, dctx_early, i, 0);
        EQ_EXPECT_OK(eq_attention_backward(&eq_backend_cpu, dt, AT_S, AT_B, AT_HEADS, AT_D, dqkv, dctx_early, qkv));
        int nonzero = 0;
        for (int64_t b = 0; b < AT_B; b++)
            for (int64_t h = 0; h < AT_HEADS; h++)
                for (int64_t d = 0; d < AT_D; d++)
                    for (int part = 1; part <= 2; part++)
                        nonzero += eq_buffer_get(dt, dqkv, qkv_index(AT_B, j, b, h, part, d)) != 0;
        EQ_EXPECT(nonzero == 0, "%s: %d key/value gradients at position %lld from later rows", eq_dtype_name(dt),
                  nonzero, (long long)j);
        free(dctx_early);
    }
    free(qkv), free(moved), free(ctx), free(ctx_moved), free(dctx), free(dqkv);
}

/* Softmax rows sum to 1: with V all ones, ctx = sum_j P_ij = 1 up to the roundings of P (each
 * relative u), of the sums and of ctx itself: within (S + 4) u of the dtype. With V = the
 * identity (D = 8 >= S), ctx row i is P row i exactly: masked entries are exactly 0. */
static void test_softmax_rows(eq_dtype dt)
{
    enum { D_ID = 8 };
    const double u = eq_dtype_unit_roundoff(dt);
    const int64_t n_qkv = AT_S * AT_B * AT_QKV_W, n_ctx = AT_S * AT_B * AT_CTX_W;
    void *qkv = random_buffer(dt, n_qkv, "attn/qkv", 1.0, 0), *ctx = test_alloc(dt, n_ctx);
    for (int64_t s = 0; s < AT_S; s++)
        for (int64_t b = 0; b < AT_B; b++)
            for (int64_t h = 0; h < AT_HEADS; h++)
                for (int64_t d = 0; d < AT_D; d++) eq_buffer_set(dt, qkv, qkv_index(AT_B, s, b, h, 2, d), 1.0);
    EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, dt, AT_S, AT_B, AT_HEADS, AT_D, ctx, qkv));
    double worst = 0;
    for (int64_t i = 0; i < n_ctx; i++) worst = fmax(worst, fabs(eq_buffer_get(dt, ctx, i) - 1));
    EQ_EXPECT(worst <= (AT_S + 4) * u, "%s: ctx of all-ones V is off 1 by %.3g", eq_dtype_name(dt), worst);

    /* One head, B = 1: qkv [S, 1, 1, 3, D_ID]. */
    void *qkv_id = test_alloc(dt, AT_S * 3 * D_ID), *P = test_alloc(dt, AT_S * D_ID);
    const uint32_t stream = eq_rng_stream("attn/qk");
    for (int64_t s = 0; s < AT_S; s++)
        for (int64_t d = 0; d < D_ID; d++) {
            eq_buffer_set(dt, qkv_id, s * 3 * D_ID + d, eq_rng_normal(SEED, stream, (uint64_t)(2 * (s * D_ID + d))));
            eq_buffer_set(dt, qkv_id, s * 3 * D_ID + D_ID + d,
                          eq_rng_normal(SEED, stream, (uint64_t)(2 * (s * D_ID + d) + 1)));
            eq_buffer_set(dt, qkv_id, s * 3 * D_ID + 2 * D_ID + d, s == d);
        }
    EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, dt, AT_S, 1, 1, D_ID, P, qkv_id));
    for (int64_t i = 0; i < AT_S; i++) {
        double sum = 0;
        int masked_nonzero = 0, negative = 0;
        for (int64_t j = 0; j < D_ID; j++) {
            const double p = eq_buffer_get(dt, P, i * D_ID + j);
            if (j > i) masked_nonzero += p != 0;
            negative += p < 0;
            sum += p;
        }
        EQ_EXPECT(masked_nonzero == 0 && negative == 0, "%s: row %lld of P has %d nonzero masked, %d negative entries",
                  eq_dtype_name(dt), (long long)i, masked_nonzero, negative);
        EQ_EXPECT(fabs(sum - 1) <= (AT_S + 4) * u, "%s: row %lld of P sums to %.17g", eq_dtype_name(dt), (long long)i,
                  sum);
    }
    free(qkv), free(ctx), free(qkv_id), free(P);
}

/* ---- MSE and add ---- */

typedef struct {
    int64_t n;
    double count;
    double *y, *target, *dy_scratch;
} mse_problem;

static double mse_objective(void *problem)
{
    mse_problem *p = problem;
    double loss = NAN;
    EQ_EXPECT_OK(eq_mse_forward_backward(EQ_FP64, p->n, p->count, p->y, p->target, &loss, p->dy_scratch));
    return loss;
}

static void test_mse(void)
{
    enum { N = 20 };
    mse_problem p = {N, 50.0, random_buffer(EQ_FP64, N, "mse/y", 1.0, 0), random_buffer(EQ_FP64, N, "mse/t", 1.0, 0),
                     test_alloc(EQ_FP64, N)};
    double *dy = test_alloc(EQ_FP64, N), loss = 0;
    fill(dy, N, NAN);
    EQ_EXPECT_OK(eq_mse_forward_backward(EQ_FP64, N, p.count, p.y, p.target, &loss, dy));
    const double err = fd_max_error(mse_objective, &p, p.y, dy, N);
    EQ_EXPECT(err < FD_BOUND, "mse dy: finite-difference error %.3g", err);
    printf("mse FD error %.2g\n", err);
    free(p.y), free(p.target), free(p.dy_scratch), free(dy);

    /* By hand, normalised by a count (8) larger than the local n (4), as under the sum convention:
     * diffs 1, 0, -2, 3: loss = 14 / 8; dy = 2 diff / 8. All exact in every dtype. */
    const double y[4] = {1, 2, 3, 4}, t[4] = {0, 2, 5, 1}, want_dy[4] = {0.25, 0, -0.5, 0.75};
    for (int d = 0; d < EQ_DTYPE_COUNT; d++) {
        const eq_dtype dt = (eq_dtype)d;
        void *yd = converted(dt, EQ_FP64, y, 4), *td = converted(dt, EQ_FP64, t, 4), *dyd = test_alloc(dt, 4);
        double hand_loss = 0;
        EQ_EXPECT_OK(eq_mse_forward_backward(dt, 4, 8.0, yd, td, &hand_loss, dyd));
        EQ_EXPECT(hand_loss == 1.75, "%s: mse loss %.17g, want 1.75", eq_dtype_name(dt), hand_loss);
        for (int i = 0; i < 4; i++)
            EQ_EXPECT(eq_buffer_get(dt, dyd, i) == want_dy[i], "%s: dy[%d] = %.17g, want %g", eq_dtype_name(dt), i,
                      eq_buffer_get(dt, dyd, i), want_dy[i]);
        free(yd), free(td), free(dyd);
    }
}

/* bf16: one widened fp32 add and one rounding, i.e. eq_bf16_add; also in place (out = a). */
static void test_add(void)
{
    enum { N = 256 };
    uint16_t *a = random_buffer(EQ_BF16, N, "add/a", 1.0, 0), *b = random_buffer(EQ_BF16, N, "add/b", 0.01, 0);
    uint16_t *out = test_alloc(EQ_BF16, N), *want = test_alloc(EQ_BF16, N);
    for (int i = 0; i < N; i++) want[i] = eq_bf16_add(a[i], b[i]);
    eq_add(EQ_BF16, N, out, a, b);
    EQ_EXPECT(memcmp(out, want, N * sizeof *out) == 0, "bf16 add differs from eq_bf16_add");
    eq_add(EQ_BF16, N, a, a, b);
    EQ_EXPECT(memcmp(a, want, N * sizeof *a) == 0, "bf16 add in place differs from eq_bf16_add");
    free(a), free(b), free(out), free(want);
}

/* ---- fp32 and bf16 against fp64 ----
 * Inputs are drawn in dt and widened exactly for the fp64 run, so only the op's own roundings
 * count. Each forward rounds its output once (u |out|) after an fp32 computation: LayerNorm's
 * error is a few fp32 units of |x| rstd |gamma| (the rounded mean and variance of 16 values; about
 * 4 u here, with |x| up to 6), GELU's about one (erff); attention adds the dt roundings of the
 * scores (moving P by about u |z|, |z| ~ 1 for these inputs) and of P (u) to ctx's own. So a
 * handful of u in all, and 8 u max(1, |out64|) bounds it; a wrong formula or a rounding to the
 * wrong dtype lands orders above. */
#define DTYPE_BOUND_UNITS 8.0

/* Max over i of |got_i - ref_i| / (u max(1, |ref_i|)). */
static double max_units(eq_dtype dt, const void *got, const double *ref, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const double units =
            fabs(eq_buffer_get(dt, got, i) - ref[i]) / (eq_dtype_unit_roundoff(dt) * fmax(1, fabs(ref[i])));
        if (!(units <= worst)) worst = units;
    }
    return worst;
}

static void test_dtypes_against_fp64(eq_dtype dt)
{
    const char *name = eq_dtype_name(dt);
    { /* LayerNorm */
        const int64_t n = LN_ROWS * LN_H;
        void *x = random_buffer(dt, n, "ln/x", 2.0, 0.5), *gamma = random_buffer(dt, LN_H, "ln/gamma", 0.5, 1.0);
        void *beta = random_buffer(dt, LN_H, "ln/beta", 0.5, 0), *out = test_alloc(dt, n);
        double *x64 = converted(EQ_FP64, dt, x, n), *gamma64 = converted(EQ_FP64, dt, gamma, LN_H);
        double *beta64 = converted(EQ_FP64, dt, beta, LN_H), *out64 = test_alloc(EQ_FP64, n);
        double mean[LN_ROWS], rstd[LN_ROWS], mean64[LN_ROWS], rstd64[LN_ROWS];
        EQ_EXPECT_OK(eq_layernorm_forward(dt, LN_ROWS, LN_H, out, mean, rstd, x, gamma, beta));
        EQ_EXPECT_OK(eq_layernorm_forward(EQ_FP64, LN_ROWS, LN_H, out64, mean64, rstd64, x64, gamma64, beta64));
        const double units = max_units(dt, out, out64, n);
        EQ_EXPECT(units <= DTYPE_BOUND_UNITS, "%s layernorm: %.3g units of rounding from fp64", name, units);
        printf("%s layernorm forward: %.2f u from fp64\n", name, units);
        free(x), free(gamma), free(beta), free(out), free(x64), free(gamma64), free(beta64), free(out64);
    }
    { /* GELU */
        enum { N = 64 };
        void *x = random_buffer(dt, N, "gelu/x", 2.0, 0), *out = test_alloc(dt, N);
        double *x64 = converted(EQ_FP64, dt, x, N), *out64 = test_alloc(EQ_FP64, N);
        eq_gelu_forward(dt, N, out, x);
        eq_gelu_forward(EQ_FP64, N, out64, x64);
        const double units = max_units(dt, out, out64, N);
        EQ_EXPECT(units <= DTYPE_BOUND_UNITS, "%s gelu: %.3g units of rounding from fp64", name, units);
        printf("%s gelu forward: %.2f u from fp64\n", name, units);
        free(x), free(out), free(x64), free(out64);
    }
    { /* attention */
        const int64_t n_qkv = AT_S * AT_B * AT_QKV_W, n_ctx = AT_S * AT_B * AT_CTX_W;
        void *qkv = random_buffer(dt, n_qkv, "attn/qkv", 1.0, 0), *ctx = test_alloc(dt, n_ctx);
        double *qkv64 = converted(EQ_FP64, dt, qkv, n_qkv), *ctx64 = test_alloc(EQ_FP64, n_ctx);
        EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, dt, AT_S, AT_B, AT_HEADS, AT_D, ctx, qkv));
        EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, EQ_FP64, AT_S, AT_B, AT_HEADS, AT_D, ctx64, qkv64));
        const double units = max_units(dt, ctx, ctx64, n_ctx);
        EQ_EXPECT(units <= DTYPE_BOUND_UNITS, "%s attention: %.3g units of rounding from fp64", name, units);
        printf("%s attention forward: %.2f u from fp64\n", name, units);
        free(qkv), free(ctx), free(qkv64), free(ctx64);
    }
}

/* ---- row independence ----
 * Data parallelism hands each rank some batch columns; a column's results must not depend on
 * which others sit beside it. Buffers are [S, B, width]; column b of every position. */
static void *batch_column(eq_dtype dt, int64_t S, int64_t B, int64_t width, int64_t b, const void *src)
{
    const size_t elem = eq_dtype_size(dt);
    char *dst = test_alloc(dt, S * width);
    for (int64_t s = 0; s < S; s++)
        memcpy(dst + (size_t)(s * width) * elem, (const char *)src + (size_t)((s * B + b) * width) * elem,
               (size_t)width * elem);
    return dst;
}

static int same_as_column0(eq_dtype dt, int64_t S, int64_t B, int64_t width, const void *full, const void *alone)
{
    void *column = batch_column(dt, S, B, width, 0, full);
    const int same = memcmp(column, alone, (size_t)(S * width) * eq_dtype_size(dt)) == 0;
    free(column);
    return same;
}

static void test_row_independence(eq_dtype dt)
{
    const char *name = eq_dtype_name(dt);
    { /* LayerNorm forward and din, [LN_S, LN_B, LN_H] against [LN_S, 1, LN_H] */
        const int64_t n = LN_ROWS * LN_H;
        void *x = random_buffer(dt, n, "ln/x", 2.0, 0.5), *dout = random_buffer(dt, n, "ln/w", 1.0, 0);
        void *gamma = random_buffer(dt, LN_H, "ln/gamma", 0.5, 1.0), *beta = random_buffer(dt, LN_H, "ln/beta", 0.5, 0);
        void *out = test_alloc(dt, n), *din = test_alloc(dt, n), *dgamma = test_alloc(dt, LN_H);
        void *dbeta = test_alloc(dt, LN_H);
        void *x1 = batch_column(dt, LN_S, LN_B, LN_H, 0, x), *dout1 = batch_column(dt, LN_S, LN_B, LN_H, 0, dout);
        void *out1 = test_alloc(dt, LN_S * LN_H), *din1 = test_alloc(dt, LN_S * LN_H);
        double mean[LN_ROWS], rstd[LN_ROWS], mean1[LN_S], rstd1[LN_S];
        EQ_EXPECT_OK(eq_layernorm_forward(dt, LN_ROWS, LN_H, out, mean, rstd, x, gamma, beta));
        EQ_EXPECT_OK(eq_layernorm_backward(dt, LN_ROWS, LN_H, din, dgamma, dbeta, dout, x, mean, rstd, gamma));
        EQ_EXPECT_OK(eq_layernorm_forward(dt, LN_S, LN_H, out1, mean1, rstd1, x1, gamma, beta));
        EQ_EXPECT_OK(eq_layernorm_backward(dt, LN_S, LN_H, din1, dgamma, dbeta, dout1, x1, mean1, rstd1, gamma));
        EQ_EXPECT(same_as_column0(dt, LN_S, LN_B, LN_H, out, out1), "%s layernorm: batch column 0 alone differs", name);
        EQ_EXPECT(same_as_column0(dt, LN_S, LN_B, LN_H, din, din1), "%s layernorm din: batch column 0 alone differs",
                  name);
        free(x), free(dout), free(gamma), free(beta), free(out), free(din), free(dgamma), free(dbeta);
        free(x1), free(dout1), free(out1), free(din1);
    }
    { /* attention forward and dqkv, B = AT_B against B = 1 */
        const int64_t n_qkv = AT_S * AT_B * AT_QKV_W, n_ctx = AT_S * AT_B * AT_CTX_W;
        void *qkv = random_buffer(dt, n_qkv, "attn/qkv", 1.0, 0), *dctx = random_buffer(dt, n_ctx, "attn/dctx", 1.0, 0);
        void *ctx = test_alloc(dt, n_ctx), *dqkv = test_alloc(dt, n_qkv);
        void *qkv1 = batch_column(dt, AT_S, AT_B, AT_QKV_W, 0, qkv);
        void *dctx1 = batch_column(dt, AT_S, AT_B, AT_CTX_W, 0, dctx);
        void *ctx1 = test_alloc(dt, AT_S * AT_CTX_W), *dqkv1 = test_alloc(dt, AT_S * AT_QKV_W);
        EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, dt, AT_S, AT_B, AT_HEADS, AT_D, ctx, qkv));
        EQ_EXPECT_OK(eq_attention_backward(&eq_backend_cpu, dt, AT_S, AT_B, AT_HEADS, AT_D, dqkv, dctx, qkv));
        EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, dt, AT_S, 1, AT_HEADS, AT_D, ctx1, qkv1));
        EQ_EXPECT_OK(eq_attention_backward(&eq_backend_cpu, dt, AT_S, 1, AT_HEADS, AT_D, dqkv1, dctx1, qkv1));
        EQ_EXPECT(same_as_column0(dt, AT_S, AT_B, AT_CTX_W, ctx, ctx1), "%s attention: batch column 0 alone differs",
                  name);
        EQ_EXPECT(same_as_column0(dt, AT_S, AT_B, AT_QKV_W, dqkv, dqkv1),
                  "%s attention dqkv: batch column 0 alone differs", name);
        free(qkv), free(dctx), free(ctx), free(dqkv), free(qkv1), free(dctx1), free(ctx1), free(dqkv1);
    }
}

/* Extents that make no sense are refused with a message, not computed. */
static void test_bad_extents(void)
{
    double x = 1, out = 0, mean = 0, rstd = 0, loss = 0;
    EQ_EXPECT(eq_layernorm_forward(EQ_FP64, 1, 0, &out, &mean, &rstd, &x, &x, &x) == EQ_ERR_INTERNAL,
              "layernorm over H = 0 accepted");
    eq_error_clear();
    EQ_EXPECT(eq_attention_forward(&eq_backend_cpu, EQ_FP64, 1, 1, 1, 0, &out, &x) == EQ_ERR_INTERNAL,
              "attention with D = 0 accepted");
    eq_error_clear();
    EQ_EXPECT(eq_mse_forward_backward(EQ_FP64, 1, 0.0, &x, &x, &loss, &out) == EQ_ERR_INTERNAL,
              "mse with count 0 accepted");
    eq_error_clear();
}

/* The CPU backend skips the score blocks above the diagonal (shape_invariant); the same backend
 * told it is not invariant computes the full products. Both give the same bits, forward and
 * backward, at a length of several blocks and a partial last one, and under several threads. */
static void test_causal_blocks(eq_dtype dt)
{
    enum { S = 600, B = 1, HEADS = 2, D = 16 };
    eq_backend full = eq_backend_cpu;
    full.shape_invariant = 0;
    const int64_t n_qkv = (int64_t)S * B * HEADS * 3 * D, n_ctx = (int64_t)S * B * HEADS * D;
    void *qkv = random_buffer(dt, n_qkv, "blocks qkv", 1.0, 0.0), *dctx = random_buffer(dt, n_ctx, "blocks dctx", 1.0, 0.0);
    void *ctx_b = test_alloc(dt, n_ctx), *ctx_f = test_alloc(dt, n_ctx);
    void *dqkv_b = test_alloc(dt, n_qkv), *dqkv_f = test_alloc(dt, n_qkv);
    EQ_EXPECT_OK(eq_attention_forward(&eq_backend_cpu, dt, S, B, HEADS, D, ctx_b, qkv));
    EQ_EXPECT_OK(eq_attention_forward(&full, dt, S, B, HEADS, D, ctx_f, qkv));
    EQ_EXPECT_OK(eq_attention_backward(&eq_backend_cpu, dt, S, B, HEADS, D, dqkv_b, dctx, qkv));
    EQ_EXPECT_OK(eq_attention_backward(&full, dt, S, B, HEADS, D, dqkv_f, dctx, qkv));
    const size_t elem = eq_dtype_size(dt);
    EQ_EXPECT(memcmp(ctx_b, ctx_f, (size_t)n_ctx * elem) == 0, "%s: attention by causal blocks differs from the full "
              "scores", eq_dtype_name(dt));
    EQ_EXPECT(memcmp(dqkv_b, dqkv_f, (size_t)n_qkv * elem) == 0, "%s: attention backward by causal blocks differs "
              "from the full scores", eq_dtype_name(dt));
    free(qkv), free(dctx), free(ctx_b), free(ctx_f), free(dqkv_b), free(dqkv_f);
}

int main(void)
{
    test_layernorm_gradients();
    test_layernorm_normalises();
    test_gelu();
    test_attention_gradients();
    test_mse();
    test_add();
    test_bad_extents();
    for (int d = 0; d < EQ_DTYPE_COUNT; d++) {
        test_attention_causal_mask((eq_dtype)d);
        test_softmax_rows((eq_dtype)d);
    }
    test_dtypes_against_fp64(EQ_FP32);
    test_dtypes_against_fp64(EQ_BF16);
    test_row_independence(EQ_FP32);
    test_row_independence(EQ_BF16);
    for (int d = 0; d < EQ_DTYPE_COUNT; d++) test_causal_blocks((eq_dtype)d);
    return eq_test_finish("ops_test");
}
