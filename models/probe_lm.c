#include "models/probe_lm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/rng.h"
#include "models/ops.h"
#include "models/parallel_linear.h"

static gpt_sizes block_sizes(const probe_lm_sizes *z)
{
    gpt_sizes g = {.seq = z->seq, .batch = 1, .hidden = z->hidden, .heads = z->heads, .ffn = z->ffn,
                   .layers = z->layers};
    return g;
}

enum { PROBE_BLOCK_FIELDS = 0
#define PROBE_COUNT(name, ndim, d0, d1, init, std, split) +1
                               GPT_BLOCK_PARAMS(PROBE_COUNT)
#undef PROBE_COUNT
};

int probe_lm_n_tensors(const probe_lm_sizes *z) { return 2 + (int)z->layers * PROBE_BLOCK_FIELDS + 3; }

eq_tensor *probe_lm_tensor(probe_lm_params *p, const probe_lm_sizes *z, int i, int *layer, const char **name)
{
    const int L = (int)z->layers;
    if (i == 0) return *layer = 0, *name = "tok_emb", &p->tok_emb;
    if (i == 1) return *layer = 0, *name = "pos_emb", &p->pos_emb;
    i -= 2;
    if (i < L * PROBE_BLOCK_FIELDS) {
        gpt_block_params *b = &p->blocks[i / PROBE_BLOCK_FIELDS];
        int field = i % PROBE_BLOCK_FIELDS, k = 0;
        *layer = 1 + i / PROBE_BLOCK_FIELDS;
#define PROBE_PICK(f, ndim, d0, d1, init, std, split) \
    if (k++ == field) return *name = #f, &b->f;
        GPT_BLOCK_PARAMS(PROBE_PICK)
#undef PROBE_PICK
    }
    i -= L * PROBE_BLOCK_FIELDS;
    *layer = L + 1;
    if (i == 0) return *name = "lnf_gamma", &p->lnf_gamma;
    if (i == 1) return *name = "lnf_beta", &p->lnf_beta;
    return *name = "head", &p->head;
}

eq_status probe_lm_alloc(probe_lm_params *p, const probe_lm_sizes *z, eq_dtype dt)
{
    eq_status st = EQ_OK;
    memset(p, 0, sizeof *p);
    if (z->layers < 1 || z->layers > PROBE_LM_MAX_LAYERS)
        return EQ_FAIL(EQ_ERR_INPUT, "probe: layers=%lld, want 1..%d", (long long)z->layers, PROBE_LM_MAX_LAYERS);
    const gpt_sizes g = block_sizes(z);
    EQ_TRY(eq_tensor_init_2d(&p->tok_emb, dt, z->vocab, z->hidden));
    EQ_TRY(eq_tensor_init_2d(&p->pos_emb, dt, z->seq, z->hidden));
    for (int l = 0; l < z->layers; l++) EQ_TRY(gpt_params_alloc(&p->blocks[l], &g, dt));
    EQ_TRY(eq_tensor_init(&p->lnf_gamma, dt, 1, &z->hidden));
    EQ_TRY(eq_tensor_init(&p->lnf_beta, dt, 1, &z->hidden));
    EQ_TRY(eq_tensor_init_2d(&p->head, dt, z->vocab, z->hidden));
    return EQ_OK;
cleanup:
    probe_lm_free(p, z);
    return st;
}

void probe_lm_free(probe_lm_params *p, const probe_lm_sizes *z)
{
    eq_tensor_free(&p->tok_emb), eq_tensor_free(&p->pos_emb);
    for (int l = 0; l < z->layers && l < PROBE_LM_MAX_LAYERS; l++) gpt_params_free(&p->blocks[l]);
    eq_tensor_free(&p->lnf_gamma), eq_tensor_free(&p->lnf_beta), eq_tensor_free(&p->head);
}

/* Token embeddings N(0, 1), positions N(0, 0.1^2), the head N(0, 1/H); LayerNorm gamma 1, beta 0;
 * the blocks as models/gpt_block.h initialises them (block l named layers/<l+1>/...). */
