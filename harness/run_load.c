#include "harness/run_load.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/dump.h"
#include "harness/dump_read_isolated.h"

/* The assembled shape of one tensor and where each rank's shard goes in it. */
typedef struct {
    int64_t shape[EQ_MAX_DIMS];
    int64_t *dp_offset, *tp_offset; /* [dp], [tp]: the shard's start along dp_dim / tp_dim */
} layout_plan;

/* Every rank present once, all of one world; at[dp_rank * tp + tp_rank] is set to the rank file
 * (index into ranks) at each place of the world (dp x tp entries, the caller's). */
static eq_status check_world(const eq_capture *ranks, const char *const *names, int n, int **at_out)
{
    eq_status st = EQ_OK;
    const eq_run_meta *m0 = &ranks[0].meta;
    int *at = NULL, *by_rank = NULL;
    *at_out = NULL;
    for (int r = 0; r < n; r++) {
        const eq_run_meta *m = &ranks[r].meta;
        if (!m->has_rank)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: not a rank's file (no rank, dp_rank, tp_rank in its root) beside the "
                           "rank files of %s", names[r], names[0]);
        if (m->dp != m0->dp || m->tp != m0->tp || m->world_size != m0->world_size)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: dp %d, tp %d, world_size %d, but %s says dp %d, tp %d, world_size %d",
                           names[r], m->dp, m->tp, m->world_size, names[0], m0->dp, m0->tp, m0->world_size);
        if (m->step != m0->step || m->dtype != m0->dtype)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: step %lld, dtype %s, but %s says step %lld, dtype %s (one step of one "
                           "run per directory)", names[r], (long long)m->step, eq_dtype_name(m->dtype), names[0],
                           (long long)m0->step, eq_dtype_name(m0->dtype));
    }
    /* eq_dump_read has checked each file's world (world_size = dp x tp, its ranks inside it) */
    if (m0->dp < 1 || m0->tp < 1 || (int64_t)m0->dp * m0->tp != (int64_t)m0->world_size)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: world_size %d is not dp x tp = %d x %d", names[0], m0->world_size, m0->dp,
                       m0->tp);
    at = malloc((size_t)m0->world_size * sizeof *at);
    by_rank = malloc((size_t)m0->world_size * sizeof *by_rank);
    if (at == NULL || by_rank == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for a world of %d ranks", m0->world_size);
        goto cleanup;
    }
    for (int i = 0; i < m0->world_size; i++) at[i] = by_rank[i] = -1;
    for (int r = 0; r < n; r++) {
        const eq_run_meta *m = &ranks[r].meta;
        if (m->rank < 0 || m->rank >= m0->world_size || m->dp_rank < 0 || m->dp_rank >= m0->dp || m->tp_rank < 0 ||
            m->tp_rank >= m0->tp) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: rank %d (dp_rank %d, tp_rank %d) is outside its world of %d (dp %d x tp "
                         "%d)", names[r], m->rank, m->dp_rank, m->tp_rank, m0->world_size, m0->dp, m0->tp);
            goto cleanup;
        }
        int *place = &at[m->dp_rank * m0->tp + m->tp_rank];
        if (by_rank[m->rank] >= 0 || *place >= 0) {
            /* the first file that holds this rank or this place */
            int q = by_rank[m->rank] < 0 ? *place : *place < 0 ? by_rank[m->rank]
                                                               : *place < by_rank[m->rank] ? *place : by_rank[m->rank];
            st = EQ_FAIL(EQ_ERR_INPUT, "%s and %s are both rank %d (dp_rank %d, tp_rank %d)", names[q], names[r],
                         m->rank, m->dp_rank, m->tp_rank);
            goto cleanup;
        }
        by_rank[m->rank] = *place = r;
    }
    if (n != m0->world_size) {
        int missing = 0;
        while (missing < m0->world_size && by_rank[missing] >= 0) missing++;
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: a run of %d ranks (dp %d x tp %d) but %d file%s: rank %d is missing", names[0],
                     m0->world_size, m0->dp, m0->tp, n, n == 1 ? "" : "s", missing);
        goto cleanup;
    }
    *at_out = at;
    at = NULL;
cleanup:
    free(at);
    free(by_rank);
    return st;
}

