/* The matrix on the real row_parallel case in fp32: its rows against cases/row_parallel.ini, the
 * progress lines (harness/progress.h, on a fake clock), the Markdown, JSON and HTML summaries, and the filters and checks that must
 * stop it before anything runs. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "equiv_config.h"
#include "harness/driver/matrix.h"
#include "harness/base/testing.h"
#include "reports/matrix_report.h"

#define CASES_DIR EQUIV_SOURCE_ROOT "/cases"
#define TOLERANCES EQUIV_SOURCE_ROOT "/golden/tolerances.ini"

static eq_matrix_options options(const char *case_filter, int dtype_filter, eq_progress *progress)
{
    return (eq_matrix_options){.cases_dir = CASES_DIR, .tolerances_path = TOLERANCES, .case_filter = case_filter,
                               .dtype_filter = dtype_filter, .size = "ci", .algo = EQ_ALGO_RING, .seed = 1234,
                               .progress = progress};
}

/* What cases/row_parallel.ini lists for fp32, in its order (dp1-tp1 is the reference). */
static const struct {
    const char *layout;
    eq_expect expect;
    eq_observed observed;
} want_rows[] = {
    {"dp1-tp2", EQ_EXPECT_WITHIN, EQ_OBS_WITHIN},
    {"dp1-tp4", EQ_EXPECT_WITHIN, EQ_OBS_WITHIN},
    {"dp2-tp1", EQ_EXPECT_BIT_EXACT, EQ_OBS_BIT_EXACT},
    {"dp2-tp2", EQ_EXPECT_WITHIN, EQ_OBS_WITHIN},
};
#define N_WANT 4

static void check_rows(const eq_matrix *m)
{
    eq_case *kase = calloc(1, sizeof *kase);
    EQ_EXPECT_OK(eq_case_load_named(CASES_DIR, "row_parallel", kase));
    EQ_EXPECT(m->count == N_WANT, "%d rows", m->count);
    EQ_EXPECT(strcmp(m->size, "ci") == 0 && m->algo == EQ_ALGO_RING && m->seed == 1234, "size %s", m->size);
    EQ_EXPECT(strstr(m->backend, "OpenBLAS") != NULL, "backend '%s'", m->backend);
    EQ_EXPECT(eq_matrix_unexpected_cells(m) == 0, "%d cells not as expected", eq_matrix_unexpected_cells(m));
    for (int i = 0; i < m->count && i < N_WANT; i++) {
        const eq_matrix_row *row = &m->rows[i];
        const eq_comparison *c = &m->comparisons[i];
        char layout[32];
        eq_layout_name(row->layout, layout, sizeof layout);
        EQ_EXPECT(strcmp(row->case_name, "row_parallel") == 0 && row->dtype == EQ_FP32, "row %d: %s %s", i,
                  row->case_name, eq_dtype_name(row->dtype));
        EQ_EXPECT(strcmp(layout, want_rows[i].layout) == 0, "row %d: %s, want %s", i, layout, want_rows[i].layout);
        EQ_EXPECT(row->expected == want_rows[i].expect, "%s expected %s", layout, eq_expect_name(row->expected));
        EQ_EXPECT(row->expected == eq_case_expectation(kase, "cpu", EQ_FP32, row->layout), "%s: not the case file's", layout);
        EQ_EXPECT(row->observed == want_rows[i].observed, "%s observed %s", layout, eq_observed_name(row->observed));
        EQ_EXPECT(row->as_expected && row->n_unexpected == 0, "%s: %d unexpected", layout, row->n_unexpected);
        EQ_EXPECT(row->n_tensors == c->count && c->count == 3, "%s: %d tensors", layout, c->count);
        /* the comparison behind the row: this layout against dp1-tp1, same case and dtype */
        EQ_EXPECT(c->test_meta.dp == row->layout.dp && c->test_meta.tp == row->layout.tp, "%s: test meta", layout);
        EQ_EXPECT(c->ref_meta.dp == 1 && c->ref_meta.tp == 1 && c->ref_meta.dtype == EQ_FP32, "%s: ref meta", layout);
        EQ_EXPECT(strcmp(c->tol.name, "fp32_1_layer") == 0, "%s: tolerance %s", layout, c->tol.name);
        if (row->observed == EQ_OBS_BIT_EXACT) {
            EQ_EXPECT(row->worst_path[0] == '\0' && row->worst_max_abs == 0.0, "%s: worst '%s'", layout, row->worst_path);
        } else {
            EQ_EXPECT(strcmp(row->worst_path, "layers/00/out") == 0, "%s: worst '%s'", layout, row->worst_path);
            EQ_EXPECT(row->worst_max_abs > 0.0 && row->worst_max_abs <= c->tol.atol, "%s: max %g", layout,
                      row->worst_max_abs);
        }
        EQ_EXPECT(row->seconds >= 0.0 && row->seconds <= m->seconds + 1e-3, "%s: %g s", layout, row->seconds);
    }
    free(kase);
}

