/* The NCCL transport: bootstrap over MPI, dp and tp communicators by ncclCommSplit, every
 * collective with a bounded wait (reductions/nccl_transport.h). */
#include "reductions/nccl_transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* nccl.h declares ncclGroupStart() and ncclGroupEnd() without (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "harness/base/clock.h"
#include "reductions/cuda_device.h"
#include "reductions/fold.h"

#define DEFAULT_TIMEOUT_S 300.0
#define POLL_NS 50000L /* 50 us between polls of a pending operation */

typedef struct {
    ncclComm_t comm; /* NULL once destroyed or aborted */
    int size, rank;
    const char *name;
    eq_nccl_world *world;
} axis_comm;

struct eq_nccl_world {
    int world_rank, world_size;
    eq_algo algo;
    double timeout_s;
    axis_comm axes[3]; /* eq_nccl_axis order */
    eq_cuda_buffer send, recv;
};

static const char *const axis_names[3] = {"world", "dp", "tp"};

eq_status eq_collective_timeout_s(double *out)
{
    const char *v = getenv("EQUIV_COLLECTIVE_TIMEOUT_S");
    *out = DEFAULT_TIMEOUT_S;
    if (v == NULL || v[0] == '\0') return EQ_OK;
    char *end = NULL;
    double t = strtod(v, &end);
    if (*end != '\0' || !(t > 0))
        return EQ_FAIL(EQ_ERR_USAGE, "EQUIV_COLLECTIVE_TIMEOUT_S=%s: not a positive number of seconds", v);
    *out = t;
    return EQ_OK;
}

/* Every communicator of the world aborted: after one failed, the others may wait on it forever. */
static void abort_world(eq_nccl_world *w)
{
    for (int a = 2; a >= 0; a--)
        if (w->axes[a].comm != NULL) {
            ncclCommAbort(w->axes[a].comm);
            w->axes[a].comm = NULL;
        }
}

static eq_status fail_nccl(axis_comm *c, const char *what, ncclResult_t r)
{
    char detail[512];
    /* a failed ncclCommSplit leaves the child NULL: the world communicator has the detail */
    ncclComm_t from = c->comm != NULL ? c->comm : c->world->axes[EQ_NCCL_WORLD].comm;
    const char *last = ncclGetLastError(from);
    snprintf(detail, sizeof detail, "%s", last != NULL && last[0] != '\0' ? last : "no further detail");
    abort_world(c->world);
    return EQ_FAIL(EQ_ERR_BACKEND, "rank %d/%d: %s on %s (%d ranks): %s (%s); communicators aborted",
                   c->world->world_rank, c->world->world_size, what, c->name, c->size, ncclGetErrorString(r), detail);
}

/* Waits until the operation queued on c (and, with on_stream, the stream) is done, an error shows
 * on the communicator, or the timeout passes. Never returns with the operation pending. */
static eq_status wait_for(axis_comm *c, const char *what, int on_stream)
{
    const double start = eq_monotonic_seconds();
    const struct timespec pause = {0, POLL_NS};
    for (;;) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(c->comm, &async);
        if (r != ncclSuccess) return fail_nccl(c, what, r);
        if (async != ncclSuccess && async != ncclInProgress) return fail_nccl(c, what, async);
        if (async == ncclSuccess) {
            if (!on_stream) return EQ_OK;
            cudaError_t q = cudaStreamQuery(eq_cuda_stream());
            if (q == cudaSuccess) return EQ_OK;
            if (q != cudaErrorNotReady) {
                abort_world(c->world);
                return EQ_FAIL(EQ_ERR_BACKEND, "rank %d/%d: %s on %s: %s (%s); communicators aborted",
                               c->world->world_rank, c->world->world_size, what, c->name, cudaGetErrorString(q),
                               cudaGetErrorName(q));
            }
        }
        if (eq_monotonic_seconds() - start > c->world->timeout_s) {
            abort_world(c->world);
            return EQ_FAIL(EQ_ERR_BACKEND,
                           "rank %d/%d: %s on %s (%d ranks) did not complete within %.0f s: a peer rank died, hung "
                           "or never reached it (EQUIV_COLLECTIVE_TIMEOUT_S); communicators aborted",
                           c->world->world_rank, c->world->world_size, what, c->name, c->size, c->world->timeout_s);
        }
        nanosleep(&pause, NULL);
    }
}

