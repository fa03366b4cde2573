/* Assembly of the layouts past dp x tp (harness/run_layout.h), in memory: pipeline stages holding
 * different tensors, a context-parallel sequence split, experts over ep carved from dp; replicas
 * that differ are findings naming the groups; a part no rank holds, peers that hold different
 * tensors and an ep that does not fit are one error; assembling one tensor at a time from ranks
 * that each hold only it (or nothing) gives what the whole run gives. */
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "harness/run_layout.h"
#include "harness/run_load.h"

static const char *const names[8] = {"r0.h5", "r1.h5", "r2.h5", "r3.h5", "r4.h5", "r5.h5", "r6.h5", "r7.h5"};

/* The full value of element (i, j) of tensor `salt`: distinct, exact in fp32. */
static double value_at(int salt, int64_t i, int64_t j) { return (double)(salt * 100 + i * 10 + j) - 50.0; }

/* Adds tensor `path` [rows, cols]: the block at (row0, col0) of the full tensor, + bump at (0, 0). */
static void add(eq_capture *c, const char *path, int salt, int64_t rows, int64_t cols, int64_t row0, int64_t col0,
                eq_shard shard, double bump)
{
    eq_tensor t;
    EQ_EXPECT_OK(eq_tensor_init_2d(&t, EQ_FP32, rows, cols));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) eq_tensor_set(&t, i * cols + j, value_at(salt, i + row0, j + col0));
    eq_tensor_set(&t, 0, eq_tensor_get(&t, 0) + bump);
    EQ_EXPECT_OK(eq_capture_add_path(c, path, -1, EQ_ROLE_GRAD, &t));
    c->entries[c->count - 1].shard = shard;
}

static void rank_meta(eq_capture *c, int world, int dp, int pp, int cp, int ep, int r, int dp_rank, int pp_rank,
                      int cp_rank, int ep_rank)
{
    eq_capture_init(c);
    c->meta.dtype = EQ_FP32;
    c->meta.dp = dp, c->meta.tp = 1, c->meta.pp = pp, c->meta.cp = cp, c->meta.ep = ep, c->meta.world_size = world;
    c->meta.has_rank = 1, c->meta.rank = r, c->meta.dp_rank = dp_rank, c->meta.pp_rank = pp_rank;
    c->meta.cp_rank = cp_rank, c->meta.ep_rank = ep_rank;
}

static const eq_shard split_dp0 = {0, -1, -1, -1}, split_cp1 = {-1, -1, 1, -1}, split_ep0 = {-1, -1, -1, 0};

/* The full tensor `path` of out equals value_at(salt) at [rows, cols]. */
static void expect_full(const eq_capture *out, const char *path, int salt, int64_t rows, int64_t cols)
{
    const eq_capture_entry *e = eq_capture_find(out, path);
    EQ_EXPECT(e != NULL, "%s assembled", path);
    if (e == NULL) return;
    EQ_EXPECT(e->tensor.shape[0] == rows && e->tensor.shape[1] == cols, "%s: %lld x %lld", path,
              (long long)e->tensor.shape[0], (long long)e->tensor.shape[1]);
    int same = 1;
    for (int64_t i = 0; i < rows && same; i++)
        for (int64_t j = 0; j < cols; j++) same &= eq_tensor_get(&e->tensor, i * cols + j) == value_at(salt, i, j);
    EQ_EXPECT(same, "%s: element for element", path);
}

/* dp 2 x pp 2 (rank = pp_rank * 2 + dp_rank): stage 0 holds x.out (dp-split) and w0, stage 1 y.out,
 * w1 and loss. bump_w1: rank 3's w1 differs. */
