/* The parts of a comparison's report and their tables (report_model.h), written through a renderer. */
#include "reports/report_model.h"

#include "harness/structure.h"
#include "harness/truth.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "reports/number_format.h"
#include "reports/report.h"
#include "reports/report_steps.h"

void eq_render_textf(const eq_renderer *rd, const char *fmt, ...)
{
    char text[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    rd->text(rd, text);
}

/* The title, the intro and the header row, before a table's first row. */
static void table_head(const eq_renderer *rd, const eq_report_table *t, const eq_comparison *c,
                       const eq_tensor_result *first)
{
    if (t->title != NULL) {
        rd->heading_begin(rd);
        rd->text(rd, t->title);
        rd->heading_end(rd);
    }
    if (t->intro != NULL) t->intro(rd, c, first);
    rd->table_begin(rd, t);
}

/* A table of rows that are no results: n_rows(c) rows, each cell its column's row_text. */
static int write_row_table(const eq_renderer *rd, const eq_report_table *t, const eq_comparison *c)
{
    int rows = t->n_rows(c);
    if (rows > 0) table_head(rd, t, c, NULL);
    for (int i = 0; i < rows; i++) {
        char text[EQ_REPORT_MAX_COLUMNS][160];
        const char *cells[EQ_REPORT_MAX_COLUMNS];
        int n = 0;
        for (int k = 0; k < eq_report_table_columns(t) && n < EQ_REPORT_MAX_COLUMNS; k++) {
            if (!(t->columns[k].shown_in & rd->format)) continue;
            cells[n] = t->columns[k].row_text(c, i, text[n], sizeof text[n]);
            n++;
        }
        rd->row(rd, t, NULL, 0, cells);
    }
    if (rows > 0) rd->table_end(rd);
    return rows;
}

int eq_report_write_table(const eq_renderer *rd, const eq_report_table *t, const eq_comparison *c)
{
    if (t->n_rows != NULL) return write_row_table(rd, t, c);
    int rows = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        if (!t->has_row(r, t->role)) continue;
        if (rows++ == 0) table_head(rd, t, c, r);
        char text[EQ_REPORT_MAX_COLUMNS][160];
        const char *cells[EQ_REPORT_MAX_COLUMNS];
        int n = 0;
        for (int k = 0; k < eq_report_table_columns(t) && n < EQ_REPORT_MAX_COLUMNS; k++) {
            if (!(t->columns[k].shown_in & rd->format)) continue;
            cells[n] = t->columns[k].text(r, c->expect, text[n], sizeof text[n]);
            n++;
        }
        rd->row(rd, t, r, t->row_fails != NULL && t->row_fails(r), cells);
    }
    if (rows > 0) rd->table_end(rd);
    return rows;
}

#define N_LAYER_TABLES EQ_TABLE_N_LAYER
#define THEORY (&eq_report_tables[EQ_TABLE_THEORY])
#define TRUTH (&eq_report_tables[EQ_TABLE_TRUTH])

static void write_tolerance(const eq_renderer *rd, const eq_tolerance *tol)
{
    char formula[160];
    rd->code(rd, tol->name);
    rd->text(rd, ": ");
    snprintf(formula, sizeof formula, "|d| <= %g%s + %g |ref|", tol->atol,
             tol->atol_scale == EQ_ATOL_REF_RMS ? " rms(ref)" : "", tol->rtol);
    rd->code(rd, formula);
    eq_render_textf(rd, " (%s).", tol->source[0] ? tol->source : "no source given");
}

/* The comparison's verdict in one paragraph, before its tables: how many tensors are not as expected
 * of how many, where it starts (the first in capture order) and its diagnosis, the assembly
 * findings, a training curve not as expected. (HTML says it in the heading's badge.) */
