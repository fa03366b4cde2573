/* The row and element ops of the GPT block (models/ops.h).
 *
 * Each op is written once, as a template over its accumulate type T (float for fp32 and bf16,
 * double for fp64), and instantiated for both; the public functions pick one by dtype. Inside a
 * template, load_T widens an element of dt exactly to T and store_T rounds a T once to dt.
 * <tgmath.h> makes sqrt/exp/erf the functions of their argument's type (sqrtf, expf, erff on
 * float), and every constant is cast to T, so float ops never pass through double. */
#include "models/ops.h"

#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "harness/base/bf16.h"
#include "harness/base/parallel.h"
#include "models/gemm.h"

/* Work per thread: the ops below run over rows or elements with eq_parallel_for; every row and
 * element is computed alone, by the same code whatever the split, so the thread count changes no
 * bit. */
#define ROWS_PER_THREAD 64
#define ELEMENTS_PER_THREAD 16384

static inline float load_float(eq_dtype dt, const void *buf, int64_t i)
{
    if (dt == EQ_BF16) return eq_bf16_to_f32(((const uint16_t *)buf)[i]);
    return ((const float *)buf)[i];
}

static inline void store_float(eq_dtype dt, void *buf, int64_t i, float v)
{
    if (dt == EQ_BF16) ((uint16_t *)buf)[i] = eq_f32_to_bf16(v);
    else ((float *)buf)[i] = v;
}

static inline double load_double(eq_dtype dt, const void *buf, int64_t i)
{
    (void)dt;
    return ((const double *)buf)[i];
}

static inline void store_double(eq_dtype dt, void *buf, int64_t i, double v)
{
    (void)dt;
    ((double *)buf)[i] = v;
}

/* ---- LayerNorm ----
 * Forward, per row of H: mean = sum(x)/H; var = sum((x - mean)^2)/H (two passes);
 * rstd = 1/sqrt(var + eps); out = (x - mean) * rstd * gamma + beta. */
