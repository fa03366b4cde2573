/* Names of the algorithms and reduction ops, and the sim group constructor. */
#include "reductions/collectives.h"

#include <string.h>

const char *eq_algo_name(eq_algo a)
{
    switch (a) {
    case EQ_ALGO_RING: return "ring";
    case EQ_ALGO_TREE: return "tree";
    case EQ_ALGO_FP32ACC: return "fp32acc";
    case EQ_ALGO_SEQ: return "seq";
    case EQ_ALGO_MPI: return "mpi";
    case EQ_ALGO_TP_INVARIANT: return "tp_invariant";
    }
    return "?";
}

eq_status eq_algo_parse(const char *name, eq_algo *out)
{
    for (int a = 0; a <= EQ_ALGO_TP_INVARIANT; a++) {
        if (strcmp(name, eq_algo_name((eq_algo)a)) == 0) {
            *out = (eq_algo)a;
            return EQ_OK;
        }
    }
    return EQ_FAIL(EQ_ERR_USAGE, "unknown algorithm '%s' (known: ring, tree, fp32acc, seq, tp_invariant; mpi under --comm mpi)",
                   name);
}

const char *eq_redop_name(eq_redop op)
{
    switch (op) {
    case EQ_REDOP_SUM: return "sum";
    case EQ_REDOP_AVG: return "avg";
    }
    return "?";
}

eq_group eq_group_sim(int size, eq_algo algo)
{
    eq_group g = {&eq_transport_sim, algo, size, 0, size, NULL, EQ_NCCL_CONFIG_DEFAULT};
    return g;
}