static eq_status verdict(const eq_renderer *rd, const eq_comparison *c)
{
    int tensors = 0;
    for (int i = 0; i < c->count; i++) tensors += !c->results[i].as_expected;
    const char *plural = c->count == 1 ? "" : "s";
    rd->para_begin(rd);
    rd->strong(rd, c->n_unexpected == 0 ? "Verdict: pass." : "Verdict: FAIL.");
    if (tensors == 0) eq_render_textf(rd, " All %d tensor%s as expected", c->count, plural);
    else eq_render_textf(rd, " %d of %d tensor%s not as expected", tensors, c->count, plural);
    const eq_tensor_result *first = eq_report_first_unexpected(c);
    if (first != NULL) {
        rd->text(rd, "; it starts at ");
        rd->code(rd, first->path);
        eq_render_textf(rd, " (the first in capture order): %s", first->diagnosis);
    }
    eq_render_textf(rd, ". Assembly findings: %d%s.", c->n_findings,
                    c->n_findings > 0 ? " (listed below), not as expected" : "");
    char curve[4 * EQ_NAME_MAX];
    if (eq_report_steps_unexpected(c, 1, curve, sizeof curve) != NULL)
        eq_render_textf(rd, " Not as expected: %s.", curve);
    rd->para_end(rd);
    return EQ_OK;
}

static eq_status expectation(const eq_renderer *rd, const eq_comparison *c)
{
    rd->para_begin(rd);
    eq_render_textf(rd, "Expected: %s (parameters and inputs: bit_exact). Tolerance ", eq_expect_name(c->expect));
    write_tolerance(rd, &c->tol);
    rd->para_end(rd);
    return EQ_OK;
}

static eq_status gradient_tolerance(const eq_renderer *rd, const eq_comparison *c)
{
    if (strcmp(c->grad_tol.name, c->tol.name) == 0 || c->grad_tol.name[0] == '\0') return EQ_OK;
    rd->para_begin(rd);
    rd->text(rd, "Gradients: tolerance ");
    write_tolerance(rd, &c->grad_tol);
    rd->para_end(rd);
    return EQ_OK;
}

static eq_status gpu(const eq_renderer *rd, const eq_comparison *c)
{
    const char *t = c->test_meta.gpu, *r = c->ref_meta.gpu;
    if (t[0] == '\0' && r[0] == '\0') return EQ_OK;
    rd->para_begin(rd);
    if (strcmp(t, r) == 0) eq_render_textf(rd, "GPU: %s.", t);
    else eq_render_textf(rd, "GPU: this run %s; the reference %s.", t[0] ? t : "none", r[0] ? r : "none");
    rd->para_end(rd);
    return EQ_OK;
}

static eq_status numerics(const eq_renderer *rd, const eq_comparison *c)
{
    const char *t = c->test_meta.numerics, *r = c->ref_meta.numerics;
    if (t[0] == '\0' && r[0] == '\0') return EQ_OK;
    rd->para_begin(rd);
    rd->text(rd, "Numerics: this run ");
    rd->code(rd, t[0] ? t : "equiv");
    rd->text(rd, ", the reference ");
    rd->code(rd, r[0] ? r : "equiv");
    rd->text(rd, " (README, \"Megatron's numerics\").");
    rd->para_end(rd);
    return EQ_OK;
}

/* The tensors the case file expects something else of ([expect.avg|sum|any]), each name once. */
static eq_status tensor_expectations(const eq_renderer *rd, const eq_comparison *c)
{
    for (int e = 0; e < EQ_EXPECT_COUNT; e++) {
        int shown = 0;
        for (int i = 0; i < c->count; i++) {
            const eq_tensor_result *r = &c->results[i];
            if ((int)r->expect != e || r->expect == c->expect || r->role == EQ_ROLE_INPUT || r->role == EQ_ROLE_PARAM)
                continue;
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = (int)c->results[j].expect == e && strcmp(c->results[j].name, r->name) == 0;
            if (seen) continue;
            if (!shown) rd->para_begin(rd);
            rd->text(rd, shown ? ", " : "Expected per tensor (the case file): ");
            rd->code(rd, r->name);
            shown++;
        }
        if (shown) {
            eq_render_textf(rd, ": %s.", eq_expect_name((eq_expect)e));
            rd->para_end(rd);
        }
    }
    return EQ_OK;
}

