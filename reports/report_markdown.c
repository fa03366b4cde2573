/* Markdown report: the per-layer tables of seed 002 (sections 2.2, 3, 4), per comparison one for
 * each of activations, gradients and losses it holds, for a pull-request comment. ASCII only. The
 * verdict comes first in every table ("pass" or "**FAIL**"), then what was observed in one word
 * (bit-exact, within, OUTSIDE, NON-FINITE) with the expectation beside it where it is not the
 * comparison's own or the row fails; numbers are in significant digits (reports/number_format.h).
 * README.md's "How to read this report" defines every column. What each comparison says is
 * reports/report_model.h's parts, written through this file's Markdown renderer. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/run_cell.h"
#include "reports/report.h"
#include "reports/report_model.h"

const char *eq_report_format_value(double v, int decimals, char *buf, size_t len)
{
    /* Seed 002 prints Max with 6 decimals and Mean/Median with 8; a nonzero value below 1e-6
     * would print as zeros there (fp32 differences are that small), so it switches to %.3e. */
    if (v != 0.0 && fabs(v) < 1e-6) snprintf(buf, len, "%.3e", v);
    else snprintf(buf, len, "%.*f", decimals, v);
    return buf;
}

const char *eq_report_format_share(double fraction, char *buf, size_t len)
{
    /* seed 002's %.2f%%, except that a nonzero share below 0.005% shows as "<0.01%" rather
     * than vanishing into "0.00%" */
    double percent = 100.0 * fraction;
    if (percent > 0.0 && percent < 0.005) snprintf(buf, len, "<0.01%%");
    else snprintf(buf, len, "%.2f%%", percent);
    return buf;
}

const char *eq_report_verdict_word(const eq_tensor_result *r) { return r->as_expected ? "pass" : "FAIL"; }

/* "OUTSIDE", "OUTSIDE (expected differs)" where the tensor's expectation is not the comparison's,
 * "OUTSIDE (expected within)" on a failing row. */
const char *eq_report_observed_text(const eq_tensor_result *r, eq_expect comparison_expect, char *buf, size_t len)
{
    if (!r->as_expected || r->expect != comparison_expect)
        snprintf(buf, len, "%s (expected %s)", eq_observed_name(r->observed), eq_expect_name(r->expect));
    else snprintf(buf, len, "%s", eq_observed_name(r->observed));
    return buf;
}

/* ---- the renderer: plain text escaped ---- */

/* Plain text as Markdown that shows it as it is: a tensor's path, a case's name or a run's
 * environment come from a file and may hold anything but control characters. '<' and '&' as
 * entities (no raw HTML, no forged entity: "<script>" or "<!--" would hide the rest of a PR
 * comment), '\\', '`' and '[' backslash-escaped (no code span, link or image), and in a table cell
 * '|' too (GFM splits a row on it); a line break as a space. Text equiv writes itself holds none
 * of these but '|' outside tables ("max |d|"), so it reads the same raw. */
static void put_text(FILE *out, const char *plain, int in_cell)
{
    for (const char *p = plain; *p != '\0'; p++) {
        if (*p == '\n' || *p == '\r') fputc(' ', out);
        else if (*p == '<') fputs("&lt;", out);
        else if (*p == '&') fputs("&amp;", out);
        else if (*p == '\\' || *p == '`' || *p == '[' || (in_cell && *p == '|')) fprintf(out, "\\%c", *p);
        else fputc(*p, out);
    }
}

static void newline_after(const eq_renderer *rd) { fputs("\n\n", rd->out); }
static void heading_begin(const eq_renderer *rd) { fputs("#### ", rd->out); }
static void nothing(const eq_renderer *rd) {}
static void text(const eq_renderer *rd, const char *plain) { put_text(rd->out, plain, 0); }

/* A code span that holds any text: fenced by one backtick more than the longest run inside, with
 * a space inside each fence where the text starts or ends with a backtick or a space (CommonMark
 * strips one from each side); a line break as a space. Nothing is escaped inside a code span. */
