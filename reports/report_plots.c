/* The HTML report's divergence-by-depth plots (report_plots.h). */
#include "reports/report_plots.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/plot_svg.h"

/* Four tensors give eight lines (max and mean each): about what one chart shows readably. */
#define MAX_PLOTTED_NAMES 4

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

static int by_name_then_first(const void *a, const void *b)
{
    const tensor_name *na = a, *nb = b;
    int order = strcmp(na->name, nb->name);
    return order != 0 ? order : (na->first > nb->first) - (na->first < nb->first);
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
    /* the role's results sorted by name (then position), so each name's results are a run: n log n
     * where a search of the names so far was quadratic in a capture of many names */
    int n_names = 0, n_role = 0;
    for (int i = 0; i < c->count; i++) {
        const eq_tensor_result *r = &c->results[i];
        if (r->role == role) names[n_role++] = (tensor_name){r->name, fmax(0.0, r->m.max_abs), i};
    }
    qsort(names, (size_t)n_role, sizeof *names, by_name_then_first);
    for (int i = 0; i < n_role; i++) {
        if (n_names > 0 && strcmp(names[n_names - 1].name, names[i].name) == 0)
            names[n_names - 1].worst = fmax(names[n_names - 1].worst, names[i].worst);
        else
            names[n_names++] = names[i];
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

eq_status eq_report_plots_html(FILE *out, const eq_comparison *c)
{
    eq_status st = EQ_OK;
    if (count_role(c, EQ_ROLE_ACTIVATION) > 0) EQ_TRY(write_plot(out, c, EQ_ROLE_ACTIVATION, "activations"));
    if (count_role(c, EQ_ROLE_GRAD) > 0) EQ_TRY(write_plot(out, c, EQ_ROLE_GRAD, "gradients"));
cleanup:
    return st;
}