#define DEFINE_LAYERNORM_FORWARD(T)                                                                    \
    static void layernorm_forward_##T(eq_dtype dt, int64_t r0, int64_t r1, int64_t H, void *out,       \
                                      double *mean_out, double *rstd_out, const void *in,              \
                                      const void *gamma, const void *beta)                             \
    {                                                                                                  \
        for (int64_t r = r0; r < r1; r++) {                                                            \
            const int64_t row = r * H;                                                                 \
            T sum = 0;                                                                                 \
            for (int64_t j = 0; j < H; j++) sum += load_##T(dt, in, row + j);                          \
            const T mean = sum / (T)H;                                                                 \
            T squares = 0;                                                                             \
            for (int64_t j = 0; j < H; j++) {                                                          \
                const T centred = load_##T(dt, in, row + j) - mean;                                    \
                squares += centred * centred;                                                          \
            }                                                                                          \
            const T rstd = (T)1 / sqrt(squares / (T)H + (T)EQ_LAYERNORM_EPS);                          \
            for (int64_t j = 0; j < H; j++) {                                                          \
                const T xhat = (load_##T(dt, in, row + j) - mean) * rstd;                              \
                store_##T(dt, out, row + j, xhat * load_##T(dt, gamma, j) + load_##T(dt, beta, j));    \
            }                                                                                          \
            mean_out[r] = mean;                                                                        \
            rstd_out[r] = rstd;                                                                        \
        }                                                                                              \
    }
DEFINE_LAYERNORM_FORWARD(float)
DEFINE_LAYERNORM_FORWARD(double)

/* Backward (the standard one, e.g. Ba et al. 2016 / PyTorch's layer_norm_backward): with
 * xhat = (x - mean) * rstd and g = dout * gamma,
 *   din = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)),
 *   dgamma = sum_rows dout * xhat,  dbeta = sum_rows dout.
 * sums[2H] is scratch of T: dgamma's and dbeta's accumulators, rows ascending. */
#define DEFINE_LAYERNORM_BACKWARD(T)                                                                   \
    static void layernorm_backward_##T(eq_dtype dt, int64_t rows, int64_t H, void *din, void *dgamma,  \
                                       void *dbeta, const void *dout, const void *in,                  \
                                       const double *mean_in, const double *rstd_in, const void *gamma, \
                                       void *sums)                                                     \
    {                                                                                                  \
        T *dgamma_sum = sums, *dbeta_sum = dgamma_sum + H;                                             \
        for (int64_t j = 0; j < H; j++) dgamma_sum[j] = dbeta_sum[j] = 0;                              \
        for (int64_t r = 0; r < rows; r++) {                                                           \
            const int64_t row = r * H;                                                                 \
            const T mean = (T)mean_in[r], rstd = (T)rstd_in[r]; /* exact: they were T */               \
            T g_sum = 0, gx_sum = 0;                                                                   \
            for (int64_t j = 0; j < H; j++) {                                                          \
                const T xhat = (load_##T(dt, in, row + j) - mean) * rstd;                              \
                const T dy = load_##T(dt, dout, row + j), g = dy * load_##T(dt, gamma, j);             \
                g_sum += g;                                                                            \
                gx_sum += g * xhat;                                                                    \
                dgamma_sum[j] += dy * xhat;                                                            \
                dbeta_sum[j] += dy;                                                                    \
            }                                                                                          \
            const T g_mean = g_sum / (T)H, gx_mean = gx_sum / (T)H;                                    \
            for (int64_t j = 0; j < H; j++) {                                                          \
                const T xhat = (load_##T(dt, in, row + j) - mean) * rstd;                              \
                const T g = load_##T(dt, dout, row + j) * load_##T(dt, gamma, j);                      \
                store_##T(dt, din, row + j, rstd * (g - g_mean - xhat * gx_mean));                     \
            }                                                                                          \
        }                                                                                              \
        for (int64_t j = 0; j < H; j++) {                                                              \
            store_##T(dt, dgamma, j, dgamma_sum[j]);                                                   \
            store_##T(dt, dbeta, j, dbeta_sum[j]);                                                     \
        }                                                                                              \
    }
DEFINE_LAYERNORM_BACKWARD(float)
DEFINE_LAYERNORM_BACKWARD(double)

typedef struct {
    eq_dtype dt;
    int64_t H;
    void *out;
    double *mean, *rstd;
    const void *in, *gamma, *beta;
} layernorm_job;

static void run_layernorm_rows(void *ctx, int64_t r0, int64_t r1)
{
    const layernorm_job *j = ctx;
    if (j->dt == EQ_FP64) layernorm_forward_double(j->dt, r0, r1, j->H, j->out, j->mean, j->rstd, j->in, j->gamma, j->beta);
    else layernorm_forward_float(j->dt, r0, r1, j->H, j->out, j->mean, j->rstd, j->in, j->gamma, j->beta);
}

eq_status eq_layernorm_forward(eq_dtype dt, int64_t rows, int64_t H, void *out, double *mean, double *rstd,
                               const void *in, const void *gamma, const void *beta)
{
    if (rows < 0 || H < 1)
        return EQ_FAIL(EQ_ERR_INTERNAL, "layernorm over %lld rows of %lld", (long long)rows, (long long)H);
    layernorm_job job = {dt, H, out, mean, rstd, in, gamma, beta};
    eq_parallel_for(rows, ROWS_PER_THREAD, run_layernorm_rows, &job);
    return EQ_OK;
}

eq_status eq_layernorm_backward(eq_dtype dt, int64_t rows, int64_t H, void *din, void *dgamma, void *dbeta,
                                const void *dout, const void *in, const double *mean, const double *rstd,
                                const void *gamma)
{
    if (rows < 0 || H < 1)
        return EQ_FAIL(EQ_ERR_INTERNAL, "layernorm backward over %lld rows of %lld", (long long)rows, (long long)H);
    void *sums = malloc((size_t)(2 * H) * sizeof(double)); /* [2H] of T; double is the wider T */
    if (sums == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "layernorm backward: no memory for %lld sums", (long long)H);
    if (dt == EQ_FP64) layernorm_backward_double(dt, rows, H, din, dgamma, dbeta, dout, in, mean, rstd, gamma, sums);
    else layernorm_backward_float(dt, rows, H, din, dgamma, dbeta, dout, in, mean, rstd, gamma, sums);
    free(sums);
    return EQ_OK;
}

/* ---- GELU (erf form), in PyTorch's operation order (aten/src/ATen/native/cpu/Activation.cpp):
 *   out = x * 0.5 * (1 + erf(x / sqrt 2));
 *   din = dout * (cdf + x * pdf),  cdf = 0.5 * (1 + erf(x / sqrt 2)),  pdf = exp(-x^2 / 2) / sqrt(2 pi).
 * The constants, correctly rounded to double (strict C11 has no M_SQRT1_2), then cast to T. */
#define GELU_RSQRT2 0.70710678118654752440    /* 1/sqrt(2) */
#define GELU_RSQRT_2PI 0.39894228040143267794 /* 1/sqrt(2 pi) */
#define DEFINE_GELU(T)                                                                                 \
    static void gelu_forward_##T(eq_dtype dt, int64_t i0, int64_t i1, void *out, const void *in)       \
    {                                                                                                  \
        const T half = (T)0.5, one = (T)1, rsqrt2 = (T)GELU_RSQRT2;                                    \
        for (int64_t i = i0; i < i1; i++) {                                                            \
            const T x = load_##T(dt, in, i);                                                           \
            store_##T(dt, out, i, x * half * (one + erf(x * rsqrt2)));                                 \
        }                                                                                              \
    }                                                                                                  \
    static void gelu_backward_##T(eq_dtype dt, int64_t i0, int64_t i1, void *din, const void *dout,    \
                                  const void *in)                                                      \
    {                                                                                                  \
        const T half = (T)0.5, one = (T)1, rsqrt2 = (T)GELU_RSQRT2;                                    \
        const T rsqrt_2pi = (T)GELU_RSQRT_2PI;                                                         \
        for (int64_t i = i0; i < i1; i++) {                                                            \
            const T x = load_##T(dt, in, i);                                                           \
            const T cdf = half * (one + erf(x * rsqrt2));                                              \
            const T pdf = rsqrt_2pi * exp(x * x * -half);                                              \
            store_##T(dt, din, i, load_##T(dt, dout, i) * (cdf + x * pdf));                            \
        }                                                                                              \
    }
DEFINE_GELU(float)
DEFINE_GELU(double)

/* An elementwise op over [0, n): out[i] from a[i] (and b[i]). */
typedef struct {
    eq_dtype dt;
    void *out;
    const void *a, *b;
} elementwise_job;

static void run_gelu_forward(void *ctx, int64_t i0, int64_t i1)
{
    const elementwise_job *j = ctx;
    if (j->dt == EQ_FP64) gelu_forward_double(j->dt, i0, i1, j->out, j->a);
    else gelu_forward_float(j->dt, i0, i1, j->out, j->a);
}

static void run_gelu_backward(void *ctx, int64_t i0, int64_t i1) /* a: dout, b: the forward's input */
{
    const elementwise_job *j = ctx;
    if (j->dt == EQ_FP64) gelu_backward_double(j->dt, i0, i1, j->out, j->a, j->b);
    else gelu_backward_float(j->dt, i0, i1, j->out, j->a, j->b);
}

void eq_gelu_forward(eq_dtype dt, int64_t n, void *out, const void *in)
{
    elementwise_job job = {dt, out, in, NULL};
    eq_parallel_for(n, ELEMENTS_PER_THREAD, run_gelu_forward, &job);
}

void eq_gelu_backward(eq_dtype dt, int64_t n, void *din, const void *dout, const void *in)
{
    elementwise_job job = {dt, din, dout, in};
    eq_parallel_for(n, ELEMENTS_PER_THREAD, run_gelu_backward, &job);
}

/* ---- Attention ----
 * The causal softmax of one (batch column, head): P[S,S] (dt) from scores[S,S] (dt). Row i:
 *   z_j = scale * scores_ij (scale = 1/sqrt(D)), m = max_{j<=i} z_j,
 *   P_ij = exp(z_j - m) / sum_{k<=i} exp(z_k - m) for j <= i, and exactly 0 for j > i.
 * The scale multiplies, as Megatron's baddbmm alpha does (ops.h's "scores / sqrt(D)"; the same
 * bits whenever 1/sqrt(D) is exact, e.g. D = 64). Row i reads scores[i, j <= i] only. exps[S] is
 * scratch of T. Forward and backward both call this, so their P agree bit for bit.
 * The row is widened into exps once and each pass is a plain loop over it (the compiler can
 * vectorise all but the exps and their sum, which stay in order j = 0..i). The max is taken in
 * MAX_LANES interleaved lanes, then over the lanes: the same value as the sequential max (a max
 * is one of the values; a tie of +0 and -0 gives the same exp(z - max) either way). */
#define MAX_LANES 8
#define DEFINE_ROW_IO(T)                                                                               \
    static void load_row_##T(eq_dtype dt, const void *buf, int64_t offset, int64_t n, T *dst)          \
    {                                                                                                  \
        if (dt == EQ_BF16)                                                                             \
            for (int64_t j = 0; j < n; j++) dst[j] = (T)eq_bf16_to_f32(((const uint16_t *)buf)[offset + j]); \
        else                                                                                           \
            memcpy(dst, (const T *)buf + offset, (size_t)n * sizeof *dst);                             \
    }                                                                                                  \
    static void store_row_##T(eq_dtype dt, void *buf, int64_t offset, int64_t n, const T *src)         \
    {                                                                                                  \
        if (dt == EQ_BF16)                                                                             \
            for (int64_t j = 0; j < n; j++) ((uint16_t *)buf)[offset + j] = eq_f32_to_bf16((float)src[j]); \
        else                                                                                           \
            memcpy((T *)buf + offset, src, (size_t)n * sizeof *src);                                   \
    }                                                                                                  \
    static T max_of_##T(const T *z, int64_t n)                                                         \
    {                                                                                                  \
        T lane[MAX_LANES];                                                                             \
        for (int k = 0; k < MAX_LANES; k++) lane[k] = (T)-INFINITY;                                    \
        int64_t j = 0;                                                                                 \
        for (; j + MAX_LANES <= n; j += MAX_LANES)                                                     \
            for (int k = 0; k < MAX_LANES; k++) lane[k] = z[j + k] > lane[k] ? z[j + k] : lane[k];     \
        for (; j < n; j++) lane[0] = z[j] > lane[0] ? z[j] : lane[0];                                  \
        T max = lane[0];                                                                               \
        for (int k = 1; k < MAX_LANES; k++) max = lane[k] > max ? lane[k] : max;                       \
        return max;                                                                                    \
    }
DEFINE_ROW_IO(float)
DEFINE_ROW_IO(double)

#define DEFINE_CAUSAL_SOFTMAX(T)                                                                       \
    static void causal_softmax_row_##T(eq_dtype dt, int64_t S, int64_t D, int64_t i, const void *scores, \
                                       void *P, void *exps_scratch)                                    \
    {                                                                                                  \
        T *z = exps_scratch; /* z_j = scale scores_ij, then exp(z_j - max), then P_ij */              \
        const T scale = (T)1 / sqrt((T)D);                                                             \
        const int64_t row = i * S, n = i + 1;                                                          \
        load_row_##T(dt, scores, row, n, z);                                                           \
        for (int64_t j = 0; j < n; j++) z[j] *= scale;                                                 \
        const T max = max_of_##T(z, n);                                                                \
        for (int64_t j = 0; j < n; j++) z[j] = exp(z[j] - max); /* independent calls: they overlap */  \
        T sum = 0;                                                                                     \
        for (int64_t j = 0; j < n; j++) sum += z[j]; /* in order j = 0..i */                           \
        for (int64_t j = 0; j < n; j++) z[j] /= sum;                                                   \
        store_row_##T(dt, P, row, n, z);                                                               \
        memset((char *)P + (size_t)(row + n) * eq_dtype_size(dt), 0, (size_t)(S - n) * eq_dtype_size(dt)); \
    }
