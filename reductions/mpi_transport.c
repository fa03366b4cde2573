/* The MPI transport (reductions/mpi_transport.h): every collective of reductions/collectives.h with
 * one member per process.
 *
 * ring (all_reduce, reduce_scatter)   NCCL's ring over the group's ranks 0..n-1 (see fold.c,
 *     fold_block): reduce-scatter in n-1 steps, where at step s rank r sends its partial of chunk
 *     r-1-s to rank r+1 and adds its own part to chunk r-2-s received from rank r-1; chunk c thus
 *     starts at rank c+1 and rank c adds last. all_reduce then passes each finished chunk round the
 *     ring (all-gather, n-1 steps). all_reduce does this on each loop of each channel of NCCL's
 *     placement (reductions/nccl_layout.h, the default channels and protocol), with its chunks;
 *     reduce_scatter on the members' blocks (eq_fold_chunk_bounds).
 * seq     a chain: rank 0 sends its input to rank 1, rank k adds its own and sends on; rank n-1
 *         holds the result.
 * fp32acc the same chain with the partial in fp32 (fp64 stays fp64) and one rounding to the wire
 *         dtype at rank n-1.
 * tree    rank i adds its left child's subtree value (2i+1) then its right child's (2i+2) to its
 *         own input and sends the result to its parent (i-1)/2; rank 0 holds the result.
 * mpi     MPI_Allreduce / MPI_Reduce_scatter_block with MPI_SUM (fp32, fp64) or the bf16 operation.
 * For the reduction algorithms other than ring the result is then broadcast (all_reduce) or
 * scattered (reduce_scatter) from the rank holding it: copies, no arithmetic. AVG pre-multiplies
 * each rank's input by dt(1/n) first (eq_fold_premultiply, as fold does). all_gather and broadcast
 * are MPI_Allgather and MPI_Bcast: copies. */
#include "reductions/mpi_transport.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "reductions/fold.h"
#include "reductions/mpi_watch.h"

static int world_rank(void)
{
    int initialized = 0, finalized = 0, rank = -1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

eq_status eq_mpi_check(int rc, const char *what, const char *file, int line)
{
    if (rc == MPI_SUCCESS) return EQ_OK;
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", rc);
    return eq_fail(EQ_ERR_BACKEND, file, line, "rank %d: %s failed: %s", world_rank(), what, text);
}

/* ---- The bf16 operation of --algo mpi. ---- */

static MPI_Op bf16_sum = MPI_OP_NULL;

/* inout[i] = bf16(in[i] + inout[i]): one rounding per add, as fold's add_rows. MPI passes the
 * lower-ranked operand as `in` for a non-commutative operation. */
static void bf16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    eq_fold_add(EQ_BF16, inout, in, (size_t)*len);
}

static int transport_users; /* worlds using the transport: init and free are counted */

eq_status eq_mpi_transport_init(void)
{
    if (transport_users++ > 0) return EQ_OK;
    eq_status st = EQ_MPI_CHECK(MPI_Op_create(bf16_sum_fn, 0 /* non-commutative: keep rank order */, &bf16_sum),
                                "MPI_Op_create (bf16 sum)");
    return st;
}

void eq_mpi_transport_free(void)
{
    if (transport_users == 0 || --transport_users > 0) return;
    if (bf16_sum != MPI_OP_NULL) MPI_Op_free(&bf16_sum);
    bf16_sum = MPI_OP_NULL;
}

/* ---- Point-to-point building blocks. ---- */

enum { TAG_RING = 7001, TAG_CHAIN, TAG_TREE };

typedef struct {
    MPI_Comm comm;
    int rank, size;
    const char *collective;
} mpi_group;

