/* The SPD step's hand-written gradients against central finite differences in fp64
 * (models/spd_step.h): every element of every site's V, U and CI-function weights (W1, b1, W2,
 * b2) for the total of the four losses, and every PGD source for the PGD term, at tp = 1 and
 * tp = 2 (components split: the partial sums and their all-reduce must not change the maths).
 * The sources are first moved by the Adam warm-up, then held fixed (the step detaches them).
 * ci_lower's surrogate slope is set to 0 here, making its backward the true derivative; the
 * surrogate itself is checked on its own: alpha dout below 0, dout inside, 0 above.
 * Also: faithfulness and the losses' values by hand on a tiny example, and the importance loss's
 * two forms agreeing when one replica holds everything. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "models/spd_step.h"

/* Central differences with h = 1e-6 max(1, |x|); error relative where |grad| > 1 (ops_test.c's
 * reasoning). The loss here is dominated by faithfulness (coefficient 1e7, |f| ~ 1e6), so
 * cancellation costs eps |f| / h ~ 1e-16 1e6 / 1e-6 = 1e-4 absolute: the bound is relative to
 * max(1, |grad|) with 1e-3 absolute slack; a wrong term is off by its own size (>= 1e-1 here).
 * The CI functions' gradients (which faithfulness does not reach) are checked on the other three
 * losses (|f| ~ 1), against 1e-6. */
#define FD_BOUND 2e-3

typedef struct {
    spd_ctx ctx;
    spd_sizes z;
    spd_site_params sites[SPD_MAX_SITES];
    spd_replica rep;
    spd_conv conv;
    const double *S[SPD_MAX_SITES];
    int ppgd_only;
    int without_faith; /* faithfulness does not reach the CI functions: leave its 1e6 out */
} problem;

static double objective(problem *pb)
{
    EQ_EXPECT_OK(spd_replica_forward(&pb->ctx, &pb->z, pb->sites, &pb->rep));
    EQ_EXPECT_OK(spd_replica_losses(&pb->ctx, &pb->z, pb->sites, &pb->conv, &pb->rep));
    if (pb->ppgd_only) return pb->rep.loss[SPD_PPGD];
    double f = 0;
    for (int k = pb->without_faith ? 1 : 0; k < SPD_N_TERMS; k++) f += pb->rep.loss[k];
    return f;
}

static double fd_error(problem *pb, double *x, const double *grad, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x0 = x[i], h = 1e-6 * fmax(1.0, fabs(x0));
        x[i] = x0 + h;
        const double up = objective(pb);
        x[i] = x0 - h;
        const double down = objective(pb);
        x[i] = x0;
        const double err = fabs((up - down) / (2 * h) - grad[i]) / fmax(1.0, fabs(grad[i]));
        if (!(err <= worst)) worst = err;
    }
    return worst;
}

static void setup(problem *pb, int tp)
{
    memset(pb, 0, sizeof *pb);
    pb->z = (spd_sizes){.batch = 2, .seq = 2, .d_model = 4, .d_mlp = 6, .layers = 2, .c_fc = 4, .c_down = 4,
                        .ci_hidden = 3, .step = 1, .steps = 4};
    pb->ctx = (spd_ctx){EQ_FP64, tp, eq_group_sim(tp, EQ_ALGO_RING), 0.0};
    EQ_EXPECT_OK(spd_params_init(&pb->z, 99, pb->sites));
    EQ_EXPECT_OK(spd_replica_init(&pb->z, pb->sites, 99, 0, pb->z.batch, &pb->rep));
    const double tokens = (double)(pb->z.batch * pb->z.seq);
    for (int s = 0; s < pb->rep.n_sites; s++) pb->S[s] = pb->rep.S_local[s];
    pb->conv = (spd_conv){tokens * (double)pb->z.d_model, tokens * (double)pb->z.d_model, 1, pb->S, tokens, 1.0, 1,
                          SPD_PPGD_WARMUP};
    objective(pb); /* moves the sources by the warm-up */
    pb->conv.ppgd_warmup = 0;
}

