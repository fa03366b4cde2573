/* Report writers on a comparison with a planted x8 tensor: the Markdown has one table per role
 * present (activations, gradients, losses), one row per such tensor, the FAIL marker and the
 * diagnosis, and ends with the summary line; the JSON parses back with every metric of every
 * tensor. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run_cell.h"
#include "harness/base/testing.h"
#include "harness/verdict.h"
#include "reports/report.h"

#define EXPECT_HAS(text, part) EQ_EXPECT(strstr((text), (part)) != NULL, "report lacks '%s'", (part))

static const char *const metric_keys[] = {
    "count", "n_finite", "nan_ref", "inf_ref", "nan_test", "inf_test", "nonfinite_mismatch", "n_differ",
    "max_abs", "mean_abs", "median_abs", "argmax", "frac_above_1e-4", "frac_above_1e-3", "frac_above_5e-3",
    "frac_above_1e-2", "max_ulp", "ulp_at_max", "rel_fro", "cosine", "ls_scale", "mean_ratio", "worst_rel", "ref_absmax", "ref_mean", "ref_std",
    "n_outside", "max_tol_ratio",
};
#define N_METRIC_KEYS (int)(sizeof metric_keys / sizeof metric_keys[0])

static void set_meta(eq_capture *cap, const char *case_name, int tp)
{
    eq_run_meta *m = &cap->meta;
    snprintf(m->case_name, sizeof m->case_name, "%s", case_name);
    snprintf(m->model, sizeof m->model, "%s", case_name);
    snprintf(m->size, sizeof m->size, "ci");
    snprintf(m->transport, sizeof m->transport, "sim");
    snprintf(m->algorithm, sizeof m->algorithm, "ring");
    snprintf(m->backend, sizeof m->backend, "cpu");
    snprintf(m->version, sizeof m->version, "0.1.0");
    m->dtype = EQ_FP32;
    m->dp = 1;
    m->tp = tp;
    m->seed = 1234;
}

/* Adds layer/name with 64 values v(i) = sin(i + phase) * gain. */
static void add(eq_capture *cap, int layer, const char *name, eq_role role, double phase, double gain)
{
    eq_tensor t;
    EQ_EXPECT_OK(eq_tensor_init_2d(&t, EQ_FP32, 8, 8));
    for (int64_t i = 0; i < 64; i++) eq_tensor_set(&t, i, sin((double)i + phase) * gain);
    EQ_EXPECT_OK(eq_capture_add(cap, layer, name, role, &t));
}

/* A row_parallel tp4 run against tp1: input and weight identical, layers/00/h rounded
 * differently (within), layers/00/attn 2% off (outside, but less so), layers/01/out planted x8,
 * the gradient and loss identical. */
static void build_row_parallel(eq_comparison *c)
{
    static const eq_tolerance fp32_1_layer = {"fp32_1_layer", 1e-3, 1e-3, "seed 002 section 7", EQ_ATOL_ABSOLUTE};
    eq_capture ref, test;
    eq_capture_init(&ref);
    eq_capture_init(&test);
    set_meta(&ref, "row_parallel", 1);
    set_meta(&test, "row_parallel", 4);
    for (int side = 0; side < 2; side++) {
        eq_capture *cap = side == 0 ? &ref : &test;
        add(cap, 0, "x", EQ_ROLE_INPUT, 0.0, 1.0);
        add(cap, 0, "w", EQ_ROLE_PARAM, 1.0, 0.5);
        add(cap, 0, "h", EQ_ROLE_ACTIVATION, 2.0, side == 0 ? 1.0 : 1.0 + 1e-6);
        add(cap, 0, "attn", EQ_ROLE_ACTIVATION, 2.5, side == 0 ? 1.0 : 1.02);
        add(cap, 1, "out", EQ_ROLE_ACTIVATION, 3.0, side == 0 ? 1.0 : 8.0);
        add(cap, 1, "out_grad", EQ_ROLE_GRAD, 4.0, 0.01);
        add(cap, 1, "loss", EQ_ROLE_LOSS, 5.0, 2.0);
    }
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &fp32_1_layer, EQ_EXPECT_WITHIN, c));
    eq_judge(c);
    eq_capture_free(&ref);
    eq_capture_free(&test);
}