/* A run equiv did not compute: what wrote it, its world and step, its environment. */
static void write_run(const eq_renderer *rd, const char *which, const eq_run_meta *m)
{
    if (m->source[0] == '\0') return;
    rd->para_begin(rd);
    eq_render_textf(rd, "%s: written by %s", which, m->source);
    if (m->world_size > 0) eq_render_textf(rd, ", %d rank%s assembled", m->world_size, m->world_size == 1 ? "" : "s");
    eq_render_textf(rd, ", step %lld", (long long)m->step);
    if (m->env[0] != '\0') eq_render_textf(rd, "; %s", m->env);
    rd->text(rd, ".");
    rd->para_end(rd);
}

static eq_status runs(const eq_renderer *rd, const eq_comparison *c)
{
    write_run(rd, "Reference", &c->ref_meta);
    write_run(rd, "Test run", &c->test_meta);
    return EQ_OK;
}

/* What assembling the runs found (harness/run_load.h): each is not as expected. */
static eq_status findings(const eq_renderer *rd, const eq_comparison *c)
{
    if (c->n_findings == 0) return EQ_OK;
    rd->heading_begin(rd);
    rd->text(rd, "Assembly findings (");
    rd->strong(rd, "FAIL");
    rd->text(rd, ")");
    rd->heading_end(rd);
    rd->list_begin(rd);
    for (int i = 0; i < c->n_findings; i++) {
        rd->item_begin(rd, 1);
        rd->text(rd, c->findings[i]);
        rd->item_end(rd);
    }
    rd->list_end(rd);
    return EQ_OK;
}

/* "2 parameters bit-identical after gathering, 1 input bit-identical" (or how many are not). */
static eq_status params_line(const eq_renderer *rd, const eq_comparison *c)
{
    int n_param = 0, exact_param = 0, n_input = 0, exact_input = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        int exact = r->observed == EQ_OBS_BIT_EXACT;
        n_param += r->role == EQ_ROLE_PARAM;
        exact_param += r->role == EQ_ROLE_PARAM && exact;
        n_input += r->role == EQ_ROLE_INPUT;
        exact_input += r->role == EQ_ROLE_INPUT && exact;
    }
    rd->para_begin(rd);
    rd->text(rd, "Parameters and inputs: ");
    if (n_param + n_input == 0) rd->text(rd, "none captured");
    if (n_param > 0 && exact_param == n_param)
        eq_render_textf(rd, "%d parameter%s bit-identical after gathering", n_param, n_param == 1 ? "" : "s");
    else if (n_param > 0) {
        eq_render_textf(rd, "%d of %d parameters ", n_param - exact_param, n_param);
        rd->strong(rd, "differ");
        rd->text(rd, " after gathering (listed below)");
    }
    const char *separator = n_param > 0 ? ", " : "";
    if (n_input > 0 && exact_input == n_input)
        eq_render_textf(rd, "%s%d input%s bit-identical", separator, n_input, n_input == 1 ? "" : "s");
    else if (n_input > 0) {
        eq_render_textf(rd, "%s%d of %d inputs ", separator, n_input - exact_input, n_input);
        rd->strong(rd, "differ");
        rd->text(rd, " (listed below)");
    }
    rd->text(rd, ".");
    rd->para_end(rd);
    return EQ_OK;
}

/* The tensors as expected that hold Inf in both runs at the same places, compared as equal there (a
 * mask's -Inf, or an overflow both runs made): said, not left to the JSON. (NaN in both, or nothing
 * finite, is NON-FINITE: harness/compare.h.) */
