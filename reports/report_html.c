/* HTML report: one self-contained page for reading a run in a browser. Comparisons of one case and
 * layout sit side by side by dtype (bf16 left of fp32, the order of seed 002 section 5), each with
 * its divergence-by-depth plots (reports/plot_svg.c), the per-layer tables of seed 002 sections
 * 3-4, and the results not as expected. No scripts and nothing fetched: the file is attached to
 * CI runs and opened offline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/rounding_bound.h"
#include "harness/truth.h"
#include "reports/how_to_read.h"
#include "reports/number_format.h"
#include "reports/plot_svg.h"
#include "reports/report.h"
#include "reports/report_columns.h"
#include "reports/report_steps.h"

/* Four tensors give eight lines (max and mean each): about what one chart shows readably. */
#define MAX_PLOTTED_NAMES 4

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

static int count_role(const eq_comparison *c, eq_role role)
{
    int n = 0;
    for (int i = 0; i < c->count; i++) n += c->results[i].role == role;
    return n;
}

typedef struct {
    const char *name; /* a result's name */
    double worst;     /* largest max |d| over its layers */
    int first;        /* capture position of its first result, to break ties */
} tensor_name;

static int larger_first(const void *a, const void *b)
{
    const tensor_name *na = a, *nb = b;
    if (na->worst != nb->worst) return na->worst > nb->worst ? -1 : 1;
    return (na->first > nb->first) - (na->first < nb->first);
}

/* A tolerance drawn as one horizontal line: absolute, without a relative part. */
static int tolerance_is_flat(const eq_tolerance *tol) { return tol->atol_scale == EQ_ATOL_ABSOLUTE && tol->rtol == 0.0; }

/* The tolerance at an element of the tensor's typical size: atol' + rtol rms(ref), atol' = atol,
 * or atol rms(ref) for an rms-scaled entry (rms from the reference's mean and population std). */
static double typical_tolerance(const eq_tolerance *tol, const eq_metrics *m)
{
    double rms = sqrt(m->ref_std * m->ref_std + m->ref_mean * m->ref_mean);
    return (tol->atol_scale == EQ_ATOL_REF_RMS ? tol->atol * rms : tol->atol) + tol->rtol * rms;
}

/* The caption under a plot: what the lines are, the tolerance, the marks, and the tensors left out. */
static void write_caption(FILE *out, const eq_tolerance *tol, const tensor_name *names, int n_names, int n_shown,
                          int n_marked)
{
    fprintf(out, "<figcaption>Solid: max |d|, dashed: mean |d|, per tensor name; log scale.");
    if (tolerance_is_flat(tol))
        fprintf(out, " Grey dashes: the tolerance, |d| &lt;= %g.", tol->atol);
    else
        fprintf(out, " Grey dots: each tensor&#39;s tolerance at an element of its typical size, %g%s + %g rms(ref) "
                     "(the bound is |d| &lt;= atol + rtol |ref| per element).",
                tol->atol, tol->atol_scale == EQ_ATOL_REF_RMS ? " rms(ref)" : "", tol->rtol);
    if (n_marked > 0)
        fprintf(out, " Red rings: %d point%s of results not as expected.", n_marked, n_marked == 1 ? "" : "s");
    else fprintf(out, " No result drawn here is not as expected.");
    if (n_shown < n_names) {
        fprintf(out, " Showing the %d of %d tensors with the largest max |d|; left out: ", n_shown, n_names);
        for (int k = n_shown; k < n_names; k++) {
            fprintf(out, "%s<code>", k > n_shown ? ", " : "");
            eq_svg_escape(out, names[k].name);
            fprintf(out, "</code>");
        }
        fprintf(out, ".");
    }
    fprintf(out, "</figcaption>\n");
}

/* Max and mean |d| against layer for the results of one role, one pair of lines per tensor name,
 * with the tolerance and a ring on each point not as expected. */
