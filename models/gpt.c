/* The gpt case (seed 002): an L-block GPT stack, a final LayerNorm and an MSE loss against a
 * fixed target, forward and backward, under dp x tp.
 *
 *   input  [S, B, H] ~ N(0, 1)  (layers/00/input)     target [S, B, H] ~ N(0, 1)
 *   blocks 0..L-1 (models/gpt_block.h)
 *   layers/L/lnf_out = LN(x_L; lnf_gamma, lnf_beta);  layers/L/loss = mean (lnf_out - target)^2
 *
 * Data parallelism: dp rank d takes batch columns [d B/dp, (d+1) B/dp) (the same global rows in
 * every layout), runs forward and backward on them, and the parameter gradients are all-reduced
 * over the dp ranks holding the same tp shard with the step's convention:
 *   avg: each rank's loss is its local mean, gradients AVG all-reduced (DDP);
 *   sum: each rank's loss partial is normalised by the global count, gradients SUM all-reduced.
 * Captured activation gradients are those of the global mean loss under both conventions (see
 * capture_out_grad). Biases are left out: Megatron zeroes them (seed 002 section 1) and they would add nothing here.
 * Injected bugs touch block 0 only (its fc1 shards, its fc2 all-reduce) and the dp reduction.
 *
 * Many steps (--steps N, harness/driver/train.h): every parameter is trained (each has its "_grad"); a
 * step given step->params starts from them instead of the seed's init, and step t > 0 draws its
 * own batch (draw_batch), so that step 0 is the single-step run bit for bit.
 *
 * Under --comm mpi or nccl (step->world) each process runs its own (dp_rank, tp_rank): its
 * replica's batch columns, its heads and its column/row shards; the tp collectives of the block
 * and the dp reduction run over its groups. Then everything captured is gathered to the full shape
 * the sim run holds (copies, no arithmetic): sharded activations over tp, every activation and
 * activation gradient over dp, the sharded weights' gradients over tp after the dp reduction. So
 * every process holds the sim run's capture, and rank 0's dump equals it bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/rng.h"
#include "models/gpt_block.h"
#include "models/models.h"
#include "models/ops.h"
#include "models/parallel_linear.h"

/* The case's sizes (models/models.h: EQ_SIZE_READ): member, key. lean_capture = 1 (optional):
 * of the activations, each block's output only (gpt_run_step). */
#define GPT_SIZES(X) \
    X(seq, "seq") X(batch, "batch") X(hidden, "hidden") X(heads, "heads") X(ffn, "ffn") X(layers, "layers")
#define LEAN_CAPTURE_KEY "lean_capture"
static const char *const gpt_size_keys[] = {GPT_SIZES(EQ_SIZE_NAME) LEAN_CAPTURE_KEY, NULL};

static eq_status read_sizes(const eq_step *step, gpt_sizes *z)
{
    eq_status st = EQ_OK;
    GPT_SIZES(EQ_SIZE_READ)
    z->megatron_init = step->numerics != EQ_NUMERICS_EQUIV;
    if (z->hidden % z->heads != 0 || z->layers > 99) {
        st = EQ_FAIL(EQ_ERR_INPUT, "case file %s: gpt needs heads | hidden and at most 99 layers (heads=%lld, "
                     "hidden=%lld, layers=%lld)", step->size->case_path, (long long)z->heads, (long long)z->hidden,
                     (long long)z->layers);
        goto cleanup;
    }
    EQ_TRY(eq_check_divides("batch", z->batch, "dp", step->layout.dp));
    EQ_TRY(eq_check_divides("heads", z->heads, "tp", step->layout.tp));
    EQ_TRY(eq_check_divides("ffn", z->ffn, "tp", step->layout.tp));
    /* What a run holds (the reference's capture beside it): every block's parameters and each
     * replica's gradients of them, every block's activations (models/gpt_block.h: 10 of width H,
     * 2 of width F) and output gradient, the attention's [S, S] scores per head, LayerNorm
     * statistics in fp64, and per tp rank a partial output. */
    const size_t elem = eq_dtype_size(step->dtype);
    const int64_t L = z->layers, dp = step->layout.dp, b = z->batch / dp;
    const eq_footprint_item items[] = {
        {"qkv_weight", 2 * L * (dp + 1), {3 * z->hidden, z->hidden}, elem},
        {"proj_weight", 2 * L * (dp + 1), {z->hidden, z->hidden}, elem},
        {"fc1_weight and fc2_weight", 4 * L * (dp + 1), {z->ffn, z->hidden}, elem},
        {"block activations", 2 * L + 2, {z->seq, z->batch, 10 * z->hidden + 2 * z->ffn}, elem},
        {"block output gradient", 2 * L + 4, {z->seq, z->batch, z->hidden}, elem},
        {"attention scores", 3, {z->seq, z->seq}, elem},
        {"LayerNorm statistics", 4 * L + 2, {z->seq, z->batch}, sizeof(double)},
        {"partial out", step->layout.tp, {z->seq, b, z->ffn > z->hidden ? z->ffn : z->hidden}, elem},
    };
    EQ_TRY(eq_check_footprint(step, items, (int)(sizeof items / sizeof items[0])));
cleanup:
    return st;
}