/* A column_parallel comparison under a zero tolerance whose one tensor differs as `differs`
 * expects; its max_tol_ratio is infinite, which JSON must carry as "Infinity". */
static void build_zero_tolerance(eq_comparison *c)
{
    static const eq_tolerance zero = {"zero", 0.0, 0.0, "bit-exact by construction", EQ_ATOL_ABSOLUTE};
    eq_capture ref, test;
    eq_capture_init(&ref);
    eq_capture_init(&test);
    set_meta(&ref, "column_parallel", 1);
    set_meta(&test, "column_parallel", 2);
    add(&ref, 0, "y", EQ_ROLE_ACTIVATION, 0.0, 1.0);
    add(&test, 0, "y", EQ_ROLE_ACTIVATION, 0.0, 1.0 + 1e-6);
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &zero, EQ_EXPECT_DIFFERS, c));
    eq_judge(c);
    eq_capture_free(&ref);
    eq_capture_free(&test);
}

/* A dp2 run of a user's whose tensors all agree with the reference but whose assembly found a
 * replicated weight that differs between dp ranks: `n_findings` such findings (0 or 1), and with
 * `x8` the activation planted x8 as well. */
static void build_finding(eq_comparison *c, int n_findings, int x8)
{
    static const eq_tolerance fp32_1_layer = {"fp32_1_layer", 1e-3, 1e-3, "seed 002 section 7", EQ_ATOL_ABSOLUTE};
    eq_capture ref, test;
    eq_capture_init(&ref);
    eq_capture_init(&test);
    set_meta(&ref, "dp2", 1);
    set_meta(&test, "dp2", 1);
    test.meta.dp = 2;
    for (int side = 0; side < 2; side++) {
        eq_capture *cap = side == 0 ? &ref : &test;
        add(cap, 0, "w", EQ_ROLE_PARAM, 1.0, 0.5);
        add(cap, 0, "out", EQ_ROLE_ACTIVATION, 2.0, side == 1 && x8 ? 8.0 : 1.0);
    }
    for (int i = 0; i < n_findings; i++)
        EQ_EXPECT_OK(eq_capture_add_finding(&test, "w (param) should be replicated over dp but differs"));
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &fp32_1_layer, EQ_EXPECT_WITHIN, c));
    eq_judge(c);
    eq_capture_free(&ref);
    eq_capture_free(&test);
}

/* Assembly findings fail a comparison (exit 1): the summary line says so, counted apart from the
 * tensors, rather than "all as expected"; every writer ends with, or carries, that line. */
