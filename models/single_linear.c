/* The two one-layer cases of seed 002 section 2.1: one column-parallel and one row-parallel linear.
 *
 *   input  [S, B, K]  ~ N(0, 1)              (seed 002: [4096, 2, 4096])
 *   weight [N, K]     ~ N(0, 1/K)            (seed 002: [1024, 4096]; std 1/sqrt(K) keeps the
 *                                             output at std ~1, as the seed's 0.99)
 *   out    [S, B, N]  = input * weight^T
 *
 * Sizes read from the case: seq (S), batch (B), in_features (K), out_features (N).
 *
 * Under --comm mpi (step->world) each process computes its own (dp_rank, tp_rank) and the output is
 * all-gathered (column blocks over tp, replicas over dp), so every process captures the full
 * tensors and rank 0 dumps exactly what the sim run dumps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/rng.h"
#include "models/models.h"
#include "models/parallel_linear.h"

typedef struct {
    int64_t seq, batch, in_features, out_features;
} linear_sizes;

typedef enum { SPLIT_OUTPUT, SPLIT_INPUT } linear_split;

static eq_status read_sizes(const eq_step *step, linear_split split, linear_sizes *z)
{
    eq_status st = EQ_OK;
    EQ_TRY(eq_size_get(step->size, "seq", &z->seq));
    EQ_TRY(eq_size_get(step->size, "batch", &z->batch));
    EQ_TRY(eq_size_get(step->size, "in_features", &z->in_features));
    EQ_TRY(eq_size_get(step->size, "out_features", &z->out_features));
    EQ_TRY(eq_check_divides("batch", z->batch, "dp", step->layout.dp));
    if (split == SPLIT_OUTPUT) EQ_TRY(eq_check_divides("out_features", z->out_features, "tp", step->layout.tp));
    if (split == SPLIT_INPUT) EQ_TRY(eq_check_divides("in_features", z->in_features, "tp", step->layout.tp));
cleanup:
    return st;
}

/* Column-parallel output [S, B, N] of which this process computed only its tp rank's column block:
 * all-gather the blocks over the tp group so every process holds the whole output (a copy: no
 * arithmetic). Nothing to do when every tp rank is computed here. */
static eq_status gather_column_blocks(const eq_step *step, eq_tensor *out)
{
    const eq_group g = eq_step_tp_group(step);
    if (g.n_local == g.size) return EQ_OK;
    const int64_t N = out->shape[2], M = eq_tensor_numel(out) / N, shard = N / g.size;
    const size_t elem = eq_dtype_size(out->dtype), block_bytes = (size_t)shard * elem;
    char *mine = malloc((size_t)(M * shard) * elem + 1), *all = malloc((size_t)(M * N) * elem + 1);
    eq_status st = EQ_OK;
    if (mine == NULL || all == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "column_parallel: no memory to gather the output");
        goto cleanup;
    }
    char *data = out->data;
    for (int64_t m = 0; m < M; m++) /* [M, shard] of this rank, packed */
        memcpy(mine + (size_t)m * block_bytes, data + ((size_t)(m * N) + (size_t)(g.first_local * shard)) * elem,
               block_bytes);
    const void *in[1] = {mine};
    void *outs[1] = {all};
    EQ_TRY(eq_all_gather(&g, in, outs, (size_t)(M * shard), out->dtype)); /* [tp][M, shard] */
    for (int r = 0; r < g.size; r++)
        for (int64_t m = 0; m < M; m++)
            memcpy(data + ((size_t)(m * N) + (size_t)(r * shard)) * elem,
                   all + ((size_t)r * (size_t)(M * shard) + (size_t)m * (size_t)shard) * elem, block_bytes);
cleanup:
    free(mine);
    free(all);
    return st;
}

/* This process's replica's output [S, B/dp, N] -> the full output [S, B, N] on every process:
 * all-gather over the dp group, then each replica's batch columns into place. */
