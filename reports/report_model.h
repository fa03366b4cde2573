/* What a report says of one comparison, described once: its parts in order (a paragraph, a list or
 * a table each), the tables' titles, intro text, columns and rows. The Markdown writer
 * (report_markdown.c) and the HTML writer (report_html.c) each supply a renderer, the few ways of
 * writing text, code, a heading, a list and a table in their format, and write every part through
 * it; the description never escapes or marks up anything itself. The words are the Markdown
 * report's, which reviewers read in pull requests; the HTML page carries the same words.
 *
 * A new part is one row of eq_report_parts (and its function here); a new table column one row of
 * its table's columns (reports/report_columns.c for the per-layer tables). report_columns_test
 * holds both writers to every part and column. */
#ifndef EQUIV_REPORTS_REPORT_MODEL_H
#define EQUIV_REPORTS_REPORT_MODEL_H

#include <stdio.h>

#include "harness/compare.h"
#include "reports/report_columns.h"

typedef struct eq_renderer eq_renderer;

/* A table of the results it has a row for, in capture order, shown when it has one. */
typedef struct {
    const char *title; /* its heading: "Activations" */
    eq_role role;      /* the role has_row is given (the per-layer tables'); else unused */
    int (*has_row)(const eq_tensor_result *r, eq_role role);
    /* A row marked as failing: its verdict column bold in Markdown, class "fail" (else "ok") in
     * HTML; NULL where no row is marked (no class either). */
    int (*row_fails)(const eq_tensor_result *r);
    int linked; /* its rows are what the results not as expected link to (HTML: id "cN/<path>") */
    /* The paragraph under the title, given the table's first row; NULL for none. */
    void (*intro)(const eq_renderer *rd, const eq_comparison *c, const eq_tensor_result *first);
    const eq_report_column *columns;
    int n_columns; /* 0 for the per-layer tables: eq_report_table_columns */
} eq_report_table;

/* The per-layer tables (one per role of eq_report_sections), then the rounding-error theory and
 * the fp64 truth. */
extern const eq_report_table eq_report_tables[];
extern const int eq_report_n_tables;

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

/* How many columns t has (each format shows those of its shown_in). */
int eq_report_table_columns(const eq_report_table *t);

/* A table's rows of c under its title and intro; the number of rows (nothing written for none). */
int eq_report_write_table(const eq_renderer *rd, const eq_report_table *t, const eq_comparison *c);

#endif
