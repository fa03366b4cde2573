#include "models/spd_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/spd_rows.h"

eq_status spd_tp_sum(const spd_ctx *ctx, const double *parts, int64_t n, double *out)
{
    eq_status st = EQ_OK;
    const eq_group *g = &ctx->tp_group;
    const int n_local = g->n_local;
    if (ctx->tp == 1) {
        memcpy(out, parts, (size_t)n * sizeof *out);
        return EQ_OK;
    }
    const size_t elem = eq_dtype_size(ctx->dt);
    void **bufs = calloc((size_t)n_local, sizeof *bufs);
    if (bufs == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a tp all-reduce");
    for (int r = 0; r < n_local; r++) {
        bufs[r] = malloc((size_t)n * elem + 1);
        if (bufs[r] == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a tp all-reduce of %lld values", (long long)n);
            goto cleanup;
        }
        for (int64_t i = 0; i < n; i++) eq_buffer_set(ctx->dt, bufs[r], i, parts[(int64_t)r * n + i]);
    }
    EQ_TRY(eq_all_reduce(g, bufs, (size_t)n, ctx->dt, EQ_REDOP_SUM));
    for (int64_t i = 0; i < n; i++) out[i] = eq_buffer_get(ctx->dt, bufs[0], i);
cleanup:
    for (int r = 0; r < n_local; r++) free(bufs[r]);
    free(bufs);
    return st;
}

void spd_rmsnorm_forward(eq_dtype dt, int64_t T, int64_t D, double *out, double *rstd, const double *in)
{
    for (int64_t t = 0; t < T; t++) {
        const double *x = in + t * D;
        double ss = 0;
        for (int64_t i = 0; i < D; i++) ss += x[i] * x[i];
        rstd[t] = 1.0 / sqrt(ss / (double)D + SPD_RMSNORM_EPS);
        for (int64_t i = 0; i < D; i++) out[t * D + i] = spd_rnd(dt, x[i] * rstd[t]);
    }
}

void spd_rmsnorm_backward(eq_dtype dt, int64_t T, int64_t D, double *din, const double *dout, const double *out,
                          const double *rstd)
{
    for (int64_t t = 0; t < T; t++) {
        double dot = 0;
        for (int64_t i = 0; i < D; i++) dot += dout[t * D + i] * out[t * D + i];
        dot /= (double)D;
        for (int64_t i = 0; i < D; i++) din[t * D + i] = spd_rnd(dt, rstd[t] * (dout[t * D + i] - out[t * D + i] * dot));
    }
}

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_C 0.044715

/* The GELUs elementwise, split over threads (each element its own: any split gives the same). */
#define GELU_GRAIN 4096
typedef struct {
    eq_dtype dt;
    double *out;
    const double *dout, *in;
} gelu_job;

static void gelu_tanh_forward_range(void *arg, int64_t i0, int64_t i1)
{
    const gelu_job *j = arg;
    for (int64_t i = i0; i < i1; i++) {
        const double x = j->in[i];
        j->out[i] = spd_rnd(j->dt, 0.5 * x * (1.0 + tanh(GELU_K * (x + GELU_C * x * x * x))));
    }
}

void spd_gelu_tanh_forward(eq_dtype dt, int64_t n, double *out, const double *in)
{
    gelu_job job = {dt, out, NULL, in};
    spd_parallel_for(n, GELU_GRAIN, gelu_tanh_forward_range, &job);
}

static void gelu_tanh_backward_range(void *arg, int64_t i0, int64_t i1)
{
    const gelu_job *j = arg;
    for (int64_t i = i0; i < i1; i++) {
        const double x = j->in[i], th = tanh(GELU_K * (x + GELU_C * x * x * x));
        const double g = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
        j->out[i] = spd_rnd(j->dt, j->dout[i] * g);
    }
}

void spd_gelu_tanh_backward(eq_dtype dt, int64_t n, double *din, const double *dout, const double *in)
{
    gelu_job job = {dt, din, dout, in};
    spd_parallel_for(n, GELU_GRAIN, gelu_tanh_backward_range, &job);
}

static void gelu_erf_forward_range(void *arg, int64_t i0, int64_t i1)
{
    const gelu_job *j = arg;
    for (int64_t i = i0; i < i1; i++) j->out[i] = spd_rnd(j->dt, j->in[i] * 0.5 * (1.0 + erf(j->in[i] / sqrt(2.0))));
}

void spd_gelu_erf_forward(eq_dtype dt, int64_t n, double *out, const double *in)
{
    gelu_job job = {dt, out, NULL, in};
    spd_parallel_for(n, GELU_GRAIN, gelu_erf_forward_range, &job);
}

static void gelu_erf_backward_range(void *arg, int64_t i0, int64_t i1)
{
    const gelu_job *j = arg;
    for (int64_t i = i0; i < i1; i++) {
        const double x = j->in[i];
        const double g = 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * 3.14159265358979323846);
        j->out[i] = spd_rnd(j->dt, j->dout[i] * g);
    }
}

