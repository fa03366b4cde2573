/* A run's dp x tp layout, parsed and named (reductions/layout.h). */
#include "reductions/layout.h"

#include <stdio.h>

eq_status eq_layout_parse(const char *text, eq_layout *out)
{
    int dp = 0, tp = 0, used = 0;
    if (sscanf(text, "dp%d-tp%d%n", &dp, &tp, &used) != 2 || text[used] != '\0' || dp < 1 || tp < 1 ||
        dp > 1024 || tp > 1024)
        return EQ_FAIL(EQ_ERR_USAGE, "bad layout '%s' (want dpD-tpT, e.g. dp1-tp4)", text);
    out->dp = dp;
    out->tp = tp;
    return EQ_OK;
}

const char *eq_layout_name(eq_layout l, char *buf, size_t len)
{
    snprintf(buf, len, "dp%d-tp%d", l.dp, l.tp);
    return buf;
}
