/* What the probe case captures (models/probe.c says what each value is): each parameter's four
 * buffers in the layer the parameter belongs to, the index lists, the counts, the per-unit values
 * in global index order and the scalars. Per-unit values live on the rank that computed them; under
 * --comm mpi they are all-gathered over dp (fp64 copies, no arithmetic), so every process captures
 * what the sim run captures. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/models.h"
#include "models/probe_run.h"

/* Per-unit values of every rank in global order: out[r + k dp] = rank r's k-th (B values);
 * local[i] is local replica i's array. Multi-process: each rank's array padded to ceil(B/dp) and
 * all-gathered over dp (fp64 copies). */
static eq_status gather_units(const eq_step *step, const probe_run *run, int64_t B, const double *const *local,
                              double *out)
{
    eq_status st = EQ_OK;
    const eq_group g = eq_step_dp_group(step);
    const int dp = run->dp;
    const int64_t kmax = (B + dp - 1) / dp;
    double *pad = NULL, *all = NULL;
    if (g.n_local == g.size) {
        for (int i = 0; i < g.n_local; i++)
            for (int64_t k = 0; k < probe_shard_count(B, dp, i); k++) out[i + k * dp] = local[i][k];
        return EQ_OK;
    }
    pad = calloc((size_t)kmax, sizeof *pad), all = calloc((size_t)(kmax * dp), sizeof *all);
    if (pad == NULL || all == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory to gather per-unit values");
        goto cleanup;
    }
    memcpy(pad, local[0], (size_t)probe_shard_count(B, dp, run->first) * sizeof *pad);
    const void *in[1] = {pad};
    void *outs[1] = {all};
    EQ_TRY(eq_all_gather(&g, in, outs, (size_t)kmax, EQ_FP64));
    for (int r = 0; r < dp; r++)
        for (int64_t k = 0; k < probe_shard_count(B, dp, r); k++) out[r + k * dp] = all[r * kmax + k];
cleanup:
    free(pad), free(all);
    return st;
}

static eq_status capture_vector(eq_capture *cap, int layer, const char *name, eq_role role, int64_t n,
                                const double *v)
{
    eq_tensor t = {0};
    eq_status st = eq_tensor_init(&t, EQ_FP64, 1, &n);
    if (st != EQ_OK) return st;
    memcpy(t.data, v, (size_t)n * sizeof *v);
    return eq_capture_add(cap, layer, name, role, &t);
}

static eq_status capture_scalar(eq_capture *cap, int layer, const char *name, double v)
{
    return capture_vector(cap, layer, name, EQ_ROLE_LOSS, 1, &v);
}

/* A per-unit field of the replicas (offset into probe_replica) gathered and captured. */
static eq_status capture_units(const eq_step *step, const probe_run *run, eq_capture *cap, int layer,
                               const char *name, int on_u, size_t field)
{
    eq_status st = EQ_OK;
    const int64_t B = on_u ? run->z.batch_u : run->z.batch_e;
    double *all = calloc((size_t)B, sizeof *all);
    const double **local = calloc((size_t)run->n_local, sizeof *local);
    if (all == NULL || local == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for %s", name);
        goto cleanup;
    }
    for (int i = 0; i < run->n_local; i++) local[i] = *(double *const *)((const char *)&run->reps[i] + field);
    EQ_TRY(gather_units(step, run, B, local, all));
    EQ_TRY(capture_vector(cap, layer, name, EQ_ROLE_ACTIVATION, B, all));
cleanup:
    free(all), free(local);
    return st;
}