DEFINE_CAUSAL_SOFTMAX(float)
DEFINE_CAUSAL_SOFTMAX(double)

/* The softmax backward, through the scale, from the dt values of P and dP (row i):
 *   dS_ij = P_ij * (dP_ij - sum_{k<=i} P_ik dP_ik) * scale for j <= i, exactly 0 for j > i.
 * dS must not alias P or dP (the caller reuses the scores buffer). */
#define DEFINE_CAUSAL_SOFTMAX_BACKWARD(T)                                                              \
    static void causal_softmax_backward_row_##T(eq_dtype dt, int64_t S, int64_t D, int64_t i, void *dS, \
                                                const void *P, const void *dP)                         \
    {                                                                                                  \
        const T scale = (T)1 / sqrt((T)D);                                                             \
        {                                                                                              \
            const int64_t row = i * S;                                                                 \
            T dot = 0;                                                                                 \
            for (int64_t j = 0; j <= i; j++) dot += load_##T(dt, P, row + j) * load_##T(dt, dP, row + j); \
            for (int64_t j = 0; j <= i; j++) {                                                         \
                const T p = load_##T(dt, P, row + j), dp = load_##T(dt, dP, row + j);                  \
                store_##T(dt, dS, row + j, p * (dp - dot) * scale);                                    \
            }                                                                                          \
            for (int64_t j = i + 1; j < S; j++) store_##T(dt, dS, row + j, 0);                         \
        }                                                                                              \
    }
