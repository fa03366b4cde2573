/* Significant-digit formatting for the report writers (number_format.h). */
#include "reports/number_format.h"

#include <math.h>
#include <stdio.h>

const char *eq_format_sig(double v, int digits, char *buf, size_t len)
{
    if (digits < 1) digits = 1;
    if (digits > 17) digits = 17;
    if (isnan(v)) snprintf(buf, len, "NaN");
    else if (isinf(v)) snprintf(buf, len, v > 0 ? "Inf" : "-Inf");
    else if (v == 0.0) snprintf(buf, len, "0");
    else if (fabs(v) < 1e-4 || fabs(v) >= 1e6) snprintf(buf, len, "%.*e", digits - 1, v);
    else snprintf(buf, len, "%.*g", digits, v);
    return buf;
}