static eq_status group_open(const eq_group *g, const char *collective, mpi_group *m)
{
    if (g == NULL || g->comm == NULL || g->size < 1)
        return EQ_FAIL(EQ_ERR_INTERNAL, "mpi %s: a group without a communicator", collective);
    if (g->n_local != 1)
        return EQ_FAIL(EQ_ERR_INTERNAL, "mpi %s: %d members in this process; the mpi transport holds one", collective,
                       g->n_local);
    if ((int)g->algo < 0 || (int)g->algo > EQ_ALGO_MPI)
        return EQ_FAIL(EQ_ERR_INTERNAL, "mpi %s: algorithm %d", collective, (int)g->algo);
    m->comm = *(const MPI_Comm *)g->comm;
    m->collective = collective;
    eq_status st = EQ_MPI_CHECK(MPI_Comm_rank(m->comm, &m->rank), "MPI_Comm_rank");
    if (st == EQ_OK) st = EQ_MPI_CHECK(MPI_Comm_size(m->comm, &m->size), "MPI_Comm_size");
    if (st != EQ_OK) return st;
    if (m->size != g->size || m->rank != g->first_local)
        return EQ_FAIL(EQ_ERR_INTERNAL, "rank %d: mpi %s: the communicator has rank %d of %d, the group says %d of %d",
                       world_rank(), collective, m->rank, m->size, g->first_local, g->size);
    eq_mpi_watch_begin(collective);
    return EQ_OK;
}

static eq_status group_close(eq_status st)
{
    eq_mpi_watch_end();
    return st;
}

static eq_status check_bytes(const mpi_group *m, size_t count, eq_dtype dt)
{
    if (count > (size_t)INT_MAX / eq_dtype_size(dt))
        return EQ_FAIL(EQ_ERR_USAGE, "rank %d: mpi %s of %zu elements: more than MPI's int count of bytes",
                       world_rank(), m->collective, count);
    return EQ_OK;
}

/* "all_reduce: MPI_Sendrecv": the collective and the MPI call, for an error message. */
static const char *call_name(const mpi_group *m, const char *call)
{
    static _Thread_local char name[96];
    snprintf(name, sizeof name, "%s: %s", m->collective, call);
    return name;
}

static void *element(void *buf, size_t i, eq_dtype dt) { return (char *)buf + i * eq_dtype_size(dt); }

static eq_status send_recv(const mpi_group *m, const void *send, size_t send_n, int to, void *recv, size_t recv_n,
                           int from, int tag, eq_dtype dt)
{
    return EQ_MPI_CHECK(MPI_Sendrecv(send, (int)(send_n * eq_dtype_size(dt)), MPI_BYTE, to, tag, recv,
                                     (int)(recv_n * eq_dtype_size(dt)), MPI_BYTE, from, tag, m->comm,
                                     MPI_STATUS_IGNORE),
                        call_name(m, "MPI_Sendrecv"));
}

static eq_status send_to(const mpi_group *m, const void *buf, size_t n, int to, int tag, eq_dtype dt)
{
    return EQ_MPI_CHECK(MPI_Send(buf, (int)(n * eq_dtype_size(dt)), MPI_BYTE, to, tag, m->comm),
                        call_name(m, "MPI_Send"));
}

static eq_status recv_from(const mpi_group *m, void *buf, size_t n, int from, int tag, eq_dtype dt)
{
    return EQ_MPI_CHECK(MPI_Recv(buf, (int)(n * eq_dtype_size(dt)), MPI_BYTE, from, tag, m->comm, MPI_STATUS_IGNORE),
                        call_name(m, "MPI_Recv"));
}

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* Chunk c of `count` elements over n ranks: chunks of chunk_count (runRing's loop, the last ones
 * shorter or empty), or with chunk_count 0 the members' blocks of eq_fold_chunk_bounds. */
static void ring_chunk(size_t count, int n, size_t chunk_count, int c, size_t *begin, size_t *len)
{
    if (chunk_count == 0) {
        eq_fold_chunk_bounds(count, n, c, begin, len);
        return;
    }
    size_t first = (size_t)c * chunk_count;
    *begin = first < count ? first : count;
    *len = first < count ? (count - first < chunk_count ? count - first : chunk_count) : 0;
}

/* The ring's reduce-scatter phase on buf (count elements, this rank's input, pre-multiplied for
 * AVG; chunks as ring_chunk): afterwards chunk `rank` of buf holds the reduction of that chunk.
 * tmp holds a chunk. */
