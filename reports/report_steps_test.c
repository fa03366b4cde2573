/* The training curve in the reports (reports/report_steps.h), on a curve built by hand: 3 steps,
 * 7 trained parameters whose last-step drifts are known, a curve not as expected.
 *   - Markdown: the heading with the optimizer, FAIL and the class, one row per step with the
 *     drift param_dist / trained_dist, the 5 worst parameters in order (and not the other 2);
 *   - the summary line names the curve when no tensor is not as expected, and counts it;
 *   - HTML: the chart's two series and one table row per step;
 *   - JSON: the steps object parses back with the class, the drift of each point and every
 *     parameter's curve;
 *   - a comparison without a curve writes none of it. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "harness/verdict.h"
#include "reports/report.h"
#include "reports/report_steps.h"

#define N_STEPS 3
#define N_PARAMS 7

static char *render(eq_status (*write)(FILE *, const eq_comparison *, int), const eq_comparison *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL) return NULL;
    EQ_EXPECT_OK(write(mem, c, 1));
    fclose(mem);
    return text;
}

int main(void)
{
    /* last-step drifts of the parameters p0..p6: worst first p3, p6, p0, p5, p1 */
    static const double final_rel[N_PARAMS] = {0.30, 0.10, 0.02, 0.90, 0.01, 0.20, 0.50};
    eq_comparison c;
    memset(&c, 0, sizeof c);
    snprintf(c.test_meta.case_name, sizeof c.test_meta.case_name, "gpt");
    c.test_meta.dtype = EQ_BF16;
    c.test_meta.dp = 2;
    c.test_meta.tp = 2;
    c.ref_meta = c.test_meta;
    c.ref_meta.dp = c.ref_meta.tp = 1;
    eq_steps_curve *s = calloc(1, sizeof *s);
    c.steps = s;
    s->n_steps = N_STEPS;
    eq_optimizer_defaults(EQ_OPT_SGD, &s->opt);
    s->opt.lr = 0.25;
    s->dtype = EQ_BF16;
    s->points = calloc(N_STEPS, sizeof *s->points);
    s->params = calloc(N_PARAMS, sizeof *s->params);
    s->n_params = N_PARAMS;
    for (int t = 0; t < N_STEPS; t++)
        s->points[t] = (eq_step_point){.loss_ref = 2.0 - t, .loss_test = 2.0 - t + 0.5, .grad_norm_ref = 4.0,
                                       .grad_norm_test = 2.0, .param_dist = 0.5 * (t + 1), .trained_dist = t + 1.0,
                                       .param_max_abs = 0.125};
    for (int k = 0; k < N_PARAMS; k++) {
        snprintf(s->params[k].path, sizeof s->params[k].path, "layers/00/p%d", k);
        s->params[k].rel = calloc(N_STEPS, sizeof(double));
        s->params[k].rel[N_STEPS - 1] = final_rel[k];
        s->params[k].rel[0] = k == 4 ? 0.75 : 0.0; /* p4's peak is early: it stays out of the worst 5 */
    }
    s->bug_injected = 0;
    s->as_expected = 0;
    s->verdict = (eq_curve_verdict){.cls = EQ_CURVE_FACTOR, .drift = 0.5, .grad_ratio = 0.5, .grad_ratio_step = 1,
                                    .loss_rel = 0.5};
    snprintf(s->verdict.why, sizeof s->verdict.why, "gradient norm 0.500x the reference's");
    eq_judge(&c); /* no tensor, no finding: the curve's 1 not as expected */
    EQ_EXPECT(c.n_unexpected == 1 && !s->as_expected, "judged: %d not as expected", c.n_unexpected);

    char *md = render(eq_report_markdown, &c);
    if (md == NULL) md = strdup("");
    EQ_EXPECT(strstr(md, "#### Training curve: 3 steps, sgd (lr 0.25)") != NULL, "heading: %s", md);
    EQ_EXPECT(strstr(md, "**FAIL**: the curve is **factor** (expected identical or rounding)") != NULL,
              "verdict line: %s", md);
    EQ_EXPECT(strstr(md, "| 2 | 1 | 1.5 | 0.5 | 0.5 | 0.125 | 0.5 |") != NULL, "step 2's row: %s", md);
    const char *worst[] = {"p3 |", "p6 |", "p0 |", "p5 |", "p1 |"};
    const char *at = md;
    for (int i = 0; i < 5 && at != NULL; i++) {
        const char *next = strstr(at, worst[i]);
        EQ_EXPECT(next != NULL, "%s not listed after the previous worst", worst[i]);
        at = next;
    }
    EQ_EXPECT(strstr(md, "p2 |") == NULL && strstr(md, "p4 |") == NULL, "p2 or p4 listed among the worst 5");
    free(md);

    char line[512];
    eq_report_summary(&c, 1, line, sizeof line);
    EQ_EXPECT(strstr(line, "1 NOT as expected (the training curve of gpt bf16 dp2-tp2 (factor, expected identical or "
                           "rounding))") != NULL, "summary: %s", line);

    char *html = render(eq_report_html, &c);
    EQ_EXPECT(html != NULL && strstr(html, "data-name=\"drift\"") != NULL && strstr(html, "data-name=\"grad norm ratio\"") != NULL,
              "the chart's two series");
    int rows = 0;
    for (const char *p = html; p != NULL && (p = strstr(p, "<tr><td class=\"num\">")) != NULL; p++) rows++;
    EQ_EXPECT(rows == N_STEPS, "%d step rows in the HTML, want %d", rows, N_STEPS);
    free(html);

    char *json = render(eq_report_json, &c);
    json_error_t err;
    json_t *doc = json != NULL ? json_loads(json, 0, &err) : NULL;
    json_t *steps = json_object_get(json_array_get(json_object_get(doc, "comparisons"), 0), "steps");
    EQ_EXPECT(steps != NULL, "no steps object in the JSON");
    EQ_EXPECT(strcmp(json_string_value(json_object_get(steps, "class")) ? json_string_value(json_object_get(steps, "class")) : "",
                     "factor") == 0, "class");
    json_t *points = json_object_get(steps, "points");
    EQ_EXPECT(json_array_size(points) == N_STEPS, "%zu points", json_array_size(points));
    EQ_EXPECT(json_real_value(json_object_get(json_array_get(points, 2), "drift")) == 0.5, "step 3's drift");
    EQ_EXPECT(json_array_size(json_object_get(steps, "params")) == N_PARAMS, "every parameter's curve");
    EQ_EXPECT(json_integer_value(json_object_get(json_object_get(doc, "summary"), "unexpected")) == 1, "unexpected 1");
    json_decref(doc);
    free(json);

    eq_comparison_free(&c); /* frees the curve */
    char *none = render(eq_report_markdown, &c);
    EQ_EXPECT(none != NULL && strstr(none, "Training curve") == NULL, "a comparison without a curve wrote '%s'",
              none ? none : "");
    free(none);
    return eq_test_finish("report_steps_test");
}
