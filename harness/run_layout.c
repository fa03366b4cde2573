#include "harness/run_layout.h"

#include "harness/base/parallel.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run_load.h"

static const char *const group_names[EQ_GROUP_COUNT] = {"dp", "tp", "pp", "cp", "ep"};

const char *eq_group_name(eq_group g) { return group_names[g]; }

int eq_layout_size(const eq_run_meta *m, eq_group g)
{
    const int v[EQ_GROUP_COUNT] = {m->dp, m->tp, m->pp, m->cp, m->ep};
    return v[g] > 1 ? v[g] : 1;
}

int eq_layout_rank(const eq_run_meta *m, eq_group g)
{
    const int v[EQ_GROUP_COUNT] = {m->dp_rank, m->tp_rank, m->pp_rank, m->cp_rank, m->ep_rank};
    return v[g];
}

int eq_shard_dim(const eq_shard *s, eq_group g)
{
    const int v[EQ_GROUP_COUNT] = {s->dp_dim, s->tp_dim, -1, s->cp_dim, s->ep_dim};
    return v[g];
}

const char *eq_layout_name_of(const eq_run_meta *m, char *buf, size_t len)
{
    int used = snprintf(buf, len, "dp%d-tp%d", eq_layout_size(m, EQ_GROUP_DP), eq_layout_size(m, EQ_GROUP_TP));
    for (int g = EQ_GROUP_PP; g < EQ_GROUP_COUNT && used >= 0 && (size_t)used < len; g++)
        if (eq_layout_size(m, (eq_group)g) > 1)
            used += snprintf(buf + used, len - (size_t)used, "-%s%d", group_names[g], eq_layout_size(m, (eq_group)g));
    return buf;
}

/* "rank 3 (dp 1, tp 0, pp 1)": a rank and its place, the groups of more than one rank past dp, tp. */
static const char *rank_place(const eq_run_meta *m, char *buf, size_t len)
{
    int used = snprintf(buf, len, "rank %d (dp %d, tp %d", m->rank, m->dp_rank, m->tp_rank);
    for (int g = EQ_GROUP_PP; g < EQ_GROUP_COUNT && used >= 0 && (size_t)used < len; g++)
        if (eq_layout_size(m, (eq_group)g) > 1)
            used += snprintf(buf + used, len - (size_t)used, ", %s %d", group_names[g], eq_layout_rank(m, (eq_group)g));
    if (used >= 0 && (size_t)used < len) snprintf(buf + used, len - (size_t)used, ")");
    return buf;
}

/* "dp 2 x tp 2" (sep " x ") or "dp 2, tp 2" (sep ", "): the sizes, pp, cp, ep where more than 1. */
static const char *sizes_words(const eq_run_meta *m, const char *sep, char *buf, size_t len)
{
    int used = snprintf(buf, len, "dp %d%stp %d", m->dp, sep, m->tp);
    for (int g = EQ_GROUP_PP; g < EQ_GROUP_COUNT && used >= 0 && (size_t)used < len; g++)
        if (eq_layout_size(m, (eq_group)g) > 1)
            used += snprintf(buf + used, len - (size_t)used, "%s%s %d", sep, group_names[g], eq_layout_size(m, (eq_group)g));
    return buf;
}

/* "rank 1 (dp_rank 1, tp_rank 1)": a rank file's root attributes naming its place. */
static const char *rank_attrs(const eq_run_meta *m, char *buf, size_t len)
{
    int used = snprintf(buf, len, "rank %d (dp_rank %d, tp_rank %d", m->rank, m->dp_rank, m->tp_rank);
    for (int g = EQ_GROUP_PP; g < EQ_GROUP_COUNT && used >= 0 && (size_t)used < len; g++)
        if (eq_layout_size(m, (eq_group)g) > 1)
            used += snprintf(buf + used, len - (size_t)used, ", %s_rank %d", group_names[g], eq_layout_rank(m, (eq_group)g));
    if (used >= 0 && (size_t)used < len) snprintf(buf + used, len - (size_t)used, ")");
    return buf;
}

