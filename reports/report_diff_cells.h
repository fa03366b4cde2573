/* The data of `equiv diff` (report_diff.h), shared by its two halves: report_diff_cells.c reads
 * the two JSON reports, matches their cells and classifies every tensor's change;
 * report_diff_comment.c writes the Markdown comment from those cells. */
#ifndef EQUIV_REPORTS_REPORT_DIFF_CELLS_H
#define EQUIV_REPORTS_REPORT_DIFF_CELLS_H

#include <jansson.h>
#include <stdio.h>

#include "harness/base/status.h"
#include "reports/report_diff.h"

/* A few ULPs of the reference: a max |d| up to NOISE_ULPS units in the last place of the
 * reference's largest magnitude (in the run's dtype) is what one or two roundings of that element
 * make, whatever the layout. */
#define NOISE_ULPS 4

/* What happened to a tensor, the regressions first and worst first. */
typedef enum {
    CHANGE_NONE, CHANGE_NEW_FAILURE, CHANGE_STOPPED_EXACT, CHANGE_GREW, CHANGE_ONLY_BASE, CHANGE_ONLY_HEAD,
    CHANGE_FIXED, CHANGE_BECAME_EXACT, CHANGE_SHRANK, CHANGE_COUNT
} change_kind;
#define IS_REGRESSION(kind) ((kind) >= CHANGE_NEW_FAILURE && (kind) <= CHANGE_GREW)

typedef struct {
    json_t *base, *head; /* the result objects; one is NULL for a tensor on one side only */
    change_kind kind;
    double factor;       /* head / base of max or mean |d|, whichever rose more, the base taken
                            at least at the noise floor (NAN: none) */
    int from_noise;      /* the base of that factor was at or under the noise floor */
    int order;           /* capture order, to keep ties in it */
} tensor_change;

typedef struct {
    json_t *base, *head;    /* the comparison objects; one is NULL for a cell on one side only */
    tensor_change *changes; /* every tensor that changed, worst first */
    int n_changes, n_regressed;
    int counts[CHANGE_COUNT];
    double worst_factor; /* largest factor of a tensor on both sides (NAN: none) */
    int worst_from_noise; /* that factor's base was noise */
} cell_diff;

extern const char *const eq_diff_change_names[CHANGE_COUNT];

/* A string field of a report object ("" when absent). */
const char *eq_diff_text(const json_t *object, const char *key);
/* A result's metric, as report_json.c writes it (NAN when absent or not a number). */
double eq_diff_metric(const json_t *result, const char *key);

/* Loads an equiv JSON report and checks the fields the diff reads (EQ_ERR_INPUT naming the file). */
eq_status eq_diff_load_report(const char *path, json_t **out);
/* The cells of base and head matched by their test run's EQ_CELL_DIFF fields, base order first. */
eq_status eq_diff_match_cells(json_t *base, json_t *head, cell_diff **cells, int *n_cells);
/* Every tensor's change in one cell, worst first (cell->changes). */
eq_status eq_diff_cell(cell_diff *cell, const eq_diff_options *opt);

/* The comment for the cells (report_diff_comment.c); n_regressions as eq_report_diff counts them. */
void eq_diff_write_comment(FILE *f, const cell_diff *cells, int n_cells, int n_regressions, const eq_diff_options *opt);

#endif