static eq_status write_plot(FILE *out, const eq_comparison *c, eq_role role, const char *role_title)
{
    eq_status st = EQ_OK;
    tensor_name *names = malloc((size_t)c->count * sizeof *names);
    double *values = malloc((size_t)c->count * 4 * MAX_PLOTTED_NAMES * sizeof *values);
    unsigned char *flags = malloc((size_t)c->count * MAX_PLOTTED_NAMES);
    if (names == NULL || values == NULL || flags == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot plot %d results", c->count);
        goto cleanup;
    }
    /* Gradients are judged by their own entry (eq_compare_captures_by_role): draw that one. */
    const eq_tolerance *tol = role == EQ_ROLE_GRAD && c->grad_tol.name[0] != '\0' ? &c->grad_tol : &c->tol;
    int n_names = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        if (r->role != role) continue;
        int k = 0;
        while (k < n_names && strcmp(names[k].name, r->name) != 0) k++;
        if (k == n_names) names[n_names++] = (tensor_name){r->name, 0.0, i};
        names[k].worst = fmax(names[k].worst, r->m.max_abs);
    }
    qsort(names, (size_t)n_names, sizeof *names, larger_first);
    int n_shown = n_names < MAX_PLOTTED_NAMES ? n_names : MAX_PLOTTED_NAMES, n_marked = 0;
    int flat = tolerance_is_flat(tol), per_name = flat ? 2 : 3, n_series = 0;
    eq_svg_series series[3 * MAX_PLOTTED_NAMES];
    char labels[3 * MAX_PLOTTED_NAMES][EQ_NAME_MAX + 12];
    for (int k = 0; k < n_shown; k++) {
        /* x, max, mean and tolerance of name k, each `c->count` long (the most points a name can have) */
        double *x = values + (size_t)c->count * 4 * k, *max = x + c->count, *mean = max + c->count;
        double *limit = mean + c->count;
        unsigned char *marked = flags + (size_t)c->count * k;
        int points = 0;
        for (int i = 0; i < c->count; i++) {
            const eq_tensor_result *r = &c->results[i];
            if (r->role != role || strcmp(r->name, names[k].name) != 0) continue;
            /* insert in layer order (captures list layers in order; this keeps it so anyway) */
            int at = points++;
            for (; at > 0 && x[at - 1] > r->layer; at--) {
                x[at] = x[at - 1];
                max[at] = max[at - 1];
                mean[at] = mean[at - 1];
                limit[at] = limit[at - 1];
                marked[at] = marked[at - 1];
            }
            x[at] = r->layer;
            max[at] = r->m.max_abs;
            mean[at] = r->m.mean_abs;
            limit[at] = typical_tolerance(tol, &r->m);
            marked[at] = !r->as_expected;
            n_marked += !r->as_expected;
        }
        snprintf(labels[per_name * k], sizeof labels[0], "%s max", names[k].name);
        snprintf(labels[per_name * k + 1], sizeof labels[0], "%s mean", names[k].name);
        series[n_series++] = (eq_svg_series){labels[per_name * k], x, max, points, k, 0, marked, 0};
        series[n_series++] = (eq_svg_series){labels[per_name * k + 1], x, mean, points, k, 1, NULL, 0};
        if (!flat) {
            snprintf(labels[per_name * k + 2], sizeof labels[0], "%s tolerance", names[k].name);
            series[n_series++] = (eq_svg_series){labels[per_name * k + 2], x, limit, points, k, 0, NULL, 1};
        }
    }
    char title[128], ref_label[64];
    snprintf(title, sizeof title, "%s %s: |test - ref| by layer", eq_dtype_name(c->test_meta.dtype), role_title);
    snprintf(ref_label, sizeof ref_label, "tolerance %g", tol->atol);
    eq_svg_refline atol_line = {tol->atol, ref_label};
    int draw_atol = flat && tol->atol > 0.0;
    eq_svg_chart chart = {
        .title = title,
        .x_label = "layer",
        .y_label = "|test - ref|",
        .log_y = 1,
        .series = series,
        .n_series = n_series,
        .refs = draw_atol ? &atol_line : NULL,
        .n_refs = draw_atol,
    };
    fprintf(out, "<figure>\n");
    EQ_TRY(eq_svg_plot(out, &chart));
    write_caption(out, tol, names, n_names, n_shown, n_marked);
    fprintf(out, "</figure>\n");
cleanup:
    free(names);
    free(values);
    free(flags);
    return st;
}

/* A per-layer table (reports/report_columns.h): the verdict first, then what was observed and seed
 * 002 sections 3-4's columns; the full set is in the JSON. Each row links as "cN/<path>", its
 * diagnosis in its title. */