/* The place of a rank in the world of dp x tp x pp x cp (ep is carved from dp). */
static int64_t place_of(const eq_run_meta *m0, const eq_run_meta *m)
{
    return (((int64_t)m->pp_rank * eq_layout_size(m0, EQ_GROUP_DP) + m->dp_rank) * eq_layout_size(m0, EQ_GROUP_CP) +
            m->cp_rank) * eq_layout_size(m0, EQ_GROUP_TP) + m->tp_rank;
}

/* The same tensor on another rank: same role, sharding, dtype and rank of shape. */
static eq_status check_same_kind(const eq_capture_entry *a, const char *a_file, const eq_capture_entry *b,
                                 const char *b_file)
{
    if (a->role != b->role || memcmp(&a->shard, &b->shard, sizeof a->shard) != 0 || a->tensor.dtype != b->tensor.dtype ||
        a->tensor.ndim != b->tensor.ndim || a->grad_scale != b->grad_scale || strcmp(a->gemm.a, b->gemm.a) != 0 ||
        strcmp(a->gemm.b, b->gemm.b) != 0 || a->gemm.k_split_by_tp != b->gemm.k_split_by_tp)
        return EQ_FAIL(EQ_ERR_INPUT, "dataset %s: %s and %s disagree on its role, dtype, dimensions, shard, grad_scale "
                       "or GEMM operands (%s %s %d-d vs %s %s %d-d)", a->path, a_file, b_file, eq_role_name(a->role),
                       eq_dtype_name(a->tensor.dtype), a->tensor.ndim, eq_role_name(b->role),
                       eq_dtype_name(b->tensor.dtype), b->tensor.ndim);
    return EQ_OK;
}

/* Every rank present once, all of one world. */
static eq_status check_world(const eq_capture *ranks, const char *const *names, int n)
{
    eq_status st = EQ_OK;
    const eq_run_meta *m0 = &ranks[0].meta;
    int *at = NULL, *by_rank = NULL, *per_ep = NULL;
    for (int r = 0; r < n; r++) {
        const eq_run_meta *m = &ranks[r].meta;
        if (!m->has_rank)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: not a rank's file (no rank, dp_rank, tp_rank in its root) beside the "
                           "rank files of %s", names[r], names[0]);
        int same = m->world_size == m0->world_size;
        for (int g = 0; g < EQ_GROUP_COUNT; g++) same &= eq_layout_size(m, (eq_group)g) == eq_layout_size(m0, (eq_group)g);
        if (!same) {
            char a[96], b[96];
            return EQ_FAIL(EQ_ERR_INPUT, "%s: %s, world_size %d, but %s says %s, world_size %d", names[r],
                           sizes_words(m, ", ", a, sizeof a), m->world_size, names[0], sizes_words(m0, ", ", b, sizeof b),
                           m0->world_size);
        }
        if (m->step != m0->step || m->dtype != m0->dtype)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: step %lld, dtype %s, but %s says step %lld, dtype %s (one step of one "
                           "run per directory)", names[r], (long long)m->step, eq_dtype_name(m->dtype), names[0],
                           (long long)m0->step, eq_dtype_name(m0->dtype));
    }
    const int dp = eq_layout_size(m0, EQ_GROUP_DP), ep = eq_layout_size(m0, EQ_GROUP_EP);
    const int64_t world = (int64_t)dp * eq_layout_size(m0, EQ_GROUP_TP) * eq_layout_size(m0, EQ_GROUP_PP) *
                          eq_layout_size(m0, EQ_GROUP_CP);
    char layout[96];
    sizes_words(m0, " x ", layout, sizeof layout);
    if (world != m0->world_size || dp % ep != 0)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: world_size %d is not dp x tp x pp x cp (%s)%s", names[0], m0->world_size,
                       layout, dp % ep != 0 ? " (or ep does not divide dp)" : "");
    at = malloc((size_t)world * sizeof *at);
    by_rank = malloc((size_t)world * sizeof *by_rank);
    per_ep = calloc((size_t)ep, sizeof *per_ep);
    if (at == NULL || by_rank == NULL || per_ep == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for a world of %d ranks", m0->world_size);
        goto cleanup;
    }
    for (int64_t i = 0; i < world; i++) at[i] = by_rank[i] = -1;
    for (int r = 0; r < n; r++) {
        const eq_run_meta *m = &ranks[r].meta;
        char where[160];
        int inside = m->rank >= 0 && m->rank < m0->world_size;
        for (int g = 0; g < EQ_GROUP_COUNT; g++)
            inside &= eq_layout_rank(m, (eq_group)g) >= 0 && eq_layout_rank(m, (eq_group)g) < eq_layout_size(m0, (eq_group)g);
        if (!inside) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: %s is outside its world of %d (%s)", names[r],
                         rank_attrs(m, where, sizeof where), m0->world_size, layout);
            goto cleanup;
        }
        int *place = &at[place_of(m0, m)];
        if (by_rank[m->rank] >= 0 || *place >= 0) {
            /* the first file that holds this rank or this place */
            int q = by_rank[m->rank] < 0 ? *place : *place < 0 ? by_rank[m->rank]
                                                               : *place < by_rank[m->rank] ? *place : by_rank[m->rank];
            st = EQ_FAIL(EQ_ERR_INPUT, "%s and %s are both %s", names[q], names[r], rank_attrs(m, where, sizeof where));
            goto cleanup;
        }
        by_rank[m->rank] = *place = r;
        per_ep[m->ep_rank]++;
    }
    if (n != m0->world_size) {
        int missing = 0;
        while (missing < m0->world_size && by_rank[missing] >= 0) missing++;
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: a run of %d ranks (%s) but %d file%s: rank %d is missing", names[0],
                     m0->world_size, layout, n, n == 1 ? "" : "s", missing);
        goto cleanup;
    }
    for (int e = 0; e < ep; e++)
        if (per_ep[e] != n / ep) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: ep rank %d is held by %d ranks, want world / ep = %d (ep is carved from dp)",
                         names[0], e, per_ep[e], n / ep);
            goto cleanup;
        }