static void test_finding_summary(void)
{
    eq_comparison c;
    char line[1024];
    build_finding(&c, 1, 0);
    EQ_EXPECT(c.n_unexpected == 1 && c.n_findings == 1, "%d not as expected, %d findings", c.n_unexpected,
              c.n_findings);
    EQ_EXPECT(strcmp(eq_report_summary(&c, 1, line, sizeof line),
                     "equiv: 1 comparison, 2 tensors, all as expected, 1 assembly finding NOT as expected (first: "
                     "dp2 fp32 dp2-tp1, test run: w (param) should be replicated over dp but differs)") == 0,
              "summary '%s'", line);
    for (int format = 0; format < 3; format++) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        EQ_EXPECT(f != NULL, "open_memstream");
        if (f == NULL) continue;
        EQ_EXPECT_OK(format == 0 ? eq_report_markdown(f, &c, 1) : format == 1 ? eq_report_html(f, &c, 1)
                                                                             : eq_report_json(f, &c, 1));
        fclose(f);
        EQ_EXPECT(strstr(text, "all as expected, 1 assembly finding NOT as expected (first: ") != NULL,
                  "format %d lacks the finding in its summary line", format);
        EQ_EXPECT(format != 0 || strstr(text, "\n**Verdict: FAIL.** All 2 tensors as expected. Assembly findings: 1 "
                                              "(listed below), not as expected.\n") != NULL,
                  "the Markdown's verdict on a finding alone:\n%s", text);
        free(text);
    }
    eq_comparison_free(&c);
    /* a tensor not as expected and a finding: each counted once, apart */
    build_finding(&c, 1, 1);
    EQ_EXPECT(strcmp(eq_report_summary(&c, 1, line, sizeof line),
                     "equiv: 1 comparison, 2 tensors, 1 NOT as expected (first: dp2 fp32 dp2-tp1 layers/00/out; "
                     "worst: dp2 fp32 dp2-tp1 layers/00/out), 1 assembly finding NOT as expected (first: "
                     "dp2 fp32 dp2-tp1, test run: w (param) should be replicated over dp but differs)") == 0,
              "summary '%s'", line);
    eq_comparison_free(&c);
    /* and with none, the line is what it was */
    build_finding(&c, 0, 0);
    EQ_EXPECT(strcmp(eq_report_summary(&c, 1, line, sizeof line), "equiv: 1 comparison, 2 tensors, all as expected") == 0,
              "summary '%s'", line);
    eq_comparison_free(&c);
}

/* The line after `line`, or NULL at the end of the text. */
static const char *next_line(const char *line)
{
    const char *newline = strchr(line, '\n');
    return newline != NULL && newline[1] != '\0' ? newline + 1 : NULL;
}

/* Number of lines of `text` that start with `prefix`. */
static int count_lines(const char *text, const char *prefix)
{
    int n = 0;
    for (const char *line = text; line != NULL; line = next_line(line))
        n += strncmp(line, prefix, strlen(prefix)) == 0;
    return n;
}

/* The line of `text` that starts with `prefix` (copied into buf), or "". */
static const char *find_line(const char *text, const char *prefix, char *buf, size_t len)
{
    buf[0] = '\0';
    for (const char *line = text; line != NULL; line = next_line(line)) {
        if (strncmp(line, prefix, strlen(prefix)) != 0) continue;
        size_t n = strcspn(line, "\n");
        snprintf(buf, len, "%.*s", (int)n, line);
        break;
    }
    return buf;
}

