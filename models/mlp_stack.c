/* The stacked MLP of seed 002 section 2.2: L column -> row pairs, no norm, no nonlinearity,
 *   h_{l+1} = (h_l * fc1_weight_l^T) * fc2_weight_l^T
 * fc1 column-parallel (exact), fc2 row-parallel + all-reduce (rounding), so the all-reduce error
 * compounds with depth.
 *
 * Letters: S seq, B batch, H hidden, F ffn (the fc2 reduction dimension split over tp), L layers.
 * Seed 002's layer 0 reproduces its single row-parallel matmul (fc2 weight [1024, 4096]), so the
 * docs size is H = 1024, F = 4096.
 *
 *   input            [S, B, H] ~ N(0, 1)
 *   layers/l/fc1_weight [F, H] ~ N(0, 1/H)   std 1/sqrt(fan-in): activations stay at std ~1
 *   layers/l/fc2_weight [H, F] ~ N(0, 1/F)
 *   layers/l/fc1_out    [S, B, F]
 *   layers/l/out        [S, B, H]           the layer output, h_{l+1}
 *
 * Under --comm mpi or nccl (step->world) each process runs its own (dp_rank, tp_rank): its replica's
 * batch columns and its fc1 column block and fc2 partial; fc1_out is all-gathered over tp and each
 * layer's captures over dp, so every process holds the full tensors the sim run holds. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/base/rng.h"
#include "models/models.h"
#include "models/parallel_linear.h"

typedef struct {
    int64_t seq, batch, hidden, ffn, layers;
} mlp_sizes;

/* The case's sizes (models/models.h: EQ_SIZE_READ): member, key. */
#define MLP_STACK_SIZES(X) X(seq, "seq") X(batch, "batch") X(hidden, "hidden") X(ffn, "ffn") X(layers, "layers")
static const char *const mlp_size_keys[] = {MLP_STACK_SIZES(EQ_SIZE_NAME) NULL};

/* The per-layer parameters: field, rows, cols, fan-in (init std = 1/sqrt(fan-in)). One table:
 * struct fields, shapes, init and capture names all come from it. */
#define MLP_STACK_PARAMS(X)                  \
    X(fc1_weight, z->ffn, z->hidden, z->hidden) \
    X(fc2_weight, z->hidden, z->ffn, z->ffn)

typedef struct {
#define FIELD(name, rows, cols, fan_in) eq_tensor name;
    MLP_STACK_PARAMS(FIELD)
#undef FIELD
} mlp_layer_params;

static eq_status read_sizes(const eq_step *step, mlp_sizes *z)
{
    eq_status st = EQ_OK;
    MLP_STACK_SIZES(EQ_SIZE_READ)
    EQ_TRY(eq_check_divides("batch", z->batch, "dp", step->layout.dp));
    EQ_TRY(eq_check_divides("ffn", z->ffn, "tp", step->layout.tp));
    if (z->layers > 100) {
        st = EQ_FAIL(EQ_ERR_INPUT, "mlp_stack: layers=%lld (at most 100)", (long long)z->layers);
        goto cleanup;
    }
    /* What a run holds (the reference's capture beside it): every layer's weights and captured
     * activations, and per tp rank a partial output. */
    const size_t elem = eq_dtype_size(step->dtype);
    const int64_t b = z->batch / step->layout.dp, L = z->layers;
    const eq_footprint_item items[] = {
        {"fc1_weight", 2 * L, {z->ffn, z->hidden}, elem},
        {"fc2_weight", 2 * L, {z->hidden, z->ffn}, elem},
        {"fc1_out", 2 * L + 2, {z->seq, z->batch, z->ffn}, elem},
        {"out", 2 * L + 4, {z->seq, z->batch, z->hidden}, elem},
        {"partial out", step->layout.tp, {z->seq, b, z->hidden}, elem},
    };
    EQ_TRY(eq_check_footprint(step, items, (int)(sizeof items / sizeof items[0])));
cleanup:
    return st;
}

