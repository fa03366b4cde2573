/* The HTML report's plots of one comparison: max and mean |d| against layer, log scale, one chart
 * for its activations and one for its gradients where it has any (reports/report.h says what each
 * chart shows: the tensors drawn, the tolerance, the rings on results not as expected). */
#ifndef EQUIV_REPORTS_REPORT_PLOTS_H
#define EQUIV_REPORTS_REPORT_PLOTS_H

#include <stdio.h>

#include "harness/compare.h"

eq_status eq_report_plots_html(FILE *out, const eq_comparison *c);

#endif
