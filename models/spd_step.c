#include "models/spd_step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/rng.h"

const char *const spd_term_names[SPD_N_TERMS] = {"faith", "stoch", "imp_min", "ppgd"};

int spd_n_sites(const spd_sizes *z) { return (int)(2 * z->layers); }

static double *zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

int64_t spd_param_numel(const spd_site_params *p, int field)
{
    int k = 0;
#define SPD_NUMEL(name, rows, cols, std, mean) \
    if (k++ == field) return ((rows) > 0 ? (rows) : 1) * (cols);
    SPD_SITE_PARAMS(SPD_NUMEL)
#undef SPD_NUMEL
    return 0;
}

eq_status spd_params_alloc(const spd_sizes *z, int site, spd_site_params *p)
{
    memset(p, 0, sizeof *p);
    const int down = site % 2;
    p->D = down ? z->d_mlp : z->d_model;
    p->O = down ? z->d_model : z->d_mlp;
    p->C = down ? z->c_down : z->c_fc;
    p->H = z->ci_hidden;
    int ok = (p->W = zeros(p->O * p->D)) != NULL;
#define SPD_ALLOC(name, rows, cols, std, mean) ok = ok && (p->name = zeros(((rows) > 0 ? (rows) : 1) * (cols))) != NULL;
    SPD_SITE_PARAMS(SPD_ALLOC)
#undef SPD_ALLOC
    if (ok) return EQ_OK;
    spd_params_free(p);
    return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for site %d's parameters", site);
}

void spd_params_free(spd_site_params *p)
{
    free(p->W);
#define SPD_FREE(name, rows, cols, std, mean) free(p->name);
    SPD_SITE_PARAMS(SPD_FREE)
#undef SPD_FREE
    memset(p, 0, sizeof *p);
}

/* n values mean + std N(0, 1) keyed by name, rounded to fp32 (the master weights are fp32). */
static void fill_normal(double *x, int64_t n, uint64_t seed, const char *name, double std, double mean)
{
    const uint32_t stream = eq_rng_stream(name);
    for (int64_t i = 0; i < n; i++) x[i] = (double)(float)(mean + std * eq_rng_normal(seed, stream, (uint64_t)i));
}