static void test_markdown(const eq_comparison *cmps, int n)
{
    char *text = NULL, line[512];
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    EQ_EXPECT(f != NULL, "open_memstream");
    if (f == NULL) return;
    EQ_EXPECT_OK(eq_report_markdown(f, cmps, n));
    fclose(f);
    EXPECT_HAS(text, "### row_parallel fp32 dp1-tp4 vs dp1-tp1 (ring)\n");
    EXPECT_HAS(text, "`fp32_1_layer`");
    EXPECT_HAS(text, "seed 002 section 7");
    EXPECT_HAS(text, "1 parameter bit-identical after gathering, 1 input bit-identical");
    const char *header = "| verdict | Layer | Tensor | observed | max \\|d\\| | mean \\|d\\| | median \\|d\\| | %>1e-4 | "
                         "%>1e-3 | %>1e-2 | ULP@max | max ULP | mean(dist/ref) | worst rel |\n";
    EXPECT_HAS(text, "How to read this report: README.md");
    /* one table per role present: activations, gradients, losses; then the second's activations */
    EQ_EXPECT(count_lines(text, header) == 4, "header row appears %d times, want 4", count_lines(text, header));
    EQ_EXPECT(count_lines(text, "#### Activations") == 2 && count_lines(text, "#### Gradients") == 1 &&
                  count_lines(text, "#### Losses") == 1, "section headings");
    const char *grads = strstr(text, "#### Gradients\n\n"), *losses = strstr(text, "#### Losses\n\n");
    const char *h_row = strstr(text, "| pass | 0 | h |"), *grad_row = strstr(text, "| pass | 1 | out_grad |");
    const char *loss_row = strstr(text, "| pass | 1 | loss |");
    EQ_EXPECT(grads != NULL && losses != NULL && h_row != NULL && grad_row != NULL && loss_row != NULL &&
                  h_row < grads && grads < grad_row && grad_row < losses && losses < loss_row,
              "rows under the wrong section");
    EQ_EXPECT(grads != NULL && strncmp(grads + strlen("#### Gradients\n\n"), header, strlen(header)) == 0,
              "the gradients heading is not followed by the table header");
    /* one row per activation, gradient and loss; none for the input and the parameter; the verdict
     * is the first column: the failing rows start with it */
    EQ_EXPECT(count_lines(text, "| pass | 0 | h |") == 1 && count_lines(text, "| **FAIL** | 1 | out |") == 1,
              "activation rows, verdict first");
    EQ_EXPECT(count_lines(text, "| **FAIL** | 0 | attn |") == 1, "the 2%% row's verdict is not first");
    EQ_EXPECT(count_lines(text, "| pass | 1 | out_grad |") == 1 && count_lines(text, "| pass | 1 | loss |") == 1,
              "grad, loss");
    EQ_EXPECT(strstr(text, "| 0 | x |") == NULL && strstr(text, "| 0 | w |") == NULL, "input or param row");
    EQ_EXPECT(count_lines(text, "| pass | 0 | y |") == 1, "second comparison's row");
    /* one word per state: the observation, and the expectation only where the row fails */
    EXPECT_HAS(find_line(text, "| **FAIL** | 1 | out |", line, sizeof line), "| OUTSIDE (expected within) |");
    EXPECT_HAS(find_line(text, "| pass | 0 | h |", line, sizeof line), "| within |");
    EQ_EXPECT(strstr(text, " ok |") == NULL, "a verdict reads 'ok' beside a state word");
    /* significant digits: zeros are "0", a max |d| below 1e-6 keeps its digits (not 0.000000) */
    EXPECT_HAS(find_line(text, "| pass | 1 | loss |", line, sizeof line), "| 0 | 0 | 0 |");
    EXPECT_HAS(find_line(text, "| pass | 0 | h |", line, sizeof line), "e-07 |");
    EQ_EXPECT(strstr(text, "0.000000") == NULL, "a fixed-decimal number: %s", strstr(text, "0.000000"));
    EXPECT_HAS(find_line(text, "- `layers/01/out`", line, sizeof line), "uniform scale x8 (ls 8,");
    /* worst first: the x8 tensor before the 2% one, although it comes later in capture order */
    const char *x8_item = strstr(text, "- `layers/01/out`"), *attn_item = strstr(text, "- `layers/00/attn`");
    EQ_EXPECT(x8_item != NULL && attn_item != NULL && x8_item < attn_item, "not-as-expected list not worst first");
    EXPECT_HAS(text, "All 1 tensor as expected.");
    /* each comparison's section opens with its verdict, before its first table: how many of how
     * many, where it starts (layer 0's attn, 2% off, comes before layer 1's x8 out in capture
     * order; h is within) and its diagnosis, the findings */
    const char *first_section = strstr(text, "### row_parallel fp32 dp1-tp4 vs dp1-tp1 (ring)\n\n");
    const char *second_section = strstr(text, "### column_parallel");
    const char *first_table = strstr(text, "| verdict | Layer |");
    EQ_EXPECT(first_section != NULL && second_section != NULL && first_table != NULL, "sections and table");
    if (first_section != NULL && second_section != NULL && first_table != NULL) {
        const char *block = first_section + strlen("### row_parallel fp32 dp1-tp4 vs dp1-tp1 (ring)\n\n");
        EQ_EXPECT(strncmp(block, "**Verdict: FAIL.** 2 of 7 tensors not as expected; it starts at `layers/00/attn` "
                                 "(the first in capture order): ",
                          strlen("**Verdict: FAIL.** 2 of 7 tensors not as expected; it starts at `layers/00/attn` "
                                 "(the first in capture order): ")) == 0,
                  "the section does not open with its verdict: '%.200s'", block);
        EXPECT_HAS(find_line(block, "**Verdict:", line, sizeof line), ". Assembly findings: 0.");
        EQ_EXPECT(block < first_table, "the verdict comes after the first table");
        block = strchr(second_section, '\n');
        EQ_EXPECT(block != NULL && strncmp(block, "\n\n**Verdict: pass.** All 1 tensor as expected. Assembly findings: 0.\n",
                                           strlen("\n\n**Verdict: pass.** All 1 tensor as expected. Assembly findings: "
                                                  "0.\n")) == 0,
                  "the second section's verdict: '%.120s'", block ? block : "");
    }
    /* the last line is the summary */
    size_t len = strlen(text);
    EQ_EXPECT(len > 0 && text[len - 1] == '\n', "report does not end with a newline");
    const char *last = text + len - 1;
    while (last > text && last[-1] != '\n') last--;
    EQ_EXPECT(strncmp(last, "equiv: 2 comparisons, 8 tensors, 2 NOT as expected (first: row_parallel fp32 dp1-tp4 layers/00/attn; "
                      "worst: row_parallel fp32 dp1-tp4 "
                            "layers/01/out)\n", 200) == 0, "last line '%s'", last);
    free(text);
}

