#include "models/spd_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


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

void spd_gelu_tanh_forward(eq_dtype dt, int64_t n, double *out, const double *in)
{
    for (int64_t i = 0; i < n; i++) {
        const double x = in[i];
        out[i] = spd_rnd(dt, 0.5 * x * (1.0 + tanh(GELU_K * (x + GELU_C * x * x * x))));
    }
}

void spd_gelu_tanh_backward(eq_dtype dt, int64_t n, double *din, const double *dout, const double *in)
{
    for (int64_t i = 0; i < n; i++) {
        const double x = in[i], th = tanh(GELU_K * (x + GELU_C * x * x * x));
        const double g = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
        din[i] = spd_rnd(dt, dout[i] * g);
    }
}

void spd_gelu_erf_forward(eq_dtype dt, int64_t n, double *out, const double *in)
{
    for (int64_t i = 0; i < n; i++) out[i] = spd_rnd(dt, in[i] * 0.5 * (1.0 + erf(in[i] / sqrt(2.0))));
}

void spd_gelu_erf_backward(eq_dtype dt, int64_t n, double *din, const double *dout, const double *in)
{
    for (int64_t i = 0; i < n; i++) {
        const double x = in[i];
        const double g = 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * 3.14159265358979323846);
        din[i] = spd_rnd(dt, dout[i] * g);
    }
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

void spd_linear_nt(eq_dtype dt, int64_t T, int64_t K, int64_t N, double *out, const double *x, const double *W)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += x[t * K + k] * W[n * K + k];
            out[t * N + n] = spd_rnd(dt, acc);
        }
}

/* parts[j] [T, N] = a[:, slice r] B[:, slice r]^T for each local tp rank r = first_local + j's
 * slice of the C components (a [T, C], B [N, C]), each rounded as that rank writes it: the
 * partials a SUM all-reduce adds. */
static void component_partials(const spd_ctx *ctx, int64_t T, int64_t N, int64_t C, const double *a, const double *B,
                               double *parts)
{
    for (int j = 0; j < ctx->tp_group.n_local; j++) {
        const int r = ctx->tp_group.first_local + j;
        const int64_t c0 = spd_c0(C, ctx->tp, r), c1 = spd_c0(C, ctx->tp, r + 1);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < N; i++) {
                double acc = 0;
                for (int64_t c = c0; c < c1; c++) acc += a[t * C + c] * B[i * C + c];
                parts[(j * T + t) * N + i] = spd_rnd(ctx->dt, acc);
            }
    }
}

eq_status spd_delta(const spd_ctx *ctx, int64_t D, int64_t O, int64_t C, const double *W, const double *V,
                    const double *U, double *E)
{
    eq_status st = EQ_OK;
    double *parts = calloc((size_t)(ctx->tp_group.n_local * D * O), sizeof *parts);
    double *Ut = malloc((size_t)(O * C) * sizeof *Ut); /* [O, C]: U's rows as component_partials reads B */
    if (parts == NULL || Ut == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for V U partials [%lld, %lld]", (long long)D, (long long)O);
        goto cleanup;
    }
    for (int64_t c = 0; c < C; c++)
        for (int64_t o = 0; o < O; o++) Ut[o * C + c] = U[c * O + o];
    component_partials(ctx, D, O, C, V, Ut, parts);
    EQ_TRY(spd_tp_sum(ctx, parts, D * O, E));
    for (int64_t i = 0; i < D; i++)
        for (int64_t o = 0; o < O; o++) E[i * O + o] = spd_rnd(ctx->dt, W[o * D + i] - E[i * O + o]);
cleanup:
    free(Ut);
    free(parts);
    return st;
}

