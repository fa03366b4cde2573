#include "models/gpt_block.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/ops.h"
#include "models/parallel_linear.h"

eq_status gpt_params_alloc(gpt_block_params *p, const gpt_sizes *z, eq_dtype dt)
{
    eq_status st = EQ_OK;
    memset(p, 0, sizeof *p);
#define GPT_ALLOC(name, ndim, d0, d1, init, std, split)            \
    {                                                       \
        const int64_t shape[2] = {(d0), (d1)}; /* 1-D: d0 only */ \
        EQ_TRY(eq_tensor_init(&p->name, dt, ndim, shape));  \
    }
    GPT_BLOCK_PARAMS(GPT_ALLOC)
#undef GPT_ALLOC
    return EQ_OK;
cleanup:
    gpt_params_free(p);
    return st;
}

void gpt_params_free(gpt_block_params *p)
{
#define GPT_FREE(name, ndim, d0, d1, init, std, split) eq_tensor_free(&p->name);
    GPT_BLOCK_PARAMS(GPT_FREE)
#undef GPT_FREE
}

/* The LayerNorm statistics of both norms, [tokens] fp64 each, for either activation layout. */
static eq_status alloc_ln_stats(gpt_block_acts *a, int64_t tokens)
{
    a->ln1_mean = calloc((size_t)tokens, sizeof(double));
    a->ln1_rstd = calloc((size_t)tokens, sizeof(double));
    a->ln2_mean = calloc((size_t)tokens, sizeof(double));
    a->ln2_rstd = calloc((size_t)tokens, sizeof(double));
    if (!a->ln1_mean || !a->ln1_rstd || !a->ln2_mean || !a->ln2_rstd)
        return EQ_FAIL(EQ_ERR_NOMEM, "no memory for LayerNorm statistics of %lld tokens", (long long)tokens);
    return EQ_OK;
}

eq_status gpt_acts_alloc(gpt_block_acts *a, const gpt_sizes *z, int64_t local_batch, eq_dtype dt)
{
    eq_status st = EQ_OK;
    memset(a, 0, sizeof *a);
    const int64_t tokens = z->seq * local_batch;
#define GPT_ALLOC(name, last, sharded)                                       \
    {                                                               \
        const int64_t shape[3] = {z->seq, local_batch, (last)};     \
        EQ_TRY(eq_tensor_init(&a->name, dt, 3, shape));             \
    }
    GPT_BLOCK_ACTS(GPT_ALLOC)
#undef GPT_ALLOC
    EQ_TRY(alloc_ln_stats(a, tokens));
    return EQ_OK;
cleanup:
    gpt_acts_free(a);
    return st;
}

/* A tensor [S, b, last] on storage it does not own. */
static eq_tensor view_of(void *storage, eq_dtype dt, int64_t seq, int64_t local_batch, int64_t last)
{
    return (eq_tensor){.dtype = dt, .ndim = 3, .shape = {seq, local_batch, last}, .data = storage};
}

eq_status gpt_acts_alloc_forward_only(gpt_block_acts *a, const gpt_sizes *z, int64_t local_batch, eq_dtype dt)
{
    eq_status st = EQ_OK;
    memset(a, 0, sizeof *a);
    const int64_t tokens = z->seq * local_batch, H = z->hidden, wide = 3 * H > z->ffn ? 3 * H : z->ffn;
    const size_t elem = eq_dtype_size(dt), h_bytes = (size_t)(tokens * H) * elem;
    const size_t bytes[5] = {h_bytes, h_bytes, (size_t)(tokens * wide) * elem, h_bytes, h_bytes};
    for (int i = 0; i < 5; i++) {
        a->pool[i] = calloc(1, bytes[i] > 0 ? bytes[i] : 1);
        if (a->pool[i] == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the activations of %lld tokens", (long long)tokens);
            goto cleanup;
        }
    }
    a->ln1_out = a->attn_out = a->mlp_out = view_of(a->pool[0], dt, z->seq, local_batch, H);
    a->attn_ctx = a->ln2_out = view_of(a->pool[1], dt, z->seq, local_batch, H);
    a->qkv = view_of(a->pool[2], dt, z->seq, local_batch, 3 * H);
    a->fc1_out = a->gelu_out = view_of(a->pool[2], dt, z->seq, local_batch, z->ffn);
    a->resid = view_of(a->pool[3], dt, z->seq, local_batch, H);
    a->out = view_of(a->pool[4], dt, z->seq, local_batch, H);
    EQ_TRY(alloc_ln_stats(a, tokens));
    return EQ_OK;
cleanup:
    gpt_acts_free(a);
    return st;
}