static eq_status ring_reduce_scatter(const mpi_group *m, void *buf, void *tmp, size_t count, size_t chunk_count,
                                     eq_dtype dt)
{
    eq_status st = EQ_OK;
    const int n = m->size, next = mod(m->rank + 1, n), prev = mod(m->rank - 1, n);
    for (int s = 0; s < n - 1 && st == EQ_OK; s++) {
        size_t send_begin, send_len, recv_begin, recv_len;
        ring_chunk(count, n, chunk_count, mod(m->rank - 1 - s, n), &send_begin, &send_len);
        ring_chunk(count, n, chunk_count, mod(m->rank - 2 - s, n), &recv_begin, &recv_len);
        st = send_recv(m, element(buf, send_begin, dt), send_len, next, tmp, recv_len, prev, TAG_RING, dt);
        /* the partial so far plus this rank's own part: fold's add_rows(acc = partial, x = own) */
        if (st == EQ_OK) {
            eq_fold_add(dt, tmp, element(buf, recv_begin, dt), recv_len);
            memcpy(element(buf, recv_begin, dt), tmp, recv_len * eq_dtype_size(dt));
        }
    }
    return st;
}

/* The ring's all-gather phase: each rank's finished chunk passed round to every other rank. */
static eq_status ring_all_gather(const mpi_group *m, void *buf, size_t count, size_t chunk_count, eq_dtype dt)
{
    eq_status st = EQ_OK;
    const int n = m->size, next = mod(m->rank + 1, n), prev = mod(m->rank - 1, n);
    for (int s = 0; s < n - 1 && st == EQ_OK; s++) {
        size_t send_begin, send_len, recv_begin, recv_len;
        ring_chunk(count, n, chunk_count, mod(m->rank - s, n), &send_begin, &send_len);
        ring_chunk(count, n, chunk_count, mod(m->rank - 1 - s, n), &recv_begin, &recv_len);
        st = send_recv(m, element(buf, send_begin, dt), send_len, next, element(buf, recv_begin, dt), recv_len, prev,
                       TAG_RING, dt);
    }
    return st;
}

/* seq and fp32acc: the chain 0 -> 1 -> ... -> n-1. buf (count, this rank's input) becomes the
 * result on rank n-1 (returned in *root). */
static eq_status chain_reduce(const mpi_group *m, eq_algo algo, void *buf, size_t count, eq_dtype dt, int *root)
{
    eq_status st = EQ_OK;
    const eq_dtype acc_dt = algo == EQ_ALGO_FP32ACC && dt != EQ_FP64 ? EQ_FP32 : dt;
    void *acc = NULL, *own = NULL;
    *root = m->size - 1;
    if (m->size == 1) return EQ_OK;
    acc = malloc(count * eq_dtype_size(acc_dt) + 1);
    own = malloc(count * eq_dtype_size(acc_dt) + 1);
    if (acc == NULL || own == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "rank %d: mpi %s: no memory for %zu elements", world_rank(), m->collective, count);
        goto cleanup;
    }
    for (size_t i = 0; i < count; i++) eq_buffer_set(acc_dt, own, (int64_t)i, eq_buffer_get(dt, buf, (int64_t)i));
    if (m->rank == 0) {
        EQ_TRY(send_to(m, own, count, 1, TAG_CHAIN, acc_dt));
    } else {
        EQ_TRY(recv_from(m, acc, count, m->rank - 1, TAG_CHAIN, acc_dt));
        eq_fold_add(acc_dt, acc, own, count);
        if (m->rank < m->size - 1) EQ_TRY(send_to(m, acc, count, m->rank + 1, TAG_CHAIN, acc_dt));
        else /* one rounding to the wire dtype (exact when acc_dt == dt) */
            for (size_t i = 0; i < count; i++) eq_buffer_set(dt, buf, (int64_t)i, eq_buffer_get(acc_dt, acc, (int64_t)i));
    }
cleanup:
    free(acc);
    free(own);
    return st;
}

