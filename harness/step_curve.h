/* A many-step run's divergence curve (--steps N) and what it says: does the layout's training
 * drift from the reference's like rounding (bounded, growing no faster than about sqrt(step)
 * relative to the distance trained) or like a bug (a constant factor in the gradients or the
 * updates, which Adam can hide from the parameters but not from the gradient norm)? */
#ifndef EQUIV_HARNESS_STEP_CURVE_H
#define EQUIV_HARNESS_STEP_CURVE_H

#include <stdint.h>

#include "harness/base/status.h"
#include "harness/base/tensor.h"

/* One step of both runs: the quantities before the update (loss, gradients) and after it (params). */
typedef struct {
    double loss_ref, loss_test;           /* the global loss of the step's batch */
    double grad_norm_ref, grad_norm_test; /* L2 norm over every trained parameter's gradient, fp64 */
    double param_dist;                    /* ||p_test - p_ref|| after the update, over every trained parameter */
    double trained_dist;                  /* ||p_ref - p_ref at step 0||: how far the reference has moved */
    double param_max_abs;                 /* max |p_test - p_ref| over every trained parameter */
} eq_step_point;

/* Per parameter, per step: its own divergence, for the report's worst parameters. */
typedef struct {
    char path[160];   /* "layers/03/fc1_weight" */
    double *rel;      /* [n_steps] ||p_test - p_ref|| / ||p_ref - p_ref0|| of this parameter (0 where it has not moved) */
} eq_param_curve;

typedef enum {
    EQ_CURVE_IDENTICAL = 0, /* every step bit-identical */
    EQ_CURVE_ROUNDING = 1,  /* bounded: drift small and growing sub-linearly */
    EQ_CURVE_FACTOR = 2,    /* a bug: a gradient-norm or update ratio away from 1 */
    EQ_CURVE_GROWING = 3,   /* a bug: drift growing faster than rounding allows, no constant factor */
} eq_curve_class;
const char *eq_curve_class_name(eq_curve_class c); /* "identical", "rounding", "factor", "growing" */

typedef struct {
    eq_curve_class cls;
    double drift;            /* param_dist / trained_dist at the last step */
    double growth_exponent;  /* b of param_dist ~ c step^b, least squares in log-log over the steps with param_dist > 0 */
    double grad_ratio;       /* grad_norm_test / grad_norm_ref at the step furthest from 1 */
    int grad_ratio_step;     /* that step (1-based) */
    double loss_rel;         /* |loss_test - loss_ref| / |loss_ref| at the last step: "identical convergence" as a number */
    char why[320];           /* one sentence a reviewer reads: the numbers behind the class */
} eq_curve_verdict;
/* drift, grad_ratio and loss_rel are +inf where the reference's denominator is 0 and the layout's
 * numerator is not, and inf or nan where the layout's run diverged (class growing): a JSON writer
 * maps them (e.g. to null). A factor's own step (the one the why names) is the furthest from 1
 * among the steps whose parameters were still rounding apart; grad_ratio_step is over all steps. */

/* Classifies n points (steps 1..n) of a run in `dtype` (its unit roundoff sets the thresholds;
 * document them in the .c with where each comes from). n < 1 is EQ_ERR_INPUT. */
eq_status eq_curve_classify(const eq_step_point *pts, int n, eq_dtype dtype, eq_curve_verdict *out);

#endif
