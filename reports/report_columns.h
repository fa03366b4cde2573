/* The per-layer tables of the Markdown and HTML reports, described once: their sections (one per
 * role) and their columns (header, how a result's value is written, which writers show it, which
 * metric of the JSON report it is). Both writers render this description; a new column is one row
 * of eq_report_columns, and report_columns_test holds every row's JSON metric to what report_json.c
 * writes and reports/report.schema.json requires. README's "How to read this report" defines each. */
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
} eq_report_column;

extern const eq_report_column eq_report_columns[];
extern const int eq_report_n_columns;

/* The tables, in order: one per role, shown when the comparison holds a result of that role. */
typedef struct {
    eq_role role;
    const char *heading; /* "Activations" */
} eq_report_section;

extern const eq_report_section eq_report_sections[];
extern const int eq_report_n_sections;

/* A layer number, or "-" for a tensor of no layer (a user's run: the loss, an embedding). */
const char *eq_report_format_layer(int layer, char *buf, size_t len);

#endif
