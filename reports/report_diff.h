/* equiv diff: what a change did to every layer's divergence, from the JSON reports (report_json.c)
 * of the base and the head commit, written as a Markdown pull-request comment.
 *
 * Comparisons ("cells") are matched by the test run's case, dtype, layout (dp, tp), algorithm,
 * gradient convention and size; results within a cell by tensor path. A report holds each cell
 * once and each path once per cell (a second copy would pair with nothing and regress unseen:
 * refused, naming it). A result's layer is -1..9999 (-1: none, as compare writes a loss of no
 * layer; "-" in a chart). Per tensor, one change,
 * the worst that applies:
 *   new failure          as expected in base, not in head                    (regression)
 *   no longer bit-exact  observed bit-exact in base, not in head             (regression)
 *   grew                 head max or mean |d| > growth x base and > floor    (regression)
 *   fixed                not as expected in base, as expected in head
 *   became bit-exact     not bit-exact in base, bit-exact in head
 *   shrank               head max or mean |d| < base / growth, base > floor
 *   only in base, only in head (a tensor captured on one side)
 * A cell only in base (missing from head) is a regression too; a cell only in head is not.
 * The floor is the tensor's noise floor: the largest of the option's absolute floor, its
 * rounding-error bound (theory.det_bound_max) where the report has one, and 4 ULPs of its
 * reference's largest magnitude (metrics.ref_absmax) in the run's dtype, on either side. A
 * growth is measured from the floor when the base is under it ("2.1e+03x from noise"): a base of
 * 1e-9 makes no 5e6x.
 *
 * The comment: a one-line verdict. When nothing regressed, that line and the table of cells in a
 * collapsed <details>. Otherwise a table of the cells that regressed or changed (base verdict ->
 * head verdict, worst growth), the unchanged cells' table collapsed, then per regressed cell a
 * <details> block with its regressed tensors worst first and a Mermaid xychart of max |d| by
 * layer of the tensor names that regressed (at most 3, worst growth first), base against head,
 * with the lines named in the text before it (Mermaid draws no legend). It stays under GitHub's
 * 65536-character limit for a comment by cutting lists short ("... and N more"). */
#ifndef EQUIV_REPORTS_REPORT_DIFF_H
#define EQUIV_REPORTS_REPORT_DIFF_H

#include <stdio.h>

#include "harness/base/status.h"

typedef struct {
    double growth; /* a tensor grew when head max or mean |d| > growth * base (and > its floor) */
    double floor;  /* |d| at or below this is noise for every tensor (its own floor may be higher) */
} eq_diff_options;

/* growth 1.5, floor 1e-7. */
eq_diff_options eq_diff_options_default(void);

/* Reads both reports and writes the comment to markdown_out. *n_regressions (when not NULL) gets
 * the number of regressed tensors plus cells missing from head (0 on an error): the caller's
 * exit status is 1 when it is > 0. opt NULL means the defaults. EQ_ERR_INPUT (naming the file) when a report is
 * missing, not JSON, not an equiv report ("equiv_report": 1), lacks a field the diff reads or holds
 * a cell or a tensor twice;
 * EQ_ERR_USAGE for growth < 1 or a negative floor; EQ_ERR_IO when the comment cannot be written. */
eq_status eq_report_diff(const char *base_path, const char *head_path, const eq_diff_options *opt,
                         FILE *markdown_out, int *n_regressions);

#endif