/* A clock 10 s later at every reading, so that every run and phase gets its progress line. */
static double fake_clock(void *ctx)
{
    double *t = ctx;
    *t += 10.0;
    return *t;
}

static void progress_lines(eq_progress *p, FILE *out, double *t)
{
    *t = 0.0;
    eq_progress_init(p, out, EQ_PROGRESS_LINES, fake_clock, t);
    p->delay = 0.0;
}

/* One line per run, the reference first ("equiv progress: [run 1/5] row_parallel fp32 dp1-tp1, 10 s"),
 * then per cell its run and its comparison, in the plan's order. */
static void check_progress(const char *text)
{
    char want[N_WANT + 1][64];
    snprintf(want[0], sizeof want[0], "row_parallel fp32 dp1-tp1");
    for (int i = 0; i < N_WANT; i++) snprintf(want[i + 1], sizeof want[i + 1], "row_parallel fp32 %s", want_rows[i].layout);
    int lines = 0, runs = 0, compares = 0;
    for (const char *p = text; *p; lines++) {
        const char *nl = strchr(p, '\n');
        EQ_EXPECT(nl != NULL, "unterminated progress line '%s'", p);
        if (nl == NULL) break;
        char line[256], head[64];
        snprintf(line, sizeof line, "%.*s", (int)(nl - p), p);
        p = nl + 1;
        EQ_EXPECT(strncmp(line, "equiv progress: [run ", 21) == 0, "progress line '%s'", line);
        int k = 0, n = 0;
        EQ_EXPECT(sscanf(line, "equiv progress: [run %d/%d]", &k, &n) == 2 && n == N_WANT + 1 && k >= 1 &&
                      k <= N_WANT + 1, "progress line '%s'", line);
        if (k < 1 || k > N_WANT + 1) continue;
        snprintf(head, sizeof head, "] %s", want[k - 1]);
        EQ_EXPECT(strstr(line, head) != NULL, "line '%s' does not name run %d, %s", line, k, want[k - 1]);
        if (strstr(line, ": compare with dp1-tp1, ") != NULL) {
            compares++;
            EQ_EXPECT(k >= 2, "a comparison in the reference's run: '%s'", line);
        } else {
            EQ_EXPECT(k == runs + 1, "run %d after %d runs: '%s'", k, runs, line);
            runs = k;
        }
        const char *about = strstr(line, " s, about ");
        EQ_EXPECT(about == NULL || strcmp(line + strlen(line) - 7, " s left") == 0, "estimate in '%s'", line);
    }
    EQ_EXPECT(runs == N_WANT + 1 && compares == N_WANT, "%d runs and %d comparisons in %d lines:\n%s", runs, compares,
              lines, text);
}

