/* Assembling a run from its ranks' shards (harness/run_load.h), in memory: a tensor split over dp
 * (unevenly) and tp comes back element for element; a replicated tensor that one rank holds
 * differently is a finding naming the group and the ranks; grad_scale is divided out; an
 * incomplete world or shards that do not fit are one error naming the file and the dataset. */
#include <stdlib.h>
#include <string.h>

#include "harness/run_load.h"
#include "harness/base/testing.h"

#define DP 2
#define TP 2
#define WORLD (DP * TP)

static const char *const names[WORLD] = {"r0.h5", "r1.h5", "r2.h5", "r3.h5"};
/* batch rows per dp rank: uneven (a global batch of 4 that does not split 2 + 2) */
static const int64_t rows_of[DP] = {1, 3};
#define ROWS 4
#define COLS 6 /* split 3 + 3 over tp */

/* The full reference value of element (i, j): distinct, exact in bf16 and fp32. */
static double value_at(int64_t i, int64_t j) { return (double)(i * 16 + j) - 20.0; }

static void add(eq_capture *cap, const char *name, eq_role role, eq_dtype dt, int64_t r, int64_t c, eq_shard shard,
                double (*fill)(int64_t, int64_t, const void *), const void *arg)
{
    eq_tensor t;
    EQ_EXPECT_OK(eq_tensor_init_2d(&t, dt, r, c));
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) eq_tensor_set(&t, i * c + j, fill(i, j, arg));
    EQ_EXPECT_OK(eq_capture_add(cap, 0, name, role, &t));
    cap->entries[cap->count - 1].shard = shard;
}

typedef struct {
    int64_t row0, col0;
} offset;
static double shard_value(int64_t i, int64_t j, const void *arg)
{
    const offset *o = arg;
    return value_at(i + o->row0, j + o->col0);
}
static double weight_value(int64_t i, int64_t j, const void *arg)
{
    const offset *o = arg;
    return 0.5 * value_at(i + o->row0, j);
}
static double scaled_value(int64_t i, int64_t j, const void *arg)
{
    (void)arg;
    return 4.0 * value_at(i, j); /* stored as 4 x the global-loss gradient */
}
static double same_value(int64_t i, int64_t j, const void *arg)
{
    const int *perturb = arg;
    return value_at(i, j) + (*perturb && i == 1 && j == 2 ? 0.25 : 0.0);
}

/* Rank r = dp_rank * TP + tp_rank, as Megatron orders them; perturb_rank gets a different "same". */
static void build_ranks(eq_capture *ranks, int perturb_rank)
{
    for (int r = 0; r < WORLD; r++) {
        eq_capture *c = &ranks[r];
        eq_capture_init(c);
        int dp_rank = r / TP, tp_rank = r % TP;
        c->meta.dtype = EQ_FP32;
        c->meta.dp = DP, c->meta.tp = TP, c->meta.world_size = WORLD;
        c->meta.has_rank = 1, c->meta.rank = r, c->meta.dp_rank = dp_rank, c->meta.tp_rank = tp_rank;
        snprintf(c->meta.source, sizeof c->meta.source, "test");
        offset act = {dp_rank == 0 ? 0 : rows_of[0], tp_rank * (COLS / TP)};
        add(c, "act", EQ_ROLE_ACTIVATION, EQ_FP32, rows_of[dp_rank], COLS / TP, (eq_shard){0, 1, -1, -1}, shard_value, &act);
        offset w = {tp_rank * 2, 0}; /* weight rows split over tp, replicated over dp */
        add(c, "weight", EQ_ROLE_PARAM, EQ_BF16, 2, 3, (eq_shard){-1, 0, -1, -1}, weight_value, &w);
        int perturb = r == perturb_rank;
        add(c, "same", EQ_ROLE_GRAD, EQ_FP32, 3, 3, EQ_SHARD_REPLICATED, same_value, &perturb);
        add(c, "scaled", EQ_ROLE_GRAD, EQ_BF16, 2, 2, EQ_SHARD_REPLICATED, scaled_value, NULL);
        c->entries[c->count - 1].grad_scale = 4.0;
    }
}

static void free_ranks(eq_capture *ranks)
{
    for (int r = 0; r < WORLD; r++) eq_capture_free(&ranks[r]);
}

