/* The SVG chart writer alone: points land where the axis rules of plot_svg.h put them (recomputed
 * here from those rules), a zero on a log axis is clamped onto the floor with a note instead of
 * producing NaN or Inf coordinates, non-finite values break the line, text is escaped, and the
 * output is one standalone <svg> element. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "reports/plot_svg.h"

#define EXPECT_HAS(text, part) EQ_EXPECT(strstr((text), (part)) != NULL, "chart lacks '%s'", (part))

/* The chart as text (NULL on failure); the caller frees it. */
static char *render(const eq_svg_chart *chart, eq_status *st)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    EQ_EXPECT(f != NULL, "open_memstream");
    if (f == NULL) return NULL;
    *st = eq_svg_plot(f, chart);
    fclose(f);
    return text;
}

static int count_of(const char *text, const char *part)
{
    int n = 0;
    for (const char *p = strstr(text, part); p != NULL; p = strstr(p + 1, part)) n++;
    return n;
}

/* No "nan" or "inf" anywhere, in any case: printf writes NaN and Inf coordinates that way. */
static void expect_finite_text(const char *text)
{
    char *lower = strdup(text);
    EQ_EXPECT(lower != NULL, "strdup");
    if (lower == NULL) return;
    for (char *c = lower; *c != '\0'; c++) *c = (char)tolower((unsigned char)*c);
    EQ_EXPECT(strstr(lower, "nan") == NULL, "chart holds 'nan'");
    EQ_EXPECT(strstr(lower, "inf") == NULL, "chart holds 'inf'");
    free(lower);
}

/* The circle centres of the series named `name` (its data-name as written), up to `max`. */
static int series_points(const char *text, const char *name, double *cx, double *cy, int max)
{
    char opening[128];
    snprintf(opening, sizeof opening, "<g class=\"series\" data-name=\"%s\">", name);
    const char *p = strstr(text, opening), *end = p != NULL ? strstr(p, "</g>") : NULL;
    int n = 0;
    while (p != NULL && end != NULL && n < max && (p = strstr(p, "<circle cx=\"")) != NULL && p < end) {
        if (sscanf(p, "<circle cx=\"%lf\" cy=\"%lf\"", &cx[n], &cy[n]) == 2) n++;
        p++;
    }
    return n;
}