#define INF_NAMED 8
static eq_status inf_in_both(const eq_renderer *rd, const eq_comparison *c)
{
    int n = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        if (!r->as_expected || r->m.inf_ref == 0 || r->observed == EQ_OBS_NONFINITE) continue;
        if (n == 0) {
            rd->para_begin(rd);
            rd->text(rd, "Inf in both runs, at the same places, compared as equal there (a mask's -Inf, or an overflow "
                         "both runs made): ");
        }
        if (n++ >= INF_NAMED) continue;
        if (n > 1) rd->text(rd, ", ");
        rd->code(rd, r->path);
        eq_render_textf(rd, " (%lld of %lld elements)", (long long)r->m.inf_ref, (long long)r->m.count);
    }
    if (n == 0) return EQ_OK;
    if (n > INF_NAMED) eq_render_textf(rd, ", and %d more", n - INF_NAMED);
    rd->text(rd, ".");
    rd->para_end(rd);
    return EQ_OK;
}

static eq_status plots(const eq_renderer *rd, const eq_comparison *c)
{
    return rd->plots != NULL ? rd->plots(rd, c) : EQ_OK;
}

static int layer_rows(const eq_comparison *c)
{
    int rows = 0;
    for (int i = 0; i < c->count; i++)
        for (int t = 0; t < N_LAYER_TABLES; t++)
            rows += eq_report_tables[t].has_row(&c->results[i], eq_report_tables[t].role);
    return rows;
}

static eq_status layer_tables(const eq_renderer *rd, const eq_comparison *c)
{
    for (int t = 0; t < N_LAYER_TABLES; t++) eq_report_write_table(rd, &eq_report_tables[t], c);
    return EQ_OK;
}

/* Where no per-layer table has a row, the table's header over a row that says so. */
static eq_status no_layer_rows(const eq_renderer *rd, const eq_comparison *c)
{
    if (layer_rows(c) > 0) return EQ_OK;
    const char *cells[EQ_REPORT_MAX_COLUMNS];
    int n = 0;
    for (int k = 0; k < eq_report_n_columns && n < EQ_REPORT_MAX_COLUMNS; k++) {
        if (!(eq_report_columns[k].shown_in & rd->format)) continue;
        cells[n] = n < 2 ? "-" : n == 2 ? "(no activations, gradients or losses captured)" : "";
        n++;
    }
    rd->table_begin(rd, &eq_report_tables[EQ_TABLE_ACTIVATIONS]);
    rd->row(rd, &eq_report_tables[EQ_TABLE_ACTIVATIONS], NULL, 0, cells);
    rd->table_end(rd);
    return EQ_OK;
}

static eq_status theory(const eq_renderer *rd, const eq_comparison *c)
{
    eq_report_write_table(rd, THEORY, c);
    return EQ_OK;
}

/* A user's run: say where no bound was computed, rather than leave it to be guessed. */
static eq_status bound_coverage(const eq_renderer *rd, const eq_comparison *c)
{
    if (c->test_meta.source[0] == '\0' && c->ref_meta.source[0] == '\0') return EQ_OK;
    int rows = 0;
    for (int i = 0; i < c->count; i++) rows += c->results[i].theory.applies != 0;
    rd->para_begin(rd);
    eq_render_textf(rd, "Rounding-error bound: computed for %d tensor%s (GEMM outputs whose operands the capture "
                        "recorded, bit-identical in both runs); not computed for the other %d.",
                    rows, rows == 1 ? "" : "s", c->count - rows);
    rd->para_end(rd);
    return EQ_OK;
}

/* A user's run: the structure tests and the truth, what they covered and how close the tensors as
 * expected came to a limit (the margin: 0.3 is a third of the way to "not rounding"). */
