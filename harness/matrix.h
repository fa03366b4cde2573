/* The equivalence matrix: every case x dtype x layout against its dp1-tp1 reference, one row per
 * cell with what the case expects and what the comparison showed. One reference run per
 * (case, dtype) serves all of that dtype's layouts. Every cell is checked (size known, layout
 * divides the sizes, tolerance entries present) before anything runs.
 *
 * The rows and the comparisons are parallel arrays, so the per-tensor report writers
 * (reports/report.h) take m.comparisons directly:
 *     eq_report_markdown(fp, m.comparisons, m.count);
 * and the matrix summary writers are in reports/matrix_report.h. */
#ifndef EQUIV_HARNESS_MATRIX_H
#define EQUIV_HARNESS_MATRIX_H

#include <stdint.h>
#include <stdio.h>

#include "harness/case_file.h"
#include "harness/compare.h"
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

typedef struct {
    char case_name[EQ_CASE_KEY_MAX];
    eq_dtype dtype;
    eq_layout layout;
    eq_expect expected;          /* the case's expectation for (dtype, layout) */
    eq_observed observed;        /* worst among activation, gradient and loss results; bit-exact
                                    when the comparison has none */
    int as_expected;             /* every result of the comparison (inputs, params too) as expected */
    int n_unexpected;            /* results not as expected */
    int n_tensors;               /* results compared */
    char worst_path[EQ_NAME_MAX]; /* "" when every activation, gradient and loss is bit-exact */
    double worst_max_abs;        /* that tensor's max |d|; 0 when worst_path is "" */
    double seconds;              /* wall time of the cell; the first cell of a (case, dtype) also
                                    carries its reference run */
} eq_matrix_row;

typedef struct {
    eq_matrix_row *rows;
    eq_comparison *comparisons;  /* comparisons[i] belongs to rows[i] */
    int count;
    char size[EQ_CASE_KEY_MAX];
    eq_algo algo;
    uint64_t seed;
    char backend[256];           /* the backend's own description (OpenBLAS core, kernels) */
    double seconds;              /* wall time of the whole matrix */
} eq_matrix;

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

/* Cells not as expected. */
int eq_matrix_unexpected_cells(const eq_matrix *m);

void eq_matrix_free(eq_matrix *m);

#endif