cleanup:
    free(at);
    free(by_rank);
    free(per_ep);
    return st;
}

/* Peers (the same stage and ep rank) hold the same tensors in the same order, of the same kind. */
static eq_status check_peers(const eq_capture *ranks, const char *const *names, int n)
{
    for (int r = 1; r < n; r++) {
        const eq_run_meta *m = &ranks[r].meta;
        int p = 0; /* the first peer */
        while (ranks[p].meta.pp_rank != m->pp_rank || ranks[p].meta.ep_rank != m->ep_rank) p++;
        if (p == r) continue;
        const char *what = eq_layout_size(m, EQ_GROUP_PP) > 1 || eq_layout_size(m, EQ_GROUP_EP) > 1
                               ? "every rank of a stage and an ep rank captures the same tensors"
                               : "every rank captures the same tensors";
        if (ranks[r].count != ranks[p].count)
            return EQ_FAIL(EQ_ERR_INPUT, "%s holds %d datasets, %s holds %d (%s)", names[p], ranks[p].count, names[r],
                           ranks[r].count, what);
        for (int i = 0; i < ranks[p].count; i++) {
            const eq_capture_entry *a = &ranks[p].entries[i], *b = &ranks[r].entries[i];
            if (strcmp(a->path, b->path) != 0) { /* say which file lacks what, where one does */
                if (eq_capture_find(&ranks[r], a->path) == NULL)
                    return EQ_FAIL(EQ_ERR_INPUT, "dataset %s is in %s but not in %s (%s)", a->path, names[p], names[r],
                                   what);
                if (eq_capture_find(&ranks[p], b->path) == NULL)
                    return EQ_FAIL(EQ_ERR_INPUT, "dataset %s is in %s but not in %s (%s)", b->path, names[r], names[p],
                                   what);
                return EQ_FAIL(EQ_ERR_INPUT, "%s and %s hold the same datasets in another order (%s vs %s)", names[p],
                               names[r], a->path, b->path);
            }
            eq_status st = check_same_kind(a, names[p], b, names[r]);
            if (st != EQ_OK) return st;
        }
    }
    return EQ_OK;
}