/* The same tensor on another rank: same role, sharding, dtype and rank of shape. */
static eq_status check_same_kind(const eq_capture_entry *a, const char *a_file, const eq_capture_entry *b,
                                 const char *b_file)
{
    if (a->role != b->role || a->shard.dp_dim != b->shard.dp_dim || a->shard.tp_dim != b->shard.tp_dim ||
        a->tensor.dtype != b->tensor.dtype || a->tensor.ndim != b->tensor.ndim || a->grad_scale != b->grad_scale ||
        strcmp(a->gemm.a, b->gemm.a) != 0 || strcmp(a->gemm.b, b->gemm.b) != 0 ||
        a->gemm.k_split_by_tp != b->gemm.k_split_by_tp)
        return EQ_FAIL(EQ_ERR_INPUT, "dataset %s: %s and %s disagree on its role, dtype, dimensions, shard, grad_scale "
                       "or GEMM operands (%s %s %d-d vs %s %s %d-d)", a->path, a_file, b_file, eq_role_name(a->role),
                       eq_dtype_name(a->tensor.dtype), a->tensor.ndim, eq_role_name(b->role),
                       eq_dtype_name(b->tensor.dtype), b->tensor.ndim);
    return EQ_OK;
}

/* Sizes along a split dimension: every shard of one group rank must have the same extent there
 * (the other group's ranks hold the same slice), and the offsets are the prefix sums. */
static eq_status plan_split(const eq_capture *ranks, const char *const *names, const int *at, int entry, int dim,
                            int over_dp, int group, int64_t *offsets, int64_t *total)
{
    const eq_run_meta *m0 = &ranks[0].meta;
    int other = over_dp ? m0->tp : m0->dp;
    *total = 0;
    for (int g = 0; g < group; g++) {
        int64_t extent = -1;
        for (int o = 0; o < other; o++) {
            int r = over_dp ? at[g * m0->tp + o] : at[o * m0->tp + g];
            int64_t e = ranks[r].entries[entry].tensor.shape[dim];
            if (extent >= 0 && e != extent)
                return EQ_FAIL(EQ_ERR_INPUT, "dataset %s: %s holds %lld along dim %d, another rank of %s rank %d holds "
                               "%lld", ranks[r].entries[entry].path, names[r], (long long)e, dim,
                               over_dp ? "dp" : "tp", g, (long long)extent);
            extent = e;
        }
        offsets[g] = *total;
        *total += extent;
    }
    return EQ_OK;
}

/* Copies shard s into full f at the given offsets, a contiguous last-dimension row at a time. */
static void place(eq_tensor *f, const eq_tensor *s, const int64_t *offset)
{
    int nd = s->ndim;
    size_t elem = eq_dtype_size(s->dtype);
    int64_t row = s->shape[nd - 1], rows = row > 0 ? eq_tensor_numel(s) / row : 0;
    int64_t idx[EQ_MAX_DIMS] = {0};
    for (int64_t k = 0; k < rows; k++) {
        int64_t at = 0;
        for (int d = 0; d < nd; d++) at = at * f->shape[d] + (d == nd - 1 ? offset[d] : idx[d] + offset[d]);
        memcpy((char *)f->data + (size_t)at * elem, (const char *)s->data + (size_t)(k * row) * elem, (size_t)row * elem);
        for (int d = nd - 2; d >= 0; d--) { /* next row index over dims 0 .. nd-2 */
            if (++idx[d] < s->shape[d]) break;
            idx[d] = 0;
        }
    }
}

/* A replicated shard that is not bit-identical to its group's rank-0 copy: a finding. */
static eq_status check_replica(eq_capture *out, const eq_capture_entry *have, const eq_capture_entry *want,
                               const eq_run_meta *mh, const eq_run_meta *mw, int *reported)
{
    const eq_tensor *a = &have->tensor, *b = &want->tensor;
    if (!eq_tensor_same_shape(a, b)) {
        char sa[96], sb[96];
        eq_tensor_shape_str(a, sa, sizeof sa);
        eq_tensor_shape_str(b, sb, sizeof sb);
        return EQ_FAIL(EQ_ERR_INPUT, "dataset %s: replicated, but rank %d holds %s and rank %d holds %s", have->path,
                       mh->rank, sa, mw->rank, sb);
    }
    if (*reported || memcmp(a->data, b->data, eq_tensor_bytes(a)) == 0) return EQ_OK;
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
    *reported = 1;
    const char *group = mh->dp_rank != mw->dp_rank && mh->tp_rank == mw->tp_rank   ? "dp"
                        : mh->tp_rank != mw->tp_rank && mh->dp_rank == mw->dp_rank ? "tp"
                                                                                   : "dp x tp";
    return eq_capture_add_finding(out, "%s (%s) should be replicated over %s but differs: rank %d (dp %d, tp %d) vs "
                                  "rank %d (dp %d, tp %d) at %lld of %lld elements, max |d| %.6g",
                                  have->path, eq_role_name(have->role), group, mh->rank, mh->dp_rank, mh->tp_rank,
                                  mw->rank, mw->dp_rank, mw->tp_rank, (long long)differ, (long long)n, max_abs);
}

