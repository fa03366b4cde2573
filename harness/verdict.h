/* The verdict of a comparison, computed once, from its evidence.
 *
 * Comparing gathers evidence only (eq_compare_runs, harness/driver/runner.h): each result's metrics, the
 * expectation for its role or the case's line for its name (expect, expect_size), what rounding-
 * error theory says of it (theory) and how far each run is from the fp64 truth (truth); and the
 * comparison's findings from assembling the runs. eq_judge reads that evidence and writes, per result:
 *   observed     eq_observe of the metrics, raised from within to outside when |d| is above the
 *                deterministic rounding-error bound somewhere (no summation order explains it,
 *                however loose the tolerance table is), and, for a user's run, when its structure
 *                is not rounding's (a factor, a shift, one tp shard off: harness/structure.h) or,
 *                compared with --truth DIR, when it is less accurate than rounding allows
 *                (harness/truth.h);
 *   diagnosis    eq_diagnose of the metrics, or the bound's sentence when it raised observed; a
 *                differs whose stated size is not met gets the size it had and the one expected
 *                appended ("; rel 6.7e-11, expected differs rel 3e-4..1e-2");
 *   as_expected  the expectation met by observed and, for a differs, the size met by worst_rel or
 *                ls_scale (harness/tolerance.h);
 * a result whose tensor a finding says the ranks should hold one copy of and do not is not as expected
 * either (its diagnosis says so), so "where it starts" can name it in capture order, and is counted
 * once, by its finding;
 * and the comparison's n_unexpected: the results not as expected, plus one per finding, plus one
 * for a training curve not as expected (--steps N: eq_steps_curve_judge, harness/train_curve.h). Nothing
 * else writes these fields, so the verdict does not depend on the order the evidence arrived in,
 * and judging twice gives the same verdict. For equiv's own cases the truth run (--truth)
 * informs the reader, never the verdict: their bounds and tables already judge. */
#ifndef EQUIV_HARNESS_VERDICT_H
#define EQUIV_HARNESS_VERDICT_H

#include "harness/compare.h"

void eq_judge(eq_comparison *cmp);

#endif
