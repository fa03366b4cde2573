/* The spd case (seeds 000, 001): the SPD decomposition step of models/spd_step.h under dp x tp,
 * in fp32 (the seeds' trainer runs fp32; bf16 is not offered).
 *
 * Data parallelism: dp rank d holds global batch rows [d B/dp, (d+1) B/dp), every position.
 * Tensor parallelism splits every site's components (models/spd_ops.h). Each replica computes its
 * partial gradients per loss term; the gradients are then all-reduced over dp by the convention:
 *   avg (DDP, seed 000): each rank's losses are its local means, faithfulness on every rank,
 *        importance minimality with the world-size stand-in log2(1 + dp S_local); AVG all-reduce;
 *   sum (seed 001): every partial normalised by the global count, faithfulness contributed once
 *        (dp rank 0), importance minimality through the detached global residual (the local sums
 *        SUM all-reduced first, so its forward uses the global S); SUM all-reduce everywhere.
 * The total gradient is the sum of the terms on each rank, reduced once (as a trainer does); each
 * term is also reduced alone and captured as `<param>_grad.<term>`, so a report says which loss
 * carries a difference. Captured gradients of activations (the PGD sources') are in units of the
 * global mean loss under both conventions (avg: the rank's value / dp).
 *
 * Eval metrics (components active per token, the unmasked reconstruction) all-reduce their sums
 * and counts (fp64, SUM) before dividing, under both conventions.
 *
 * Under --comm mpi or nccl (step->world) each process runs its own (dp_rank, tp_rank): its
 * replica's rows, and its tp rank's partial sums over its slice of the components, SUM
 * all-reduced over the step's tp group (the component-wise values around them are computed whole
 * on every tp rank of a replica, as the sim run computes them once). The dp reductions go
 * through the step's dp group; the per-token captures are all-gathered over dp. Every process
 * ends with the tensors the sim run captures, bit for bit.
 *
 * Injected bugs (sum convention only; models/model.h): ci_grad_avg, faith_every_rank,
 * local_count (the stochastic reconstruction divided by the local count), imp_min_no_world_size
 * (the importance loss from each rank's local sums, no all-reduce and no world-size factor). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/models.h"
#include "models/spd_rows.h"
#include "models/spd_step.h"

/* Bugs planted under the sum convention only: under avg the first three are the convention, and
 * imp_min_no_world_size would land on tensors avg already expects to differ (the stand-in). */
#define SPD_SUM_ONLY_BUGS (EQ_BUG_CI_GRAD_AVG | EQ_BUG_FAITH_EVERY_RANK | EQ_BUG_LOCAL_COUNT | EQ_BUG_IMP_MIN_NO_WS)

/* The case's sizes (models/models.h: EQ_SIZE_READ): member, key. */
#define SPD_SIZES(X)                                                                                           \
    X(batch, "batch") X(seq, "seq") X(d_model, "d_model") X(d_mlp, "d_mlp") X(layers, "layers") X(c_fc, "c_fc") \
    X(c_down, "c_down") X(ci_hidden, "ci_hidden") X(step, "step") X(steps, "steps")
static const char *const spd_size_keys[] = {SPD_SIZES(EQ_SIZE_NAME) NULL};

