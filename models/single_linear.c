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

#include "harness/base/rng.h"
#include "models/models.h"
#include "models/parallel_linear.h"

typedef struct {
    int64_t seq, batch, in_features, out_features;
} linear_sizes;

/* The case's sizes (models/models.h: EQ_SIZE_READ): member, key. */
#define LINEAR_SIZES(X) X(seq, "seq") X(batch, "batch") X(in_features, "in_features") X(out_features, "out_features")
static const char *const linear_size_keys[] = {LINEAR_SIZES(EQ_SIZE_NAME) NULL};

typedef enum { SPLIT_OUTPUT, SPLIT_INPUT } linear_split;

static eq_status read_sizes(const eq_step *step, linear_split split, linear_sizes *z)
{
    eq_status st = EQ_OK;
    LINEAR_SIZES(EQ_SIZE_READ)
    EQ_TRY(eq_check_divides("batch", z->batch, "dp", step->layout.dp));
    if (split == SPLIT_OUTPUT) EQ_TRY(eq_check_divides("out_features", z->out_features, "tp", step->layout.tp));
    if (split == SPLIT_INPUT) EQ_TRY(eq_check_divides("in_features", z->in_features, "tp", step->layout.tp));
    /* What a run holds (the reference's capture beside it): input, weight, output, a replica's
     * input and output, and (row-parallel) a partial output per tp rank. */
    const size_t elem = eq_dtype_size(step->dtype);
    const int64_t b = z->batch / step->layout.dp;
    const eq_footprint_item items[] = {
        {"input", 3, {z->seq, z->batch, z->in_features}, elem},
        {"weight", 2, {z->out_features, z->in_features}, elem},
        {"out", 3, {z->seq, z->batch, z->out_features}, elem},
        {"partial out", step->layout.tp, {z->seq, b, z->out_features}, elem},
    };
    EQ_TRY(eq_check_footprint(step, items, (int)(sizeof items / sizeof items[0])));
cleanup:
    return st;
}

/* out = in weight^T of one replica, split over tp as the case says. */
static eq_status forward(const eq_step *step, linear_split split, eq_tensor *out, const eq_tensor *in,
                         const eq_tensor *weight)
{
    if (split == SPLIT_INPUT) return eq_row_parallel_forward(step, out, in, weight);
    eq_status st = eq_column_parallel_forward(step, out, in, weight);
    if (st == EQ_OK) st = eq_tp_gather_columns(step, out); /* multi-process: the other ranks' blocks */
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

    /* The dp replicas computed here: all of them (sim), or this process's one (--comm mpi). With
     * dp = 1 the one replica's batch shard is the whole tensor: computed in place, no copies. */
    const eq_group dp_group = eq_step_dp_group(step);
    if (step->layout.dp == 1) {
        EQ_TRY(forward(step, split, &out, &input, &weight));
    } else {
        for (int d = dp_group.first_local; d < dp_group.first_local + dp_group.n_local; d++) {
            EQ_TRY(eq_batch_shard_gather(&input, step->layout.dp, d, &local_in));
            const int64_t local_shape[3] = {z.seq, z.batch / step->layout.dp, z.out_features};
            EQ_TRY(eq_tensor_init(&local_out, step->dtype, 3, local_shape));
            EQ_TRY(forward(step, split, &local_out, &local_in, &weight));
            EQ_TRY(eq_dp_gather_batch(step, &local_out, d, &out));
            eq_tensor_free(&local_in);
            eq_tensor_free(&local_out);
        }
    }
    EQ_TRY(eq_capture_add(cap, 0, "input", EQ_ROLE_INPUT, &input));
    EQ_TRY(eq_capture_add(cap, 0, "weight", EQ_ROLE_PARAM, &weight));
    EQ_TRY(eq_capture_add(cap, 0, "out", EQ_ROLE_ACTIVATION, &out));
    static const eq_dims_rule dims[] = {{"input", "seq,batch,in_features"},
                                        {"weight", "out_features,in_features"},
                                        {"out", "seq,batch,out_features"},
                                        {NULL, NULL}};
    EQ_TRY(eq_capture_name_dims(cap, dims));
    EQ_TRY(eq_capture_config_text(cap, "forward", "out = input weight^T"));
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
    .size_keys = linear_size_keys,
};

const eq_model eq_model_row_parallel = {
    .name = "row_parallel",
    .summary = "one row-parallel linear (reduction split over tp, then all-reduce SUM)",
    .check = row_check,
    .run = row_run,
    .gemm_sites = row_sites,
    .multi_process = 1,
    .size_keys = linear_size_keys,
};
