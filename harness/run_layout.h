/* The layout of a user's run, and the assembly of its per-rank captures into full tensors.
 *
 * The world is dp x tp x pp x cp ranks (pipeline stages, context parallel: the sequence split);
 * expert parallelism (ep) is carved from dp, as Megatron-Core's expert groups are: ep divides dp,
 * and a rank's ep_rank says which experts it holds. A rank's file holds the tensors of its stage and
 * its experts, each whole or split along one dim per group (eq_shard: dp, tp, cp, ep).
 *
 * Assembly decides tensor by tensor, by path, from the ranks that hold it (its holders):
 *   - its holders agree on its role, dtype, dimensions, shard, grad_scale and GEMM operands;
 *   - a part of every split group's rank is held (a dp-split activation on every dp rank of its
 *     stage), and the parts are concatenated in group-rank order along their dims;
 *   - holders that hold the same part (the same ranks of the split groups) are replicas: each must
 *     be bit-identical to the first (in rank order), else a finding names the tensor and the groups
 *     the two ranks differ in ("should be replicated over dp"); the first is kept;
 *   - grad_scale is divided out.
 * So a pipeline stage's layers come from the ranks of that stage, an expert's parameters from the
 * ranks of its ep rank (replicated over its dp replicas), the router's from every rank.
 *
 * The whole-run checks (eq_run_check_layout) need only each rank's meta and its entries' paths,
 * roles, dtypes, dimensions and shards (an index without data): every rank once, one world, and the
 * ranks of one pipeline stage and one ep rank (peers) hold the same tensors in the same order. */
#ifndef EQUIV_HARNESS_RUN_LAYOUT_H
#define EQUIV_HARNESS_RUN_LAYOUT_H

#include "harness/capture.h"

typedef enum { EQ_GROUP_DP, EQ_GROUP_TP, EQ_GROUP_PP, EQ_GROUP_CP, EQ_GROUP_EP } eq_group;
#define EQ_GROUP_COUNT 5

const char *eq_group_name(eq_group g); /* "dp", "tp", "pp", "cp", "ep" */
/* The group's size (a meta's 0, not recorded, is 1) and this rank's place in it. */
int eq_layout_size(const eq_run_meta *m, eq_group g);
int eq_layout_rank(const eq_run_meta *m, eq_group g);
/* The dim a shard splits over g, or -1 (pp: always -1). */
int eq_shard_dim(const eq_shard *s, eq_group g);

/* "dp2-tp2-pp2": the layout as a report's heading names it (pp, cp, ep where more than 1). */
const char *eq_layout_name_of(const eq_run_meta *m, char *buf, size_t len);

/* The world of per-rank captures (data or index only): every file a rank's, one run (the same
 * sizes, world_size, step and dtype), world_size = dp x tp x pp x cp, ep dividing dp with each
 * ep rank held by world/ep ranks, every rank and place once, and peers (one stage, one ep rank)
 * holding the same tensors in the same order with the same kind. EQ_ERR_INPUT naming the file. */
eq_status eq_run_check_layout(const eq_capture *ranks, const char *const *names, int n);

/* Assembles the tensor at `path` from the ranks that hold it (entry by entry: a rank may hold only
 * this tensor, or none) and appends it to out (findings too). The world is assumed checked
 * (eq_run_check_layout). EQ_ERR_INPUT when no rank holds it or its parts do not fit. */
eq_status eq_run_assemble_path(const eq_capture *ranks, const char *const *names, int n, const char *path,
                               eq_capture *out);

/* The same with the data left where it is, for a reader that streams (harness/run_stream.h):
 *   eq_run_holders sets firsts[r] (n of them) to the rank whose copy of path's part rank r's is
 *   (r itself where it is the first holder, whose part is placed; -1: r does not hold it), after
 *   the same checks of its holders as assembly makes;
 *   eq_run_assemble_index is eq_run_assemble on index captures: every tensor with its full shape
 *   and no data (tensor.data NULL), grad_scale kept.
 * eq_run_assemble_path skips a replica whose tensor has no data: one found bit-identical to its
 * first holder's where it was read. */
eq_status eq_run_holders(const eq_capture *ranks, const char *const *names, int n, const char *path, int *firsts);
eq_status eq_run_assemble_index(const eq_capture *ranks, const char *const *names, int n, eq_capture *out);

#endif