void gpt_acts_free(gpt_block_acts *a)
{
    if (a->pool[0] != NULL) { /* views of the pool: forget them, free the pool */
        const gpt_block_acts empty = {0};
#define GPT_FORGET(name, last, sharded) a->name = empty.name;
        GPT_BLOCK_ACTS(GPT_FORGET)
#undef GPT_FORGET
        for (int i = 0; i < 5; i++) free(a->pool[i]), a->pool[i] = NULL;
    }
#define GPT_FREE(name, last, sharded) eq_tensor_free(&a->name);
    GPT_BLOCK_ACTS(GPT_FREE)
#undef GPT_FREE
    free(a->ln1_mean), free(a->ln1_rstd), free(a->ln2_mean), free(a->ln2_rstd);
    a->ln1_mean = a->ln1_rstd = a->ln2_mean = a->ln2_rstd = NULL;
}

/* dst[T, width] (packed) = src[T, full][:, c0 : c0+width] and back: a rank's column block. */
static void take_columns(size_t elem, int64_t tokens, int64_t full, int64_t c0, int64_t width, const void *src,
                         void *dst)
{
    for (int64_t t = 0; t < tokens; t++)
        memcpy((char *)dst + (size_t)(t * width) * elem, (const char *)src + (size_t)(t * full + c0) * elem,
               (size_t)width * elem);
}

static void put_columns(size_t elem, int64_t tokens, int64_t full, int64_t c0, int64_t width, const void *src,
                        void *dst)
{
    for (int64_t t = 0; t < tokens; t++)
        memcpy((char *)dst + (size_t)(t * full + c0) * elem, (const char *)src + (size_t)(t * width) * elem,
               (size_t)width * elem);
}

/* Attention on each tensor-parallel rank's heads: rank r takes its column blocks of qkv (and of
 * dctx for the backward), runs its NH/tp heads, and writes its blocks of ctx (or dqkv). Every rank
 * under sim; this process's one under --comm mpi/nccl (no collective: heads are independent). */
static eq_status attention_over_ranks(const eq_step *step, const gpt_sizes *z, int64_t local_batch, int backward,
                                      const eq_tensor *qkv, const eq_tensor *dctx, eq_tensor *out)
{
    const int tp = step->layout.tp;
    const int64_t tokens = z->seq * local_batch, heads = z->heads / tp, D = z->hidden / z->heads;
    const int64_t qkv_w = heads * 3 * D, ctx_w = heads * D; /* one rank's block widths */
    const size_t elem = eq_dtype_size(step->dtype);
    eq_status st = EQ_OK;
    char *qkv_r = malloc((size_t)(tokens * qkv_w) * elem), *ctx_r = malloc((size_t)(tokens * ctx_w) * elem);
    char *dqkv_r = backward ? malloc((size_t)(tokens * qkv_w) * elem) : NULL;
    if (qkv_r == NULL || ctx_r == NULL || (backward && dqkv_r == NULL)) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "attention: no memory for a rank's heads");
        goto cleanup;
    }
    const eq_group tp_group = eq_step_tp_group(step);
    for (int r = tp_group.first_local; r < tp_group.first_local + tp_group.n_local; r++) {
        take_columns(elem, tokens, 3 * z->hidden, r * qkv_w, qkv_w, qkv->data, qkv_r);
        if (!backward) {
            EQ_TRY(eq_attention_forward(step->backend, step->dtype, z->seq, local_batch, heads, D, ctx_r, qkv_r));
            put_columns(elem, tokens, z->hidden, r * ctx_w, ctx_w, ctx_r, out->data);
        } else {
            take_columns(elem, tokens, z->hidden, r * ctx_w, ctx_w, dctx->data, ctx_r);
            EQ_TRY(eq_attention_backward(step->backend, step->dtype, z->seq, local_batch, heads, D, dqkv_r, ctx_r,
                                         qkv_r));
            put_columns(elem, tokens, 3 * z->hidden, r * qkv_w, qkv_w, dqkv_r, out->data);
        }
    }
cleanup:
    free(qkv_r), free(ctx_r), free(dqkv_r);
    return st;
}