/* Assembles entry i (present on every rank, checked) into out; at places the ranks (check_world). */
static eq_status assemble_entry(const eq_capture *ranks, const char *const *names, int n, const int *at, int i,
                                eq_capture *out)
{
    eq_status st = EQ_OK;
    const eq_run_meta *m0 = &ranks[0].meta;
    const eq_capture_entry *e0 = &ranks[0].entries[i];
    int64_t shape[EQ_MAX_DIMS], *dp_off = calloc((size_t)m0->dp, sizeof *dp_off),
                                *tp_off = calloc((size_t)m0->tp, sizeof *tp_off);
    eq_tensor full;
    int reported_dp = 0, reported_tp = 0;
    memset(&full, 0, sizeof full);
    if (dp_off == NULL || tp_off == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to assemble %s", e0->path);
        goto cleanup;
    }
    for (int d = 0; d < e0->tensor.ndim; d++) {
        shape[d] = e0->tensor.shape[d];
        for (int r = 1; r < n && d != e0->shard.dp_dim && d != e0->shard.tp_dim; r++)
            if (ranks[r].entries[i].tensor.shape[d] != shape[d]) {
                st = EQ_FAIL(EQ_ERR_INPUT, "dataset %s: %s holds %lld along dim %d, %s holds %lld, and the dim is not "
                             "split (shard attribute)", e0->path, names[r], (long long)ranks[r].entries[i].tensor.shape[d],
                             d, names[0], (long long)shape[d]);
                goto cleanup;
            }
    }
    if (e0->shard.dp_dim >= 0)
        EQ_TRY(plan_split(ranks, names, at, i, e0->shard.dp_dim, 1, m0->dp, dp_off, &shape[e0->shard.dp_dim]));
    if (e0->shard.tp_dim >= 0)
        EQ_TRY(plan_split(ranks, names, at, i, e0->shard.tp_dim, 0, m0->tp, tp_off, &shape[e0->shard.tp_dim]));
    EQ_TRY(eq_tensor_init(&full, e0->tensor.dtype, e0->tensor.ndim, shape));
    for (int r = 0; r < n; r++) {
        const eq_run_meta *m = &ranks[r].meta;
        const eq_capture_entry *e = &ranks[r].entries[i];
        /* the copy this rank's shard must equal: rank 0 of every group the tensor is replicated over */
        int dp_copy = e0->shard.dp_dim >= 0 ? m->dp_rank : 0, tp_copy = e0->shard.tp_dim >= 0 ? m->tp_rank : 0;
        int q = at[dp_copy * m0->tp + tp_copy];
        if (q != r) {
            int *reported = m->dp_rank != dp_copy ? &reported_dp : &reported_tp;
            EQ_TRY(check_replica(out, e, &ranks[q].entries[i], m, &ranks[q].meta, reported));
            continue;
        }
        int64_t offset[EQ_MAX_DIMS] = {0};
        if (e0->shard.dp_dim >= 0) offset[e0->shard.dp_dim] = dp_off[m->dp_rank];
        if (e0->shard.tp_dim >= 0) offset[e0->shard.tp_dim] = tp_off[m->tp_rank];
        place(&full, &e->tensor, offset);
    }
    if (e0->grad_scale != 1.0) {
        const int64_t count = eq_tensor_numel(&full);
        for (int64_t k = 0; k < count; k++) eq_tensor_set(&full, k, eq_tensor_get(&full, k) / e0->grad_scale);
    }
    if (strcmp(e0->path, e0->name) == 0) EQ_TRY(eq_capture_add_path(out, e0->path, e0->layer, e0->role, &full));
    else EQ_TRY(eq_capture_add(out, e0->layer, e0->name, e0->role, &full));
    out->entries[out->count - 1].gemm = e0->gemm;
    out->entries[out->count - 1].assembled_tp_dim = m0->tp > 1 ? e0->shard.tp_dim : -1;
cleanup:
    eq_tensor_free(&full);
    free(dp_off);
    free(tp_off);
    return st;
}