eq_status eq_run_check_layout(const eq_capture *ranks, const char *const *names, int n)
{
    if (n < 1) return EQ_FAIL(EQ_ERR_INPUT, "no rank files to assemble");
    eq_status st = check_world(ranks, names, n);
    return st == EQ_OK ? check_peers(ranks, names, n) : st;
}

/* Copies shard s into full f at the given offsets, a contiguous last-dimension row at a time, the
 * rows split over the workers (harness/base/parallel.h): a large shard's copy is a batch's one
 * serial step otherwise, and its first read of a mapped file's pages the slowest. */
typedef struct {
    eq_tensor *f;
    const eq_tensor *s;
    const int64_t *offset;
} place_job;

static void place_rows(void *ctx, int64_t begin, int64_t end)
{
    const place_job *j = ctx;
    const eq_tensor *s = j->s;
    const int nd = s->ndim;
    const size_t elem = eq_dtype_size(s->dtype);
    const int64_t row = s->shape[nd - 1];
    int64_t idx[EQ_MAX_DIMS] = {0};
    for (int64_t d = nd - 2, rest = begin; d >= 0; d--) { /* row `begin`'s index over dims 0 .. nd-2 */
        idx[d] = rest % s->shape[d];
        rest /= s->shape[d];
    }
    for (int64_t k = begin; k < end; k++) {
        int64_t at = 0;
        for (int d = 0; d < nd; d++) at = at * j->f->shape[d] + (d == nd - 1 ? j->offset[d] : idx[d] + j->offset[d]);
        memcpy((char *)j->f->data + (size_t)at * elem, (const char *)s->data + (size_t)(k * row) * elem,
               (size_t)row * elem);
        for (int d = nd - 2; d >= 0; d--) { /* next row index over dims 0 .. nd-2 */
            if (++idx[d] < s->shape[d]) break;
            idx[d] = 0;
        }
    }
}

static void place(eq_tensor *f, const eq_tensor *s, const int64_t *offset)
{
    const int64_t row = s->shape[s->ndim - 1], rows = row > 0 ? eq_tensor_numel(s) / row : 0;
    const int64_t row_bytes = row * (int64_t)eq_dtype_size(s->dtype), grain = (1 << 18) / (row_bytes > 0 ? row_bytes : 1);
    place_job job = {f, s, offset};
    if (rows * row_bytes < ((int64_t)1 << 20)) place_rows(&job, 0, rows); /* small: no worker's start-up */
    else eq_parallel_for(rows, grain > 0 ? grain : 1, place_rows, &job);
}

/* The groups two ranks differ in, past the ones the tensor is split over: "dp", "tp", "dp x pp". */
static const char *differing_groups(const eq_run_meta *a, const eq_run_meta *b, char *buf, size_t len, unsigned *mask)
{
    size_t used = 0;
    buf[0] = '\0';
    *mask = 0;
    for (int g = 0; g < EQ_GROUP_COUNT; g++) {
        if (g == EQ_GROUP_EP || eq_layout_rank(a, (eq_group)g) == eq_layout_rank(b, (eq_group)g)) continue;
        *mask |= 1u << g;
        int k = snprintf(buf + used, len - used, "%s%s", used ? " x " : "", group_names[g]);
        if (k > 0 && (size_t)k < len - used) used += (size_t)k;
    }
    return buf;
}

/* A replica that is not bit-identical to the first holder of its part: a finding (one per pair of
 * groups it differs in). */