static void test_log_axis(void)
{
    static const double x[] = {0, 1, 2, 3};
    static const double known_y[] = {1e-3, 0.0, 1e-5, 1e-2};
    static const double mean_y[] = {1e-4, 0.0, 2e-6, 1e-3};
    const eq_svg_series series[] = {
        {"known", x, known_y, 4, 0, 0, NULL, 0},
        {"x<y mean", x, mean_y, 4, 0, 1, NULL, 0},
    };
    const eq_svg_refline atol = {1e-3, "atol 0.001"};
    eq_svg_chart chart = {
        .title = "a & b <c> \"d\"", .x_label = "layer", .y_label = "|d|", .log_y = 1,
        .series = series, .n_series = 2, .refs = &atol, .n_refs = 1,
    };
    eq_status st = EQ_OK;
    char *text = render(&chart, &st);
    EQ_EXPECT(st == EQ_OK, "eq_svg_plot: %s", eq_error_message());
    if (text == NULL) return;
    expect_finite_text(text);
    EQ_EXPECT(strncmp(text, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"360\"", 64) == 0,
              "opening '%.80s'", text);
    size_t len = strlen(text);
    EQ_EXPECT(len > 7 && strcmp(text + len - 7, "</svg>\n") == 0, "does not end with </svg>");
    EQ_EXPECT(count_of(text, "<svg") == 1 && count_of(text, "</svg>") == 1, "one svg element");
    EQ_EXPECT(count_of(text, "<g") == count_of(text, "</g>"), "groups not closed");
    EQ_EXPECT(count_of(text, "<text") == count_of(text, "</text>"), "text elements not closed");
    /* Axis rules: the smallest positive value 2e-6 is in decade -6, a zero lowers the floor to
     * 1e-7; the largest, 1e-2, puts the top at 1e-1. x spans [0 - 0.5, 3 + 0.5]. */
    const double lo = -7, hi = -1, x_lo = -0.5, x_hi = 3.5;
    const double left = EQ_SVG_MARGIN_LEFT, right = 640 - EQ_SVG_MARGIN_RIGHT;
    const double top = EQ_SVG_MARGIN_TOP, bottom = 360 - EQ_SVG_MARGIN_BOTTOM;
    double cx[8], cy[8];
    int n = series_points(text, "known", cx, cy, 8);
    EQ_EXPECT(n == 4, "%d points of 'known'", n);
    for (int i = 0; i < n && i < 4; i++) {
        double want_x = left + (x[i] - x_lo) / (x_hi - x_lo) * (right - left);
        double t = known_y[i] > 0 ? log10(known_y[i]) : lo; /* the zero sits on the floor */
        double want_y = bottom - (t - lo) / (hi - lo) * (bottom - top);
        EQ_EXPECT(fabs(cx[i] - want_x) < 0.006 && fabs(cy[i] - want_y) < 0.006,
                  "point %d at (%.2f, %.2f), want (%.2f, %.2f)", i, cx[i], cy[i], want_x, want_y);
    }
    EQ_EXPECT(n < 2 || cy[1] == bottom, "the zero is not on the floor: %.2f", n > 1 ? cy[1] : 0.0);
    EXPECT_HAS(text, "At the axis floor (1e-7): 2 zero values.");
    for (int decade = -7; decade <= -1; decade++) {
        char label[32];
        snprintf(label, sizeof label, ">1e%d</text>", decade);
        EXPECT_HAS(text, label);
    }
    EXPECT_HAS(text, ">atol 0.001</text>");
    EXPECT_HAS(text, "stroke-dasharray=\"7 4\"");
    /* the tolerance line at 1e-3 */
    char ref_line[128];
    double ref_y = bottom - (-3 - lo) / (hi - lo) * (bottom - top);
    snprintf(ref_line, sizeof ref_line, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=", left, ref_y,
             right, ref_y);
    EXPECT_HAS(text, ref_line);
    /* escaping in the title, the data-name and the legend */
    EXPECT_HAS(text, "<title>a &amp; b &lt;c&gt; &quot;d&quot;</title>");
    EQ_EXPECT(strstr(text, "a & b") == NULL && strstr(text, "<c>") == NULL, "title not escaped");
    EXPECT_HAS(text, "data-name=\"x&lt;y mean\"");
    EXPECT_HAS(text, ">x&lt;y mean</text>");
    EQ_EXPECT(series_points(text, "x&lt;y mean", cx, cy, 8) == 4, "points of the escaped series");
    /* the mean is dashed with hollow markers; both share colour 0 */
    EXPECT_HAS(text, "stroke-dasharray=\"5 3\"");
    EXPECT_HAS(text, "fill=\"#ffffff\" stroke=\"#1f77b4\"");
    free(text);
}

static void test_linear_axis_and_gaps(void)
{
    static const double x[] = {1, 2, 3, 4};
    const double y[] = {0.5, NAN, 2.0, INFINITY};
    const eq_svg_series series = {"gappy", x, y, 4, 3, 0, NULL, 0};
    eq_svg_chart chart = {.title = "linear", .x_label = "layer", .y_label = "v", .series = &series, .n_series = 1};
    eq_status st = EQ_OK;
    char *text = render(&chart, &st);
    EQ_EXPECT(st == EQ_OK, "eq_svg_plot: %s", eq_error_message());
    if (text == NULL) return;
    expect_finite_text(text);
    EXPECT_HAS(text, "2 non-finite values not drawn.");
    EQ_EXPECT(strstr(text, "At the axis floor") == NULL, "a linear axis clamps nothing");
    /* x over the drawn points 1 and 3: [0.5, 3.5]; y: [0, 2] in steps of 0.5 (2 / 5 = 0.4 -> 0.5) */
    const double left = EQ_SVG_MARGIN_LEFT, right = 640 - EQ_SVG_MARGIN_RIGHT;
    const double top = EQ_SVG_MARGIN_TOP, bottom = 360 - EQ_SVG_MARGIN_BOTTOM;
    double cx[4], cy[4];
    int n = series_points(text, "gappy", cx, cy, 4);
    EQ_EXPECT(n == 2, "%d points drawn, want 2", n);
    double want_x = left + (3 - 0.5) / 3.0 * (right - left), want_y = bottom - 2.0 / 2.0 * (bottom - top);
    EQ_EXPECT(n == 2 && fabs(cx[1] - want_x) < 0.006 && fabs(cy[1] - want_y) < 0.006,
              "second point at (%.2f, %.2f), want (%.2f, %.2f)", cx[1], cy[1], want_x, want_y);
    EXPECT_HAS(text, " M"); /* the NaN breaks the line: a second move-to */
    EXPECT_HAS(text, ">1.5</text>");
    EXPECT_HAS(text, eq_svg_color(3));
    free(text);
}

