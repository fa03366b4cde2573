/* SVG line charts for the reports (see plot_svg.h for the layout and the axis rules). */
#include <math.h>
#include <string.h>

#include "reports/plot_svg.h"

/* Distinct under the common colour-vision deficiencies in pairs that sit next to each other
 * (the tableau/matplotlib default cycle). */
static const char *const palette[EQ_SVG_PALETTE_SIZE] = {
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
};

#define INK "#333333"
#define GRID "#e3e3e3"
#define LEGEND_NAME_MAX 24 /* characters of a series name the legend shows */

typedef struct {
    double left, right, top, bottom; /* plot area, pixels */
    double x_lo, x_hi;               /* x domain */
    int log_y;
    double y_lo, y_hi;               /* y domain: decades on a log axis, values on a linear one */
    double y_step;                   /* linear tick step */
    int n_zero, n_negative, n_below; /* log axis: points clamped onto the floor, by cause */
    int n_nonfinite;                 /* points not drawn */
} axes;

const char *eq_svg_color(int index)
{
    int slot = index % EQ_SVG_PALETTE_SIZE;
    return palette[slot < 0 ? slot + EQ_SVG_PALETTE_SIZE : slot];
}

void eq_svg_escape(FILE *out, const char *text)
{
    for (const char *c = text; c != NULL && *c != '\0'; c++) {
        switch (*c) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default: fputc(*c, out);
        }
    }
}

/* The decade d with 10^d <= v < 10^(d+1), v > 0; log10 alone can land one off near a power. */
static int decade_of(double v)
{
    int d = (int)floor(log10(v));
    if (pow(10.0, d + 1) <= v) d++;
    if (pow(10.0, d) > v) d--;
    return d;
}

/* The smallest of 1, 2, 5 x 10^k that is at least `raw` (> 0). */
static double nice_step(double raw)
{
    double magnitude = pow(10.0, decade_of(raw));
    static const double factors[] = {1.0, 2.0, 5.0, 10.0};
    for (int i = 0; i < 4; i++)
        if (factors[i] * magnitude >= raw) return factors[i] * magnitude;
    return 10.0 * magnitude;
}

/* Domains from every drawable point and reference line (rules in plot_svg.h). */
static void find_domain(const eq_svg_chart *chart, axes *ax)
{
    double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
    double y_min_positive = INFINITY;
    int any_nonpositive = 0;
    for (int s = 0; s < chart->n_series; s++) {
        const eq_svg_series *series = &chart->series[s];
        for (int i = 0; i < series->count; i++) {
            double x = series->x[i], y = series->y[i];
            if (!isfinite(x) || !isfinite(y)) {
                ax->n_nonfinite++;
                continue;
            }
            x_min = fmin(x_min, x);
            x_max = fmax(x_max, x);
            y_min = fmin(y_min, y);
            y_max = fmax(y_max, y);
            if (y > 0.0) y_min_positive = fmin(y_min_positive, y);
            else any_nonpositive = 1;
        }
    }
    for (int r = 0; r < chart->n_refs; r++) {
        double y = chart->refs[r].y;
        if (!isfinite(y) || (ax->log_y && y <= 0.0)) continue; /* not drawn */
        y_min = fmin(y_min, y);
        y_max = fmax(y_max, y);
        if (y > 0.0) y_min_positive = fmin(y_min_positive, y);
    }
    ax->x_lo = isfinite(x_min) ? floor(x_min) - 0.5 : -0.5;
    ax->x_hi = isfinite(x_max) ? ceil(x_max) + 0.5 : 0.5;
    if (ax->log_y) {
        if (!isfinite(y_min_positive)) {
            ax->y_lo = -8;
            ax->y_hi = 0;
            return;
        }
        int hi = decade_of(y_max) + 1, lo = decade_of(y_min_positive) - any_nonpositive;
        if (hi - lo > EQ_SVG_MAX_DECADES) lo = hi - EQ_SVG_MAX_DECADES;
        ax->y_lo = lo;
        ax->y_hi = hi;
        return;
    }
    double lo = isfinite(y_min) ? fmin(0.0, y_min) : 0.0, hi = isfinite(y_max) ? y_max : 1.0;
    if (!(hi > lo)) hi = lo + 1.0;
    ax->y_step = nice_step((hi - lo) / 5.0);
    ax->y_lo = floor(lo / ax->y_step) * ax->y_step;
    ax->y_hi = ceil(hi / ax->y_step) * ax->y_step;
}

