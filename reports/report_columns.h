/* What the reports show of a result, described once: the metrics of the JSON report (key, where
 * eq_metrics holds it) and the tables of the Markdown and HTML reports (title, intro, the rows
 * they show, their columns: header, how a result's value is written, which writers show it,
 * which JSON metric it is); reports/report_model.c writes them among a report's other parts. A
 * new metric is one row of eq_report_metrics (and its property in reports/report.schema.json), a
 * new table column one row of its table's columns (eq_report_columns for the per-layer tables).
 * report_columns_test holds the rows to the schema, to the writers' output and to the glossary
 * (reports/how_to_read.c, README's "How to read this report"), which defines each column. */
#ifndef EQUIV_REPORTS_REPORT_COLUMNS_H
#define EQUIV_REPORTS_REPORT_COLUMNS_H

#include <stddef.h>

#include "harness/compare.h"

/* The writers a column appears in. */
#define EQ_COLUMN_MARKDOWN 1u
#define EQ_COLUMN_HTML 2u
#define EQ_COLUMN_BOTH (EQ_COLUMN_MARKDOWN | EQ_COLUMN_HTML)

typedef enum {
    EQ_COLUMN_VERDICT, /* "pass" or "FAIL": Markdown bolds a FAIL, HTML gives the cell class "verdict" */
    EQ_COLUMN_TEXT,    /* left-aligned */
    EQ_COLUMN_NUMBER,  /* right-aligned (Markdown "--:", HTML class "num") */
} eq_column_kind;

typedef struct {
    const char *header;      /* plain text ("max |d|"): each writer escapes it */
    eq_column_kind kind;
    unsigned shown_in;       /* EQ_COLUMN_* */
    const char *json_metric; /* the key under a JSON result's "metrics" that holds the value, or NULL */
    /* The cell's plain text; comparison_expect is the comparison's own expectation (the observed
     * column names a tensor's expectation where it differs from it). */
    const char *(*text)(const eq_tensor_result *r, eq_expect comparison_expect, char *buf, size_t len);
    int markdown_rule; /* the width of its Markdown alignment cell ("--:"), where not the header's plus 2 */
    /* A table of rows that are no results (eq_report_table's n_rows): the row'th cell's plain text. */
    const char *(*row_text)(const eq_comparison *c, int row, char *buf, size_t len);
} eq_report_column;

extern const eq_report_column eq_report_columns[];
extern const int eq_report_n_columns;

/* Every metric of a result as the JSON report writes it under "metrics", in that order: its key and
 * where eq_metrics holds it. reports/report.schema.json requires exactly these keys
 * (report_columns_test); a table column shows one of them by its key. */
typedef enum { EQ_METRIC_COUNT, EQ_METRIC_REAL } eq_metric_kind; /* int64_t, double */
typedef struct {
    const char *key;
    eq_metric_kind kind;
    size_t offset; /* offsetof(eq_metrics, ...) */
} eq_report_metric;

extern const eq_report_metric eq_report_metrics[];
extern const int eq_report_n_metrics;

/* A layer number, or "-" for a tensor of no layer (a user's run: the loss, an embedding). */
const char *eq_report_format_layer(int layer, char *buf, size_t len);

typedef struct eq_renderer eq_renderer; /* reports/report_model.h */

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
    /* A table whose rows are no results (a training curve's steps): how many rows c has, each
     * cell from its column's row_text; NULL for a table of results (has_row, text). */
    int (*n_rows)(const eq_comparison *c);
} eq_report_table;

/* The per-layer tables (activations, gradients, losses), then the rounding-error theory and the
 * fp64 truth: eq_report_tables[EQ_TABLE_THEORY] is the theory's, whatever the order. */
enum {
    EQ_TABLE_ACTIVATIONS,
    EQ_TABLE_GRADIENTS,
    EQ_TABLE_LOSSES,
    EQ_TABLE_N_LAYER, /* the per-layer tables come first, these three */
    EQ_TABLE_THEORY = EQ_TABLE_N_LAYER,
    EQ_TABLE_TRUTH,
    EQ_TABLE_COUNT
};
extern const eq_report_table eq_report_tables[EQ_TABLE_COUNT];
extern const int eq_report_n_tables;

/* The most columns a table has (report_model_test holds each to it). */
#define EQ_REPORT_MAX_COLUMNS 32

/* How many columns t has (each format shows those of its shown_in). */
int eq_report_table_columns(const eq_report_table *t);

#endif
