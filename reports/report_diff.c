/* equiv diff: two JSON reports (base, head) -> a Markdown pull-request comment on what the change
 * did to every tensor's divergence. The rules are in report_diff.h; the reading and classifying
 * in report_diff_cells.c, the comment in report_diff_comment.c. */
#include <stdlib.h>

#include "reports/report_diff.h"
#include "reports/report_diff_cells.h"

eq_diff_options eq_diff_options_default(void)
{
    return (eq_diff_options){.growth = 1.5, .floor = 1e-7};
}

eq_status eq_report_diff(const char *base_path, const char *head_path, const eq_diff_options *opt,
                         FILE *markdown_out, int *n_regressions)
{
    eq_status st = EQ_OK;
    eq_diff_options defaults = eq_diff_options_default();
    json_t *base = NULL, *head = NULL;
    cell_diff *cells = NULL;
    int n_cells = 0, regressions = 0;
    if (n_regressions != NULL) *n_regressions = 0;
    if (opt == NULL) opt = &defaults;
    if (!(opt->growth >= 1.0) || !(opt->floor >= 0.0)) {
        st = EQ_FAIL(EQ_ERR_USAGE, "diff: growth %g must be >= 1 and floor %g >= 0", opt->growth, opt->floor);
        goto cleanup;
    }
    EQ_TRY(eq_diff_load_report(base_path, &base));
    EQ_TRY(eq_diff_load_report(head_path, &head));
    EQ_TRY(eq_diff_match_cells(base, head, &cells, &n_cells));
    for (int c = 0; c < n_cells; c++) {
        EQ_TRY(eq_diff_cell(&cells[c], opt));
        regressions += cells[c].n_regressed + (cells[c].head == NULL);
    }
    eq_diff_write_comment(markdown_out, cells, n_cells, regressions, opt);
    if (fflush(markdown_out) != 0 || ferror(markdown_out)) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot write the diff comment");
        goto cleanup;
    }
    if (n_regressions != NULL) *n_regressions = regressions;
cleanup:
    for (int c = 0; c < n_cells; c++) free(cells[c].changes);
    free(cells);
    json_decref(base);
    json_decref(head);
    return st;
}
