/* The equivalence matrix: every case x dtype x layout against its dp1-tp1 reference, one row per
 * cell with what the case expects and what the comparison showed. One reference run per
 * (case, dtype) serves all of that dtype's layouts: the cell loop that run uses too (harness/driver/cells.h).
 * Every cell is checked (size known, layout divides the sizes, tolerance entries present) before
 * anything runs.
 *
 * The rows and the comparisons are parallel arrays, so the per-tensor report writers
 * (reports/report.h) take m.comparisons directly:
 *     eq_report_markdown(fp, m.comparisons, m.count);
 * and the matrix summary writers are in reports/matrix_report.h. The rows and the matrix they make
 * are in harness/matrix_result.h, apart from this run loop, so that the reports need only them. */
#ifndef EQUIV_HARNESS_DRIVER_MATRIX_H
#define EQUIV_HARNESS_DRIVER_MATRIX_H

#include <stdint.h>
#include <stdio.h>

#include "harness/case_file.h"
#include "harness/matrix_result.h"
#include "harness/progress.h"
#include "reductions/collectives.h"

typedef struct {
    const char *cases_dir;       /* folder of <case>.ini files */
    const char *tolerances_path; /* golden/tolerances.ini */
    const char *case_filter;     /* one case by name; NULL = every case in cases_dir */
    int dtype_filter;            /* -1 = every dtype a case lists, else an eq_dtype */
    const char *size;            /* the size section every case runs at, e.g. "ci" */
    eq_algo algo;                /* collective algorithm of every run */
    uint64_t seed;
    eq_progress *progress;       /* each run and its phases (harness/progress.h); NULL = silent */
} eq_matrix_options;

/* Runs the matrix into *out (initialised here; free with eq_matrix_free, also after a failure).
 * An unknown case in case_filter, a dtype_filter out of range or matching no cell, an unknown
 * size or a layout that does not divide a size are EQ_ERR_USAGE before anything runs. The
 * worst tensor of a row is its worst result not as expected (reports/report.h's ordering: non-
 * finite first, then by max |d| / tolerance); when all are as expected, the activation, gradient
 * or loss closest to its tolerance. */
eq_status eq_matrix_run(const eq_matrix_options *opt, eq_matrix *out);

/* Fills a row's observed, as_expected, counts and worst tensor from its comparison (used by
 * eq_matrix_run; exposed so that a caller editing a comparison can refresh its row). */
void eq_matrix_row_summarise(eq_matrix_row *row, const eq_comparison *cmp);

#endif