eq_status spd_site_forward(const spd_ctx *ctx, const spd_site *s, int64_t T, const double *x, const double *m,
                           const double *d, const unsigned char *route, spd_site_cache *cache, double *out)
{
    const eq_dtype dt = ctx->dt;
    const int64_t D = s->D, O = s->O, C = s->C;
    double *parts = calloc((size_t)(ctx->tp_group.n_local * T * O), sizeof *parts);
    if (parts == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a site's partial outputs");
    for (int64_t t = 0; t < T; t++) {
        const double *xt = x + t * D;
        for (int64_t c = 0; c < C; c++) {
            double acc = 0;
            for (int64_t i = 0; i < D; i++) acc += xt[i] * s->V[i * C + c];
            cache->xv[t * C + c] = spd_rnd(dt, acc);
            cache->mv[t * C + c] = spd_rnd(dt, cache->xv[t * C + c] * m[t * C + c]);
        }
        for (int64_t o = 0; o < O; o++) {
            double acc = 0;
            for (int64_t i = 0; i < D; i++) acc += xt[i] * s->E[i * O + o];
            cache->xe[t * O + o] = spd_rnd(dt, acc);
        }
        if (route != NULL && !route[t]) continue; /* its partials stay 0 */
        for (int j = 0; j < ctx->tp_group.n_local; j++) {
            const int r = ctx->tp_group.first_local + j;
            const int64_t c0 = spd_c0(C, ctx->tp, r), c1 = spd_c0(C, ctx->tp, r + 1);
            for (int64_t o = 0; o < O; o++) {
                double acc = 0;
                for (int64_t c = c0; c < c1; c++) acc += cache->mv[t * C + c] * s->U[c * O + o];
                parts[(j * T + t) * O + o] = spd_rnd(dt, acc);
            }
        }
    }
    eq_status st = spd_tp_sum(ctx, parts, T * O, out);
    for (int64_t t = 0; st == EQ_OK && t < T; t++) {
        if (route != NULL && !route[t]) {
            spd_linear_nt(dt, 1, D, O, out + t * O, x + t * D, s->W);
            continue;
        }
        for (int64_t o = 0; o < O; o++) out[t * O + o] = spd_rnd(dt, out[t * O + o] + spd_rnd(dt, d[t] * cache->xe[t * O + o]));
    }
    free(parts);
    return st;
}

eq_status spd_site_backward(const spd_ctx *ctx, const spd_site *s, int64_t T, const double *x, const double *m,
                            const double *d, const unsigned char *route, const spd_site_cache *cache,
                            const double *dout, double *dx, double *dm, double *dd, double *dV, double *dU)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = ctx->dt;
    const int64_t D = s->D, O = s->O, C = s->C;
    double *dmv = calloc((size_t)(T * C), sizeof *dmv), *dxv = calloc((size_t)(T * C), sizeof *dxv);
    double *G = calloc((size_t)(D * O), sizeof *G), *parts = calloc((size_t)(ctx->tp_group.n_local * T * D), sizeof *parts);
    if (dmv == NULL || dxv == NULL || G == NULL || parts == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a site's backward");
        goto cleanup;
    }
    /* Per token: dmv = dout U^T (each rank its components), dm, dxv, dd. */
    for (int64_t t = 0; t < T; t++) {
        const int routed = route == NULL || route[t];
        dd[t] = 0;
        for (int64_t c = 0; c < C; c++) {
            double acc = 0;
            for (int64_t o = 0; routed && o < O; o++) acc += dout[t * O + o] * s->U[c * O + o];
            dmv[t * C + c] = spd_rnd(dt, acc);
            dm[t * C + c] = spd_rnd(dt, dmv[t * C + c] * cache->xv[t * C + c]);
            dxv[t * C + c] = spd_rnd(dt, dmv[t * C + c] * m[t * C + c]);
        }
        if (!routed) continue;
        double acc = 0;
        for (int64_t o = 0; o < O; o++) acc += dout[t * O + o] * cache->xe[t * O + o];
        dd[t] = spd_rnd(dt, acc);
    }
    /* G = x^T (d * dout) over routed tokens, replicated on every tp rank. */
    for (int64_t i = 0; i < D; i++)
        for (int64_t o = 0; o < O; o++) {
            double acc = 0;
            for (int64_t t = 0; t < T; t++)
                if (route == NULL || route[t]) acc += x[t * D + i] * d[t] * dout[t * O + o];
            G[i * O + o] = spd_rnd(dt, acc);
        }
    /* dV[:, c] += x^T dxv[:, c] - G U[c, :]^T ; dU[c, :] += mv[:, c]^T dout - V[:, c]^T G. */
    for (int64_t i = 0; i < D; i++)
        for (int64_t c = 0; c < C; c++) {
            double a = 0, b = 0;
            for (int64_t t = 0; t < T; t++) a += x[t * D + i] * dxv[t * C + c];
            for (int64_t o = 0; o < O; o++) b += G[i * O + o] * s->U[c * O + o];
            dV[i * C + c] = spd_rnd(dt, dV[i * C + c] + spd_rnd(dt, spd_rnd(dt, a) - spd_rnd(dt, b)));
        }
    for (int64_t c = 0; c < C; c++)
        for (int64_t o = 0; o < O; o++) {
            double a = 0, b = 0;
            for (int64_t t = 0; t < T; t++) a += cache->mv[t * C + c] * dout[t * O + o] * (route == NULL || route[t]);
            for (int64_t i = 0; i < D; i++) b += s->V[i * C + c] * G[i * O + o];
            dU[c * O + o] = spd_rnd(dt, dU[c * O + o] + spd_rnd(dt, spd_rnd(dt, a) - spd_rnd(dt, b)));
        }
    if (dx == NULL) goto cleanup;
    /* dx: per rank sum_c dxv V^T, SUM all-reduced; then d * dout E^T (or dout W when unrouted). */
    component_partials(ctx, T, D, C, dxv, s->V, parts);
    EQ_TRY(spd_tp_sum(ctx, parts, T * D, dx));
    for (int64_t t = 0; t < T; t++) {
        const int routed = route == NULL || route[t];
        for (int64_t i = 0; i < D; i++) {
            double acc = 0;
            for (int64_t o = 0; o < O; o++) acc += dout[t * O + o] * (routed ? s->E[i * O + o] : s->W[o * D + i]);
            dx[t * D + i] = routed ? spd_rnd(dt, dx[t * D + i] + spd_rnd(dt, d[t] * spd_rnd(dt, acc))) : spd_rnd(dt, acc);
        }
    }
cleanup:
    free(dmv), free(dxv), free(G), free(parts);
    return st;
}

