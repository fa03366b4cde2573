/* Report writers. A report is a list of comparisons (one per case x dtype x layout against its
 * reference), written for a person (Markdown: the per-layer tables of seed 002, a PR comment; HTML:
 * the same tables with divergence-by-depth plots) or a program (JSON: every metric). All carry the
 * summary line from eq_report_summary(). */
#ifndef EQUIV_REPORTS_REPORT_H
#define EQUIV_REPORTS_REPORT_H

#include <stdio.h>

#include "harness/compare.h"

/* Markdown: a pointer to README's "How to read this report"; per comparison a heading naming case,
 * dtype, layouts, algorithm; its verdict in one paragraph ("**Verdict: FAIL.** 75 of 116 tensors
 * not as expected; it starts at `layers/00/attn_out` (the first in capture order): DIAGNOSIS.
 * Assembly findings: 0."); a line on parameters and inputs (e.g. "2 parameters bit-identical
 * after gathering"); the per-layer tables, verdict first, numbers in significant digits:
 *   | verdict | Layer | Tensor | observed | max |d| | mean |d| | median |d| | %>1e-4 | %>1e-3 |
 *   %>1e-2 | ULP@max | max ULP | mean(dist/ref) | worst rel |
 * under "#### Activations", "#### Gradients" and "#### Losses", each in capture order and only
 * when the comparison has results of that role; then every result not as expected, worst first,
 * with its diagnosis. The whole report ends with the summary line. */
eq_status eq_report_markdown(FILE *out, const eq_comparison *cmps, int n);

/* HTML: one self-contained page (inline CSS and SVG; no scripts, external styles or fonts) for
 * reading a run in a browser. The summary line comes first, green when everything is as expected
 * and red otherwise, then a link to the "How to read this report" glossary written at the end
 * (reports/how_to_read.h). Comparisons of the same case and layouts sit side by side (bf16 left of
 * fp32), each with: a log-scale plot of max and mean |d| against layer for activations, and one
 * for gradients when it has any (at most the 4 tensor names with the largest max |d| per plot, the
 * rest named in the caption; the tolerance drawn in each: one dashed line for a flat atol, else a
 * dotted line per tensor at atol' + rtol rms(ref); a red ring on each point not as expected); the
 * per-layer tables
 *   verdict | Layer | Tensor | observed | max |d| | mean |d| | %>1e-3 | %>1e-2 | ULP@max | max ULP |
 *   mean(dist/ref)
 * (seed 002 sections 3-4) for activations, gradients and losses, failing rows highlighted
 * (class "fail", row id "cN/<path>" for comparison N); then the results not as expected, worst
 * first, with their diagnoses. */
eq_status eq_report_html(FILE *out, const eq_comparison *cmps, int n);

/* JSON document {"equiv_report": 1, "version": ..., "comparisons": [...], "summary": {...}}
 * holding every metric of every tensor. */
eq_status eq_report_json(FILE *out, const eq_comparison *cmps, int n);

/* "equiv: 3 comparisons, 12 tensors, all as expected" or
 * "equiv: 3 comparisons, 12 tensors, 2 NOT as expected (first: ...; worst: row_parallel bf16 tp4 layers/00/out)";
 * assembly findings (harness/run_load.h) are counted on their own after that, the first one quoted:
 * "equiv: 1 comparison, 24 tensors, all as expected, 1 assembly finding NOT as expected (first: RUN, test
 * run: blocks.0.w (param) should be replicated over dp but differs: ...)". A buffer of 1024 holds it. */
const char *eq_report_summary(const eq_comparison *cmps, int n, char *buf, size_t len);

/* The first result not as expected in capture order (the forward's order, then the backward's),
 * i.e. where a divergence starts; NULL if all are as expected. */
const eq_tensor_result *eq_report_first_unexpected(const eq_comparison *c);

/* The results of c not as expected, worst first (eq_report_worse_first, then capture order), in
 * a malloc'd array the caller frees; *n of them. */
eq_status eq_report_unexpected_worst_first(const eq_comparison *c, const eq_tensor_result ***sorted, int *n);

/* Total results not as expected across comparisons. */
int eq_report_unexpected(const eq_comparison *cmps, int n);

/* Shared by the writers (defined in report_summary.c). */
/* "row_parallel bf16 dp1-tp4": case, dtype and layout of a run. */
const char *eq_report_run_name(const eq_run_meta *meta, char *buf, size_t len);
/* How bad a result is, for "worst first": NON-FINITE before everything, then by max_tol_ratio.
 * Negative when a is worse than b, positive when b is worse, 0 when alike (qsort-style). */
int eq_report_worse_first(const eq_tensor_result *a, const eq_tensor_result *b);

/* The verdict of a result in one word: "pass" (as expected) or "FAIL" (defined in report_markdown.c). */
const char *eq_report_verdict_word(const eq_tensor_result *r);
/* What was observed, one word per state (eq_observed_name), with "(expected X)" beside it where the
 * row fails or the tensor's expectation is not comparison_expect: "OUTSIDE (expected differs)". */
const char *eq_report_observed_text(const eq_tensor_result *r, eq_expect comparison_expect, char *buf, size_t len);

/* Number formats of the tables, shared so that Markdown and HTML print alike (defined in
 * report_markdown.c). A |d| with `decimals` decimals as seed 002 prints it (6 for Max, 8 for
 * Mean), or %.3e when nonzero and below 1e-6; a share (0..1) as "41.61%", or "<0.01%" when
 * nonzero and below 0.005%. */
const char *eq_report_format_value(double v, int decimals, char *buf, size_t len);
const char *eq_report_format_share(double fraction, char *buf, size_t len);

#endif