static void write_table(FILE *out, const eq_comparison *c, int index, const eq_report_section *section)
{
    if (count_role(c, section->role) == 0) return;
    fprintf(out, "<h4>%s</h4>\n<table>\n<thead><tr>", section->heading);
    for (int k = 0; k < eq_report_n_columns; k++) {
        if (!(eq_report_columns[k].shown_in & EQ_COLUMN_HTML)) continue;
        fprintf(out, "<th>");
        eq_svg_escape(out, eq_report_columns[k].header);
        fprintf(out, "</th>");
    }
    fprintf(out, "</tr></thead>\n<tbody>\n");
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        if (r->role != section->role) continue;
        fprintf(out, "<tr id=\"c%d/", index);
        eq_svg_escape(out, r->path);
        fprintf(out, "\" class=\"%s\" title=\"", r->as_expected ? "ok" : "fail");
        eq_svg_escape(out, r->diagnosis);
        fprintf(out, "\">");
        for (int k = 0; k < eq_report_n_columns; k++) {
            const eq_report_column *col = &eq_report_columns[k];
            char text[160];
            if (!(col->shown_in & EQ_COLUMN_HTML)) continue;
            fprintf(out, "%s", col->kind == EQ_COLUMN_VERDICT  ? "<td class=\"verdict\">"
                               : col->kind == EQ_COLUMN_NUMBER ? "<td class=\"num\">"
                                                               : "<td>");
            eq_svg_escape(out, col->text(r, c->expect, text, sizeof text));
            fprintf(out, "</td>");
        }
        fprintf(out, "</tr>\n");
    }
    fprintf(out, "</tbody>\n</table>\n");
}

/* The GEMM outputs rounding-error theory applies to (harness/rounding_bound.h), the reading first. */
static void write_theory(FILE *out, const eq_comparison *c)
{
    int rows = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        const eq_theory *th = &r->theory;
        if (!th->applies) continue;
        if (rows++ == 0)
            fprintf(out, "<h4>Rounding-error theory</h4>\n<p class=\"note\">GEMMs whose operands are bit-identical in "
                         "both runs, against the bound rounding allows each element for the split of K: deterministic "
                         "(Higham&#39;s &gamma;<sub>n</sub>: no summation order exceeds it) and the 99.9%% bound "
                         "(Higham and Mary&#39;s probabilistic bound, &lambda; chosen so that it fails at an element "
                         "with probability at most %g under their model of independent rounding errors). "
                         "&ldquo;max |d|/det&rdquo; is the largest per-element ratio |d<sub>i</sub>| / "
                         "bound<sub>i</sub>, not max |d| over the largest bound; above 1 it is not rounding.</p>\n"
                         "<table>\n<thead><tr><th>reading</th><th>Layer</th><th>Tensor</th><th>K</th><th>split</th>"
                         "<th>max |d|</th><th>max |d|/det</th><th>max |d|/99.9%%</th><th>largest det bound</th>"
                         "<th>largest 99.9%% bound</th><th>&lambda;</th></tr></thead>\n<tbody>\n",
                    th->prob_failure);
        char max[32], det_ratio[32], prob_ratio[32], det[32], prob[32], lambda[32];
        fprintf(out, "<tr class=\"%s\"><td class=\"verdict\">%s</td><td class=\"num\">%d</td><td>",
                th->det_ratio > 1.0 ? "fail" : "ok", eq_theory_reading(th, r->m.max_abs), r->layer);
        eq_svg_escape(out, r->name);
        fprintf(out, "</td><td class=\"num\">%lld</td><td>%d &rarr; %d</td><td class=\"num\">%s</td>"
                     "<td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
                     "<td class=\"num\">%s</td><td class=\"num\">%s</td></tr>\n",
                (long long)th->terms, th->ref_partitions, th->test_partitions,
                eq_format_sig(r->m.max_abs, 3, max, sizeof max), eq_format_sig(th->det_ratio, 3, det_ratio, sizeof det_ratio),
                eq_format_sig(th->prob_ratio, 3, prob_ratio, sizeof prob_ratio),
                eq_format_sig(th->det_bound_max, 3, det, sizeof det), eq_format_sig(th->prob_bound_max, 3, prob, sizeof prob),
                eq_format_sig(th->prob_lambda, 3, lambda, sizeof lambda));
    }
    if (rows > 0) fprintf(out, "</tbody>\n</table>\n");
}