static void test_assembles(void)
{
    eq_capture ranks[WORLD], full;
    build_ranks(ranks, -1);
    EQ_EXPECT_OK(eq_run_assemble(ranks, names, WORLD, &full));
    EQ_EXPECT(full.count == 4 && full.n_findings == 0 && !full.meta.has_rank, "%d tensors, %d findings", full.count,
              full.n_findings);
    const eq_capture_entry *act = eq_capture_find(&full, "layers/00/act");
    EQ_EXPECT(act != NULL && act->tensor.shape[0] == ROWS && act->tensor.shape[1] == COLS, "act missing or misshapen");
    int wrong = 0;
    for (int64_t i = 0; act != NULL && i < ROWS * COLS; i++) wrong += eq_tensor_get(&act->tensor, i) != value_at(i / COLS, i % COLS);
    EQ_EXPECT(wrong == 0, "%d elements of the dp x tp assembled activation are not the full tensor's", wrong);
    const eq_capture_entry *w = eq_capture_find(&full, "layers/00/weight");
    wrong = w == NULL || w->tensor.shape[0] != 4 || w->tensor.dtype != EQ_BF16;
    for (int64_t i = 0; !wrong && i < 12; i++) wrong += eq_tensor_get(&w->tensor, i) != 0.5 * value_at(i / 3, i % 3);
    EQ_EXPECT(wrong == 0, "the tp-split, dp-replicated weight is not its rows in tp order");
    const eq_capture_entry *s = eq_capture_find(&full, "layers/00/scaled");
    EQ_EXPECT(s != NULL && eq_tensor_get(&s->tensor, 3) == value_at(1, 1), "grad_scale 4 was not divided out");
    eq_capture_free(&full);
    free_ranks(ranks);
}

static void test_replica_that_differs(void)
{
    eq_capture ranks[WORLD], full;
    build_ranks(ranks, 2); /* dp rank 1, tp rank 0 */
    EQ_EXPECT_OK(eq_run_assemble(ranks, names, WORLD, &full));
    EQ_EXPECT(full.n_findings == 1, "%d findings, want 1", full.n_findings);
    if (full.n_findings == 1) {
        const char *f = full.findings[0];
        EQ_EXPECT(strstr(f, "layers/00/same (grad) should be replicated over dp but differs") != NULL &&
                      strstr(f, "rank 2 (dp 1, tp 0) vs rank 0 (dp 0, tp 0) at 1 of 9 elements, max |d| 0.25") != NULL,
                  "finding '%s'", f);
    }
    const eq_capture_entry *s = eq_capture_find(&full, "layers/00/same");
    EQ_EXPECT(s != NULL && eq_tensor_get(&s->tensor, 5) == value_at(1, 2), "the kept copy is not rank 0's");
    eq_capture_free(&full);
    free_ranks(ranks);
}

static void expect_fails(eq_capture *ranks, int n, const char *words)
{
    eq_capture full;
    eq_status st = eq_run_assemble(ranks, names, n, &full);
    const char *msg = eq_error_message();
    EQ_EXPECT(st == EQ_ERR_INPUT, "want EQ_ERR_INPUT for '%s', got %s", words, eq_status_name(st));
    EQ_EXPECT(strstr(msg, words) != NULL, "message '%s' lacks '%s'", msg, words);
    EQ_EXPECT(strchr(msg, '\n') == NULL && full.count == 0, "message not one line, or a capture left");
    eq_error_clear();
}

static void test_refused(void)
{
    eq_capture ranks[WORLD];
    build_ranks(ranks, -1);
    expect_fails(ranks, 3, "a run of 4 ranks (dp 2 x tp 2) but 3 files: rank 3 is missing");
    ranks[3].meta.tp = 4;
    expect_fails(ranks, WORLD, "r3.h5: dp 2, tp 4, world_size 4, but r0.h5 says dp 2, tp 2");
    ranks[3].meta.tp = TP;
    ranks[3].meta.dp_rank = 0, ranks[3].meta.tp_rank = 1;
    expect_fails(ranks, WORLD, "r1.h5 and r3.h5 are both");
    ranks[3].meta.dp_rank = 1;
    ranks[3].meta.rank = 1; /* the place of rank 3, the number of rank 1 */
    expect_fails(ranks, WORLD, "r1.h5 and r3.h5 are both rank 1 (dp_rank 1, tp_rank 1)");
    ranks[3].meta.rank = 3;
    ranks[1].entries[0].shard.tp_dim = -1; /* one rank says the activation is replicated over tp */
    expect_fails(ranks, WORLD, "dataset layers/00/act: r0.h5 and r1.h5 disagree");
    ranks[1].entries[0].shard.tp_dim = 1;
    ranks[1].entries[0].tensor.shape[1] = 2; /* tp rank 1 of dp rank 0 holds 2 columns, of dp rank 1: 3 */
    expect_fails(ranks, WORLD, "dataset layers/00/act: r3.h5 holds 3 along dim 1, another rank of tp rank 1 holds 2");
    free_ranks(ranks);
    build_ranks(ranks, -1);
    ranks[1].entries[0].tensor.shape[0] = 3, ranks[1].entries[0].tensor.shape[1] = 1; /* tp rank 1: 3 rows */
    expect_fails(ranks, WORLD, "r1.h5 holds 3 along dim 0, another rank of dp rank 0 holds 1");
    free_ranks(ranks);
}

