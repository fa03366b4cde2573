/* The device fold and the sim-cuda transport (reductions/fold_cuda.h). */
#include "reductions/fold_cuda.h"

#include <pthread.h>
#include <string.h>

#include "harness/base/bf16.h"
#include "reductions/cuda_device.h"
#include "reductions/fold.h"
#include "reductions/fold_cuda_kernel.h"

/* fold_cuda.cu mirrors these values. */
_Static_assert(EQ_ALGO_RING == 0 && EQ_ALGO_TREE == 1 && EQ_ALGO_FP32ACC == 2 && EQ_ALGO_SEQ == 3, "eq_algo");
_Static_assert(EQ_FP32 == 0 && EQ_BF16 == 1 && EQ_FP64 == 2, "eq_dtype");
_Static_assert(EQ_REDOP_SUM == 0 && EQ_REDOP_AVG == 1, "eq_redop");

static struct {
    eq_cuda_buffer rows; /* [n, count] the members' inputs */
    eq_cuda_buffer out;  /* [count] the result */
} fold_dev;
/* One collective at a time owns fold_dev (the sim ranks may run in threads). */
static pthread_mutex_t fold_lock = PTHREAD_MUTEX_INITIALIZER;

void eq_fold_cuda_release(void)
{
    pthread_mutex_lock(&fold_lock);
    eq_cuda_buffer_free(&fold_dev.rows);
    eq_cuda_buffer_free(&fold_dev.out);
    pthread_mutex_unlock(&fold_lock);
}

/* dt(1/n) as reductions/fold.c's avg_scale (NCCL's ncclAvg scalar). */
static double avg_scale(eq_dtype dt, int n)
{
    double inverse = 1.0 / n;
    if (dt == EQ_BF16) return eq_round_bf16((float)inverse);
    if (dt == EQ_FP32) return (float)inverse;
    return inverse;
}

/* Launches the fold of [0, count) in pieces of one ring chunk each: where NCCL's all-reduce puts
 * them (`nccl`), or the n rank blocks of a reduce_scatter (nccl NULL). Other algorithms: one piece. */
static cudaError_t launch_pieces(eq_algo algo, eq_dtype dt, eq_redop op, int n, size_t count,
                                 const eq_nccl_config *nccl)
{
    cudaError_t err = cudaSuccess;
    const double scale = avg_scale(dt, n);
    if (algo != EQ_ALGO_RING)
        return eq_fold_cuda_launch((int)algo, (int)dt, (int)op, n, fold_dev.rows.ptr, count, 0, count, 0,
                                   fold_dev.out.ptr, scale, eq_cuda_stream());
    if (nccl == NULL) {
        for (int c = 0; c < n && err == cudaSuccess; c++) {
            size_t begin, len;
            eq_fold_chunk_bounds(count, n, c, &begin, &len);
            err = eq_fold_cuda_launch((int)algo, (int)dt, (int)op, n, fold_dev.rows.ptr, count, begin, len, c,
                                      fold_dev.out.ptr, scale, eq_cuda_stream());
        }
        return err;
    }
    eq_nccl_piece piece = {0};
    for (size_t at = 0; at < count && err == cudaSuccess; at += piece.len) {
        eq_nccl_ring_piece(*nccl, eq_dtype_size(dt), n, count, at, &piece);
        err = eq_fold_cuda_launch((int)algo, (int)dt, (int)op, n, fold_dev.rows.ptr, count, piece.begin, piece.len,
                                  piece.chunk, fold_dev.out.ptr, scale, eq_cuda_stream());
    }
    return err;
}

/* Uploads the members, folds into fold_dev.out (device), leaves the result there. */
static eq_status fold_on_device(eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[], size_t count,
                                const eq_nccl_config *nccl)
{
    eq_status st = EQ_OK;
    const size_t elem = eq_dtype_size(dt), bytes = count * elem;
    if (n < 1 || (int)algo < 0 || (int)algo >= EQ_ALGO_COUNT || (int)dt < 0 || (int)dt >= EQ_DTYPE_COUNT ||
        (op != EQ_REDOP_SUM && op != EQ_REDOP_AVG))
        return EQ_FAIL(EQ_ERR_INTERNAL, "device fold: n=%d algo=%d dtype=%d op=%d", n, (int)algo, (int)dt, (int)op);
    EQ_TRY(eq_cuda_open(-1));
    EQ_TRY(eq_cuda_buffer_reserve(&fold_dev.rows, (size_t)n * bytes, "the members of a simulated collective"));
    EQ_TRY(eq_cuda_buffer_reserve(&fold_dev.out, bytes, "the result of a simulated collective"));
    if (count == 0) return EQ_OK;
    const double t0 = eq_cuda_timing() ? eq_cuda_now() : 0;
    for (int k = 0; k < n; k++)
        EQ_CUDA_TRY(cudaMemcpyAsync((char *)fold_dev.rows.ptr + (size_t)k * bytes, in[k], bytes, cudaMemcpyHostToDevice,
                                    eq_cuda_stream()));
    if (eq_cuda_timing()) { /* the uploads apart from the fold (reductions/cuda_device.h) */
        EQ_CUDA_TRY(cudaStreamSynchronize(eq_cuda_stream()));
        eq_cuda_time_add(EQ_CUDA_T_UPLOAD, eq_cuda_now() - t0, (size_t)n * bytes);
    }
    if (n == 1) { /* one member: its input unchanged, for SUM and AVG alike (as fold.c) */
        EQ_CUDA_TRY(cudaMemcpyAsync(fold_dev.out.ptr, fold_dev.rows.ptr, bytes, cudaMemcpyDeviceToDevice,
                                    eq_cuda_stream()));
    } else {
        EQ_CUDA_TRY(launch_pieces(algo, dt, op, n, count, nccl));
    }
    EQ_TRY(eq_cuda_sync("the device fold"));
cleanup:
    return st;
}