/* The string under `key`, or "" when missing or not a string. */
static const char *string_at(const json_t *object, const char *key)
{
    const char *s = json_string_value(json_object_get(object, key));
    return s != NULL ? s : "";
}

static void test_json(const eq_comparison *cmps, int n)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    EQ_EXPECT(f != NULL, "open_memstream");
    if (f == NULL) return;
    EQ_EXPECT_OK(eq_report_json(f, cmps, n));
    fclose(f);
    json_error_t error;
    json_t *root = json_loads(text, 0, &error);
    EQ_EXPECT(root != NULL, "JSON does not parse: line %d: %s", error.line, error.text);
    free(text);
    if (root == NULL) return;
    EQ_EXPECT(json_integer_value(json_object_get(root, "equiv_report")) == 1, "equiv_report");
    EQ_EXPECT(strcmp(string_at(root, "version"), "0.1.0") == 0, "version");
    json_t *list = json_object_get(root, "comparisons");
    EQ_EXPECT(json_array_size(list) == 2, "%zu comparisons", json_array_size(list));
    int planted_seen = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *results = json_object_get(json_array_get(list, i), "results");
        EQ_EXPECT(json_array_size(results) == (size_t)cmps[i].count, "comparison %zu: %zu results", i,
                  json_array_size(results));
        for (size_t k = 0; k < json_array_size(results); k++) {
            json_t *r = json_array_get(results, k), *m = json_object_get(r, "metrics");
            const char *path = string_at(r, "path");
            for (int key = 0; key < N_METRIC_KEYS; key++)
                EQ_EXPECT(json_object_get(m, metric_keys[key]) != NULL, "%s lacks %s", path, metric_keys[key]);
            EQ_EXPECT(json_object_size(m) == (size_t)N_METRIC_KEYS, "%s: %zu metrics", path, json_object_size(m));
            if (strcmp(path, "layers/01/out") == 0) {
                planted_seen = 1;
                EQ_EXPECT(json_real_value(json_object_get(m, "ls_scale")) == 8.0, "planted ls_scale %g",
                          json_real_value(json_object_get(m, "ls_scale")));
                EQ_EXPECT(json_is_false(json_object_get(r, "as_expected")), "planted tensor as expected");
                EQ_EXPECT(strcmp(string_at(r, "observed"), "OUTSIDE") == 0, "observed");
            }
        }
    }
    EQ_EXPECT(planted_seen, "planted tensor missing from the JSON");
    /* JSON has no Infinity: the zero-tolerance comparison's ratio goes out as a string */
    json_t *zero_results = json_object_get(json_array_get(list, 1), "results");
    json_t *zero_metrics = json_object_get(json_array_get(zero_results, 0), "metrics");
    EQ_EXPECT(strcmp(string_at(zero_metrics, "max_tol_ratio"), "Infinity") == 0, "infinite ratio written as '%s'",
              string_at(zero_metrics, "max_tol_ratio"));
    json_t *summary = json_object_get(root, "summary");
    EQ_EXPECT(json_integer_value(json_object_get(summary, "unexpected")) == 2, "summary unexpected");
    EQ_EXPECT(strstr(string_at(summary, "line"), "NOT as expected") != NULL, "summary line");
    json_decref(root);
}

