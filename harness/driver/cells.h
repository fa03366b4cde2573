/* The one cell loop of run, matrix and golden: plan the cells of a request, run and judge each.
 *
 * A cell is one layout's run of one case at one size and dtype with every setting of the request,
 * and what it is judged by: its tolerances (the dtype's, and for gradients the dtype.grad entry)
 * and what its case expects of it. The plan checks every cell (its tolerances, its layout against
 * the sizes, its reference's too) before anything runs or is written. Running a cell runs its
 * dp1-tp1 reference where the cell before it had another case or dtype (one reference serves all
 * of a dtype's layouts), runs the layout, and compares the two (eq_compare_runs: the verdict, once).
 * What each command writes stays its own: run the dumps and report.md/json/html, matrix its
 * summary, golden the envelopes. */
#ifndef EQUIV_HARNESS_DRIVER_CELLS_H
#define EQUIV_HARNESS_DRIVER_CELLS_H

#include "harness/compare.h"
#include "harness/driver/runner.h"
#include "harness/tolerance.h"

typedef struct {
    eq_run_spec spec; /* the layout's run: case, size, dtype, layout, injected bugs, every setting */
    eq_tolerance tol, grad_tol;
    eq_expect expect; /* eq_case_expectation of the case for the spec's backend, dtype and layout */
} eq_cell;

/* Appends the cells of one case to cells[*n] (room for `max`): for each of dtypes[n_dtypes], in
 * order, each layout of eq_plan_layouts(kase, asked), with base's settings and `bugs` in the
 * layout's run. Checks each dtype's tolerances (eq_plan_case_tolerances) and each cell's and
 * reference's layout (eq_run_check) first; EQ_ERR_USAGE when the cells outnumber max. */
eq_status eq_cells_plan(const eq_run_spec *base, eq_bug bugs, const eq_tolerance_table *table,
                        const char *table_path, const eq_dtype *dtypes, int n_dtypes, eq_layout asked,
                        eq_cell *cells, int max, int *n);

/* The cell's dp1-tp1 reference: its spec without the layout and without injected bugs. */
eq_run_spec eq_cell_reference(const eq_cell *cell);

/* The runs of cells[n] in order: one per cell and a reference where (case, dtype) changes. */
int eq_cells_runs(const eq_cell *cells, int n);

/* How a cell's runs are made: eq_run, or the command's own (run: timed, noted, dumped). */
typedef eq_status (*eq_cell_run_fn)(void *ctx, const eq_run_spec *spec, eq_capture *out);

/* What a command adds to a judged cell (run: --steps' steps 2..N, eq_train_steps), from the cell's
 * spec and the two step-1 captures. */
typedef eq_status (*eq_cell_judged_fn)(void *ctx, const eq_run_spec *spec, const eq_capture *ref,
                                       const eq_capture *test, eq_comparison *cmp);

/* The state of a loop over cells: the reference of the last (case, dtype), cached. */
typedef struct {
    eq_cell_run_fn run; /* NULL: eq_run */
    eq_cell_judged_fn judged; /* NULL: nothing */
    void *ctx;                /* of run and judged */
    const eq_capture *truth; /* --truth: the fp64 dp1-tp1 run every cell is also judged against */
    eq_capture ref;
    const eq_case *ref_case; /* ref's case and dtype; NULL: no reference yet */
    eq_dtype ref_dtype;
} eq_cell_loop;

/* Runs cell (its reference first when the loop's is of another case or dtype) and judges it into
 * out. `done`, when not NULL, is the layout's run already made (--comm mpi: by every rank, first);
 * it is taken (freed here). out is set only when this succeeds. */
eq_status eq_cell_run_and_judge(eq_cell_loop *loop, const eq_cell *cell, eq_capture *done, eq_comparison *out);

/* Frees the loop's reference. */
void eq_cell_loop_free(eq_cell_loop *loop);

#endif