eq_status gpt_block_forward(const eq_step *step, const gpt_sizes *z, const gpt_block_params *p, const eq_tensor *x,
                            gpt_block_acts *a)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = step->dtype;
    const int64_t local_batch = x->shape[1], tokens = z->seq * local_batch, H = z->hidden;
    const eq_backend_ops *ops = step->backend->ops; /* LayerNorm, GELU (and softmax) where the GEMMs run */
    EQ_TRY(ops->layernorm_forward(dt, tokens, H, a->ln1_out.data, a->ln1_mean, a->ln1_rstd, x->data,
                                  p->ln1_gamma.data, p->ln1_beta.data));
    EQ_TRY(eq_column_parallel_forward(step, &a->qkv, &a->ln1_out, &p->qkv_weight));
    EQ_TRY(attention_over_ranks(step, z, local_batch, 0, &a->qkv, NULL, &a->attn_ctx));
    EQ_TRY(eq_row_parallel_forward(step, &a->attn_out, &a->attn_ctx, &p->proj_weight));
    eq_add(dt, tokens * H, a->resid.data, x->data, a->attn_out.data);
    EQ_TRY(ops->layernorm_forward(dt, tokens, H, a->ln2_out.data, a->ln2_mean, a->ln2_rstd, a->resid.data,
                                  p->ln2_gamma.data, p->ln2_beta.data));
    EQ_TRY(eq_column_parallel_forward(step, &a->fc1_out, &a->ln2_out, &p->fc1_weight));
    EQ_TRY(ops->gelu_forward(dt, tokens * z->ffn, a->gelu_out.data, a->fc1_out.data));
    EQ_TRY(eq_row_parallel_forward(step, &a->mlp_out, &a->gelu_out, &p->fc2_weight));
    eq_add(dt, tokens * H, a->out.data, a->resid.data, a->mlp_out.data);
cleanup:
    return st;
}

eq_status gpt_block_backward(const eq_step *step, const gpt_sizes *z, const gpt_block_params *p, const eq_tensor *x,
                             const gpt_block_acts *a, const eq_tensor *dout, eq_tensor *dx, gpt_block_params *g)
{
    eq_status st = EQ_OK;
    const eq_dtype dt = step->dtype;
    const int64_t local_batch = x->shape[1], tokens = z->seq * local_batch, H = z->hidden;
    eq_tensor d_gelu = {0}, d_fc1 = {0}, d_ln2 = {0}, d_resid = {0}, d_ctx = {0}, d_qkv = {0}, d_ln1 = {0};
    const int64_t h_shape[3] = {z->seq, local_batch, H}, f_shape[3] = {z->seq, local_batch, z->ffn};
    const int64_t qkv_shape[3] = {z->seq, local_batch, 3 * H};
    EQ_TRY(eq_tensor_init(&d_gelu, dt, 3, f_shape));
    EQ_TRY(eq_tensor_init(&d_fc1, dt, 3, f_shape));
    EQ_TRY(eq_tensor_init(&d_ln2, dt, 3, h_shape));
    EQ_TRY(eq_tensor_init(&d_resid, dt, 3, h_shape));
    EQ_TRY(eq_tensor_init(&d_ctx, dt, 3, h_shape));
    EQ_TRY(eq_tensor_init(&d_qkv, dt, 3, qkv_shape));
    EQ_TRY(eq_tensor_init(&d_ln1, dt, 3, h_shape));

    /* MLP: out = resid + fc2(gelu(fc1(ln2(resid)))) */
    EQ_TRY(eq_row_parallel_backward(step, &d_gelu, &g->fc2_weight, dout, &a->gelu_out, &p->fc2_weight));
    eq_gelu_backward(dt, tokens * z->ffn, d_fc1.data, d_gelu.data, a->fc1_out.data);
    EQ_TRY(eq_column_parallel_backward(step, &d_ln2, &g->fc1_weight, &d_fc1, &a->ln2_out, &p->fc1_weight));
    EQ_TRY(eq_layernorm_backward(dt, tokens, H, d_resid.data, g->ln2_gamma.data, g->ln2_beta.data, d_ln2.data,
                                 a->resid.data, a->ln2_mean, a->ln2_rstd, p->ln2_gamma.data));
    eq_add(dt, tokens * H, d_resid.data, d_resid.data, dout->data); /* the residual branch */

    /* Attention: resid = x + proj(attention(qkv(ln1(x)))) */
    EQ_TRY(eq_row_parallel_backward(step, &d_ctx, &g->proj_weight, &d_resid, &a->attn_ctx, &p->proj_weight));
    EQ_TRY(attention_over_ranks(step, z, local_batch, 1, &a->qkv, &d_ctx, &d_qkv));
    EQ_TRY(eq_column_parallel_backward(step, &d_ln1, &g->qkv_weight, &d_qkv, &a->ln1_out, &p->qkv_weight));
    EQ_TRY(eq_layernorm_backward(dt, tokens, H, dx->data, g->ln1_gamma.data, g->ln1_beta.data, d_ln1.data, x->data,
                                 a->ln1_mean, a->ln1_rstd, p->ln1_gamma.data));
    eq_add(dt, tokens * H, dx->data, dx->data, d_resid.data);
cleanup:
    eq_tensor_free(&d_gelu), eq_tensor_free(&d_fc1), eq_tensor_free(&d_ln2), eq_tensor_free(&d_resid);
    eq_tensor_free(&d_ctx), eq_tensor_free(&d_qkv), eq_tensor_free(&d_ln1);
    return st;
}