static double map_x(const axes *ax, double x)
{
    return ax->left + (x - ax->x_lo) / (ax->x_hi - ax->x_lo) * (ax->right - ax->left);
}

/* Pixel row of y; a log axis clamps what it cannot show onto its floor. */
static double map_y(const axes *ax, double y)
{
    double t = ax->log_y ? (y > 0.0 ? fmax(log10(y), ax->y_lo) : ax->y_lo) : y;
    return ax->bottom - (t - ax->y_lo) / (ax->y_hi - ax->y_lo) * (ax->bottom - ax->top);
}

/* "1e-3" for a decade (1 for 10^0). */
static const char *decade_label(int decade, char *buf, size_t len)
{
    if (decade == 0) snprintf(buf, len, "1");
    else snprintf(buf, len, "1e%d", decade);
    return buf;
}

static void write_grid_and_ticks(FILE *out, const axes *ax)
{
    char label[32];
    fprintf(out, "<g class=\"grid\" stroke=\"%s\" stroke-width=\"1\">\n", GRID);
    int n_y = ax->log_y ? (int)(ax->y_hi - ax->y_lo) : (int)lround((ax->y_hi - ax->y_lo) / ax->y_step);
    for (int k = 0; k <= n_y; k++) {
        double value = ax->log_y ? pow(10.0, ax->y_lo + k) : ax->y_lo + k * ax->y_step;
        fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", ax->left, map_y(ax, value),
                ax->right, map_y(ax, value));
    }
    /* integer layers; at most about 15 labelled ticks on a deep model */
    int first = (int)ceil(ax->x_lo), last = (int)floor(ax->x_hi);
    int x_step = last - first < 15 ? 1 : (int)nice_step((last - first) / 10.0);
    for (int x = first; x <= last; x++)
        if (x % x_step == 0)
            fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", map_x(ax, x), ax->top,
                    map_x(ax, x), ax->bottom);
    fprintf(out, "</g>\n<g class=\"ticks\" fill=\"%s\">\n", INK);
    for (int k = 0; k <= n_y; k++) {
        double value = ax->log_y ? pow(10.0, ax->y_lo + k) : ax->y_lo + k * ax->y_step;
        if (ax->log_y) decade_label((int)ax->y_lo + k, label, sizeof label);
        else snprintf(label, sizeof label, "%g", fabs(value) < 1e-12 * ax->y_step ? 0.0 : value);
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">%s</text>\n", ax->left - 6,
                map_y(ax, value) + 4, label);
    }
    for (int x = first; x <= last; x++)
        if (x % x_step == 0)
            fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%d</text>\n", map_x(ax, x),
                    ax->bottom + 16, x);
    fprintf(out, "</g>\n<rect class=\"frame\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
                 "stroke=\"%s\"/>\n",
            ax->left, ax->top, ax->right - ax->left, ax->bottom - ax->top, INK);
}

static void write_labels(FILE *out, const eq_svg_chart *chart, const axes *ax)
{
    fprintf(out, "<text class=\"title\" x=\"%.2f\" y=\"22\" text-anchor=\"middle\" font-size=\"14\" "
                 "font-weight=\"bold\" fill=\"%s\">",
            (ax->left + ax->right) / 2, INK);
    eq_svg_escape(out, chart->title);
    fprintf(out, "</text>\n<text class=\"xlabel\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" fill=\"%s\">",
            (ax->left + ax->right) / 2, ax->bottom + 34, INK);
    eq_svg_escape(out, chart->x_label);
    double mid = (ax->top + ax->bottom) / 2;
    fprintf(out, "</text>\n<text class=\"ylabel\" x=\"16\" y=\"%.2f\" text-anchor=\"middle\" fill=\"%s\" "
                 "transform=\"rotate(-90 16 %.2f)\">",
            mid, INK, mid);
    eq_svg_escape(out, chart->y_label);
    fprintf(out, "</text>\n");
}

