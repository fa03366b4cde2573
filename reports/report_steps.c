#include "reports/report_steps.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/number_format.h"
#include "reports/plot_svg.h"
#include "reports/report.h"
#include "reports/report_model.h"

const char *eq_report_steps_expected(const eq_steps_curve *curve)
{
    return curve->bug_injected ? "factor or growing" : "identical or rounding";
}

/* drift at one step: how far apart the runs are, in units of how far the reference trained. */
static double point_drift(const eq_step_point *p) { return p->trained_dist > 0.0 ? p->param_dist / p->trained_dist : 0.0; }

static double point_grad_ratio(const eq_step_point *p)
{
    return p->grad_norm_ref > 0.0 ? p->grad_norm_test / p->grad_norm_ref : (p->grad_norm_test > 0.0 ? INFINITY : 1.0);
}

static double point_loss_rel(const eq_step_point *p)
{
    const double d = fabs(p->loss_test - p->loss_ref);
    return p->loss_ref != 0.0 ? d / fabs(p->loss_ref) : (d > 0.0 ? INFINITY : 0.0);
}

/* "adam (lr 0.001, betas 0.9, 0.999, eps 1e-08)" or "sgd (lr 0.01)". */
static const char *optimizer_text(const eq_optimizer_config *o, char *buf, size_t len)
{
    if (o->kind == EQ_OPT_ADAM)
        snprintf(buf, len, "adam (lr %g, betas %g, %g, eps %g)", o->lr, o->beta1, o->beta2, o->eps);
    else snprintf(buf, len, "%s (lr %g)", eq_optimizer_name(o->kind), o->lr);
    return buf;
}

/* The trained parameters worst first by their last step's divergence (capture order among
 * equals), at most `max` of them, into order. */
static int worst_params(const eq_steps_curve *c, int *order, int max)
{
    int n = 0;
    for (; n < max && n < c->n_params; n++) {
        int best = -1;
        for (int k = 0; k < c->n_params; k++) {
            int taken = 0;
            for (int i = 0; i < n && !taken; i++) taken = order[i] == k;
            if (!taken && (best < 0 || c->params[k].rel[c->n_steps - 1] > c->params[best].rel[c->n_steps - 1])) best = k;
        }
        order[n] = best;
    }
    return n;
}

static double peak_rel(const eq_param_curve *p, int n_steps)
{
    double peak = 0.0;
    for (int t = 0; t < n_steps; t++) peak = fmax(peak, p->rel[t]);
    return peak;
}

/* The per-step table: one row a step. */
static int step_rows(const eq_comparison *c) { return c->steps != NULL ? c->steps->n_steps : 0; }

#define STEP_COLUMN(fn, value, digits)                                                   \
    static const char *fn(const eq_comparison *c, int row, char *buf, size_t len)        \
    {                                                                                    \
        const eq_step_point *p = &c->steps->points[row];                                 \
        return eq_format_sig(value, digits, buf, len);                                   \
    }
STEP_COLUMN(loss_ref, p->loss_ref, 6)
STEP_COLUMN(loss_test, p->loss_test, 6)
STEP_COLUMN(loss_rel, point_loss_rel(p), 3)
STEP_COLUMN(grad_ratio, point_grad_ratio(p), 6)
STEP_COLUMN(param_max_abs, p->param_max_abs, 3)
STEP_COLUMN(drift, point_drift(p), 3)

static const char *step_number(const eq_comparison *c, int row, char *buf, size_t len)
{
    snprintf(buf, len, "%d", row + 1);
    return buf;
}

/* The Markdown alignment cells' widths are the escaped headers' plus two, as the table has always
 * been printed. */