static eq_status evidence(const eq_renderer *rd, const eq_comparison *c)
{
    int tested = 0, flagged = 0, judged = 0, truth_flagged = 0;
    const eq_tensor_result *closest = NULL, *closest_truth = NULL;
    double margin = -1, truth_margin = -1;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        if (r->structure.applies) {
            tested++;
            flagged += eq_structure_flagged(&r->structure);
            double m = eq_structure_margin(&r->structure);
            if (!eq_structure_flagged(&r->structure) && m > margin) margin = m, closest = r;
        }
        if (r->truth.applies && r->truth.judged) {
            judged++;
            truth_flagged += eq_truth_flagged(&r->truth);
            double m = eq_truth_ratio(&r->truth);
            if (!eq_truth_flagged(&r->truth) && m > truth_margin) truth_margin = m, closest_truth = r;
        }
    }
    if (tested == 0 && judged == 0) return EQ_OK;
    char text[64];
    const eq_tensor_result *nearest = NULL; /* to the tolerance, of those as expected */
    for (int i = 0; i < c->count; i++)
        if (c->results[i].as_expected && isfinite(c->results[i].m.max_tol_ratio) &&
            (nearest == NULL || c->results[i].m.max_tol_ratio > nearest->m.max_tol_ratio))
            nearest = &c->results[i];
    if (nearest != NULL) {
        rd->para_begin(rd);
        rd->text(rd, "Tolerance: the tensor as expected nearest to it is ");
        rd->code(rd, nearest->path);
        eq_render_textf(rd, ", at %s of it.", eq_format_sig(nearest->m.max_tol_ratio, 2, text, sizeof text));
        rd->para_end(rd);
    }
    rd->para_begin(rd);
    eq_render_textf(rd, "Structure (rounding is unstructured; a bug is a factor, a shift on every row or one tp rank's "
                        "shard): tested on %d tensor%s at a false-alarm probability of %g per test and tensor, %d "
                        "flagged.", tested, tested == 1 ? "" : "s", EQ_STRUCTURE_ALPHA, flagged);
    if (closest != NULL) {
        rd->text(rd, " Closest to a limit of those not flagged: ");
        rd->code(rd, closest->path);
        eq_render_textf(rd, ", %s of the way.", eq_format_sig(eq_structure_margin(&closest->structure), 2, text,
                                                                sizeof text));
    }
    rd->para_end(rd);
    if (judged > 0) {
        rd->para_begin(rd);
        eq_render_textf(rd, "Truth (the reference's step in %s): %d tensor%s judged, a layout more than x%g further from "
                            "the truth than the reference (and above %g u) is not rounding; %d flagged.",
                        eq_dtype_name(c->results[0].truth.truth_dtype), judged, judged == 1 ? "" : "s",
                        EQ_TRUTH_RATIO, EQ_TRUTH_FLOOR_U, truth_flagged);
        if (closest_truth != NULL) {
            rd->text(rd, " Least accurate of those not flagged: ");
            rd->code(rd, closest_truth->path);
            eq_render_textf(rd, ", x%s the reference's error.", eq_format_sig(truth_margin, 3, text, sizeof text));
        }
        rd->para_end(rd);
    }
    return EQ_OK;
}

static eq_status truth(const eq_renderer *rd, const eq_comparison *c)
{
    eq_report_write_table(rd, TRUTH, c);
    return EQ_OK;
}

static void write_unexpected_item(const eq_renderer *rd, const eq_tensor_result *r)
{
    char max[32], ratio[32], tol_ratio[32], rel[32];
    rd->item_begin(rd, 0);
    rd->link_begin(rd, r);
    rd->code(rd, r->path);
    rd->link_end(rd, r);
    eq_render_textf(rd, " (%s): %s, expected %s: ", eq_role_name(r->role), eq_observed_name(r->observed),
                    eq_expect_name(r->expect));
    rd->diagnosis(rd, r->diagnosis);
    if (r->m.n_mean_ratio == 0) snprintf(ratio, sizeof ratio, "-");
    else eq_format_sig(r->m.mean_ratio, 4, ratio, sizeof ratio);
    eq_render_textf(rd, "; max |d| %s at index %lld, %lld of %lld outside, %s x the tolerance; mean(dist/ref)=%s, "
                        "worst rel err %s",
                    eq_format_sig(r->m.max_abs, 3, max, sizeof max), (long long)r->m.argmax, (long long)r->m.n_outside,
                    (long long)r->m.count, eq_format_sig(r->m.max_tol_ratio, 3, tol_ratio, sizeof tol_ratio), ratio,
                    eq_format_sig(r->m.worst_rel, 2, rel, sizeof rel));
    rd->item_end(rd);
}