DEFINE_CAUSAL_SOFTMAX_BACKWARD(float)
DEFINE_CAUSAL_SOFTMAX_BACKWARD(double)

/* The rows of a causal softmax (or its backward) over the workers. Row i costs i + 1, so item k
 * of [0, ceil(S/2)) is the pair of rows k and S-1-k: every contiguous range of items has about the
 * same work. exps is [workers, S] of double (the wider acc type), a slot's row for each worker. */
typedef struct {
    eq_dtype dt;
    int64_t S, D;
    const void *scores; /* forward: scores; backward: P */
    const void *dP;     /* backward only */
    void *out;          /* P, or dS */
    double *exps;
} softmax_job;

static void softmax_row(const softmax_job *j, int slot, int64_t i)
{
    double *exps = j->exps + (size_t)slot * (size_t)j->S;
    if (j->dP != NULL) {
        if (j->dt == EQ_FP64) causal_softmax_backward_row_double(j->dt, j->S, j->D, i, j->out, j->scores, j->dP);
        else causal_softmax_backward_row_float(j->dt, j->S, j->D, i, j->out, j->scores, j->dP);
    } else if (j->dt == EQ_FP64) {
        causal_softmax_row_double(j->dt, j->S, j->D, i, j->scores, j->out, exps);
    } else {
        causal_softmax_row_float(j->dt, j->S, j->D, i, j->scores, j->out, exps);
    }
}

