/* The training curve of a many-step run (--steps N, harness/driver/train.h) in the reports: the answer to
 * "does the layout converge like the reference?" as numbers. Each writer calls its function once
 * per comparison; a comparison without a curve (one step) writes nothing.
 *
 * Markdown and HTML, under "Training curve: N steps, OPTIMIZER (lr X, ...)":
 *   the class and whether it was expected, the classifier's sentence (`why`);
 *   the headline "identical convergence as a number": the last step's |d loss|/loss and drift;
 *   the per-step table
 *     | step | loss ref | loss layout | |d loss|/loss | grad norm ratio | param max |d| | drift |
 *   with drift = ||p_layout - p_ref|| / ||p_ref - p_ref at step 0|| over the trained parameters'
 *   master weights after the step's update, and the grad norm ratio = ||g_layout|| / ||g_ref||;
 *   the 5 parameters that diverged most by the last step (their own drift), with their peak.
 * HTML adds a log-scale chart of drift and grad norm ratio against step (reports/plot_svg.h).
 * JSON: the comparison's "steps" object (reports/report.schema.json): the optimizer, the verdict's
 * numbers, every step's point and every trained parameter's curve. */
#ifndef EQUIV_REPORTS_REPORT_STEPS_H
#define EQUIV_REPORTS_REPORT_STEPS_H

#include <jansson.h>
#include <stdio.h>

#include "harness/compare.h"
#include "harness/train_curve.h"

/* How many parameters the Markdown and HTML list, worst first. */
#define EQ_REPORT_STEPS_WORST 5

typedef struct eq_renderer eq_renderer; /* reports/report_model.h */

/* The training curve of c (nothing where c->steps is NULL) through the renderer: its heading, its
 * verdict and numbers, the per-step table and the worst parameters' table (report_columns-style
 * tables), the HTML chart through rd->steps_chart where the format has one. */
eq_status eq_report_steps_write(const eq_renderer *rd, const eq_comparison *c);
/* The chart of drift and grad norm ratio by step, an SVG figure for the HTML report. */
eq_status eq_report_steps_chart_html(FILE *out, const eq_comparison *c);
/* The "steps" object of c's curve; NULL when out of memory (c->steps must be set). */
json_t *eq_report_steps_json(const eq_steps_curve *curve);

/* For the summary line: "the training curve of gpt bf16 dp2-tp2 (factor, expected identical or
 * rounding)" for the first comparison whose curve is not as expected; NULL when none is. */
const char *eq_report_steps_unexpected(const eq_comparison *cmps, int n, char *buf, size_t len);

/* "identical or rounding" (no bug injected) or "factor or growing" (an injected bug). */
const char *eq_report_steps_expected(const eq_steps_curve *curve);

#endif
