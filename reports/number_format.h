/* Numbers in the reports, in significant digits: a difference of 6.1e-06 and one of 0.031 keep
 * the same number of meaningful digits, where fixed decimals print 0.000006 and 0.031250. */
#ifndef EQUIV_REPORTS_NUMBER_FORMAT_H
#define EQUIV_REPORTS_NUMBER_FORMAT_H

#include <stddef.h>

/* v with `digits` significant digits (1..17): "0" for zero, "0.0313" for 0.03125 at 3, "6.1e-06"
 * below 1e-4 and "1.23e+06" from 1e6 on (printf's %g, whose exponent form starts at 1e-5; this
 * one at 1e-4 so a column of small gradients reads alike), "NaN", "Inf", "-Inf". */
const char *eq_format_sig(double v, int digits, char *buf, size_t len);

#endif
