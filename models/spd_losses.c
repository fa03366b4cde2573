#include "models/spd_losses.h"

#include <math.h>
#include <stdlib.h>

#include "models/spd_rows.h"

double spd_pnorm(int64_t step, int64_t steps)
{
    double frac = steps > 0 ? (double)step / (double)steps : 1.0;
    if (frac > 1.0) frac = 1.0;
    return SPD_P_START + (SPD_P_END - SPD_P_START) * frac;
}

void spd_mse(eq_dtype dt, int64_t n, const double *y, const double *target, double norm, double coef, double *loss,
             double *dy)
{
    double acc = 0;
    for (int64_t i = 0; i < n; i++) {
        const double e = y[i] - target[i];
        acc += e * e;
        dy[i] = spd_rnd(dt, coef * 2.0 * e / norm);
    }
    *loss = coef * acc / norm;
}

eq_status spd_faithfulness(eq_dtype dt, int64_t D, int64_t O, int64_t C, const double *V, const double *U,
                           const double *E, double norm, double coef, double *loss, double *dV, double *dU)
{
    const int64_t n = D * C > C * O ? D * C : C * O;
    double *Ut = malloc((size_t)(O * C) * sizeof *Ut), *a = malloc((size_t)n * sizeof *a); /* Ut [O, C] */
    if (Ut == NULL || a == NULL) {
        free(Ut), free(a);
        return EQ_FAIL(EQ_ERR_NOMEM, "spd: no memory for the faithfulness gradient [%lld, %lld]", (long long)D, (long long)O);
    }
    double acc = 0;
    for (int64_t i = 0; i < D * O; i++) acc += E[i] * E[i];
    *loss = coef * acc / norm;
    const double k = -2.0 * coef / norm;
    for (int64_t c = 0; c < C; c++)
        for (int64_t o = 0; o < O; o++) Ut[o * C + c] = U[c * O + o];
    spd_rows_mm(D, O, C, E, O, Ut, C, NULL, 0, a); /* a [D, C] = E U^T */
    for (int64_t i = 0; i < D * C; i++) dV[i] = spd_rnd(dt, dV[i] + spd_rnd(dt, k * a[i]));
    spd_rows_outer(D, C, O, V, C, NULL, NULL, E, O, a); /* a [C, O] = V^T E */
    for (int64_t i = 0; i < C * O; i++) dU[i] = spd_rnd(dt, dU[i] + spd_rnd(dt, k * a[i]));
    free(Ut), free(a);
    return EQ_OK;
}

void spd_imp_min_sums(eq_dtype dt, int64_t T, int64_t C, const double *ci_up, double p, double *S)
{
    for (int64_t c = 0; c < C; c++) {
        double acc = 0;
        for (int64_t t = 0; t < T; t++) acc += pow(ci_up[t * C + c] + SPD_IMP_EPS, p);
        S[c] = spd_rnd(dt, acc);
    }
}

void spd_imp_min(eq_dtype dt, int64_t T, int64_t C, const double *ci_up, const double *S, double n, double ws,
                 double p, double coef, double *loss, double *dci_up)
{
    double acc = 0;
    for (int64_t c = 0; c < C; c++) {
        const double s = S[c], lg = log2(1.0 + ws * s);
        acc += s / n + SPD_IMP_BETA * (s / n) * lg;
        /* dL/dS_c = 1/n + beta/n log2(1 + ws S) + beta S/n ws / ((1 + ws S) ln 2) */
        const double dS = coef * (1.0 / n + SPD_IMP_BETA / n * lg + SPD_IMP_BETA * s / n * ws / ((1.0 + ws * s) * log(2.0)));
        for (int64_t t = 0; t < T; t++) {
            const double g = dS * p * pow(ci_up[t * C + c] + SPD_IMP_EPS, p - 1.0);
            dci_up[t * C + c] = spd_rnd(dt, dci_up[t * C + c] + g);
        }
    }
    *loss = coef * acc;
}

void spd_adam_ascent(eq_dtype dt, int64_t n, double *x, const double *g, double *m, double *v, int k)
{
    const double c1 = 1.0 - pow(SPD_ADAM_BETA1, k), c2 = 1.0 - pow(SPD_ADAM_BETA2, k);
    for (int64_t i = 0; i < n; i++) {
        m[i] = spd_rnd(dt, SPD_ADAM_BETA1 * m[i] + (1.0 - SPD_ADAM_BETA1) * g[i]);
        v[i] = spd_rnd(dt, SPD_ADAM_BETA2 * v[i] + (1.0 - SPD_ADAM_BETA2) * g[i] * g[i]);
        const double step = SPD_PPGD_LR * (m[i] / c1) / (sqrt(v[i] / c2) + SPD_ADAM_EPS);
        x[i] = spd_rnd(dt, fmin(1.0, fmax(0.0, x[i] + step)));
    }
}