static double tenth(int64_t i, int64_t j, const void *arg)
{
    (void)arg;
    return 0.1 * (double)(i * 4 + j + 1); /* no value of it is a bf16 or fp32 value */
}
static double quarter(int64_t i, int64_t j, const void *arg)
{
    (void)arg;
    return 0.25 * (double)(i * 4 + j); /* every value exact in bf16 */
}

/* eq_run_check_dtype with run (dtype d) and the words its refusal must hold (NULL: accepted). */
static void expect_dtype(const eq_capture *run, const char *what, const char *words)
{
    eq_status st = eq_run_check_dtype(run, "run.h5");
    const char *msg = eq_error_message();
    if (words == NULL) EQ_EXPECT(st == EQ_OK, "%s: refused: %s", what, msg);
    else {
        EQ_EXPECT(st == EQ_ERR_INPUT, "%s: want EQ_ERR_INPUT, got %s", what, eq_status_name(st));
        EQ_EXPECT(strstr(msg, words) != NULL, "%s: message '%s' lacks '%s'", what, msg, words);
        EQ_EXPECT(strchr(msg, '\n') == NULL, "%s: message not one line", what);
    }
    eq_error_clear();
}

/* A declared dtype must agree with the data: fp32 data said to be bf16 is refused, bf16 values
 * widened to fp32 are not, nor a mixed-precision run with one activation of the dtype; losses,
 * inputs and parameters never decide. */
static void test_dtype_agrees(void)
{
    eq_capture run;
    eq_capture_init(&run);
    run.meta.dtype = EQ_BF16;
    add(&run, "loss", EQ_ROLE_LOSS, EQ_FP64, 1, 1, EQ_SHARD_REPLICATED, tenth, NULL);
    add(&run, "w", EQ_ROLE_PARAM, EQ_FP32, 2, 2, EQ_SHARD_REPLICATED, tenth, NULL);
    expect_dtype(&run, "no activation or gradient", NULL);
    add(&run, "g", EQ_ROLE_GRAD, EQ_FP32, 2, 4, EQ_SHARD_REPLICATED, tenth, NULL);
    expect_dtype(&run, "a gradient of fp32 values, no activation", "no grad holds bf16 values: layers/00/g is stored as fp32");
    add(&run, "a", EQ_ROLE_ACTIVATION, EQ_FP32, 2, 4, EQ_SHARD_REPLICATED, tenth, NULL);
    expect_dtype(&run, "fp32 activations said to be bf16",
                 "run.h5: the run says its dtype is bf16, but no activation holds bf16 values: layers/00/a is stored "
                 "as fp32 and element 0 is 0.100000001, which bf16 cannot hold");
    run.meta.dtype = EQ_FP32;
    expect_dtype(&run, "fp32 activations said to be fp32", NULL);
    run.meta.dtype = EQ_BF16;
    add(&run, "b", EQ_ROLE_ACTIVATION, EQ_FP32, 2, 4, EQ_SHARD_REPLICATED, quarter, NULL);
    expect_dtype(&run, "one activation of bf16 values widened to fp32 (mixed precision)", NULL);
    eq_capture_free(&run);
    eq_capture_init(&run);
    run.meta.dtype = EQ_FP32;
    add(&run, "a", EQ_ROLE_ACTIVATION, EQ_FP64, 2, 4, EQ_SHARD_REPLICATED, tenth, NULL);
    expect_dtype(&run, "fp64 activations said to be fp32", "no activation holds fp32 values: layers/00/a is stored as fp64");
    run.meta.dtype = EQ_FP64;
    expect_dtype(&run, "fp64 activations said to be fp64", NULL);
    eq_capture_free(&run);
}

int main(void)
{
    test_assembles();
    test_replica_that_differs();
    test_refused();
    test_dtype_agrees();
    return eq_test_finish("run_load_test");
}