/* All zeros, and values beyond the decade limit: both clamp, neither breaks the axis. */
static void test_log_edges(void)
{
    static const double x[] = {0, 1};
    static const double zeros[] = {0.0, 0.0}, wide[] = {1e-20, 0.1};
    const eq_svg_series zero_series = {"zeros", x, zeros, 2, 0, 0, NULL, 0}, wide_series = {"wide", x, wide, 2, 1, 0, NULL, 0};
    eq_svg_chart chart = {.title = "t", .x_label = "layer", .y_label = "|d|", .log_y = 1,
                          .series = &zero_series, .n_series = 1};
    eq_status st = EQ_OK;
    char *text = render(&chart, &st);
    EQ_EXPECT(st == EQ_OK, "all zeros");
    if (text != NULL) {
        expect_finite_text(text);
        EXPECT_HAS(text, "At the axis floor (1e-8): 2 zero values.");
        EXPECT_HAS(text, ">1</text>"); /* the top decade, 10^0 */
        free(text);
    }
    chart.series = &wide_series;
    text = render(&chart, &st);
    EQ_EXPECT(st == EQ_OK, "twenty decades");
    if (text != NULL) {
        expect_finite_text(text);
        /* top 10^0; at most EQ_SVG_MAX_DECADES below it */
        char floor_note[64];
        snprintf(floor_note, sizeof floor_note, "At the axis floor (1e-%d): 1 smaller value.", EQ_SVG_MAX_DECADES);
        EXPECT_HAS(text, floor_note);
        free(text);
    }
    chart.width = 200;
    text = render(&chart, &st);
    EQ_EXPECT(st == EQ_ERR_INTERNAL, "a 200-pixel chart was accepted");
    eq_error_clear();
    free(text);
}

/* A tolerance series and marked points: the tolerance is drawn grey and dotted without markers;
 * each flagged point gets one red ring at its own centre, the others none. */
static void test_tolerance_and_marks(void)
{
    static const double x[] = {0, 1, 2}, y[] = {1e-4, 1e-2, 1e-3}, tol[] = {1e-3, 2e-3, 4e-3};
    static const unsigned char flags[] = {0, 1, 0}; /* layer 1 exceeds its tolerance 2e-3 */
    const eq_svg_series series[] = {
        {"g max", x, y, 3, 0, 0, flags, 0},
        {"g tolerance", x, tol, 3, 0, 0, NULL, 1},
    };
    eq_svg_chart chart = {.title = "t", .x_label = "layer", .y_label = "|d|", .log_y = 1, .series = series,
                          .n_series = 2};
    eq_status st = EQ_OK;
    char *text = render(&chart, &st);
    EQ_EXPECT(st == EQ_OK, "eq_svg_plot: %s", eq_error_message());
    if (text == NULL) return;
    EQ_EXPECT(count_of(text, "<circle class=\"marked\"") == 1, "%d marked points, want 1",
              count_of(text, "<circle class=\"marked\""));
    double cx[4], cy[4], mx = 0, my = 0;
    int n = series_points(text, "g max", cx, cy, 4);
    const char *mark = strstr(text, "<circle class=\"marked\" cx=\"");
    EQ_EXPECT(n == 3 && mark != NULL && sscanf(mark, "<circle class=\"marked\" cx=\"%lf\" cy=\"%lf\"", &mx, &my) == 2 &&
                  mx == cx[1] && my == cy[1],
              "the ring is not on layer 1's point");
    const char *group = strstr(text, "<g class=\"series tolerance\" data-name=\"g tolerance\">");
    const char *end = group != NULL ? strstr(group, "</g>") : NULL;
    EQ_EXPECT(group != NULL && end != NULL, "no tolerance group");
    if (group != NULL && end != NULL) {
        const char *circle = strstr(group, "<circle");
        EQ_EXPECT(circle == NULL || circle > end, "the tolerance has point markers");
        const char *stroke = strstr(group, "stroke=\"" EQ_SVG_TOLERANCE_COLOR "\"");
        EQ_EXPECT(stroke != NULL && stroke < end && strstr(group, "stroke-dasharray=\"2 3\"") < end,
                  "the tolerance is not grey and dotted");
    }
    free(text);
}

int main(void)
{
    EQ_EXPECT(strcmp(eq_svg_color(EQ_SVG_PALETTE_SIZE), eq_svg_color(0)) == 0, "palette does not wrap");
    EQ_EXPECT(strcmp(eq_svg_color(-1), eq_svg_color(EQ_SVG_PALETTE_SIZE - 1)) == 0, "negative index");
    test_log_axis();
    test_linear_axis_and_gaps();
    test_log_edges();
    test_tolerance_and_marks();
    return eq_test_finish("plot_svg_test");
}