eq_status spd_params_init(const spd_sizes *z, uint64_t seed, spd_site_params *sites)
{
    char name[96];
    for (int s = 0; s < spd_n_sites(z); s++) {
        spd_site_params *p = &sites[s];
        eq_status st = spd_params_alloc(z, s, p);
        if (st != EQ_OK) return st;
        snprintf(name, sizeof name, "spd/site%02d/target_W", s);
        fill_normal(p->W, p->O * p->D, seed, name, 1.0 / sqrt((double)p->D), 0.0);
#define SPD_INIT(field, rows, cols, std, mean)                                                  \
    snprintf(name, sizeof name, "spd/site%02d/" #field, s);                                    \
    fill_normal(p->field, ((rows) > 0 ? (rows) : 1) * (cols), seed, name,                        \
                (std) / sqrt((double)((rows) > 0 ? (rows) : 1)), (mean));
        SPD_SITE_PARAMS(SPD_INIT)
#undef SPD_INIT
    }
    return EQ_OK;
}

eq_status spd_grads_alloc(const spd_site_params *p, spd_site_grads *g)
{
    memset(g, 0, sizeof *g);
    int ok = 1;
#define SPD_ALLOC(name, rows, cols, std, mean) ok = ok && (g->name = zeros(((rows) > 0 ? (rows) : 1) * (cols))) != NULL;
    SPD_SITE_PARAMS(SPD_ALLOC)
#undef SPD_ALLOC
    if (ok) return EQ_OK;
    spd_grads_free(g);
    return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a site's gradients");
}

void spd_grads_free(spd_site_grads *g)
{
#define SPD_FREE(name, rows, cols, std, mean) free(g->name);
    SPD_SITE_PARAMS(SPD_FREE)
#undef SPD_FREE
    memset(g, 0, sizeof *g);
}

eq_status spd_replica_init(const spd_sizes *z, const spd_site_params *sites, uint64_t seed, int64_t b0, int64_t rows,
                           spd_replica *rep)
{
    memset(rep, 0, sizeof *rep);
    const int64_t T = rows * z->seq, M = z->d_model, t0 = b0 * z->seq;
    char name[96];
    rep->b0 = b0, rep->rows = rows, rep->T = T, rep->n_sites = spd_n_sites(z);
    int ok = (rep->h0 = zeros(T * M)) != NULL && (rep->y_target = zeros(T * M)) != NULL;
    for (int s = 0; ok && s < rep->n_sites; s++) {
        const spd_site_params *p = &sites[s];
        const int64_t C = p->C;
        ok = (rep->x[s] = zeros(T * p->D)) && (rep->E[s] = zeros(p->D * p->O)) && (rep->hpre[s] = zeros(T * p->H)) &&
             (rep->hg[s] = zeros(T * p->H)) && (rep->z[s] = zeros(T * C)) && (rep->ci_lo[s] = zeros(T * C)) &&
             (rep->ci_up[s] = zeros(T * C)) && (rep->S_local[s] = zeros(C)) && (rep->u[s] = zeros(T * (C + 1))) &&
             (rep->route[s] = calloc((size_t)T, 1)) && (rep->stoch_mask[s] = zeros(T * (C + 1))) &&
             (rep->src[s] = zeros(T * (C + 1))) && (rep->src_init[s] = zeros(T * (C + 1))) &&
             (rep->src_grad[s] = zeros(T * (C + 1)));
        for (int k = 0; ok && k < SPD_N_TERMS; k++) ok = spd_grads_alloc(p, &rep->grads[k][s]) == EQ_OK;
        if (!ok) break;
        /* Noise, routing and the sources' init, by global token index t0 + t. */
        snprintf(name, sizeof name, "spd/step%lld/site%02d/u", (long long)z->step, s);
        uint32_t stream = eq_rng_stream(name);
        for (int64_t i = 0; i < T * (C + 1); i++) rep->u[s][i] = (double)(float)eq_rng_uniform(seed, stream, (uint64_t)(t0 * (C + 1) + i));
        snprintf(name, sizeof name, "spd/step%lld/site%02d/route", (long long)z->step, s);
        stream = eq_rng_stream(name);
        for (int64_t t = 0; t < T; t++) rep->route[s][t] = eq_rng_uniform(seed, stream, (uint64_t)(t0 + t)) < 0.5;
        snprintf(name, sizeof name, "spd/site%02d/ppgd_init", s);
        stream = eq_rng_stream(name);
        for (int64_t i = 0; i < T * (C + 1); i++)
            rep->src[s][i] = rep->src_init[s][i] =
                (double)(float)eq_rng_uniform(seed, stream, (uint64_t)(t0 * (C + 1) + i));
    }
    if (!ok) {
        spd_replica_free(rep);
        return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a replica of %lld tokens", (long long)T);
    }
    const uint32_t stream = eq_rng_stream("spd/input");
    for (int64_t i = 0; i < T * M; i++) rep->h0[i] = (double)(float)eq_rng_normal(seed, stream, (uint64_t)(t0 * M + i));
    return EQ_OK;
}

void spd_replica_free(spd_replica *rep)
{
    free(rep->h0), free(rep->y_target);
    for (int s = 0; s < rep->n_sites; s++) {
        free(rep->x[s]), free(rep->E[s]), free(rep->hpre[s]), free(rep->hg[s]), free(rep->z[s]);
        free(rep->ci_lo[s]), free(rep->ci_up[s]), free(rep->S_local[s]), free(rep->u[s]), free(rep->route[s]);
        free(rep->stoch_mask[s]), free(rep->src[s]), free(rep->src_init[s]), free(rep->src_grad[s]);
        for (int k = 0; k < SPD_N_TERMS; k++) spd_grads_free(&rep->grads[k][s]);
    }
    memset(rep, 0, sizeof *rep);
}

static spd_site site_view(const spd_site_params *p, const double *E)
{
    return (spd_site){p->D, p->O, p->C, p->W, p->V, p->U, E};
}

static spd_ci_fn ci_view(const spd_site_params *p) { return (spd_ci_fn){p->D, p->H, p->C, p->ci_w1, p->ci_b1, p->ci_w2, p->ci_b2}; }

eq_status spd_replica_forward(const spd_ctx *ctx, const spd_sizes *z, const spd_site_params *sites, spd_replica *rep)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = ctx->dt;
    const int64_t T = rep->T, M = z->d_model, F = z->d_mlp;
    double *h = zeros(T * M), *rstd = zeros(T), *f = zeros(T * F), *o = zeros(T * M);
    if (h == NULL || rstd == NULL || f == NULL || o == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the target forward");
        goto cleanup;
    }
    memcpy(h, rep->h0, (size_t)(T * M) * sizeof *h);
    for (int64_t l = 0; l < z->layers; l++) {
        const spd_site_params *fc = &sites[2 * l], *dn = &sites[2 * l + 1];
        spd_rmsnorm_forward(dt, T, M, rep->x[2 * l], rstd, h);
        EQ_TRY(spd_linear_nt(dt, T, M, F, f, rep->x[2 * l], fc->W));
        spd_gelu_tanh_forward(dt, T * F, rep->x[2 * l + 1], f);
        EQ_TRY(spd_linear_nt(dt, T, F, M, o, rep->x[2 * l + 1], dn->W));
        for (int64_t i = 0; i < T * M; i++) h[i] = spd_rnd(dt, h[i] + o[i]);
    }
    memcpy(rep->y_target, h, (size_t)(T * M) * sizeof *h);
    for (int s = 0; s < rep->n_sites; s++) {
        const spd_site_params *p = &sites[s];
        const spd_ci_fn fn = ci_view(p);
        EQ_TRY(spd_delta(ctx, p->D, p->O, p->C, p->W, p->V, p->U, rep->E[s]));
        spd_ci_forward(dt, &fn, T, rep->x[s], rep->hpre[s], rep->hg[s], rep->z[s]);
        spd_lower_leaky_forward(dt, T * p->C, rep->ci_lo[s], rep->z[s]);
        spd_upper_leaky_forward(dt, T * p->C, rep->ci_up[s], rep->z[s], SPD_LEAKY_ALPHA);
        spd_imp_min_sums(dt, T, p->C, rep->ci_up[s], spd_pnorm(z->step, z->steps), rep->S_local[s]);
    }
cleanup:
    free(h), free(rstd), free(f), free(o);
    return st;
}

