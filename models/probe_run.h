/* The probe case's run state (models/probe.c computes it, models/probe_capture.c captures it):
 * the sizes, each local dp replica's shard, buffers and per-unit values, and the reduced results.
 * Internal to the probe case. */
#ifndef EQUIV_MODELS_PROBE_RUN_H
#define EQUIV_MODELS_PROBE_RUN_H

#include "harness/capture.h"
#include "models/probe_lm.h"

typedef struct {
    probe_lm_sizes lm;
    int64_t dataset, batch_e, batch_u;
} probe_sizes;

/* One local replica (dp rank first_local + i). */
typedef struct {
    int64_t n_e, n_u;        /* local counts */
    int32_t *e_idx, *u_idx;  /* [n_e], [n_u] dataset indices */
    probe_lm_params sum_X, sum_Y, grad; /* buffers (buffer dtype), one unit's gradient (dt) */
    double *L_X, *L_Y, *logp, *x_dot, *y_dot, *logp_upd; /* per local unit */
    double V_X, V_Y, sum_w, sum_wS, sum_S;               /* local sums */
} probe_replica;

/* One run of the probe on this process's dp ranks. */
typedef struct {
    probe_sizes z;
    eq_dtype dt, bt;           /* the model's dtype, the buffers' */
    int dp, first, n_local;
    int n_tensors;
    probe_lm_params params, updated;
    probe_lm_params I_X, I_Y, g_sum_X, g_sum_Y; /* the reduced buffers (buffer dtype) */
    double B_E, B_U, bars_dot;   /* the global counts, <I_X, I_Y> */
    double V_X, V_Y, sum_w, sum_wS, sum_S; /* the reduced scalars (V_X, V_Y divided by B (B - 1)) */
    probe_replica *reps;       /* [n_local] */
} probe_run;

/* Units of dp rank r among B sharded [r::dp]. */
static inline int64_t probe_shard_count(int64_t B, int dp, int r) { return B > r ? (B - r + dp - 1) / dp : 0; }

/* Captures everything the run computed (the per-unit values and index lists gathered over dp
 * first: collective under --comm mpi). */
eq_status probe_capture(const eq_step *step, probe_run *run, eq_capture *cap);

#endif
