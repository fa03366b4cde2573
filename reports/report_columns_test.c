/* What the reports show (reports/report_columns.h) against the schema and the writers: the JSON
 * metrics are exactly those reports/report.schema.json requires, each described there; every
 * column a writer shows is in that writer's table header; every column's metric is one of them and
 * is in each result's "metrics" of a written JSON report, so a new column cannot name a metric the
 * JSON lacks; and every metric column is defined in the reports' glossary (reports/how_to_read.h),
 * as a term or within one.
 *   report_columns_test SCHEMA.json */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "harness/verdict.h"
#include "reports/how_to_read.h"
#include "reports/report.h"
#include "reports/report_columns.h"

/* layers/00/out 1% off in one element, the weight identical. */
static void build(eq_comparison *c)
{
    static const eq_tolerance tol = {"t", 1e-3, 1e-3, "test", EQ_ATOL_ABSOLUTE};
    eq_capture ref, test;
    eq_capture_init(&ref);
    eq_capture_init(&test);
    for (int side = 0; side < 2; side++) {
        eq_capture *cap = side == 0 ? &ref : &test;
        snprintf(cap->meta.case_name, sizeof cap->meta.case_name, "row_parallel");
        snprintf(cap->meta.version, sizeof cap->meta.version, "0.1.0");
        cap->meta.dtype = EQ_FP32;
        cap->meta.dp = 1;
        cap->meta.tp = side == 0 ? 1 : 2;
        eq_tensor w, out;
        EQ_EXPECT_OK(eq_tensor_init_2d(&w, EQ_FP32, 4, 4));
        EQ_EXPECT_OK(eq_tensor_init_2d(&out, EQ_FP32, 4, 4));
        for (int64_t i = 0; i < 16; i++) {
            eq_tensor_set(&w, i, sin((double)i));
            eq_tensor_set(&out, i, cos((double)i) * (side == 1 && i == 5 ? 1.01 : 1.0));
        }
        EQ_EXPECT_OK(eq_capture_add(cap, 0, "weight", EQ_ROLE_PARAM, &w));
        EQ_EXPECT_OK(eq_capture_add(cap, 0, "out", EQ_ROLE_ACTIVATION, &out));
    }
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &tol, EQ_EXPECT_WITHIN, c));
    eq_judge(c);
    eq_capture_free(&ref);
    eq_capture_free(&test);
}

/* A report written to memory ("" on failure, never NULL); the caller frees it. */
static char *written(eq_status (*writer)(FILE *, const eq_comparison *, int), const eq_comparison *c)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    EQ_EXPECT(f != NULL, "open_memstream");
    if (f == NULL) return calloc(1, 1);
    EQ_EXPECT_OK(writer(f, c, 1));
    fclose(f);
    return text;
}

/* The header as each writer writes it: Markdown escapes '|', HTML '>' (the only specials in use). */
static void header_in(const char *report, const char *header, int markdown, const char *writer)
{
    char want[128];
    size_t n = 0;
    for (const char *ch = header; *ch != '\0' && n + 6 < sizeof want; ch++) {
        if (markdown && *ch == '|') want[n++] = '\\';
        if (!markdown && *ch == '>') {
            memcpy(want + n, "&gt;", 4);
            n += 4;
            continue;
        }
        want[n++] = *ch;
    }
    want[n] = '\0';
    char cell[160];
    snprintf(cell, sizeof cell, markdown ? "| %s |" : "<th>%s</th>", want);
    EQ_EXPECT(strstr(report, cell) != NULL, "the %s table lacks the column '%s'", writer, cell);
}

static int in_glossary(const char *header)
{
    for (const eq_glossary_entry *e = eq_glossary; e->term != NULL; e++)
        if (strcmp(e->term, header) == 0 || strstr(e->definition, header) != NULL) return 1;
    return 0;
}

static int in_array(const json_t *array, const char *key)
{
    size_t i;
    const json_t *v;
    json_array_foreach(array, i, v) if (json_is_string(v) && strcmp(json_string_value(v), key) == 0) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: report_columns_test SCHEMA.json\n");
        return 2;
    }
    json_error_t error;
    json_t *schema = json_load_file(argv[1], 0, &error);
    EQ_EXPECT(schema != NULL, "%s: %s", argv[1], error.text);
    const json_t *metrics_def = json_object_get(json_object_get(schema, "$defs"), "metrics");
    const json_t *required = json_object_get(metrics_def, "required");
    const json_t *properties = json_object_get(metrics_def, "properties");
    EQ_EXPECT(json_is_array(required) && json_is_object(properties), "the schema has no $defs.metrics");

    eq_comparison c;
    build(&c);
    char *markdown = written(eq_report_markdown, &c), *html = written(eq_report_html, &c),
         *json_text = written(eq_report_json, &c);
    json_t *report = json_loads(json_text, 0, &error);
    EQ_EXPECT(report != NULL, "the JSON report does not parse: %s", error.text);
    const json_t *results = json_object_get(json_array_get(json_object_get(report, "comparisons"), 0), "results");
    EQ_EXPECT(json_array_size(results) == 2, "%zu results in the JSON report, want 2", json_array_size(results));

    /* The JSON metrics are exactly the ones the schema requires, each described there. */
    for (int k = 0; k < eq_report_n_metrics; k++) {
        const char *key = eq_report_metrics[k].key;
        EQ_EXPECT(in_array(required, key), "metric %s is not required by the schema", key);
        EQ_EXPECT(json_is_object(json_object_get(properties, key)), "the schema does not describe metric %s", key);
    }
    size_t i_req;
    const json_t *req;
    json_array_foreach(required, i_req, req) {
        int known = 0;
        for (int k = 0; k < eq_report_n_metrics && !known; k++)
            known = json_is_string(req) && strcmp(json_string_value(req), eq_report_metrics[k].key) == 0;
        EQ_EXPECT(known, "the schema requires metric %s, which eq_report_metrics lacks", json_string_value(req));
    }

    int n_json = 0;
    for (int k = 0; k < eq_report_n_columns; k++) {
        const eq_report_column *col = &eq_report_columns[k];
        EQ_EXPECT(col->shown_in != 0 && col->text != NULL, "column '%s' shown nowhere or without a text", col->header);
        if (col->shown_in & EQ_COLUMN_MARKDOWN) header_in(markdown, col->header, 1, "Markdown");
        if (col->shown_in & EQ_COLUMN_HTML) header_in(html, col->header, 0, "HTML");
        if (col->json_metric == NULL) continue;
        n_json++;
        const char *key = col->json_metric;
        EQ_EXPECT(in_glossary(col->header), "column '%s' is not defined in the glossary", col->header);
        int known = 0;
        for (int m = 0; m < eq_report_n_metrics && !known; m++) known = strcmp(eq_report_metrics[m].key, key) == 0;
        EQ_EXPECT(known, "column '%s' shows %s, which is no metric of eq_report_metrics", col->header, key);
        size_t i;
        const json_t *r;
        json_array_foreach(results, i, r) {
            const json_t *v = json_object_get(json_object_get(r, "metrics"), key);
            EQ_EXPECT(json_is_number(v) || json_is_string(v), "column '%s': result %zu has no metric %s", col->header, i,
                      key);
        }
    }
    EQ_EXPECT(n_json >= 10, "only %d columns name a JSON metric", n_json);
    json_decref(report);
    json_decref(schema);
    free(markdown);
    free(html);
    free(json_text);
    eq_comparison_free(&c);
    return eq_test_finish("report_columns_test");
}
