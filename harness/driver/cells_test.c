/* The cell loop (harness/driver/cells.h) on the row_parallel case at its ci size. The wanted values are
 * the rules README and equiv --help state: every layout the case lists but dp1-tp1, for each dtype
 * in its order; the reference is dp1-tp1 without injected bugs; one reference run serves a dtype's
 * layouts; a run made already (--comm mpi) is not made again. A layout's gpt run keeps the
 * reference's block parameters where, and only where, they are the same bits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv_config.h"
#include "harness/driver/cells.h"
#include "harness/base/testing.h"

#define CASES_DIR EQUIV_SOURCE_ROOT "/cases"
#define TOLERANCES EQUIV_SOURCE_ROOT "/golden/tolerances.ini"

static int same(eq_layout a, eq_layout b) { return a.dp == b.dp && a.tp == b.tp; }

/* The runs a loop asked for, in order. */
typedef struct {
    eq_layout layouts[16];
    eq_dtype dtypes[16];
    eq_bug bugs[16];
    int n_runs, n_judged;
} log_of_runs;

static eq_status logged_run(void *ctx, const eq_run_spec *spec, eq_capture *out)
{
    log_of_runs *log = ctx;
    if (log->n_runs < 16) {
        log->layouts[log->n_runs] = spec->step.layout;
        log->dtypes[log->n_runs] = spec->step.dtype;
        log->bugs[log->n_runs] = spec->step.bugs;
    }
    log->n_runs++;
    return eq_run(spec, out);
}

static eq_status logged_judged(void *ctx, const eq_run_spec *spec, const eq_capture *ref, const eq_capture *test,
                               eq_comparison *cmp)
{
    (void)spec, (void)ref, (void)test, (void)cmp;
    ((log_of_runs *)ctx)->n_judged++;
    return EQ_OK;
}

/* The gpt reference with one bit of one parameter changed after it ran: the layout's run must
 * keep that parameter as its own (its bits differ) and borrow every other block parameter. */
#define PLANTED "layers/01/fc1_weight"

static eq_status planted_run(void *ctx, const eq_run_spec *spec, eq_capture *out)
{
    (void)ctx;
    eq_status st = eq_run(spec, out);
    if (st != EQ_OK || spec->step.layout.tp != 1) return st;
    const eq_capture_entry *e = eq_capture_find(out, PLANTED);
    if (e != NULL) ((uint16_t *)e->tensor.data)[0] ^= 1; /* bf16: the last mantissa bit */
    return st;
}

static eq_status shared_params_judged(void *ctx, const eq_run_spec *spec, const eq_capture *ref,
                                      const eq_capture *test, eq_comparison *cmp)
{
    (void)spec, (void)cmp;
    int *n_borrowed = ctx;
    for (int i = 0; i < test->count; i++) {
        const eq_capture_entry *t = &test->entries[i];
        const eq_capture_entry *r = eq_capture_find(ref, t->path);
        if (t->role != EQ_ROLE_PARAM || strncmp(t->name, "lnf_", 4) == 0) { /* the final norm: its own */
            EQ_EXPECT(!t->borrowed, "%s is borrowed", t->path);
            continue;
        }
        if (r == NULL) {
            EQ_EXPECT(r != NULL, "the reference lacks %s", t->path);
            continue;
        }
        if (strcmp(t->path, PLANTED) == 0) {
            EQ_EXPECT(!t->borrowed && t->tensor.data != r->tensor.data &&
                          ((const uint16_t *)t->tensor.data)[0] == (((const uint16_t *)r->tensor.data)[0] ^ 1),
                      "%s differs from the reference by a bit: kept %s", t->path, t->borrowed ? "borrowed" : "own");
            continue;
        }
        EQ_EXPECT(t->borrowed && t->tensor.data == r->tensor.data, "%s is the reference's bits, not borrowed", t->path);
        *n_borrowed += t->borrowed;
    }
    return EQ_OK;
}

static void test_gpt_shared_params(const eq_tolerance_table *table)
{
    eq_case *kase = calloc(1, sizeof *kase);
    eq_cell cells[2];
    eq_run_spec base;
    const eq_dtype bf16 = EQ_BF16;
    int n = 0, n_borrowed = 0;
    EQ_EXPECT_OK(eq_case_load_named(CASES_DIR, "gpt", kase));
    EQ_EXPECT_OK(eq_run_spec_init(&base, kase, "ci"));
    EQ_EXPECT_OK(eq_cells_plan(&base, EQ_BUG_NONE, table, TOLERANCES, &bf16, 1, (eq_layout){1, 2}, cells, 2, &n));
    eq_cell_loop loop = {.run = planted_run, .judged = shared_params_judged, .ctx = &n_borrowed};
    eq_comparison cmp;
    EQ_EXPECT_OK(eq_cell_run_and_judge(&loop, &cells[0], NULL, &cmp));
    EQ_EXPECT(n_borrowed == 4 * 8 - 1, "%d block parameters borrowed, want 4 blocks x 8 but the planted one",
              n_borrowed);
    eq_comparison_free(&cmp);
    eq_cell_loop_free(&loop);
    free(kase);
}

