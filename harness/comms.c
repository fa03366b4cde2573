/* The table of comms (harness/comms.h). */
#include "harness/comms.h"

#include <stdio.h>
#include <string.h>

#include "equiv_config.h"

/* The algorithms fold.c emulates in their order and rounding. */
#define EMULATED                                                                                                   \
    (EQ_ALGO_BIT(EQ_ALGO_RING) | EQ_ALGO_BIT(EQ_ALGO_TREE) | EQ_ALGO_BIT(EQ_ALGO_FP32ACC) | EQ_ALGO_BIT(EQ_ALGO_SEQ))

static eq_status start_mpi(eq_world *w, eq_layout layout, eq_algo algo, const eq_world_settings *settings)
{
    (void)algo;
    return eq_world_init_mpi(w, layout, settings);
}

/* NCCL's communicators over the MPI world: one GPU per process (world_nccl.c). */
static eq_status start_mpi_nccl(eq_world *w, eq_layout layout, eq_algo algo, const eq_world_settings *settings)
{
    eq_status st = eq_world_init_mpi(w, layout, settings);
    return st == EQ_OK ? eq_world_start_nccl(w, algo) : st;
}

const eq_comm eq_comms[] = {
    {.name = "sim",
     .summary = "every rank in this process, collectives emulated in the algorithm's order and rounding",
     .multi_process = 0,
     .start_world = NULL,
     /* tp_invariant chains the tp ranks' accumulators in one process */
     .algos = EMULATED | EQ_ALGO_BIT(EQ_ALGO_TP_INVARIANT),
     .compares = 1,
     .built = 1,
     .lacking = "",
     .remedy = ""},
    {.name = "mpi",
     .summary = "one rank per process under mpirun or srun (-np = dp x tp); rank 0 computes the reference, "
                "compares and writes",
     .multi_process = 1,
     .start_world = start_mpi,
     .algos = EMULATED | EQ_ALGO_BIT(EQ_ALGO_MPI),
     .compares = 1,
     .built = EQUIV_HAVE_MPI,
     .lacking = "MPI",
     .remedy = "install libopenmpi-dev, meson configure -Dmpi=enabled"},
    {.name = "nccl",
     .summary = "the same models, NCCL collectives, one GPU per process",
     .multi_process = 1,
     .start_world = start_mpi_nccl,
     /* NCCL's own algorithms: ring, tree, and NVLS's fp32 accumulation */
     .algos = EQ_ALGO_BIT(EQ_ALGO_RING) | EQ_ALGO_BIT(EQ_ALGO_TREE) | EQ_ALGO_BIT(EQ_ALGO_FP32ACC),
     .built = EQUIV_HAVE_NCCL,
     .lacking = "NCCL",
     .remedy = "it needs the cuda, nccl and mpi features: nvcc, libnccl and libopenmpi-dev"},
};
const int eq_comm_count = (int)(sizeof eq_comms / sizeof eq_comms[0]);

eq_status eq_comm_find(const char *name, const eq_comm **out)
{
    char known[128] = "";
    for (int i = 0; i < eq_comm_count; i++) {
        if (strcmp(name, eq_comms[i].name) == 0) {
            *out = &eq_comms[i];
            return EQ_OK;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", eq_comms[i].name);
    }
    return EQ_FAIL(EQ_ERR_USAGE, "unknown --comm '%s' (known: %s)", name, known);
}

void eq_algo_names(unsigned algos, const char *sep, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int a = 0; a < EQ_ALGO_NAMED; a++)
        if (algos & EQ_ALGO_BIT(a))
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? sep : "", eq_algo_name((eq_algo)a));
}

eq_status eq_comm_check(const eq_comm *comm, eq_algo algo)
{
    if (comm->algos & EQ_ALGO_BIT(algo)) {
        if (comm->built) return EQ_OK;
        return EQ_FAIL(EQ_ERR_USAGE, "--comm %s: this equiv was built without %s (%s)", comm->name, comm->lacking,
                       comm->remedy);
    }
    char runs_it[128] = "", runs[128];
    for (int i = 0; i < eq_comm_count; i++)
        if (eq_comms[i].algos & EQ_ALGO_BIT(algo))
            snprintf(runs_it + strlen(runs_it), sizeof runs_it - strlen(runs_it), "%s%s", runs_it[0] ? " or " : "",
                     eq_comms[i].name);
    eq_algo_names(comm->algos, ", ", runs, sizeof runs);
    return EQ_FAIL(EQ_ERR_USAGE, "--algo %s (%s) needs --comm %s; --comm %s runs %s", eq_algo_name(algo),
                   eq_algo_summary(algo), runs_it, comm->name, runs);
}