static eq_status check_replica(eq_capture *out, const eq_capture_entry *have, const eq_capture_entry *want,
                               const eq_run_meta *mh, const eq_run_meta *mw, unsigned *reported)
{
    const eq_tensor *a = &have->tensor, *b = &want->tensor;
    char pa[160], pb[160], groups[64];
    if (!eq_tensor_same_shape(a, b)) {
        char sa[96], sb[96];
        eq_tensor_shape_str(a, sa, sizeof sa);
        eq_tensor_shape_str(b, sb, sizeof sb);
        return EQ_FAIL(EQ_ERR_INPUT, "dataset %s: replicated, but rank %d holds %s and rank %d holds %s", have->path,
                       mh->rank, sa, mw->rank, sb);
    }
    unsigned mask;
    differing_groups(mh, mw, groups, sizeof groups, &mask);
    if ((*reported & (1u << mask)) || memcmp(a->data, b->data, eq_tensor_bytes(a)) == 0) return EQ_OK;
    int64_t n = eq_tensor_numel(a), differ = 0;
    double max_abs = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double x = eq_tensor_get(a, i), y = eq_tensor_get(b, i);
        if (x == y || (isnan(x) && isnan(y))) continue;
        differ++;
        double d = fabs(x - y);
        if (d > max_abs || isnan(d)) max_abs = d;
    }
    if (differ == 0) return EQ_OK; /* only signs of zero or NaN payloads */
    *reported |= 1u << mask;
    return eq_capture_add_finding(out, "%s (%s) should be replicated over %s but differs: %s vs %s at %lld of %lld "
                                  "elements, max |d| %.6g", have->path, eq_role_name(have->role), groups,
                                  rank_place(mh, pa, sizeof pa), rank_place(mw, pb, sizeof pb), (long long)differ,
                                  (long long)n, max_abs);
}

/* The groups a tensor is split over and its part's index: the holder's ranks in them, mixed radix. */
typedef struct {
    int n, group[EQ_GROUP_COUNT], dim[EQ_GROUP_COUNT], size[EQ_GROUP_COUNT];
    int64_t parts;
} split_plan;

static int64_t part_of(const split_plan *p, const eq_run_meta *m)
{
    int64_t k = 0;
    for (int i = 0; i < p->n; i++) k = k * p->size[i] + eq_layout_rank(m, (eq_group)p->group[i]);
    return k;
}

/* "tp rank 1, cp rank 0": the ranks of part k. */
static const char *part_name(const split_plan *p, int64_t k, char *buf, size_t len)
{
    size_t used = 0;
    int64_t rest[EQ_GROUP_COUNT];
    for (int i = p->n - 1; i >= 0; i--) rest[i] = k % p->size[i], k /= p->size[i];
    buf[0] = '\0';
    for (int i = 0; i < p->n; i++) {
        int w = snprintf(buf + used, len - used, "%s%s rank %lld", i ? ", " : "", group_names[p->group[i]],
                         (long long)rest[i]);
        if (w > 0 && (size_t)w < len - used) used += (size_t)w;
    }
    return buf;
}

/* Assembles path into out; shape_only: checks and the full shape, no data (tensor.data NULL), and
 * firsts (where given, [n]) set to each rank's first holder of its part (-1: it holds none). */
