/* The training curve of one comparison (--steps N): what the driver (harness/driver/train.h) measured
 * and classified, and what the reports read (reports/report_steps.h). Data and its verdict only:
 * the driver that runs the steps is harness/driver/train.c. */
#ifndef EQUIV_HARNESS_TRAIN_CURVE_H
#define EQUIV_HARNESS_TRAIN_CURVE_H

#include "harness/optimizer.h"
#include "harness/step_curve.h"

typedef struct eq_steps_curve {
    int n_steps;
    eq_optimizer_config opt;
    eq_dtype dtype;           /* the runs' dtype (the classifier's thresholds) */
    eq_step_point *points;    /* [n_steps] step t at points[t - 1] */
    eq_param_curve *params;   /* [n_params] every trained parameter, in capture order; rel [n_steps] */
    int n_params;
    int n_frozen;             /* parameters without a gradient, passed through unchanged */
    eq_curve_verdict verdict;
    int bug_injected;         /* the layout's run carries an --inject bug: factor or growing expected */
    int as_expected;          /* eq_steps_curve_judge's: identical/rounding without a bug, factor/growing with one */
} eq_steps_curve;

/* Sets c->as_expected from the verdict's class and bug_injected, and returns the number of results
 * not as expected it adds to its comparison: 0, or 1 when the curve is not as expected. */
int eq_steps_curve_judge(eq_steps_curve *c);

/* Frees what c holds (not c itself); safe on a zeroed or half-built curve. */
void eq_steps_curve_free(eq_steps_curve *c);

#endif
