/* The training curve of two runs of many steps (harness/run_steps.h): the reference's and the
 * test run's numbers step by step as an eq_steps_curve (harness/train_curve.h), classified with the
 * same classes and thresholds as `--steps N` (harness/step_curve.c).
 *
 * Per common step t (1 .. the shorter run's last; at least 2):
 *   - the losses and gradient norms (sqrt of the assembled ||g||^2) of both runs;
 *   - where both runs stored their parameters at step t and at step 0 (params_every > 0: the
 *     run directories RUN/params_NNNNNN), read and assembled as any run (harness/run_load.h):
 *     param_dist = ||p_test - p_ref||, trained_dist = ||p_ref - p_ref at step 0||, the largest
 *     |p_test - p_ref| and each parameter's own drift. A step without them repeats the last step's
 *     (0 before the first): without parameters the curve is judged on losses and gradient norms.
 *   - what assembling those parameter directories found (replicas that differ) into findings,
 *     "params_000005: ...", the first of each run.
 * The optimizer shown is the test run's (else the reference's); no bug is expected (identical or
 * rounding). EQ_ERR_INPUT, one line, where the runs share fewer than 2 steps. */
#ifndef EQUIV_HARNESS_RUN_STEPS_CURVE_H
#define EQUIV_HARNESS_RUN_STEPS_CURVE_H

#include "harness/run_steps.h"
#include "harness/train_curve.h"

/* out is zeroed here (free with eq_steps_curve_free); what assembling a run's parameter
 * directories found is appended to that run's findings (harness/run_steps.h). */
eq_status eq_run_steps_curve(eq_run_steps *ref, eq_run_steps *test, eq_steps_curve *out);

#endif