static void write_refs(FILE *out, const eq_svg_chart *chart, const axes *ax)
{
    for (int r = 0; r < chart->n_refs; r++) {
        const eq_svg_refline *ref = &chart->refs[r];
        if (!isfinite(ref->y) || (ax->log_y && ref->y <= 0.0)) continue;
        double y = map_y(ax, ref->y);
        /* the label above the line, or below it where the title would be in the way */
        double label_y = y - 5 < ax->top + 12 ? y + 14 : y - 5;
        fprintf(out, "<g class=\"ref\"><line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                     "stroke-width=\"1.5\" stroke-dasharray=\"7 4\"/>",
                ax->left, y, ax->right, y, INK);
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" fill=\"%s\">", ax->right - 4, label_y, INK);
        eq_svg_escape(out, ref->label);
        fprintf(out, "</text></g>\n");
    }
}

/* Counts what a log axis clamps onto its floor, for the note. */
static void count_clamped(axes *ax, double y)
{
    if (!ax->log_y) return;
    if (y == 0.0) ax->n_zero++;
    else if (y < 0.0) ax->n_negative++;
    else if (log10(y) < ax->y_lo) ax->n_below++;
}

static const char *series_color(const eq_svg_series *series)
{
    return series->tolerance ? EQ_SVG_TOLERANCE_COLOR : eq_svg_color(series->color);
}

static const char *series_dash(const eq_svg_series *series)
{
    if (series->tolerance) return " stroke-dasharray=\"2 3\"";
    return series->dashed ? " stroke-dasharray=\"5 3\"" : "";
}

static void write_series(FILE *out, const eq_svg_chart *chart, const eq_svg_series *series, axes *ax)
{
    const char *color = series_color(series);
    fprintf(out, "<g class=\"series%s\" data-name=\"", series->tolerance ? " tolerance" : "");
    eq_svg_escape(out, series->name);
    fprintf(out, "\">\n<path fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s d=\"", color,
            series->tolerance ? "1.5" : "2", series_dash(series));
    int started = 0, pen_down = 0; /* a non-finite point breaks the line */
    for (int i = 0; i < series->count; i++) {
        if (!isfinite(series->x[i]) || !isfinite(series->y[i])) {
            pen_down = 0;
            continue;
        }
        fprintf(out, "%s%.2f %.2f", pen_down ? " L" : (started ? " M" : "M"), map_x(ax, series->x[i]),
                map_y(ax, series->y[i]));
        started = pen_down = 1;
    }
    fprintf(out, "\"/>\n");
    for (int i = 0; i < series->count && !series->tolerance; i++) {
        double x = series->x[i], y = series->y[i];
        if (!isfinite(x) || !isfinite(y)) continue;
        count_clamped(ax, y);
        fprintf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\"><title>",
                map_x(ax, x), map_y(ax, y), series->dashed ? "#ffffff" : color, color);
        eq_svg_escape(out, series->name);
        fprintf(out, ", ");
        eq_svg_escape(out, chart->x_label);
        fprintf(out, " %g: %.4g</title></circle>\n", x, y);
    }
    for (int i = 0; series->marked != NULL && i < series->count; i++) {
        double x = series->x[i], y = series->y[i];
        if (!series->marked[i] || !isfinite(x) || !isfinite(y)) continue;
        fprintf(out, "<circle class=\"marked\" cx=\"%.2f\" cy=\"%.2f\" r=\"7\" fill=\"none\" stroke=\"%s\" "
                     "stroke-width=\"2\"><title>",
                map_x(ax, x), map_y(ax, y), EQ_SVG_MARK_COLOR);
        eq_svg_escape(out, series->name);
        fprintf(out, ", ");
        eq_svg_escape(out, chart->x_label);
        fprintf(out, " %g: %.4g, not as expected</title></circle>\n", x, y);
    }
    fprintf(out, "</g>\n");
}