void spd_gelu_erf_backward(eq_dtype dt, int64_t n, double *din, const double *dout, const double *in)
{
    gelu_job job = {dt, din, dout, in};
    spd_parallel_for(n, GELU_GRAIN, gelu_erf_backward_range, &job);
}

void spd_lower_leaky_forward(eq_dtype dt, int64_t n, double *out, const double *z)
{
    for (int64_t i = 0; i < n; i++) out[i] = spd_rnd(dt, fmin(1.0, fmax(0.0, z[i])));
}

void spd_upper_leaky_forward(eq_dtype dt, int64_t n, double *out, const double *z, double alpha)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = spd_rnd(dt, z[i] < 0.0 ? 0.0 : (z[i] <= 1.0 ? z[i] : 1.0 + alpha * (z[i] - 1.0)));
}

void spd_lower_leaky_backward(eq_dtype dt, int64_t n, double *dz, const double *dout, const double *z, double alpha)
{
    for (int64_t i = 0; i < n; i++) {
        const double slope = z[i] < 0.0 ? alpha : (z[i] <= 1.0 ? 1.0 : 0.0);
        dz[i] = spd_rnd(dt, dz[i] + dout[i] * slope);
    }
}

void spd_upper_leaky_backward(eq_dtype dt, int64_t n, double *dz, const double *dout, const double *z, double alpha)
{
    for (int64_t i = 0; i < n; i++) {
        const double slope = z[i] < 0.0 ? 0.0 : (z[i] <= 1.0 ? 1.0 : alpha);
        dz[i] = spd_rnd(dt, dz[i] + dout[i] * slope);
    }
}

void spd_mask_forward(eq_dtype dt, int64_t n, double *m, const double *ci, const double *s)
{
    for (int64_t i = 0; i < n; i++) m[i] = spd_rnd(dt, ci[i] + (1.0 - ci[i]) * s[i]);
}

void spd_mask_backward(eq_dtype dt, int64_t n, double *dci, double *ds, const double *dm, const double *ci,
                       const double *s)
{
    for (int64_t i = 0; i < n; i++) {
        dci[i] = spd_rnd(dt, dci[i] + dm[i] * (1.0 - s[i]));
        if (ds != NULL) ds[i] = spd_rnd(dt, dm[i] * (1.0 - ci[i]));
    }
}

/* dst [cols, rows] = src [rows, cols]^T. */
static void transpose(int64_t rows, int64_t cols, const double *src, double *dst)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) dst[j * rows + i] = src[i * cols + j];
}

/* n values rounded to dt in place. */
static void round_all(eq_dtype dt, int64_t n, double *x)
{
    for (int64_t i = 0; i < n; i++) x[i] = spd_rnd(dt, x[i]);
}