eq_status eq_run_assemble(const eq_capture *ranks, const char *const *names, int n, eq_capture *out)
{
    eq_status st = EQ_OK;
    int *at = NULL;
    eq_capture_init(out);
    if (n < 1) return EQ_FAIL(EQ_ERR_INPUT, "no rank files to assemble");
    EQ_TRY(check_world(ranks, names, n, &at));
    /* the same tensors in the same order on every rank (rank files are read in one order) */
    for (int r = 1; r < n; r++) {
        if (ranks[r].count != ranks[0].count) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s holds %d datasets, %s holds %d (every rank captures the same tensors)",
                         names[0], ranks[0].count, names[r], ranks[r].count);
            goto cleanup;
        }
        for (int i = 0; i < ranks[0].count; i++) {
            const eq_capture_entry *a = &ranks[0].entries[i], *b = &ranks[r].entries[i];
            if (strcmp(a->path, b->path) != 0) { /* say which file lacks what, where one does */
                if (eq_capture_find(&ranks[r], a->path) == NULL)
                    st = EQ_FAIL(EQ_ERR_INPUT, "dataset %s is in %s but not in %s (every rank captures the same "
                                 "tensors)", a->path, names[0], names[r]);
                else if (eq_capture_find(&ranks[0], b->path) == NULL)
                    st = EQ_FAIL(EQ_ERR_INPUT, "dataset %s is in %s but not in %s (every rank captures the same "
                                 "tensors)", b->path, names[r], names[0]);
                else
                    st = EQ_FAIL(EQ_ERR_INPUT, "%s and %s hold the same datasets in another order (%s vs %s)",
                                 names[0], names[r], a->path, b->path);
                goto cleanup;
            }
            EQ_TRY(check_same_kind(a, names[0], b, names[r]));
        }
    }
    out->meta = ranks[0].meta;
    out->meta.has_rank = 0;
    out->meta.rank = out->meta.dp_rank = out->meta.tp_rank = 0;
    for (int i = 0; i < ranks[0].count; i++) EQ_TRY(assemble_entry(ranks, names, n, at, i, out));
cleanup:
    free(at);
    if (st != EQ_OK) eq_capture_free(out);
    return st;
}

/* The first element of t that dtype d cannot hold exactly, or -1 (NaN and Inf it holds; a tensor
 * stored in d or coarser holds only values of d). */
static int64_t first_not_of_dtype(const eq_tensor *t, eq_dtype d)
{
    if (eq_dtype_unit_roundoff(t->dtype) >= eq_dtype_unit_roundoff(d)) return -1;
    const int64_t n = eq_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        const double v = eq_tensor_get(t, i);
        if (!isfinite(v)) continue;
        const float f = (float)v; /* out of fp32's range: Inf, not v */
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        if ((double)f != v || (d == EQ_BF16 && (bits & 0xffffu) != 0)) return i;
    }
    return -1;
}

eq_status eq_run_check_dtype(const eq_capture *run, const char *path)
{
    const eq_dtype d = run->meta.dtype;
    eq_role decides = EQ_ROLE_GRAD;
    for (int i = 0; i < run->count; i++)
        if (run->entries[i].role == EQ_ROLE_ACTIVATION) decides = EQ_ROLE_ACTIVATION;
    const eq_capture_entry *witness = NULL;
    int64_t at = -1;
    for (int i = 0; i < run->count; i++) {
        const eq_capture_entry *e = &run->entries[i];
        if (e->role != decides || eq_tensor_numel(&e->tensor) == 0) continue;
        const int64_t k = first_not_of_dtype(&e->tensor, d);
        if (k < 0) return EQ_OK;
        if (witness == NULL) witness = e, at = k;
    }
    if (witness == NULL) return EQ_OK; /* nothing it judges by a tolerance holds an element */
    return EQ_FAIL(EQ_ERR_INPUT, "%s: the run says its dtype is %s, but no %s holds %s values: %.100s is stored as %s "
                   "and element %lld is %.9g, which %s cannot hold (a dtype coarser than the data would loosen the "
                   "tolerance; declare the dtype the run computed in, or leave it out)", path, eq_dtype_name(d),
                   eq_role_name(decides), eq_dtype_name(d), witness->path, eq_dtype_name(witness->tensor.dtype),
                   (long long)at, eq_tensor_get(&witness->tensor, at), eq_dtype_name(d));
}