static eq_status gpt_check(const eq_step *step)
{
    gpt_sizes z;
    return read_sizes(step, &z);
}

/* A parameter's value from a many-step run's current parameters (step->params): the tensor at
 * `path`, of the parameter's dtype and shape. */
static eq_status take_param(const eq_step *step, const char *path, eq_tensor *dst)
{
    const eq_capture_entry *e = eq_capture_find(step->params, path);
    if (e == NULL) return EQ_FAIL(EQ_ERR_INPUT, "gpt: the step's parameters lack %s", path);
    if (!eq_tensor_same_shape(&e->tensor, dst)) {
        char have[64], want[64];
        return EQ_FAIL(EQ_ERR_INPUT, "gpt: parameter %s is %s %s, the step wants %s %s", path,
                       eq_dtype_name(e->tensor.dtype), eq_tensor_shape_str(&e->tensor, have, sizeof have),
                       eq_dtype_name(dst->dtype), eq_tensor_shape_str(dst, want, sizeof want));
    }
    memcpy(dst->data, e->tensor.data, eq_tensor_bytes(dst));
    return EQ_OK;
}

/* Bit p of a block's borrowed mask: field p of GPT_BLOCK_PARAMS is step->same_params' storage. */
enum {
#define GPT_INDEX(name, ndim, d0, d1, init, std, split) GPT_PARAM_##name,
    GPT_BLOCK_PARAMS(GPT_INDEX)
#undef GPT_INDEX
};

/* The tensor at `path` of step->same_params in place of *t when it holds the same bits (dtype,
 * shape and every byte): *t's own storage is freed and bit is set in *borrowed. The weights are
 * read only from here on (the block takes them const), and the capture borrows them. */
static void borrow_if_equal(const eq_step *step, const char *path, eq_tensor *t, unsigned bit, unsigned *borrowed)
{
    const eq_capture_entry *e = step->same_params != NULL ? eq_capture_find(step->same_params, path) : NULL;
    if (e == NULL || e->role != EQ_ROLE_PARAM || !eq_tensor_same_shape(&e->tensor, t) ||
        memcmp(e->tensor.data, t->data, eq_tensor_bytes(t)) != 0)
        return;
    eq_tensor_free(t);
    *t = e->tensor;
    *borrowed |= bit;
}

/* The master parameters of block `layer`: step->params' when given, else initialised by the table
 * in gpt_block.h, and then kept as step->same_params' where those are the same bits (*borrowed). */