static void write_legend(FILE *out, const eq_svg_chart *chart, const axes *ax)
{
    double x = ax->right + 14;
    fprintf(out, "<g class=\"legend\" fill=\"%s\">\n", INK);
    for (int s = 0; s < chart->n_series; s++) {
        const eq_svg_series *series = &chart->series[s];
        const char *color = series_color(series);
        double y = ax->top + 8 + 18 * s;
        fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"2\"%s/>",
                x, y, x + 24, y, color, series_dash(series));
        if (!series->tolerance)
            fprintf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\"/>",
                    x + 12, y, series->dashed ? "#ffffff" : color, color);
        char shown[LEGEND_NAME_MAX + 1];
        const char *name = series->name != NULL ? series->name : "";
        if (strlen(name) > LEGEND_NAME_MAX) snprintf(shown, sizeof shown, "%.*s...", LEGEND_NAME_MAX - 3, name);
        else snprintf(shown, sizeof shown, "%s", name);
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\">", x + 30, y + 4);
        eq_svg_escape(out, shown);
        fprintf(out, "</text>\n");
    }
    fprintf(out, "</g>\n");
}

/* "At the axis floor (1e-6): 2 zero values, 1 smaller value. 1 non-finite value not drawn." */
static void write_note(FILE *out, const axes *ax, int height)
{
    int n_clamped = ax->n_zero + ax->n_negative + ax->n_below;
    if (n_clamped == 0 && ax->n_nonfinite == 0) return;
    fprintf(out, "<text class=\"note\" x=\"%.2f\" y=\"%d\" font-size=\"10\" font-style=\"italic\" fill=\"#666666\">",
            ax->left, height - 8);
    if (n_clamped > 0) {
        char floor_label[32];
        const char *separator = "";
        fprintf(out, "At the axis floor (%s):", decade_label((int)ax->y_lo, floor_label, sizeof floor_label));
        const int counts[3] = {ax->n_zero, ax->n_negative, ax->n_below};
        const char *const kinds[3] = {"zero", "negative", "smaller"};
        for (int k = 0; k < 3; k++) {
            if (counts[k] == 0) continue;
            fprintf(out, "%s %d %s value%s", separator, counts[k], kinds[k], counts[k] == 1 ? "" : "s");
            separator = ",";
        }
        fprintf(out, ".%s", ax->n_nonfinite > 0 ? " " : "");
    }
    if (ax->n_nonfinite > 0)
        fprintf(out, "%d non-finite value%s not drawn.", ax->n_nonfinite, ax->n_nonfinite == 1 ? "" : "s");
    fprintf(out, "</text>\n");
}

eq_status eq_svg_plot(FILE *out, const eq_svg_chart *chart)
{
    int width = chart->width > 0 ? chart->width : EQ_SVG_DEFAULT_WIDTH;
    int height = chart->height > 0 ? chart->height : EQ_SVG_DEFAULT_HEIGHT;
    if (width - EQ_SVG_MARGIN_LEFT - EQ_SVG_MARGIN_RIGHT < 40 || height - EQ_SVG_MARGIN_TOP - EQ_SVG_MARGIN_BOTTOM < 40)
        return EQ_FAIL(EQ_ERR_INTERNAL, "a %dx%d chart leaves no room to plot", width, height);
    axes ax = {
        .left = EQ_SVG_MARGIN_LEFT,
        .right = width - EQ_SVG_MARGIN_RIGHT,
        .top = EQ_SVG_MARGIN_TOP,
        .bottom = height - EQ_SVG_MARGIN_BOTTOM,
        .log_y = chart->log_y,
    };
    find_domain(chart, &ax);
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n<title>",
            width, height, width, height);
    eq_svg_escape(out, chart->title);
    fprintf(out, "</title>\n<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", width, height);
    write_grid_and_ticks(out, &ax);
    write_labels(out, chart, &ax);
    write_refs(out, chart, &ax);
    for (int s = 0; s < chart->n_series; s++) write_series(out, chart, &chart->series[s], &ax);
    write_legend(out, chart, &ax);
    write_note(out, &ax, height);
    fprintf(out, "</svg>\n");
    if (ferror(out)) return EQ_FAIL(EQ_ERR_IO, "cannot write the SVG chart");
    return EQ_OK;
}