/* A writer's output in a malloc'd string (the test stops if there is no memory for it). */
static char *capture(eq_status (*writer)(FILE *, const eq_matrix *), const eq_matrix *m)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (out != NULL) {
        EQ_EXPECT_OK(writer(out, m));
        fclose(out);
    }
    if (text == NULL) {
        fprintf(stderr, "matrix_test: no memory to capture a report\n");
        exit(1);
    }
    return text;
}

static void check_markdown(const eq_matrix *m)
{
    char *md = capture(eq_matrix_markdown, m);
    EQ_EXPECT(strstr(md, "## equiv matrix: size ci, algorithm ring, seed 1234\n") != NULL, "heading:\n%s", md);
    EQ_EXPECT(strstr(md, "| verdict | case | dtype | layout | expected | observed | worst tensor | max \\|d\\| |\n"),
              "header row:\n%s", md);
    EQ_EXPECT(strstr(md, "| pass | row_parallel | fp32 | dp1-tp2 | within | within | layers/00/out | "),
              "dp1-tp2 row:\n%s", md);
    EQ_EXPECT(strstr(md, "| pass | row_parallel | fp32 | dp2-tp1 | bit_exact | bit-exact | - | 0 |\n"),
              "dp2-tp1 row:\n%s", md);
    EQ_EXPECT(strstr(md, "\nequiv matrix: 4 cells, all as expected\n") != NULL, "closing line:\n%s", md);
    EQ_EXPECT(strstr(md, "NOT") == NULL, "a NOT in an all-good matrix:\n%s", md);
    free(md);
}

static void check_json(const eq_matrix *m)
{
    char *text = capture(eq_matrix_json, m);
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    EQ_EXPECT(root != NULL, "JSON does not parse: %s (line %d)", err.text, err.line);
    if (root == NULL) {
        free(text);
        return;
    }
    json_t *cells = json_object_get(root, "cells"), *summary = json_object_get(root, "summary");
    EQ_EXPECT(json_integer_value(json_object_get(root, "equiv_matrix")) == 1, "equiv_matrix");
    EQ_EXPECT(strcmp(json_string_value(json_object_get(root, "version")), EQUIV_VERSION) == 0, "version");
    EQ_EXPECT(strcmp(json_string_value(json_object_get(root, "size")), "ci") == 0, "size");
    EQ_EXPECT(strcmp(json_string_value(json_object_get(root, "algorithm")), "ring") == 0, "algorithm");
    EQ_EXPECT(json_integer_value(json_object_get(root, "seed")) == 1234, "seed");
    EQ_EXPECT(json_array_size(cells) == N_WANT, "%zu cells", json_array_size(cells));
    for (size_t i = 0; i < json_array_size(cells) && i < N_WANT; i++) {
        json_t *c = json_array_get(cells, i);
        const char *layout = json_string_value(json_object_get(c, "layout"));
        EQ_EXPECT(layout && strcmp(layout, want_rows[i].layout) == 0, "cell %zu layout", i);
        EQ_EXPECT(strcmp(json_string_value(json_object_get(c, "case")), "row_parallel") == 0, "cell %zu case", i);
        EQ_EXPECT(strcmp(json_string_value(json_object_get(c, "dtype")), "fp32") == 0, "cell %zu dtype", i);
        EQ_EXPECT(strcmp(json_string_value(json_object_get(c, "expected")), eq_expect_name(want_rows[i].expect)) == 0,
                  "cell %zu expected", i);
        EQ_EXPECT(strcmp(json_string_value(json_object_get(c, "observed")), eq_observed_name(want_rows[i].observed)) == 0,
                  "cell %zu observed", i);
        EQ_EXPECT(json_is_true(json_object_get(c, "as_expected")), "cell %zu as_expected", i);
        EQ_EXPECT(json_number_value(json_object_get(c, "worst_max_abs")) == m->rows[i].worst_max_abs,
                  "cell %zu worst_max_abs does not read back exactly", i);
        json_t *worst = json_object_get(c, "worst_path");
        if (want_rows[i].observed == EQ_OBS_BIT_EXACT) EQ_EXPECT(json_is_null(worst), "cell %zu worst_path", i);
        else EQ_EXPECT(strcmp(json_string_value(worst), "layers/00/out") == 0, "cell %zu worst_path", i);
    }
    EQ_EXPECT(json_integer_value(json_object_get(summary, "cells")) == N_WANT, "summary cells");
    EQ_EXPECT(json_integer_value(json_object_get(summary, "not_as_expected")) == 0, "summary not_as_expected");
    EQ_EXPECT(strcmp(json_string_value(json_object_get(summary, "line")), "equiv matrix: 4 cells, all as expected") == 0,
              "summary line");
    json_decref(root);
    free(text);
}

