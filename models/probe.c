/* The probe case (seed 004): the mixed E/U entropy probe across data-parallel ranks. Not a
 * training step but a measurement, on the small language model of models/probe_lm.h.
 *
 * Data: a dataset of `dataset` sequences (tokens from the seed's RNG keyed by the dataset index),
 * each with an advantage A_i ~ N(0, 1). "Rank 0" draws B_E and B_U distinct indices once (a
 * partial Fisher-Yates shuffle from the seed), broadcasts them over dp, and dp rank r takes
 * E_indices[r::dp] and U_indices[r::dp]: B does not have to divide by dp (uneven shards; a rank
 * may hold none).
 *
 * Per unit n (one sequence; S_n its log-probability, T = seq - 1 predicted tokens):
 *   L_X(n) = -S_n / T on E (the mean token NLL),  L_Y(n) = -A_n S_n / T on U (a policy-gradient loss)
 * Phase 1 (each backward with DDP's sync off, no_sync): per-unit backward passes accumulate
 *   sum_X = sum_{n in E_local} grad L_X(n), sum_Y = sum_{n in U_local} grad L_Y(n)
 * in parameter buffers (fp32 for bf16 and fp32 runs, as the seed's CPU fp32 buffers; fp64 for
 * fp64 runs). Then SUM all-reduces of the counts B_E, B_U (fp64: exact integers) and of the
 * buffers, and division by the global counts: I_X = sum_X / B_E, I_Y = sum_Y / B_U;
 *   bars_dot = <I_X, I_Y>  (fp64 over every element, computed alike on every rank).
 * Phase 2 (per-unit backward again, no_sync): x_n = <grad L_X(n), I_Y>, y_n = <grad L_Y(n), I_X>;
 *   V_X = SUM_ranks sum_n (x_n - bars_dot)^2 / (B_E (B_E - 1)), V_Y likewise over U, the local
 *   sums SUM all-reduced as fp64 scalars; bars_dot_se = sqrt(V_X + V_Y) (the delta method's
 *   standard error of <mean X, mean Y>).
 * Phase 3: the U step theta' = dt(theta - lr I_Y), then on E (no grad) the importance weights
 *   w_n = exp(S'_n - S_n) and the fp64 SUM all-reduced sums sum_w, sum_wS (S = S'), sum_S; then
 *   H_orig = -sum_S / B_E, H_upd = -sum_wS / sum_w (the seed's dH_true = H_upd - H_orig is left to
 *   the reader: a difference of two near values, its relative error is theirs times |H| / |dH|).
 *
 * Captured: each parameter's four buffers (sum_X, sum_Y, I_X, I_Y) in the layer the parameter
 * belongs to (layers/00 the embeddings and the index lists, layers/01..L the blocks, layers/L+1
 * the final LayerNorm and the head), and in layers/L+2 the counts, the per-unit values in global
 * index order (L_X, L_Y, logp_E, x_dot, y_dot, logp_E_upd) and the scalars.
 *
 * Under --comm mpi or nccl (step->world) each process is one dp rank: dp rank 0 draws and
 * broadcasts the indices; the per-unit values are all-gathered over dp (copies); every reduction
 * is the sim run's, over the step's dp group.
 *
 * Injected bugs (models/model.h): local_count (each rank divides its buffer by its local count
 * before the SUM), ddp_sync (DDP's gradient all-reduce, AVG, left on during the probe's per-unit
 * backward passes; a rank out of units joins with zeros, as DDP's join does), rank_sampling (each
 * rank draws its own B_local indices from the seed: overlapping shards), var_fp32 (V_X and V_Y
 * reduced in fp32), bars_dot_one_rank (bars_dot from dp rank 0's local buffers). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/rng.h"
#include "models/models.h"
#include "models/probe_run.h"

/* The case's sizes (models/models.h: EQ_SIZE_READ): member, key. */
#define PROBE_SIZES(X)                                                                                      \
    X(lm.vocab, "vocab") X(lm.seq, "seq") X(lm.hidden, "hidden") X(lm.heads, "heads") X(lm.ffn, "ffn")     \
    X(lm.layers, "layers") X(dataset, "dataset") X(batch_e, "batch_e") X(batch_u, "batch_u")