static eq_status read_sizes(const eq_step *step, spd_sizes *z)
{
    eq_status st = EQ_OK;
    SPD_SIZES(EQ_SIZE_READ)
    if (2 * z->layers > SPD_MAX_SITES) {
        st = EQ_FAIL(EQ_ERR_INPUT, "case file %s: spd takes at most %d layers (layers=%lld)", step->size->case_path,
                     SPD_MAX_SITES / 2, (long long)z->layers);
        goto cleanup;
    }
    if (step->dtype != EQ_FP32 && step->dtype != EQ_FP64) {
        st = EQ_FAIL(EQ_ERR_USAGE, "spd runs in fp32 (as the seeds' trainer) or fp64, not %s", eq_dtype_name(step->dtype));
        goto cleanup;
    }
    if (step->grads == EQ_GRAD_AVG && (step->bugs & SPD_SUM_ONLY_BUGS)) {
        st = EQ_FAIL(EQ_ERR_USAGE, "--inject ci_grad_avg, faith_every_rank, local_count and imp_min_no_world_size "
                     "plant a bug in the sum convention (under avg they are the convention, or land where avg "
                     "already differs): add --grads sum");
        goto cleanup;
    }
    EQ_TRY(eq_check_divides("batch", z->batch, "dp", step->layout.dp));
    EQ_TRY(eq_check_divides("c_fc", z->c_fc, "tp", step->layout.tp));
    EQ_TRY(eq_check_divides("c_down", z->c_down, "tp", step->layout.tp));
    /* What a run holds (fp64 throughout; the reference's capture beside it), per site (two per
     * layer), at the wider of its two shapes: the tokens' activations (the input, the CI hidden
     * pre- and post-activation, z and both clamps, the noise, masks, sources and their gradient:
     * models/spd_step.h), the target's weight and each replica's Delta, the parameters and each
     * replica's gradients per loss term, and per tp rank a partial output. */
    const int64_t width = z->d_model > z->d_mlp ? z->d_model : z->d_mlp;
    const int64_t C = (z->c_fc > z->c_down ? z->c_fc : z->c_down) + 1, H = z->ci_hidden;
    const int64_t sites = 2 * z->layers, dp = step->layout.dp;
    const eq_footprint_item items[] = {
        {"per-token activations", 2 * sites, {z->batch, z->seq, width + 2 * H + 7 * C}, sizeof(double)},
        {"W and Delta", sites * (dp + 1), {width, width}, sizeof(double)},
        {"V, U, CI weights and their gradients", 2 * sites * (1 + 4 * dp), {width + H, 2 * C + H}, sizeof(double)},
        {"partial out", step->layout.tp, {z->batch, z->seq, width}, sizeof(double)},
    };
    EQ_TRY(eq_check_footprint(step, items, (int)(sizeof items / sizeof items[0])));
cleanup:
    return st;
}

static eq_status spd_check(const eq_step *step)
{
    spd_sizes z;
    return read_sizes(step, &z);
}

/* parts[i] (n values each, one per local replica) -> out, the all-reduce over dp in the step's
 * dtype. */
