/* Report writers. A report is a list of comparisons (one per case x dtype x layout against its
 * reference), written for a person (Markdown: the per-layer tables of seed 002, a PR comment) or a
 * program (JSON: every metric). Both end with the summary line from eq_report_summary(). */
#ifndef EQUIV_REPORTS_REPORT_H
#define EQUIV_REPORTS_REPORT_H

#include <stdio.h>

#include "harness/compare.h"

/* Markdown: per comparison a heading naming case, dtype, layouts, algorithm; a line on parameters
 * and inputs (e.g. "2 parameters bit-identical after gathering"); the per-layer table
 *   | Layer | Tensor | Max | Mean | Median | %>1e-4 | %>1e-3 | %>1e-2 | max ULP | verdict |
 * for activations, gradients and losses in capture order; then every result not as expected,
 * worst first, with its diagnosis. The whole report ends with the summary line. */
eq_status eq_report_markdown(FILE *out, const eq_comparison *cmps, int n);

/* JSON document {"equiv_report": 1, "version": ..., "comparisons": [...], "summary": {...}}
 * holding every metric of every tensor. */
eq_status eq_report_json(FILE *out, const eq_comparison *cmps, int n);

/* "equiv: 3 comparisons, 12 tensors, all as expected" or
 * "equiv: 3 comparisons, 12 tensors, 2 NOT as expected (worst: row_parallel bf16 tp4 layers/00/out)". */
const char *eq_report_summary(const eq_comparison *cmps, int n, char *buf, size_t len);

/* Total results not as expected across comparisons. */
int eq_report_unexpected(const eq_comparison *cmps, int n);

/* Shared by the writers (defined in report_summary.c). */
/* "row_parallel bf16 dp1-tp4": case, dtype and layout of a run. */
const char *eq_report_run_name(const eq_run_meta *meta, char *buf, size_t len);
/* How bad a result is, for "worst first": NON-FINITE before everything, then by max_tol_ratio.
 * Negative when a is worse than b, positive when b is worse, 0 when alike (qsort-style). */
int eq_report_worse_first(const eq_tensor_result *a, const eq_tensor_result *b);

#endif