static void run_softmax_pairs(void *ctx, int slot, int64_t k0, int64_t k1)
{
    const softmax_job *j = ctx;
    for (int64_t k = k0; k < k1; k++) {
        softmax_row(j, slot, k);
        if (j->S - 1 - k != k) softmax_row(j, slot, j->S - 1 - k);
    }
}

static void softmax_rows(const softmax_job *job)
{
    eq_parallel_for_slots((job->S + 1) / 2, ROWS_PER_THREAD / 2, run_softmax_pairs, (void *)job);
}

static void causal_softmax(eq_dtype dt, int64_t S, int64_t D, const void *scores, void *P, double *exps)
{
    const softmax_job job = {dt, S, D, scores, NULL, P, exps};
    softmax_rows(&job);
}

/* Scratch of the softmax: [workers, S] doubles. */
static double *alloc_exps(int64_t S)
{
    return malloc((size_t)eq_parallel_workers() * (size_t)(S > 0 ? S : 1) * sizeof(double));
}

eq_status eq_causal_softmax(eq_dtype dt, int64_t S, int64_t D, const void *scores, void *P)
{
    if (S < 0 || D < 1) return EQ_FAIL(EQ_ERR_INTERNAL, "causal softmax: S=%lld D=%lld", (long long)S, (long long)D);
    double *exps = alloc_exps(S);
    if (exps == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "causal softmax: no memory for %lld exps", (long long)S);
    causal_softmax(dt, S, D, scores, P, exps);
    free(exps);
    return EQ_OK;
}

