#include "models/parallel_linear.h"

#include <stdlib.h>
#include <string.h>

#include "models/gemm.h"
#include "models/gemm_carry.h"

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
    const eq_group tp_group = eq_step_tp_group(step); /* the ranks computed here: all, or this process's */
    for (int r = tp_group.first_local; r < tp_group.first_local + tp_group.n_local; r++) {
        const int w_shard = step->bugs & EQ_BUG_SHARD_OFFSET ? (r + 1) % tp : r; /* the injected bug */
        const char *w_rank = (const char *)weight->data + (size_t)(w_shard * shard * K) * elem; /* [shard, K] */
        char *out_rank = (char *)out->data + (size_t)(r * shard) * elem;                  /* [M, shard] of [M, N] */
        st = step->backend->gemm_nt(step->dtype, M, shard, K, in->data, K, w_rank, K, out_rank, N);
        if (st != EQ_OK) return st;
    }
    return EQ_OK;
}

/* --algo tp_invariant's sum over tp: no all-reduce; out[M, Nout] (row stride ldo) = the K-split
 * product over every tp rank, rank r continuing rank r-1's accumulator over its block of
 * `shard` reduction columns and the last one rounding once (models/gemm_carry.h). Rank r's
 * operands are a + r * a_step and b + r * b_step (NT: in[:, block r] and weight[:, block r]; NN:
 * dout[:, block r] and weight[block r, :]). Every tp rank must be in this process: on real GPUs
 * rank r waits for rank r-1's accumulator, a chain the collectives here do not model, so other
 * transports are refused (harness/driver/commands.c). `ranks` < tp stops the chain early (the injected
 * skip_allreduce). */
typedef struct {
    eq_gemm_form form;
    const char *a, *b;       /* rank 0's operands */
    int64_t lda, ldb;
    size_t a_step, b_step;   /* bytes from rank r's operand to rank r+1's */
} carry_operands;