void probe_lm_init(probe_lm_params *p, const probe_lm_sizes *z, uint64_t seed)
{
    char name[EQ_NAME_MAX];
    eq_rng_fill_normal(&p->tok_emb, seed, "layers/00/tok_emb", 1.0);
    eq_rng_fill_normal(&p->pos_emb, seed, "layers/00/pos_emb", 0.1);
    for (int l = 0; l < z->layers; l++) {
        gpt_block_params *b = &p->blocks[l];
        /* GPT_BLOCK_PARAMS reads hidden, ffn and layers through `z`, which probe_lm_sizes has */
#define PROBE_INIT(f, ndim, d0, d1, init, std, split)                                    \
    snprintf(name, sizeof name, "layers/%02d/" #f, l + 1);                               \
    if (init == GPT_INIT_ONE)                                                            \
        for (int64_t i = 0; i < eq_tensor_numel(&b->f); i++) eq_tensor_set(&b->f, i, 1.0); \
    if (init == GPT_INIT_NORMAL) eq_rng_fill_normal(&b->f, seed, name, (std));
        GPT_BLOCK_PARAMS(PROBE_INIT)
#undef PROBE_INIT
    }
    for (int64_t i = 0; i < z->hidden; i++) eq_tensor_set(&p->lnf_gamma, i, 1.0);
    snprintf(name, sizeof name, "layers/%02d/head", (int)z->layers + 1);
    eq_rng_fill_normal(&p->head, seed, name, 1.0 / sqrt((double)z->hidden));
}

/* What one unit keeps between its forward and its backward. */
typedef struct {
    eq_tensor x[PROBE_LM_MAX_LAYERS + 1]; /* [S, 1, H]: block inputs, x[L] the last output */
    gpt_block_acts acts[PROBE_LM_MAX_LAYERS];
    eq_tensor lnf_out, logits;            /* [S, 1, H], [S, 1, V] */
    double *lnf_mean, *lnf_rstd;          /* [S] */
} unit_state;

static void state_free(unit_state *u, int L)
{
    for (int l = 0; l <= L; l++) eq_tensor_free(&u->x[l]);
    for (int l = 0; l < L; l++) gpt_acts_free(&u->acts[l]);
    eq_tensor_free(&u->lnf_out), eq_tensor_free(&u->logits);
    free(u->lnf_mean), free(u->lnf_rstd);
}

static eq_status state_alloc(unit_state *u, const probe_lm_sizes *z, eq_dtype dt)
{
    eq_status st = EQ_OK;
    const gpt_sizes g = block_sizes(z);
    const int64_t h_shape[3] = {z->seq, 1, z->hidden}, v_shape[3] = {z->seq, 1, z->vocab};
    memset(u, 0, sizeof *u);
    for (int l = 0; l <= z->layers; l++) EQ_TRY(eq_tensor_init(&u->x[l], dt, 3, h_shape));
    for (int l = 0; l < z->layers; l++) EQ_TRY(gpt_acts_alloc(&u->acts[l], &g, 1, dt));
    EQ_TRY(eq_tensor_init(&u->lnf_out, dt, 3, h_shape));
    EQ_TRY(eq_tensor_init(&u->logits, dt, 3, v_shape));
    u->lnf_mean = calloc((size_t)z->seq, sizeof(double));
    u->lnf_rstd = calloc((size_t)z->seq, sizeof(double));
    if (u->lnf_mean == NULL || u->lnf_rstd == NULL) st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for a unit");
cleanup:
    if (st != EQ_OK) state_free(u, (int)z->layers);
    return st;
}

/* log_softmax of one row of V logits at `target`, and (p != NULL) the softmax, in fp64. */
static double log_softmax_at(const eq_tensor *logits, int64_t row, int64_t V, int32_t target, double *p)
{
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; v++) mx = fmax(mx, eq_tensor_get(logits, row * V + v));
    for (int64_t v = 0; v < V; v++) sum += exp(eq_tensor_get(logits, row * V + v) - mx);
    const double lse = mx + log(sum);
    for (int64_t v = 0; p != NULL && v < V; v++) p[v] = exp(eq_tensor_get(logits, row * V + v) - lse);
    return eq_tensor_get(logits, row * V + target) - lse;
}

