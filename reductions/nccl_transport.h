/* The NCCL transport (built with the cuda, nccl and mpi features): one process per GPU, every
 * collective of reductions/collectives.h on NCCL.
 *
 * Ranks. World rank r has coordinates dp_rank = r / tp, tp_rank = r % tp (the tp ranks of a
 * replica are adjacent, so they share a node, as Megatron places them). Three communicators:
 *   world  ncclCommInitRank over all ranks, its ncclUniqueId made on rank 0 and sent with MPI_Bcast;
 *   dp     ncclCommSplit(world, color = tp_rank, key = dp_rank): the ranks holding one tp shard;
 *   tp     ncclCommSplit(world, color = dp_rank, key = tp_rank): the ranks of one dp replica.
 *
 * Failures are errors, not hangs. Communicators are non-blocking (ncclConfig_t.blocking = 0):
 * every NCCL call returns at once, and equiv polls ncclCommGetAsyncError and the stream until the
 * operation completes, an error shows, or EQUIV_COLLECTIVE_TIMEOUT_S seconds pass (default 300).
 * On error or timeout every communicator of the world is aborted (ncclCommAbort) and the status
 * names this rank, the operation and NCCL's reason ("rank 3/8: all_reduce on tp (4 ranks): ...");
 * main() turns it into one line and exit 2, and mpirun/srun then end the other ranks.
 *
 * Buffers are host memory (the interface of collectives.h; one local member, bufs[0]): each
 * collective copies them to a device buffer the world owns, runs on the device, copies back.
 *
 * The algorithm: NCCL picks its own unless told; eq_nccl_world_init sets NCCL_ALGO before creating
 * the communicators, unless the environment already sets it: "ring" for ring, and for tree and
 * fp32acc the all-reduce alone on Tree or NVLS ("ring;allreduce:tree", "ring;allreduce:nvls"),
 * the only function NCCL runs on them (all-gather and broadcast stay Ring). NVLS has no ncclAvg:
 * under fp32acc an AVG all-reduce is each rank's input pre-multiplied by dt(1/n) and summed, as
 * the sim fold computes it. NVLS needs NVSwitch multicast; without it NCCL refuses and the run
 * ends with its error. seq has no NCCL counterpart (EQ_ERR_USAGE). No model reduce-scatters
 * today; NCCL's reduce-scatter is Ring whatever --algo says. */
#ifndef EQUIV_REDUCTIONS_NCCL_TRANSPORT_H
#define EQUIV_REDUCTIONS_NCCL_TRANSPORT_H

#include <mpi.h>

#include "harness/base/status.h"
#include "reductions/collectives.h"

/* What the launcher's bootstrap hands over: this process's world rank and size, its rank among
 * the processes on its node (picks the GPU), and the MPI communicator to send the NCCL id over.
 * The MPI bootstrap (rank discovery from OMPI_/PMI_/SLURM_ variables) fills it in; or
 * eq_nccl_bootstrap_from_mpi does, from an initialised MPI. */
typedef struct {
    int world_rank, world_size;
    int local_rank; /* -1: unknown (device 0, or EQUIV_CUDA_DEVICE) */
    MPI_Comm comm;
} eq_nccl_bootstrap;

/* From MPI (MPI_Init done by the caller): rank and size of `comm`, the local rank from an
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). */
eq_status eq_nccl_bootstrap_from_mpi(MPI_Comm comm, eq_nccl_bootstrap *out);

typedef struct eq_nccl_world eq_nccl_world;

typedef enum { EQ_NCCL_WORLD = 0, EQ_NCCL_DP = 1, EQ_NCCL_TP = 2 } eq_nccl_axis;

/* Opens the device of the local rank, creates the world, dp and tp communicators for layout
 * dp x tp (EQ_ERR_USAGE unless dp * tp == world_size). Collective: every rank calls it. */
eq_status eq_nccl_world_init(const eq_nccl_bootstrap *b, int dp, int tp, eq_algo algo, eq_nccl_world **out);

/* The group of this process along an axis: transport nccl, one local member (n_local 1,
 * first_local = this rank's place in it), comm = that communicator. Valid while the world lives. */
eq_group eq_nccl_group(const eq_nccl_world *w, eq_nccl_axis axis);

/* This process's world rank and layout coordinates. */
int eq_nccl_world_rank(const eq_nccl_world *w);

/* Destroys the communicators (after finishing them) and frees the device buffers; *w = NULL. */
void eq_nccl_world_free(eq_nccl_world **w);

/* EQUIV_COLLECTIVE_TIMEOUT_S, or 300 s; EQ_ERR_USAGE if it is set and not a positive number. */
eq_status eq_collective_timeout_s(double *out);

extern const eq_transport eq_transport_nccl;

#endif