/* A tensor with an expectation of its own (a case's [expect.<grads>] 'differs') that is OUTSIDE
 * in a cell expected within: the expected cell counts it, the observed cell is the others' state,
 * so the row never reads "within / OUTSIDE / pass". */
static void check_own_expectation(const eq_matrix *m)
{
    eq_matrix own = *m;
    eq_matrix_row rows[N_WANT];
    memcpy(rows, m->rows, sizeof rows);
    eq_comparison cmps[N_WANT];
    memcpy(cmps, m->comparisons, sizeof cmps);
    eq_comparison *c = &cmps[1]; /* dp1-tp4, expected within */
    eq_tensor_result *results = malloc((size_t)c->count * sizeof *results);
    EQ_EXPECT(results != NULL, "no memory");
    if (results == NULL) return;
    memcpy(results, c->results, (size_t)c->count * sizeof *results);
    c->results = results;
    for (int i = 0; i < c->count; i++)
        if (results[i].role == EQ_ROLE_ACTIVATION) {
            results[i].expect = EQ_EXPECT_DIFFERS;
            results[i].observed = EQ_OBS_OUTSIDE;
        }
    rows[1].observed = EQ_OBS_OUTSIDE;
    own.rows = rows;
    own.comparisons = cmps;
    char *md = capture(eq_matrix_markdown, &own);
    EQ_EXPECT(strstr(md, "| pass | row_parallel | fp32 | dp1-tp4 | within; differs: 1 tensor | bit-exact |"),
              "row with a tensor's own expectation:\n%s", md);
    free(md);
    free(results);
}

/* A cell turned NOT as expected shows as such in every writer. */
static void check_failing_row(const eq_matrix *m)
{
    eq_matrix bad = *m;
    eq_matrix_row rows[N_WANT];
    memcpy(rows, m->rows, sizeof rows);
    rows[1].as_expected = 0;
    rows[1].n_unexpected = 1;
    rows[1].observed = EQ_OBS_OUTSIDE;
    bad.rows = rows;
    char *md = capture(eq_matrix_markdown, &bad), *html = capture(eq_matrix_html, &bad), *good = capture(eq_matrix_html, m);
    EQ_EXPECT(strstr(md, "| **FAIL** | row_parallel | fp32 | dp1-tp4 | within | OUTSIDE | layers/00/out |"), "row:\n%s", md);
    EQ_EXPECT(strstr(md, "\nequiv matrix: 4 cells, 1 NOT as expected\n"), "closing line:\n%s", md);
    EQ_EXPECT(strstr(html, "<tr class=\"fail\"><td class=\"verdict\">FAIL</td><td>row_parallel</td><td>fp32</td><td>dp1-tp4</td>"),
              "failing row not highlighted:\n%s", html);
    EQ_EXPECT(strstr(html, "class=\"summary status-fail\">equiv matrix: 4 cells, 1 NOT as expected<"), "summary");
    const char *first_fail = strstr(html, "class=\"fail\"");
    EQ_EXPECT(first_fail && strstr(first_fail + 1, "class=\"fail\"") == NULL, "one failing row only");
    EQ_EXPECT(strstr(good, "class=\"fail\"") == NULL && strstr(good, "status-pass"), "good page:\n%s", good);
    EQ_EXPECT(strstr(good, "<script") == NULL && strstr(good, "http") == NULL, "page not self-contained");
    EQ_EXPECT(strstr(good, "max |d|</th>") && strstr(good, "</html>\n"), "page:\n%s", good);
    EQ_EXPECT(strstr(good, "href=\"#how-to-read\"") && strstr(good, "<section id=\"how-to-read\">"),
              "no link to the glossary:\n%s", good);
    free(md);
    free(html);
    free(good);
}