eq_status spd_linear_nt(eq_dtype dt, int64_t T, int64_t K, int64_t N, double *out, const double *x, const double *W)
{
    double *Wt = malloc((size_t)(K * N) * sizeof *Wt); /* [K, N] */
    if (Wt == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a linear's weight [%lld, %lld]", (long long)N, (long long)K);
    transpose(N, K, W, Wt);
    spd_rows_mm(T, K, N, x, K, Wt, N, NULL, 0, out);
    round_all(dt, T * N, out);
    free(Wt);
    return EQ_OK;
}

/* parts[j] [T, N] = a[:, slice r] Bt[slice r, :] for each local tp rank r = first_local + j's
 * slice of the C components (a [T, C], Bt [C, N]), each rounded as that rank writes it: the
 * partials a SUM all-reduce adds. keep/want as spd_rows_mm's (rows not kept are 0). */
static void component_partials(const spd_ctx *ctx, int64_t T, int64_t N, int64_t C, const double *a, const double *Bt,
                               const unsigned char *keep, int want, double *parts)
{
    for (int j = 0; j < ctx->tp_group.n_local; j++) {
        const int r = ctx->tp_group.first_local + j;
        const int64_t c0 = spd_c0(C, ctx->tp, r), c1 = spd_c0(C, ctx->tp, r + 1);
        spd_rows_mm(T, c1 - c0, N, a + c0, C, Bt + c0 * N, N, keep, want, parts + j * T * N);
        round_all(ctx->dt, T * N, parts + j * T * N);
    }
}

eq_status spd_delta(const spd_ctx *ctx, int64_t D, int64_t O, int64_t C, const double *W, const double *V,
                    const double *U, double *E)
{
    eq_status st = EQ_OK;
    double *parts = calloc((size_t)(ctx->tp_group.n_local * D * O), sizeof *parts);
    if (parts == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for V U partials [%lld, %lld]", (long long)D, (long long)O);
        goto cleanup;
    }
    component_partials(ctx, D, O, C, V, U, NULL, 0, parts);
    EQ_TRY(spd_tp_sum(ctx, parts, D * O, E));
    for (int64_t i = 0; i < D; i++)
        for (int64_t o = 0; o < O; o++) E[i * O + o] = spd_rnd(ctx->dt, W[o * D + i] - E[i * O + o]);
cleanup:
    free(parts);
    return st;
}

eq_status spd_site_forward(const spd_ctx *ctx, const spd_site *s, int64_t T, const double *x, const double *m,
                           const double *d, const unsigned char *route, spd_site_cache *cache, double *out)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = ctx->dt;
    const int64_t D = s->D, O = s->O, C = s->C;
    double *parts = calloc((size_t)(ctx->tp_group.n_local * T * O), sizeof *parts);
    double *Wt = malloc((size_t)(D * O) * sizeof *Wt), *direct = malloc((size_t)(T * O) * sizeof *direct);
    if (parts == NULL || Wt == NULL || direct == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a site's partial outputs");
        goto cleanup;
    }
    /* xv = x V, mv = xv * m, xe = x E for every token; unrouted tokens' partials stay 0. */
    spd_rows_mm(T, D, C, x, D, s->V, C, NULL, 0, cache->xv);
    for (int64_t i = 0; i < T * C; i++) {
        cache->xv[i] = spd_rnd(dt, cache->xv[i]);
        cache->mv[i] = spd_rnd(dt, cache->xv[i] * m[i]);
    }
    spd_rows_mm(T, D, O, x, D, s->E, O, NULL, 0, cache->xe);
    round_all(dt, T * O, cache->xe);
    component_partials(ctx, T, O, C, cache->mv, s->U, route, 1, parts);
    EQ_TRY(spd_tp_sum(ctx, parts, T * O, out));
    /* Unrouted tokens: x W^T (W^T [D, O]). */
    transpose(O, D, s->W, Wt);
    if (route != NULL) spd_rows_mm(T, D, O, x, D, Wt, O, route, 0, direct);
    for (int64_t t = 0; t < T; t++) {
        if (route != NULL && !route[t]) {
            for (int64_t o = 0; o < O; o++) out[t * O + o] = spd_rnd(dt, direct[t * O + o]);
            continue;
        }
        for (int64_t o = 0; o < O; o++) out[t * O + o] = spd_rnd(dt, out[t * O + o] + spd_rnd(dt, d[t] * cache->xe[t * O + o]));
    }
cleanup:
    free(parts), free(Wt), free(direct);
    return st;
}