static eq_status gather_replicas(const eq_group *dp_group, const eq_tensor *local, eq_tensor *full)
{
    eq_status st = EQ_OK;
    const size_t local_count = (size_t)eq_tensor_numel(local), elem = eq_dtype_size(local->dtype);
    char *all = malloc(local_count * (size_t)dp_group->size * elem + 1);
    eq_tensor replica = *local; /* borrowed view: shape of one replica, data into `all` */
    if (all == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to gather %d replicas", dp_group->size);
    const void *in[1] = {local->data};
    void *outs[1] = {all};
    EQ_TRY(eq_all_gather(dp_group, in, outs, local_count, local->dtype));
    for (int d = 0; d < dp_group->size; d++) {
        replica.data = all + (size_t)d * local_count * elem;
        eq_batch_shard_scatter(&replica, dp_group->size, d, full);
    }
cleanup:
    free(all);
    return st;
}

static eq_status run_linear(const eq_step *step, eq_capture *cap, linear_split split)
{
    eq_status st = EQ_OK;
    linear_sizes z;
    eq_tensor input = {0}, weight = {0}, out = {0}, local_in = {0}, local_out = {0};
    EQ_TRY(read_sizes(step, split, &z));
    const int64_t in_shape[3] = {z.seq, z.batch, z.in_features};
    const int64_t out_shape[3] = {z.seq, z.batch, z.out_features};
    EQ_TRY(eq_tensor_init(&input, step->dtype, 3, in_shape));
    EQ_TRY(eq_tensor_init_2d(&weight, step->dtype, z.out_features, z.in_features));
    EQ_TRY(eq_tensor_init(&out, step->dtype, 3, out_shape));
    eq_rng_fill_normal(&input, step->seed, "layers/00/input", 1.0);
    eq_rng_fill_normal(&weight, step->seed, "layers/00/weight", 1.0 / sqrt((double)z.in_features));

    /* The dp replicas computed here: all of them (sim), or this process's one (--comm mpi). */
    const eq_group dp_group = eq_step_dp_group(step);
    for (int d = dp_group.first_local; d < dp_group.first_local + dp_group.n_local; d++) {
        EQ_TRY(eq_batch_shard_gather(&input, step->layout.dp, d, &local_in));
        const int64_t local_shape[3] = {z.seq, z.batch / step->layout.dp, z.out_features};
        EQ_TRY(eq_tensor_init(&local_out, step->dtype, 3, local_shape));
        if (split == SPLIT_OUTPUT) {
            EQ_TRY(eq_column_parallel_forward(step, &local_out, &local_in, &weight));
            EQ_TRY(gather_column_blocks(step, &local_out));
        } else {
            EQ_TRY(eq_row_parallel_forward(step, &local_out, &local_in, &weight));
        }
        if (dp_group.n_local < dp_group.size) EQ_TRY(gather_replicas(&dp_group, &local_out, &out));
        else eq_batch_shard_scatter(&local_out, step->layout.dp, d, &out);
        eq_tensor_free(&local_in);
        eq_tensor_free(&local_out);
    }
    EQ_TRY(eq_capture_add(cap, 0, "input", EQ_ROLE_INPUT, &input));
    EQ_TRY(eq_capture_add(cap, 0, "weight", EQ_ROLE_PARAM, &weight));
    EQ_TRY(eq_capture_add(cap, 0, "out", EQ_ROLE_ACTIVATION, &out));
cleanup:
    eq_tensor_free(&input);
    eq_tensor_free(&weight);
    eq_tensor_free(&out);
    eq_tensor_free(&local_in);
    eq_tensor_free(&local_out);
    return st;
}

static eq_status column_check(const eq_step *step)
{
    linear_sizes z;
    return read_sizes(step, SPLIT_OUTPUT, &z);
}

static eq_status row_check(const eq_step *step)
{
    linear_sizes z;
    return read_sizes(step, SPLIT_INPUT, &z);
}

static eq_status column_run(const eq_step *step, eq_capture *cap) { return run_linear(step, cap, SPLIT_OUTPUT); }

static eq_status row_run(const eq_step *step, eq_capture *cap) { return run_linear(step, cap, SPLIT_INPUT); }

/* out = input weight^T: column-parallel keeps each dot product whole; row-parallel splits K. */
static const eq_gemm_site column_sites[] = {{"out", "input", "weight", 0}, {0}};
static const eq_gemm_site row_sites[] = {{"out", "input", "weight", 1}, {0}};

const eq_model eq_model_column_parallel = {
    .name = "column_parallel",
    .summary = "one column-parallel linear (output features split over tp, no collective)",
    .check = column_check,
    .run = column_run,
    .gemm_sites = column_sites,
    .multi_process = 1,
};

const eq_model eq_model_row_parallel = {
    .name = "row_parallel",
    .summary = "one row-parallel linear (reduction split over tp, then all-reduce SUM)",
    .check = row_check,
    .run = row_run,
    .gemm_sites = row_sites,
    .multi_process = 1,
};