static void causal_softmax_backward(eq_dtype dt, int64_t S, int64_t D, void *dS, const void *P, const void *dP)
{
    const softmax_job job = {dt, S, D, P, dP, dS, NULL};
    softmax_rows(&job);
}

/* The backend's causal softmax (the device's under --backend cuda); the CPU's here, with the
 * caller's scratch. The forward and the backward's recompute both come here, so their P agree. */
static eq_status backend_softmax(const eq_backend *be, eq_dtype dt, int64_t S, int64_t D, const void *scores, void *P,
                                 double *exps)
{
    if (be->ops != NULL && be->ops->causal_softmax != NULL && be->ops->causal_softmax != eq_causal_softmax)
        return be->ops->causal_softmax(dt, S, D, scores, P);
    causal_softmax(dt, S, D, scores, P, exps);
    return EQ_OK;
}

/* Where one (batch column b, head h) lives: Q, K, V are [S, D] views of qkv [S, B, heads, 3, D]
 * with row stride qkv_ld; its ctx slice is an [S, D] view of ctx [S, B, heads, D], stride ctx_ld.
 * Offsets are in elements. */
typedef struct {
    int64_t q, k, v, ctx; /* offset of row 0 */
    int64_t qkv_ld, ctx_ld;
} head_slices;

static head_slices slices_of(int64_t B, int64_t heads, int64_t D, int64_t b, int64_t h)
{
    head_slices s;
    s.q = b * heads * 3 * D + h * 3 * D;
    s.k = s.q + D;
    s.v = s.q + 2 * D;
    s.ctx = b * heads * D + h * D;
    s.qkv_ld = B * heads * 3 * D;
    s.ctx_ld = B * heads * D;
    return s;
}

/* Element `offset` of a buffer of dtype dt, as a pointer. */
static const void *element(eq_dtype dt, const void *buf, int64_t offset)
{
    return (const char *)buf + (size_t)offset * eq_dtype_size(dt);
}

static void *element_mut(eq_dtype dt, void *buf, int64_t offset)
{
    return (char *)buf + (size_t)offset * eq_dtype_size(dt);
}

/* Extents: none negative, D >= 1. Sets *empty when there is nothing to compute. */
static eq_status check_attention_extents(const char *what, int64_t S, int64_t B, int64_t heads, int64_t D,
                                         int *empty)
{
    if (S < 0 || B < 0 || heads < 0 || D < 1)
        return EQ_FAIL(EQ_ERR_INTERNAL, "%s: S=%lld B=%lld heads=%lld D=%lld", what, (long long)S, (long long)B,
                       (long long)heads, (long long)D);
    *empty = S == 0 || B == 0 || heads == 0;
    return EQ_OK;
}

/* Through the backend's one-head op: V transposed here by eq_gemm's own packing (eq_transpose), so
 * the second GEMM's B is what eq_gemm would hand gemm_nt. */
static eq_status attention_forward_fused(const eq_backend *be, eq_dtype dt, int64_t S, int64_t B, int64_t heads,
                                         int64_t D, void *ctx, const void *qkv)
{
    eq_status st = EQ_OK;
    const size_t elem = eq_dtype_size(dt);
    char *VT = malloc((size_t)(D * S) * elem); /* [D, S] */
    if (VT == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "attention: no memory for a [%lld, %lld] V^T", (long long)D, (long long)S);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < heads; h++) {
            const head_slices s = slices_of(B, heads, D, b, h);
            eq_transpose(elem, S, D, element(dt, qkv, s.v), s.qkv_ld, VT);
            EQ_TRY(be->attention_head(dt, S, D, element(dt, qkv, s.q), element(dt, qkv, s.k), s.qkv_ld, VT,
                                      element_mut(dt, ctx, s.ctx), s.ctx_ld));
        }
cleanup:
    free(VT);
    return st;
}