/* tree: buf (count, this rank's input) becomes its subtree's value; on rank 0 the result. */
static eq_status tree_reduce(const mpi_group *m, void *buf, size_t count, eq_dtype dt)
{
    eq_status st = EQ_OK;
    void *child = malloc(count * eq_dtype_size(dt) + 1);
    if (child == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "rank %d: mpi %s: no memory", world_rank(), m->collective);
    for (int c = 2 * m->rank + 1; c <= 2 * m->rank + 2 && c < m->size; c++) { /* left child, then right */
        EQ_TRY(recv_from(m, child, count, c, TAG_TREE, dt));
        eq_fold_add(dt, buf, child, count);
    }
    if (m->rank > 0) EQ_TRY(send_to(m, buf, count, (m->rank - 1) / 2, TAG_TREE, dt));
cleanup:
    free(child);
    return st;
}

static MPI_Datatype mpi_type(eq_dtype dt)
{
    switch (dt) {
    case EQ_FP32: return MPI_FLOAT;
    case EQ_BF16: return MPI_UINT16_T;
    case EQ_FP64: return MPI_DOUBLE;
    }
    return MPI_BYTE;
}

static MPI_Op mpi_sum(eq_dtype dt) { return dt == EQ_BF16 ? bf16_sum : MPI_SUM; }

/* buf (count elements, this rank's input pre-multiplied for AVG) reduced by g->algo; the result
 * lands on the returned root rank (ring and mpi: already on every rank, root -1). */
static eq_status reduce_to_root(const mpi_group *m, eq_algo algo, void *buf, size_t count, eq_dtype dt, int *root)
{
    switch (algo) {
    case EQ_ALGO_SEQ:
    case EQ_ALGO_FP32ACC: return chain_reduce(m, algo, buf, count, dt, root);
    case EQ_ALGO_TREE: *root = 0; return tree_reduce(m, buf, count, dt);
    case EQ_ALGO_RING:
    case EQ_ALGO_MPI:
    case EQ_ALGO_TP_INVARIANT: break;
    }
    return EQ_FAIL(EQ_ERR_INTERNAL, "mpi %s: no reduce-to-root for algorithm %s", m->collective, eq_algo_name(algo));
}

static eq_status mpi_all_reduce(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, eq_redop op)
{
    mpi_group m;
    void *tmp = NULL;
    eq_status st = group_open(g, "all_reduce", &m);
    if (st != EQ_OK) return st;
    EQ_TRY(check_bytes(&m, count, dt));
    if (m.size == 1) goto cleanup; /* one member: its input unchanged, SUM and AVG alike (as fold) */
    if (op == EQ_REDOP_AVG) eq_fold_premultiply(dt, m.size, bufs[0], count);
    if (g->algo == EQ_ALGO_MPI) {
        EQ_TRY(EQ_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bufs[0], (int)count, mpi_type(dt), mpi_sum(dt), m.comm),
                            call_name(&m, "MPI_Allreduce")));
    } else if (g->algo == EQ_ALGO_RING) {
        eq_nccl_loop loop = {0};
        for (size_t at = 0; at < count; at += loop.len) { /* each loop of each channel, as NCCL's runRing */
            eq_nccl_ring_loop(g->nccl, eq_dtype_size(dt), m.size, count, at, &loop);
            free(tmp);
            tmp = malloc(loop.chunk_count * eq_dtype_size(dt) + 1);
            if (tmp == NULL) {
                st = EQ_FAIL(EQ_ERR_NOMEM, "rank %d: mpi all_reduce: no memory for a chunk", world_rank());
                goto cleanup;
            }
            void *part = element(bufs[0], loop.begin, dt);
            EQ_TRY(ring_reduce_scatter(&m, part, tmp, loop.len, loop.chunk_count, dt));
            EQ_TRY(ring_all_gather(&m, part, loop.len, loop.chunk_count, dt));
        }
    } else {
        int root = 0;
        EQ_TRY(reduce_to_root(&m, g->algo, bufs[0], count, dt, &root));
        EQ_TRY(EQ_MPI_CHECK(MPI_Bcast(bufs[0], (int)(count * eq_dtype_size(dt)), MPI_BYTE, root, m.comm), call_name(&m, "MPI_Bcast")));
    }
cleanup:
    free(tmp);
    return group_close(st);
}