/* A run on a GPU names it (model, driver, library versions) in Markdown, HTML and JSON; a CPU run
 * prints no GPU line. */
static void test_gpu_line(eq_comparison *c)
{
    static const char gpu[] = "NVIDIA H200 (sm_90, 132 SMs, 139 GiB), driver 580.159.04 (CUDA 13.0), cuBLAS 13.1.0";
    char *text = NULL;
    size_t size = 0;
    for (int on_gpu = 0; on_gpu < 2; on_gpu++) {
        snprintf(c->test_meta.gpu, sizeof c->test_meta.gpu, "%s", on_gpu ? gpu : "");
        snprintf(c->ref_meta.gpu, sizeof c->ref_meta.gpu, "%s", on_gpu ? gpu : "");
        for (int format = 0; format < 3; format++) {
            FILE *f = open_memstream(&text, &size);
            EQ_EXPECT(f != NULL, "open_memstream");
            if (f == NULL) return;
            EQ_EXPECT_OK(format == 0 ? eq_report_markdown(f, c, 1) : format == 1 ? eq_report_html(f, c, 1)
                                                                                 : eq_report_json(f, c, 1));
            fclose(f);
            const char *at = strstr(text, format == 2 ? "\"gpu\": \"NVIDIA H200" : "GPU: NVIDIA H200 (sm_90");
            EQ_EXPECT(on_gpu ? at != NULL : at == NULL && strstr(text, "GPU:") == NULL && strstr(text, "\"gpu\"") == NULL,
                      "format %d, on_gpu %d: GPU line %s", format, on_gpu, at ? "present" : "absent");
            free(text);
            text = NULL;
        }
    }
    c->test_meta.gpu[0] = c->ref_meta.gpu[0] = '\0';
}

/* The line of a format's output that holds the comparison's heading (Markdown "### ", HTML "<h3>"). */
static void heading_line(eq_comparison *c, int html, char *line, size_t len)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    EQ_EXPECT(f != NULL, "open_memstream");
    if (f == NULL) return;
    EQ_EXPECT_OK(html ? eq_report_html(f, c, 1) : eq_report_markdown(f, c, 1));
    fclose(f);
    const char *at = strstr(text, html ? "<h3>" : "\n### ");
    snprintf(line, len, "%.*s", at ? (int)strcspn(at + 1, "\n") : 0, at ? at + 1 : "");
    free(text);
}

/* Both writers' headings come from the run-cell table: at every default they are what README and
 * the tests pin; each setting the table puts in a heading names itself there when not its default,
 * so that two comparisons differing only in it are told apart; a field not in the heading (the CPU)
 * leaves it as it was. */