static const char *const probe_size_keys[] = {PROBE_SIZES(EQ_SIZE_NAME) NULL};
/* The U step's learning rate: small enough that the importance weights stay O(1). */
#define PROBE_LR 0.05

static eq_status read_sizes(const eq_step *step, probe_sizes *z)
{
    eq_status st = EQ_OK;
    const char *path = step->size->case_path;
    PROBE_SIZES(EQ_SIZE_READ)
    if (z->lm.hidden % z->lm.heads != 0 || z->lm.layers > PROBE_LM_MAX_LAYERS || z->lm.seq < 2) {
        st = EQ_FAIL(EQ_ERR_INPUT, "case file %s: probe needs heads | hidden, seq >= 2 and at most %d layers "
                     "(heads=%lld, hidden=%lld, seq=%lld, layers=%lld)", path, PROBE_LM_MAX_LAYERS,
                     (long long)z->lm.heads, (long long)z->lm.hidden, (long long)z->lm.seq, (long long)z->lm.layers);
        goto cleanup;
    }
    if (z->batch_e < 2 || z->batch_u < 2 || z->batch_e > z->dataset || z->batch_u > z->dataset) {
        st = EQ_FAIL(EQ_ERR_INPUT, "case file %s: probe needs 2 <= batch_e, batch_u <= dataset (batch_e=%lld, "
                     "batch_u=%lld, dataset=%lld)", path, (long long)z->batch_e, (long long)z->batch_u,
                     (long long)z->dataset);
        goto cleanup;
    }
    /* What a run holds, at most (every shape checked by the footprint, no product formed here):
     * per parameter set (the parameters, the updated ones, the global buffers I_X, I_Y, sum_X,
     * sum_Y, and per local replica its two buffers, a unit gradient and under local_count two
     * local means) the embeddings, the head and the blocks' weights, at 8 bytes; per unit the
     * blocks' activations ([S, 1, 10 H + 2 F] each, models/gpt_block.h) and the logits. */
    const int64_t sets = 6 + 5 * (int64_t)step->layout.dp, L = z->lm.layers;
    const eq_footprint_item items[] = {
        {"token embeddings and head", 2 * sets, {z->lm.vocab, z->lm.hidden}, sizeof(double)},
        {"position embeddings", sets, {z->lm.seq, z->lm.hidden}, sizeof(double)},
        {"qkv_weight and proj_weight", 4 * L * sets, {z->lm.hidden, z->lm.hidden}, sizeof(double)},
        {"fc1_weight and fc2_weight", 2 * L * sets, {z->lm.ffn, z->lm.hidden}, sizeof(double)},
        {"a unit's block activations", L + 1, {z->lm.seq, 10, z->lm.hidden + z->lm.ffn}, sizeof(double)},
        {"a unit's logits", 2, {z->lm.seq, z->lm.vocab}, sizeof(double)},
        {"the dataset's index permutation", 1, {z->dataset}, sizeof(int64_t)},
    };
    EQ_TRY(eq_check_footprint(step, items, (int)(sizeof items / sizeof items[0])));
    if (step->layout.tp != 1) {
        st = EQ_FAIL(EQ_ERR_USAGE, "probe runs data parallel only (seed 004): tp=%d, want 1", step->layout.tp);
        goto cleanup;
    }
    if (step->grads != EQ_GRAD_AVG) {
        st = EQ_FAIL(EQ_ERR_USAGE, "--grads does not apply to probe: its reductions are seed 004's (SUM of buffers "
                     "and counts, then division by the global count)");
        goto cleanup;
    }
cleanup:
    return st;
}

static eq_status probe_check(const eq_step *step)
{
    probe_sizes z;
    return read_sizes(step, &z);
}

/* The first B of a permutation of 0..N-1 (partial Fisher-Yates, the draws keyed by (seed,
 * stream, position)): "rank 0" sampling B distinct indices from the seed. */
