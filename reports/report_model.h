/* What a report says of one comparison, described once: its parts in order, each a paragraph, a
 * list or tables of reports/report_columns.h (title, intro, columns, rows). The Markdown writer
 * (report_markdown.c) and the HTML writer (report_html.c) each supply a renderer, the few ways of
 * writing text, code, a heading, a list and a table in their format, and write every part through
 * it; the description never escapes or marks up anything itself. The words are the Markdown
 * report's, which reviewers read in pull requests; the HTML page carries the same words.
 *
 * A new part is one row of eq_report_parts (and its function in report_model.c); a new table
 * column one row of its table's columns (reports/report_columns.c). report_model_test holds both
 * writers to every part, table and column. */
#ifndef EQUIV_REPORTS_REPORT_MODEL_H
#define EQUIV_REPORTS_REPORT_MODEL_H

#include <stdio.h>

#include "harness/compare.h"
#include "reports/report_columns.h"

/* How one format writes each kind of thing. `text` is plain text, which the renderer escapes as its
 * format needs; `code` and `strong` are plain text set as code and in bold. */
struct eq_renderer {
    FILE *out;
    unsigned format; /* EQ_COLUMN_MARKDOWN or EQ_COLUMN_HTML: the columns and parts it shows */
    int index;       /* the comparison's position in the report */
    void (*heading_begin)(const eq_renderer *rd);
    void (*heading_end)(const eq_renderer *rd);
    void (*para_begin)(const eq_renderer *rd);
    void (*para_end)(const eq_renderer *rd);
    void (*text)(const eq_renderer *rd, const char *plain);
    void (*code)(const eq_renderer *rd, const char *plain);
    void (*strong)(const eq_renderer *rd, const char *plain);
    void (*diagnosis)(const eq_renderer *rd, const char *plain); /* a result's diagnosis in a list */
    void (*list_begin)(const eq_renderer *rd);
    void (*item_begin)(const eq_renderer *rd, int fails);
    void (*item_end)(const eq_renderer *rd);
    void (*list_end)(const eq_renderer *rd);
    /* Around a result's path: a link to its row where a linked table has one. */
    void (*link_begin)(const eq_renderer *rd, const eq_tensor_result *r);
    void (*link_end)(const eq_renderer *rd, const eq_tensor_result *r);
    void (*table_begin)(const eq_renderer *rd, const eq_report_table *t); /* the header row */
    /* A row of cells, one per column the format shows; r is NULL for a row of no result. */
    void (*row)(const eq_renderer *rd, const eq_report_table *t, const eq_tensor_result *r, int fails,
                const char *const *cells);
    void (*table_end)(const eq_renderer *rd);
    eq_status (*plots)(const eq_renderer *rd, const eq_comparison *c); /* divergence by depth; NULL: none */
    /* A --steps run's chart of drift and grad norm ratio by step (HTML only, like the plots); NULL: none. */
    eq_status (*steps_chart)(const eq_renderer *rd, const eq_comparison *c);
};

/* A part of a comparison's report and the formats that show it (EQ_COLUMN_*). */
typedef struct {
    const char *name; /* "theory" */
    unsigned shown_in;
    eq_status (*write)(const eq_renderer *rd, const eq_comparison *c);
} eq_report_part;

extern const eq_report_part eq_report_parts[];
extern const int eq_report_n_parts;

/* Every part of c the renderer's format shows, in order. */
eq_status eq_report_write_parts(const eq_renderer *rd, const eq_comparison *c);

/* printf into rd->text. */
void eq_render_textf(const eq_renderer *rd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A table's rows of c under its title and intro; the number of rows (nothing written for none). */
int eq_report_write_table(const eq_renderer *rd, const eq_report_table *t, const eq_comparison *c);

#endif