void spd_ci_forward(eq_dtype dt, const spd_ci_fn *f, int64_t T, const double *x, double *hpre, double *hg, double *z)
{
    const int64_t D = f->D, H = f->H, C = f->C;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t h = 0; h < H; h++) {
            double acc = 0;
            for (int64_t i = 0; i < D; i++) acc += x[t * D + i] * f->W1[i * H + h];
            hpre[t * H + h] = spd_rnd(dt, acc + f->b1[h]);
        }
        spd_gelu_erf_forward(dt, H, hg + t * H, hpre + t * H);
        for (int64_t c = 0; c < C; c++) {
            double acc = 0;
            for (int64_t h = 0; h < H; h++) acc += hg[t * H + h] * f->W2[h * C + c];
            z[t * C + c] = spd_rnd(dt, acc + f->b2[c]);
        }
    }
}

/* The parameter gradients of y = x W + b over T tokens (x [T, I], dy [T, O]; W [I, O]):
 * dW = x^T dy, db = sum_t dy, each summed over t in order and rounded once (overwritten). */
static void linear_param_grads(eq_dtype dt, int64_t T, int64_t I, int64_t O, const double *x, const double *dy,
                               double *dW, double *db)
{
    for (int64_t o = 0; o < O; o++) {
        double acc_b = 0;
        for (int64_t t = 0; t < T; t++) acc_b += dy[t * O + o];
        db[o] = spd_rnd(dt, acc_b);
        for (int64_t i = 0; i < I; i++) {
            double acc = 0;
            for (int64_t t = 0; t < T; t++) acc += x[t * I + i] * dy[t * O + o];
            dW[i * O + o] = spd_rnd(dt, acc);
        }
    }
}

eq_status spd_ci_backward(const spd_ctx *ctx, const spd_ci_fn *f, int64_t T, const double *x, const double *hpre,
                          const double *hg, const double *dz, double *dW1, double *db1, double *dW2, double *db2)
{
    const eq_dtype dt = ctx->dt;
    const int64_t D = f->D, H = f->H, C = f->C;
    double *parts = calloc((size_t)(ctx->tp_group.n_local * T * H), sizeof *parts), *dh = calloc((size_t)(T * H), sizeof *dh);
    eq_status st = EQ_OK;
    if (parts == NULL || dh == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a CI function's backward");
        goto cleanup;
    }
    linear_param_grads(dt, T, H, C, hg, dz, dW2, db2);
    component_partials(ctx, T, H, C, dz, f->W2, parts);
    EQ_TRY(spd_tp_sum(ctx, parts, T * H, dh));
    spd_gelu_erf_backward(dt, T * H, dh, dh, hpre);
    linear_param_grads(dt, T, D, H, x, dh, dW1, db1);
cleanup:
    free(parts), free(dh);
    return st;
}