static eq_status draw_indices(uint64_t seed, const char *stream, int64_t N, int64_t B, double *out)
{
    int64_t *perm = malloc((size_t)N * sizeof *perm);
    if (perm == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory to draw %lld indices", (long long)B);
    const uint32_t s = eq_rng_stream(stream);
    for (int64_t i = 0; i < N; i++) perm[i] = i;
    for (int64_t k = 0; k < B; k++) {
        int64_t j = k + (int64_t)(eq_rng_uniform(seed, s, (uint64_t)k) * (double)(N - k));
        if (j >= N) j = N - 1;
        const int64_t t = perm[k];
        perm[k] = perm[j], perm[j] = t;
        out[k] = (double)perm[k];
    }
    free(perm);
    return EQ_OK;
}

static void unit_tokens(uint64_t seed, const probe_lm_sizes *z, int64_t unit, int32_t *tok)
{
    const uint32_t s = eq_rng_stream("probe/tokens");
    for (int64_t t = 0; t < z->seq; t++) {
        int64_t v = (int64_t)(eq_rng_uniform(seed, s, (uint64_t)(unit * z->seq + t)) * (double)z->vocab);
        tok[t] = (int32_t)(v < z->vocab ? v : z->vocab - 1);
    }
}

static double unit_advantage(uint64_t seed, int64_t unit)
{
    return eq_rng_normal(seed, eq_rng_stream("probe/advantage"), (uint64_t)unit);
}

/* fp64 scalars over dp: vals[i] the local replicas', reduced in place; *out the result. Under
 * var_fp32 (as_fp32) each value is rounded to fp32 and the reduction runs in fp32. */
static eq_status reduce_scalars(const eq_step *step, double *vals, int as_fp32, double *out)
{
    const eq_group g = eq_step_dp_group(step);
    eq_status st = EQ_OK;
    void **bufs = calloc((size_t)g.n_local, sizeof *bufs);
    float *f32 = calloc((size_t)g.n_local, sizeof *f32);
    if (bufs == NULL || f32 == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for a scalar all-reduce");
        goto cleanup;
    }
    for (int i = 0; i < g.n_local; i++) {
        f32[i] = (float)vals[i];
        bufs[i] = as_fp32 ? (void *)&f32[i] : (void *)&vals[i];
    }
    EQ_TRY(eq_all_reduce(&g, bufs, 1, as_fp32 ? EQ_FP32 : EQ_FP64, EQ_REDOP_SUM));
    *out = as_fp32 ? (double)f32[0] : vals[0];
cleanup:
    free(bufs), free(f32);
    return st;
}

/* Every tensor of the local replicas' parameter sets `sets[i]` all-reduced over dp. */
static eq_status reduce_params(const eq_step *step, probe_run *run, probe_lm_params *const *sets, eq_dtype dt,
                               eq_redop op)
{
    const eq_group g = eq_step_dp_group(step);
    eq_status st = EQ_OK;
    void **bufs = calloc((size_t)g.n_local, sizeof *bufs);
    if (bufs == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for a buffer all-reduce");
    for (int k = 0; k < run->n_tensors && st == EQ_OK; k++) {
        int layer;
        const char *name;
        int64_t n = 0;
        for (int i = 0; i < g.n_local; i++) {
            eq_tensor *t = probe_lm_tensor(sets[i], &run->z.lm, k, &layer, &name);
            bufs[i] = t->data, n = eq_tensor_numel(t);
        }
        st = eq_all_reduce(&g, bufs, (size_t)n, dt, op);
    }
    free(bufs);
    return st;
}

/* <a, b> over every element of every tensor, fp64, in capture order. */
static double dot_params(const probe_run *run, probe_lm_params *a, probe_lm_params *b)
{
    double dot = 0;
    for (int k = 0; k < run->n_tensors; k++) {
        int layer;
        const char *name;
        const eq_tensor *ta = probe_lm_tensor(a, &run->z.lm, k, &layer, &name);
        const eq_tensor *tb = probe_lm_tensor(b, &run->z.lm, k, &layer, &name);
        for (int64_t j = 0; j < eq_tensor_numel(ta); j++) dot += eq_tensor_get(ta, j) * eq_tensor_get(tb, j);
    }
    return dot;
}

static void zero_params(const probe_run *run, probe_lm_params *p)
{
    for (int k = 0; k < run->n_tensors; k++) {
        int layer;
        const char *name;
        eq_tensor *t = probe_lm_tensor(p, &run->z.lm, k, &layer, &name);
        memset(t->data, 0, eq_tensor_bytes(t));
    }
}

enum { PASS_ACCUMULATE, PASS_VARIANCE };

/* One probe pass over E (on_u = 0) or U of every local replica, in lockstep: step k runs each
 * replica's k-th unit (a replica out of units runs none: under ddp_sync it joins the all-reduce
 * with zeros, as DDP's join does). Accumulate: the buffers, L and logp. Variance: the dot of the
 * unit's gradient with the other batch's mean, and the local sum of squares about bars_dot. */
static eq_status grad_pass(const eq_step *step, probe_run *run, int on_u, int pass)
{
    eq_status st = EQ_OK;
    const probe_lm_sizes *lm = &run->z.lm;
    const int64_t B = on_u ? run->z.batch_u : run->z.batch_e, kmax = (B + run->dp - 1) / run->dp;
    const uint64_t seed = step->seed;
    int32_t *tok = malloc((size_t)lm->seq * sizeof *tok);
    probe_lm_params **sets = calloc((size_t)run->n_local, sizeof *sets);
    if (tok == NULL || sets == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for a pass");
        goto cleanup;
    }
    for (int i = 0; i < run->n_local; i++) sets[i] = &run->reps[i].grad;
    for (int64_t k = 0; k < kmax; k++) {
        for (int i = 0; i < run->n_local; i++) {
            probe_replica *r = &run->reps[i];
            if (k >= (on_u ? r->n_u : r->n_e)) {
                zero_params(run, &r->grad);
                continue;
            }
            const int64_t unit = on_u ? r->u_idx[k] : r->e_idx[k];
            const double T = (double)(lm->seq - 1), coef = on_u ? -unit_advantage(seed, unit) / T : -1.0 / T;
            double logp = 0;
            unit_tokens(seed, lm, unit, tok);
            EQ_TRY(probe_lm_unit(step, lm, &run->params, tok, coef, &logp, &r->grad));
            if (pass == PASS_ACCUMULATE && on_u) r->L_Y[k] = coef * logp;
            if (pass == PASS_ACCUMULATE && !on_u) r->L_X[k] = coef * logp, r->logp[k] = logp;
        }
        /* The injected bug: DDP's reducer fires on every backward (no no_sync): the unit gradients
         * come out AVG all-reduced over dp. */
        if (step->bugs & EQ_BUG_DDP_SYNC) EQ_TRY(reduce_params(step, run, sets, run->dt, EQ_REDOP_AVG));
        for (int i = 0; i < run->n_local; i++) {
            probe_replica *r = &run->reps[i];
            if (k >= (on_u ? r->n_u : r->n_e)) continue;
            if (pass == PASS_VARIANCE) {
                const double d = dot_params(run, &r->grad, on_u ? &run->I_X : &run->I_Y);
                (on_u ? r->y_dot : r->x_dot)[k] = d;
                *(on_u ? &r->V_Y : &r->V_X) += (d - run->bars_dot) * (d - run->bars_dot);
                continue;
            }
            probe_lm_params *sum = on_u ? &r->sum_Y : &r->sum_X;
            for (int t = 0; t < run->n_tensors; t++) {
                int layer;
                const char *name;
                eq_tensor *acc = probe_lm_tensor(sum, lm, t, &layer, &name);
                const eq_tensor *g = probe_lm_tensor(&r->grad, lm, t, &layer, &name);
                for (int64_t j = 0; j < eq_tensor_numel(acc); j++)
                    eq_tensor_set(acc, j, eq_tensor_get(acc, j) + eq_tensor_get(g, j));
            }
        }
    }
cleanup:
    free(tok), free(sets);
    return st;
}

/* The index lists: drawn once by dp rank 0 and broadcast over dp (bug: each rank draws its own
 * B_local from the seed), then sharded [r::dp]. run->e_global/u_global get the lists in global
 * order as the ranks hold them. */
static eq_status sample_indices(const eq_step *step, probe_run *run)
{
    eq_status st = EQ_OK;
    const eq_group g = eq_step_dp_group(step);
    const int64_t Bs[2] = {run->z.batch_e, run->z.batch_u};
    const char *streams[2] = {"probe/E_indices", "probe/U_indices"};
    double **lists = calloc((size_t)g.n_local, sizeof *lists);
    void **bufs = calloc((size_t)g.n_local, sizeof *bufs);
    if (lists == NULL || bufs == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for the index lists");
        goto cleanup;
    }
    for (int which = 0; which < 2; which++) {
        const int64_t B = Bs[which];
        for (int i = 0; i < g.n_local; i++)
            if ((lists[i] = calloc((size_t)B, sizeof **lists)) == NULL) {
                st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for the index lists");
                goto cleanup;
            }
        if (step->bugs & EQ_BUG_RANK_SAMPLING) {
            for (int i = 0; i < g.n_local; i++) /* every rank draws its own, from the same seed */
                EQ_TRY(draw_indices(step->seed, streams[which], run->z.dataset,
                                    probe_shard_count(B, run->dp, run->first + i), lists[i]));
        } else {
            if (g.first_local == 0) EQ_TRY(draw_indices(step->seed, streams[which], run->z.dataset, B, lists[0]));
            for (int i = 0; i < g.n_local; i++) bufs[i] = lists[i];
            EQ_TRY(eq_broadcast(&g, bufs, (size_t)B, EQ_FP64, 0));
        }
        for (int i = 0; i < g.n_local; i++) {
            probe_replica *r = &run->reps[i];
            const int rank = run->first + i;
            const int64_t n = probe_shard_count(B, run->dp, rank);
            int32_t *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
            if (idx == NULL) {
                st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for a shard");
                goto cleanup;
            }
            for (int64_t k = 0; k < n; k++) /* bug: the rank's own first n draws; else [rank::dp] */
                idx[k] = (int32_t)lists[i][(step->bugs & EQ_BUG_RANK_SAMPLING) ? k : rank + k * run->dp];
            if (which == 0) r->e_idx = idx, r->n_e = n;
            else r->u_idx = idx, r->n_u = n;
        }
        for (int i = 0; i < g.n_local; i++) free(lists[i]), lists[i] = NULL;
    }
cleanup:
    for (int i = 0; lists != NULL && i < g.n_local; i++) free(lists[i]);
    free(lists), free(bufs);
    return st;
}

static void free_run(probe_run *run)
{
    const probe_lm_sizes *lm = &run->z.lm;
    for (int i = 0; run->reps != NULL && i < run->n_local; i++) {
        probe_replica *r = &run->reps[i];
        free(r->e_idx), free(r->u_idx);
        probe_lm_free(&r->sum_X, lm), probe_lm_free(&r->sum_Y, lm), probe_lm_free(&r->grad, lm);
        free(r->L_X), free(r->L_Y), free(r->logp), free(r->x_dot), free(r->y_dot), free(r->logp_upd);
    }
    free(run->reps);
    probe_lm_free(&run->params, lm), probe_lm_free(&run->updated, lm);
    probe_lm_free(&run->I_X, lm), probe_lm_free(&run->I_Y, lm);
    probe_lm_free(&run->g_sum_X, lm), probe_lm_free(&run->g_sum_Y, lm);
}

static eq_status alloc_run(const eq_step *step, probe_run *run)
{
    eq_status st = EQ_OK;
    const probe_lm_sizes *lm = &run->z.lm;
    EQ_TRY(probe_lm_alloc(&run->params, lm, run->dt));
    EQ_TRY(probe_lm_alloc(&run->updated, lm, run->dt));
    EQ_TRY(probe_lm_alloc(&run->I_X, lm, run->bt));
    EQ_TRY(probe_lm_alloc(&run->I_Y, lm, run->bt));
    EQ_TRY(probe_lm_alloc(&run->g_sum_X, lm, run->bt));
    EQ_TRY(probe_lm_alloc(&run->g_sum_Y, lm, run->bt));
    probe_lm_init(&run->params, lm, step->seed);
    if ((run->reps = calloc((size_t)run->n_local, sizeof *run->reps)) == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for %d replicas", run->n_local);
        goto cleanup;
    }
    for (int i = 0; i < run->n_local; i++) {
        probe_replica *r = &run->reps[i];
        const int64_t ne = probe_shard_count(run->z.batch_e, run->dp, run->first + i) + 1;
        const int64_t nu = probe_shard_count(run->z.batch_u, run->dp, run->first + i) + 1;
        EQ_TRY(probe_lm_alloc(&r->sum_X, lm, run->bt));
        EQ_TRY(probe_lm_alloc(&r->sum_Y, lm, run->bt));
        EQ_TRY(probe_lm_alloc(&r->grad, lm, run->dt));
        r->L_X = calloc((size_t)ne, sizeof(double)), r->logp = calloc((size_t)ne, sizeof(double));
        r->x_dot = calloc((size_t)ne, sizeof(double)), r->logp_upd = calloc((size_t)ne, sizeof(double));
        r->L_Y = calloc((size_t)nu, sizeof(double)), r->y_dot = calloc((size_t)nu, sizeof(double));
        if (!r->L_X || !r->logp || !r->x_dot || !r->logp_upd || !r->L_Y || !r->y_dot) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for a replica's per-unit values");
            goto cleanup;
        }
    }
cleanup:
    return st;
}

/* Phase 1's reductions: the counts, the buffers, the means and bars_dot. */
static eq_status reduce_buffers(const eq_step *step, probe_run *run)
{
    eq_status st = EQ_OK;
    const int nl = run->n_local;
    const probe_lm_sizes *lm = &run->z.lm;
    double *c = calloc((size_t)nl, sizeof *c);
    probe_lm_params **sets = calloc((size_t)nl, sizeof *sets), *local_I = NULL;
    if (c == NULL || sets == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for the reductions");
        goto cleanup;
    }
    for (int i = 0; i < nl; i++) c[i] = (double)run->reps[i].n_e;
    EQ_TRY(reduce_scalars(step, c, 0, &run->B_E));
    for (int i = 0; i < nl; i++) c[i] = (double)run->reps[i].n_u;
    EQ_TRY(reduce_scalars(step, c, 0, &run->B_U));
    if (step->bugs & EQ_BUG_BARS_DOT_ONE_RANK) {
        /* the injected bug: bars_dot from dp rank 0's own buffers (over the global counts), as that
         * rank computes it before (or without) the all-reduce; dp rank 0 writes its value */
        double v = 0;
        for (int k = 0; k < run->n_tensors; k++) {
            int layer;
            const char *name;
            const eq_tensor *x = probe_lm_tensor(&run->reps[0].sum_X, lm, k, &layer, &name);
            const eq_tensor *y = probe_lm_tensor(&run->reps[0].sum_Y, lm, k, &layer, &name);
            for (int64_t j = 0; j < eq_tensor_numel(x); j++)
                v += eq_buffer_get(run->bt, x->data, j) / run->B_E * (eq_buffer_get(run->bt, y->data, j) / run->B_U);
        }
        run->bars_dot = v;
    }
    if (step->bugs & EQ_BUG_LOCAL_COUNT) {
        /* the injected bug: each rank normalises its buffers by its local count, then the SUM */
        if ((local_I = calloc((size_t)(2 * nl), sizeof *local_I)) == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for the local means");
            goto cleanup;
        }
        for (int i = 0; i < 2 * nl; i++) {
            const probe_replica *r = &run->reps[i % nl];
            const double n = (double)(i < nl ? r->n_e : r->n_u);
            EQ_TRY(probe_lm_alloc(&local_I[i], lm, run->bt));
            for (int k = 0; k < run->n_tensors; k++) {
                int layer;
                const char *name;
                eq_tensor *dst = probe_lm_tensor(&local_I[i], lm, k, &layer, &name);
                const eq_tensor *src = probe_lm_tensor(i < nl ? &run->reps[i].sum_X : &run->reps[i - nl].sum_Y, lm,
                                                       k, &layer, &name);
                for (int64_t j = 0; j < eq_tensor_numel(dst); j++)
                    eq_tensor_set(dst, j, n > 0 ? eq_tensor_get(src, j) / n : 0.0);
            }
        }
        for (int i = 0; i < nl; i++) sets[i] = &local_I[i];
        EQ_TRY(reduce_params(step, run, sets, run->bt, EQ_REDOP_SUM));
        for (int i = 0; i < nl; i++) sets[i] = &local_I[nl + i];
        EQ_TRY(reduce_params(step, run, sets, run->bt, EQ_REDOP_SUM));
    }
    for (int i = 0; i < nl; i++) sets[i] = &run->reps[i].sum_X;
    EQ_TRY(reduce_params(step, run, sets, run->bt, EQ_REDOP_SUM));
    for (int i = 0; i < nl; i++) sets[i] = &run->reps[i].sum_Y;
    EQ_TRY(reduce_params(step, run, sets, run->bt, EQ_REDOP_SUM));
    for (int k = 0; k < run->n_tensors; k++) {
        int layer;
        const char *name;
        const eq_tensor *sx = probe_lm_tensor(&run->reps[0].sum_X, lm, k, &layer, &name);
        const eq_tensor *sy = probe_lm_tensor(&run->reps[0].sum_Y, lm, k, &layer, &name);
        eq_tensor *gx = probe_lm_tensor(&run->g_sum_X, lm, k, &layer, &name);
        eq_tensor *gy = probe_lm_tensor(&run->g_sum_Y, lm, k, &layer, &name);
        eq_tensor *ix = probe_lm_tensor(&run->I_X, lm, k, &layer, &name);
        eq_tensor *iy = probe_lm_tensor(&run->I_Y, lm, k, &layer, &name);
        const eq_tensor *lx = local_I ? probe_lm_tensor(&local_I[0], lm, k, &layer, &name) : NULL;
        const eq_tensor *ly = local_I ? probe_lm_tensor(&local_I[nl], lm, k, &layer, &name) : NULL;
        memcpy(gx->data, sx->data, eq_tensor_bytes(gx));
        memcpy(gy->data, sy->data, eq_tensor_bytes(gy));
        for (int64_t j = 0; j < eq_tensor_numel(ix); j++) {
            eq_tensor_set(ix, j, lx ? eq_tensor_get(lx, j) : eq_tensor_get(sx, j) / run->B_E);
            eq_tensor_set(iy, j, ly ? eq_tensor_get(ly, j) : eq_tensor_get(sy, j) / run->B_U);
        }
    }
    if (step->bugs & EQ_BUG_BARS_DOT_ONE_RANK) {
        /* dp rank 0's value reaches every rank (it is the one written) */
        const eq_group g = eq_step_dp_group(step);
        for (int i = 0; i < nl; i++) c[i] = run->bars_dot;
        void **bufs = calloc((size_t)nl, sizeof *bufs);
        if (bufs == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for a broadcast");
            goto cleanup;
        }
        for (int i = 0; i < nl; i++) bufs[i] = &c[i];
        st = eq_broadcast(&g, bufs, 1, EQ_FP64, 0);
        free(bufs);
        if (st != EQ_OK) goto cleanup;
        run->bars_dot = c[0];
    } else {
        run->bars_dot = dot_params(run, &run->I_X, &run->I_Y);
    }
cleanup:
    for (int i = 0; local_I != NULL && i < 2 * nl; i++) probe_lm_free(&local_I[i], lm);
    free(local_I), free(c), free(sets);
    return st;
}

/* Phase 3: the U step, then the importance-sampling sums over E (forward only). */
static eq_status importance_sums(const eq_step *step, probe_run *run)
{
    eq_status st = EQ_OK;
    const probe_lm_sizes *lm = &run->z.lm;
    int32_t *tok = malloc((size_t)lm->seq * sizeof *tok);
    if (tok == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for the importance sums");
    for (int k = 0; k < run->n_tensors; k++) {
        int layer;
        const char *name;
        const eq_tensor *p = probe_lm_tensor(&run->params, lm, k, &layer, &name);
        const eq_tensor *iy = probe_lm_tensor(&run->I_Y, lm, k, &layer, &name);
        eq_tensor *u = probe_lm_tensor(&run->updated, lm, k, &layer, &name);
        for (int64_t j = 0; j < eq_tensor_numel(u); j++)
            eq_tensor_set(u, j, eq_tensor_get(p, j) - PROBE_LR * eq_tensor_get(iy, j));
    }
    for (int i = 0; i < run->n_local; i++) {
        probe_replica *r = &run->reps[i];
        for (int64_t k = 0; k < r->n_e; k++) {
            unit_tokens(step->seed, lm, r->e_idx[k], tok);
            EQ_TRY(probe_lm_unit(step, lm, &run->updated, tok, 0.0, &r->logp_upd[k], NULL));
            const double w = exp(r->logp_upd[k] - r->logp[k]);
            r->sum_w += w;
            r->sum_wS += w * r->logp_upd[k];
            r->sum_S += r->logp[k];
        }
    }
cleanup:
    free(tok);
    return st;
}

/* The variance and importance sums over dp (fp64 scalars; fp32 under the var_fp32 bug), and the
 * variances over B (B - 1). */
static eq_status reduce_results(const eq_step *step, probe_run *run)
{
    eq_status st = EQ_OK;
    const int nl = run->n_local, fp32_var = (step->bugs & EQ_BUG_VAR_FP32) != 0;
    double *v = calloc((size_t)nl, sizeof *v);
    if (v == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "probe: no memory for the scalars");
    for (int i = 0; i < nl; i++) v[i] = run->reps[i].V_X;
    EQ_TRY(reduce_scalars(step, v, fp32_var, &run->V_X));
    for (int i = 0; i < nl; i++) v[i] = run->reps[i].V_Y;
    EQ_TRY(reduce_scalars(step, v, fp32_var, &run->V_Y));
    run->V_X /= run->B_E * (run->B_E - 1), run->V_Y /= run->B_U * (run->B_U - 1);
    for (int i = 0; i < nl; i++) v[i] = run->reps[i].sum_w;
    EQ_TRY(reduce_scalars(step, v, 0, &run->sum_w));
    for (int i = 0; i < nl; i++) v[i] = run->reps[i].sum_wS;
    EQ_TRY(reduce_scalars(step, v, 0, &run->sum_wS));
    for (int i = 0; i < nl; i++) v[i] = run->reps[i].sum_S;
    EQ_TRY(reduce_scalars(step, v, 0, &run->sum_S));
cleanup:
    free(v);
    return st;
}

static eq_status probe_run_step(const eq_step *step, eq_capture *cap)
{
    eq_status st = EQ_OK;
    probe_run run;
    memset(&run, 0, sizeof run);
    EQ_TRY(read_sizes(step, &run.z));
    const eq_group dp_group = eq_step_dp_group(step);
    run.dt = step->dtype;
    run.bt = step->dtype == EQ_FP64 ? EQ_FP64 : EQ_FP32;
    run.dp = step->layout.dp;
    run.first = dp_group.first_local;
    run.n_local = dp_group.n_local;
    run.n_tensors = probe_lm_n_tensors(&run.z.lm);
    EQ_TRY(alloc_run(step, &run));
    EQ_TRY(sample_indices(step, &run));
    EQ_TRY(grad_pass(step, &run, 0, PASS_ACCUMULATE));
    EQ_TRY(grad_pass(step, &run, 1, PASS_ACCUMULATE));
    EQ_TRY(reduce_buffers(step, &run));
    EQ_TRY(grad_pass(step, &run, 0, PASS_VARIANCE));
    EQ_TRY(grad_pass(step, &run, 1, PASS_VARIANCE));
    EQ_TRY(importance_sums(step, &run));
    EQ_TRY(reduce_results(step, &run));
    EQ_TRY(probe_capture(step, &run, cap));
cleanup:
    free_run(&run);
    return st;
}

const eq_model eq_model_probe = {
    .name = "probe",
    .summary = "mixed E/U entropy probe (seed 004): per-unit buffers, SUM over dp, variances, IS sums",
    .check = probe_check,
    .run = probe_run_step,
    .multi_process = 1,
    .stores_wider = 1, /* fp32 buffers and fp64 scalars in bf16 runs (cases/probe.ini's tolerances) */
    .size_keys = probe_size_keys,
};
