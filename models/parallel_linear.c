#include "models/parallel_linear.h"

#include <stdlib.h>
#include <string.h>

#include "models/gemm.h"

static int64_t last_dim(const eq_tensor *t) { return t->shape[t->ndim - 1]; }

static int64_t rows(const eq_tensor *t) { return eq_tensor_numel(t) / last_dim(t); }

/* tp buffers of `bytes` each, or NULL (EQ_ERR_NOMEM recorded). */
static void **alloc_rank_buffers(int tp, size_t bytes)
{
    void **bufs = calloc((size_t)(unsigned)tp, sizeof *bufs);
    for (int r = 0; bufs != NULL && r < tp; r++) {
        bufs[r] = malloc(bytes);
        if (bufs[r] == NULL) {
            for (int q = 0; q < r; q++) free(bufs[q]);
            free(bufs);
            bufs = NULL;
        }
    }
    if (bufs == NULL) EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d rank buffers of %zu bytes", tp, bytes);
    return bufs;
}

static void free_rank_buffers(void **bufs, int tp)
{
    for (int r = 0; bufs != NULL && r < tp; r++) free(bufs[r]);
    free(bufs);
}

static eq_status check_shapes(const char *what, const eq_tensor *out, const eq_tensor *in, const eq_tensor *weight,
                              eq_dtype dt, int tp, int64_t split)
{
    if (weight->ndim != 2 || last_dim(in) != weight->shape[1] || last_dim(out) != weight->shape[0] ||
        rows(in) != rows(out) || in->dtype != dt || weight->dtype != dt || out->dtype != dt)
        return EQ_FAIL(EQ_ERR_INTERNAL, "%s: shapes or dtypes of in, weight, out do not agree", what);
    if (tp < 1 || split % tp != 0) return EQ_FAIL(EQ_ERR_INTERNAL, "%s: tp=%d does not divide %lld", what, tp, (long long)split);
    return EQ_OK;
}

eq_status eq_column_parallel_forward(const eq_step *step, eq_tensor *out, const eq_tensor *in,
                                     const eq_tensor *weight)
{
    const int tp = step->layout.tp;
    const int64_t M = rows(in), K = last_dim(in), N = weight->shape[0];
    eq_status st = check_shapes("column-parallel", out, in, weight, step->dtype, tp, N);
    if (st != EQ_OK) return st;
    const size_t elem = eq_dtype_size(step->dtype);
    const int64_t shard = N / tp; /* output features per rank */
    for (int r = 0; r < tp; r++) {
        const int w_shard = step->bugs & EQ_BUG_SHARD_OFFSET ? (r + 1) % tp : r; /* the injected bug */
        const char *w_rank = (const char *)weight->data + (size_t)(w_shard * shard * K) * elem; /* [shard, K] */
        char *out_rank = (char *)out->data + (size_t)(r * shard) * elem;                  /* [M, shard] of [M, N] */
        st = step->backend->gemm_nt(step->dtype, M, shard, K, in->data, K, w_rank, K, out_rank, N);
        if (st != EQ_OK) return st;
    }
    return EQ_OK;
}

eq_status eq_row_parallel_forward(const eq_step *step, eq_tensor *out, const eq_tensor *in,
                                  const eq_tensor *weight)
{
    const int tp = step->layout.tp;
    const int64_t M = rows(in), K = last_dim(in), N = weight->shape[0];
    eq_status st = check_shapes("row-parallel", out, in, weight, step->dtype, tp, K);
    if (st != EQ_OK) return st;
    const size_t elem = eq_dtype_size(step->dtype);
    const int64_t shard = K / tp; /* reduction columns per rank (tp >= 1: checked above) */
    if (tp == 1) return step->backend->gemm_nt(step->dtype, M, N, K, in->data, K, weight->data, K, out->data, N);

    /* partials[r] = in[:, shard r] * weight[:, shard r]^T, rounded to the dtype: [M, N] per rank. */
    void **partials = alloc_rank_buffers(tp, (size_t)(M * N) * elem);
    if (partials == NULL) return EQ_ERR_NOMEM;
    for (int r = 0; r < tp && st == EQ_OK; r++) {
        const char *in_rank = (const char *)in->data + (size_t)(r * shard) * elem;
        const char *w_rank = (const char *)weight->data + (size_t)(r * shard) * elem;
        st = step->backend->gemm_nt(step->dtype, M, N, shard, in_rank, K, w_rank, K, partials[r], N);
    }
    if (st == EQ_OK && !(step->bugs & EQ_BUG_SKIP_ALLREDUCE)) {
        /* The tp group of this replica: every member in this process (sim transport). */
        eq_group tp_group = {step->transport, step->algo, tp, 0, tp, NULL};
        st = eq_all_reduce(&tp_group, partials, (size_t)(M * N), step->dtype, EQ_REDOP_SUM);
    }
    if (st == EQ_OK) memcpy(out->data, partials[0], (size_t)(M * N) * elem);
    free_rank_buffers(partials, tp);
    return st;
}