static eq_status carried_tp_sum(const eq_step *step, const carry_operands *ops, int ranks, int64_t M, int64_t Nout,
                                int64_t shard, void *out, int64_t ldo)
{
    const eq_group tp_group = eq_step_tp_group(step);
    if (tp_group.n_local != tp_group.size)
        return EQ_FAIL(EQ_ERR_USAGE, "--algo tp_invariant needs every tp rank in one process (--comm sim)");
    eq_status st = EQ_OK;
    void *acc = calloc((size_t)(M * Nout) + 1, eq_gemm_carry_elem(step->dtype)); /* [M, Nout], zero */
    if (acc == NULL)
        return EQ_FAIL(EQ_ERR_NOMEM, "tp_invariant: no memory for a %lld x %lld accumulator", (long long)M,
                       (long long)Nout);
    for (int r = 0; r < ranks && st == EQ_OK; r++)
        st = eq_gemm_carry(step->dtype, ops->form, M, Nout, shard, ops->a + (size_t)r * ops->a_step, ops->lda,
                           ops->b + (size_t)r * ops->b_step, ops->ldb, acc);
    if (st == EQ_OK) eq_gemm_carry_round(step->dtype, M, Nout, acc, out, ldo);
    free(acc);
    return st;
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
    if (step->algo == EQ_ALGO_TP_INVARIANT) { /* tp = 1 too: the reference sums in the same order */
        const carry_operands ops = {EQ_GEMM_NT, in->data, weight->data, K, K, (size_t)shard * elem,
                                    (size_t)shard * elem};
        return carried_tp_sum(step, &ops, step->bugs & EQ_BUG_SKIP_ALLREDUCE ? 1 : tp, M, N, shard, out->data, N);
    }
    if (tp == 1) return step->backend->gemm_nt(step->dtype, M, N, K, in->data, K, weight->data, K, out->data, N);

    /* The tp group of this replica: every member in this process (sim), or this process's one. */
    const eq_group tp_group = eq_step_tp_group(step);
    /* partials[i] = in[:, shard r] * weight[:, shard r]^T for r = first_local + i, rounded to the
     * dtype: [M, N] per rank. */
    void **partials = alloc_rank_buffers(tp_group.n_local, (size_t)(M * N) * elem);
    if (partials == NULL) return EQ_ERR_NOMEM;
    for (int i = 0; i < tp_group.n_local && st == EQ_OK; i++) {
        const int r = tp_group.first_local + i;
        const char *in_rank = (const char *)in->data + (size_t)(r * shard) * elem;
        const char *w_rank = (const char *)weight->data + (size_t)(r * shard) * elem;
        st = step->backend->gemm_nt(step->dtype, M, N, shard, in_rank, K, w_rank, K, partials[i], N);
    }
    /* The injected bug keeps rank 0's partial instead of the sum: under sim the first local one;
     * multi-process, rank 0's is broadcast (a copy), so every tp rank goes on with what the sim run
     * goes on with and the layers after it match sim too. */
    if (st == EQ_OK && !(step->bugs & EQ_BUG_SKIP_ALLREDUCE))
        st = eq_all_reduce(&tp_group, partials, (size_t)(M * N), step->dtype, EQ_REDOP_SUM);
    else if (st == EQ_OK && tp_group.n_local < tp_group.size)
        st = eq_broadcast(&tp_group, partials, (size_t)(M * N), step->dtype, 0);
    if (st == EQ_OK) memcpy(out->data, partials[0], (size_t)(M * N) * elem);
    free_rank_buffers(partials, tp_group.n_local);
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
    const eq_group tp_group = eq_step_tp_group(step);
    if (step->algo == EQ_ALGO_TP_INVARIANT) {
        /* din = sum over r of dout_r weight_r, carried from rank to rank; the weight gradients as below */
        for (int r = 0; r < tp && st == EQ_OK; r++) {
            const char *dout_r = (const char *)dout->data + (size_t)(r * shard) * elem; /* [M, shard] of [M, N] */
            char *dw_r = (char *)dweight->data + (size_t)(r * shard * K) * elem;        /* [shard, K] */
            st = eq_gemm(step->backend, dt, EQ_GEMM_TN, shard, K, M, dout_r, N, in->data, K, dw_r, K);
        }
        const carry_operands ops = {EQ_GEMM_NN, dout->data, weight->data, N, K, (size_t)shard * elem,
                                    (size_t)(shard * K) * elem};
        return st == EQ_OK ? carried_tp_sum(step, &ops, tp, M, K, shard, din->data, K) : st;
    }
    void **partials = alloc_rank_buffers(tp_group.n_local, (size_t)(M * K) * elem); /* [M, K] per local rank */
    if (partials == NULL) return EQ_ERR_NOMEM;
    for (int i = 0; i < tp_group.n_local && st == EQ_OK; i++) {
        const int r = tp_group.first_local + i;
        const char *dout_r = (const char *)dout->data + (size_t)(r * shard) * elem;  /* [M, shard] of [M, N] */
        const char *w_r = (const char *)weight->data + (size_t)(r * shard * K) * elem; /* [shard, K] */
        char *dw_r = (char *)dweight->data + (size_t)(r * shard * K) * elem;           /* [shard, K] */
        st = eq_gemm(step->backend, dt, EQ_GEMM_TN, shard, K, M, dout_r, N, in->data, K, dw_r, K);
        if (st == EQ_OK) st = eq_gemm(step->backend, dt, EQ_GEMM_NN, M, K, shard, dout_r, N, w_r, K, partials[i], K);
    }
    if (st == EQ_OK && tp > 1) st = eq_all_reduce(&tp_group, partials, (size_t)(M * K), dt, EQ_REDOP_SUM);
    if (st == EQ_OK) memcpy(din->data, partials[0], (size_t)(M * K) * elem);
    free_rank_buffers(partials, tp_group.n_local);
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
    const eq_group tp_group = eq_step_tp_group(step);
    for (int r = tp_group.first_local; r < tp_group.first_local + tp_group.n_local && st == EQ_OK; r++) {
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

eq_status eq_tp_gather_columns(const eq_step *step, eq_tensor *t)
{
    const eq_group g = eq_step_tp_group(step);
    if (g.n_local == g.size) return EQ_OK;
    const int64_t N = last_dim(t), M = rows(t), shard = N / g.size;
    if (N % g.size != 0) return EQ_FAIL(EQ_ERR_INTERNAL, "tp gather: tp=%d does not divide %lld", g.size, (long long)N);
    const size_t elem = eq_dtype_size(t->dtype), block_bytes = (size_t)shard * elem;
    char *mine = malloc((size_t)(M * shard) * elem + 1), *all = malloc((size_t)(M * N) * elem + 1);
    eq_status st = EQ_OK;
    if (mine == NULL || all == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "tp gather: no memory for %lld x %lld", (long long)M, (long long)N);
        goto cleanup;
    }
    char *data = t->data;
    for (int64_t m = 0; m < M; m++) /* this rank's [M, shard], packed */
        memcpy(mine + (size_t)m * block_bytes, data + (size_t)(m * N + g.first_local * shard) * elem, block_bytes);
    const void *in[1] = {mine};
    void *outs[1] = {all};
    EQ_TRY(eq_all_gather(&g, in, outs, (size_t)(M * shard), t->dtype)); /* [tp][M, shard] */
    for (int r = 0; r < g.size; r++)
        for (int64_t m = 0; m < M; m++)
            memcpy(data + (size_t)(m * N + r * shard) * elem, all + (size_t)((r * M + m) * shard) * elem, block_bytes);
cleanup:
    free(mine);
    free(all);
    return st;
}

eq_status eq_tp_gather_rows(const eq_step *step, eq_tensor *t)
{
    const eq_group g = eq_step_tp_group(step);
    if (g.n_local == g.size) return EQ_OK;
    const int64_t N = t->shape[0], count = eq_tensor_numel(t) / g.size;
    if (N % g.size != 0) return EQ_FAIL(EQ_ERR_INTERNAL, "tp gather: tp=%d does not divide %lld", g.size, (long long)N);
    const size_t bytes = (size_t)count * eq_dtype_size(t->dtype);
    char *mine = malloc(bytes + 1);
    if (mine == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "tp gather: no memory for %zu bytes", bytes);
    memcpy(mine, (char *)t->data + (size_t)g.first_local * bytes, bytes); /* rows are contiguous blocks */
    const void *in[1] = {mine};
    void *outs[1] = {t->data};
    eq_status st = eq_all_gather(&g, in, outs, (size_t)count, t->dtype);
    free(mine);
    return st;
}

eq_status eq_dp_gather_batch(const eq_step *step, const eq_tensor *local, int d, eq_tensor *full)
{
    const eq_group g = eq_step_dp_group(step);
    if (g.n_local == g.size) {
        eq_batch_shard_scatter(local, g.size, d, full);
        return EQ_OK;
    }
    const size_t count = (size_t)eq_tensor_numel(local), elem = eq_dtype_size(local->dtype);
    char *all = malloc(count * (size_t)g.size * elem + 1);
    if (all == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "dp gather: no memory for %d replicas", g.size);
    const void *in[1] = {local->data};
    void *outs[1] = {all};
    eq_status st = eq_all_gather(&g, in, outs, count, local->dtype); /* [dp][S, B/dp, H] */
    eq_tensor replica = *local; /* a borrowed view into `all` */
    for (int r = 0; r < g.size && st == EQ_OK; r++) {
        replica.data = all + (size_t)r * count * elem;
        eq_batch_shard_scatter(&replica, g.size, r, full);
    }
    free(all);
    return st;
}
