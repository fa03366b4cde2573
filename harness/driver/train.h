/* Many steps (--steps N): does the layout train like the reference? The reference (dp1-tp1, no
 * injected bug) and the layout run in lockstep for N optimizer steps (harness/optimizer.h: SGD or
 * Adam on fp32 master weights), each from its own current parameters:
 *
 *   step 1    the single-step run itself (its captures are dumped and compared as without --steps)
 *   step t    both runs from their parameters after step t-1, on the t-th batch (step_index t-1)
 *
 * Per step the driver reads each run's loss and every trained parameter's gradient from its
 * capture (a parameter P is trained when the capture holds "P_grad"; the others are passed through
 * unchanged), computes the step's point (harness/step_curve.h: the losses, the gradient norms over
 * every trained parameter in fp64, and after the update the distance between the two runs' master
 * weights and the reference's distance from its starting weights) and each parameter's own
 * divergence, then updates both runs' parameters with the same optimizer. The curve is classified
 * (eq_curve_classify) and judged (eq_steps_curve_judge, harness/train_curve.h): identical or
 * rounding is expected of a layout without an injected bug, factor or growing of one with
 * --inject; a curve not as expected counts as one result not as expected of its comparison
 * (exit 1).
 *
 * Distances are taken between the master weights (fp32; fp64 for an fp64 run), which are what
 * training holds: a bf16 run's weights round them. Steps after the first capture the lean way
 * where the model offers one (the size key lean_capture: activations but the block outputs left
 * out): the driver reads only losses, parameters and gradients. */
#ifndef EQUIV_HARNESS_DRIVER_TRAIN_H
#define EQUIV_HARNESS_DRIVER_TRAIN_H

#include "harness/driver/cli.h"
#include "harness/compare.h"
#include "harness/driver/runner.h"
#include "harness/train_curve.h"

/* Checks --steps against the case before anything runs: N > 1 needs a case whose model trains
 * (EQ_ERR_USAGE naming the case and the models that do). The options alone (--comm, --forward-only,
 * --optimizer and --lr without --steps) are checked by eq_cli_parse. */
eq_status eq_train_check(const eq_cli *cli, const eq_run_spec *spec);

/* The optimizer of the run: --optimizer's defaults (eq_optimizer_defaults), --lr when given. */
void eq_train_optimizer(const eq_cli *cli, eq_optimizer_config *out);

/* With --steps N > 1: runs steps 2..N of the reference (test_spec at dp1-tp1 without bugs) and of
 * test_spec, from step 1's captures ref1 and test1 (already run, dumped and compared into cmp),
 * attaches the curve to cmp->steps and judges cmp again (eq_judge, harness/verdict.h), which
 * counts a curve not as expected in cmp->n_unexpected. Without: nothing. */
eq_status eq_train_steps(const eq_cli *cli, const eq_run_spec *test_spec, const eq_capture *ref1,
                         const eq_capture *test1, eq_comparison *cmp);

/* The driver itself: n_steps >= 1 steps of ref_spec and test_spec with `opt`, step 1 being ref1 and
 * test1, into out (initialised and judged here; eq_steps_curve_free frees it, also after a
 * failure). The specs' params and step_index are the driver's; bug_injected from test_spec's bugs. */
eq_status eq_train_curve(const eq_run_spec *ref_spec, const eq_run_spec *test_spec, const eq_capture *ref1,
                         const eq_capture *test1, int n_steps, const eq_optimizer_config *opt, eq_steps_curve *out);

#endif
