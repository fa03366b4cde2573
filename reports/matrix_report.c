/* The matrix summary: one row per case x dtype x layout, in Markdown (a PR comment), JSON (for
 * programs) and HTML (one self-contained page). */
#include "reports/matrix_report.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>

#include "equiv_config.h"
#include "reports/how_to_read.h"
#include "reports/plot_svg.h"
#include "reports/report.h"

const char *eq_matrix_summary(const eq_matrix *m, char *buf, size_t len)
{
    int unexpected = eq_matrix_unexpected_cells(m);
    if (unexpected == 0)
        snprintf(buf, len, "equiv matrix: %d cell%s, all as expected", m->count, m->count == 1 ? "" : "s");
    else
        snprintf(buf, len, "equiv matrix: %d cell%s, %d NOT as expected", m->count, m->count == 1 ? "" : "s",
                 unexpected);
    return buf;
}

/* The table's text cells, shared by Markdown and HTML. The verdict comes first, one word
 * ("pass", "FAIL"). Tensors with an expectation of their own (the case's [expect.<grads>]) are
 * counted in the expected cell ("within; differs: 12 tensors") and left out of the observed one,
 * which is the worst state among the tensors held to the cell's expectation: so a cell never reads
 * "expected within, observed OUTSIDE, as expected". */
typedef struct {
    char layout[32];
    char expected[96];
    const char *observed;
    char worst[EQ_NAME_MAX];
    char max_abs[48];
} row_text;

static int judged(eq_role role) { return role == EQ_ROLE_ACTIVATION || role == EQ_ROLE_GRAD || role == EQ_ROLE_LOSS; }

static void format_expectation(const eq_matrix_row *row, const eq_comparison *cmp, row_text *t)
{
    int n_own[EQ_EXPECT_COUNT] = {0};
    eq_observed worst = EQ_OBS_BIT_EXACT;
    int any_own = 0;
    for (int i = 0; cmp != NULL && i < cmp->count; i++) {
        const eq_tensor_result *r = &cmp->results[i];
        if (!judged(r->role)) continue;
        if (r->expect != row->expected && (unsigned)r->expect < EQ_EXPECT_COUNT) {
            n_own[r->expect]++;
            any_own = 1;
        } else if (r->observed > worst) worst = r->observed;
    }
    t->observed = eq_observed_name(any_own ? worst : row->observed);
    size_t used = (size_t)snprintf(t->expected, sizeof t->expected, "%s", eq_expect_name(row->expected));
    for (int e = 0; any_own && e < EQ_EXPECT_COUNT && used < sizeof t->expected; e++)
        if (n_own[e] > 0)
            used += (size_t)snprintf(t->expected + used, sizeof t->expected - used, "; %s: %d tensor%s",
                                     eq_expect_name((eq_expect)e), n_own[e], n_own[e] == 1 ? "" : "s");
}

static void format_row(const eq_matrix_row *row, const eq_comparison *cmp, row_text *t)
{
    eq_layout_name(row->layout, t->layout, sizeof t->layout);
    format_expectation(row, cmp, t);
    snprintf(t->worst, sizeof t->worst, "%s", row->worst_path[0] ? row->worst_path : "-");
    /* three significant digits: the cells span 1e-9 (fp32 gradients) to 0.1 (bf16 activations),
     * which fixed decimals would flatten to 0.000002; "0" for a bit-exact cell */
    if (row->worst_path[0] == '\0') snprintf(t->max_abs, sizeof t->max_abs, "0");
    else snprintf(t->max_abs, sizeof t->max_abs, "%.3g", row->worst_max_abs);
}

