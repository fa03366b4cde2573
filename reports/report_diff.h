/* equiv diff: what a change did to every layer's divergence, from the JSON reports (report_json.c)
 * of the base and the head commit, written as a Markdown pull-request comment.
 *
 * Comparisons ("cells") are matched by the test run's case, dtype, layout (dp, tp), algorithm,
 * gradient convention and size; results within a cell by tensor path. Per tensor, one change,
 * the worst that applies:
 *   new failure          as expected in base, not in head                    (regression)
 *   no longer bit-exact  observed bit-exact in base, not in head             (regression)
 *   grew                 head max or mean |d| > growth x base and > floor    (regression)
 *   fixed                not as expected in base, as expected in head
 *   became bit-exact     not bit-exact in base, bit-exact in head
 *   shrank               head max or mean |d| < base / growth, base > floor
 *   only in base, only in head (a tensor captured on one side)
 * A cell only in base (missing from head) is a regression too; a cell only in head is not.
 *
 * The comment: a one-line verdict, a table of cells (base verdict -> head verdict, worst growth),
 * then per regressed cell a <details> block with its regressed tensors worst first and a Mermaid
 * xychart of the block output's max |d| by layer, base against head. It stays under GitHub's
 * 65536-character limit for a comment by cutting lists short ("... and N more"). */
#ifndef EQUIV_REPORTS_REPORT_DIFF_H
#define EQUIV_REPORTS_REPORT_DIFF_H

#include <stdio.h>

#include "harness/status.h"

typedef struct {
    double growth; /* a tensor grew when head max or mean |d| > growth * base (and > floor) */
    double floor;  /* |d| at or below this is noise: growth up to it is ignored */
} eq_diff_options;

/* growth 1.5, floor 1e-7. */
eq_diff_options eq_diff_options_default(void);

/* Reads both reports and writes the comment to markdown_out. *n_regressions (when not NULL) gets
 * the number of regressed tensors plus cells missing from head (0 on an error): the caller's
 * exit status is 1 when it is > 0. opt NULL means the defaults. EQ_ERR_INPUT (naming the file) when a report is
 * missing, not JSON, not an equiv report ("equiv_report": 1) or lacks a field the diff reads;
 * EQ_ERR_USAGE for growth < 1 or a negative floor; EQ_ERR_IO when the comment cannot be written. */
eq_status eq_report_diff(const char *base_path, const char *head_path, const eq_diff_options *opt,
                         FILE *markdown_out, int *n_regressions);

#endif
