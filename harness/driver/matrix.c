#include "harness/driver/matrix.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/driver/cells.h"
#include "harness/driver/runner.h"
#include "reports/report.h"

#define MATRIX_MAX_CASES 64

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

static int wants_dtype(const eq_matrix_options *opt, eq_dtype dt)
{
    return opt->dtype_filter < 0 || opt->dtype_filter == (int)dt;
}

/* The cases to run, sorted (eq_case_list sorts), loaded into cases[]. */
static eq_status load_cases(const eq_matrix_options *opt, eq_case *cases, int *n_cases)
{
    eq_status st = EQ_OK;
    char (*names)[EQ_CASE_KEY_MAX] = calloc(MATRIX_MAX_CASES, sizeof *names);
    *n_cases = 0;
    if (names == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the case list");
    if (opt->case_filter != NULL) {
        EQ_TRY(eq_case_load_named(opt->cases_dir, opt->case_filter, &cases[0]));
        *n_cases = 1;
        goto cleanup;
    }
    int n = 0;
    EQ_TRY(eq_case_list(opt->cases_dir, names, MATRIX_MAX_CASES, &n));
    if (n == 0) {
        st = EQ_FAIL(EQ_ERR_USAGE, "no case files (*.ini) in %s", opt->cases_dir);
        goto cleanup;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.ini", opt->cases_dir, names[i]);
        EQ_TRY(eq_case_load(path, &cases[i]));
        *n_cases = i + 1;
    }
cleanup:
    free(names);
    return st;
}

/* The cells of every case (eq_cells_plan: checked, each against its case), into a new array. */
static eq_status plan_cells(const eq_matrix_options *opt, const eq_case *cases, int n_cases,
                            const eq_tolerance_table *table, eq_cell **cells, int *n_cells)
{
    eq_status st = EQ_OK;
    const int max = n_cases * EQ_DTYPE_COUNT * EQ_CASE_MAX_LAYOUTS;
    eq_run_spec base;
    *n_cells = 0;
    *cells = calloc((size_t)max, sizeof **cells);
    if (*cells == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the matrix's cells");
    for (int c = 0; c < n_cases; c++) {
        eq_dtype dtypes[EQ_DTYPE_COUNT];
        int n_dtypes = 0;
        for (int d = 0; d < cases[c].n_dtypes; d++)
            if (wants_dtype(opt, cases[c].dtypes[d])) dtypes[n_dtypes++] = cases[c].dtypes[d];
        EQ_TRY(eq_run_spec_init(&base, &cases[c], opt->size));
        base.step.algo = opt->algo;
        base.step.seed = opt->seed;
        base.step.progress = opt->progress;
        EQ_TRY(eq_cells_plan(&base, EQ_BUG_NONE, table, opt->tolerances_path, dtypes, n_dtypes, (eq_layout){0, 0},
                             *cells, max, n_cells));
    }
cleanup:
    return st;
}

/* Is a worse than b as the row's worst tensor? The report's ordering, then the larger max |d|. */
static int worse_than(const eq_tensor_result *a, const eq_tensor_result *b)
{
    int order = eq_report_worse_first(a, b);
    if (order != 0) return order < 0;
    return a->m.max_abs > b->m.max_abs;
}

static int is_judged_role(eq_role role)
{
    return role == EQ_ROLE_ACTIVATION || role == EQ_ROLE_GRAD || role == EQ_ROLE_LOSS;
}

void eq_matrix_row_summarise(eq_matrix_row *row, const eq_comparison *cmp)
{
    const eq_tensor_result *worst = NULL;
    row->observed = EQ_OBS_BIT_EXACT;
    row->n_unexpected = cmp->n_unexpected;
    row->n_tensors = cmp->count;
    row->as_expected = cmp->n_unexpected == 0;
    for (int i = 0; i < cmp->count; i++) {
        const eq_tensor_result *r = &cmp->results[i];
        if (is_judged_role(r->role) && r->observed > row->observed) row->observed = r->observed;
        /* the worst result not as expected; with none, the judged result nearest its bound */
        int candidate = row->as_expected ? is_judged_role(r->role) && r->observed != EQ_OBS_BIT_EXACT : !r->as_expected;
        if (candidate && (worst == NULL || worse_than(r, worst))) worst = r;
    }
    snprintf(row->worst_path, sizeof row->worst_path, "%s", worst ? worst->path : "");
    row->worst_max_abs = worst ? worst->m.max_abs : 0.0;
}

/* Runs and judges the planned cells in order (harness/driver/cells.h), each into its row. */
static eq_status run_cells(const eq_matrix_options *opt, const eq_cell *cells, int n_cells, eq_matrix *m)
{
    eq_status st = EQ_OK;
    eq_cell_loop loop = {0};
    struct timespec start, cell_start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    cell_start = start;
    eq_progress_plan(opt->progress, eq_cells_runs(cells, n_cells));
    cells[0].spec.step.backend->describe(m->backend, sizeof m->backend);
    for (int i = 0; i < n_cells; i++) {
        EQ_TRY(eq_cell_run_and_judge(&loop, &cells[i], NULL, &m->comparisons[i]));
        m->count = i + 1;
        eq_matrix_row *row = &m->rows[i];
        snprintf(row->case_name, sizeof row->case_name, "%s", cells[i].spec.kase->name);
        row->dtype = cells[i].spec.step.dtype;
        row->layout = cells[i].spec.step.layout;
        row->expected = cells[i].expect;
        eq_matrix_row_summarise(row, &m->comparisons[i]);
        row->seconds = seconds_since(&cell_start);
        clock_gettime(CLOCK_MONOTONIC, &cell_start);
    }
    m->seconds = seconds_since(&start);
cleanup:
    eq_progress_clear(opt->progress);
    eq_cell_loop_free(&loop);
    return st;
}

eq_status eq_matrix_run(const eq_matrix_options *opt, eq_matrix *out)
{
    eq_status st = EQ_OK;
    eq_case *cases = calloc(MATRIX_MAX_CASES, sizeof *cases);
    eq_tolerance_table *table = calloc(1, sizeof *table);
    eq_cell *cells = NULL;
    int n_cases = 0, n_cells = 0;
    memset(out, 0, sizeof *out);
    if (cases == NULL || table == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the matrix's cases");
        goto cleanup;
    }
    if (opt->cases_dir == NULL || opt->tolerances_path == NULL || opt->size == NULL) {
        st = EQ_FAIL(EQ_ERR_INTERNAL, "eq_matrix_run without a cases folder, tolerance table or size");
        goto cleanup;
    }
    if (opt->dtype_filter < -1 || opt->dtype_filter >= EQ_DTYPE_COUNT) {
        st = EQ_FAIL(EQ_ERR_USAGE, "dtype filter %d is not a dtype (-1 for all)", opt->dtype_filter);
        goto cleanup;
    }
    snprintf(out->size, sizeof out->size, "%s", opt->size);
    out->algo = opt->algo;
    out->seed = opt->seed;

    /* Everything is loaded and checked before the first run. */
    EQ_TRY(eq_tolerance_load(opt->tolerances_path, table));
    EQ_TRY(load_cases(opt, cases, &n_cases));
    EQ_TRY(plan_cells(opt, cases, n_cases, table, &cells, &n_cells));
    if (n_cells == 0) {
        st = EQ_FAIL(EQ_ERR_USAGE, "no cell to run: no case%s%s lists dtype %s", opt->case_filter ? " " : "",
                     opt->case_filter ? opt->case_filter : "",
                     opt->dtype_filter < 0 ? "(any)" : eq_dtype_name((eq_dtype)opt->dtype_filter));
        goto cleanup;
    }
    out->rows = calloc((size_t)n_cells, sizeof *out->rows);
    out->comparisons = calloc((size_t)n_cells, sizeof *out->comparisons);
    if (out->rows == NULL || out->comparisons == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d matrix cells", n_cells);
        goto cleanup;
    }
    EQ_TRY(run_cells(opt, cells, n_cells, out));
cleanup:
    if (st != EQ_OK) eq_matrix_free(out);
    free(cells);
    free(cases);
    free(table);
    return st;
}