eq_status eq_matrix_markdown(FILE *out, const eq_matrix *m)
{
    char summary[256];
    fprintf(out, "## equiv matrix: size %s, algorithm %s, seed %llu\n\n", m->size, eq_algo_name(m->algo),
            (unsigned long long)m->seed);
    if (m->backend[0]) fprintf(out, "Backend: %s. ", m->backend);
    fprintf(out, "Ran in %.1f s.\n\n", m->seconds);
    fprintf(out, "How to read this report: README.md, section \"How to read this report\".\n\n");
    fprintf(out, "| verdict | case | dtype | layout | expected | observed | worst tensor | max \\|d\\| |\n");
    fprintf(out, "|---|---|---|---|---|---|---|---:|\n");
    for (int i = 0; i < m->count; i++) {
        const eq_matrix_row *row = &m->rows[i];
        row_text t;
        format_row(row, m->comparisons != NULL ? &m->comparisons[i] : NULL, &t);
        fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", row->as_expected ? "pass" : "**FAIL**",
                row->case_name, eq_dtype_name(row->dtype), t.layout, t.expected, t.observed, t.worst, t.max_abs);
    }
    fprintf(out, "\n%s\n", eq_matrix_summary(m, summary, sizeof summary));
    if (fflush(out) != 0 || ferror(out)) return EQ_FAIL(EQ_ERR_IO, "cannot write the matrix Markdown");
    return EQ_OK;
}

/* A metric as JSON: JSON has no NaN or Infinity, so those go out as strings (as report_json.c). */
static json_t *number(double v)
{
    if (isnan(v)) return json_string("NaN");
    if (isinf(v)) return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

static json_t *row_json(const eq_matrix_row *row)
{
    char layout[32];
    json_t *o = json_object();
    int bad = o == NULL;
    bad |= json_object_set_new(o, "case", json_string(row->case_name));
    bad |= json_object_set_new(o, "dtype", json_string(eq_dtype_name(row->dtype)));
    bad |= json_object_set_new(o, "layout", json_string(eq_layout_name(row->layout, layout, sizeof layout)));
    bad |= json_object_set_new(o, "dp", json_integer(row->layout.dp));
    bad |= json_object_set_new(o, "tp", json_integer(row->layout.tp));
    bad |= json_object_set_new(o, "expected", json_string(eq_expect_name(row->expected)));
    bad |= json_object_set_new(o, "observed", json_string(eq_observed_name(row->observed)));
    bad |= json_object_set_new(o, "as_expected", json_boolean(row->as_expected));
    bad |= json_object_set_new(o, "unexpected", json_integer(row->n_unexpected));
    bad |= json_object_set_new(o, "tensors", json_integer(row->n_tensors));
    bad |= json_object_set_new(o, "worst_path", row->worst_path[0] ? json_string(row->worst_path) : json_null());
    bad |= json_object_set_new(o, "worst_max_abs", number(row->worst_max_abs));
    bad |= json_object_set_new(o, "seconds", json_real(row->seconds));
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

eq_status eq_matrix_json(FILE *out, const eq_matrix *m)
{
    eq_status st = EQ_OK;
    char line[256], seed[24];
    json_t *root = json_object(), *cells = json_array(), *summary = json_object();
    int bad = root == NULL || cells == NULL || summary == NULL;
    for (int i = 0; i < m->count; i++) bad |= json_array_append_new(cells, row_json(&m->rows[i]));
    bad |= json_object_set_new(summary, "cells", json_integer(m->count));
    bad |= json_object_set_new(summary, "not_as_expected", json_integer(eq_matrix_unexpected_cells(m)));
    bad |= json_object_set_new(summary, "line", json_string(eq_matrix_summary(m, line, sizeof line)));
    bad |= json_object_set_new(root, "equiv_matrix", json_integer(1));
    bad |= json_object_set_new(root, "version", json_string(EQUIV_VERSION));
    bad |= json_object_set_new(root, "size", json_string(m->size));
    bad |= json_object_set_new(root, "algorithm", json_string(eq_algo_name(m->algo)));
    /* json_int_t is signed 64-bit: a seed above INT64_MAX goes out as its decimal string */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)m->seed);
    bad |= json_object_set_new(root, "seed", m->seed <= INT64_MAX ? json_integer((json_int_t)m->seed) : json_string(seed));
    bad |= json_object_set_new(root, "backend", json_string(m->backend));
    bad |= json_object_set_new(root, "seconds", json_real(m->seconds));
    bad |= json_object_set_new(root, "cells", cells);
    bad |= json_object_set_new(root, "summary", summary);
    if (bad) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot build the matrix JSON (out of memory or a string not UTF-8)");
        goto cleanup;
    }
    if (json_dumpf(root, out, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0 || fputc('\n', out) == EOF ||
        fflush(out) != 0 || ferror(out)) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot write the matrix JSON");
        goto cleanup;
    }