eq_status spd_site_backward(const spd_ctx *ctx, const spd_site *s, int64_t T, const double *x, const double *m,
                            const double *d, const unsigned char *route, const spd_site_cache *cache,
                            const double *dout, double *dx, double *dm, double *dd, double *dV, double *dU)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = ctx->dt;
    const int64_t D = s->D, O = s->O, C = s->C;
    int64_t big = D * C > C * O ? D * C : C * O; /* the sums' scratch: [D, C], [C, O], [T, D] */
    if (T * D > big) big = T * D;
    double *dmv = malloc((size_t)(T * C) * sizeof *dmv), *dxv = malloc((size_t)(T * C) * sizeof *dxv);
    double *G = malloc((size_t)(D * O) * sizeof *G), *parts = calloc((size_t)(ctx->tp_group.n_local * T * D), sizeof *parts);
    double *Ut = malloc((size_t)(O * C) * sizeof *Ut), *Vt = malloc((size_t)(C * D) * sizeof *Vt);
    double *Et = malloc((size_t)(O * D) * sizeof *Et);
    double *sa = malloc((size_t)big * sizeof *sa), *sb = malloc((size_t)big * sizeof *sb);
    if (dmv == NULL || dxv == NULL || G == NULL || parts == NULL || Ut == NULL || Vt == NULL || Et == NULL || sa == NULL ||
        sb == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a site's backward");
        goto cleanup;
    }
    transpose(C, O, s->U, Ut);
    /* dmv = dout U^T (0 for unrouted tokens), dm = dmv * xv, dxv = dmv * m; dd = <dout, xe>. */
    spd_rows_mm(T, O, C, dout, O, Ut, C, route, 1, dmv);
    for (int64_t i = 0; i < T * C; i++) {
        dmv[i] = spd_rnd(dt, dmv[i]);
        dm[i] = spd_rnd(dt, dmv[i] * cache->xv[i]);
        dxv[i] = spd_rnd(dt, dmv[i] * m[i]);
    }
    for (int64_t t = 0; t < T; t++) {
        dd[t] = 0;
        if (route != NULL && !route[t]) continue;
        double acc = 0;
        for (int64_t o = 0; o < O; o++) acc += dout[t * O + o] * cache->xe[t * O + o];
        dd[t] = spd_rnd(dt, acc);
    }
    if (dV == NULL) goto input_grad;
    /* G = x^T (d * dout) over routed tokens [D, O], replicated on every tp rank. */
    spd_rows_outer(T, D, O, x, D, d, route, dout, O, G);
    round_all(dt, D * O, G);
    /* dV[:, c] += x^T dxv[:, c] - G U[c, :]^T. */
    spd_rows_outer(T, D, C, x, D, NULL, NULL, dxv, C, sa);
    spd_rows_mm(D, O, C, G, O, Ut, C, NULL, 0, sb);
    for (int64_t i = 0; i < D * C; i++) dV[i] = spd_rnd(dt, dV[i] + spd_rnd(dt, spd_rnd(dt, sa[i]) - spd_rnd(dt, sb[i])));
    /* dU[c, :] += mv[:, c]^T dout - V[:, c]^T G, the first over routed tokens (an unrouted token's
     * term is 0 times its product: +-0, which leaves a sum begun at +0 unchanged). */
    spd_rows_outer(T, C, O, cache->mv, C, NULL, route, dout, O, sa);
    spd_rows_outer(D, C, O, s->V, C, NULL, NULL, G, O, sb);
    for (int64_t i = 0; i < C * O; i++) dU[i] = spd_rnd(dt, dU[i] + spd_rnd(dt, spd_rnd(dt, sa[i]) - spd_rnd(dt, sb[i])));