static eq_status mpi_reduce_scatter(const eq_group *g, const void *const in[], void *const out[],
                                    size_t count_per_member, eq_dtype dt, eq_redop op)
{
    mpi_group m;
    void *work = NULL, *tmp = NULL;
    eq_status st = group_open(g, "reduce_scatter", &m);
    if (st != EQ_OK) return st;
    const size_t count = (size_t)m.size * count_per_member, chunk_bytes = count_per_member * eq_dtype_size(dt);
    EQ_TRY(check_bytes(&m, count, dt));
    work = malloc(count * eq_dtype_size(dt) + 1);
    tmp = malloc(chunk_bytes + 1);
    if (work == NULL || tmp == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "rank %d: mpi reduce_scatter: no memory for %zu elements", world_rank(), count);
        goto cleanup;
    }
    memcpy(work, in[0], count * eq_dtype_size(dt));
    if (m.size > 1 && op == EQ_REDOP_AVG) eq_fold_premultiply(dt, m.size, work, count);
    if (m.size == 1) {
        memcpy(out[0], work, chunk_bytes);
    } else if (g->algo == EQ_ALGO_MPI) {
        EQ_TRY(EQ_MPI_CHECK(MPI_Reduce_scatter_block(work, out[0], (int)count_per_member, mpi_type(dt), mpi_sum(dt),
                                                     m.comm),
                            call_name(&m, "MPI_Reduce_scatter_block")));
    } else if (g->algo == EQ_ALGO_RING) {
        /* with count = size * count_per_member, ring chunk r is exactly member r's part */
        EQ_TRY(ring_reduce_scatter(&m, work, tmp, count, 0, dt));
        memcpy(out[0], element(work, (size_t)m.rank * count_per_member, dt), chunk_bytes);
    } else {
        int root = 0;
        EQ_TRY(reduce_to_root(&m, g->algo, work, count, dt, &root));
        EQ_TRY(EQ_MPI_CHECK(MPI_Scatter(work, (int)chunk_bytes, MPI_BYTE, out[0], (int)chunk_bytes, MPI_BYTE, root,
                                        m.comm),
                            call_name(&m, "MPI_Scatter")));
    }
cleanup:
    free(work);
    free(tmp);
    return group_close(st);
}

static eq_status mpi_all_gather(const eq_group *g, const void *const in[], void *const out[], size_t count_per_member,
                                eq_dtype dt)
{
    mpi_group m;
    eq_status st = group_open(g, "all_gather", &m);
    if (st != EQ_OK) return st;
    const size_t chunk_bytes = count_per_member * eq_dtype_size(dt);
    EQ_TRY(check_bytes(&m, (size_t)m.size * count_per_member, dt));
    const void *send = in[0];
    if (send == element(out[0], (size_t)m.rank * count_per_member, dt)) send = MPI_IN_PLACE; /* already there */
    EQ_TRY(EQ_MPI_CHECK(MPI_Allgather(send, (int)chunk_bytes, MPI_BYTE, out[0], (int)chunk_bytes, MPI_BYTE, m.comm),
                        call_name(&m, "MPI_Allgather")));
cleanup:
    return group_close(st);
}

static eq_status mpi_broadcast(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, int root)
{
    mpi_group m;
    eq_status st = group_open(g, "broadcast", &m);
    if (st != EQ_OK) return st;
    EQ_TRY(check_bytes(&m, count, dt));
    if (root < 0 || root >= m.size) {
        st = EQ_FAIL(EQ_ERR_INTERNAL, "rank %d: mpi broadcast: root %d outside a group of %d", world_rank(), root, m.size);
        goto cleanup;
    }
    EQ_TRY(EQ_MPI_CHECK(MPI_Bcast(bufs[0], (int)(count * eq_dtype_size(dt)), MPI_BYTE, root, m.comm), call_name(&m, "MPI_Bcast")));
cleanup:
    return group_close(st);
}

const eq_transport eq_transport_mpi = {
    .name = "mpi",
    .all_reduce = mpi_all_reduce,
    .reduce_scatter = mpi_reduce_scatter,
    .all_gather = mpi_all_gather,
    .broadcast = mpi_broadcast,
};
