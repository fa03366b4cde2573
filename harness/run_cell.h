/* A run cell: what one run was (eq_run_meta, harness/capture.h), described once by the field table
 * eq_cell_fields (run_cell.c). Every place that spells a run's identity iterates the table:
 *
 *   the cell's name            eq_cell_name: the dump's file name, unique per cell
 *   its title                  eq_cell_title: "gpt bf16 dp8-tp2", the run in summary lines
 *   a comparison's heading     eq_cell_heading: the title, the reference's layout and the settings
 *                              (EQ_CELL_HEADING*), in the Markdown and HTML reports
 *   the dump's root attributes harness/dump.c writes them, harness/dump_read_root.c reads them
 *   the JSON report            reports/report_json.c; reports/report.schema.json is checked
 *                              against the table by run_cell_test
 *   equiv diff                 reports/report_diff.c pairs cells on the EQ_CELL_DIFF keys
 *   golden envelopes           harness/driver/golden.c records the EQ_CELL_GOLDEN keys and applies
 *                              an envelope only to runs that agree on them
 *
 * Adding a field: a member in eq_run_meta, set where the run is described (harness/driver/runner.c's
 * fill_meta), and one row in eq_cell_fields (its key, type, member, flags, default, name and
 * title parts, its slots in the dump's and the JSON's order); then its property in
 * report.schema.json, which run_cell_test asks for. A field written only when not its default
 * (the *_IF_SET flags) leaves every existing dump, report and name as it was. */
#ifndef EQUIV_HARNESS_RUN_CELL_H
#define EQUIV_HARNESS_RUN_CELL_H

#include <stddef.h>
#include <stdint.h>

#include "harness/capture.h"

typedef enum {
    EQ_CELL_TEXT,  /* char[]: an HDF5 string, a JSON string */
    EQ_CELL_DTYPE, /* eq_dtype: written as its name ("bf16") */
    EQ_CELL_INT,   /* int: HDF5 int32, JSON integer */
    EQ_CELL_I64,   /* int64_t: HDF5 int64, JSON integer */
    EQ_CELL_U64,   /* uint64_t: HDF5 uint64; JSON integer, its decimal string above INT64_MAX */
    EQ_CELL_F64,   /* double: HDF5 float64, JSON number (a learning rate) */
} eq_cell_type;

/* Where a field goes. "_IF_SET": only when its value is not the default (eq_cell_is_default). */
enum {
    EQ_CELL_ATTR = 1 << 0,            /* a root attribute of the dump, always */
    EQ_CELL_ATTR_IF_SET = 1 << 1,     /* a root attribute when set (a file without it: the default) */
    EQ_CELL_ATTR_REQUIRED = 1 << 2,   /* a dump without it is refused */
    EQ_CELL_JSON = 1 << 3,            /* a key of the JSON report's run objects, always */
    EQ_CELL_JSON_IF_SET = 1 << 4,     /* ... when set */
    EQ_CELL_JSON_IF_SOURCE = 1 << 5,  /* ... for a run equiv did not compute (source set) only */
    EQ_CELL_NAME = 1 << 6,            /* in the cell's name, always */
    EQ_CELL_NAME_IF_SET = 1 << 7,     /* in the cell's name when set */
    EQ_CELL_TITLE = 1 << 8,           /* in the cell's title */
    EQ_CELL_DIFF = 1 << 9,            /* equiv diff's cells agree on it (and show it) */
    EQ_CELL_GOLDEN = 1 << 10,         /* a golden envelope records it; it applies to runs that agree */
    EQ_CELL_HEADING = 1 << 11,        /* in a comparison's heading's parentheses when not "" ("ring") */
    EQ_CELL_HEADING_IF_SET = 1 << 12, /* ... when set ("grads sum", "seed 7") */
    EQ_CELL_HEADING_REF = 1 << 13,    /* a title field the heading gives the reference's value of too */
    EQ_CELL_SECTION = 1 << 14,        /* the HTML report's sections group comparisons by it (its <h2>) */
    EQ_CELL_TITLE_IF_SET = 1 << 15,   /* in the title (and the heading's reference part) when set: a
                                         user's pp, cp, ep ("dp2-tp2-pp2") */
};

