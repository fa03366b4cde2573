/* The simulated transport: every member of the group lives in this process, and each collective
 * is computed exactly as the group's algorithm orders and rounds it (reductions/fold.h).
 *
 * all_reduce     fold all members into bufs[0] (fold reads every element before writing it, so
 *                in place is safe), ring chunks placed as NCCL places them with g->nccl, then
 *                copy bufs[0] to every other member.
 * reduce_scatter member i gets chunk i of the fold of the full buffers; with
 *                count = size * count_per_member, ring chunk i is exactly elements
 *                [i * count_per_member, (i + 1) * count_per_member), the same order all_reduce
 *                gives those elements.
 * all_gather     in[i] copied to chunk i of every out[j].
 * broadcast      the root's buffer copied to every other member. */
#include <string.h>

#include "reductions/collectives.h"
#include "reductions/fold.h"

static eq_status check_group(const eq_group *g, const char *collective)
{
    if (g == NULL || g->size < 1)
        return EQ_FAIL(EQ_ERR_INTERNAL, "sim %s: group of %d members", collective, g == NULL ? 0 : g->size);
    if (g->n_local != g->size || g->first_local != 0)
        return EQ_FAIL(EQ_ERR_INTERNAL, "sim %s: %d of %d members local (first %d); sim holds all of them",
                       collective, g->n_local, g->size, g->first_local);
    if (g->algo == EQ_ALGO_MPI)
        return EQ_FAIL(EQ_ERR_USAGE, "algorithm mpi is the MPI library's own all-reduce: it runs only under --comm mpi");
    return EQ_OK;
}

static eq_status sim_all_reduce(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, eq_redop op)
{
    eq_status st = check_group(g, "all_reduce");
    if (st != EQ_OK) return st;
    st = eq_fold_nccl(g->nccl, g->algo, dt, op, g->size, (const void *const *)bufs, bufs[0], count);
    if (st != EQ_OK) return st;
    for (int m = 1; m < g->size; m++) memcpy(bufs[m], bufs[0], count * eq_dtype_size(dt));
    return EQ_OK;
}

static eq_status sim_reduce_scatter(const eq_group *g, const void *const in[], void *const out[],
                                    size_t count_per_member, eq_dtype dt, eq_redop op)
{
    eq_status st = check_group(g, "reduce_scatter");
    size_t count = (size_t)g->size * count_per_member;
    for (int m = 0; m < g->size && st == EQ_OK; m++)
        st = eq_fold_one_chunk(g->algo, dt, op, g->size, in, out[m], count, m);
    return st;
}

static eq_status sim_all_gather(const eq_group *g, const void *const in[], void *const out[],
                                size_t count_per_member, eq_dtype dt)
{
    eq_status st = check_group(g, "all_gather");
    if (st != EQ_OK) return st;
    size_t chunk_bytes = count_per_member * eq_dtype_size(dt);
    for (int dst = 0; dst < g->size; dst++) {
        for (int src = 0; src < g->size; src++) {
            char *place = (char *)out[dst] + (size_t)src * chunk_bytes;
            if (place != in[src]) memcpy(place, in[src], chunk_bytes); /* in place: already there */
        }
    }
    return EQ_OK;
}

static eq_status sim_broadcast(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, int root)
{
    eq_status st = check_group(g, "broadcast");
    if (st != EQ_OK) return st;
    if (root < 0 || root >= g->size)
        return EQ_FAIL(EQ_ERR_INTERNAL, "sim broadcast: root %d outside a group of %d", root, g->size);
    for (int m = 0; m < g->size; m++)
        if (m != root) memcpy(bufs[m], bufs[root], count * eq_dtype_size(dt));
    return EQ_OK;
}

const eq_transport eq_transport_sim = {
    .name = "sim",
    .all_reduce = sim_all_reduce,
    .reduce_scatter = sim_reduce_scatter,
    .all_gather = sim_all_gather,
    .broadcast = sim_broadcast,
};