static void build_pp(eq_capture *ranks, double bump_w1)
{
    for (int r = 0; r < 4; r++) {
        int dp_rank = r % 2, stage = r / 2;
        rank_meta(&ranks[r], 4, 2, 2, 0, 0, r, dp_rank, stage, 0, 0);
        if (stage == 0) {
            add(&ranks[r], "x.out", 1, 2, 3, 2 * dp_rank, 0, split_dp0, 0);
            add(&ranks[r], "w0", 2, 2, 2, 0, 0, EQ_SHARD_REPLICATED, 0);
        } else {
            add(&ranks[r], "y.out", 3, 2, 3, 2 * dp_rank, 0, split_dp0, 0);
            add(&ranks[r], "w1", 4, 2, 2, 0, 0, EQ_SHARD_REPLICATED, r == 3 ? bump_w1 : 0);
            add(&ranks[r], "loss", 5, 1, 1, 0, 0, EQ_SHARD_REPLICATED, 0);
        }
    }
}

static void free_all(eq_capture *ranks, int n)
{
    for (int r = 0; r < n; r++) eq_capture_free(&ranks[r]);
}

static void test_pipeline(void)
{
    eq_capture ranks[4], out;
    build_pp(ranks, 0);
    EQ_EXPECT_OK(eq_run_assemble(ranks, names, 4, &out));
    EQ_EXPECT(out.count == 5 && out.n_findings == 0, "%d tensors, %d findings", out.count, out.n_findings);
    EQ_EXPECT(out.count == 5 && strcmp(out.entries[0].path, "x.out") == 0 && strcmp(out.entries[2].path, "y.out") == 0,
              "stage 0's tensors first");
    expect_full(&out, "x.out", 1, 4, 3);
    expect_full(&out, "y.out", 3, 4, 3);
    expect_full(&out, "w1", 4, 2, 2);
    char layout[64];
    EQ_EXPECT(strcmp(eq_layout_name_of(&out.meta, layout, sizeof layout), "dp2-tp1-pp2") == 0, "%s", layout);
    eq_capture_free(&out);
    free_all(ranks, 4);

    build_pp(ranks, 0.5); /* stage 1's dp 1 keeps its own w1: not reduced over dp */
    EQ_EXPECT_OK(eq_run_assemble(ranks, names, 4, &out));
    EQ_EXPECT(out.n_findings == 1 && strstr(out.findings[0], "w1 (grad) should be replicated over dp but differs: "
                                                             "rank 3 (dp 1, tp 0, pp 1) vs rank 2 (dp 0, tp 0, pp 1)"),
              "finding: %s", out.n_findings ? out.findings[0] : "none");
    eq_capture_free(&out);

    /* one tensor at a time, each rank holding only it (or nothing): what the streaming compare does */
    eq_capture one[4], by_path;
    eq_capture_init(&by_path);
    for (int r = 0; r < 4; r++) {
        eq_capture_init(&one[r]);
        one[r].meta = ranks[r].meta;
        const eq_capture_entry *e = eq_capture_find(&ranks[r], "w1");
        if (e != NULL) {
            eq_tensor t;
            EQ_EXPECT_OK(eq_tensor_clone(&t, &e->tensor));
            EQ_EXPECT_OK(eq_capture_add_path(&one[r], "w1", -1, e->role, &t));
        }
    }
    EQ_EXPECT_OK(eq_run_assemble_path(one, names, 4, "w1", &by_path));
    EQ_EXPECT(by_path.count == 1 && by_path.n_findings == 1, "w1 alone: %d tensors, %d findings", by_path.count,
              by_path.n_findings);
    eq_capture_free(&by_path);
    for (int r = 0; r < 4; r++) eq_capture_free(&one[r]);
    free_all(ranks, 4);

    /* stage 0's dp 1 lacks x.out: its peer holds it */
    build_pp(ranks, 0);
    ranks[1].count = 1;
    eq_capture_reindex(&ranks[1]);
    EQ_EXPECT(eq_run_assemble(ranks, names, 4, &out) == EQ_ERR_INPUT, "a peer lacking a tensor");
    EQ_EXPECT(strstr(eq_error_message(), "r0.h5 holds 2 datasets, r1.h5 holds 1 (every rank of a stage and an ep rank captures") != NULL, "%s", eq_error_message());
    eq_error_clear();
    ranks[1].count = 2;
    free_all(ranks, 4);
}

