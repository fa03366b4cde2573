/* Collectives behind one interface.
 *
 * A group is the set of ranks taking part in one collective (the tp ranks of one dp replica, or
 * the dp ranks holding one tp shard). A transport is how those ranks exist: `sim` keeps every
 * member in this process and emulates the collective exactly as the chosen algorithm orders and
 * rounds it; `mpi` and `nccl` (GPU path) have one member per process. A collective therefore takes
 * one buffer per member that lives in this process: g->n_local of them (sim: all g->size).
 *
 * Wire dtypes: fp32, bf16 (uint16_t storage, rounded to bf16 after every add, as NCCL's bf16 sum
 * does on sm80+), fp64 (the truth runs). */
#ifndef EQUIV_REDUCTIONS_COLLECTIVES_H
#define EQUIV_REDUCTIONS_COLLECTIVES_H

#include <stddef.h>

#include "harness/base/phase_time.h"
#include "harness/base/status.h"
#include "harness/base/tensor.h"
#include "reductions/nccl_layout.h"

typedef enum {
    EQ_ALGO_RING = 0,    /* NCCL ring: chunk c folds from ring index c+1 round to c */
    EQ_ALGO_TREE = 1,    /* binary tree reduce to rank 0, then broadcast */
    EQ_ALGO_FP32ACC = 2, /* accumulate in fp32 (rank order), round to the wire dtype once: NVLS */
    EQ_ALGO_SEQ = 3,     /* rank 0, 1, ..., n-1, rounding after every add */
    EQ_ALGO_MPI = 4,     /* the MPI library's own MPI_Allreduce (mpi transport only; not emulated) */
    /* No all-reduce over tp: rank r continues rank r-1's fp32 accumulator over K in rank order and
     * the last rank rounds once (TransformerEngine's proposed TP-invariant mode), so tp = 1, 2, 4
     * give the same bits (models/parallel_linear.c). Not a fold: the models' other collectives
     * (data parallel) fold as fp32acc under it (models/models.c). sim transport, CPU backend. */
    EQ_ALGO_TP_INVARIANT = 5,
} eq_algo;
#define EQ_ALGO_COUNT 4 /* the emulated algorithms, 0..EQ_ALGO_COUNT-1: every transport runs them */
#define EQ_ALGO_NAMED 6 /* every algorithm --algo names, 0..EQ_ALGO_NAMED-1 (mpi, tp_invariant too) */
const char *eq_algo_name(eq_algo a);
const char *eq_algo_summary(eq_algo a); /* one line on its order and rounding (equiv --list) */
eq_status eq_algo_parse(const char *name, eq_algo *out); /* EQ_ERR_USAGE naming every algorithm if unknown */

typedef enum { EQ_REDOP_SUM = 0, EQ_REDOP_AVG = 1 } eq_redop;
const char *eq_redop_name(eq_redop op);

typedef struct eq_group eq_group;

/* One implementation of every collective. Counts are in elements. Buffers may not alias across
 * members; in-place all_reduce/broadcast work on bufs[] directly. */
typedef struct {
    const char *name;
    /* bufs[i] (count elements) becomes the reduction over all members, identical on every member. */
    eq_status (*all_reduce)(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, eq_redop op);
    /* in[i] holds size*count_per_member elements; out[i] (count_per_member) gets chunk i of the
     * reduction, where i is the member's rank in the group. */
    eq_status (*reduce_scatter)(const eq_group *g, const void *const in[], void *const out[],
                                size_t count_per_member, eq_dtype dt, eq_redop op);
    /* in[i] (count_per_member) is placed at chunk i of every out[j] (size*count_per_member). */
    eq_status (*all_gather)(const eq_group *g, const void *const in[], void *const out[],
                            size_t count_per_member, eq_dtype dt);
    /* bufs of every member become a copy of the root member's. */
    eq_status (*broadcast)(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt, int root);
} eq_transport;

struct eq_group {
    const eq_transport *transport;
    eq_algo algo;    /* the order and rounding the reduction follows */
    int size;        /* members in the group */
    int first_local; /* group rank of bufs[0]; sim: 0 */
    int n_local;     /* members living in this process; sim: size */
    void *comm;      /* the transport's handle of this group (mpi: an MPI_Comm *; nccl: its
                      * communicator); sim: NULL */
    eq_nccl_config nccl; /* ring: the channels and protocol NCCL's all-reduce would use, which place
                          * each element in its chunk (sim only; zero: the default) */
};

/* The simulated transport: every member in this process, algorithm-exact. */
extern const eq_transport eq_transport_sim;

/* A sim group of `size` members reducing with `algo` (every member local, no handle). */
eq_group eq_group_sim(int size, eq_algo algo);

static inline eq_status eq_all_reduce(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt,
                                      eq_redop op)
{
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_COLLECTIVES);
    const eq_status st = g->transport->all_reduce(g, bufs, count, dt, op);
    eq_phase_leave(EQ_PHASE_COLLECTIVES, mark);
    return st;
}

static inline eq_status eq_reduce_scatter(const eq_group *g, const void *const in[], void *const out[],
                                          size_t count_per_member, eq_dtype dt, eq_redop op)
{
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_COLLECTIVES);
    const eq_status st = g->transport->reduce_scatter(g, in, out, count_per_member, dt, op);
    eq_phase_leave(EQ_PHASE_COLLECTIVES, mark);
    return st;
}

static inline eq_status eq_all_gather(const eq_group *g, const void *const in[], void *const out[],
                                      size_t count_per_member, eq_dtype dt)
{
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_COLLECTIVES);
    const eq_status st = g->transport->all_gather(g, in, out, count_per_member, dt);
    eq_phase_leave(EQ_PHASE_COLLECTIVES, mark);
    return st;
}

static inline eq_status eq_broadcast(const eq_group *g, void *const bufs[], size_t count, eq_dtype dt,
                                     int root)
{
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_COLLECTIVES);
    const eq_status st = g->transport->broadcast(g, bufs, count, dt, root);
    eq_phase_leave(EQ_PHASE_COLLECTIVES, mark);
    return st;
}

#endif
