/* The equivalence matrix's result (harness/driver/matrix.h runs it): one row per cell with what the case
 * expects and what the comparison showed, the rows and the comparisons in parallel arrays. What the
 * matrix's report writers (reports/matrix_report.h) read. */
#ifndef EQUIV_HARNESS_MATRIX_RESULT_H
#define EQUIV_HARNESS_MATRIX_RESULT_H

#include <stdint.h>

#include "harness/case_file.h"
#include "harness/compare.h"
#include "reductions/collectives.h"

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

/* Cells not as expected. */
int eq_matrix_unexpected_cells(const eq_matrix *m);

void eq_matrix_free(eq_matrix *m);

#endif