/* cp 2 (the sequence, dim 1, split) x dp 2: rank = dp_rank * 2 + cp_rank; and an incomplete split */
static void test_context(void)
{
    eq_capture ranks[4], out;
    for (int r = 0; r < 4; r++) {
        rank_meta(&ranks[r], 4, 2, 0, 2, 0, r, r / 2, 0, r % 2, 0);
        add(&ranks[r], "attn.out", 6, 1, 4, r / 2, 4 * (r % 2), (eq_shard){0, -1, 1, -1}, 0);
        add(&ranks[r], "wq", 7, 2, 2, 0, 0, EQ_SHARD_REPLICATED, 0);
    }
    EQ_EXPECT_OK(eq_run_assemble(ranks, names, 4, &out));
    expect_full(&out, "attn.out", 6, 2, 8);
    EQ_EXPECT(out.n_findings == 0, "cp: %d findings", out.n_findings);
    eq_capture_free(&out);
    free_all(ranks, 4);
    /* a cp-split tensor held by cp rank 0 only: its other part is missing */
    eq_capture two[2];
    for (int r = 0; r < 2; r++) {
        rank_meta(&two[r], 2, 1, 0, 2, 0, r, 0, 0, r, 0);
        if (r == 0) add(&two[r], "k.out", 8, 1, 4, 0, 0, split_cp1, 0);
    }
    EQ_EXPECT(eq_run_assemble_path(two, names, 2, "k.out", &out) == EQ_ERR_INPUT, "a part missing");
    EQ_EXPECT(strstr(eq_error_message(), "dataset k.out: no rank holds its part at cp rank 1") != NULL, "%s",
              eq_error_message());
    eq_error_clear();
    eq_capture_free(&out);
    free_all(two, 2);
}

/* ep 2 carved from dp 4 (ep_rank = dp_rank / 2): expert e on ep rank e, replicated over its 2 dp
 * ranks; a stack of both experts split over ep; the router on every rank. bump: rank 1's expert 0. */
static void build_ep(eq_capture *ranks, double bump)
{
    for (int r = 0; r < 4; r++) {
        int e = r / 2;
        rank_meta(&ranks[r], 4, 4, 0, 0, 2, r, r, 0, 0, e);
        add(&ranks[r], "router.weight", 9, 2, 3, 0, 0, EQ_SHARD_REPLICATED, 0);
        add(&ranks[r], e == 0 ? "experts.0.fc.weight" : "experts.1.fc.weight", 10 + e, 2, 3, 0, 0,
            EQ_SHARD_REPLICATED, r == 1 ? bump : 0);
        add(&ranks[r], "experts.stack", 12, 1, 3, e, 0, split_ep0, 0);
    }
}

static void test_experts(void)
{
    eq_capture ranks[4], out;
    build_ep(ranks, 0);
    EQ_EXPECT_OK(eq_run_assemble(ranks, names, 4, &out));
    EQ_EXPECT(out.count == 4 && out.n_findings == 0, "ep: %d tensors, %d findings", out.count, out.n_findings);
    expect_full(&out, "experts.1.fc.weight", 11, 2, 3);
    expect_full(&out, "experts.stack", 12, 2, 3);
    eq_capture_free(&out);
    free_all(ranks, 4);

    build_ep(ranks, 0.25);
    EQ_EXPECT_OK(eq_run_assemble(ranks, names, 4, &out));
    EQ_EXPECT(out.n_findings == 1 && strstr(out.findings[0], "experts.0.fc.weight (grad) should be replicated over dp "
                                                             "but differs: rank 1 (dp 1, tp 0, ep 0)"),
              "finding: %s", out.n_findings ? out.findings[0] : "none");
    eq_capture_free(&out);
    /* three ranks on ep rank 0: not world / ep each */
    ranks[2].meta.ep_rank = 0;
    EQ_EXPECT(eq_run_check_layout(ranks, names, 4) == EQ_ERR_INPUT, "ep ranks uneven");
    EQ_EXPECT(strstr(eq_error_message(), "ep rank 0 is held by 3 ranks, want world / ep = 2") != NULL, "%s",
              eq_error_message());
    eq_error_clear();
    free_all(ranks, 4);
}

int main(void)
{
    test_pipeline();
    test_context();
    test_experts();
    return eq_test_finish("run_layout_test");
}