/* --truth: each run against the fp64 run of the same step (harness/truth.h). */
static void write_truth(FILE *out, const eq_comparison *c)
{
    int rows = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        if (!r->truth.applies) continue;
        if (rows++ == 0)
            fprintf(out, "<h4>Against the fp64 truth</h4>\n<p class=\"note\">Each run against the fp64 dp1-tp1 run of "
                         "the same step: is the layout less accurate than the reference, or only rounded "
                         "differently?</p>\n<table>\n<thead><tr><th>reading</th><th>Layer</th><th>Tensor</th>"
                         "<th>ref max |d|</th><th>test max |d|</th><th>ref rel</th><th>test rel</th></tr></thead>\n"
                         "<tbody>\n");
        char ref_max[32], test_max[32], ref_rel[32], test_rel[32], reading[64];
        fprintf(out, "<tr><td class=\"verdict\">%s</td><td class=\"num\">%d</td><td>",
                eq_truth_reading(&r->truth, reading, sizeof reading), r->layer);
        eq_svg_escape(out, r->name);
        fprintf(out, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
                     "<td class=\"num\">%s</td></tr>\n",
                eq_format_sig(r->truth.ref_max, 3, ref_max, sizeof ref_max),
                eq_format_sig(r->truth.test_max, 3, test_max, sizeof test_max),
                eq_format_sig(r->truth.ref_rel, 3, ref_rel, sizeof ref_rel),
                eq_format_sig(r->truth.test_rel, 3, test_rel, sizeof test_rel));
    }
    if (rows > 0) fprintf(out, "</tbody>\n</table>\n");
}

static eq_status write_unexpected(FILE *out, const eq_comparison *c, int index)
{
    if (c->n_unexpected == 0) {
        fprintf(out, "<p class=\"note\">All %d tensor%s as expected.</p>\n", c->count, c->count == 1 ? "" : "s");
        return EQ_OK;
    }
    const eq_tensor_result **sorted = NULL;
    int n = 0;
    eq_status st = eq_report_unexpected_worst_first(c, &sorted, &n);
    if (st != EQ_OK) return st;
    if (n == 0) { /* the assembly findings alone */
        free(sorted);
        return EQ_OK;
    }
    fprintf(out, "<h4>Not as expected, worst first (%d of %d tensors)</h4>\n<ol class=\"unexpected\">\n", n, c->count);
    for (int i = 0; i < n; i++) {
        const eq_tensor_result *r = sorted[i];
        char max[32];
        /* parameters and inputs have no table row to link to */
        int linked = r->role == EQ_ROLE_ACTIVATION || r->role == EQ_ROLE_GRAD || r->role == EQ_ROLE_LOSS;
        fprintf(out, "<li>");
        if (linked) {
            fprintf(out, "<a href=\"#c%d/", index);
            eq_svg_escape(out, r->path);
            fprintf(out, "\">");
        }
        fprintf(out, "<code>");
        eq_svg_escape(out, r->path);
        fprintf(out, "</code>%s (%s): %s, expected %s: <span class=\"diagnosis\">", linked ? "</a>" : "",
                eq_role_name(r->role), eq_observed_name(r->observed), eq_expect_name(r->expect));
        eq_svg_escape(out, r->diagnosis);
        char tol_ratio[32];
        fprintf(out, "</span>; max |d| %s at index %lld, %lld of %lld outside, %s &times; the tolerance</li>\n",
                eq_format_sig(r->m.max_abs, 3, max, sizeof max), (long long)r->m.argmax, (long long)r->m.n_outside,
                (long long)r->m.count, eq_format_sig(r->m.max_tol_ratio, 3, tol_ratio, sizeof tol_ratio));
    }
    fprintf(out, "</ol>\n");
    free(sorted);
    return EQ_OK;
}

/* What assembling the runs found (harness/run_load.h): each is not as expected. */
static void write_findings(FILE *out, const eq_comparison *c)
{
    if (c->n_findings == 0) return;
    fprintf(out, "<h4>Assembly findings</h4>\n<ol class=\"unexpected\">\n");
    for (int i = 0; i < c->n_findings; i++) {
        fprintf(out, "<li class=\"fail\">");
        eq_svg_escape(out, c->findings[i]);
        fprintf(out, "</li>\n");
    }
    fprintf(out, "</ol>\n");
}

/* "Parameters: 2 of 2 bit-identical after gathering. Inputs: 1 of 1 bit-identical." */
static void write_params_line(FILE *out, const eq_comparison *c)
{
    int n_param = count_role(c, EQ_ROLE_PARAM), n_input = count_role(c, EQ_ROLE_INPUT);
    int exact_param = 0, exact_input = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        exact_param += r->role == EQ_ROLE_PARAM && r->observed == EQ_OBS_BIT_EXACT;
        exact_input += r->role == EQ_ROLE_INPUT && r->observed == EQ_OBS_BIT_EXACT;
    }
    fprintf(out, "<p class=\"note\">");
    if (n_param + n_input == 0) fprintf(out, "Parameters and inputs: none captured.");
    if (n_param > 0)
        fprintf(out, "Parameters: %d of %d bit-identical after gathering%s. ", exact_param, n_param,
                exact_param < n_param ? " (<strong>differ</strong>: listed below)" : "");
    if (n_input > 0)
        fprintf(out, "Inputs: %d of %d bit-identical%s.", exact_input, n_input,
                exact_input < n_input ? " (<strong>differ</strong>: listed below)" : "");
    fprintf(out, "</p>\n");
}

