/* Names of the algorithms and reduction ops, and the sim group constructor. */
#include "reductions/collectives.h"

#include <stdio.h>
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

const char *eq_algo_summary(eq_algo a)
{
    switch (a) {
    case EQ_ALGO_RING: return "NCCL's ring: chunk c folds from ring index c+1 round to c";
    case EQ_ALGO_TREE: return "binary tree reduce to rank 0, then broadcast";
    case EQ_ALGO_FP32ACC: return "fp32 accumulation in rank order, rounded to the wire dtype once, as NVLS";
    case EQ_ALGO_SEQ: return "rank 0, 1, ..., n-1, rounding after every add";
    case EQ_ALGO_MPI: return "the MPI library's own MPI_Allreduce";
    case EQ_ALGO_TP_INVARIANT: return "no all-reduce over tp: each tp rank continues the previous one's fp32 sum over K";
    }
    return "?";
}

_Static_assert(EQ_ALGO_NAMED == EQ_ALGO_TP_INVARIANT + 1, "EQ_ALGO_NAMED counts every eq_algo");

eq_status eq_algo_parse(const char *name, eq_algo *out)
{
    char known[128] = "";
    for (int a = 0; a < EQ_ALGO_NAMED; a++) {
        if (strcmp(name, eq_algo_name((eq_algo)a)) == 0) {
            *out = (eq_algo)a;
            return EQ_OK;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", a ? ", " : "", eq_algo_name((eq_algo)a));
    }
    return EQ_FAIL(EQ_ERR_USAGE, "unknown algorithm '%s' (known: %s; equiv --list says which --comm runs each)", name,
                   known);
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