static eq_status fold_locked(eq_nccl_config nccl, eq_algo algo, eq_dtype dt, eq_redop op, int n,
                             const void *const in[], void *out, size_t count)
{
    eq_status st = EQ_OK;
    if (nccl.channels < 0 || nccl.channels > EQ_NCCL_MAX_CHANNELS || (int)nccl.proto < 0 ||
        (int)nccl.proto >= EQ_NCCL_PROTO_COUNT)
        return EQ_FAIL(EQ_ERR_INTERNAL, "device fold: %d NCCL channels, protocol %d", nccl.channels, (int)nccl.proto);
    EQ_TRY(fold_on_device(algo, dt, op, n, in, count, &nccl));
    EQ_TRY(eq_cuda_download_rows(out, fold_dev.out.ptr, count * eq_dtype_size(dt), 1, count * eq_dtype_size(dt)));
cleanup:
    return st;
}

eq_status eq_fold_cuda(eq_algo algo, eq_dtype dt, eq_redop op, int n, const void *const in[], void *out,
                       size_t count)
{
    return eq_fold_cuda_nccl(EQ_NCCL_CONFIG_DEFAULT, algo, dt, op, n, in, out, count);
}

eq_status eq_fold_cuda_nccl(eq_nccl_config nccl, eq_algo algo, eq_dtype dt, eq_redop op, int n,
                            const void *const in[], void *out, size_t count)
{
    pthread_mutex_lock(&fold_lock);
    eq_status st = fold_locked(nccl, algo, dt, op, n, in, out, count);
    pthread_mutex_unlock(&fold_lock);
    return st;
}

static eq_status check_group(const eq_group *g, const char *collective)
{
    if (g == NULL || g->size < 1 || g->n_local != g->size || g->first_local != 0)
        return EQ_FAIL(EQ_ERR_INTERNAL, "sim-cuda %s: a group must hold all of its members in this process",
                       collective);
    return EQ_OK;
}

static eq_status cuda_all_reduce(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, eq_redop op)
{
    eq_status st = EQ_OK;
    EQ_TRY(check_group(g, "all_reduce"));
    EQ_TRY(eq_fold_cuda_nccl(g->nccl, g->algo, dt, op, g->size, (const void *const *)bufs, bufs[0], count));
    for (int m = 1; m < g->size; m++) memcpy(bufs[m], bufs[0], count * eq_dtype_size(dt));
cleanup:
    return st;
}

/* Member m gets block m of the fold of the full buffers, each block folded as ring chunk m: what
 * eq_fold_one_chunk gives each member. */
static eq_status cuda_reduce_scatter(const eq_group *g, const void *const in[], void *const out[],
                                     size_t count_per_member, eq_dtype dt, eq_redop op)
{
    eq_status st = EQ_OK;
    const size_t chunk_bytes = count_per_member * eq_dtype_size(dt);
    EQ_TRY(check_group(g, "reduce_scatter"));
    pthread_mutex_lock(&fold_lock);
    st = fold_on_device(g->algo, dt, op, g->size, in, (size_t)g->size * count_per_member, NULL);
    for (int m = 0; m < g->size && st == EQ_OK; m++)
        st = eq_cuda_download_rows(out[m], (const char *)fold_dev.out.ptr + (size_t)m * chunk_bytes, chunk_bytes, 1,
                                   chunk_bytes);
    pthread_mutex_unlock(&fold_lock);
cleanup:
    return st;
}

static eq_status cuda_all_gather(const eq_group *g, const void *const in[], void *const out[],
                                 size_t count_per_member, eq_dtype dt)
{
    return eq_transport_sim.all_gather(g, in, out, count_per_member, dt);
}

static eq_status cuda_broadcast(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, int root)
{
    return eq_transport_sim.broadcast(g, bufs, count, dt, root);
}

const eq_transport eq_transport_sim_cuda = {
    .name = "sim-cuda",
    .all_reduce = cuda_all_reduce,
    .reduce_scatter = cuda_reduce_scatter,
    .all_gather = cuda_all_gather,
    .broadcast = cuda_broadcast,
};
