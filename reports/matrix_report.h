/* Summary writers for the equivalence matrix (harness/matrix_result.h): one row per cell
 *   case | dtype | layout | expected | observed | verdict | worst tensor | max |d|
 * with the verdict "as expected" or "NOT as expected", and the closing line of
 * eq_matrix_summary(). The per-tensor tables of every cell come from reports/report.h on
 * m->comparisons. */
#ifndef EQUIV_REPORTS_MATRIX_REPORT_H
#define EQUIV_REPORTS_MATRIX_REPORT_H

#include <stdio.h>

#include "harness/matrix_result.h"

/* "equiv matrix: 8 cells, all as expected" or "equiv matrix: 8 cells, 2 NOT as expected". */
const char *eq_matrix_summary(const eq_matrix *m, char *buf, size_t len);

/* Markdown: a heading naming size, algorithm and seed, the backend line, the table, then the
 * summary line. ASCII only. */
eq_status eq_matrix_markdown(FILE *out, const eq_matrix *m);

/* JSON: {"equiv_matrix": 1, "version", "size", "algorithm", "seed", "backend", "seconds",
 *        "cells": [{"case", "dtype", "layout", "dp", "tp", "expected", "observed", "as_expected",
 *                   "unexpected", "tensors", "worst_path" (null if none), "worst_max_abs",
 *                   "seconds"}],
 *        "summary": {"cells", "not_as_expected", "line"}} */
eq_status eq_matrix_json(FILE *out, const eq_matrix *m);

/* HTML: one self-contained page (inline CSS, no scripts): the summary line (green or red), then
 * the table with rows not as expected highlighted (class "fail"). */
eq_status eq_matrix_html(FILE *out, const eq_matrix *m);

#endif