static eq_status assemble_path(const eq_capture *ranks, const char *const *names, int n, const char *path,
                               int shape_only, int *firsts, eq_capture *out)
{
    eq_status st = EQ_OK;
    const eq_run_meta *m0 = &ranks[0].meta;
    const eq_capture_entry **held = calloc((size_t)n, sizeof *held), *e0 = NULL;
    int *first = NULL, r0 = -1;
    int64_t *offsets[EQ_GROUP_COUNT] = {NULL};
    split_plan plan = {.n = 0, .parts = 1};
    unsigned reported = 0;
    eq_tensor full;
    memset(&full, 0, sizeof full);
    if (held == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to assemble %s", path);
    for (int r = 0; r < n; r++) {
        held[r] = eq_capture_find(&ranks[r], path);
        if (held[r] == NULL) continue;
        if (e0 == NULL) e0 = held[r], r0 = r;
        else EQ_TRY(check_same_kind(e0, names[r0], held[r], names[r]));
    }
    if (e0 == NULL) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dataset %s: no rank of %s's run holds it", path, names[0]);
        goto cleanup;
    }
    if (e0->shard.dp_dim >= 0 && e0->shard.ep_dim >= 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dataset %s: %s splits it over dp and ep, which is carved from dp (split it over "
                     "one)", path, names[r0]);
        goto cleanup;
    }
    for (int g = 0; g < EQ_GROUP_COUNT; g++) {
        int dim = eq_shard_dim(&e0->shard, (eq_group)g);
        if (dim < 0) continue;
        plan.group[plan.n] = g, plan.dim[plan.n] = dim, plan.size[plan.n] = eq_layout_size(m0, (eq_group)g);
        plan.parts *= plan.size[plan.n];
        if ((offsets[plan.n] = calloc((size_t)plan.size[plan.n] + 1, sizeof *offsets[0])) == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to assemble %s", path);
            goto cleanup;
        }
        plan.n++;
    }
    if ((first = malloc((size_t)plan.parts * sizeof *first)) == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to assemble %s", path);
        goto cleanup;
    }
    for (int64_t k = 0; k < plan.parts; k++) first[k] = -1;
    for (int r = 0; r < n; r++)
        if (held[r] != NULL && first[part_of(&plan, &ranks[r].meta)] < 0) first[part_of(&plan, &ranks[r].meta)] = r;
    for (int64_t k = 0; k < plan.parts; k++)
        if (first[k] < 0) {
            char part[160];
            st = EQ_FAIL(EQ_ERR_INPUT, "dataset %s: no rank holds its part at %s (it is split; %s holds a part)", path,
                         part_name(&plan, k, part, sizeof part), names[r0]);
            goto cleanup;
        }
    /* extents: the dims not split agree on every holder; a split dim's on every holder of one group rank */
    int64_t shape[EQ_MAX_DIMS];
    for (int d = 0; d < e0->tensor.ndim; d++) shape[d] = e0->tensor.shape[d];
    for (int i = 0; i < plan.n; i++)
        for (int k = 0; k <= plan.size[i]; k++) offsets[i][k] = -1;
    for (int r = 0; r < n; r++) {
        if (held[r] == NULL) continue;
        for (int d = 0; d < e0->tensor.ndim; d++) {
            int split = -1;
            for (int i = 0; i < plan.n; i++)
                if (plan.dim[i] == d) split = i;
            int64_t e = held[r]->tensor.shape[d];
            if (split < 0 && e != shape[d]) {
                st = EQ_FAIL(EQ_ERR_INPUT, "dataset %s: %s holds %lld along dim %d, %s holds %lld, and the dim is not "
                             "split (shard attribute)", path, names[r], (long long)e, d, names[r0], (long long)shape[d]);
                goto cleanup;
            }
            if (split < 0) continue;
            int64_t *extent = &offsets[split][eq_layout_rank(&ranks[r].meta, (eq_group)plan.group[split]) + 1];
            if (*extent >= 0 && *extent != e) {
                st = EQ_FAIL(EQ_ERR_INPUT, "dataset %s: %s holds %lld along dim %d, another rank of %s rank %d holds "
                             "%lld", path, names[r], (long long)e, d, group_names[plan.group[split]],
                             eq_layout_rank(&ranks[r].meta, (eq_group)plan.group[split]), (long long)*extent);
                goto cleanup;
            }
            *extent = e;
        }
    }
    for (int i = 0; i < plan.n; i++) { /* extents to offsets: offsets[i][k] is group rank k's start */
        offsets[i][0] = 0;
        for (int k = 1; k <= plan.size[i]; k++) offsets[i][k] += offsets[i][k - 1];
        shape[plan.dim[i]] = offsets[i][plan.size[i]];
    }
    for (int r = 0; firsts != NULL && r < n; r++) firsts[r] = held[r] != NULL ? first[part_of(&plan, &ranks[r].meta)] : -1;
    if (shape_only) {
        full.dtype = e0->tensor.dtype;
        full.ndim = e0->tensor.ndim;
        memcpy(full.shape, shape, sizeof full.shape);
    } else { /* every part placed below: the whole tensor written */
        EQ_TRY(eq_tensor_init_whole(&full, e0->tensor.dtype, e0->tensor.ndim, shape));
    }
    for (int r = 0; r < n && !shape_only; r++) {
        if (held[r] == NULL) continue;
        const eq_run_meta *m = &ranks[r].meta;
        const int q = first[part_of(&plan, m)];
        if (q != r) {
            /* a replica without data: the reader found it bit-identical to its first holder's */
            if (held[r]->tensor.data == NULL && eq_tensor_numel(&held[r]->tensor) > 0) continue;
            EQ_TRY(check_replica(out, held[r], held[q], m, &ranks[q].meta, &reported));
            continue;
        }
        int64_t offset[EQ_MAX_DIMS] = {0};
        for (int i = 0; i < plan.n; i++) offset[plan.dim[i]] = offsets[i][eq_layout_rank(m, (eq_group)plan.group[i])];
        place(&full, &held[r]->tensor, offset);
    }
    if (e0->grad_scale != 1.0 && !shape_only) {
        const int64_t count = eq_tensor_numel(&full);
        for (int64_t k = 0; k < count; k++) eq_tensor_set(&full, k, eq_tensor_get(&full, k) / e0->grad_scale);
    }
    if (strcmp(e0->path, e0->name) == 0) EQ_TRY(eq_capture_add_path(out, e0->path, e0->layer, e0->role, &full));
    else EQ_TRY(eq_capture_add(out, e0->layer, e0->name, e0->role, &full));
    out->entries[out->count - 1].gemm = e0->gemm;
    out->entries[out->count - 1].grad_scale = shape_only ? e0->grad_scale : 1.0;
    out->entries[out->count - 1].assembled_tp_dim = eq_layout_size(m0, EQ_GROUP_TP) > 1 ? e0->shard.tp_dim : -1;
cleanup:
    if (!shape_only) eq_tensor_free(&full);
    for (int i = 0; i < EQ_GROUP_COUNT; i++) free(offsets[i]);
    free(first);
    free(held);
    return st;
}