/* The causal part of X Y^T (X, Y [S, D], row strides ldx, ldy) into out [S, S]: row block [i0, i1) is
 * one GEMM over keys [0, i1), so the blocks above the diagonal are never computed (about half the
 * work). Each element is the same sum over D as the full GEMM's (the backend's shape invariance:
 * a GEMM over some rows and a prefix of the columns rounds each element as the full one does).
 * Entries j >= i1 of a block's rows are left as they were; the causal softmax and its backward
 * read j <= i only. A backend without that invariance (cuBLAS) computes the full product, one
 * GEMM, as before. */
#define CAUSAL_BLOCK_ROWS 256

static eq_status causal_scores(const eq_backend *be, eq_dtype dt, int64_t S, int64_t D, const void *X,
                               int64_t ldx, const void *Y, int64_t ldy, void *out)
{
    eq_status st = EQ_OK;
    if (!be->shape_invariant) return eq_gemm(be, dt, EQ_GEMM_NT, S, S, D, X, ldx, Y, ldy, out, S);
    for (int64_t i0 = 0; i0 < S; i0 += CAUSAL_BLOCK_ROWS) {
        const int64_t i1 = i0 + CAUSAL_BLOCK_ROWS < S ? i0 + CAUSAL_BLOCK_ROWS : S;
        EQ_TRY(eq_gemm(be, dt, EQ_GEMM_NT, i1 - i0, i1, D, element(dt, X, i0 * ldx), ldx, Y, ldy,
                       element_mut(dt, out, i0 * S), S));
    }
cleanup:
    return st;
}

eq_status eq_attention_forward(const eq_backend *be, eq_dtype dt, int64_t S, int64_t B, int64_t heads, int64_t D,
                               void *ctx, const void *qkv)
{
    int empty = 0;
    eq_status st = check_attention_extents("attention", S, B, heads, D, &empty);
    if (st != EQ_OK || empty) return st;
    if (be->attention_head != NULL) return attention_forward_fused(be, dt, S, B, heads, D, ctx, qkv);
    const size_t square = (size_t)(S * S) * eq_dtype_size(dt);
    void *scores = calloc(1, square), *P = malloc(square); /* [S, S] each, dt; zeroed: see causal_scores */
    double *exps = alloc_exps(S);
    if (scores == NULL || P == NULL || exps == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "attention: no memory for [%lld, %lld] scores", (long long)S, (long long)S);
        goto cleanup;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < heads; h++) {
            const head_slices s = slices_of(B, heads, D, b, h);
            const void *Q = element(dt, qkv, s.q), *K = element(dt, qkv, s.k), *V = element(dt, qkv, s.v);
            EQ_TRY(causal_scores(be, dt, S, D, Q, s.qkv_ld, K, s.qkv_ld, scores)); /* Q K^T */
            EQ_TRY(backend_softmax(be, dt, S, D, scores, P, exps));
            EQ_TRY(eq_gemm(be, dt, EQ_GEMM_NN, S, D, S, P, S, V, s.qkv_ld, element_mut(dt, ctx, s.ctx), s.ctx_ld));
        }
cleanup:
    free(scores), free(P), free(exps);
    return st;
}

