#include "harness/matrix.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/plan.h"
#include "harness/runner.h"
#include "reports/report.h"

#define MATRIX_MAX_CASES 64

/* One planned cell: which loaded case, dtype and layout, and the tolerances it is judged by. */
typedef struct {
    int kase;
    eq_dtype dtype;
    eq_layout layout;
    eq_tolerance tol, grad_tol;
} cell_plan;

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

/* Plans every cell (plan == NULL: only counts them) and checks each against its case. */
static eq_status plan_cells(const eq_matrix_options *opt, const eq_case *cases, int n_cases,
                            const eq_tolerance_table *table, cell_plan *plan, int *n_cells)
{
    eq_status st = EQ_OK;
    eq_layout layouts[EQ_CASE_MAX_LAYOUTS];
    eq_run_spec spec;
    int n = 0;
    for (int c = 0; c < n_cases; c++) {
        const eq_case *kase = &cases[c];
        EQ_TRY(eq_run_spec_init(&spec, kase, opt->size));
        const int n_layouts = eq_plan_layouts(kase, (eq_layout){0, 0}, layouts); /* as eq_cmd_run's */
        for (int d = 0; d < kase->n_dtypes; d++) {
            const eq_dtype dt = kase->dtypes[d];
            if (!wants_dtype(opt, dt)) continue;
            if (plan == NULL) {
                n += n_layouts;
                continue;
            }
            eq_tolerance tol, grad_tol;
            EQ_TRY(eq_plan_case_tolerances(table, opt->tolerances_path, kase, dt, &tol, &grad_tol));
            spec.step.dtype = dt;
            spec.step.layout = (eq_layout){1, 1};
            EQ_TRY(eq_run_check(&spec));
            for (int l = 0; l < n_layouts; l++) {
                spec.step.layout = layouts[l];
                EQ_TRY(eq_run_check(&spec));
                plan[n++] = (cell_plan){.kase = c, .dtype = dt, .layout = layouts[l], .tol = tol, .grad_tol = grad_tol};
            }
        }
    }
    *n_cells = n;
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

/* The runs of the plan: every cell's, and a reference where a (case, dtype) starts. */
static int planned_runs(const cell_plan *plan, int n_cells)
{
    int n = 0;
    for (int i = 0; i < n_cells; i++)
        n += 1 + (i == 0 || plan[i].kase != plan[i - 1].kase || plan[i].dtype != plan[i - 1].dtype);
    return n;
}

/* Runs the planned cells in order; a (case, dtype) change starts a new reference run. */
static eq_status run_cells(const eq_matrix_options *opt, const eq_case *cases, const cell_plan *plan, int n_cells,
                           eq_matrix *m)
{
    eq_status st = EQ_OK;
    eq_capture ref = {0}, test = {0};
    eq_run_spec spec;
    struct timespec start, cell_start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    cell_start = start;
    eq_progress_plan(opt->progress, planned_runs(plan, n_cells));
    for (int i = 0; i < n_cells; i++) {
        const cell_plan *p = &plan[i];
        const eq_case *kase = &cases[p->kase];
        EQ_TRY(eq_run_spec_init(&spec, kase, opt->size));
        spec.step.algo = opt->algo;
        spec.step.seed = opt->seed;
        spec.step.dtype = p->dtype;
        spec.step.progress = opt->progress;
        if (i == 0) spec.step.backend->describe(m->backend, sizeof m->backend);
        if (i == 0 || p->kase != plan[i - 1].kase || p->dtype != plan[i - 1].dtype) {
            eq_capture_free(&ref);
            spec.step.layout = (eq_layout){1, 1};
            EQ_TRY(eq_run(&spec, &ref));
        }
        spec.step.layout = p->layout;
        EQ_TRY(eq_run(&spec, &test));
        eq_matrix_row *row = &m->rows[i];
        snprintf(row->case_name, sizeof row->case_name, "%s", kase->name);
        row->dtype = p->dtype;
        row->layout = p->layout;
        row->expected = eq_case_expectation(kase, spec.step.backend->name, p->dtype, p->layout);
        eq_progress_phase(opt->progress, "compare with dp1-tp1", 0, 0, -1.0);
        EQ_TRY(eq_compare_runs(&ref, &test, NULL, &p->tol, &p->grad_tol, row->expected, kase, &m->comparisons[i]));
        m->count = i + 1;
        eq_capture_free(&test);
        eq_matrix_row_summarise(row, &m->comparisons[i]);
        row->seconds = seconds_since(&cell_start);
        clock_gettime(CLOCK_MONOTONIC, &cell_start);
    }
    m->seconds = seconds_since(&start);
cleanup:
    eq_progress_clear(opt->progress);
    eq_capture_free(&ref);
    eq_capture_free(&test);
    return st;
}

eq_status eq_matrix_run(const eq_matrix_options *opt, eq_matrix *out)
{
    eq_status st = EQ_OK;
    eq_case *cases = calloc(MATRIX_MAX_CASES, sizeof *cases);
    eq_tolerance_table *table = calloc(1, sizeof *table);
    cell_plan *plan = NULL;
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
    EQ_TRY(plan_cells(opt, cases, n_cases, table, NULL, &n_cells));
    if (n_cells == 0) {
        st = EQ_FAIL(EQ_ERR_USAGE, "no cell to run: no case%s%s lists dtype %s", opt->case_filter ? " " : "",
                     opt->case_filter ? opt->case_filter : "",
                     opt->dtype_filter < 0 ? "(any)" : eq_dtype_name((eq_dtype)opt->dtype_filter));
        goto cleanup;
    }
    plan = calloc((size_t)n_cells, sizeof *plan);
    out->rows = calloc((size_t)n_cells, sizeof *out->rows);
    out->comparisons = calloc((size_t)n_cells, sizeof *out->comparisons);
    if (plan == NULL || out->rows == NULL || out->comparisons == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d matrix cells", n_cells);
        goto cleanup;
    }
    EQ_TRY(plan_cells(opt, cases, n_cases, table, plan, &n_cells));
    EQ_TRY(run_cells(opt, cases, plan, n_cells, out));
cleanup:
    if (st != EQ_OK) eq_matrix_free(out);
    free(plan);
    free(cases);
    free(table);
    return st;
}
