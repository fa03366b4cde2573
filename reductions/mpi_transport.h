/* The MPI transport: one member of each group per process (n_local = 1), the group's handle an
 * MPI_Comm (g->comm points to it; reductions/world.c makes the tp and dp communicators).
 *
 * The emulated algorithms (ring, tree, fp32acc, seq) are run explicitly with point-to-point
 * messages, each add rounded by the same eq_fold_add as the sim transport's fold
 * (reductions/fold.c), in the same order: `--algo ring` under MPI equals `--algo ring` under sim bit
 * for bit by construction, and reductions/mpi_transport_test.c checks it under mpirun.
 *
 * `--algo mpi` is MPI's own MPI_Allreduce / MPI_Reduce_scatter_block. fp32 and fp64 use MPI_SUM,
 * whose order OpenMPI picks by message size. bf16 uses a user-defined operation that rounds to bf16
 * after every add, declared non-commutative so that MPI keeps the operands in rank order; the
 * bracketing is still the library's. What OpenMPI 4.1 does (observed with a tracing operation,
 * coll/tuned, 4 ranks on one node, 1 to 600000 elements): recursive doubling,
 * ((x0 + x1) + (x2 + x3)) on every element. None of the emulated algorithms brackets 4 members that
 * way (ring: x[c+1] + ... + x[c] in sequence; seq: ((x0 + x1) + x2) + x3; tree:
 * (x0 + (x1 + x3)) + x2), so `--algo mpi` in bf16 matches none of them in general; the test shows
 * it equals the recursive-doubling bracketing bit for bit and differs from each emulated one.
 * MPI_SUM on fp32 is commutative, so OpenMPI may also pick its ring (chunk c from rank c to rank
 * c-1, one rank off NCCL's) or Rabenseifner's reduce-scatter + all-gather by size: no fixed order.
 *
 * Errors: every MPI call's return code is checked (the communicators use MPI_ERRORS_RETURN) and
 * becomes EQ_ERR_BACKEND naming the world rank, the collective and the MPI call. Every collective
 * waits under the watch of reductions/mpi_watch.h: one that does not finish within
 * EQUIV_COLLECTIVE_TIMEOUT_S seconds (default 300; 0: no limit) ends the job with exit status 2 and
 * one line naming the rank that did not arrive: a rank that died or hangs cannot make the others
 * wait forever. */
#ifndef EQUIV_REDUCTIONS_MPI_TRANSPORT_H
#define EQUIV_REDUCTIONS_MPI_TRANSPORT_H

#include "equiv_config.h"
#include "reductions/collectives.h"

#if EQUIV_HAVE_MPI
extern const eq_transport eq_transport_mpi;

/* Called after MPI_Init by each world (reductions/world.c): the first creates the bf16 operation; the
 * last _free frees it, before MPI_Finalize. */
eq_status eq_mpi_transport_init(void);
void eq_mpi_transport_free(void);

/* Checks the return code of an MPI call made by equiv: EQ_ERR_BACKEND "rank R: what: MPI's
 * message" unless MPI_SUCCESS. */
eq_status eq_mpi_check(int rc, const char *what, const char *file, int line);
#define EQ_MPI_CHECK(call, what) eq_mpi_check((call), (what), __FILE__, __LINE__)
#endif

#endif