static void test_headings(eq_comparison *c)
{
    const eq_run_meta saved = c->test_meta;
    char md[512], html[512], want[256], value[64];
    heading_line(c, 0, md, sizeof md);
    heading_line(c, 1, html, sizeof html);
    EQ_EXPECT(strcmp(md, "### row_parallel fp32 dp1-tp4 vs dp1-tp1 (ring)") == 0, "Markdown heading '%s'", md);
    EQ_EXPECT(strncmp(html, "h3>fp32 (ring)<span", strlen("h3>fp32 (ring)<span")) == 0, "HTML heading '%s'", html);
    for (int i = 0; i < eq_cell_field_count; i++) {
        const eq_cell_field *f = &eq_cell_fields[i];
        if (!(f->flags & (EQ_CELL_HEADING_IF_SET | EQ_CELL_HEADING))) continue;
        c->test_meta = saved;
        const char *other = f->type == EQ_CELL_TEXT ? "other" : "7";
        EQ_EXPECT(eq_cell_parse(&c->test_meta, f, other), "%s: cannot set '%s'", f->key, other);
        snprintf(want, sizeof want, "%s%s", f->heading_part ? f->heading_part : "",
                 eq_cell_text(&c->test_meta, f, value, sizeof value));
        heading_line(c, 0, md, sizeof md);
        heading_line(c, 1, html, sizeof html);
        EQ_EXPECT(strstr(md, want) != NULL, "%s: '%s' not in the Markdown heading '%s'", f->key, want, md);
        EQ_EXPECT(strstr(html, want) != NULL, "%s: '%s' not in the HTML heading '%s'", f->key, want, html);
    }
    c->test_meta = saved;
    snprintf(c->test_meta.cpu, sizeof c->test_meta.cpu, "AMD EPYC");
    heading_line(c, 0, md, sizeof md);
    EQ_EXPECT(strcmp(md, "### row_parallel fp32 dp1-tp4 vs dp1-tp1 (ring)") == 0, "cpu: Markdown heading '%s'", md);
    c->test_meta = saved;
}

/* A tensor named like markup and one all NaN in both runs: the Markdown shows the name as it is
 * (no raw HTML, its '|' no cell boundary, its backtick no end of a code span) and fails the NaN
 * tensor, saying so, rather than passing it as bit-exact. */
static void test_markdown_hostile_and_nan(void)
{
    static const eq_tolerance tol = {"fp32_1_layer", 1e-3, 1e-3, "seed 002 section 7", EQ_ATOL_ABSOLUTE};
    const char *hostile = "<script>a|b`c</script>";
    eq_capture ref, test;
    eq_comparison c;
    eq_capture_init(&ref);
    eq_capture_init(&test);
    set_meta(&ref, "c<b>|d", 1);
    set_meta(&test, "c<b>|d", 2);
    for (int side = 0; side < 2; side++) {
        eq_capture *cap = side == 0 ? &ref : &test;
        add(cap, 0, hostile, EQ_ROLE_ACTIVATION, 1.0, side == 0 ? 1.0 : 8.0);
        add(cap, 1, "nan", EQ_ROLE_ACTIVATION, 2.0, 1.0);
        eq_tensor *t = &cap->entries[cap->count - 1].tensor;
        for (int64_t i = 0; i < eq_tensor_numel(t); i++) eq_tensor_set(t, i, NAN);
    }
    EQ_EXPECT_OK(eq_compare_captures(&ref, &test, &tol, EQ_EXPECT_WITHIN, &c));
    eq_judge(&c);
    eq_capture_free(&ref);
    eq_capture_free(&test);
    char *text = NULL, line[512];
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    EQ_EXPECT(f != NULL, "open_memstream");
    if (f == NULL) return;
    EQ_EXPECT_OK(eq_report_markdown(f, &c, 1));
    fclose(f);
    /* no raw HTML: "<script" only inside a code span, which shows it as text */
    for (const char *p = strstr(text, "<script"); p != NULL; p = strstr(p + 1, "<script"))
        EQ_EXPECT(p - text >= 12 && strncmp(p - 12, "``layers/00/", 12) == 0, "raw HTML in the Markdown: '%.40s'",
                  p > text + 20 ? p - 20 : text);
    EQ_EXPECT(strstr(text, "<b>") == NULL, "raw HTML in the Markdown");
    EXPECT_HAS(text, "### c&lt;b>|d fp32 dp1-tp2 vs dp1-tp1 (ring)\n");
    /* the row: the name's '|' escaped, as many cell boundaries as the header has */
    const char *row_start = "| **FAIL** | 0 | &lt;script>a\\|b\\`c&lt;/script> | OUTSIDE";
    find_line(text, row_start, line, sizeof line);
    EQ_EXPECT(line[0] != '\0', "no row for the hostile name");
    int bars = 0;
    for (const char *p = line; *p != '\0'; p++) bars += *p == '|' && (p == line || p[-1] != '\\');
    EQ_EXPECT(bars == 15, "the row has %d cell boundaries, want 15 (14 columns): %s", bars, line);
    /* a code span with a backtick inside: fenced by two */
    EXPECT_HAS(text, "- ``layers/00/<script>a|b`c</script>`` (activation): OUTSIDE");
    /* NaN in both runs: not as expected, and said */
    EXPECT_HAS(find_line(text, "| **FAIL** | 1 | nan |", line, sizeof line), "| NON-FINITE (expected within) |");
    EXPECT_HAS(text, "- `layers/01/nan` (activation): NON-FINITE, expected within: all 64 elements NaN in both runs");
    EXPECT_HAS(text, "2 NOT as expected (first: c&lt;b>|d fp32 dp1-tp2 layers/00/&lt;script>a|b\\`c&lt;/script>;");
    free(text);
    eq_comparison_free(&c);
}