int main(void)
{
    eq_case *kase = calloc(1, sizeof *kase);
    eq_tolerance_table *table = calloc(1, sizeof *table);
    eq_cell *cells = calloc(16, sizeof *cells);
    eq_run_spec base;
    const eq_dtype dtypes[] = {EQ_BF16, EQ_FP32};
    const eq_layout listed[] = {{1, 2}, {1, 4}, {2, 1}, {2, 2}}; /* cases/row_parallel.ini but dp1-tp1 */
    int n = 0;
    EQ_EXPECT_OK(eq_case_load_named(CASES_DIR, "row_parallel", kase));
    EQ_EXPECT_OK(eq_tolerance_load(TOLERANCES, table));
    EQ_EXPECT_OK(eq_run_spec_init(&base, kase, "ci"));

    /* The plan: dtype by dtype, the case's layouts, the bugs in the layout's run only. */
    EQ_EXPECT_OK(eq_cells_plan(&base, EQ_BUG_SKIP_ALLREDUCE, table, TOLERANCES, dtypes, 2, (eq_layout){0, 0}, cells,
                               16, &n));
    EQ_EXPECT(n == 8, "%d cells, want 2 dtypes x 4 layouts", n);
    for (int i = 0; i < n && i < 8; i++) {
        const eq_cell *c = &cells[i];
        EQ_EXPECT(c->spec.step.dtype == dtypes[i / 4] && same(c->spec.step.layout, listed[i % 4]), "cell %d: %s dp%d-tp%d",
                  i, eq_dtype_name(c->spec.step.dtype), c->spec.step.layout.dp, c->spec.step.layout.tp);
        EQ_EXPECT(c->spec.step.bugs == EQ_BUG_SKIP_ALLREDUCE, "cell %d carries bugs %d", i, (int)c->spec.step.bugs);
        EQ_EXPECT(c->expect == eq_case_expectation(kase, base.step.backend->name, c->spec.step.dtype,
                                                   c->spec.step.layout),
                  "cell %d expects %d", i, (int)c->expect);
        const eq_run_spec ref = eq_cell_reference(c);
        EQ_EXPECT(same(ref.step.layout, (eq_layout){1, 1}) && ref.step.bugs == EQ_BUG_NONE &&
                      ref.step.dtype == c->spec.step.dtype,
                  "cell %d's reference: dp%d-tp%d bugs %d", i, ref.step.layout.dp, ref.step.layout.tp,
                  (int)ref.step.bugs);
    }
    EQ_EXPECT(eq_cells_runs(cells, n) == 10, "%d runs, want 8 cells and 2 references", eq_cells_runs(cells, n));
    EQ_EXPECT(strcmp(cells[4].tol.name, kase->tolerance[EQ_FP32]) == 0, "fp32's tolerance: %s", cells[4].tol.name);

    /* More cells than room: a usage error, before anything runs. */
    int n_small = 0;
    EQ_EXPECT(eq_cells_plan(&base, EQ_BUG_NONE, table, TOLERANCES, dtypes, 2, (eq_layout){0, 0}, cells, 3,
                            &n_small) == EQ_ERR_USAGE,
              "8 cells in room for 3");
    eq_error_clear();

    /* --tp 4 alone, both dtypes, no bug: run and judge; a dtype's reference runs once. */
    n = 0;
    EQ_EXPECT_OK(eq_cells_plan(&base, EQ_BUG_NONE, table, TOLERANCES, dtypes, 2, (eq_layout){0, 4}, cells, 16, &n));
    EQ_EXPECT(n == 2 && eq_cells_runs(cells, n) == 4, "%d cells, %d runs", n, eq_cells_runs(cells, n));
    log_of_runs log = {0};
    eq_cell_loop loop = {.run = logged_run, .judged = logged_judged, .ctx = &log};
    eq_comparison cmp;
    EQ_EXPECT_OK(eq_cell_run_and_judge(&loop, &cells[0], NULL, &cmp));
    EQ_EXPECT(cmp.count > 0 && cmp.n_unexpected == 0, "bf16 dp1-tp4: %d results, %d unexpected", cmp.count,
              cmp.n_unexpected);
    eq_comparison_free(&cmp);
    EQ_EXPECT_OK(eq_cell_run_and_judge(&loop, &cells[0], NULL, &cmp)); /* same dtype: the reference cached */
    eq_comparison_free(&cmp);
    eq_capture done = {0}; /* the fp32 cell's run, made before the loop (as every rank does under mpi) */
    EQ_EXPECT_OK(eq_run(&cells[1].spec, &done));
    EQ_EXPECT_OK(eq_cell_run_and_judge(&loop, &cells[1], &done, &cmp));
    EQ_EXPECT(done.count == 0, "the run made already is taken: %d tensors left", done.count);
    eq_comparison_free(&cmp);
    EQ_EXPECT(log.n_runs == 4 && log.n_judged == 3, "%d runs, %d judged; want bf16 ref, bf16 tp4 twice, fp32 ref",
              log.n_runs, log.n_judged);
    const eq_layout order[] = {{1, 1}, {1, 4}, {1, 4}, {1, 1}};
    const eq_dtype order_dt[] = {EQ_BF16, EQ_BF16, EQ_BF16, EQ_FP32};
    for (int i = 0; i < 4 && i < log.n_runs; i++)
        EQ_EXPECT(same(log.layouts[i], order[i]) && log.dtypes[i] == order_dt[i] && log.bugs[i] == EQ_BUG_NONE,
                  "run %d: %s dp%d-tp%d", i, eq_dtype_name(log.dtypes[i]), log.layouts[i].dp, log.layouts[i].tp);
    eq_cell_loop_free(&loop);
    test_gpt_shared_params(table);
    free(cells);
    free(table);
    free(kase);
    return eq_test_finish("cells_test");
}
