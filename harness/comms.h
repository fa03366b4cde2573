/* The comms (--comm): how the ranks of a run exist, one row each. The driver asks this table, never
 * the name: whether the ranks are processes of their own, how their world starts, which
 * algorithms the comm runs, and whether this build has it. `equiv --list` prints it.
 *
 * A new comm is a row here (harness/comms.c), its transport (reductions/, an eq_transport) and,
 * for a multi-process one, the function that starts its world (harness/world*.c). */
#ifndef EQUIV_HARNESS_COMMS_H
#define EQUIV_HARNESS_COMMS_H

#include "harness/base/status.h"
#include "reductions/world.h"
#include "reductions/collectives.h"

typedef struct {
    const char *name;    /* --comm NAME */
    const char *summary; /* one line for equiv --list */
    int multi_process;   /* 1: one rank per process under a launcher (mpirun, srun: dp x tp of them);
                          * 0: every rank in this process */
    /* Starts the world of the layout's dp x tp ranks (every rank calls it; the world's transport
     * set), first checking that every rank runs `settings` (reductions/world.h: one line naming the
     * ranks and the setting where one differs); NULL where every rank lives in this process and
     * there is none to start. */
    eq_status (*start_world)(eq_world *w, eq_layout layout, eq_algo algo, const eq_world_settings *settings);
    unsigned algos;      /* the eq_algo it runs: bit 1u << a for each */
    int compares;        /* `equiv compare` runs under it (mpi: the tensors split over the processes) */
    int built;           /* this build has what it needs */
    const char *lacking; /* what a build without it lacks ("MPI"), and how to get it: */
    const char *remedy;
} eq_comm;

#define EQ_ALGO_BIT(a) (1u << (unsigned)(a))

extern const eq_comm eq_comms[]; /* the first is the default: sim */
extern const int eq_comm_count;

/* The row named `name`; EQ_ERR_USAGE "unknown --comm 'NAME' (known: sim, mpi, nccl)" if none. */
eq_status eq_comm_find(const char *name, const eq_comm **out);

/* Can `comm` run `algo` in this build? EQ_ERR_USAGE naming the comms that run the algorithm and the
 * algorithms the comm runs (in every build alike), else saying what this build lacks. */
eq_status eq_comm_check(const eq_comm *comm, eq_algo algo);

/* "ring, tree, fp32acc" (the algorithms in `algos`, joined by `sep`) into buf. */
void eq_algo_names(unsigned algos, const char *sep, char *buf, size_t len);

#endif