int main(void)
{
    eq_comparison cmps[2];
    build_row_parallel(&cmps[0]);
    build_zero_tolerance(&cmps[1]);
    EQ_EXPECT(cmps[0].n_unexpected == 2 && cmps[1].n_unexpected == 0, "unexpected %d, %d", cmps[0].n_unexpected,
              cmps[1].n_unexpected);
    EQ_EXPECT(eq_report_unexpected(cmps, 2) == 2, "eq_report_unexpected");
    /* A NaN outranks any ratio (the ratio covers only the finite pairs). */
    eq_tensor_result with_nan = {.observed = EQ_OBS_NONFINITE, .m = {.max_tol_ratio = 0.5}};
    eq_tensor_result far_out = {.observed = EQ_OBS_OUTSIDE, .m = {.max_tol_ratio = 1e9}};
    EQ_EXPECT(eq_report_worse_first(&with_nan, &far_out) < 0 && eq_report_worse_first(&far_out, &with_nan) > 0,
              "NaN not ranked worst");
    const eq_tensor_result *planted = &cmps[0].results[4];
    EQ_EXPECT(strcmp(planted->path, "layers/01/out") == 0 && eq_report_worse_first(&far_out, planted) < 0,
              "ratio 1e9 not worse than x8");
    char line[256];
    EQ_EXPECT(strcmp(eq_report_summary(cmps, 1, line, sizeof line),
                     "equiv: 1 comparison, 7 tensors, 2 NOT as expected (first: row_parallel fp32 dp1-tp4 layers/00/attn; "
                     "worst: row_parallel fp32 dp1-tp4 "
                     "layers/01/out)") == 0, "summary '%s'", line);
    EQ_EXPECT(strcmp(eq_report_summary(cmps + 1, 1, line, sizeof line),
                     "equiv: 1 comparison, 1 tensor, all as expected") == 0, "summary '%s'", line);
    char value[32];
    EQ_EXPECT(strcmp(eq_report_format_value(5e-7, 6, value, sizeof value), "5.000e-07") == 0, "'%s'", value);
    EQ_EXPECT(strcmp(eq_report_format_value(0.03125, 6, value, sizeof value), "0.031250") == 0, "'%s'", value);
    EQ_EXPECT(strcmp(eq_report_format_share(0.4161, value, sizeof value), "41.61%") == 0, "'%s'", value);
    EQ_EXPECT(strcmp(eq_report_format_share(1e-5, value, sizeof value), "<0.01%") == 0, "'%s'", value);
    test_markdown(cmps, 2);
    test_markdown_hostile_and_nan();
    test_json(cmps, 2);
    test_gpu_line(&cmps[1]);
    test_headings(&cmps[0]);
    test_finding_summary();
    eq_comparison_free(&cmps[0]);
    eq_comparison_free(&cmps[1]);
    return eq_test_finish("report_test");
}