static void code(const eq_renderer *rd, const char *plain)
{
    int run = 0, longest = 0;
    size_t n = strlen(plain);
    for (size_t i = 0; i < n; i++) {
        run = plain[i] == '`' ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    const int pad = n > 0 && (plain[0] == '`' || plain[n - 1] == '`' || (plain[0] == ' ' && plain[n - 1] == ' '));
    for (int k = 0; k <= longest; k++) fputc('`', rd->out);
    if (pad) fputc(' ', rd->out);
    for (size_t i = 0; i < n; i++) fputc(plain[i] == '\n' || plain[i] == '\r' ? ' ' : plain[i], rd->out);
    if (pad) fputc(' ', rd->out);
    for (int k = 0; k <= longest; k++) fputc('`', rd->out);
}

static void strong(const eq_renderer *rd, const char *plain)
{
    fputs("**", rd->out);
    put_text(rd->out, plain, 0);
    fputs("**", rd->out);
}
static void item_begin(const eq_renderer *rd, int fails) { fputs("- ", rd->out); }
static void line_end(const eq_renderer *rd) { fputc('\n', rd->out); }
static void no_link(const eq_renderer *rd, const eq_tensor_result *r) {}

/* The header and alignment rows: '|' escaped, each alignment cell as wide as its header plus two
 * (or the column's markdown_rule), numbers right-aligned. */
static void table_begin(const eq_renderer *rd, const eq_report_table *t)
{
    FILE *out = rd->out;
    fputc('|', out);
    for (int k = 0; k < eq_report_table_columns(t); k++) {
        if (!(t->columns[k].shown_in & EQ_COLUMN_MARKDOWN)) continue;
        fputc(' ', out);
        for (const char *ch = t->columns[k].header; *ch != '\0'; ch++) {
            if (*ch == '|') fputc('\\', out);
            fputc(*ch, out);
        }
        fputs(" |", out);
    }
    fputs("\n|", out);
    for (int k = 0; k < eq_report_table_columns(t); k++) {
        const eq_report_column *col = &t->columns[k];
        if (!(col->shown_in & EQ_COLUMN_MARKDOWN)) continue;
        size_t width = col->markdown_rule > 0 ? (size_t)col->markdown_rule : strlen(col->header) + 2;
        for (size_t d = width - 1; d > 0; d--) fputc('-', out);
        fputs(col->kind == EQ_COLUMN_NUMBER ? ":|" : "-|", out);
    }
    fputc('\n', out);
}

/* One row: a cell per column; the verdict of a failing row in bold; an empty cell as " |". */
static void row(const eq_renderer *rd, const eq_report_table *t, const eq_tensor_result *r, int fails,
                const char *const *cells)
{
    fputc('|', rd->out);
    for (int k = 0, n = 0; k < eq_report_table_columns(t); k++) {
        if (!(t->columns[k].shown_in & EQ_COLUMN_MARKDOWN)) continue;
        const char *cell = cells[n++], *bold = t->columns[k].kind == EQ_COLUMN_VERDICT && fails ? "**" : "";
        if (cell[0] == '\0') {
            fputs(" |", rd->out);
            continue;
        }
        fprintf(rd->out, " %s", bold);
        put_text(rd->out, cell, 1);
        fprintf(rd->out, "%s |", bold);
    }
    fputc('\n', rd->out);
}

static const eq_renderer markdown = {
    .format = EQ_COLUMN_MARKDOWN,
    .heading_begin = heading_begin,
    .heading_end = newline_after,
    .para_begin = nothing,
    .para_end = newline_after,
    .text = text,
    .code = code,
    .strong = strong,
    .diagnosis = text,
    .list_begin = nothing,
    .item_begin = item_begin,
    .item_end = line_end,
    .list_end = line_end,
    .link_begin = no_link,
    .link_end = no_link,
    .table_begin = table_begin,
    .row = row,
    .table_end = line_end,
};

static eq_status write_comparison(FILE *out, const eq_comparison *c, int index)
{
    char heading[EQ_CELL_NAME_MAX];
    fputs("### ", out);
    put_text(out, eq_cell_heading(&c->test_meta, &c->ref_meta, 0, heading, sizeof heading), 0);
    fputs("\n\n", out);
    eq_renderer rd = markdown;
    rd.out = out;
    rd.index = index;
    return eq_report_write_parts(&rd, c);
}

eq_status eq_report_markdown(FILE *out, const eq_comparison *cmps, int n)
{
    eq_status st = EQ_OK;
    char summary[1024]; /* up to two names and a finding (EQ_FINDING_MAX) */
    const char *version = n > 0 ? cmps[0].ref_meta.version : "";
    fprintf(out, "## equiv report%s", version[0] ? " " : "");
    put_text(out, version, 0);
    fputs("\n\n", out);
    fprintf(out, "How to read this report: README.md, section \"How to read this report\" (every column and bound "
                 "defined).\n\n");
    for (int i = 0; i < n; i++) EQ_TRY(write_comparison(out, &cmps[i], i));
    put_text(out, eq_report_summary(cmps, n, summary, sizeof summary), 0);
    fputc('\n', out);
    if (fflush(out) != 0 || ferror(out)) st = EQ_FAIL(EQ_ERR_IO, "cannot write the Markdown report");
cleanup:
    return st;
}
