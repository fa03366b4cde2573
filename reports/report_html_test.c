/* The HTML report on three comparisons: a gpt_block case over 6 layers in fp32 (with a planted x8
 * tensor) and in bf16, handed over fp32 first, and an all-bit-exact row_parallel case. The page
 * closes every element it opens, holds one plot per comparison and role (activations, and
 * gradients where there are any), puts bf16 left of fp32, marks the planted row as failing with
 * its diagnosis in the list, puts the verdict first in every row, draws the tolerance in every
 * plot (gradients included) and rings the failing point, prints numbers in significant digits,
 * links to and writes the "How to read this report" glossary, and escapes a tensor named "q&k<v>".
 *
 * With a file name as argument it also writes the page there (for reports/render_check.sh). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "harness/verdict.h"
#include "reports/report.h"

#define EXPECT_HAS(text, part) EQ_EXPECT(strstr((text), (part)) != NULL, "report lacks '%s'", (part))
#define N_LAYERS 6

static void set_meta(eq_capture *cap, const char *case_name, eq_dtype dtype, int tp)
{
    eq_run_meta *m = &cap->meta;
    snprintf(m->case_name, sizeof m->case_name, "%s", case_name);
    snprintf(m->model, sizeof m->model, "%s", case_name);
    snprintf(m->algorithm, sizeof m->algorithm, "ring");
    snprintf(m->version, sizeof m->version, "0.1.0");
    m->dtype = dtype;
    m->dp = 1;
    m->tp = tp;
}

/* Adds layer/name with 64 values sin(i + phase) * gain, rounded to the capture's dtype. */
static void add(eq_capture *cap, int layer, const char *name, eq_role role, double phase, double gain)
{
    eq_tensor t;
    EQ_EXPECT_OK(eq_tensor_init_2d(&t, cap->meta.dtype, 8, 8));
    for (int64_t i = 0; i < 64; i++) eq_tensor_set(&t, i, sin((double)i + phase) * gain);
    EQ_EXPECT_OK(eq_capture_add(cap, layer, name, role, &t));
}

/* gpt_block tp4 against tp1: the test side drifts by `drift` per layer (ln1_out exact at layer
 * 0), q&k<v> barely moves, layers/03/out is scaled by `planted` (1: nothing planted). */
static void build_gpt_block(eq_comparison *c, eq_dtype dtype, const eq_tolerance *tol, double drift, double planted)
{
    static const char *const names[] = {"ln1_out", "attn_out", "mlp_out", "out"};
    eq_capture ref, test;
    eq_capture_init(&ref);
    eq_capture_init(&test);
    set_meta(&ref, "gpt_block", dtype, 1);
    set_meta(&test, "gpt_block", dtype, 4);
    for (int side = 0; side < 2; side++) {
        eq_capture *cap = side == 0 ? &ref : &test;
        add(cap, 0, "x", EQ_ROLE_INPUT, 0.0, 1.0);
        add(cap, 0, "w", EQ_ROLE_PARAM, 1.0, 0.5);
        for (int layer = 0; layer < N_LAYERS; layer++) {
            for (int k = 0; k < 4; k++) {
                double gain = 1.0 + (side == 0 || (layer == 0 && k == 0) ? 0.0 : drift * (layer + 1) * (k + 1));
                if (side == 1 && layer == 3 && k == 3) gain *= planted;
                add(cap, layer, names[k], EQ_ROLE_ACTIVATION, layer + 0.3 * k, gain);
            }
            if (layer == 2) add(cap, layer, "q&k<v>", EQ_ROLE_ACTIVATION, 7.0, side == 0 ? 1.0 : 1.0 + 1e-7);
        }
        for (int layer = N_LAYERS - 1; layer >= 0; layer--)
            add(cap, layer, "out_grad", EQ_ROLE_GRAD, 2.0 * layer, 0.01 * (1.0 + side * drift * (N_LAYERS - layer)));
        add(cap, N_LAYERS - 1, "loss", EQ_ROLE_LOSS, 5.0, 2.0);
    }
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, tol, EQ_EXPECT_WITHIN, c));
    eq_judge(c);
    eq_capture_free(&ref);
    eq_capture_free(&test);
}

static void build_row_parallel(eq_comparison *c, const eq_tolerance *tol)
{
    eq_capture ref, test;
    eq_capture_init(&ref);
    eq_capture_init(&test);
    set_meta(&ref, "row_parallel", EQ_FP32, 1);
    set_meta(&test, "row_parallel", EQ_FP32, 2);
    for (int side = 0; side < 2; side++)
        for (int layer = 0; layer < 2; layer++)
            add(side == 0 ? &ref : &test, layer, "y", EQ_ROLE_ACTIVATION, layer, 1.0);
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, tol, EQ_EXPECT_WITHIN, c));
    eq_judge(c);
    eq_capture_free(&ref);
    eq_capture_free(&test);
}