static void expect_usage_error(const eq_matrix_options *opt, const char *what, const char *in_message)
{
    eq_matrix m;
    eq_status st = eq_matrix_run(opt, &m);
    EQ_EXPECT(st == EQ_ERR_USAGE, "%s: %s, want usage (%s)", what, eq_status_name(st), eq_error_message());
    EQ_EXPECT(strstr(eq_error_message(), in_message) != NULL, "%s: message '%s' lacks '%s'", what,
              eq_error_message(), in_message);
    EQ_EXPECT(m.count == 0 && m.rows == NULL, "%s: rows left behind", what);
    eq_matrix_free(&m);
    eq_error_clear();
}

/* Two cases, the second with a layout that does not divide its sizes: nothing may run. */
static void check_nothing_runs_before_checks(void)
{
    char dir[] = "/tmp/equiv_matrix_test.XXXXXX", good[64], bad[64];
    EQ_EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
    const char *body = "[case]\nmodel = row_parallel\nsummary = test\ndtypes = fp32\nlayouts = dp1-tp1, %s\n"
                       "[size.ci]\nseq = 4\nbatch = 2\nin_features = 8\nout_features = 4\n"
                       "[tolerance]\nfp32 = fp32_1_layer\n[expect]\ndefault = within\n";
    char text[512];
    snprintf(good, sizeof good, "%s/a_good.ini", dir);
    snprintf(text, sizeof text, body, "dp1-tp2");
    eq_test_write_text(good, text);
    snprintf(bad, sizeof bad, "%s/b_bad.ini", dir);
    snprintf(text, sizeof text, body, "dp1-tp3");
    eq_test_write_text(bad, text);
    char *progress = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&progress, &size);
    eq_progress lines;
    double t;
    progress_lines(&lines, out, &t);
    eq_matrix_options opt = options(NULL, -1, &lines);
    opt.cases_dir = dir;
    expect_usage_error(&opt, "tp=3", "tp=3 does not divide");
    eq_progress_free(&lines);
    fclose(out);
    EQ_EXPECT(size == 0, "cells ran before the checks: '%s'", progress);
    free(progress);
    unlink(good);
    unlink(bad);
    rmdir(dir);
}

int main(void)
{
    char *progress = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&progress, &size);
    eq_progress lines;
    double t;
    progress_lines(&lines, out, &t);
    eq_matrix m;
    eq_matrix_options opt = options("row_parallel", EQ_FP32, &lines);
    EQ_EXPECT_OK(eq_matrix_run(&opt, &m));
    eq_progress_free(&lines);
    fclose(out);
    check_rows(&m);
    check_progress(progress ? progress : "");
    if (m.count == N_WANT) {
        check_markdown(&m);
        check_json(&m);
        check_failing_row(&m);
        check_own_expectation(&m);
    }
    eq_matrix_free(&m);
    free(progress);

    opt = options("no_such_case", -1, NULL);
    expect_usage_error(&opt, "unknown case", "no_such_case");
    opt = options("row_parallel", EQ_FP64, NULL);
    expect_usage_error(&opt, "dtype no case lists", "fp64");
    opt = options("row_parallel", 7, NULL);
    expect_usage_error(&opt, "dtype out of range", "dtype filter 7");
    opt = options("row_parallel", -1, NULL);
    opt.size = "no_such_size";
    expect_usage_error(&opt, "unknown size", "no_such_size");
    check_nothing_runs_before_checks();
    return eq_test_finish("matrix_test");
}