cleanup:
    json_decref(root);
    return st;
}

static const char page_style[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#202124;"
    "line-height:1.4}\n"
    "h1{font-size:22px;margin:0 0 12px}\n"
    ".summary{padding:10px 14px;font-weight:600;border-left:6px solid;font-family:monospace;font-size:14px}\n"
    ".status-pass{background:#e6f4ea;color:#137333;border-color:#137333}\n"
    ".status-fail{background:#fce8e6;color:#a50e0e;border-color:#a50e0e}\n"
    ".note{color:#5f6368;font-size:13px;margin:4px 0}\n"
    "table{border-collapse:collapse;font-size:13px;margin:12px 0}\n"
    "th,td{border:1px solid #dadce0;padding:2px 8px}th{background:#f1f3f4;text-align:left}\n"
    "td.num{text-align:right;font-family:monospace}\n"
    "tr.fail td{background:#fce8e6}tr.fail td.verdict{color:#a50e0e;font-weight:600}\n";

static void html_cell(FILE *out, const char *cls, const char *text)
{
    if (cls) fprintf(out, "<td class=\"%s\">", cls);
    else fprintf(out, "<td>");
    eq_svg_escape(out, text);
    fprintf(out, "</td>");
}

eq_status eq_matrix_html(FILE *out, const eq_matrix *m)
{
    char summary[256], line[512];
    fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                 "<title>equiv matrix %s</title>\n<style>\n%s</style>\n</head>\n<body>\n",
            EQUIV_VERSION, page_style);
    fprintf(out, "<h1>equiv matrix %s</h1>\n<p class=\"summary %s\">", EQUIV_VERSION,
            eq_matrix_unexpected_cells(m) == 0 ? "status-pass" : "status-fail");
    eq_svg_escape(out, eq_matrix_summary(m, summary, sizeof summary));
    fprintf(out, "</p>\n<p class=\"note\">");
    snprintf(line, sizeof line, "Size %s, algorithm %s, seed %llu; ran in %.1f s. Backend: %s.", m->size,
             eq_algo_name(m->algo), (unsigned long long)m->seed, m->seconds, m->backend[0] ? m->backend : "?");
    eq_svg_escape(out, line);
    fprintf(out, "</p>\n<p class=\"note\"><a href=\"%s\">How to read this report</a></p>\n", EQ_HOW_TO_READ_URL);
    fprintf(out, "<table>\n<tr><th>verdict</th><th>case</th><th>dtype</th><th>layout</th><th>expected</th>"
                 "<th>observed</th><th>worst tensor</th><th>max |d|</th></tr>\n");
    for (int i = 0; i < m->count; i++) {
        const eq_matrix_row *row = &m->rows[i];
        row_text t;
        format_row(row, m->comparisons != NULL ? &m->comparisons[i] : NULL, &t);
        fprintf(out, "<tr%s>", row->as_expected ? "" : " class=\"fail\"");
        html_cell(out, "verdict", row->as_expected ? "pass" : "FAIL");
        html_cell(out, NULL, row->case_name);
        html_cell(out, NULL, eq_dtype_name(row->dtype));
        html_cell(out, NULL, t.layout);
        html_cell(out, NULL, t.expected);
        html_cell(out, NULL, t.observed);
        html_cell(out, NULL, t.worst);
        html_cell(out, "num", t.max_abs);
        fprintf(out, "</tr>\n");
    }
    fprintf(out, "</table>\n");
    eq_how_to_read_html(out);
    fprintf(out, "</body>\n</html>\n");
    if (fflush(out) != 0 || ferror(out)) return EQ_FAIL(EQ_ERR_IO, "cannot write the matrix HTML");
    return EQ_OK;
}
