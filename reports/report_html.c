/* HTML report: one self-contained page for reading a run in a browser. Comparisons of one case and
 * layout sit side by side by dtype (bf16 left of fp32, the order of seed 002 section 5), each the
 * parts of reports/report_model.h written through this file's HTML renderer (every text escaped
 * here), with its divergence-by-depth plots (reports/report_plots.c). No scripts and nothing
 * fetched: the file is attached to CI runs and opened offline. */
#include <stdlib.h>
#include <string.h>

#include "harness/run_cell.h"
#include "harness/run_layout.h"
#include "reports/how_to_read.h"
#include "reports/plot_svg.h"
#include "reports/report.h"
#include "reports/report_model.h"
#include "reports/report_plots.h"
#include "reports/report_steps.h"

static const char page_style[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#202124;"
    "line-height:1.4}\n"
    "h1{font-size:22px;margin:0 0 12px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dadce0}"
    "h3{font-size:16px;margin:8px 0}h4{font-size:14px;margin:16px 0 4px}\n"
    ".summary{padding:10px 14px;font-weight:600;border-left:6px solid;font-family:monospace;font-size:14px}\n"
    ".status-pass{background:#e6f4ea;color:#137333;border-color:#137333}\n"
    ".status-fail{background:#fce8e6;color:#a50e0e;border-color:#a50e0e}\n"
    ".badge{font-size:12px;padding:2px 8px;border-radius:10px;margin-left:8px;border:1px solid}\n"
    ".row{display:flex;flex-wrap:wrap;gap:28px;align-items:flex-start}\n"
    ".cmp{flex:1 1 0;min-width:600px;max-width:720px}\n"
    ".note{color:#5f6368;font-size:13px;margin:4px 0}\n"
    "figure{margin:8px 0 16px}figcaption{color:#5f6368;font-size:12px;max-width:640px}\n"
    "svg{display:block;max-width:100%;height:auto}\n"
    "table{border-collapse:collapse;font-size:13px;margin:4px 0 12px}\n"
    "th,td{border:1px solid #dadce0;padding:2px 8px}th{background:#f1f3f4;text-align:left}\n"
    "td.num{text-align:right;font-family:monospace}\n"
    "tr.fail td{background:#fce8e6}tr.fail td.verdict{color:#a50e0e;font-weight:600}\n"
    "ol.unexpected li{margin-bottom:4px}.diagnosis{font-weight:600}\n";

/* bf16 left, fp32 right, then the rest. */
static int dtype_rank(eq_dtype dtype)
{
    return dtype == EQ_BF16 ? 0 : dtype == EQ_FP32 ? 1 : 2;
}

static int same_case_and_layout(const eq_comparison *a, const eq_comparison *b)
{
    const eq_run_meta *at = &a->test_meta, *bt = &b->test_meta, *ar = &a->ref_meta, *br = &b->ref_meta;
    return strcmp(at->case_name, bt->case_name) == 0 && at->dp == bt->dp && at->tp == bt->tp && ar->dp == br->dp &&
           ar->tp == br->tp;
}

/* ---- the renderer: HTML, every text escaped ---- */

static void heading_begin(const eq_renderer *rd) { fputs("<h4>", rd->out); }
static void heading_end(const eq_renderer *rd) { fputs("</h4>\n", rd->out); }
static void para_begin(const eq_renderer *rd) { fputs("<p class=\"note\">", rd->out); }
static void para_end(const eq_renderer *rd) { fputs("</p>\n", rd->out); }
static void text(const eq_renderer *rd, const char *plain) { eq_svg_escape(rd->out, plain); }

static void wrapped(const eq_renderer *rd, const char *open, const char *plain, const char *close)
{
    fputs(open, rd->out);
    eq_svg_escape(rd->out, plain);
    fputs(close, rd->out);
}
static void code(const eq_renderer *rd, const char *plain) { wrapped(rd, "<code>", plain, "</code>"); }
static void strong(const eq_renderer *rd, const char *plain) { wrapped(rd, "<strong>", plain, "</strong>"); }
static void diagnosis(const eq_renderer *rd, const char *plain)
{
    wrapped(rd, "<span class=\"diagnosis\">", plain, "</span>");
}
static void list_begin(const eq_renderer *rd) { fputs("<ol class=\"unexpected\">\n", rd->out); }
static void item_begin(const eq_renderer *rd, int fails) { fputs(fails ? "<li class=\"fail\">" : "<li>", rd->out); }
static void item_end(const eq_renderer *rd) { fputs("</li>\n", rd->out); }
static void list_end(const eq_renderer *rd) { fputs("</ol>\n", rd->out); }

/* Whether a linked table (a per-layer one) has a row for r, for a link to point at. */
static int has_linked_row(const eq_tensor_result *r)
{
    for (int t = 0; t < eq_report_n_tables; t++)
        if (eq_report_tables[t].linked && eq_report_tables[t].has_row(r, eq_report_tables[t].role)) return 1;
    return 0;
}

static void link_begin(const eq_renderer *rd, const eq_tensor_result *r)
{
    if (!has_linked_row(r)) return;
    fprintf(rd->out, "<a href=\"#c%d/", rd->index);
    eq_svg_escape(rd->out, r->path);
    fputs("\">", rd->out);
}
static void link_end(const eq_renderer *rd, const eq_tensor_result *r)
{
    if (has_linked_row(r)) fputs("</a>", rd->out);
}

static void table_begin(const eq_renderer *rd, const eq_report_table *t)
{
    fputs("<table>\n<thead><tr>", rd->out);
    for (int k = 0; k < eq_report_table_columns(t); k++)
        if (t->columns[k].shown_in & EQ_COLUMN_HTML) wrapped(rd, "<th>", t->columns[k].header, "</th>");
    fputs("</tr></thead>\n<tbody>\n", rd->out);
}

/* A row of a linked table has the id "cN/<path>" and its diagnosis as title; a marked row the
 * class "fail" or "ok". */
static void row(const eq_renderer *rd, const eq_report_table *t, const eq_tensor_result *r, int fails,
                const char *const *cells)
{
    FILE *out = rd->out;
    fputs("<tr", out);
    if (t->linked && r != NULL) {
        fprintf(out, " id=\"c%d/", rd->index);
        eq_svg_escape(out, r->path);
        fputc('"', out);
    }
    if (t->row_fails != NULL) fprintf(out, " class=\"%s\"", fails ? "fail" : "ok");
    if (t->linked && r != NULL) wrapped(rd, " title=\"", r->diagnosis, "\"");
    fputc('>', out);
    for (int k = 0, n = 0; k < eq_report_table_columns(t); k++) {
        const eq_report_column *col = &t->columns[k];
        if (!(col->shown_in & EQ_COLUMN_HTML)) continue;
        wrapped(rd,
                col->kind == EQ_COLUMN_VERDICT  ? "<td class=\"verdict\">"
                : col->kind == EQ_COLUMN_NUMBER ? "<td class=\"num\">"
                                                : "<td>",
                cells[n++], "</td>");
    }
    fputs("</tr>\n", out);
}

static void table_end(const eq_renderer *rd) { fputs("</tbody>\n</table>\n", rd->out); }

static eq_status plots(const eq_renderer *rd, const eq_comparison *c) { return eq_report_plots_html(rd->out, c); }
static eq_status steps_chart(const eq_renderer *rd, const eq_comparison *c)
{
    return eq_report_steps_chart_html(rd->out, c);
}

static const eq_renderer html = {
    .format = EQ_COLUMN_HTML,
    .heading_begin = heading_begin,
    .heading_end = heading_end,
    .para_begin = para_begin,
    .para_end = para_end,
    .text = text,
    .code = code,
    .strong = strong,
    .diagnosis = diagnosis,
    .list_begin = list_begin,
    .item_begin = item_begin,
    .item_end = item_end,
    .list_end = list_end,
    .link_begin = link_begin,
    .link_end = link_end,
    .table_begin = table_begin,
    .row = row,
    .table_end = table_end,
    .plots = plots,
    .steps_chart = steps_chart,
};

static eq_status write_comparison(FILE *out, const eq_comparison *c, int index)
{
    eq_status st = EQ_OK;
    char heading[EQ_CELL_NAME_MAX];
    fprintf(out, "<div class=\"cmp\">\n<h3>");
    /* the section's <h2> names the case and the layouts */
    eq_svg_escape(out, eq_cell_heading(&c->test_meta, &c->ref_meta, EQ_CELL_SECTION, heading, sizeof heading));
    if (c->n_unexpected > 0)
        fprintf(out, "<span class=\"badge status-fail\">%d not as expected</span>", c->n_unexpected);
    else fprintf(out, "<span class=\"badge status-pass\">all %d as expected</span>", c->count);
    fprintf(out, "</h3>\n");
    eq_renderer rd = html;
    rd.out = out;
    rd.index = index;
    EQ_TRY(eq_report_write_parts(&rd, c));
    fprintf(out, "</div>\n");
cleanup:
    return st;
}

/* One case and layout: its comparisons `members` (indices into cmps), bf16 first. */
static eq_status write_case(FILE *out, const eq_comparison *cmps, int *members, int n_members)
{
    eq_status st = EQ_OK;
    for (int i = 1; i < n_members; i++) /* insertion sort: stable, and a case has a few dtypes */
        for (int k = i; k > 0; k--) {
            const eq_comparison *a = &cmps[members[k - 1]], *b = &cmps[members[k]];
            if (dtype_rank(a->test_meta.dtype) <= dtype_rank(b->test_meta.dtype)) break;
            int swap = members[k];
            members[k] = members[k - 1];
            members[k - 1] = swap;
        }
    const eq_run_meta *t = &cmps[members[0]].test_meta, *r = &cmps[members[0]].ref_meta;
    fprintf(out, "<section class=\"case\">\n<h2>");
    eq_svg_escape(out, t->case_name);
    char test_layout[96], ref_layout[96]; /* "dp2-tp1-pp2": every group the runs have */
    fprintf(out, ": %s vs %s</h2>\n<div class=\"row\">\n", eq_layout_name_of(t, test_layout, sizeof test_layout),
            eq_layout_name_of(r, ref_layout, sizeof ref_layout));
    for (int i = 0; i < n_members; i++) EQ_TRY(write_comparison(out, &cmps[members[i]], members[i]));
    fprintf(out, "</div>\n</section>\n");
cleanup:
    return st;
}

eq_status eq_report_html(FILE *out, const eq_comparison *cmps, int n)
{
    eq_status st = EQ_OK;
    char summary[1024]; /* up to two names and a finding (EQ_FINDING_MAX) */
    int *members = malloc((size_t)(n > 0 ? n : 1) * sizeof *members);
    char *written = calloc((size_t)(n > 0 ? n : 1), 1);
    if (members == NULL || written == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot group %d comparisons", n);
        goto cleanup;
    }
    const char *version = n > 0 ? cmps[0].ref_meta.version : "";
    fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>equiv report ");
    eq_svg_escape(out, version);
    fprintf(out, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>equiv report ", page_style);
    eq_svg_escape(out, version);
    fprintf(out, "</h1>\n<p class=\"summary %s\">", eq_report_unexpected(cmps, n) == 0 ? "status-pass" : "status-fail");
    eq_svg_escape(out, eq_report_summary(cmps, n, summary, sizeof summary));
    fprintf(out, "</p>\n<p class=\"note\"><a href=\"%s\">How to read this report</a>: every column, bound and "
                 "mark defined (also in README.md).</p>\n", EQ_HOW_TO_READ_URL);
    for (int i = 0; i < n; i++) {
        if (written[i]) continue;
        int n_members = 0;
        for (int k = i; k < n; k++)
            if (!written[k] && same_case_and_layout(&cmps[i], &cmps[k])) {
                members[n_members++] = k;
                written[k] = 1;
            }
        EQ_TRY(write_case(out, cmps, members, n_members));
    }
    eq_how_to_read_html(out);
    fprintf(out, "</body>\n</html>\n");
    if (fflush(out) != 0 || ferror(out)) st = EQ_FAIL(EQ_ERR_IO, "cannot write the HTML report");
cleanup:
    free(members);
    free(written);
    return st;
}