static eq_status init_params(const eq_step *step, const gpt_sizes *z, int layer, gpt_block_params *p,
                             unsigned *borrowed)
{
    eq_status st = gpt_params_alloc(p, z, step->dtype);
    if (st != EQ_OK) return st;
    char name[EQ_NAME_MAX];
#define GPT_INIT(field, ndim, d0, d1, init, std, split)                                               \
    snprintf(name, sizeof name, "layers/%02d/" #field, layer);                                      \
    if (step->params != NULL) {                                                                      \
        EQ_TRY(take_param(step, name, &p->field));                                                   \
    } else {                                                                                         \
        for (int64_t i = 0; i < eq_tensor_numel(&p->field); i++)                                     \
            if (init == GPT_INIT_ONE) eq_tensor_set(&p->field, i, 1.0);                              \
        if (init == GPT_INIT_NORMAL) eq_rng_fill_normal(&p->field, step->seed, name, (std));         \
        borrow_if_equal(step, name, &p->field, 1u << GPT_PARAM_##field, borrowed);                   \
    }
    GPT_BLOCK_PARAMS(GPT_INIT)
#undef GPT_INIT
cleanup:
    return st;
}

/* Lets go of block parameters that are step->same_params' storage (bits of `borrowed`), leaving
 * those fields empty, so that freeing p frees only its own. */
static void drop_borrowed(gpt_block_params *p, unsigned borrowed)
{
#define GPT_DROP(name, ndim, d0, d1, init, std, split) \
    if (borrowed & (1u << GPT_PARAM_##name)) memset(&p->name, 0, sizeof p->name);
    GPT_BLOCK_PARAMS(GPT_DROP)
#undef GPT_DROP
}

/* The final LayerNorm's gamma (1) and beta (0), or step->params'. */
static eq_status init_final_norm(const eq_step *step, const gpt_sizes *z, eq_tensor *gamma, eq_tensor *beta)
{
    eq_status st = EQ_OK;
    char name[EQ_NAME_MAX];
    EQ_TRY(eq_tensor_init(gamma, step->dtype, 1, &z->hidden));
    EQ_TRY(eq_tensor_init(beta, step->dtype, 1, &z->hidden));
    if (step->params == NULL) {
        for (int64_t i = 0; i < z->hidden; i++) eq_tensor_set(gamma, i, 1.0);
        goto cleanup;
    }
    snprintf(name, sizeof name, "layers/%02d/lnf_gamma", (int)z->layers);
    EQ_TRY(take_param(step, name, gamma));
    snprintf(name, sizeof name, "layers/%02d/lnf_beta", (int)z->layers);
    EQ_TRY(take_param(step, name, beta));
cleanup:
    return st;
}

/* The step's batch: input and target ~ N(0, 1), drawn under "layers/00/input" and "target" for
 * step 0 (every single-step run), and under "step/<t>/layers/00/input", "step/<t>/target" for the
 * t-th step of a many-step run. */
static void draw_batch(const eq_step *step, eq_tensor *input, eq_tensor *target)
{
    char name[EQ_NAME_MAX];
    if (step->step_index == 0) snprintf(name, sizeof name, "layers/00/input");
    else snprintf(name, sizeof name, "step/%d/layers/00/input", step->step_index);
    eq_rng_fill_normal(input, step->seed, name, 1.0);
    if (step->step_index == 0) snprintf(name, sizeof name, "target");
    else snprintf(name, sizeof name, "step/%d/target", step->step_index);
    eq_rng_fill_normal(target, step->seed, name, 1.0);
}

/* Everything one replica computes, and what the run keeps of all replicas. */
typedef struct {
    gpt_sizes z;
    int capture_all;               /* every block activation, or only each block's output */
    gpt_block_params *params;      /* [L] master parameters */
    unsigned *borrowed;            /* [L] which of params[l] are step->same_params' (init_params) */
    eq_tensor lnf_gamma, lnf_beta; /* [H] */
    eq_tensor input, target;       /* [S, B, H] */
    gpt_block_acts *full_acts;     /* [L] activations over the whole batch, for the capture (lean: out only) */
    eq_tensor *full_out_grad;      /* [L] gradient of each block's output, whole batch */
    eq_tensor full_lnf_out;
    int replicas;                  /* replicas computed here: dp (sim), or 1 (this process's) */
    gpt_block_params *grads;       /* [replicas * L] each local replica's parameter gradients */
    eq_tensor *lnf_grads;          /* [replicas * 2] gamma, beta */
    double *loss;                  /* [replicas] each local replica's loss partial */
    double work;                   /* progress units done: a block forward 1, a block backward 3 */
} gpt_run;

/* A block output's gradient, captured in units of the global mean loss. Under avg each rank
 * differentiates its local mean, dp times the global one's weight per row, so the rank's value is
 * divided by dp (exact for power-of-two dp); under sum it already is the global loss's gradient. */
static eq_status capture_out_grad(const eq_step *step, const eq_tensor *dh, int d, eq_tensor *full)
{
    const int dp = step->layout.dp;
    if (step->grads == EQ_GRAD_SUM || dp == 1) return eq_dp_gather_batch(step, dh, d, full);
    eq_tensor scaled;
    eq_status st = eq_tensor_clone(&scaled, dh);
    if (st != EQ_OK) return st;
    for (int64_t i = 0; i < eq_tensor_numel(&scaled); i++) eq_tensor_set(&scaled, i, eq_tensor_get(&scaled, i) / dp);
    st = eq_dp_gather_batch(step, &scaled, d, full);
    eq_tensor_free(&scaled);
    return st;
}

/* The block activations a run captures, all of them or (lean, for the docs size) the output, into
 * the whole batch's: replica d's batch columns (sim), or every replica's (multi-process, where the
 * tp-sharded ones are first completed in place from the other tp ranks' blocks). */
static eq_status collect_acts(const eq_step *step, const gpt_run *run, gpt_block_acts *local, int d,
                              gpt_block_acts *full)
{
    eq_status st = EQ_OK;
    if (!run->capture_all) return eq_dp_gather_batch(step, &local->out, d, &full->out);
#define GPT_COLLECT(name, last_dim, sharded)                        \
    if (sharded) EQ_TRY(eq_tp_gather_columns(step, &local->name)); \
    EQ_TRY(eq_dp_gather_batch(step, &local->name, d, &full->name));
    GPT_BLOCK_ACTS(GPT_COLLECT)
#undef GPT_COLLECT
cleanup:
    return st;
}

/* Progress: where replica d is ("forward block 3/28", after "replica 2/8, " when there are several). */
static void replica_phase(const eq_step *step, const gpt_run *run, int d, const char *what, int block)
{
    char phase[64];
    if (step->layout.dp > 1) snprintf(phase, sizeof phase, "replica %d/%d, %s", d + 1, step->layout.dp, what);
    else snprintf(phase, sizeof phase, "%s", what);
    eq_progress_phase(step->progress, phase, block, (int)run->z.layers, run->work);
}

/* One data-parallel replica, d, kept at `slot` of the run's per-replica arrays: forward through
 * every block, the final LayerNorm and the loss, then (unless forward-only) the backward.
 * Activation checkpointing: only each block's input is kept; the backward recomputes a block's
 * activations from it, bit for bit as the forward made them, so the docs size (28 blocks of
 * [4096, 2, *]) fits in memory. Forward-only keeps none: a block's input is freed once its output
 * is made, and the backward's buffers are never allocated. */
static eq_status replica_step(const eq_step *step, gpt_run *run, int d, int slot)
{
    eq_status st = EQ_OK;
    const gpt_sizes *z = &run->z;
    const int dp = step->layout.dp, L = (int)z->layers;
    const int64_t b = z->batch / dp, tokens = z->seq * b, H = z->hidden;
    eq_tensor *inputs = calloc((size_t)L + 1, sizeof *inputs); /* [L+1]: block l's input; [L] the last output */
    gpt_block_acts acts = {0};
    eq_tensor target = {0}, lnf_out = {0}, dy = {0}, dh = {0}, dx = {0};
    double *lnf_mean = calloc((size_t)tokens, sizeof(double)), *lnf_rstd = calloc((size_t)tokens, sizeof(double));
    if (inputs == NULL || lnf_mean == NULL || lnf_rstd == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "gpt: no memory for a replica");
        goto cleanup;
    }
    EQ_TRY(eq_batch_shard_gather(&run->input, dp, d, &inputs[0]));
    EQ_TRY(eq_batch_shard_gather(&run->target, dp, d, &target));
    EQ_TRY(eq_tensor_clone(&lnf_out, &inputs[0]));
    EQ_TRY(eq_tensor_clone(&dy, &inputs[0]));
    if (!step->forward_only) EQ_TRY(eq_tensor_clone(&dh, &inputs[0]));
    if (!step->forward_only) EQ_TRY(eq_tensor_clone(&dx, &inputs[0]));
    if (step->forward_only && !run->capture_all) EQ_TRY(gpt_acts_alloc_forward_only(&acts, z, b, step->dtype));
    else EQ_TRY(gpt_acts_alloc(&acts, z, b, step->dtype));

    for (int l = 0; l < L; l++) {
        eq_step block_step = *step;
        if (l != 0) block_step.bugs &= ~(unsigned)(EQ_BUG_SKIP_ALLREDUCE | EQ_BUG_SHARD_OFFSET);
        replica_phase(step, run, d, "forward block", l + 1);
        EQ_TRY(gpt_block_forward(&block_step, z, &run->params[l], &inputs[l], &acts));
        EQ_TRY(collect_acts(step, run, &acts, d, &run->full_acts[l]));
        run->work += 1.0;
        EQ_TRY(eq_tensor_clone(&inputs[l + 1], &acts.out));
        if (step->forward_only) eq_tensor_free(&inputs[l]); /* read again only by the backward's recompute */
    }
    EQ_TRY(step->backend->ops->layernorm_forward(step->dtype, tokens, H, lnf_out.data, lnf_mean, lnf_rstd,
                                                 inputs[L].data, run->lnf_gamma.data, run->lnf_beta.data));
    EQ_TRY(eq_dp_gather_batch(step, &lnf_out, d, &run->full_lnf_out));
    const double count = step->grads == EQ_GRAD_SUM ? (double)(z->seq * z->batch * H) : (double)(tokens * H);
    EQ_TRY(eq_mse_forward_backward(step->dtype, tokens * H, count, lnf_out.data, target.data, &run->loss[slot],
                                   dy.data));
    if (step->forward_only) goto cleanup;

    eq_tensor *lnf_g = &run->lnf_grads[2 * slot];
    EQ_TRY(eq_layernorm_backward(step->dtype, tokens, H, dh.data, lnf_g[0].data, lnf_g[1].data, dy.data,
                                 inputs[L].data, lnf_mean, lnf_rstd, run->lnf_gamma.data));
    for (int l = L - 1; l >= 0; l--) {
        eq_step block_step = *step;
        if (l != 0) block_step.bugs &= ~(unsigned)(EQ_BUG_SKIP_ALLREDUCE | EQ_BUG_SHARD_OFFSET);
        replica_phase(step, run, d, "backward block", l + 1);
        EQ_TRY(gpt_block_forward(&block_step, z, &run->params[l], &inputs[l], &acts)); /* recompute */
        EQ_TRY(capture_out_grad(step, &dh, d, &run->full_out_grad[l]));
        EQ_TRY(gpt_block_backward(step, z, &run->params[l], &inputs[l], &acts, &dh, &dx, &run->grads[slot * L + l]));
        run->work += 3.0;
        eq_tensor swap = dh;
        dh = dx, dx = swap;
    }
cleanup:
    for (int l = 0; inputs != NULL && l <= L; l++) eq_tensor_free(&inputs[l]);
    free(inputs), free(lnf_mean), free(lnf_rstd);
    gpt_acts_free(&acts);
    eq_tensor_free(&target), eq_tensor_free(&lnf_out), eq_tensor_free(&dy), eq_tensor_free(&dh), eq_tensor_free(&dx);
    return st;
}

/* All-reduce one gradient over the dp replicas (bufs[i] of the local ones, count elements) by the
 * convention. */
static eq_status reduce_over_dp(const eq_step *step, void **bufs, int64_t count, eq_dtype dt)
{
    const int dp = step->layout.dp;
    eq_group dp_group = eq_step_dp_group(step);
    eq_status st = eq_all_reduce(&dp_group, bufs, (size_t)count, dt,
                                 step->grads == EQ_GRAD_SUM ? EQ_REDOP_SUM : EQ_REDOP_AVG);
    if (st != EQ_OK || !(step->bugs & EQ_BUG_GRAD_AVG_TWICE) || dp == 1) return st;
    for (int d = 0; d < dp_group.n_local; d++) /* the injected bug: divided by dp a second time */
        for (int64_t i = 0; i < count; i++) eq_buffer_set(dt, bufs[d], i, eq_buffer_get(dt, bufs[d], i) / dp);
    return EQ_OK;
}

static eq_status reduce_gradients(const eq_step *step, gpt_run *run)
{
    eq_status st = EQ_OK;
    const int n = run->replicas, L = (int)run->z.layers;
    void **bufs = calloc((size_t)(unsigned)n, sizeof *bufs);
    if (bufs == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "gpt: no memory for the dp reduction");
    for (int l = 0; l < L && st == EQ_OK; l++) {
#define GPT_REDUCE(name, ndim, d0, d1, init, std, split)                                     \
    for (int d = 0; d < n; d++) bufs[d] = run->grads[d * L + l].name.data;                  \
    if (st == EQ_OK) st = reduce_over_dp(step, bufs, eq_tensor_numel(&run->grads[l].name), step->dtype);
        GPT_BLOCK_PARAMS(GPT_REDUCE)
#undef GPT_REDUCE
    }
    for (int k = 0; k < 2 && st == EQ_OK; k++) {
        for (int d = 0; d < n; d++) bufs[d] = run->lnf_grads[2 * d + k].data;
        st = reduce_over_dp(step, bufs, run->z.hidden, step->dtype);
    }
    free(bufs);
    return st;
}

/* The loss over the dp replicas, in fp64 with the gradients' reduction (one value per replica):
 * avg of the local means, or the sum of the partials normalised by the global count; both the
 * global mean. Forward-only too. */
static eq_status reduce_loss(const eq_step *step, gpt_run *run)
{
    void **bufs = calloc((size_t)(unsigned)run->replicas, sizeof *bufs);
    if (bufs == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "gpt: no memory for the loss reduction");
    for (int d = 0; d < run->replicas; d++) bufs[d] = &run->loss[d];
    eq_group dp_group = eq_step_dp_group(step);
    eq_status st = eq_all_reduce(&dp_group, bufs, 1, EQ_FP64, step->grads == EQ_GRAD_SUM ? EQ_REDOP_SUM : EQ_REDOP_AVG);
    free(bufs);
    return st;
}

/* Multi-process: after the dp reduction each tp rank holds its shard of the sharded weights'
 * gradients (the rest of the tensor unused); the other ranks' shards are gathered in (sim: all
 * there already). */
static eq_status gather_gradients(const eq_step *step, gpt_run *run)
{
    eq_status st = EQ_OK;
    for (int l = 0; l < (int)run->z.layers; l++) {
        gpt_block_params *g = &run->grads[l];
#define GPT_GATHER(name, ndim, d0, d1, init, std, split)                           \
    if (split == GPT_SPLIT_ROWS) EQ_TRY(eq_tp_gather_rows(step, &g->name));         \
    if (split == GPT_SPLIT_COLUMNS) EQ_TRY(eq_tp_gather_columns(step, &g->name));
        GPT_BLOCK_PARAMS(GPT_GATHER)
#undef GPT_GATHER
    }
cleanup:
    return st;
}

static eq_status capture_run(const eq_step *step, gpt_run *run, eq_capture *cap)
{
    eq_status st = EQ_OK;
    const int L = (int)run->z.layers, grads = !step->forward_only;
    eq_tensor loss = {0};
    EQ_TRY(eq_capture_add(cap, 0, "input", EQ_ROLE_INPUT, &run->input));
    for (int l = 0; l < L; l++) {
        gpt_block_params *p = &run->params[l], *g = &run->grads[l]; /* slot 0 holds the reduced grads */
        gpt_block_acts *a = &run->full_acts[l];
#define GPT_CAPTURE_PARAM(name, ndim, d0, d1, init, std, split)                          \
    if (run->borrowed[l] & (1u << GPT_PARAM_##name))                                  \
        EQ_TRY(eq_capture_add_borrowed(cap, l, #name, EQ_ROLE_PARAM, &p->name));        \
    else                                                                                \
        EQ_TRY(eq_capture_add(cap, l, #name, EQ_ROLE_PARAM, &p->name));
        GPT_BLOCK_PARAMS(GPT_CAPTURE_PARAM)
#undef GPT_CAPTURE_PARAM
#define GPT_CAPTURE_ACT(name, last, sharded) \
    if (run->capture_all) EQ_TRY(eq_capture_add(cap, l, #name, EQ_ROLE_ACTIVATION, &a->name));
        GPT_BLOCK_ACTS(GPT_CAPTURE_ACT)
#undef GPT_CAPTURE_ACT
        if (!run->capture_all) EQ_TRY(eq_capture_add(cap, l, "out", EQ_ROLE_ACTIVATION, &a->out));
        if (!grads) continue;
        EQ_TRY(eq_capture_add(cap, l, "out_grad", EQ_ROLE_GRAD, &run->full_out_grad[l]));
#define GPT_CAPTURE_GRAD(name, ndim, d0, d1, init, std, split) \
    EQ_TRY(eq_capture_add(cap, l, #name "_grad", EQ_ROLE_GRAD, &g->name));
        GPT_BLOCK_PARAMS(GPT_CAPTURE_GRAD)
#undef GPT_CAPTURE_GRAD
    }
    EQ_TRY(eq_capture_add(cap, L, "lnf_gamma", EQ_ROLE_PARAM, &run->lnf_gamma));
    EQ_TRY(eq_capture_add(cap, L, "lnf_beta", EQ_ROLE_PARAM, &run->lnf_beta));
    EQ_TRY(eq_capture_add(cap, L, "target", EQ_ROLE_INPUT, &run->target));
    EQ_TRY(eq_capture_add(cap, L, "lnf_out", EQ_ROLE_ACTIVATION, &run->full_lnf_out));
    if (grads) EQ_TRY(eq_capture_add(cap, L, "lnf_gamma_grad", EQ_ROLE_GRAD, &run->lnf_grads[0]));
    if (grads) EQ_TRY(eq_capture_add(cap, L, "lnf_beta_grad", EQ_ROLE_GRAD, &run->lnf_grads[1]));
    const int64_t one = 1;
    EQ_TRY(eq_tensor_init(&loss, EQ_FP64, 1, &one));
    eq_tensor_set(&loss, 0, run->loss[0]);
    EQ_TRY(eq_capture_add(cap, L, "loss", EQ_ROLE_LOSS, &loss));
cleanup:
    eq_tensor_free(&loss);
    return st;
}

static void free_run(gpt_run *run)
{
    const int n = run->replicas;
    const int L = (int)run->z.layers;
    for (int l = 0; run->params && l < L; l++) {
        if (run->borrowed != NULL) drop_borrowed(&run->params[l], run->borrowed[l]);
        gpt_params_free(&run->params[l]);
    }
    for (int l = 0; run->full_acts && l < L; l++) gpt_acts_free(&run->full_acts[l]);
    for (int l = 0; run->full_out_grad && l < L; l++) eq_tensor_free(&run->full_out_grad[l]);
    for (int i = 0; run->grads && i < n * L; i++) gpt_params_free(&run->grads[i]);
    for (int i = 0; run->lnf_grads && i < 2 * n; i++) eq_tensor_free(&run->lnf_grads[i]);
    free(run->params), free(run->borrowed), free(run->full_acts), free(run->full_out_grad), free(run->grads), free(run->lnf_grads);
    free(run->loss);
    eq_tensor_free(&run->lnf_gamma), eq_tensor_free(&run->lnf_beta), eq_tensor_free(&run->input);
    eq_tensor_free(&run->target), eq_tensor_free(&run->full_lnf_out);
}

/* Names of every captured tensor's dimensions; weights in torch.nn.Linear's [out, in] layout. */
static const eq_dims_rule gpt_dims[] = {
    {"qkv", "seq,batch,qkv"},
    {"fc1_out", "seq,batch,ffn"},
    {"gelu_out", "seq,batch,ffn"},
    {"qkv_weight*", "qkv,hidden"},
    {"proj_weight*", "hidden_out,hidden_in"},
    {"fc1_weight*", "ffn,hidden"},
    {"fc2_weight*", "hidden,ffn"},
    {"*gamma*", "hidden"},
    {"*beta*", "hidden"},
    {"loss", "one"},
    {"*", "seq,batch,hidden"},
    {NULL, NULL},
};

/* What the step computes beyond the sizes (the case's [size] section, already in /config). */
static eq_status gpt_config(const gpt_sizes *z, eq_capture *cap)
{
    eq_status st = EQ_OK;
    const int64_t head_dim = z->hidden / z->heads;
    EQ_TRY(eq_capture_config_number(cap, "layernorm_eps", EQ_LAYERNORM_EPS));
    EQ_TRY(eq_capture_config_int(cap, "head_dim", head_dim));
    EQ_TRY(eq_capture_config_number(cap, "attention_scale", 1.0 / sqrt((double)head_dim)));
    EQ_TRY(eq_capture_config_text(cap, "block", "ln1_out = LN(x); qkv = ln1_out qkv_weight^T; attn_ctx = "
                                  "attention(qkv); attn_out = attn_ctx proj_weight^T; resid = x + attn_out; ln2_out = "
                                  "LN(resid); fc1_out = ln2_out fc1_weight^T; gelu_out = gelu(fc1_out); mlp_out = "
                                  "gelu_out fc2_weight^T; out = resid + mlp_out; no biases"));
    EQ_TRY(eq_capture_config_text(cap, "layernorm", "(x - mean) / sqrt(var + layernorm_eps) gamma + beta, var "
                                  "biased, over hidden"));
    EQ_TRY(eq_capture_config_text(cap, "qkv_layout", "per head h: columns [h 3 head_dim, (h+1) 3 head_dim) hold "
                                  "[q | k | v], head_dim each"));
    EQ_TRY(eq_capture_config_text(cap, "attention", "per batch column and head: softmax over keys j <= i of "
                                  "attention_scale q_i k_j, causal; attn_ctx columns [h head_dim, (h+1) head_dim)"));
    EQ_TRY(eq_capture_config_text(cap, "gelu", "erf: x Phi(x)"));
    EQ_TRY(eq_capture_config_text(cap, "loss", "mean over every element of (lnf_out - target)^2, lnf_out = "
                                  "LN(last block's out; lnf_gamma, lnf_beta)"));
    EQ_TRY(eq_capture_config_text(cap, "gradients", "out_grad and every *_grad: the gradient of the global mean loss"));
cleanup:
    return st;
}

static eq_status gpt_run_step(const eq_step *step, eq_capture *cap)
{
    eq_status st = EQ_OK;
    gpt_run run;
    memset(&run, 0, sizeof run);
    const eq_group dp_group = eq_step_dp_group(step); /* the replicas computed here */
    const int n = dp_group.n_local;
    run.replicas = n;
    EQ_TRY(read_sizes(step, &run.z));
    run.capture_all = eq_size_get_or(step->size, LEAN_CAPTURE_KEY, 0) == 0;
    const gpt_sizes *z = &run.z;
    const int L = (int)z->layers;
    run.params = calloc((size_t)L, sizeof *run.params);
    run.borrowed = calloc((size_t)L, sizeof *run.borrowed);
    run.full_acts = calloc((size_t)L, sizeof *run.full_acts);
    run.full_out_grad = calloc((size_t)L, sizeof *run.full_out_grad);
    run.grads = calloc((size_t)(n * L), sizeof *run.grads);
    run.lnf_grads = calloc((size_t)(2 * n), sizeof *run.lnf_grads);
    run.loss = calloc((size_t)n, sizeof *run.loss);
    if (!run.params || !run.borrowed || !run.full_acts || !run.full_out_grad || !run.grads || !run.lnf_grads || !run.loss) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "gpt: no memory for %d layers x %d replicas", L, n);
        goto cleanup;
    }
    const int64_t x_shape[3] = {z->seq, z->batch, z->hidden};
    EQ_TRY(eq_tensor_init(&run.input, step->dtype, 3, x_shape));
    EQ_TRY(eq_tensor_init(&run.target, step->dtype, 3, x_shape));
    EQ_TRY(eq_tensor_init(&run.full_lnf_out, step->dtype, 3, x_shape));
    draw_batch(step, &run.input, &run.target);
    EQ_TRY(init_final_norm(step, z, &run.lnf_gamma, &run.lnf_beta));
    for (int l = 0; l < L; l++) {
        EQ_TRY(init_params(step, z, l, &run.params[l], &run.borrowed[l]));
        if (run.capture_all) EQ_TRY(gpt_acts_alloc(&run.full_acts[l], z, z->batch, step->dtype));
        else EQ_TRY(eq_tensor_init(&run.full_acts[l].out, step->dtype, 3, x_shape));
        if (step->forward_only) continue;
        EQ_TRY(eq_tensor_init(&run.full_out_grad[l], step->dtype, 3, x_shape));
        for (int i = 0; i < n; i++) EQ_TRY(gpt_params_alloc(&run.grads[i * L + l], z, step->dtype));
    }
    for (int i = 0; i < 2 * n && !step->forward_only; i++)
        EQ_TRY(eq_tensor_init(&run.lnf_grads[i], step->dtype, 1, &z->hidden));

    /* progress units: per replica a forward of every block (1 each), and their backward with the
     * recomputed forward (3 each) */
    eq_progress_work(step->progress, (double)n * L * (step->forward_only ? 1.0 : 4.0));
    for (int i = 0; i < n; i++) EQ_TRY(replica_step(step, &run, dp_group.first_local + i, i));
    eq_progress_phase(step->progress, "reduce and capture", 0, 0, run.work);
    if (!step->forward_only) EQ_TRY(reduce_gradients(step, &run));
    if (!step->forward_only) EQ_TRY(gather_gradients(step, &run));
    EQ_TRY(reduce_loss(step, &run));
    EQ_TRY(capture_run(step, &run, cap));
    EQ_TRY(gpt_config(z, cap));
    EQ_TRY(eq_capture_name_dims(cap, gpt_dims));
cleanup:
    free_run(&run);
    return st;
}

/* The block's four GEMMs (gpt_block.h); each bound applies in the layers where its input did not
 * already differ (block 0's QKV, fc1 and out-projection under tp). */
static const eq_gemm_site gpt_sites[] = {
    {"qkv", "ln1_out", "qkv_weight", 0},
    {"attn_out", "attn_ctx", "proj_weight", 1},
    {"fc1_out", "ln2_out", "fc1_weight", 0},
    {"mlp_out", "gelu_out", "fc2_weight", 1},
    {0},
};

const eq_model eq_model_gpt = {
    .name = "gpt",
    .summary = "L-block GPT stack (LayerNorm, attention, MLP) forward and backward under dp x tp",
    .check = gpt_check,
    .run = gpt_run_step,
    .gemm_sites = gpt_sites,
    .multi_process = 1,
    .trains = 1,
    .size_keys = gpt_size_keys,
    .numerics = 1,
};