/* The model with every site decomposed: masks m[s] [T, C], delta masks d[s] [T], routing route[s]
 * [T] (NULL: all routed). Keeps what the backward needs. */
typedef struct {
    double *h[SPD_MAX_SITES / 2 + 1]; /* [T, M] residual stream entering layer l; h[L] = y */
    double *rstd[SPD_MAX_SITES / 2];  /* [T] */
    double *in[SPD_MAX_SITES];        /* site inputs [T, D] */
    double *out[SPD_MAX_SITES];       /* site outputs [T, O] */
    spd_site_cache cache[SPD_MAX_SITES];
} masked_run;

static void masked_free(masked_run *r, int n_sites)
{
    for (int l = 0; l <= n_sites / 2; l++) free(r->h[l]);
    for (int l = 0; l < n_sites / 2; l++) free(r->rstd[l]);
    for (int s = 0; s < n_sites; s++) {
        free(r->in[s]), free(r->out[s]);
        free(r->cache[s].xv), free(r->cache[s].mv), free(r->cache[s].xe);
    }
    memset(r, 0, sizeof *r);
}

static eq_status masked_forward(const spd_ctx *ctx, const spd_sizes *z, const spd_site_params *sites,
                                const spd_replica *rep, double *const *m, double *const *d,
                                unsigned char *const *route, masked_run *r)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = ctx->dt;
    const int64_t T = rep->T, M = z->d_model, L = z->layers;
    memset(r, 0, sizeof *r);
    int ok = 1;
    for (int64_t l = 0; ok && l <= L; l++) ok = (r->h[l] = zeros(T * M)) && (l == L || (r->rstd[l] = zeros(T)));
    for (int s = 0; ok && s < rep->n_sites; s++) {
        const spd_site_params *p = &sites[s];
        ok = (r->in[s] = zeros(T * p->D)) && (r->out[s] = zeros(T * p->O)) && (r->cache[s].xv = zeros(T * p->C)) &&
             (r->cache[s].mv = zeros(T * p->C)) && (r->cache[s].xe = zeros(T * p->O));
    }
    if (!ok) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a masked forward");
        goto cleanup;
    }
    memcpy(r->h[0], rep->h0, (size_t)(T * M) * sizeof(double));
    for (int64_t l = 0; l < L; l++) {
        const int fc = (int)(2 * l), dn = fc + 1;
        spd_rmsnorm_forward(dt, T, M, r->in[fc], r->rstd[l], r->h[l]);
        spd_site s_fc = site_view(&sites[fc], rep->E[fc]), s_dn = site_view(&sites[dn], rep->E[dn]);
        EQ_TRY(spd_site_forward(ctx, &s_fc, T, r->in[fc], m[fc], d[fc], route ? route[fc] : NULL, &r->cache[fc], r->out[fc]));
        spd_gelu_tanh_forward(dt, T * sites[fc].O, r->in[dn], r->out[fc]);
        EQ_TRY(spd_site_forward(ctx, &s_dn, T, r->in[dn], m[dn], d[dn], route ? route[dn] : NULL, &r->cache[dn], r->out[dn]));
        for (int64_t i = 0; i < T * M; i++) r->h[l + 1][i] = spd_rnd(dt, r->h[l][i] + r->out[dn][i]);
    }
