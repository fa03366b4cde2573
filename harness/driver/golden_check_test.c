/* The checked-in envelopes (golden/envelopes/<case>.json) against a fresh run of every case in
 * cases/ at the ci size, seed 1234, ring: fails when a tensor left its envelope or an envelope is
 * missing, printing what left. With an argument, that folder is the source root instead of the
 * one this test was built from.
 *
 * The same matrix holds each cell's verdict: every cell must be as its case file expects, as
 * `equiv --case C --dp D --tp T --dtype X` (the same size, seed and order) would exit 0. One line
 * per cell is printed; this is the suite's check of the gpt and probe cells, which would otherwise
 * run again, each with its own reference, as tests of their own.
 *
 * When it fails after a deliberate change to numerics or to a case, golden/README.md says how to
 * re-record; otherwise the statistics moved for a reason to find first. */
#include <stdio.h>
#include <stdlib.h>

#include "equiv_config.h"
#include "harness/driver/golden.h"
#include "harness/tolerance.h"
#include "harness/base/testing.h"

#define MAX_CASES 64

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : EQUIV_SOURCE_ROOT;
    char cases_dir[2048], tolerances[2048], path[4096];
    char (*names)[EQ_CASE_KEY_MAX] = calloc(MAX_CASES, sizeof *names);
    int n_cases = 0, total_outside = 0;
    snprintf(cases_dir, sizeof cases_dir, "%s/cases", root);
    snprintf(tolerances, sizeof tolerances, "%s/golden/tolerances.ini", root);
    if (names == NULL) return 1;
    EQ_EXPECT_OK(eq_case_list(cases_dir, names, MAX_CASES, &n_cases));
    EQ_EXPECT(n_cases > 0, "no cases in %s", cases_dir);

    eq_matrix m;
    eq_matrix_options opt = {.cases_dir = cases_dir, .tolerances_path = tolerances, .case_filter = NULL,
                             .dtype_filter = -1, .size = "ci", .algo = EQ_ALGO_RING, .seed = 1234,
                             .progress = NULL};
    eq_status st = eq_matrix_run(&opt, &m);
    EQ_EXPECT(st == EQ_OK, "matrix: %s (%s)", eq_error_message(), eq_error_where());
    eq_error_clear();
    if (st == EQ_OK) {
        printf("%d cells in %.1f s on %s\n", m.count, m.seconds, m.backend);
        for (int i = 0; i < m.count; i++) {
            const eq_matrix_row *row = &m.rows[i];
            char layout[32];
            eq_layout_name(row->layout, layout, sizeof layout);
            printf("cell %s %s %s: expected %s, observed %s: %s\n", row->case_name, eq_dtype_name(row->dtype), layout,
                   eq_expect_name(row->expected), eq_observed_name(row->observed),
                   row->as_expected ? "as expected" : "NOT as expected");
            EQ_EXPECT(row->as_expected, "cell %s %s %s: %d of %d results not as expected (worst %s)", row->case_name,
                      eq_dtype_name(row->dtype), layout, row->n_unexpected, row->n_tensors, row->worst_path);
        }
        for (int i = 0; i < n_cases; i++) {
            int outside = 0;
            snprintf(path, sizeof path, "%s/golden/envelopes/%s.json", root, names[i]);
            EQ_EXPECT_OK(eq_golden_check(path, &m, names[i], stdout, &outside));
            EQ_EXPECT(outside == 0, "case %s: %d tensors outside the envelope %s", names[i], outside, path);
            total_outside += outside;
        }
        if (total_outside > 0)
            printf("golden: %d tensors left their envelopes; golden/README.md says when re-recording "
                   "(equiv golden --update) is right\n", total_outside);
    }
    eq_matrix_free(&m);
    free(names);
    return eq_test_finish("golden_check_test");
}