/* An NCCL call on a non-blocking communicator: ncclInProgress is how it says "queued". */
/* A split of a non-blocking parent: the split is the parent's pending operation, and NCCL (2.23
 * on) writes the child's handle only when the parent is back to ncclSuccess (NVIDIA/nccl#1472;
 * PyTorch waits the same way); then the child's own initialisation is waited for. Polling the
 * child at once polled a NULL handle ("comm argument is NULL", seen on NCCL 2.28). */
static eq_status wait_for_split(eq_nccl_world *w, eq_nccl_axis child, const char *what)
{
    eq_status st = wait_for(&w->axes[EQ_NCCL_WORLD], what, 0);
    if (st != EQ_OK) return st;
    if (w->axes[child].comm == NULL) {
        abort_world(w);
        return EQ_FAIL(EQ_ERR_BACKEND, "rank %d/%d: %s gave no communicator; communicators aborted", w->world_rank,
                       w->world_size, what);
    }
    return wait_for(&w->axes[child], what, 0);
}

#define NCCL_TRY(c, what, call)                                             \
    do {                                                                    \
        ncclResult_t eq_nccl_r_ = (call);                                   \
        if (eq_nccl_r_ != ncclSuccess && eq_nccl_r_ != ncclInProgress) {    \
            st = fail_nccl((c), (what), eq_nccl_r_);                        \
            goto cleanup;                                                   \
        }                                                                   \
    } while (0)

eq_status eq_nccl_bootstrap_from_mpi(MPI_Comm comm, eq_nccl_bootstrap *out)
{
    MPI_Comm node;
    int local = -1;
    if (MPI_Comm_rank(comm, &out->world_rank) != MPI_SUCCESS || MPI_Comm_size(comm, &out->world_size) != MPI_SUCCESS)
        return EQ_FAIL(EQ_ERR_BACKEND, "MPI: cannot read this process's rank");
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, out->world_rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
    }
    out->local_rank = local;
    out->comm = comm;
    return EQ_OK;
}

/* NCCL_ALGO for --algo (NCCL 2.24+ syntax: a default list, then per-function lists). Only the
 * all-reduce has a tree or NVLS form; forcing Tree or NVLS on every function makes NCCL refuse
 * the all-gathers and broadcasts ("no algorithm/protocol available"), so the others stay Ring. */
static const char *nccl_algo_env(eq_algo algo)
{
    switch (algo) {
    case EQ_ALGO_RING: return "ring";
    case EQ_ALGO_TREE: return "ring;allreduce:tree";
    case EQ_ALGO_FP32ACC: return "ring;allreduce:nvls";
    case EQ_ALGO_SEQ: return NULL;
    case EQ_ALGO_MPI: return NULL; /* MPI's own all-reduce: not a NCCL algorithm */
    case EQ_ALGO_TP_INVARIANT: return NULL; /* no all-reduce over tp; sim only (commands.c) */
    }
    return NULL;
}