cleanup:
    return st;
}

/* dy [T, M] -> per site dV, dU (+=, into g[s]; g NULL: not computed), dm[s] [T, C], dd[s] [T]. */
static eq_status masked_backward(const spd_ctx *ctx, const spd_sizes *z, const spd_site_params *sites,
                                 const spd_replica *rep, double *const *m, double *const *d,
                                 unsigned char *const *route, const masked_run *r, const double *dy,
                                 spd_site_grads *g, double **dm, double **dd)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = ctx->dt;
    const int64_t T = rep->T, M = z->d_model, F = z->d_mlp;
    double *dh = zeros(T * M), *dg = zeros(T * F), *da = zeros(T * M), *dn_in = zeros(T * M);
    if (dh == NULL || dg == NULL || da == NULL || dn_in == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a masked backward");
        goto cleanup;
    }
    memcpy(dh, dy, (size_t)(T * M) * sizeof *dh);
    for (int64_t l = z->layers - 1; l >= 0; l--) {
        const int fc = (int)(2 * l), dn = fc + 1;
        spd_site s_fc = site_view(&sites[fc], rep->E[fc]), s_dn = site_view(&sites[dn], rep->E[dn]);
        EQ_TRY(spd_site_backward(ctx, &s_dn, T, r->in[dn], m[dn], d[dn], route ? route[dn] : NULL, &r->cache[dn], dh,
                                 dg, dm[dn], dd[dn], g != NULL ? g[dn].V : NULL, g != NULL ? g[dn].U : NULL));
        spd_gelu_tanh_backward(dt, T * F, dg, dg, r->out[fc]);
        EQ_TRY(spd_site_backward(ctx, &s_fc, T, r->in[fc], m[fc], d[fc], route ? route[fc] : NULL, &r->cache[fc], dg,
                                 da, dm[fc], dd[fc], g != NULL ? g[fc].V : NULL, g != NULL ? g[fc].U : NULL));
        spd_rmsnorm_backward(dt, T, M, dn_in, da, r->in[fc], r->rstd[l]);
        for (int64_t i = 0; i < T * M; i++) dh[i] = spd_rnd(dt, dh[i] + dn_in[i]);
    }