eq_status eq_column_parallel_backward(const eq_step *step, eq_tensor *din, eq_tensor *dweight, const eq_tensor *dout,
                                      const eq_tensor *in, const eq_tensor *weight)
{
    const int tp = step->layout.tp;
    const eq_dtype dt = step->dtype;
    const int64_t M = rows(in), K = last_dim(in), N = weight->shape[0];
    eq_status st = check_shapes("column-parallel backward", dout, in, weight, dt, tp, N);
    if (st != EQ_OK) return st;
    if (!eq_tensor_same_shape(din, in) || !eq_tensor_same_shape(dweight, weight))
        return EQ_FAIL(EQ_ERR_INTERNAL, "column-parallel backward: gradient shapes do not agree");
    const size_t elem = eq_dtype_size(dt);
    const int64_t shard = N / tp;
    void **partials = alloc_rank_buffers(tp, (size_t)(M * K) * elem); /* [M, K] per rank */
    if (partials == NULL) return EQ_ERR_NOMEM;
    for (int r = 0; r < tp && st == EQ_OK; r++) {
        const char *dout_r = (const char *)dout->data + (size_t)(r * shard) * elem;  /* [M, shard] of [M, N] */
        const char *w_r = (const char *)weight->data + (size_t)(r * shard * K) * elem; /* [shard, K] */
        char *dw_r = (char *)dweight->data + (size_t)(r * shard * K) * elem;           /* [shard, K] */
        st = eq_gemm(step->backend, dt, EQ_GEMM_TN, shard, K, M, dout_r, N, in->data, K, dw_r, K);
        if (st == EQ_OK) st = eq_gemm(step->backend, dt, EQ_GEMM_NN, M, K, shard, dout_r, N, w_r, K, partials[r], K);
    }
    if (st == EQ_OK && tp > 1) {
        eq_group tp_group = {step->transport, step->algo, tp, 0, tp, NULL};
        st = eq_all_reduce(&tp_group, partials, (size_t)(M * K), dt, EQ_REDOP_SUM);
    }
    if (st == EQ_OK) memcpy(din->data, partials[0], (size_t)(M * K) * elem);
    free_rank_buffers(partials, tp);
    return st;
}

eq_status eq_row_parallel_backward(const eq_step *step, eq_tensor *din, eq_tensor *dweight, const eq_tensor *dout,
                                   const eq_tensor *in, const eq_tensor *weight)
{
    const int tp = step->layout.tp;
    const eq_dtype dt = step->dtype;
    const int64_t M = rows(in), K = last_dim(in), N = weight->shape[0];
    eq_status st = check_shapes("row-parallel backward", dout, in, weight, dt, tp, K);
    if (st != EQ_OK) return st;
    if (!eq_tensor_same_shape(din, in) || !eq_tensor_same_shape(dweight, weight))
        return EQ_FAIL(EQ_ERR_INTERNAL, "row-parallel backward: gradient shapes do not agree");
    const size_t elem = eq_dtype_size(dt);
    const int64_t shard = K / tp;
    for (int r = 0; r < tp && st == EQ_OK; r++) {
        const size_t col = (size_t)(r * shard) * elem; /* column block r of [*, K] */
        st = eq_gemm(step->backend, dt, EQ_GEMM_NN, M, shard, N, dout->data, N, (const char *)weight->data + col, K,
                     (char *)din->data + col, K);
        if (st == EQ_OK)
            st = eq_gemm(step->backend, dt, EQ_GEMM_TN, N, shard, M, dout->data, N, (const char *)in->data + col, K,
                         (char *)dweight->data + col, K);
    }
    return st;
}

eq_status eq_batch_shard_gather(const eq_tensor *full, int dp, int d, eq_tensor *local)
{
    if (full->ndim != 3 || full->shape[1] % dp != 0)
        return EQ_FAIL(EQ_ERR_INTERNAL, "batch shard of a tensor that is not [S, B, H] with dp | B");
    const int64_t S = full->shape[0], B = full->shape[1], H = full->shape[2], b_local = B / dp;
    const int64_t shape[3] = {S, b_local, H};
    eq_status st = eq_tensor_init(local, full->dtype, 3, shape);
    if (st != EQ_OK) return st;
    const size_t row_bytes = (size_t)H * eq_dtype_size(full->dtype);
    for (int64_t s = 0; s < S; s++)
        memcpy((char *)local->data + (size_t)(s * b_local) * row_bytes,
               (const char *)full->data + (size_t)(s * B + d * b_local) * row_bytes, (size_t)b_local * row_bytes);
    return EQ_OK;
}

void eq_batch_shard_scatter(const eq_tensor *local, int dp, int d, eq_tensor *full)
{
    const int64_t S = full->shape[0], B = full->shape[1], H = full->shape[2], b_local = B / dp;
    const size_t row_bytes = (size_t)H * eq_dtype_size(full->dtype);
    for (int64_t s = 0; s < S; s++)
        memcpy((char *)full->data + (size_t)(s * B + d * b_local) * row_bytes,
               (const char *)local->data + (size_t)(s * b_local) * row_bytes, (size_t)b_local * row_bytes);
}