input_grad:
    if (dx == NULL) goto cleanup;
    /* dx: per rank sum_c dxv V^T, SUM all-reduced; then d * dout E^T (or dout W when unrouted). */
    transpose(D, C, s->V, Vt);
    component_partials(ctx, T, D, C, dxv, Vt, NULL, 0, parts);
    EQ_TRY(spd_tp_sum(ctx, parts, T * D, dx));
    transpose(D, O, s->E, Et);
    spd_rows_mm(T, O, D, dout, O, Et, D, route, 1, sa);
    if (route != NULL) spd_rows_mm(T, O, D, dout, O, s->W, D, route, 0, sb);
    for (int64_t t = 0; t < T; t++) {
        const int routed = route == NULL || route[t];
        for (int64_t i = 0; i < D; i++)
            dx[t * D + i] = routed ? spd_rnd(dt, dx[t * D + i] + spd_rnd(dt, d[t] * spd_rnd(dt, sa[t * D + i])))
                                   : spd_rnd(dt, sb[t * D + i]);
    }
cleanup:
    free(dmv), free(dxv), free(G), free(parts), free(Ut), free(Vt), free(Et), free(sa), free(sb);
    return st;
}

void spd_ci_forward(eq_dtype dt, const spd_ci_fn *f, int64_t T, const double *x, double *hpre, double *hg, double *z)
{
    const int64_t D = f->D, H = f->H, C = f->C;
    spd_rows_mm(T, D, H, x, D, f->W1, H, NULL, 0, hpre);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) hpre[t * H + h] = spd_rnd(dt, hpre[t * H + h] + f->b1[h]);
    spd_gelu_erf_forward(dt, T * H, hg, hpre);
    spd_rows_mm(T, H, C, hg, H, f->W2, C, NULL, 0, z);
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) z[t * C + c] = spd_rnd(dt, z[t * C + c] + f->b2[c]);
}

/* The parameter gradients of y = x W + b over T tokens (x [T, I], dy [T, O]; W [I, O]):
 * dW = x^T dy, db = sum_t dy, each summed over t in order and rounded once (overwritten). */
static void linear_param_grads(eq_dtype dt, int64_t T, int64_t I, int64_t O, const double *x, const double *dy,
                               double *dW, double *db)
{
    memset(db, 0, (size_t)O * sizeof *db);
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < O; o++) db[o] += dy[t * O + o];
    round_all(dt, O, db);
    spd_rows_outer(T, I, O, x, I, NULL, NULL, dy, O, dW);
    round_all(dt, I * O, dW);
}

eq_status spd_ci_backward(const spd_ctx *ctx, const spd_ci_fn *f, int64_t T, const double *x, const double *hpre,
                          const double *hg, const double *dz, double *dW1, double *db1, double *dW2, double *db2)
{
    const eq_dtype dt = ctx->dt;
    const int64_t D = f->D, H = f->H, C = f->C;
    double *parts = calloc((size_t)(ctx->tp_group.n_local * T * H), sizeof *parts), *dh = calloc((size_t)(T * H), sizeof *dh);
    double *W2t = malloc((size_t)(C * H) * sizeof *W2t); /* [C, H] */
    eq_status st = EQ_OK;
    if (parts == NULL || dh == NULL || W2t == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a CI function's backward");
        goto cleanup;
    }
    linear_param_grads(dt, T, H, C, hg, dz, dW2, db2);
    transpose(H, C, f->W2, W2t);
    component_partials(ctx, T, H, C, dz, W2t, NULL, 0, parts);
    EQ_TRY(spd_tp_sum(ctx, parts, T * H, dh));
    spd_gelu_erf_backward(dt, T * H, dh, dh, hpre);
    linear_param_grads(dt, T, D, H, x, dh, dW1, db1);
cleanup:
    free(parts), free(dh), free(W2t);
    return st;
}
