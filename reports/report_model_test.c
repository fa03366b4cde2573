/* Both writers say every part of a report's model (reports/report_model.h) with the same words:
 * each part shown in both formats, written as plain lines by this test's own renderer (a table as
 * its title, its header and its rows, each the cells of the columns both formats show), is found
 * line for line in the Markdown report with its markup taken out and in the HTML report with its
 * tags taken out and entities decoded; a header or row is found as a row of the writer's table
 * holding those cells in order. The comparison reaches every such part: a finding, parameters and inputs, per-layer
 * rows of each role, theory and truth rows, results not as expected, a gradient tolerance, GPUs
 * and numerics, a training curve. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "harness/train_curve.h"
#include "harness/verdict.h"
#include "reports/report.h"
#include "reports/report_model.h"

static void add(eq_capture *cap, int layer, const char *name, eq_role role, double gain)
{
    eq_tensor t;
    EQ_EXPECT_OK(eq_tensor_init_2d(&t, EQ_FP32, 4, 4));
    for (int64_t i = 0; i < 16; i++) eq_tensor_set(&t, i, cos((double)i + layer) * (i == 5 ? gain : 1.0));
    EQ_EXPECT_OK(eq_capture_add(cap, layer, name, role, &t));
}

/* tp2 against tp1: layers/01/out and the weight 1% off in one element, the rest identical; the
 * GEMM outputs given a rounding bound and a truth reading by hand. */
/* A --steps run's training curve of 2 steps and 3 trained parameters, one of them frozen besides:
 * the steps part's heading, verdict, numbers, both tables and the frozen line. */
static void add_curve(eq_comparison *c)
{
    enum { N_STEPS = 2, N_PARAMS = 3 };
    eq_steps_curve *s = calloc(1, sizeof *s);
    EQ_EXPECT(s != NULL, "calloc");
    if (s == NULL) return;
    c->steps = s;
    s->n_steps = N_STEPS;
    eq_optimizer_defaults(EQ_OPT_SGD, &s->opt);
    s->dtype = EQ_FP32;
    s->points = calloc(N_STEPS, sizeof *s->points);
    s->params = calloc(N_PARAMS, sizeof *s->params);
    EQ_EXPECT(s->points != NULL && s->params != NULL, "calloc");
    if (s->points == NULL || s->params == NULL) return;
    s->n_params = N_PARAMS;
    s->n_frozen = 1;
    for (int t = 0; t < N_STEPS; t++)
        s->points[t] = (eq_step_point){.loss_ref = 3.0 - t, .loss_test = 3.5 - t, .grad_norm_ref = 4.0,
                                       .grad_norm_test = 5.0, .param_dist = 0.25, .trained_dist = t + 1.0,
                                       .param_max_abs = 0.125};
    for (int k = 0; k < N_PARAMS; k++) {
        snprintf(s->params[k].path, sizeof s->params[k].path, "layers/00/w<%d>", k);
        s->params[k].rel = calloc(N_STEPS, sizeof(double));
        if (s->params[k].rel != NULL) s->params[k].rel[N_STEPS - 1] = 0.5 * (k + 1);
    }
    s->as_expected = 0;
    s->verdict = (eq_curve_verdict){.cls = EQ_CURVE_FACTOR, .drift = 0.25, .growth_exponent = 0.5,
                                    .grad_ratio = 1.25, .grad_ratio_step = 2, .loss_rel = 0.5};
    snprintf(s->verdict.why, sizeof s->verdict.why, "gradient norm 1.25x the reference's & more");
}

