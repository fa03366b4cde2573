/* The one cell loop of run, matrix and golden (harness/driver/cells.h). */
#include "harness/driver/cells.h"

#include <string.h>

#include "harness/plan.h"

eq_run_spec eq_cell_reference(const eq_cell *cell)
{
    eq_run_spec ref = cell->spec;
    ref.step.layout = (eq_layout){1, 1};
    ref.step.bugs = EQ_BUG_NONE; /* the reference never carries an injected bug */
    return ref;
}

eq_status eq_cells_plan(const eq_run_spec *base, eq_bug bugs, const eq_tolerance_table *table,
                        const char *table_path, const eq_dtype *dtypes, int n_dtypes, eq_layout asked,
                        eq_cell *cells, int max, int *n)
{
    eq_status st = EQ_OK;
    eq_layout layouts[EQ_CASE_MAX_LAYOUTS];
    const int n_layouts = eq_plan_layouts(base->kase, asked, layouts);
    for (int d = 0; d < n_dtypes; d++) {
        eq_cell cell = {.spec = *base};
        cell.spec.step.dtype = dtypes[d];
        cell.spec.step.bugs = bugs;
        EQ_TRY(eq_plan_case_tolerances(table, table_path, base->kase, dtypes[d], &cell.tol, &cell.grad_tol));
        const eq_run_spec ref = eq_cell_reference(&cell);
        EQ_TRY(eq_run_check(&ref));
        for (int l = 0; l < n_layouts; l++) {
            cell.spec.step.layout = layouts[l];
            EQ_TRY(eq_run_check(&cell.spec));
            if (*n >= max) {
                st = EQ_FAIL(EQ_ERR_USAGE, "more than %d comparisons in one run", max);
                goto cleanup;
            }
            cell.expect = eq_case_expectation(base->kase, base->step.backend->name, dtypes[d], layouts[l]);
            cells[(*n)++] = cell;
        }
    }
cleanup:
    return st;
}

/* Does cell need a reference other than the one before it? */
static int new_reference(const eq_cell *cell, const eq_case *ref_case, eq_dtype ref_dtype)
{
    return ref_case == NULL || cell->spec.kase != ref_case || cell->spec.step.dtype != ref_dtype;
}

int eq_cells_runs(const eq_cell *cells, int n)
{
    int runs = 0;
    for (int i = 0; i < n; i++)
        runs += 1 + new_reference(&cells[i], i ? cells[i - 1].spec.kase : NULL, i ? cells[i - 1].spec.step.dtype : 0);
    return runs;
}

static eq_status run_one(const eq_cell_loop *loop, const eq_run_spec *spec, eq_capture *out)
{
    return loop->run != NULL ? loop->run(loop->ctx, spec, out) : eq_run(spec, out);
}

eq_status eq_cell_run_and_judge(eq_cell_loop *loop, const eq_cell *cell, eq_capture *done, eq_comparison *out)
{
    eq_status st = EQ_OK;
    eq_capture test = {0};
    if (new_reference(cell, loop->ref_case, loop->ref_dtype)) {
        eq_capture_free(&loop->ref);
        loop->ref_case = NULL;
        const eq_run_spec ref = eq_cell_reference(cell);
        EQ_TRY(run_one(loop, &ref, &loop->ref));
        loop->ref_case = cell->spec.kase;
        loop->ref_dtype = cell->spec.step.dtype;
    }
    if (done != NULL) { /* already run */
        test = *done;
        memset(done, 0, sizeof *done);
    } else {
        /* the layout's run keeps the reference's parameters where its own are the same bits */
        eq_run_spec spec = cell->spec;
        spec.step.same_params = &loop->ref;
        EQ_TRY(run_one(loop, &spec, &test));
    }
    eq_progress_phase(cell->spec.step.progress, "compare with dp1-tp1", 0, 0, -1.0);
    EQ_TRY(eq_compare_runs(&loop->ref, &test, loop->truth, &cell->tol, &cell->grad_tol, cell->expect,
                           cell->spec.kase, out));
    if (loop->judged != NULL) {
        st = loop->judged(loop->ctx, &cell->spec, &loop->ref, &test, out);
        if (st != EQ_OK) eq_comparison_free(out);
    }
cleanup:
    eq_capture_free(&test);
    return st;
}

void eq_cell_loop_free(eq_cell_loop *loop)
{
    eq_capture_free(&loop->ref);
    loop->ref_case = NULL;
}