cleanup:
    free(dh), free(dg), free(da), free(dn_in);
    return st;
}

/* Scratch per site for one reconstruction loss: masks, their gradients, dci. */
typedef struct {
    double *m[SPD_MAX_SITES], *d[SPD_MAX_SITES], *s[SPD_MAX_SITES], *dm[SPD_MAX_SITES], *dd[SPD_MAX_SITES];
    double *ds[SPD_MAX_SITES], *dci[SPD_MAX_SITES];
} recon_scratch;

static void scratch_free(recon_scratch *w, int n_sites)
{
    for (int s = 0; s < n_sites; s++) {
        free(w->m[s]), free(w->d[s]), free(w->s[s]), free(w->dm[s]), free(w->dd[s]), free(w->ds[s]), free(w->dci[s]);
    }
    memset(w, 0, sizeof *w);
}

static eq_status scratch_alloc(const spd_site_params *sites, const spd_replica *rep, recon_scratch *w)
{
    memset(w, 0, sizeof *w);
    const int64_t T = rep->T;
    int ok = 1;
    for (int s = 0; ok && s < rep->n_sites; s++) {
        const int64_t C = sites[s].C;
        ok = (w->m[s] = zeros(T * C)) && (w->d[s] = zeros(T)) && (w->s[s] = zeros(T * C)) && (w->dm[s] = zeros(T * C)) &&
             (w->dd[s] = zeros(T)) && (w->ds[s] = zeros(T * C)) && (w->dci[s] = zeros(T * C));
    }
    if (ok) return EQ_OK;
    scratch_free(w, rep->n_sites);
    return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the reconstruction masks");
}

/* Masks from noise or sources src [T, C+1]: m = ci_lo + (1 - ci_lo) src[:, :C], d = src[:, C]. */
static void masks_from(eq_dtype dt, const spd_site_params *sites, const spd_replica *rep, double *const *src,
                       recon_scratch *w)
{
    for (int s = 0; s < rep->n_sites; s++) {
        const int64_t C = sites[s].C;
        for (int64_t t = 0; t < rep->T; t++) {
            memcpy(w->s[s] + t * C, src[s] + t * (C + 1), (size_t)C * sizeof(double));
            w->d[s][t] = src[s][t * (C + 1) + C];
        }
        spd_mask_forward(dt, rep->T * C, w->m[s], rep->ci_lo[s], w->s[s]);
    }
}

/* One reconstruction loss against the target output: forward with the masks in w, loss and its
 * gradient, backward into g (V, U +=; g NULL: no parameter gradients), w->dm/dd, then dci = dm (1 - s) and the sources' gradient
 * ds (into src_grad [T, C+1] when not NULL). */