static eq_status reduce_dp(const eq_step *step, double *const *parts, int64_t n, eq_redop op, double *out)
{
    eq_status st = EQ_OK;
    const eq_group g = eq_step_dp_group(step);
    const int n_local = g.n_local;
    void **bufs = calloc((size_t)n_local, sizeof *bufs);
    if (bufs == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a dp all-reduce");
    for (int d = 0; d < n_local; d++) {
        if ((bufs[d] = malloc((size_t)n * eq_dtype_size(step->dtype) + 1)) == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a dp all-reduce of %lld values", (long long)n);
            goto cleanup;
        }
        for (int64_t i = 0; i < n; i++) eq_buffer_set(step->dtype, bufs[d], i, parts[d][i]);
    }
    EQ_TRY(eq_all_reduce(&g, bufs, (size_t)n, step->dtype, op));
    for (int64_t i = 0; i < n; i++) out[i] = eq_buffer_get(step->dtype, bufs[0], i);
cleanup:
    for (int d = 0; d < n_local; d++) free(bufs[d]);
    free(bufs);
    return st;
}

/* Scalars (fp64) over dp, vals[i] the local replicas'. */
static eq_status reduce_scalar(const eq_step *step, double *vals, eq_redop op, double *out)
{
    const eq_group g = eq_step_dp_group(step);
    void **bufs = calloc((size_t)g.n_local, sizeof *bufs);
    if (bufs == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a scalar all-reduce");
    for (int d = 0; d < g.n_local; d++) bufs[d] = &vals[d];
    eq_status st = eq_all_reduce(&g, bufs, 1, EQ_FP64, op);
    *out = vals[0];
    free(bufs);
    return st;
}

/* Adds a captured tensor of the step's dtype holding data. */
static eq_status capture(eq_capture *cap, const eq_step *step, int layer, const char *name, eq_role role, int ndim,
                         const int64_t *shape, const double *data)
{
    eq_tensor t = {0};
    eq_dtype dt = role == EQ_ROLE_LOSS ? EQ_FP64 : step->dtype;
    eq_status st = eq_tensor_init(&t, dt, ndim, shape);
    if (st != EQ_OK) return st;
    for (int64_t i = 0; i < eq_tensor_numel(&t); i++) eq_tensor_set(&t, i, data[i]);
    return eq_capture_add(cap, layer, name, role, &t);
}

static eq_status capture_scalar(eq_capture *cap, const eq_step *step, int layer, const char *name, double v)
{
    const int64_t one = 1;
    return capture(cap, step, layer, name, EQ_ROLE_LOSS, 1, &one, &v);
}

/* A per-token tensor [B, S, width] (width 0: one value per token, [B, S]) from every replica's rows (replica d's are the block
 * [d B/dp, (d+1) B/dp)), scaled by `scale`. per_rep[i]: the local replicas'; multi-process, the
 * other replicas' are all-gathered over dp (fp64: a copy of every value). */
static eq_status capture_rows(eq_capture *cap, const eq_step *step, const spd_sizes *z, const spd_replica *reps,
                              double *const *per_rep, int layer, const char *name, eq_role role, int64_t width,
                              double scale)
{
    eq_status st = EQ_OK;
    const int dp = step->layout.dp;
    const eq_group g = eq_step_dp_group(step);
    const int64_t per = reps[0].T * (width > 0 ? width : 1);
    double *full = malloc((size_t)(per * dp) * sizeof *full);
    if (full == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory to gather %s", name);
    if (g.n_local == g.size) {
        for (int d = 0; d < dp; d++) memcpy(full + d * per, per_rep[d], (size_t)per * sizeof *full);
    } else {
        const void *in[1] = {per_rep[0]};
        void *out[1] = {full};
        EQ_TRY(eq_all_gather(&g, in, out, (size_t)per, EQ_FP64));
    }
    for (int64_t i = 0; i < per * dp; i++) full[i] *= scale;
    const int64_t shape[3] = {z->batch, z->seq, width};
    st = capture(cap, step, layer, name, role, width > 0 ? 3 : 2, shape, full);
cleanup:
    free(full);
    return st;
}

/* Which terms reach which parameters: faithfulness V and U only, importance minimality the CI
 * function only (fields: V, U, then the CI function's). */
static int term_reaches(int term, int field)
{
    const int is_vu = field < 2;
    if (term == SPD_FAITH) return is_vu;
    if (term == SPD_IMP_MIN) return !is_vu;
    return 1;
}

typedef struct {
    spd_sizes z;
    int n_sites;
    spd_site_params sites[SPD_MAX_SITES];
    int first, n_local;     /* the dp replicas computed here: every one (sim), or this process's */
    spd_replica *reps;      /* [n_local]: reps[i] is dp rank first + i */
    double *S_global[SPD_MAX_SITES];
} spd_run;

static void free_run(spd_run *run)
{
    for (int s = 0; s < run->n_sites; s++) spd_params_free(&run->sites[s]), free(run->S_global[s]);
    for (int d = 0; run->reps != NULL && d < run->n_local; d++) spd_replica_free(&run->reps[d]);
    free(run->reps);
}

/* The reduction, then the capture of one site: parameters, activations, gradients (total and per
 * term), the eval metric. */
static eq_status reduce_and_capture_site(const eq_step *step, spd_run *run, int s, eq_capture *cap)
{
    eq_status st = EQ_OK;
    const int dp = step->layout.dp, sum = step->grads == EQ_GRAD_SUM, nl = run->n_local;
    const spd_site_params *p = &run->sites[s];
    const spd_sizes *z = &run->z;
    double **parts = calloc((size_t)nl, sizeof *parts), *out = NULL;
    double **rows = calloc((size_t)nl, sizeof *rows);
    char name[EQ_NAME_MAX];
    if (parts == NULL || rows == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the reduction");
        goto cleanup;
    }
    int field = 0;
#define SPD_PARAM(f, rows_, cols, std, mean)                                                            \
    {                                                                                                    \
        const int64_t shape[2] = {(rows_) > 0 ? (rows_) : (cols), (cols)};                               \
        EQ_TRY(capture(cap, step, s, #f, EQ_ROLE_PARAM, (rows_) > 0 ? 2 : 1, (rows_) > 0 ? shape : &shape[1], p->f)); \
    }
    SPD_SITE_PARAMS(SPD_PARAM)
#undef SPD_PARAM
    /* What the step reads and does not train, so a reader can rebuild it from the dump: the
     * frozen target weight, the residual stream entering the target (site 0), the mask noise, the
     * stochastic loss's subset routing and the PGD sources' initial values. */
    {
        const int64_t w_shape[2] = {p->O, p->D};
        EQ_TRY(capture(cap, step, s, "target_W", EQ_ROLE_PARAM, 2, w_shape, p->W));
    }
    if (s == 0) {
        for (int d = 0; d < nl; d++) rows[d] = run->reps[d].h0;
        EQ_TRY(capture_rows(cap, step, z, run->reps, rows, s, "residual_input", EQ_ROLE_INPUT, z->d_model, 1.0));
    }
    for (int d = 0; d < nl; d++) rows[d] = run->reps[d].u[s];
    EQ_TRY(capture_rows(cap, step, z, run->reps, rows, s, "stoch_noise", EQ_ROLE_INPUT, p->C + 1, 1.0));
    for (int d = 0; d < nl; d++) {
        free(parts[d]);
        if ((parts[d] = malloc((size_t)run->reps[d].T * sizeof **parts)) == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the routing");
            goto cleanup;
        }
        for (int64_t t = 0; t < run->reps[d].T; t++) parts[d][t] = run->reps[d].route[s][t];
    }
    EQ_TRY(capture_rows(cap, step, z, run->reps, parts, s, "stoch_route", EQ_ROLE_INPUT, 0, 1.0));
    for (int d = 0; d < nl; d++) free(parts[d]), parts[d] = NULL;
    for (int d = 0; d < nl; d++) rows[d] = run->reps[d].src_init[s];
    EQ_TRY(capture_rows(cap, step, z, run->reps, rows, s, "ppgd_sources_init", EQ_ROLE_INPUT, p->C + 1, 1.0));
    for (int d = 0; d < nl; d++) rows[d] = run->reps[d].x[s];
    EQ_TRY(capture_rows(cap, step, z, run->reps, rows, s, "input", EQ_ROLE_ACTIVATION, p->D, 1.0));
    for (int d = 0; d < nl; d++) rows[d] = run->reps[d].ci_lo[s];
    EQ_TRY(capture_rows(cap, step, z, run->reps, rows, s, "ci_lower", EQ_ROLE_ACTIVATION, p->C, 1.0));
    for (int d = 0; d < nl; d++) rows[d] = run->reps[d].ci_up[s];
    EQ_TRY(capture_rows(cap, step, z, run->reps, rows, s, "ci_upper", EQ_ROLE_ACTIVATION, p->C, 1.0));
    for (int d = 0; d < nl; d++) rows[d] = run->reps[d].stoch_mask[s];
    EQ_TRY(capture_rows(cap, step, z, run->reps, rows, s, "stoch_mask", EQ_ROLE_ACTIVATION, p->C + 1, 1.0));
    for (int d = 0; d < nl; d++) rows[d] = run->reps[d].src[s];
    EQ_TRY(capture_rows(cap, step, z, run->reps, rows, s, "ppgd_sources", EQ_ROLE_ACTIVATION, p->C + 1, 1.0));
    for (int d = 0; d < nl; d++) rows[d] = run->reps[d].src_grad[s];
    EQ_TRY(capture_rows(cap, step, z, run->reps, rows, s, "ppgd_sources_grad", EQ_ROLE_GRAD, p->C + 1,
                        sum ? 1.0 : 1.0 / dp));

    /* Gradients: the total (each rank sums its terms, then one all-reduce), then each term. */
    field = 0;
#define SPD_GRAD(f, rows_, cols, std, mean)                                                               \
    {                                                                                                      \
        const int64_t n = spd_param_numel(p, field);                                                       \
        const int64_t shape[2] = {(rows_) > 0 ? (rows_) : (cols), (cols)};                                 \
        const int ndim = (rows_) > 0 ? 2 : 1;                                                              \
        const int is_ci = field >= 2;                                                                      \
        const eq_redop op = !sum || (is_ci && (step->bugs & EQ_BUG_CI_GRAD_AVG)) ? EQ_REDOP_AVG : EQ_REDOP_SUM; \
        free(out);                                                                                         \
        out = calloc((size_t)n, sizeof *out);                                                              \
        for (int d = 0; d < nl; d++) parts[d] = calloc((size_t)n, sizeof **parts);                          \
        for (int d = 0; d < nl; d++)                                                                       \
            if (parts[d] == NULL || out == NULL) {                                                         \
                st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for a gradient");                                \
                goto cleanup;                                                                              \
            }                                                                                              \
        for (int d = 0; d < nl; d++)                                                                       \
            for (int k = 0; k < SPD_N_TERMS; k++)                                                          \
                for (int64_t i = 0; i < n; i++)                                                            \
                    parts[d][i] = spd_rnd(step->dtype, parts[d][i] + run->reps[d].grads[k][s].f[i]);          \
        EQ_TRY(reduce_dp(step, parts, n, op, out));                                                        \
        EQ_TRY(capture(cap, step, s, #f "_grad", EQ_ROLE_GRAD, ndim, ndim == 2 ? shape : &shape[1], out));  \
        for (int k = 0; k < SPD_N_TERMS; k++) {                                                            \
            if (!term_reaches(k, field)) continue;                                                         \
            for (int d = 0; d < nl; d++) memcpy(parts[d], run->reps[d].grads[k][s].f, (size_t)n * sizeof(double)); \
            EQ_TRY(reduce_dp(step, parts, n, op, out));                                                    \
            snprintf(name, sizeof name, "%s_grad.%s", #f, spd_term_names[k]);                              \
            EQ_TRY(capture(cap, step, s, name, EQ_ROLE_GRAD, ndim, ndim == 2 ? shape : &shape[1], out));    \
        }                                                                                                  \
        for (int d = 0; d < nl; d++) free(parts[d]), parts[d] = NULL;                                      \
        field++;                                                                                           \
    }
    SPD_SITE_PARAMS(SPD_GRAD)
#undef SPD_GRAD

    /* Eval: components active per token, sums and counts all-reduced before dividing. */
    double *l0 = calloc((size_t)nl, sizeof *l0), *cnt = calloc((size_t)nl, sizeof *cnt), l0_sum = 0, cnt_sum = 0;
    if (l0 == NULL || cnt == NULL) st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the eval");
    for (int d = 0; st == EQ_OK && d < nl; d++) l0[d] = run->reps[d].eval_l0_sum[s], cnt[d] = run->reps[d].eval_tokens;
    if (st == EQ_OK) st = reduce_scalar(step, l0, EQ_REDOP_SUM, &l0_sum);
    if (st == EQ_OK) st = reduce_scalar(step, cnt, EQ_REDOP_SUM, &cnt_sum);
    if (st == EQ_OK) st = capture_scalar(cap, step, s, "eval_l0", l0_sum / cnt_sum);
    free(l0), free(cnt);
cleanup:
    for (int d = 0; parts != NULL && d < nl; d++) free(parts[d]);
    free(parts), free(rows), free(out);
    return st;
}

static eq_status capture_losses(const eq_step *step, spd_run *run, eq_capture *cap)
{
    eq_status st = EQ_OK;
    const int nl = run->n_local, L = run->n_sites;
    const eq_redop op = step->grads == EQ_GRAD_SUM ? EQ_REDOP_SUM : EQ_REDOP_AVG;
    double *v = calloc((size_t)nl, sizeof *v), *c = calloc((size_t)nl, sizeof *c), total = 0, value = 0, count = 0;
    char name[EQ_NAME_MAX];
    if (v == NULL || c == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the losses");
        goto cleanup;
    }
    for (int d = 0; d < nl; d++) {
        v[d] = 0;
        for (int k = 0; k < SPD_N_TERMS; k++) v[d] += run->reps[d].loss[k];
    }
    EQ_TRY(reduce_scalar(step, v, op, &total));
    EQ_TRY(capture_scalar(cap, step, L, "loss", total));
    for (int k = 0; k < SPD_N_TERMS; k++) {
        for (int d = 0; d < nl; d++) v[d] = run->reps[d].loss[k];
        EQ_TRY(reduce_scalar(step, v, op, &value));
        snprintf(name, sizeof name, "loss.%s", spd_term_names[k]);
        EQ_TRY(capture_scalar(cap, step, L, name, value));
    }
    for (int d = 0; d < nl; d++) v[d] = run->reps[d].eval_recon_sum, c[d] = run->reps[d].eval_tokens * (double)run->z.d_model;
    EQ_TRY(reduce_scalar(step, v, EQ_REDOP_SUM, &value));
    EQ_TRY(reduce_scalar(step, c, EQ_REDOP_SUM, &count));
    EQ_TRY(capture_scalar(cap, step, L, "eval_unmasked_recon", value / count));
    /* The target model's output, what every reconstruction loss is measured against. */
    {
        double **rows = calloc((size_t)nl, sizeof *rows);
        if (rows == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the target output");
            goto cleanup;
        }
        for (int d = 0; d < nl; d++) rows[d] = run->reps[d].y_target;
        st = capture_rows(cap, step, &run->z, run->reps, rows, L, "target_output", EQ_ROLE_INPUT, run->z.d_model, 1.0);
        free(rows);
        if (st != EQ_OK) goto cleanup;
    }
cleanup:
    free(v), free(c);
    return st;
}

/* Names of every captured tensor's dimensions: per-token tensors [batch, seq, *], then the
 * parameters in their storage layout (in = the site's input width D, out = O). */
static const eq_dims_rule spd_dims[] = {
    {"input", "batch,seq,in"},
    {"residual_input", "batch,seq,d_model"},
    {"target_output", "batch,seq,d_model"},
    {"stoch_route", "batch,seq"},
    {"ci_lower", "batch,seq,component"},
    {"ci_upper", "batch,seq,component"},
    {"stoch_noise", "batch,seq,component_and_delta"},
    {"stoch_mask", "batch,seq,component_and_delta"},
    {"ppgd_sources*", "batch,seq,component_and_delta"},
    {"target_W", "out,in"},
    {"V", "in,component"},
    {"V_grad*", "in,component"},
    {"U", "component,out"},
    {"U_grad*", "component,out"},
    {"ci_w1", "in,ci_hidden"},
    {"ci_w1_grad*", "in,ci_hidden"},
    {"ci_b1", "ci_hidden"},
    {"ci_b1_grad*", "ci_hidden"},
    {"ci_w2", "ci_hidden,component"},
    {"ci_w2_grad*", "ci_hidden,component"},
    {"ci_b2", "component"},
    {"ci_b2_grad*", "component"},
    {"loss*", "one"},
    {"eval_*", "one"},
    {NULL, NULL},
};

/* The constants of the step (models/spd_losses.h, models/spd_ops.h), for the dump's /config. */
static eq_status spd_config(const spd_sizes *z, eq_capture *cap)
{
    static const struct {
        const char *name;
        double value;
    } numbers[] = {
        {"coef_faith", SPD_COEF_FAITH},   {"coef_stoch", SPD_COEF_STOCH},   {"coef_imp_min", SPD_COEF_IMP_MIN},
        {"coef_ppgd", SPD_COEF_PPGD},     {"imp_beta", SPD_IMP_BETA},       {"imp_eps", SPD_IMP_EPS},
        {"p_start", SPD_P_START},         {"p_end", SPD_P_END},             {"rmsnorm_eps", SPD_RMSNORM_EPS},
        {"leaky_alpha", SPD_LEAKY_ALPHA}, {"ppgd_lr", SPD_PPGD_LR},
        {"adam_beta1", SPD_ADAM_BETA1},   {"adam_beta2", SPD_ADAM_BETA2},   {"adam_eps", SPD_ADAM_EPS},
    };
    static const struct {
        const char *name, *text;
    } texts[] = {
        {"sites", "site 2l: layer l's c_fc (in d_model, out d_mlp, c_fc components); site 2l+1: its down_proj "
                  "(in d_mlp, out d_model, c_down components)"},
        {"target", "h = residual_input; per layer: a = h / sqrt(mean(h^2) + rmsnorm_eps); "
                   "h += gelu_tanh(a W_fc^T) W_down^T; target_output = h"},
        {"ci_function", "z = gelu_erf(x ci_w1 + ci_b1) ci_w2 + ci_b2; ci_lower = clamp(z, 0, 1); ci_upper = z "
                        "below 0 -> 0, on [0, 1] z, above 1 + leaky_alpha (z - 1)"},
        {"masked_site", "routed: out = ((x V) * m) U + d (x (W^T - V U)), m = mask[:C], d = mask[C]; "
                        "unrouted: out = x W^T"},
        {"masks", "stoch_mask = ci_lower + (1 - ci_lower) stoch_noise (delta column: the noise itself); PGD: "
                  "the same with the sources"},
        {"loss.faith", "coef_faith sum_sites ||W^T - V U||^2 / sum_sites (D O)"},
        {"loss.stoch", "coef_stoch sum (y_masked - target_output)^2 / (tokens d_model), tokens routed by "
                       "stoch_route at every site"},
        {"loss.imp_min", "coef_imp_min sum_sites sum_c [S_c/n + imp_beta (S_c/n) log2(1 + ws S_c)], S_c = "
                         "sum_t (ci_upper + imp_eps)^p_norm, n tokens, ws 1 (avg: dp, the world-size stand-in)"},
        {"loss.ppgd", "coef_ppgd sum (y_masked - target_output)^2 / (tokens d_model) at ppgd_sources (every token "
                      "routed), the sources after ppgd_warmup Adam ascent steps from ppgd_sources_init, clamped "
                      "to [0, 1]"},
        {"target_gelu", "tanh"},
        {"ci_gelu", "erf"},
    };
    eq_status st = EQ_OK;
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        EQ_TRY(eq_capture_config_number(cap, numbers[i].name, numbers[i].value));
    EQ_TRY(eq_capture_config_int(cap, "ppgd_warmup", SPD_PPGD_WARMUP));
    EQ_TRY(eq_capture_config_number(cap, "p_norm", spd_pnorm(z->step, z->steps)));
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        EQ_TRY(eq_capture_config_text(cap, texts[i].name, texts[i].text));
cleanup:
    return st;
}

#define SPD_MSG_MAX 512 /* a failure's message, carried from the thread that failed */

/* The local replicas' forwards, or their losses and backwards, split over threads (sim: dp
 * replicas in one process). A replica's arithmetic is its own whichever thread runs it, so the
 * bits are those of one thread. A thread running a share of several replicas runs their ops
 * whole (spd_rows_serial); one replica alone keeps the ops' own threads. */
typedef struct {
    const eq_step *step;
    spd_run *run;
    const spd_ctx *ctx;
    int losses;                 /* 0: init and forward; 1: losses and backward */
    double work_base;           /* progress units done before the phase */
    _Atomic int done;           /* replicas finished */
    eq_status *st;              /* [n_local] */
    char (*msg)[SPD_MSG_MAX];   /* [n_local] the failures' messages (the error is the thread's own) */
} replica_job;

static eq_status replica_losses(const eq_step *step, spd_run *run, const spd_ctx *ctx, int i)
{
    const spd_sizes *z = &run->z;
    const int dp = step->layout.dp, sum = step->grads == EQ_GRAD_SUM, d = run->first + i; /* d: the dp rank */
    const unsigned bugs = step->bugs;
    const int global_S = sum && !(bugs & EQ_BUG_IMP_MIN_NO_WS);
    const int64_t rows = z->batch / dp;
    const double global_tokens = (double)(z->batch * z->seq), local_tokens = (double)(rows * z->seq);
    spd_conv conv;
    const double *S_use[SPD_MAX_SITES];
    for (int s = 0; s < run->n_sites; s++) S_use[s] = global_S ? run->S_global[s] : run->reps[i].S_local[s];
    conv.imp_S = S_use;
    conv.ppgd_warmup = SPD_PPGD_WARMUP;
    if (sum) {
        conv.recon_norm_stoch = ((bugs & EQ_BUG_LOCAL_COUNT) ? local_tokens : global_tokens) * (double)z->d_model;
        conv.recon_norm_ppgd = global_tokens * (double)z->d_model;
        conv.faith_here = d == 0 || (bugs & EQ_BUG_FAITH_EVERY_RANK);
        conv.imp_n = global_tokens;
        conv.imp_ws = 1.0;
        conv.imp_loss_here = d == 0 || !global_S;
    } else {
        conv.recon_norm_stoch = conv.recon_norm_ppgd = local_tokens * (double)z->d_model;
        conv.faith_here = 1;
        conv.imp_n = local_tokens;
        conv.imp_ws = (double)dp; /* seed 000's stand-in */
        conv.imp_loss_here = 1;
    }
    return spd_replica_losses(ctx, z, run->sites, &conv, &run->reps[i]);
}

static void replica_range(void *arg, int64_t i0, int64_t i1)
{
    replica_job *j = arg;
    spd_run *run = j->run;
    const int dp = j->step->layout.dp;
    const int64_t rows = run->z.batch / dp;
    spd_rows_serial(i1 - i0 < run->n_local);
    for (int64_t i = i0; i < i1; i++) {
        const int d = run->first + (int)i;
        eq_status st = EQ_OK;
        if (!j->losses) {
            st = spd_replica_init(&run->z, run->sites, j->step->seed, d * rows, rows, &run->reps[i]);
            if (st == EQ_OK) st = spd_replica_forward(j->ctx, &run->z, run->sites, &run->reps[i]);
        } else {
            st = replica_losses(j->step, run, j->ctx, (int)i);
        }
        if ((j->st[i] = st) != EQ_OK) snprintf(j->msg[i], sizeof j->msg[i], "%s", eq_error_message());
        const int done = ++j->done;
        eq_progress_phase(j->step->progress, j->losses ? "losses and backward, replica" : "forward, replica", run->first + done,
                          dp, j->work_base + done);
    }
    spd_rows_serial(0);
}

/* Runs the phase on every local replica; the first failure (in replica order) is the result. */
static eq_status run_replicas(const eq_step *step, spd_run *run, const spd_ctx *ctx, int losses)
{
    const int nl = run->n_local;
    eq_status st = EQ_OK, *sts = calloc((size_t)nl, sizeof *sts);
    char (*msg)[SPD_MSG_MAX] = calloc((size_t)nl, sizeof *msg);
    if (sts == NULL || msg == NULL) {
        free(sts), free(msg);
        return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for %d replicas' status", nl);
    }
    replica_job job = {step, run, ctx, losses, losses ? (double)nl : 0.0, 0, sts, msg};
    eq_progress_phase(step->progress, losses ? "losses and backward, replica" : "forward, replica", 0, step->layout.dp,
                      job.work_base);
    eq_parallel_for(nl, 1, replica_range, &job);
    for (int i = 0; i < nl && st == EQ_OK; i++)
        if (sts[i] != EQ_OK) st = EQ_FAIL(sts[i], "%s", msg[i]);
    free(sts), free(msg);
    return st;
}

static eq_status spd_run_step(const eq_step *step, eq_capture *cap)
{
    eq_status st = EQ_OK;
    spd_run run;
    memset(&run, 0, sizeof run);
    const int sum = step->grads == EQ_GRAD_SUM;
    const unsigned bugs = step->bugs;
    EQ_TRY(read_sizes(step, &run.z));
    const spd_sizes *z = &run.z;
    run.n_sites = spd_n_sites(z);
    /* The tp partial sums of this process's tp ranks, all-reduced over the step's tp group; the
     * replicas of its dp ranks (sim: every one of both). */
    const spd_ctx ctx = {step->dtype, step->layout.tp, eq_step_tp_group(step), SPD_LEAKY_ALPHA};
    const eq_group dp_group = eq_step_dp_group(step);
    run.first = dp_group.first_local;
    run.n_local = dp_group.n_local;
    EQ_TRY(spd_params_init(z, step->seed, run.sites));
    if ((run.reps = calloc((size_t)run.n_local, sizeof *run.reps)) == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for %d replicas", run.n_local);
        goto cleanup;
    }
    /* progress units: each local replica's forward and its losses, then each site's reduction */
    const double work = 2.0 * run.n_local + run.n_sites;
    eq_progress_work(step->progress, work);
    EQ_TRY(run_replicas(step, &run, &ctx, 0));
    /* Importance minimality's sums: under sum the global S (SUM all-reduce of the local sums,
     * detached), unless the bug keeps the local ones. */
    const int global_S = sum && !(bugs & EQ_BUG_IMP_MIN_NO_WS);
    for (int s = 0; global_S && s < run.n_sites; s++) {
        double **parts = calloc((size_t)run.n_local, sizeof *parts);
        if (parts == NULL || (run.S_global[s] = calloc((size_t)run.sites[s].C, sizeof(double))) == NULL) {
            free(parts);
            st = EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the importance sums");
            goto cleanup;
        }
        for (int i = 0; i < run.n_local; i++) parts[i] = run.reps[i].S_local[s];
        st = reduce_dp(step, parts, run.sites[s].C, EQ_REDOP_SUM, run.S_global[s]);
        free(parts);
        if (st != EQ_OK) goto cleanup;
    }
    EQ_TRY(run_replicas(step, &run, &ctx, 1));
    for (int s = 0; s < run.n_sites; s++) {
        eq_progress_phase(step->progress, "reduce and capture, site", s + 1, run.n_sites, 2.0 * run.n_local + s);
        EQ_TRY(reduce_and_capture_site(step, &run, s, cap));
    }
    EQ_TRY(capture_losses(step, &run, cap));
    EQ_TRY(spd_config(z, cap));
    EQ_TRY(eq_capture_name_dims(cap, spd_dims));
cleanup:
    free_run(&run);
    return st;
}

const eq_model eq_model_spd = {
    .name = "spd",
    .summary = "SPD decomposition step (seeds 000/001): 4 losses, V/U/CI gradients under dp x tp",
    .check = spd_check,
    .run = spd_run_step,
    .multi_process = 1,
    /* every element is an fp64 sum rounded once (models/spd_ops.h), computed on the host */
    .host_only = 1,
    .size_keys = spd_size_keys,
};