eq_status eq_nccl_world_init(const eq_nccl_bootstrap *b, int dp, int tp, eq_algo algo, eq_nccl_world **out)
{
    eq_status st = EQ_OK;
    eq_nccl_world *w = NULL;
    struct {
        int ok;
        ncclUniqueId id;
    } hello;
    *out = NULL;
    if (dp < 1 || tp < 1 || dp * tp != b->world_size)
        return EQ_FAIL(EQ_ERR_USAGE, "rank %d/%d: layout dp%d-tp%d needs %d ranks, the launcher started %d",
                       b->world_rank, b->world_size, dp, tp, dp * tp, b->world_size);
    const char *algo_env = nccl_algo_env(algo);
    if (algo_env == NULL)
        return EQ_FAIL(EQ_ERR_USAGE, "--algo %s has no NCCL counterpart (ring, tree or fp32acc)", eq_algo_name(algo));
    w = calloc(1, sizeof *w);
    if (w == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the NCCL world");
    w->world_rank = b->world_rank;
    w->world_size = b->world_size;
    w->algo = algo;
    EQ_TRY(eq_collective_timeout_s(&w->timeout_s));
    const int rank_of[3] = {b->world_rank, b->world_rank / tp, b->world_rank % tp}; /* world, dp_rank, tp_rank */
    const int size_of[3] = {b->world_size, dp, tp};
    for (int a = 0; a < 3; a++)
        w->axes[a] = (axis_comm){NULL, size_of[a], a == EQ_NCCL_DP ? rank_of[1] : a == EQ_NCCL_TP ? rank_of[2] : rank_of[0],
                                 axis_names[a], w};
    eq_cuda_set_rank(b->world_rank, b->world_size); /* device errors name this rank */
    setenv("NCCL_ALGO", algo_env, 0); /* read when the communicator is created; the environment wins */
    st = eq_cuda_open(b->local_rank); /* on failure, still take part in the id's broadcast below */

    /* Rank 0 makes the id and sends it to all; a failure on rank 0 is sent too, so no rank waits. */
    memset(&hello, 0, sizeof hello);
    if (b->world_rank == 0) hello.ok = st == EQ_OK && ncclGetUniqueId(&hello.id) == ncclSuccess;
    if (MPI_Bcast(&hello, (int)sizeof hello, MPI_BYTE, 0, b->comm) != MPI_SUCCESS && st == EQ_OK)
        st = EQ_FAIL(EQ_ERR_BACKEND, "rank %d/%d: MPI_Bcast of the NCCL id failed", b->world_rank, b->world_size);
    /* Every rank ready (its device open, the id here) or none starts NCCL: a rank that cannot
     * join would leave the others waiting in ncclCommInitRank until the timeout. */
    int ready = st == EQ_OK && hello.ok, all_ready = 0;
    if (MPI_Allreduce(&ready, &all_ready, 1, MPI_INT, MPI_MIN, b->comm) != MPI_SUCCESS && st == EQ_OK)
        st = EQ_FAIL(EQ_ERR_BACKEND, "rank %d/%d: MPI_Allreduce of the ranks' readiness failed", b->world_rank,
                     b->world_size);
    if (st != EQ_OK) goto cleanup;
    if (!hello.ok) {
        st = EQ_FAIL(EQ_ERR_BACKEND, "rank %d/%d: rank 0 could not create the NCCL id (ncclGetUniqueId)", b->world_rank,
                     b->world_size);
        goto cleanup;
    }
    if (!all_ready) {
        st = EQ_FAIL(EQ_ERR_BACKEND, "rank %d/%d: another rank could not open its GPU (its own error names it); NCCL "
                     "not started", b->world_rank, b->world_size);
        goto cleanup;
    }

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* every call returns at once; wait_for bounds the wait */
    NCCL_TRY(&w->axes[EQ_NCCL_WORLD], "ncclCommInitRank",
             ncclCommInitRankConfig(&w->axes[EQ_NCCL_WORLD].comm, b->world_size, hello.id, b->world_rank, &config));
    EQ_TRY(wait_for(&w->axes[EQ_NCCL_WORLD], "ncclCommInitRank", 0));
    /* dp: the ranks holding the same tp shard (color tp_rank); tp: one replica (color dp_rank). */
    NCCL_TRY(&w->axes[EQ_NCCL_DP], "ncclCommSplit (dp)",
             ncclCommSplit(w->axes[EQ_NCCL_WORLD].comm, rank_of[2], rank_of[1], &w->axes[EQ_NCCL_DP].comm, &config));
    EQ_TRY(wait_for_split(w, EQ_NCCL_DP, "ncclCommSplit (dp)"));
    NCCL_TRY(&w->axes[EQ_NCCL_TP], "ncclCommSplit (tp)",
             ncclCommSplit(w->axes[EQ_NCCL_WORLD].comm, rank_of[1], rank_of[2], &w->axes[EQ_NCCL_TP].comm, &config));
    EQ_TRY(wait_for_split(w, EQ_NCCL_TP, "ncclCommSplit (tp)"));
    *out = w;
    w = NULL;
cleanup:
    if (w != NULL) eq_nccl_world_free(&w);
    return st;
}

eq_group eq_nccl_group(const eq_nccl_world *w, eq_nccl_axis axis)
{
    const axis_comm *c = &w->axes[axis];
    eq_group g = {&eq_transport_nccl, w->algo, c->size, c->rank, 1, (void *)c, EQ_NCCL_CONFIG_DEFAULT};
    return g;
}

int eq_nccl_world_rank(const eq_nccl_world *w) { return w->world_rank; }

/* Finalize (flushes pending work), waiting until `deadline` at most, then destroy; a communicator
 * that cannot finish is aborted. Records no error: this also runs on the error path. */
static void close_comm(axis_comm *c, double deadline)
{
    const struct timespec pause = {0, POLL_NS};
    ncclResult_t r = ncclCommFinalize(c->comm), async = ncclInProgress;
    while (r == ncclSuccess || r == ncclInProgress) {
        if (ncclCommGetAsyncError(c->comm, &async) != ncclSuccess || async != ncclInProgress) break;
        if (eq_monotonic_seconds() > deadline) break;
        nanosleep(&pause, NULL);
    }
    if ((r == ncclSuccess || r == ncclInProgress) && async == ncclSuccess) ncclCommDestroy(c->comm);
    else ncclCommAbort(c->comm);
    c->comm = NULL;
}

/* One deadline for the three communicators: with a dead peer, shutdown takes one timeout, not three. */
void eq_nccl_world_free(eq_nccl_world **wp)
{
    eq_nccl_world *w = *wp;
    if (w == NULL) return;
    const double deadline = eq_monotonic_seconds() + w->timeout_s;
    for (int a = 2; a >= 0; a--)
        if (w->axes[a].comm != NULL) close_comm(&w->axes[a], deadline);
    eq_cuda_buffer_free(&w->send);
    eq_cuda_buffer_free(&w->recv);
    free(w);
    *wp = NULL;
}

/* ---- the transport: one local member, bufs[0] ---- */

static ncclDataType_t nccl_type(eq_dtype dt)
{
    return dt == EQ_BF16 ? ncclBfloat16 : dt == EQ_FP64 ? ncclFloat64 : ncclFloat32;
}

static ncclRedOp_t nccl_op(eq_redop op) { return op == EQ_REDOP_AVG ? ncclAvg : ncclSum; }

static eq_status comm_of(const eq_group *g, const char *collective, axis_comm **out)
{
    axis_comm *c = g != NULL ? g->comm : NULL;
    if (c == NULL || g->n_local != 1 || c->comm == NULL)
        return EQ_FAIL(EQ_ERR_INTERNAL, "nccl %s: not a live NCCL group with one local member", collective);
    *out = c;
    return EQ_OK;
}

/* Device buffers of the world: send (in) and recv (out). */
static eq_status reserve(eq_nccl_world *w, size_t send_bytes, size_t recv_bytes)
{
    eq_status st = EQ_OK;
    EQ_TRY(eq_cuda_buffer_reserve(&w->send, send_bytes, "an NCCL send buffer"));
    EQ_TRY(eq_cuda_buffer_reserve(&w->recv, recv_bytes, "an NCCL receive buffer"));
cleanup:
    return st;
}

static eq_status nccl_all_reduce(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, eq_redop op)
{
    eq_status st = EQ_OK;
    axis_comm *c = NULL;
    const size_t bytes = count * eq_dtype_size(dt);
    EQ_TRY(comm_of(g, "all_reduce", &c));
    EQ_TRY(reserve(c->world, bytes, 0));
    /* NVLS has no ncclAvg: each rank multiplies its input by dt(1/n) first, as NCCL's own AVG
     * (a pre-multiplied sum) and the sim fold do, and NVLS sums. */
    if (op == EQ_REDOP_AVG && c->world->algo == EQ_ALGO_FP32ACC) {
        eq_fold_premultiply(dt, c->size, bufs[0], count);
        op = EQ_REDOP_SUM;
    }
    EQ_TRY(eq_cuda_upload_rows(c->world->send.ptr, bufs[0], bytes, 1, bytes));
    NCCL_TRY(c, "all_reduce", ncclAllReduce(c->world->send.ptr, c->world->send.ptr, count, nccl_type(dt), nccl_op(op),
                                            c->comm, eq_cuda_stream()));
    EQ_TRY(wait_for(c, "all_reduce", 1));
    EQ_TRY(eq_cuda_download_rows(bufs[0], c->world->send.ptr, bytes, 1, bytes));
cleanup:
    return st;
}

static eq_status nccl_reduce_scatter(const eq_group *g, const void *const in[], void *const out[],
                                     size_t count_per_member, eq_dtype dt, eq_redop op)
{
    eq_status st = EQ_OK;
    axis_comm *c = NULL;
    const size_t chunk = count_per_member * eq_dtype_size(dt);
    EQ_TRY(comm_of(g, "reduce_scatter", &c));
    EQ_TRY(reserve(c->world, chunk * (size_t)c->size, chunk));
    EQ_TRY(eq_cuda_upload_rows(c->world->send.ptr, in[0], chunk * (size_t)c->size, 1, chunk * (size_t)c->size));
    NCCL_TRY(c, "reduce_scatter", ncclReduceScatter(c->world->send.ptr, c->world->recv.ptr, count_per_member,
                                                    nccl_type(dt), nccl_op(op), c->comm, eq_cuda_stream()));
    EQ_TRY(wait_for(c, "reduce_scatter", 1));
    EQ_TRY(eq_cuda_download_rows(out[0], c->world->recv.ptr, chunk, 1, chunk));
cleanup:
    return st;
}

static eq_status nccl_all_gather(const eq_group *g, const void *const in[], void *const out[],
                                 size_t count_per_member, eq_dtype dt)
{
    eq_status st = EQ_OK;
    axis_comm *c = NULL;
    const size_t chunk = count_per_member * eq_dtype_size(dt);
    EQ_TRY(comm_of(g, "all_gather", &c));
    EQ_TRY(reserve(c->world, chunk, chunk * (size_t)c->size));
    EQ_TRY(eq_cuda_upload_rows(c->world->send.ptr, in[0], chunk, 1, chunk));
    NCCL_TRY(c, "all_gather", ncclAllGather(c->world->send.ptr, c->world->recv.ptr, count_per_member, nccl_type(dt),
                                            c->comm, eq_cuda_stream()));
    EQ_TRY(wait_for(c, "all_gather", 1));
    EQ_TRY(eq_cuda_download_rows(out[0], c->world->recv.ptr, chunk * (size_t)c->size, 1, chunk * (size_t)c->size));
cleanup:
    return st;
}

static eq_status nccl_broadcast(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, int root)
{
    eq_status st = EQ_OK;
    axis_comm *c = NULL;
    const size_t bytes = count * eq_dtype_size(dt);
    EQ_TRY(comm_of(g, "broadcast", &c));
    EQ_TRY(reserve(c->world, bytes, 0));
    EQ_TRY(eq_cuda_upload_rows(c->world->send.ptr, bufs[0], bytes, 1, bytes));
    NCCL_TRY(c, "broadcast", ncclBroadcast(c->world->send.ptr, c->world->send.ptr, count, nccl_type(dt), root, c->comm,
                                           eq_cuda_stream()));
    EQ_TRY(wait_for(c, "broadcast", 1));
    EQ_TRY(eq_cuda_download_rows(bufs[0], c->world->send.ptr, bytes, 1, bytes));
cleanup:
    return st;
}

const eq_transport eq_transport_nccl = {
    .name = "nccl",
    .all_reduce = nccl_all_reduce,
    .reduce_scatter = nccl_reduce_scatter,
    .all_gather = nccl_all_gather,
    .broadcast = nccl_broadcast,
};