static eq_status recon_loss(const spd_ctx *ctx, const spd_sizes *z, const spd_site_params *sites,
                            const spd_replica *rep, unsigned char *const *route, double norm, double coef,
                            recon_scratch *w, spd_site_grads *g, double **src_grad, double *loss)
{
    eq_status st = EQ_OK;
    masked_run r;
    const int64_t T = rep->T, M = z->d_model;
    double *dy = zeros(T * M);
    memset(&r, 0, sizeof r);
    if (dy == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a loss gradient");
    EQ_TRY(masked_forward(ctx, z, sites, rep, w->m, w->d, route, &r));
    spd_mse(ctx->dt, T * M, r.h[z->layers], rep->y_target, norm, coef, loss, dy);
    EQ_TRY(masked_backward(ctx, z, sites, rep, w->m, w->d, route, &r, dy, g, w->dm, w->dd));
    for (int s = 0; s < rep->n_sites; s++) {
        const int64_t C = sites[s].C;
        memset(w->dci[s], 0, (size_t)(T * C) * sizeof(double));
        spd_mask_backward(ctx->dt, T * C, w->dci[s], w->ds[s], w->dm[s], rep->ci_lo[s], w->s[s]);
        for (int64_t t = 0; src_grad != NULL && t < T; t++) {
            memcpy(src_grad[s] + t * (C + 1), w->ds[s] + t * C, (size_t)C * sizeof(double));
            src_grad[s][t * (C + 1) + C] = w->dd[s][t];
        }
    }
cleanup:
    masked_free(&r, rep->n_sites);
    free(dy);
    return st;
}

/* dz from dci through a sigmoid, then the CI function's backward into g's CI fields. */
static eq_status ci_term_backward(const spd_ctx *ctx, const spd_site_params *p, const spd_replica *rep, int s,
                                  const double *dci, int upper, spd_site_grads *g)
{
    const int64_t n = rep->T * p->C;
    double *dz = zeros(n);
    if (dz == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for dz");
    if (upper) spd_upper_leaky_backward(ctx->dt, n, dz, dci, rep->z[s], SPD_LEAKY_ALPHA);
    else spd_lower_leaky_backward(ctx->dt, n, dz, dci, rep->z[s], ctx->lower_alpha);
    const spd_ci_fn fn = ci_view(p);
    eq_status st = spd_ci_backward(ctx, &fn, rep->T, rep->x[s], rep->hpre[s], rep->hg[s], dz, g->ci_w1, g->ci_b1,
                                   g->ci_w2, g->ci_b2);
    free(dz);
    return st;
}

eq_status spd_replica_losses(const spd_ctx *ctx, const spd_sizes *z, const spd_site_params *sites,
                             const spd_conv *conv, spd_replica *rep)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = ctx->dt;
    const int64_t T = rep->T, M = z->d_model;
    const double p = spd_pnorm(z->step, z->steps);
    recon_scratch w;
    masked_run r;
    double *dci = NULL, *mom_m[SPD_MAX_SITES] = {0}, *mom_v[SPD_MAX_SITES] = {0};
    memset(&r, 0, sizeof r);
    EQ_TRY(scratch_alloc(sites, rep, &w));
    for (int k = 0; k < SPD_N_TERMS; k++) {
        rep->loss[k] = 0;
        for (int s = 0; s < rep->n_sites; s++) {
            int field = 0;
            const spd_site_params *q = &sites[s];
#define SPD_ZERO(f, rows, cols, std, mean) memset(rep->grads[k][s].f, 0, (size_t)spd_param_numel(q, field++) * sizeof(double));
            SPD_SITE_PARAMS(SPD_ZERO)
#undef SPD_ZERO
        }
    }

    /* Faithfulness: replicated data-free term, contributed where conv says. */
    double numel = 0;
    for (int s = 0; s < rep->n_sites; s++) numel += (double)(sites[s].D * sites[s].O);
    for (int s = 0; conv->faith_here && s < rep->n_sites; s++) {
        double l = 0;
        const spd_site_params *q = &sites[s];
        EQ_TRY(spd_faithfulness(dt, q->D, q->O, q->C, q->V, q->U, rep->E[s], numel, SPD_COEF_FAITH, &l,
                                rep->grads[SPD_FAITH][s].V, rep->grads[SPD_FAITH][s].U));
        rep->loss[SPD_FAITH] += l;
    }

    /* Stochastic reconstruction, subset routing, masks ci + (1 - ci) u. */
    masks_from(dt, sites, rep, rep->u, &w);
    for (int s = 0; s < rep->n_sites; s++) {
        const int64_t C = sites[s].C;
        for (int64_t t = 0; t < T; t++) {
            memcpy(rep->stoch_mask[s] + t * (C + 1), w.m[s] + t * C, (size_t)C * sizeof(double));
            rep->stoch_mask[s][t * (C + 1) + C] = w.d[s][t];
        }
    }
    EQ_TRY(recon_loss(ctx, z, sites, rep, rep->route, conv->recon_norm_stoch, SPD_COEF_STOCH, &w, rep->grads[SPD_STOCH],
                      NULL, &rep->loss[SPD_STOCH]));
    for (int s = 0; s < rep->n_sites; s++) EQ_TRY(ci_term_backward(ctx, &sites[s], rep, s, w.dci[s], 0, &rep->grads[SPD_STOCH][s]));

    /* Importance minimality on ci_upper, with the sums, count and world-size factor of conv. */
    for (int s = 0; s < rep->n_sites; s++) {
        const int64_t C = sites[s].C;
        double l = 0;
        free(dci);
        if ((dci = zeros(T * C)) == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for dci");
            goto cleanup;
        }
        spd_imp_min(dt, T, C, rep->ci_up[s], conv->imp_S[s], conv->imp_n, conv->imp_ws, p, SPD_COEF_IMP_MIN, &l, dci);
        if (conv->imp_loss_here) rep->loss[SPD_IMP_MIN] += l;
        EQ_TRY(ci_term_backward(ctx, &sites[s], rep, s, dci, 1, &rep->grads[SPD_IMP_MIN][s]));
    }

    /* Persistent PGD: warm-up ascent on the sources (the loss's source gradient only), then the
     * loss at the updated sources, whose gradient trains V, U and the CI functions. */
    for (int s = 0; s < rep->n_sites; s++) {
        if ((mom_m[s] = zeros(T * (sites[s].C + 1))) == NULL || (mom_v[s] = zeros(T * (sites[s].C + 1))) == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the sources' Adam state");
            goto cleanup;
        }
    }
    for (int k = 1; k <= conv->ppgd_warmup; k++) {
        double l = 0;
        masks_from(dt, sites, rep, rep->src, &w);
        EQ_TRY(recon_loss(ctx, z, sites, rep, NULL, conv->recon_norm_ppgd, SPD_COEF_PPGD, &w, NULL, rep->src_grad, &l));
        for (int s = 0; s < rep->n_sites; s++)
            spd_adam_ascent(dt, T * (sites[s].C + 1), rep->src[s], rep->src_grad[s], mom_m[s], mom_v[s], k);
    }
    masks_from(dt, sites, rep, rep->src, &w);
    EQ_TRY(recon_loss(ctx, z, sites, rep, NULL, conv->recon_norm_ppgd, SPD_COEF_PPGD, &w, rep->grads[SPD_PPGD],
                      rep->src_grad, &rep->loss[SPD_PPGD]));
    for (int s = 0; s < rep->n_sites; s++) EQ_TRY(ci_term_backward(ctx, &sites[s], rep, s, w.dci[s], 0, &rep->grads[SPD_PPGD][s]));

    /* Eval sums: components active (ci_lower > 0) per token, and the unmasked reconstruction
     * (every mask 1, no delta), as sums and counts for the caller to all-reduce before dividing. */
    for (int s = 0; s < rep->n_sites; s++) {
        const int64_t C = sites[s].C;
        rep->eval_l0_sum[s] = 0;
        for (int64_t i = 0; i < T * C; i++) rep->eval_l0_sum[s] += rep->ci_lo[s][i] > 0.0;
        for (int64_t i = 0; i < T * C; i++) w.m[s][i] = 1.0;
        memset(w.d[s], 0, (size_t)T * sizeof(double));
    }
    EQ_TRY(masked_forward(ctx, z, sites, rep, w.m, w.d, NULL, &r));
    rep->eval_recon_sum = 0;
    for (int64_t i = 0; i < T * M; i++) {
        const double e = r.h[z->layers][i] - rep->y_target[i];
        rep->eval_recon_sum += e * e;
    }
    rep->eval_tokens = (double)T;
cleanup:
    masked_free(&r, rep->n_sites);
    scratch_free(&w, rep->n_sites);
    for (int s = 0; s < SPD_MAX_SITES; s++) free(mom_m[s]), free(mom_v[s]);
    free(dci);
    return st;
}