static eq_status write_comparison(FILE *out, const eq_comparison *c, int index)
{
    eq_status st = EQ_OK;
    const eq_run_meta *t = &c->test_meta;
    fprintf(out, "<div class=\"cmp\">\n<h3>%s", eq_dtype_name(t->dtype));
    if (t->algorithm[0] != '\0') {
        fprintf(out, " (");
        eq_svg_escape(out, t->algorithm);
        fprintf(out, ")");
    }
    if (c->n_unexpected > 0)
        fprintf(out, "<span class=\"badge status-fail\">%d not as expected</span>", c->n_unexpected);
    else fprintf(out, "<span class=\"badge status-pass\">all %d as expected</span>", c->count);
    fprintf(out, "</h3>\n<p class=\"note\">Expected: %s (parameters and inputs: bit_exact). Tolerance <code>",
            eq_expect_name(c->expect));
    eq_svg_escape(out, c->tol.name);
    fprintf(out, "</code>: |d| &lt;= %g%s + %g |ref| (", c->tol.atol,
            c->tol.atol_scale == EQ_ATOL_REF_RMS ? " rms(ref)" : "", c->tol.rtol);
    eq_svg_escape(out, c->tol.source[0] ? c->tol.source : "no source given");
    fprintf(out, ").</p>\n");
    if (strcmp(c->grad_tol.name, c->tol.name) != 0 && c->grad_tol.name[0] != '\0') {
        fprintf(out, "<p class=\"note\">Gradients: tolerance <code>");
        eq_svg_escape(out, c->grad_tol.name);
        fprintf(out, "</code>: |d| &lt;= %g%s + %g |ref| (", c->grad_tol.atol,
                c->grad_tol.atol_scale == EQ_ATOL_REF_RMS ? " rms(ref)" : "", c->grad_tol.rtol);
        eq_svg_escape(out, c->grad_tol.source[0] ? c->grad_tol.source : "no source given");
        fprintf(out, ").</p>\n");
    }
    const eq_run_meta *r = &c->ref_meta;
    if (t->gpu[0] != '\0' || r->gpu[0] != '\0') {
        fprintf(out, "<p class=\"note\">GPU: ");
        if (strcmp(t->gpu, r->gpu) == 0) eq_svg_escape(out, t->gpu);
        else {
            fprintf(out, "this run ");
            eq_svg_escape(out, t->gpu[0] ? t->gpu : "none");
            fprintf(out, "; the reference ");
            eq_svg_escape(out, r->gpu[0] ? r->gpu : "none");
        }
        fprintf(out, ".</p>\n");
    }
    if (t->numerics[0] != '\0' || r->numerics[0] != '\0') {
        fprintf(out, "<p class=\"note\">Numerics: this run ");
        eq_svg_escape(out, t->numerics[0] ? t->numerics : "equiv");
        fprintf(out, ", the reference ");
        eq_svg_escape(out, r->numerics[0] ? r->numerics : "equiv");
        fprintf(out, ".</p>\n");
    }
    write_findings(out, c);
    write_params_line(out, c);
    EQ_TRY(eq_report_steps_html(out, c));
    if (count_role(c, EQ_ROLE_ACTIVATION) > 0) EQ_TRY(write_plot(out, c, EQ_ROLE_ACTIVATION, "activations"));
    if (count_role(c, EQ_ROLE_GRAD) > 0) EQ_TRY(write_plot(out, c, EQ_ROLE_GRAD, "gradients"));
    for (int s = 0; s < eq_report_n_sections; s++) write_table(out, c, index, &eq_report_sections[s]);
    write_theory(out, c);
    write_truth(out, c);
    EQ_TRY(write_unexpected(out, c, index));
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
    fprintf(out, ": dp%d-tp%d vs dp%d-tp%d</h2>\n<div class=\"row\">\n", t->dp, t->tp, r->dp, r->tp);
    for (int i = 0; i < n_members; i++) EQ_TRY(write_comparison(out, &cmps[members[i]], members[i]));
    fprintf(out, "</div>\n</section>\n");
cleanup:
    return st;
}

eq_status eq_report_html(FILE *out, const eq_comparison *cmps, int n)
{
    eq_status st = EQ_OK;
    char summary[512];
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