static void build(eq_comparison *c)
{
    static const eq_tolerance tol = {"t<1>", 1e-3, 1e-3, "the test's & no other", EQ_ATOL_ABSOLUTE};
    eq_capture ref, test;
    eq_capture_init(&ref);
    eq_capture_init(&test);
    for (int side = 0; side < 2; side++) {
        eq_capture *cap = side == 0 ? &ref : &test;
        eq_run_meta *m = &cap->meta;
        snprintf(m->case_name, sizeof m->case_name, "row_parallel");
        snprintf(m->version, sizeof m->version, "0.1.0");
        snprintf(m->gpu, sizeof m->gpu, side == 0 ? "A100" : "H100");
        snprintf(m->numerics, sizeof m->numerics, side == 0 ? "" : "megatron");
        m->dtype = EQ_FP32;
        m->dp = 1;
        m->tp = side == 0 ? 1 : 2;
        double off = side == 0 ? 1.0 : 1.01;
        add(cap, 0, "x", EQ_ROLE_INPUT, 1.0);
        add(cap, 0, "weight", EQ_ROLE_PARAM, off);
        add(cap, 0, "out", EQ_ROLE_ACTIVATION, 1.0);
        add(cap, 1, "out", EQ_ROLE_ACTIVATION, off);
        add(cap, 1, "out_grad", EQ_ROLE_GRAD, 1.0);
        add(cap, 1, "loss", EQ_ROLE_LOSS, 1.0);
        add(cap, 1, "scores", EQ_ROLE_ACTIVATION, 1.0);
        eq_tensor_set(&cap->entries[cap->count - 1].tensor, 3, -INFINITY); /* a mask's -Inf in both */
    }
    EQ_EXPECT_OK(eq_capture_add_finding(&test, "rank 1's <shard> & its offset"));
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &tol, EQ_EXPECT_WITHIN, c));
    snprintf(c->grad_tol.name, sizeof c->grad_tol.name, "grads");
    c->grad_tol.atol = 0.25;
    c->grad_tol.atol_scale = EQ_ATOL_REF_RMS;
    for (int i = 0; i < c->count; i++) {
        eq_tensor_result *r = &c->results[i];
        if (r->role != EQ_ROLE_ACTIVATION) continue;
        r->theory = (eq_theory){.applies = 1, .terms = 64, .ref_partitions = 1, .test_partitions = 2,
                                .det_ratio = 0.5 + r->layer, .prob_ratio = 0.25, .det_bound_max = 0.125,
                                .prob_bound_max = 0.0625, .prob_lambda = 5.5, .prob_failure = 1e-3};
        r->truth = (eq_truth){.applies = 1, .ref_max = 0.5, .test_max = 0.75, .ref_rel = 1e-3, .test_rel = 2e-3,
                              .truth_dtype = EQ_FP64, .judged = 1};
        r->structure = (eq_structure){.applies = 1, .factor_tested = 1, .factor = 1.0001, .factor_spread = 1e-4,
                                      .factor_t = 1.0, .factor_limit = 8.0, .unit_roundoff = 0x1p-24};
    }
    add_curve(c);
    eq_judge(c);
    eq_capture_free(&ref);
    eq_capture_free(&test);
}

/* ---- a plain renderer: one line per paragraph, heading, list item, header and cell ---- */

static void line_end(const eq_renderer *rd) { fputc('\n', rd->out); }
static void nothing(const eq_renderer *rd) {}
static void text(const eq_renderer *rd, const char *plain) { fputs(plain, rd->out); }
static void item_begin(const eq_renderer *rd, int fails) {}
static void no_link(const eq_renderer *rd, const eq_tensor_result *r) {}

/* A header or row as "\tcell\tcell\t": the columns both formats show. */
static void table_begin(const eq_renderer *rd, const eq_report_table *t)
{
    fputc('\t', rd->out);
    for (int k = 0; k < eq_report_table_columns(t); k++)
        if ((t->columns[k].shown_in & EQ_COLUMN_BOTH) == EQ_COLUMN_BOTH) fprintf(rd->out, "%s\t", t->columns[k].header);
    fputc('\n', rd->out);
}

static void row(const eq_renderer *rd, const eq_report_table *t, const eq_tensor_result *r, int fails,
                const char *const *cells)
{
    fputc('\t', rd->out);
    for (int k = 0, n = 0; k < eq_report_table_columns(t); k++) {
        if (!(t->columns[k].shown_in & rd->format)) continue;
        const char *cell = cells[n++];
        if ((t->columns[k].shown_in & EQ_COLUMN_BOTH) == EQ_COLUMN_BOTH) fprintf(rd->out, "%s\t", cell);
    }
    fputc('\n', rd->out);
}

static const eq_renderer plain = {
    .format = EQ_COLUMN_BOTH,
    .heading_begin = nothing,
    .heading_end = line_end,
    .para_begin = nothing,
    .para_end = line_end,
    .text = text,
    .code = text,
    .strong = text,
    .diagnosis = text,
    .list_begin = nothing,
    .item_begin = item_begin,
    .item_end = line_end,
    .list_end = nothing,
    .link_begin = no_link,
    .link_end = no_link,
    .table_begin = table_begin,
    .row = row,
    .table_end = nothing,
};

/* ---- the writers' output as plain text ---- */

static char *written(eq_status (*writer)(FILE *, const eq_comparison *, int), const eq_comparison *c)
{
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    EQ_EXPECT(f != NULL, "open_memstream");
    if (f == NULL) return calloc(1, 1);
    EQ_EXPECT_OK(writer(f, c, 1));
    fclose(f);
    return out;
}

/* Markdown without its markup: "**" and "`" dropped, a table row's cells separated by tabs as
 * "\tcell\tcell\t" (an escaped "\|" within a cell kept as '|'), every other backslash escape and
 * the entities "&lt;" and "&amp;" decoded. */
static void strip_markdown(char *s)
{
    char *w = s;
    int in_row = 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (p == s || p[-1] == '\n') in_row = *p == '|';
        if (p[0] == '*' && p[1] == '*') p++;
        else if (*p == '`') continue;
        else if (p[0] == '\\' && p[1] != '\0' && strchr("|\\`[", p[1]) != NULL) *w++ = *++p;
        else if (strncmp(p, "&lt;", 4) == 0) *w++ = '<', p += 3;
        else if (strncmp(p, "&amp;", 5) == 0) *w++ = '&', p += 4;
        else *w++ = in_row && *p == '|' ? '\t' : *p;
    }
    *w = '\0';
}