static eq_status unexpected(const eq_renderer *rd, const eq_comparison *c)
{
    const char *plural = c->count == 1 ? "" : "s";
    if (c->n_unexpected == 0) {
        rd->para_begin(rd);
        eq_render_textf(rd, "All %d tensor%s as expected.", c->count, plural);
        rd->para_end(rd);
        return EQ_OK;
    }
    const eq_tensor_result **sorted = NULL;
    int n = 0;
    eq_status st = eq_report_unexpected_worst_first(c, &sorted, &n);
    if (st != EQ_OK) return st;
    const eq_tensor_result *first = eq_report_first_unexpected(c);
    if (first != NULL) {
        rd->para_begin(rd);
        rd->text(rd, "Where it starts (the first not as expected, in capture order): ");
        rd->code(rd, first->path);
        eq_render_textf(rd, ": %s.", first->diagnosis);
        rd->para_end(rd);
    }
    rd->para_begin(rd);
    if (n == 0)
        eq_render_textf(rd, "All %d tensor%s as expected; the assembly findings above are not.", c->count, plural);
    else eq_render_textf(rd, "Not as expected, worst first (%d of %d tensors):", n, c->count);
    rd->para_end(rd);
    if (n > 0) {
        rd->list_begin(rd);
        for (int i = 0; i < n; i++) write_unexpected_item(rd, sorted[i]);
        rd->list_end(rd);
    }
    free(sorted);
    return EQ_OK;
}

const eq_report_part eq_report_parts[] = {
    {"verdict", EQ_COLUMN_MARKDOWN, verdict},
    {"expectation", EQ_COLUMN_BOTH, expectation},
    {"gradient tolerance", EQ_COLUMN_BOTH, gradient_tolerance},
    {"gpu", EQ_COLUMN_BOTH, gpu},
    {"numerics", EQ_COLUMN_BOTH, numerics},
    {"tensor expectations", EQ_COLUMN_MARKDOWN, tensor_expectations},
    {"runs", EQ_COLUMN_MARKDOWN, runs},
    {"findings", EQ_COLUMN_BOTH, findings},
    {"parameters and inputs", EQ_COLUMN_BOTH, params_line},
    {"inf in both", EQ_COLUMN_BOTH, inf_in_both},
    {"steps", EQ_COLUMN_BOTH, eq_report_steps_write},
    {"plots", EQ_COLUMN_HTML, plots},
    {"per-layer tables", EQ_COLUMN_BOTH, layer_tables},
    {"no per-layer rows", EQ_COLUMN_MARKDOWN, no_layer_rows},
    {"theory", EQ_COLUMN_BOTH, theory},
    {"bound coverage", EQ_COLUMN_MARKDOWN, bound_coverage},
    {"truth", EQ_COLUMN_BOTH, truth},
    {"evidence", EQ_COLUMN_BOTH, evidence},
    {"unexpected", EQ_COLUMN_BOTH, unexpected},
};
const int eq_report_n_parts = (int)(sizeof eq_report_parts / sizeof eq_report_parts[0]);

eq_status eq_report_write_parts(const eq_renderer *rd, const eq_comparison *c)
{
    for (int p = 0; p < eq_report_n_parts; p++) {
        if (!(eq_report_parts[p].shown_in & rd->format)) continue;
        eq_status st = eq_report_parts[p].write(rd, c);
        if (st != EQ_OK) return st;
    }
    return EQ_OK;
}