static int count_of(const char *text, const char *part)
{
    int n = 0;
    for (const char *p = strstr(text, part); p != NULL; p = strstr(p + 1, part)) n++;
    return n;
}

/* The page for cmps[0..n), or NULL. */
static char *render(const eq_comparison *cmps, int n)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    EQ_EXPECT(f != NULL, "open_memstream");
    if (f == NULL) return NULL;
    EQ_EXPECT_OK(eq_report_html(f, cmps, n));
    fclose(f);
    return text;
}

/* The text from `start` up to and including the first `end` after it, copied into buf ("" if absent). */
static const char *span(const char *text, const char *start, const char *end, char *buf, size_t len)
{
    const char *from = strstr(text, start), *to = from != NULL ? strstr(from, end) : NULL;
    buf[0] = '\0';
    if (to != NULL) snprintf(buf, len, "%.*s", (int)(to - from + (ptrdiff_t)strlen(end)), from);
    return buf;
}

static const eq_tensor_result *find_result(const eq_comparison *c, const char *path)
{
    for (int i = 0; i < c->count; i++)
        if (strcmp(c->results[i].path, path) == 0) return &c->results[i];
    return NULL;
}

static void test_page(const eq_comparison *cmps, int n, const char *save_as)
{
    char *text = render(cmps, n), row[2048], want[512];
    if (text == NULL) return;
    if (save_as != NULL) {
        FILE *f = fopen(save_as, "w");
        EQ_EXPECT(f != NULL && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", save_as);
    }
    EQ_EXPECT(strncmp(text, "<!DOCTYPE html>\n<html lang=\"en\">", 31) == 0, "doctype");
    size_t len = strlen(text);
    EQ_EXPECT(len > 8 && strcmp(text + len - 8, "</html>\n") == 0, "does not end with </html>");
    /* well-formed enough: every element opened is closed */
    static const char *const elements[][2] = {
        {"<svg", "</svg>"}, {"<table", "</table>"}, {"<tr", "</tr>"}, {"<td", "</td>"}, {"<figure", "</figure>"},
        {"<section", "</section>"}, {"<div", "</div>"}, {"<ol", "</ol>"}, {"<li>", "</li>"}, {"<g", "</g>"},
        {"<text", "</text>"}, {"<p ", "</p>"}, {"<code>", "</code>"}, {"<body>", "</body>"},
    };
    for (size_t e = 0; e < sizeof elements / sizeof elements[0]; e++)
        EQ_EXPECT(count_of(text, elements[e][0]) == count_of(text, elements[e][1]), "%d %s but %d %s",
                  count_of(text, elements[e][0]), elements[e][0], count_of(text, elements[e][1]), elements[e][1]);
    /* gpt_block bf16 and fp32: activations and gradients each; row_parallel: activations */
    EQ_EXPECT(count_of(text, "<svg xmlns=\"http://www.w3.org/2000/svg\"") == 5, "%d plots, want 5",
              count_of(text, "<svg"));
    EQ_EXPECT(count_of(text, "fp32 activations: |test - ref| by layer</title>") == 2, "fp32 activation plots");
    EQ_EXPECT(count_of(text, "bf16 gradients: |test - ref| by layer</title>") == 1, "bf16 gradient plot");
    EQ_EXPECT(count_of(text, "<table>") == 7, "%d tables, want 7 (3 + 3 + 1)", count_of(text, "<table>"));
    EQ_EXPECT(count_of(text, "<tr id=") == 2 * (N_LAYERS * 4 + 1 + N_LAYERS + 1) + 2, "%d table rows",
              count_of(text, "<tr id="));
    /* the summary first, in the failing colour */
    const char *summary = strstr(text, "<p class=\"summary status-fail\">equiv: 3 comparisons, ");
    EQ_EXPECT(summary != NULL && summary < strstr(text, "<svg"), "summary missing or not first");
    EXPECT_HAS(text, "NOT as expected (first: gpt_block fp32 dp1-tp4 layers/03/out; worst: gpt_block fp32 dp1-tp4 layers/03/out)</p>");
    /* bf16 (cmps[2]) left of fp32 (cmps[0]), then the next case (cmps[1]) */
    const char *bf16 = strstr(text, "<tr id=\"c2/"), *fp32 = strstr(text, "<tr id=\"c0/");
    const char *row_parallel = strstr(text, "<tr id=\"c1/");
    EQ_EXPECT(bf16 != NULL && fp32 != NULL && row_parallel != NULL && bf16 < fp32 && fp32 < row_parallel,
              "comparisons out of order");
    EQ_EXPECT(count_of(text, "<section class=\"case\">") == 2, "two cases");
    /* the planted row: failing class, seed 002's formats, the verdict */
    const eq_tensor_result *planted = find_result(&cmps[0], "layers/03/out");
    EQ_EXPECT(planted != NULL && !planted->as_expected, "planted result");
    span(text, "<tr id=\"c0/layers/03/out\"", "</tr>", row, sizeof row);
    EXPECT_HAS(row, "class=\"fail\"");
    if (planted != NULL) {
        /* the verdict first; |d| in three significant digits */
        snprintf(want, sizeof want, "<td class=\"verdict\">FAIL</td><td class=\"num\">3</td><td>out</td><td>OUTSIDE "
                 "(expected within)</td><td class=\"num\">%.3g</td><td class=\"num\">%.3g</td><td class=\"num\">"
                 "%.2f%%</td><td class=\"num\">%.2f%%</td>", planted->m.max_abs, planted->m.mean_abs,
                 100 * planted->m.frac_above[1], 100 * planted->m.frac_above[3]);
        EXPECT_HAS(row, want);
    }
    EXPECT_HAS(span(text, "<tr id=\"c2/layers/03/out\"", "</tr>", row, sizeof row), "class=\"ok\"");
    EXPECT_HAS(row, "<td class=\"verdict\">pass</td>");
    EXPECT_HAS(row, "<td>within</td>");
    EQ_EXPECT(strstr(text, " ok</td>") == NULL, "a verdict reads 'ok' beside a state word");
    /* the list entry links to the row and names x8 */
    span(text, "<li><a href=\"#c0/layers/03/out\">", "</li>", row, sizeof row);
    EXPECT_HAS(row, "<code>layers/03/out</code></a> (activation): OUTSIDE, expected within: ");
    EXPECT_HAS(row, "<span class=\"diagnosis\">uniform scale x8");
    /* the tolerances drawn in every plot, gradients included: bf16's flat 0.15 as one line in each of
     * its two plots; fp32's 1e-3 + 1e-3 |ref| per tensor, in its three */
    EQ_EXPECT(count_of(text, ">tolerance 0.15</text>") == 2, "%d bf16 tolerance lines, want 2",
              count_of(text, ">tolerance 0.15</text>"));
    EQ_EXPECT(count_of(text, "Grey dots: each tensor&#39;s tolerance at an element of its typical size, 0.001 + 0.001 "
                             "rms(ref)") == 3, "fp32 plots without their tolerance");
    const char *fp32_gradients = strstr(text, "fp32 gradients: |test - ref| by layer</title>");
    EQ_EXPECT(fp32_gradients != NULL && strstr(fp32_gradients, "<g class=\"series tolerance\"") != NULL &&
                  strstr(fp32_gradients, "<g class=\"series tolerance\"") < strstr(fp32_gradients, "</svg>"),
              "the fp32 gradient plot has no tolerance line");
    /* the failing point marked: one ring, on the planted out at layer 3, and the caption says so */
    EQ_EXPECT(count_of(text, "<circle class=\"marked\"") == 1, "%d marked points, want 1",
              count_of(text, "<circle class=\"marked\""));
    EXPECT_HAS(text, "<title>out max, layer 3: ");
    const char *mark = strstr(text, "<circle class=\"marked\"");
    EQ_EXPECT(mark != NULL && strstr(mark, "</title>") != NULL &&
                  strncmp(strstr(mark, "<title>"), "<title>out max, layer 3: ", 25) == 0,
              "the ring is not on out at layer 3");
    EXPECT_HAS(text, "Red rings: 1 point of results not as expected.");
    /* escaping; fp32's 1e-7 drift keeps three significant digits; q&k<v> has the smallest max and is left out */
    EXPECT_HAS(text, "<td>q&amp;k&lt;v&gt;</td>");
    EQ_EXPECT(strstr(text, "q&k<v>") == NULL, "tensor name not escaped");
    EXPECT_HAS(span(text, "<tr id=\"c0/layers/02/q&amp;k&lt;v&gt;\"", "</tr>", row, sizeof row), "e-07</td>");
    EXPECT_HAS(text, "Showing the 4 of 5 tensors with the largest max |d|; left out: <code>q&amp;k&lt;v&gt;</code>.");
    EXPECT_HAS(text, "At the axis floor"); /* ln1_out is bit-exact at layer 0 */
    EXPECT_HAS(text, "<thead><tr><th>verdict</th><th>Layer</th><th>Tensor</th><th>observed</th><th>max |d|</th>"
                     "<th>mean |d|</th><th>%&gt;1e-3</th><th>%&gt;1e-2</th>");
    /* the glossary: linked from the top, written at the end */
    const char *link = strstr(text, "<a href=\"#how-to-read\">How to read this report</a>");
    const char *glossary = strstr(text, "<section id=\"how-to-read\">");
    EQ_EXPECT(link != NULL && glossary != NULL && link < strstr(text, "<svg") && glossary > strstr(text, "</table>"),
              "no link to the glossary at the top, or no glossary at the end");
    EQ_EXPECT(glossary != NULL && strstr(glossary, "<dt>max ULP</dt>") && strstr(glossary, "<dt>99.9% bound</dt>") &&
                  strstr(glossary, "<dt>mean(dist/ref)</dt>"),
              "the glossary lacks a column");
    EXPECT_HAS(text, "<h4>Gradients</h4>");
    EXPECT_HAS(text, "Parameters and inputs: 1 parameter bit-identical after gathering, 1 input bit-identical.");
    EXPECT_HAS(text, "<p class=\"note\">All 2 tensors as expected.</p>");
    EQ_EXPECT(strstr(text, "<script") == NULL && strstr(text, "<link") == NULL && strstr(text, "url(") == NULL,
              "the page loads something");
    free(text);
}

int main(int argc, char **argv)
{
    static const eq_tolerance fp32_tol = {"fp32_1_layer", 1e-3, 1e-3, "seed 002 section 7", EQ_ATOL_ABSOLUTE};
    static const eq_tolerance bf16_tol = {"bf16_28_layers", 0.15, 0.0, "seed 002 section 7", EQ_ATOL_ABSOLUTE};
    eq_comparison cmps[3];
    build_gpt_block(&cmps[0], EQ_FP32, &fp32_tol, 1e-6, 8.0);
    build_row_parallel(&cmps[1], &fp32_tol);
    build_gpt_block(&cmps[2], EQ_BF16, &bf16_tol, 4e-3, 1.0);
    EQ_EXPECT(cmps[0].n_unexpected == 1 && cmps[1].n_unexpected == 0 && cmps[2].n_unexpected == 0,
              "unexpected: %d, %d, %d", cmps[0].n_unexpected, cmps[1].n_unexpected, cmps[2].n_unexpected);
    test_page(cmps, 3, argc > 1 ? argv[1] : NULL);
    /* all as expected: the passing colour; no comparisons at all: still a page */
    char *text = render(&cmps[1], 1);
    if (text != NULL)
        EXPECT_HAS(text, "<p class=\"summary status-pass\">equiv: 1 comparison, 2 tensors, all as expected</p>");
    free(text);
    /* an atol relative to each tensor's RMS has no single line to draw */
    static const eq_tolerance rms_tol = {"grads_rms", 0.05, 0.0, "relative", EQ_ATOL_REF_RMS};
    eq_comparison relative;
    build_row_parallel(&relative, &rms_tol);
    text = render(&relative, 1);
    if (text != NULL) {
        EXPECT_HAS(text, "Grey dots: each tensor&#39;s tolerance at an element of its typical size, 0.05 rms(ref) + 0 "
                         "rms(ref)");
        EQ_EXPECT(strstr(text, "<g class=\"series tolerance\"") != NULL, "no tolerance line for a relative atol");
        EQ_EXPECT(strstr(text, "class=\"ref\"") == NULL, "a reference line for a relative atol");
    }
    free(text);
    eq_comparison_free(&relative);
    /* gradients judged by their own entry: the gradient plot draws that one, not the activations' */
    eq_comparison own_grads;
    build_gpt_block(&own_grads, EQ_BF16, &bf16_tol, 4e-3, 1.0);
    own_grads.grad_tol = rms_tol;
    text = render(&own_grads, 1);
    if (text != NULL) {
        EQ_EXPECT(count_of(text, ">tolerance 0.15</text>") == 1, "%d tolerance 0.15 lines, want 1 (activations only)",
                  count_of(text, ">tolerance 0.15</text>"));
        const char *grads = strstr(text, "bf16 gradients: |test - ref| by layer</title>");
        EQ_EXPECT(grads != NULL && strstr(grads, "0.05 rms(ref) + 0 rms(ref)") != NULL,
                  "the gradient plot's caption does not name the gradient tolerance");
    }
    free(text);
    eq_comparison_free(&own_grads);
    text = render(NULL, 0);
    if (text != NULL) EXPECT_HAS(text, "equiv: 0 comparisons, 0 tensors, all as expected</p>\n");
    if (text != NULL) EXPECT_HAS(text, "</section>\n</body>\n</html>\n");
    free(text);
    for (int i = 0; i < 3; i++) eq_comparison_free(&cmps[i]);
    return eq_test_finish("report_html_test");
}