static void test_gradients(int tp)
{
    problem pb;
    setup(&pb, tp);
    objective(&pb);
    for (int s = 0; s < pb.rep.n_sites; s++) {
        spd_site_params *p = &pb.sites[s];
        spd_site_grads total;
        EQ_EXPECT_OK(spd_grads_alloc(p, &total));
        int field = 0;
#define SPD_CHECK(f, rows, cols, std, mean)                                                              \
    {                                                                                                     \
        const int64_t n = spd_param_numel(p, field++);                                                    \
        for (int k = 0; k < SPD_N_TERMS; k++)                                                             \
            for (int64_t i = 0; i < n; i++) total.f[i] += pb.rep.grads[k][s].f[i];                        \
        pb.without_faith = field > 2; /* the CI function's fields */                                       \
        const double err = fd_error(&pb, p->f, total.f, n);                                               \
        const double bound = pb.without_faith ? 1e-6 : FD_BOUND;                                          \
        EQ_EXPECT(err < bound, "tp %d site %d " #f ": finite-difference error %.3g", tp, s, err);         \
        printf("tp %d site %d %-6s FD error %.2g\n", tp, s, #f, err);                                     \
    }
        SPD_SITE_PARAMS(SPD_CHECK)
#undef SPD_CHECK
        spd_grads_free(&total);
    }
    /* The sources, for the PGD term (what the ascent climbs). */
    pb.ppgd_only = 1;
    objective(&pb);
    for (int s = 0; s < pb.rep.n_sites; s++) {
        const int64_t n = pb.rep.T * (pb.sites[s].C + 1);
        double *g = malloc((size_t)n * sizeof *g);
        memcpy(g, pb.rep.src_grad[s], (size_t)n * sizeof *g);
        const double err = fd_error(&pb, pb.rep.src[s], g, n);
        EQ_EXPECT(err < 1e-6, "tp %d site %d sources: finite-difference error %.3g", tp, s, err);
        printf("tp %d site %d sources FD error %.2g\n", tp, s, err);
        free(g);
    }
    spd_replica_free(&pb.rep);
    for (int s = 0; s < spd_n_sites(&pb.z); s++) spd_params_free(&pb.sites[s]);
}

static void test_surrogate(void)
{
    const double z[3] = {-0.5, 0.5, 1.5}, dout[3] = {2.0, 2.0, 2.0};
    double dz[3] = {0, 0, 0}, up[3] = {0, 0, 0};
    spd_lower_leaky_backward(EQ_FP64, 3, dz, dout, z, SPD_LEAKY_ALPHA);
    EQ_EXPECT(dz[0] == 2.0 * SPD_LEAKY_ALPHA && dz[1] == 2.0 && dz[2] == 0.0, "lower: %g %g %g", dz[0], dz[1], dz[2]);
    spd_upper_leaky_forward(EQ_FP64, 3, up, z, SPD_LEAKY_ALPHA);
    EQ_EXPECT(up[0] == 0.0 && up[1] == 0.5 && fabs(up[2] - (1.0 + 0.5 * SPD_LEAKY_ALPHA)) < 1e-15, "upper: %g %g %g",
              up[0], up[1], up[2]);
}

/* Faithfulness by hand: W = 0 [1 x 1], V = 2, U = 3 -> E = -6, loss coef 36, dV = -2 coef E U = 36 coef. */
static void test_faithfulness_by_hand(void)
{
    const double V = 2, U = 3, E = -6;
    double loss = 0, dV = 0, dU = 0;
    EQ_EXPECT_OK(spd_faithfulness(EQ_FP64, 1, 1, 1, &V, &U, &E, 1.0, 1.0, &loss, &dV, &dU));
    EQ_EXPECT(loss == 36.0 && dV == 36.0 && dU == 24.0, "faithfulness: loss %g dV %g dU %g", loss, dV, dU);
}

/* Importance minimality: the world-size stand-in on a quarter of the tokens with ws = 4 equals
 * the global form only where the quarters' sums are equal; with beta's log it is not linear. */
static void test_imp_min_forms(void)
{
    const double ci[4] = {0.5, 0.5, 0.5, 0.5};
    double S_all, S_one, l_all = 0, l_one = 0, d_all[4] = {0}, d_one[1] = {0};
    spd_imp_min_sums(EQ_FP64, 4, 1, ci, 1.0, &S_all);
    spd_imp_min_sums(EQ_FP64, 1, 1, ci, 1.0, &S_one);
    spd_imp_min(EQ_FP64, 4, 1, ci, &S_all, 4.0, 1.0, 1.0, 1.0, &l_all, d_all);
    spd_imp_min(EQ_FP64, 1, 1, ci, &S_one, 1.0, 4.0, 1.0, 1.0, &l_one, d_one);
    EQ_EXPECT(fabs(l_all - l_one) < 1e-12 && fabs(d_all[0] * 4.0 - d_one[0]) < 1e-12,
              "equal quarters: global %g vs stand-in %g", l_all, l_one);
    /* hand value: S = 2 (+ eps), n = 4: 0.5 + 0.5 * 0.5 * log2(3) */
    EQ_EXPECT(fabs(l_all - (0.5 + 0.25 * log2(3.0))) < 1e-9, "imp-min value %.17g", l_all);
}

int main(void)
{
    test_surrogate();
    test_faithfulness_by_hand();
    test_imp_min_forms();
    test_gradients(1);
    test_gradients(2);
    return eq_test_finish("spd_step_test");
}