eq_status eq_run_assemble_path(const eq_capture *ranks, const char *const *names, int n, const char *path,
                               eq_capture *out)
{
    return assemble_path(ranks, names, n, path, 0, NULL, out);
}

eq_status eq_run_holders(const eq_capture *ranks, const char *const *names, int n, const char *path, int *firsts)
{
    eq_capture scratch;
    eq_capture_init(&scratch);
    eq_status st = assemble_path(ranks, names, n, path, 1, firsts, &scratch);
    eq_capture_free(&scratch);
    return st;
}

/* Every path once, in the order of its first holder (stage by stage, rank by rank), assembled, or
 * with its full shape and no data where shape_only. */
static eq_status assemble(const eq_capture *ranks, const char *const *names, int n, int shape_only, eq_capture *out)
{
    eq_status st = EQ_OK;
    eq_capture_init(out);
    EQ_TRY(eq_run_check_layout(ranks, names, n));
    out->meta = ranks[0].meta;
    out->meta.has_rank = 0;
    out->meta.rank = out->meta.dp_rank = out->meta.tp_rank = 0;
    out->meta.pp_rank = out->meta.cp_rank = out->meta.ep_rank = 0;
    /* every path once, in the order of its first holder: stage by stage, rank by rank */
    for (int stage = 0; stage < eq_layout_size(&ranks[0].meta, EQ_GROUP_PP); stage++)
        for (int r = 0; r < n; r++) {
            if (ranks[r].meta.pp_rank != stage) continue;
            for (int i = 0; i < ranks[r].count; i++)
                if (eq_capture_find(out, ranks[r].entries[i].path) == NULL)
                    EQ_TRY(assemble_path(ranks, names, n, ranks[r].entries[i].path, shape_only, NULL, out));
        }
cleanup:
    if (st != EQ_OK) eq_capture_free(out);
    return st;
}

eq_status eq_run_assemble(const eq_capture *ranks, const char *const *names, int n, eq_capture *out)
{
    return assemble(ranks, names, n, 0, out);
}

eq_status eq_run_assemble_index(const eq_capture *ranks, const char *const *names, int n, eq_capture *out)
{
    return assemble(ranks, names, n, 1, out);
}
