/* A small SVG line-chart writer for the reports: named series of (x, y) points against integer
 * x (layers), on a linear or log y axis, with a legend and labelled horizontal reference lines
 * (a tolerance). The output is one <svg xmlns=...> element without an XML prolog, so the same text
 * is a standalone .svg file and embeds inline in HTML. No fonts, scripts or styles from outside.
 *
 * Layout, in pixels (what a test needs to recompute a point's place):
 *   the plot area spans x in [EQ_SVG_MARGIN_LEFT, width - EQ_SVG_MARGIN_RIGHT] and y in
 *   [EQ_SVG_MARGIN_TOP, height - EQ_SVG_MARGIN_BOTTOM]; the legend sits right of it.
 *   x: the domain is [floor(min x) - 0.5, ceil(max x) + 0.5] over every drawn point, mapped
 *      linearly onto the plot area's width (left to right).
 *   log y: the domain is [10^lo, 10^hi] in whole decades with hi = floor(log10(max)) + 1 and
 *      lo = floor(log10(min positive)), one decade lower when some value is zero or negative
 *      (those are clamped onto the floor 10^lo, and a note under the chart says how many), and
 *      at most EQ_SVG_MAX_DECADES decades (smaller values clamp to the floor too). log10(y) maps
 *      linearly onto the plot area's height (bottom to top). No positive value: [1e-8, 1].
 *   linear y: [min(0, min), max] widened to multiples of a 1/2/5 x 10^k step (about 5 steps).
 *   Reference lines count towards max and min positive; non-finite values are not drawn (noted).
 * Coordinates are written with two decimals. */
#ifndef EQUIV_REPORTS_PLOT_SVG_H
#define EQUIV_REPORTS_PLOT_SVG_H

#include <stdio.h>

#include "harness/base/status.h"

#define EQ_SVG_MARGIN_LEFT 72
#define EQ_SVG_MARGIN_RIGHT 176
#define EQ_SVG_MARGIN_TOP 36
#define EQ_SVG_MARGIN_BOTTOM 64
#define EQ_SVG_DEFAULT_WIDTH 640
#define EQ_SVG_DEFAULT_HEIGHT 360
/* Divergences of interest span 1e-8..1e-1; twelve decades keep fp32 and bf16 on one axis
 * without squeezing every gridline together. */
#define EQ_SVG_MAX_DECADES 12
#define EQ_SVG_PALETTE_SIZE 8
#define EQ_SVG_TOLERANCE_COLOR "#888888"
#define EQ_SVG_MARK_COLOR "#d00000"

typedef struct {
    const char *name;     /* legend text, e.g. "out max" */
    const double *x, *y;  /* `count` points, drawn in the order given */
    int count;
    int color;            /* index into the palette (taken modulo EQ_SVG_PALETTE_SIZE) */
    int dashed;           /* dashed line and hollow markers: a mean drawn beside its max */
    const unsigned char *marked; /* NULL, or `count` flags: a red ring (class "marked") around each
                                    flagged point, e.g. a result not as expected */
    int tolerance;        /* a grey dotted line without markers (class "tolerance"), e.g. a
                             tolerance that varies by point; `color` is ignored */
} eq_svg_series;

typedef struct {
    double y;             /* where: e.g. the tolerance atol */
    const char *label;    /* written above the line's right end, e.g. "atol 0.001" */
} eq_svg_refline;

typedef struct {
    const char *title, *x_label, *y_label;
    int width, height;    /* pixels; 0 takes the defaults */
    int log_y;            /* log-scale y axis with decade ticks and gridlines */
    const eq_svg_series *series;
    int n_series;
    const eq_svg_refline *refs; /* dashed, labelled horizontal lines */
    int n_refs;
} eq_svg_chart;

/* Writes the chart as one <svg> element. Each series is a <g class="series" data-name="NAME">
 * (class "series tolerance" for a tolerance series) holding its line and one <circle> per drawn
 * point (none for a tolerance series), then a <circle class="marked"> per flagged point. EQ_ERR_INTERNAL when the size leaves no
 * plot area, EQ_ERR_IO when the stream fails. */
eq_status eq_svg_plot(FILE *out, const eq_svg_chart *chart);

/* The palette colour at `index` (modulo the palette size), e.g. "#1f77b4". */
const char *eq_svg_color(int index);

/* Writes text with &, <, >, " and ' escaped, for element text and attribute values in SVG and
 * HTML alike. NULL writes nothing. */
void eq_svg_escape(FILE *out, const char *text);

#endif
