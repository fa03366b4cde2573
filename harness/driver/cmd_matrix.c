/* equiv matrix and equiv golden: every case x layout x dtype at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv_config.h"
#include "harness/base/atomic_file.h"
#include "harness/driver/commands.h"
#include "harness/driver/golden.h"
#include "harness/driver/matrix.h"
#include "harness/driver/out_dir.h"
#include "harness/driver/runner.h"
#include "reports/matrix_report.h"
#include "reports/report.h"

typedef eq_status (*matrix_writer)(FILE *out, const eq_matrix *m);

static eq_status write_file(eq_out *out, const char *name, matrix_writer write, const eq_matrix *m)
{
    char path[4400];
    eq_atomic_file af = {0};
    eq_status st = EQ_OK;
    EQ_TRY(eq_out_path(out, name, path, sizeof path));
    EQ_TRY(eq_atomic_begin(&af, path, 1));
    EQ_TRY(write(af.fp, m));
    EQ_TRY(eq_atomic_commit(&af));
cleanup:
    eq_atomic_abort(&af);
    return st;
}

/* Every cell's tensors, in the per-run report format that `equiv diff` reads. */
static eq_status write_report_json(FILE *out, const eq_matrix *m) { return eq_report_json(out, m->comparisons, m->count); }

eq_status eq_cmd_matrix(const eq_cli *cli, int *n_unexpected)
{
    eq_status st = EQ_OK;
    eq_paths paths;
    eq_matrix m;
    eq_out out = {0};
    eq_console console = {0};
    eq_progress progress;
    memset(&m, 0, sizeof m);
    eq_paths_resolve(cli, &paths);
    eq_progress_init(&progress, stderr, eq_progress_mode_for(stderr, cli->verbose), NULL, NULL);
    eq_matrix_options opt = {.cases_dir = paths.cases_dir, .tolerances_path = paths.tolerances,
                             .case_filter = cli->case_name, .dtype_filter = cli->all_dtypes ? -1 : (int)cli->dtype,
                             .size = cli->size, .algo = cli->algo, .seed = cli->seed, .progress = &progress};
    /* --out is opened first, so a folder that cannot be made fails before the matrix runs. */
    if (cli->out_dir) EQ_TRY(eq_out_open(&out, cli->out_dir));
    EQ_TRY(eq_matrix_run(&opt, &m));
    if (cli->out_dir) {
        EQ_TRY(write_file(&out, "matrix.md", eq_matrix_markdown, &m));
        EQ_TRY(write_file(&out, "matrix.json", eq_matrix_json, &m));
        EQ_TRY(write_file(&out, "matrix.html", eq_matrix_html, &m));
        EQ_TRY(write_file(&out, "report.json", write_report_json, &m));
    }
    EQ_TRY(eq_console_open(&console));
    switch (cli->format) {
    case EQ_FORMAT_JSON: st = eq_matrix_json(console.fp, &m); break;
    case EQ_FORMAT_HTML: st = eq_matrix_html(console.fp, &m); break;
    case EQ_FORMAT_MARKDOWN: st = eq_matrix_markdown(console.fp, &m); break;
    }
    if (st != EQ_OK) goto cleanup;
    EQ_TRY(eq_cmd_finish(&console, &out)); /* the summary printed, then --out moved into place */
    *n_unexpected = eq_matrix_unexpected_cells(&m);
cleanup:
    eq_progress_free(&progress);
    eq_out_discard(&out);
    eq_console_free(&console);
    eq_matrix_free(&m);
    return st;
}

/* The envelopes are recorded at the ci size with the default seed (1234) and the ring order
 * (golden/README.md). */
eq_status eq_cmd_golden(const eq_cli *cli, int *n_unexpected)
{
    eq_status st = EQ_OK;
    eq_paths paths;
    char path[4096];
    eq_matrix m;
    eq_progress progress;
    memset(&m, 0, sizeof m);
    eq_paths_resolve(cli, &paths);
    eq_progress_init(&progress, stderr, eq_progress_mode_for(stderr, cli->verbose), NULL, NULL);
    eq_matrix_options opt = {.cases_dir = paths.cases_dir, .tolerances_path = paths.tolerances,
                             .case_filter = cli->case_name, .dtype_filter = -1, .size = "ci", .algo = EQ_ALGO_RING,
                             .seed = EQ_SEED_DEFAULT, .progress = &progress};
    EQ_TRY(eq_matrix_run(&opt, &m));
    if (cli->update) {
        EQ_TRY(eq_golden_update(paths.golden_dir, &m, stdout));
        goto cleanup;
    }
    int total = 0;
    for (int i = 0; i < m.count; i++) {
        if (i > 0 && strcmp(m.rows[i].case_name, m.rows[i - 1].case_name) == 0) continue;
        int outside = 0;
        snprintf(path, sizeof path, "%s/%s.json", paths.golden_dir, m.rows[i].case_name);
        EQ_TRY(eq_golden_check(path, &m, m.rows[i].case_name, stdout, &outside));
        printf("golden: %s: %s\n", m.rows[i].case_name, outside ? "LEFT its envelope" : "inside its envelope");
        total += outside;
    }
    if (total > 0) printf("golden: %d tensors outside; golden/README.md says when `equiv golden --update` is right\n", total);
    *n_unexpected = total;
cleanup:
    eq_progress_free(&progress);
    eq_matrix_free(&m);
    return st;
}