/* The index lists as the ranks hold them, in global order (the ranks' shards gathered). */
static eq_status gather_indices(const eq_step *step, const probe_run *run, int on_u, double *out)
{
    eq_status st = EQ_OK;
    const int nl = run->n_local;
    double **local = calloc((size_t)nl, sizeof *local);
    if (local == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for the index lists");
    for (int i = 0; i < nl; i++) {
        const probe_replica *r = &run->reps[i];
        const int64_t n = on_u ? r->n_u : r->n_e;
        if ((local[i] = calloc((size_t)n + 1, sizeof **local)) == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for the index lists");
            goto cleanup;
        }
        for (int64_t k = 0; k < n; k++) local[i][k] = on_u ? r->u_idx[k] : r->e_idx[k];
    }
    EQ_TRY(gather_units(step, run, on_u ? run->z.batch_u : run->z.batch_e, (const double *const *)local, out));
cleanup:
    for (int i = 0; i < nl; i++) free(local[i]);
    free(local);
    return st;
}

eq_status probe_capture(const eq_step *step, probe_run *run, eq_capture *cap)
{
    eq_status st = EQ_OK;
    const probe_lm_sizes *lm = &run->z.lm;
    const int LP = (int)lm->layers + 2;
    char name[EQ_NAME_MAX];
    /* the index lists as the ranks hold them, in global order */
    double *e_all = calloc((size_t)run->z.batch_e, sizeof *e_all), *u_all = calloc((size_t)run->z.batch_u, sizeof *u_all);
    if (e_all == NULL || u_all == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for the index lists");
        goto cleanup;
    }
    EQ_TRY(gather_indices(step, run, 0, e_all));
    EQ_TRY(gather_indices(step, run, 1, u_all));
    EQ_TRY(capture_vector(cap, 0, "E_indices", EQ_ROLE_INPUT, run->z.batch_e, e_all));
    EQ_TRY(capture_vector(cap, 0, "U_indices", EQ_ROLE_INPUT, run->z.batch_u, u_all));
    /* The buffers, by the layer their parameter belongs to. */
    for (int k = 0; k < run->n_tensors; k++) {
        int layer;
        const char *pname;
        probe_lm_params *sets[4] = {&run->g_sum_X, &run->g_sum_Y, &run->I_X, &run->I_Y};
        const char *what[4] = {"sum_X", "sum_Y", "I_X", "I_Y"};
        for (int s = 0; s < 4; s++) {
            const eq_tensor *t = probe_lm_tensor(sets[s], lm, k, &layer, &pname);
            snprintf(name, sizeof name, "%s.%s", pname, what[s]);
            EQ_TRY(eq_capture_add_copy(cap, layer, name, EQ_ROLE_GRAD, t));
        }
    }
    EQ_TRY(capture_scalar(cap, LP, "B_E", run->B_E));
    EQ_TRY(capture_scalar(cap, LP, "B_U", run->B_U));
    EQ_TRY(capture_units(step, run, cap, LP, "L_X", 0, offsetof(probe_replica, L_X)));
    EQ_TRY(capture_units(step, run, cap, LP, "L_Y", 1, offsetof(probe_replica, L_Y)));
    EQ_TRY(capture_units(step, run, cap, LP, "logp_E", 0, offsetof(probe_replica, logp)));
    EQ_TRY(capture_scalar(cap, LP, "bars_dot", run->bars_dot));
    EQ_TRY(capture_units(step, run, cap, LP, "x_dot", 0, offsetof(probe_replica, x_dot)));
    EQ_TRY(capture_units(step, run, cap, LP, "y_dot", 1, offsetof(probe_replica, y_dot)));
    EQ_TRY(capture_scalar(cap, LP, "V_X", run->V_X));
    EQ_TRY(capture_scalar(cap, LP, "V_Y", run->V_Y));
    EQ_TRY(capture_scalar(cap, LP, "bars_dot_se", sqrt(run->V_X + run->V_Y)));
    EQ_TRY(capture_units(step, run, cap, LP, "logp_E_upd", 0, offsetof(probe_replica, logp_upd)));
    EQ_TRY(capture_scalar(cap, LP, "sum_w", run->sum_w));
    EQ_TRY(capture_scalar(cap, LP, "sum_wS", run->sum_wS));
    const double H_orig = -run->sum_S / run->B_E, H_upd = -run->sum_wS / run->sum_w;
    EQ_TRY(capture_scalar(cap, LP, "H_orig", H_orig));
    EQ_TRY(capture_scalar(cap, LP, "H_upd", H_upd)); /* dH = H_upd - H_orig: from these two */
cleanup:
    free(e_all), free(u_all);
    return st;
}