static eq_status init_params(const eq_step *step, const mlp_sizes *z, int layer, mlp_layer_params *p)
{
    eq_status st = EQ_OK;
    char name[EQ_NAME_MAX];
#define INIT(field, rows, cols, fan_in)                                                   \
    EQ_TRY(eq_tensor_init_2d(&p->field, step->dtype, rows, cols));                       \
    snprintf(name, sizeof name, "layers/%02d/" #field, layer);                          \
    eq_rng_fill_normal(&p->field, step->seed, name, 1.0 / sqrt((double)(fan_in)));
    MLP_STACK_PARAMS(INIT)
#undef INIT
cleanup:
    return st;
}

static void free_params(mlp_layer_params *p)
{
#define FREE(field, rows, cols, fan_in) eq_tensor_free(&p->field);
    MLP_STACK_PARAMS(FREE)
#undef FREE
}

static eq_status capture_params(eq_capture *cap, int layer, mlp_layer_params *p)
{
    eq_status st = EQ_OK;
#define CAPTURE(field, rows, cols, fan_in) EQ_TRY(eq_capture_add(cap, layer, #field, EQ_ROLE_PARAM, &p->field));
    MLP_STACK_PARAMS(CAPTURE)
#undef CAPTURE
cleanup:
    return st;
}

static eq_status mlp_check(const eq_step *step)
{
    mlp_sizes z;
    return read_sizes(step, &z);
}

/* One data-parallel replica through one layer: h [S, b, H] -> fc1_out [S, b, F], out [S, b, H]. */
static eq_status replica_layer(const eq_step *step, const mlp_layer_params *p, const eq_tensor *h,
                               eq_tensor *fc1_out, eq_tensor *out)
{
    eq_status st = eq_column_parallel_forward(step, fc1_out, h, &p->fc1_weight);
    if (st != EQ_OK) return st;
    return eq_row_parallel_forward(step, out, fc1_out, &p->fc2_weight);
}

static eq_status mlp_run(const eq_step *step, eq_capture *cap)
{
    eq_status st = EQ_OK;
    const int dp = step->layout.dp;
    mlp_sizes sizes;
    const mlp_sizes *z = &sizes;
    mlp_layer_params params = {0};
    eq_tensor input = {0}, h = {0}, local_fc1 = {0}, local_out = {0}, full_fc1 = {0}, full_out = {0};
    EQ_TRY(read_sizes(step, &sizes));
    const int64_t in_shape[3] = {z->seq, z->batch, z->hidden};
    const int64_t fc1_shape[3] = {z->seq, z->batch, z->ffn};
    const int64_t local_fc1_shape[3] = {z->seq, z->batch / dp, z->ffn};
    const int64_t local_out_shape[3] = {z->seq, z->batch / dp, z->hidden};
    EQ_TRY(eq_tensor_init(&input, step->dtype, 3, in_shape));
    eq_rng_fill_normal(&input, step->seed, "layers/00/input", 1.0);

    /* Layer by layer, every replica in turn (sim), or this process's (multi-process); `full_out`
     * of layer l is the input of layer l+1. */
    const eq_group dp_group = eq_step_dp_group(step);
    EQ_TRY(eq_tensor_clone(&full_out, &input));
    EQ_TRY(eq_capture_add(cap, 0, "input", EQ_ROLE_INPUT, &input));
    eq_progress_work(step->progress, (double)z->layers); /* progress units: layers */
    for (int layer = 0; layer < (int)z->layers; layer++) {
        eq_progress_phase(step->progress, "layer", layer + 1, (int)z->layers, (double)layer);
        EQ_TRY(init_params(step, z, layer, &params));
        EQ_TRY(eq_tensor_init(&full_fc1, step->dtype, 3, fc1_shape));
        eq_tensor layer_in = full_out;
        memset(&full_out, 0, sizeof full_out);
        st = eq_tensor_init(&full_out, step->dtype, 3, in_shape);
        for (int d = dp_group.first_local; d < dp_group.first_local + dp_group.n_local && st == EQ_OK; d++) {
            st = eq_batch_shard_gather(&layer_in, dp, d, &h);
            if (st == EQ_OK) st = eq_tensor_init(&local_fc1, step->dtype, 3, local_fc1_shape);
            if (st == EQ_OK) st = eq_tensor_init(&local_out, step->dtype, 3, local_out_shape);
            if (st == EQ_OK) st = replica_layer(step, &params, &h, &local_fc1, &local_out);
            if (st == EQ_OK) st = eq_tp_gather_columns(step, &local_fc1); /* the other tp ranks' blocks */
            if (st == EQ_OK) st = eq_dp_gather_batch(step, &local_fc1, d, &full_fc1);
            if (st == EQ_OK) st = eq_dp_gather_batch(step, &local_out, d, &full_out);
            eq_tensor_free(&h);
            eq_tensor_free(&local_fc1);
            eq_tensor_free(&local_out);
        }
        eq_tensor_free(&layer_in);
        if (st != EQ_OK) goto cleanup;
        EQ_TRY(capture_params(cap, layer, &params));
        EQ_TRY(eq_capture_add(cap, layer, "fc1_out", EQ_ROLE_ACTIVATION, &full_fc1));
        EQ_TRY(eq_capture_add_copy(cap, layer, "out", EQ_ROLE_ACTIVATION, &full_out));
    }
    static const eq_dims_rule dims[] = {{"fc1_weight", "ffn,hidden"},
                                        {"fc2_weight", "hidden,ffn"},
                                        {"fc1_out", "seq,batch,ffn"},
                                        {"*", "seq,batch,hidden"},
                                        {NULL, NULL}};
    EQ_TRY(eq_capture_name_dims(cap, dims));
    EQ_TRY(eq_capture_config_text(cap, "layer", "fc1_out = x fc1_weight^T; out = fc1_out fc2_weight^T (no "
                                  "nonlinearity, no norm); layer 0's x is input, layer l's the out of layer l-1"));
cleanup:
    free_params(&params);
    eq_tensor_free(&input);
    eq_tensor_free(&h);
    eq_tensor_free(&local_fc1);
    eq_tensor_free(&local_out);
    eq_tensor_free(&full_fc1);
    eq_tensor_free(&full_out);
    return st;
}

/* fc2 (row-parallel) of each layer; the bound applies where fc1_out did not already differ. */
static const eq_gemm_site mlp_sites[] = {{"out", "fc1_out", "fc2_weight", 1}, {0}};

const eq_model eq_model_mlp_stack = {
    .name = "mlp_stack",
    .summary = "L column->row parallel MLP pairs, no norm (error compounding with depth)",
    .check = mlp_check,
    .run = mlp_run,
    .gemm_sites = mlp_sites,
    .multi_process = 1,
    .size_keys = mlp_size_keys,
};