static int compare_strings(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The *.h5 files of a directory, sorted by name. */
static eq_status list_h5(const char *dir, char ***paths_out, int *n_out)
{
    eq_status st = EQ_OK;
    char **paths = NULL;
    int n = 0, cap = 0;
    DIR *d = opendir(dir);
    *paths_out = NULL;
    *n_out = 0;
    if (d == NULL) return EQ_FAIL(EQ_ERR_INPUT, "cannot open run directory %s: %s", dir, strerror(errno));
    for (struct dirent *ent; (ent = readdir(d)) != NULL;) {
        size_t len = strlen(ent->d_name);
        if (len < 4 || strcmp(ent->d_name + len - 3, ".h5") != 0 || ent->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(paths, (size_t)cap * sizeof *grown);
            if (grown == NULL) {
                st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to list %s", dir);
                goto cleanup;
            }
            paths = grown;
        }
        size_t size = strlen(dir) + len + 2;
        if ((paths[n] = malloc(size)) == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to list %s", dir);
            goto cleanup;
        }
        snprintf(paths[n++], size, "%s/%s", dir, ent->d_name);
    }
    if (n > 0) qsort(paths, (size_t)n, sizeof *paths, compare_strings);
    *paths_out = paths;
    *n_out = n;
    paths = NULL;
cleanup:
    closedir(d);
    if (paths != NULL)
        for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    return st;
}

/* A file read on its own (cap, consumed): full tensors, or the only rank of a world of one. */
static eq_status single_file(const char *path, eq_capture *cap, eq_capture *out)
{
    eq_status st = EQ_OK;
    if (cap->meta.has_rank && cap->meta.world_size > 1)
        st = EQ_FAIL(EQ_ERR_INPUT, "%s is rank %d's file of a run of %d ranks: compare the directory that holds all %d",
                     path, cap->meta.rank, cap->meta.world_size, cap->meta.world_size);
    else if (cap->meta.has_rank)
        st = eq_run_assemble(cap, &path, 1, out);
    else {
        *out = *cap; /* already whole: handed over */
        eq_capture_init(cap);
    }
    eq_capture_free(cap);
    return st;
}

/* Reads n files into caps (n of them), by read_many where given (one reader process for all),
 * else one by one with read. */
typedef eq_status (*dump_reader_many)(const char *const *paths, int n, eq_capture *out);
static eq_status read_files(const char *const *paths, int n, eq_dump_reader read, dump_reader_many read_many,
                            eq_capture *caps)
{
    if (read_many != NULL) return read_many(paths, n, caps);
    for (int i = 0; i < n; i++) {
        eq_status st = read(paths[i], &caps[i]);
        if (st != EQ_OK) return st;
    }
    return EQ_OK;
}

static eq_status load(const char *path, eq_dump_reader read, dump_reader_many read_many, eq_capture *out)
{
    eq_status st = EQ_OK;
    struct stat sb;
    char **paths = NULL;
    eq_capture *ranks = NULL;
    int n = 0;
    eq_capture_init(out);
    if (stat(path, &sb) != 0) {
        int err = errno;
        return err == ENOENT ? EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: no such file or directory", path)
                             : EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: %s", path, strerror(err));
    }
    if (!S_ISDIR(sb.st_mode)) {
        eq_capture one;
        st = read(path, &one);
        return st == EQ_OK ? single_file(path, &one, out) : st;
    }
    EQ_TRY(list_h5(path, &paths, &n));
    if (n == 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "run directory %s holds no .h5 files", path);
        goto cleanup;
    }
    if ((ranks = calloc((size_t)n, sizeof *ranks)) == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the %d rank files of %s", n, path);
        goto cleanup;
    }
    EQ_TRY(read_files((const char *const *)paths, n, read, read_many, ranks));
    if (n == 1) {
        st = single_file(paths[0], &ranks[0], out);
        goto cleanup;
    }
    for (int i = 0; i < n; i++)
        if (!ranks[i].meta.has_rank) {
            st = EQ_FAIL(EQ_ERR_INPUT, "run directory %s holds %d files and %s is not a rank's file (a run directory "
                         "holds one run's rank files; name one dump to compare it)", path, n, paths[i]);
            goto cleanup;
        }
    EQ_TRY(eq_run_assemble(ranks, (const char *const *)paths, n, out));
cleanup:
    for (int i = 0; i < n; i++) {
        if (ranks != NULL) eq_capture_free(&ranks[i]);
        free(paths[i]);
    }
    free(ranks);
    free(paths);
    return st;
}

eq_status eq_run_load(const char *path, eq_capture *out)
{
    return load(path, eq_dump_read_isolated, eq_dump_read_isolated_many, out);
}

eq_status eq_run_load_with(const char *path, eq_dump_reader read, eq_capture *out) { return load(path, read, NULL, out); }