static eq_status unit_backward(const eq_step *step, const probe_lm_sizes *z, const probe_lm_params *p,
                               const int32_t *tok, double coef, unit_state *u, probe_lm_params *g)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = step->dtype;
    const gpt_sizes gz = block_sizes(z);
    const int64_t S = z->seq, V = z->vocab, H = z->hidden, L = z->layers;
    eq_tensor dlogits = {0}, dlnf = {0}, dh = {0}, dx = {0};
    double *prob = malloc((size_t)V * sizeof *prob), *acc = calloc((size_t)(V * H), sizeof *acc);
    if (prob == NULL || acc == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for a unit's backward");
        goto cleanup;
    }
    EQ_TRY(eq_tensor_init(&dlogits, dt, 3, u->logits.shape));
    EQ_TRY(eq_tensor_clone(&dlnf, &u->lnf_out));
    EQ_TRY(eq_tensor_clone(&dh, &u->lnf_out));
    EQ_TRY(eq_tensor_clone(&dx, &u->lnf_out));
    for (int64_t t = 0; t + 1 < S; t++) { /* row S-1 predicts nothing: stays zero */
        log_softmax_at(&u->logits, t, V, tok[t + 1], prob);
        for (int64_t v = 0; v < V; v++)
            eq_tensor_set(&dlogits, t * V + v, coef * ((v == tok[t + 1] ? 1.0 : 0.0) - prob[v]));
    }
    EQ_TRY(eq_column_parallel_backward(step, &dlnf, &g->head, &dlogits, &u->lnf_out, &p->head));
    EQ_TRY(eq_layernorm_backward(dt, S, H, dh.data, g->lnf_gamma.data, g->lnf_beta.data, dlnf.data, u->x[L].data,
                                 u->lnf_mean, u->lnf_rstd, p->lnf_gamma.data));
    for (int64_t l = L - 1; l >= 0; l--) {
        EQ_TRY(gpt_block_backward(step, &gz, &p->blocks[l], &u->x[l], &u->acts[l], &dh, &dx, &g->blocks[l]));
        eq_tensor swap = dh;
        dh = dx, dx = swap;
    }
    /* dh = dx_0: the position embedding's gradient as it is; the token embedding's row v sums
     * the positions holding token v (ascending s, fp64, rounded once). */
    memcpy(g->pos_emb.data, dh.data, eq_tensor_bytes(&g->pos_emb));
    for (int64_t s = 0; s < S; s++)
        for (int64_t h = 0; h < H; h++) acc[tok[s] * H + h] += eq_tensor_get(&dh, s * H + h);
    for (int64_t i = 0; i < V * H; i++) eq_tensor_set(&g->tok_emb, i, acc[i]);
cleanup:
    free(prob), free(acc);
    eq_tensor_free(&dlogits), eq_tensor_free(&dlnf), eq_tensor_free(&dh), eq_tensor_free(&dx);
    return st;
}

eq_status probe_lm_unit(const eq_step *step, const probe_lm_sizes *z, const probe_lm_params *p, const int32_t *tok,
                        double coef, double *logprob, probe_lm_params *g)
{
    eq_status st = EQ_OK;
    unit_state u;
    /* One unit on one rank: tp = 1, the sim transport (a group of one), no injected bug of the
     * tensor-parallel layers. */
    eq_step us = *step;
    us.layout = (eq_layout){1, 1};
    us.transport = &eq_transport_sim;
    us.world = NULL;
    us.bugs = 0;
    const eq_dtype dt = us.dtype;
    const gpt_sizes gz = block_sizes(z);
    const int64_t S = z->seq, V = z->vocab, H = z->hidden, L = z->layers;
    EQ_TRY(state_alloc(&u, z, dt));
    for (int64_t s = 0; s < S; s++) {
        if (tok[s] < 0 || tok[s] >= V) {
            state_free(&u, (int)L);
            return EQ_FAIL(EQ_ERR_INTERNAL, "probe: token %d outside the vocabulary of %lld", (int)tok[s],
                           (long long)V);
        }
        for (int64_t h = 0; h < H; h++)
            eq_tensor_set(&u.x[0], s * H + h,
                          eq_tensor_get(&p->tok_emb, tok[s] * H + h) + eq_tensor_get(&p->pos_emb, s * H + h));
    }
    for (int64_t l = 0; l < L; l++) {
        EQ_TRY(gpt_block_forward(&us, &gz, &p->blocks[l], &u.x[l], &u.acts[l]));
        memcpy(u.x[l + 1].data, u.acts[l].out.data, eq_tensor_bytes(&u.x[l + 1]));
    }
    EQ_TRY(us.backend->ops->layernorm_forward(dt, S, H, u.lnf_out.data, u.lnf_mean, u.lnf_rstd, u.x[L].data,
                                              p->lnf_gamma.data, p->lnf_beta.data));
    EQ_TRY(eq_column_parallel_forward(&us, &u.logits, &u.lnf_out, &p->head));
    double sum = 0;
    for (int64_t t = 0; t + 1 < S; t++) sum += log_softmax_at(&u.logits, t, V, tok[t + 1], NULL);
    *logprob = sum;
    if (g != NULL) EQ_TRY(unit_backward(&us, z, p, tok, coef, &u, g));
cleanup:
    state_free(&u, (int)L);
    return st;
}