typedef struct {
    const char *key;       /* the attribute's and the JSON key ("algorithm") */
    eq_cell_type type;
    size_t offset, size;   /* of the member in eq_run_meta */
    unsigned flags;
    const char *fallback;  /* the default as text ("ring"); "" also counts as the default */
    const char *name_part; /* in the name, what precedes the value ("-dp", "-grads_"); NULL: none */
    const char *title_part;/* in the title, the same (" dp"); NULL: none */
    int attr_slot;         /* its place among the dump's root attributes (file bytes depend on the
                              order): 0, 1, ...; -1: not written */
    int json_slot;         /* its place among a run object's JSON keys; -1: not written */
    int64_t lo, hi;        /* an integer's range, for readers */
    const char *heading_part; /* in a heading's parentheses, what precedes the value ("grads "); NULL: "" */
} eq_cell_field;

extern const eq_cell_field eq_cell_fields[];
extern const int eq_cell_field_count;

/* The row of key, or NULL. */
const eq_cell_field *eq_cell_find(const char *key);
/* The row in the slot'th place of the dump's attributes (json: of the JSON keys), or NULL. */
const eq_cell_field *eq_cell_by_attr_slot(int slot);
const eq_cell_field *eq_cell_by_json_slot(int slot);

/* The field's member in m (cast it by f->type). */
const void *eq_cell_member(const eq_run_meta *m, const eq_cell_field *f);
void *eq_cell_member_mut(eq_run_meta *m, const eq_cell_field *f);

/* The field's value as text ("ring", "8", "bf16"), in buf. */
const char *eq_cell_text(const eq_run_meta *m, const eq_cell_field *f, char *buf, size_t len);
/* Sets the field from text; 0 when text is not a value of its type (the field is then unchanged). */
int eq_cell_parse(eq_run_meta *m, const eq_cell_field *f, const char *text);
/* 1 when the field holds its default (its fallback's text, or "" for a text). */
int eq_cell_is_default(const eq_run_meta *m, const eq_cell_field *f);
/* Every field at its default (zero where the default is ""). */
void eq_cell_defaults(eq_run_meta *m);

/* A buffer this size holds every name and title. */
#define EQ_CELL_NAME_MAX 1024
/* "row_parallel-bf16-dp1-tp4": the EQ_CELL_NAME fields, then each EQ_CELL_NAME_IF_SET field that is
 * set ("-tree", "-grads_sum", "-bug_skip_allreduce"), so that cells differing in any of them have
 * different names while a run at every default keeps the name it always had. */
const char *eq_cell_name(const eq_run_meta *m, char *buf, size_t len);
/* "row_parallel bf16 dp1-tp4": the EQ_CELL_TITLE fields, then each EQ_CELL_TITLE_IF_SET field that
 * is set ("torch fp32 dp2-tp2-pp2"). */
const char *eq_cell_title(const eq_run_meta *m, char *buf, size_t len);

/* A comparison's heading, from the test run t and the reference r:
 *   "row_parallel bf16 dp1-tp4 vs dp1-tp1 (tree, grads sum, seed 7)"
 * the title of t, " vs" and the EQ_CELL_HEADING_REF and set EQ_CELL_TITLE_IF_SET fields of r, then in parentheses
 * the EQ_CELL_HEADING fields of t that are not "" and the EQ_CELL_HEADING_IF_SET fields that are set,
 * in the table's order. Fields with a flag in `leave_out` are left out (the HTML report's section
 * heading already names the case and the layouts). */
const char *eq_cell_heading(const eq_run_meta *t, const eq_run_meta *r, unsigned leave_out, char *buf,
                            size_t len);

#endif