/* HTML without its tags, the five entities decoded, a table row on a line of its own with its
 * cells separated by tabs. */
static void strip_html(char *s)
{
    static const struct {
        const char *entity;
        char ch;
    } entities[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&#39;", '\''}};
    char *w = s;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == '<') {
            const char *tag = p;
            while (*p != '\0' && *p != '>') p++;
            if (*p == '\0') break;
            if (strncmp(tag, "<tr", 3) == 0 || strncmp(tag, "</td>", 5) == 0 || strncmp(tag, "</th>", 5) == 0)
                *w++ = '\t';
            continue;
        }
        int decoded = 0;
        for (size_t e = 0; e < sizeof entities / sizeof entities[0] && !decoded; e++)
            if (strncmp(p, entities[e].entity, strlen(entities[e].entity)) == 0) {
                *w++ = entities[e].ch;
                p += strlen(entities[e].entity) - 1;
                decoded = 1;
            }
        if (!decoded) *w++ = *p;
    }
    *w = '\0';
}

/* The next tab-separated cell of *p, spaces trimmed, into cell; 0 at the end of the line. */
static int next_cell(const char **p, char *cell, size_t len)
{
    if (**p != '\t') return 0;
    const char *start = ++*p;
    while (**p != '\t' && **p != '\n' && **p != '\0') ++*p;
    if (**p != '\t') return 0;
    const char *end = *p;
    while (start < end && *start == ' ') start++;
    while (end > start && end[-1] == ' ') end--;
    snprintf(cell, len, "%.*s", (int)(end - start), start);
    return 1;
}

/* Whether some row of text holds the cells of `want` ("\tcell\t...\t") in order, as whole cells
 * (a format may show more columns between them). */
static int has_row(const char *text, const char *want)
{
    for (const char *line = text, *end; line != NULL; line = (end = strchr(line, '\n')) != NULL ? end + 1 : NULL) {
        if (*line != '\t') continue;
        const char *w = want, *p = line;
        char wanted[256], cell[256];
        int matched = next_cell(&w, wanted, sizeof wanted), complete = !matched;
        while (matched && next_cell(&p, cell, sizeof cell))
            if (strcmp(cell, wanted) == 0 && !(matched = next_cell(&w, wanted, sizeof wanted))) complete = 1;
        if (complete) return 1;
    }
    return 0;
}

/* Every line of the part's plain text is in both writers' text: a table row as a row. */
static void part_in_both(const eq_report_part *part, const eq_comparison *c, const char *markdown, const char *html)
{
    char *lines = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&lines, &size);
    EQ_EXPECT(f != NULL, "open_memstream");
    if (f == NULL) return;
    eq_renderer rd = plain;
    rd.out = f;
    EQ_EXPECT_OK(part->write(&rd, c));
    fclose(f);
    EQ_EXPECT(lines[0] != '\0', "part '%s' wrote nothing for a comparison that has it", part->name);
    for (char *line = lines, *end; *line != '\0'; line = end + 1) {
        end = strchr(line, '\n');
        *end = '\0';
        int row = line[0] == '\t';
        EQ_EXPECT(row ? has_row(markdown, line) : strstr(markdown, line) != NULL, "part '%s': the Markdown lacks '%s'",
                  part->name, line);
        EQ_EXPECT(row ? has_row(html, line) : strstr(html, line) != NULL, "part '%s': the HTML lacks '%s'", part->name,
                  line);
    }
    free(lines);
}

int main(void)
{
    eq_comparison c;
    build(&c);
    EQ_EXPECT(c.n_unexpected >= 2 && c.n_findings == 1, "the comparison has %d not as expected, %d findings",
              c.n_unexpected, c.n_findings);
    char *markdown = written(eq_report_markdown, &c), *html = written(eq_report_html, &c);
    strip_markdown(markdown);
    strip_html(html);
    int n_both = 0;
    for (int p = 0; p < eq_report_n_parts; p++) {
        if ((eq_report_parts[p].shown_in & EQ_COLUMN_BOTH) != EQ_COLUMN_BOTH) continue;
        part_in_both(&eq_report_parts[p], &c, markdown, html);
        n_both++;
    }
    EQ_EXPECT(n_both >= 9, "only %d parts are in both formats", n_both);
    /* every table has rows here, so its title and headers were among the lines checked */
    for (int t = 0; t < eq_report_n_tables; t++) {
        int rows = 0;
        for (int i = 0; i < c.count; i++) rows += eq_report_tables[t].has_row(&c.results[i], eq_report_tables[t].role);
        EQ_EXPECT(rows > 0, "table '%s' has no row in the test's comparison", eq_report_tables[t].title);
        EQ_EXPECT(eq_report_table_columns(&eq_report_tables[t]) <= EQ_REPORT_MAX_COLUMNS, "table '%s' has %d columns",
                  eq_report_tables[t].title, eq_report_table_columns(&eq_report_tables[t]));
    }
    free(markdown);
    free(html);
    eq_comparison_free(&c);
    return eq_test_finish("report_model_test");
}