static const eq_report_column step_columns[] = {
    {"step", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, NULL, 0, step_number},
    {"loss ref", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, NULL, 0, loss_ref},
    {"loss layout", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, NULL, 0, loss_test},
    {"|d loss|/loss", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, NULL, 16, loss_rel},
    {"grad norm ratio", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, NULL, 0, grad_ratio},
    {"param max |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, NULL, 16, param_max_abs},
    {"drift", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, NULL, 0, drift},
};

/* The worst parameters' table: the row'th worst. */
static int worst_rows(const eq_comparison *c)
{
    int order[EQ_REPORT_STEPS_WORST];
    return c->steps != NULL ? worst_params(c->steps, order, EQ_REPORT_STEPS_WORST) : 0;
}

static const eq_param_curve *worst_param(const eq_comparison *c, int row)
{
    int order[EQ_REPORT_STEPS_WORST];
    worst_params(c->steps, order, EQ_REPORT_STEPS_WORST);
    return &c->steps->params[order[row]];
}

static const char *param_path(const eq_comparison *c, int row, char *buf, size_t len)
{
    snprintf(buf, len, "%s", worst_param(c, row)->path);
    return buf;
}

static const char *param_drift(const eq_comparison *c, int row, char *buf, size_t len)
{
    return eq_format_sig(worst_param(c, row)->rel[c->steps->n_steps - 1], 3, buf, len);
}

static const char *param_peak(const eq_comparison *c, int row, char *buf, size_t len)
{
    return eq_format_sig(peak_rel(worst_param(c, row), c->steps->n_steps), 3, buf, len);
}

static const eq_report_column worst_columns[] = {
    {"parameter", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, NULL, 0, param_path},
    {"drift", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, NULL, 0, param_drift},
    {"peak", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, NULL, 0, param_peak},
};

static void worst_intro(const eq_renderer *rd, const eq_comparison *c, const eq_tensor_result *first)
{
    rd->para_begin(rd);
    eq_render_textf(rd, "The %d of %d trained parameters that diverged most (their own drift after step %d; peak over "
                        "the steps):", worst_rows(c), c->steps->n_params, c->steps->n_steps);
    rd->para_end(rd);
}

#define N_OF(a) ((int)(sizeof a / sizeof a[0]))
static const eq_report_table step_table = {NULL, 0, NULL, NULL, 0, NULL, step_columns, N_OF(step_columns), step_rows};
static const eq_report_table worst_table = {NULL, 0, NULL, NULL, 0, worst_intro, worst_columns, N_OF(worst_columns),
                                            worst_rows};

eq_status eq_report_steps_write(const eq_renderer *rd, const eq_comparison *cmp)
{
    const eq_steps_curve *c = cmp->steps;
    if (c == NULL) return EQ_OK;
    const eq_curve_verdict *v = &c->verdict;
    char opt[128], a[32], b[32], d[32], e[32];
    rd->heading_begin(rd);
    eq_render_textf(rd, "Training curve: %d steps, %s", c->n_steps, optimizer_text(&c->opt, opt, sizeof opt));
    rd->heading_end(rd);
    rd->para_begin(rd);
    if (c->as_expected) rd->text(rd, "pass");
    else rd->strong(rd, "FAIL");
    rd->text(rd, ": the curve is ");
    rd->strong(rd, eq_curve_class_name(v->cls));
    eq_render_textf(rd, " (expected %s). %s", eq_report_steps_expected(c), v->why);
    rd->para_end(rd);
    rd->para_begin(rd);
    eq_render_textf(rd, "Identical convergence as a number: after step %d the losses differ by %s of the loss "
                        "(|d loss|/loss) and the layout's weights are %s of the distance the reference trained away "
                        "from its start (drift); growth exponent %s, grad norm ratio %s at step %d.",
                    c->n_steps, eq_format_sig(v->loss_rel, 3, a, sizeof a), eq_format_sig(v->drift, 3, b, sizeof b),
                    eq_format_sig(v->growth_exponent, 3, d, sizeof d), eq_format_sig(v->grad_ratio, 4, e, sizeof e),
                    v->grad_ratio_step);
    rd->para_end(rd);
    if (rd->steps_chart != NULL) {
        eq_status st = rd->steps_chart(rd, cmp);
        if (st != EQ_OK) return st;
    }
    eq_report_write_table(rd, &step_table, cmp);
    eq_report_write_table(rd, &worst_table, cmp);
    if (c->n_frozen > 0) {
        rd->para_begin(rd);
        eq_render_textf(rd, "%d parameter%s without a gradient kept frozen.", c->n_frozen, c->n_frozen == 1 ? "" : "s");
        rd->para_end(rd);
    }
    return EQ_OK;
}

static eq_status write_chart(FILE *out, const eq_steps_curve *c)
{
    eq_status st = EQ_OK;
    double *x = malloc((size_t)c->n_steps * 3 * sizeof *x);
    if (x == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "cannot plot %d steps", c->n_steps);
    double *drift = x + c->n_steps, *ratio = drift + c->n_steps;
    for (int t = 0; t < c->n_steps; t++) {
        x[t] = t + 1;
        drift[t] = point_drift(&c->points[t]);
        ratio[t] = point_grad_ratio(&c->points[t]);
    }
    const eq_svg_series series[2] = {
        {"drift", x, drift, c->n_steps, 0, 0, NULL, 0},
        {"grad norm ratio", x, ratio, c->n_steps, 1, 1, NULL, 0},
    };
    const eq_svg_refline one = {1.0, "ratio 1"};
    char title[96];
    snprintf(title, sizeof title, "%s: drift and grad norm ratio by step", eq_dtype_name(c->dtype));
    const eq_svg_chart chart = {
        .title = title,
        .x_label = "step",
        .y_label = "drift, ratio",
        .log_y = 1,
        .series = series,
        .n_series = 2,
        .refs = &one,
        .n_refs = 1,
    };
    fprintf(out, "<figure>\n");
    EQ_TRY(eq_svg_plot(out, &chart));
    fprintf(out, "<figcaption>Solid: drift = ||p_layout - p_ref|| / ||p_ref - p_ref at step 0|| over the trained "
                 "master weights after each step's update; rounding keeps it small and growing no faster than "
                 "about sqrt(step). Dashed: ||g_layout|| / ||g_ref||, 1 within rounding; a bug that scales the "
                 "gradients holds it at its factor. Log scale.</figcaption>\n</figure>\n");
cleanup:
    free(x);
    return st;
}

eq_status eq_report_steps_chart_html(FILE *out, const eq_comparison *c)
{
    return c->steps != NULL ? write_chart(out, c->steps) : EQ_OK;
}

/* A number as report_json.c writes one: non-finite values as the strings "NaN", "Infinity". */
static json_t *number(double v)
{
    if (isnan(v)) return json_string("NaN");
    if (isinf(v)) return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

static json_t *optimizer_json(const eq_optimizer_config *o)
{
    json_t *j = json_object();
    int bad = j == NULL;
    bad |= json_object_set_new(j, "name", json_string(eq_optimizer_name(o->kind)));
    bad |= json_object_set_new(j, "lr", number(o->lr));
    if (o->kind == EQ_OPT_ADAM) {
        bad |= json_object_set_new(j, "beta1", number(o->beta1));
        bad |= json_object_set_new(j, "beta2", number(o->beta2));
        bad |= json_object_set_new(j, "eps", number(o->eps));
    }
    if (bad) json_decref(j);
    return bad ? NULL : j;
}

static json_t *point_json(const eq_step_point *p, int step)
{
    json_t *j = json_object();
    int bad = j == NULL;
    bad |= json_object_set_new(j, "step", json_integer(step));
    bad |= json_object_set_new(j, "loss_ref", number(p->loss_ref));
    bad |= json_object_set_new(j, "loss_test", number(p->loss_test));
    bad |= json_object_set_new(j, "loss_rel", number(point_loss_rel(p)));
    bad |= json_object_set_new(j, "grad_norm_ref", number(p->grad_norm_ref));
    bad |= json_object_set_new(j, "grad_norm_test", number(p->grad_norm_test));
    bad |= json_object_set_new(j, "grad_ratio", number(point_grad_ratio(p)));
    bad |= json_object_set_new(j, "param_dist", number(p->param_dist));
    bad |= json_object_set_new(j, "trained_dist", number(p->trained_dist));
    bad |= json_object_set_new(j, "param_max_abs", number(p->param_max_abs));
    bad |= json_object_set_new(j, "drift", number(point_drift(p)));
    if (bad) json_decref(j);
    return bad ? NULL : j;
}

static json_t *param_json(const eq_param_curve *p, int n_steps)
{
    json_t *j = json_object(), *rel = json_array();
    int bad = j == NULL || rel == NULL;
    for (int t = 0; t < n_steps && !bad; t++) bad |= json_array_append_new(rel, number(p->rel[t]));
    bad |= json_object_set_new(j, "path", json_string(p->path));
    bad |= json_object_set_new(j, "drift", rel);
    if (bad) json_decref(j);
    return bad ? NULL : j;
}

json_t *eq_report_steps_json(const eq_steps_curve *c)
{
    json_t *j = json_object(), *points = json_array(), *params = json_array(), *expected = json_array();
    int bad = j == NULL || points == NULL || params == NULL || expected == NULL;
    const eq_curve_verdict *v = &c->verdict;
    for (int t = 0; t < c->n_steps && !bad; t++) bad |= json_array_append_new(points, point_json(&c->points[t], t + 1));
    for (int k = 0; k < c->n_params && !bad; k++) bad |= json_array_append_new(params, param_json(&c->params[k], c->n_steps));
    const eq_curve_class want[2][2] = {{EQ_CURVE_IDENTICAL, EQ_CURVE_ROUNDING}, {EQ_CURVE_FACTOR, EQ_CURVE_GROWING}};
    for (int i = 0; i < 2 && !bad; i++)
        bad |= json_array_append_new(expected, json_string(eq_curve_class_name(want[c->bug_injected != 0][i])));
    bad |= json_object_set_new(j, "n_steps", json_integer(c->n_steps));
    bad |= json_object_set_new(j, "optimizer", optimizer_json(&c->opt));
    bad |= json_object_set_new(j, "class", json_string(eq_curve_class_name(v->cls)));
    bad |= json_object_set_new(j, "expected", expected);
    bad |= json_object_set_new(j, "as_expected", json_boolean(c->as_expected));
    bad |= json_object_set_new(j, "why", json_string(v->why));
    bad |= json_object_set_new(j, "loss_rel", number(v->loss_rel));
    bad |= json_object_set_new(j, "drift", number(v->drift));
    bad |= json_object_set_new(j, "growth_exponent", number(v->growth_exponent));
    bad |= json_object_set_new(j, "grad_ratio", number(v->grad_ratio));
    bad |= json_object_set_new(j, "grad_ratio_step", json_integer(v->grad_ratio_step));
    bad |= json_object_set_new(j, "frozen", json_integer(c->n_frozen));
    bad |= json_object_set_new(j, "points", points);
    bad |= json_object_set_new(j, "params", params);
    if (bad) json_decref(j);
    return bad ? NULL : j;
}

const char *eq_report_steps_unexpected(const eq_comparison *cmps, int n, char *buf, size_t len)
{
    for (int i = 0; i < n; i++) {
        const eq_steps_curve *c = cmps[i].steps;
        if (c == NULL || c->as_expected) continue;
        char run[3 * EQ_NAME_MAX];
        snprintf(buf, len, "the training curve of %s (%s, expected %s)",
                 eq_report_run_name(&cmps[i].test_meta, run, sizeof run), eq_curve_class_name(c->verdict.cls),
                 eq_report_steps_expected(c));
        return buf;
    }
    return NULL;
}
