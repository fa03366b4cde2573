/* --comm nccl: the NCCL world over an MPI world (world.h), or the error of a build without it. */
#include "reductions/world.h"

#include "equiv_config.h"

#if EQUIV_HAVE_NCCL

#include <mpi.h>

#include "reductions/nccl_transport.h"

static void release_nccl(void *collectives)
{
    eq_nccl_world *nw = collectives;
    eq_nccl_world_free(&nw);
}

eq_status eq_world_start_nccl(eq_world *w, eq_algo algo)
{
    eq_nccl_bootstrap boot;
    eq_nccl_world *nw = NULL;
    eq_status st = eq_nccl_bootstrap_from_mpi(*(MPI_Comm *)w->world_comm, &boot);
    if (st != EQ_OK) return st;
    if (w->local_rank >= 0) boot.local_rank = w->local_rank; /* the launcher's word wins */
    st = eq_nccl_world_init(&boot, w->layout.dp, w->layout.tp, algo, &nw);
    if (st != EQ_OK) return st;
    w->collectives = nw;
    w->release_collectives = release_nccl;
    w->collective_tp = eq_nccl_group(nw, EQ_NCCL_TP);
    w->collective_dp = eq_nccl_group(nw, EQ_NCCL_DP);
    w->has_collective_groups = 1;
    w->transport = &eq_transport_nccl;
    return EQ_OK;
}

#else

eq_status eq_world_start_nccl(eq_world *w, eq_algo algo)
{
    (void)w;
    (void)algo;
    return EQ_FAIL(EQ_ERR_USAGE, "--comm nccl: this equiv was built without NCCL (it needs the cuda, nccl and mpi "
                   "features: nvcc, libnccl and libopenmpi-dev)");
}

#endif