eq_status eq_attention_backward(const eq_backend *be, eq_dtype dt, int64_t S, int64_t B, int64_t heads, int64_t D,
                                void *dqkv, const void *dctx, const void *qkv)
{
    int empty = 0;
    eq_status st = check_attention_extents("attention backward", S, B, heads, D, &empty);
    if (st != EQ_OK || empty) return st;
    const size_t square = (size_t)(S * S) * eq_dtype_size(dt);
    /* [S, S] each, dt; zeroed (causal_scores fills the blocks on and below the diagonal) */
    void *scores = calloc(1, square), *P = malloc(square), *dP = calloc(1, square);
    double *exps = alloc_exps(S);
    if (scores == NULL || P == NULL || dP == NULL || exps == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "attention backward: no memory for [%lld, %lld] scores", (long long)S,
                     (long long)S);
        goto cleanup;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < heads; h++) {
            const head_slices s = slices_of(B, heads, D, b, h);
            const void *Q = element(dt, qkv, s.q), *K = element(dt, qkv, s.k), *V = element(dt, qkv, s.v);
            const void *dC = element(dt, dctx, s.ctx);
            void *dQ = element_mut(dt, dqkv, s.q), *dK = element_mut(dt, dqkv, s.k), *dV = element_mut(dt, dqkv, s.v);
            void *dS = scores; /* scores are dead once P is made */
            EQ_TRY(causal_scores(be, dt, S, D, Q, s.qkv_ld, K, s.qkv_ld, scores));
            EQ_TRY(backend_softmax(be, dt, S, D, scores, P, exps));
            EQ_TRY(eq_gemm(be, dt, EQ_GEMM_TN, S, D, S, P, S, dC, s.ctx_ld, dV, s.qkv_ld));    /* P^T dctx */
            EQ_TRY(causal_scores(be, dt, S, D, dC, s.ctx_ld, V, s.qkv_ld, dP));               /* dctx V^T */
            causal_softmax_backward(dt, S, D, dS, P, dP);
            EQ_TRY(eq_gemm(be, dt, EQ_GEMM_NN, S, D, S, dS, S, K, s.qkv_ld, dQ, s.qkv_ld));    /* dS K */
            EQ_TRY(eq_gemm(be, dt, EQ_GEMM_TN, S, D, S, dS, S, Q, s.qkv_ld, dK, s.qkv_ld));    /* dS^T Q */
        }
cleanup:
    free(scores), free(P), free(dP), free(exps);
    return st;
}

/* ---- MSE and the residual add ---- */

/* dy_i = dt(2 (y_i - t_i) / count), in the acc type. */
#define DEFINE_MSE_GRAD(T)                                                                             \
    static void mse_grad_##T(eq_dtype dt, int64_t n, double count, const void *y, const void *target,  \
                             void *dy)                                                                 \
    {                                                                                                  \
        const T two = (T)2, norm = (T)count;                                                           \
        for (int64_t i = 0; i < n; i++)                                                                \
            store_##T(dt, dy, i, two * (load_##T(dt, y, i) - load_##T(dt, target, i)) / norm);         \
    }
DEFINE_MSE_GRAD(float)
DEFINE_MSE_GRAD(double)

eq_status eq_mse_forward_backward(eq_dtype dt, int64_t n, double count, const void *y, const void *target,
                                  double *loss_partial, void *dy)
{
    if (n < 0 || !(count > 0)) return EQ_FAIL(EQ_ERR_INTERNAL, "mse over %lld elements, count %g", (long long)n, count);
    /* The loss in fp64 whatever dt: one sum of squares, ascending, then one division. */
    double squares = 0;
    for (int64_t i = 0; i < n; i++) {
        const double diff = eq_buffer_get(dt, y, i) - eq_buffer_get(dt, target, i);
        squares += diff * diff;
    }
    *loss_partial = squares / count;
    if (dt == EQ_FP64) mse_grad_double(dt, n, count, y, target, dy);
    else mse_grad_float(dt, n, count, y, target, dy);
    return EQ_OK;
}

#define DEFINE_ADD(T)                                                                                  \
    static void add_##T(eq_dtype dt, int64_t i0, int64_t i1, void *out, const void *a, const void *b)  \
    {                                                                                                  \
        for (int64_t i = i0; i < i1; i++) store_##T(dt, out, i, load_##T(dt, a, i) + load_##T(dt, b, i)); \
    }
DEFINE_ADD(float)
DEFINE_ADD(double)

/* out may be a or b (element i is read before it is written). */
static void run_add(void *ctx, int64_t i0, int64_t i1)
{
    const elementwise_job *j = ctx;
    if (j->dt == EQ_FP64) add_double(j->dt, i0, i1, j->out, j->a, j->b);
    else add_float(j->dt, i0, i1, j->out, j->a, j->b);
}

void eq_add(eq_dtype dt, int64_t n, void *out, const void *a, const void *b)
{
    elementwise_job job = {dt, out, a, b};
    eq_parallel_for(n, ELEMENTS_PER_THREAD, run_add, &job);
}
