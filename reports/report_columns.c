/* The per-layer tables' sections and columns (report_columns.h). Seed 002 section 2.2's columns
 * after the verdict and what was observed; the HTML tables leave out the median, the 1e-4 share
 * and the worst relative error (sections 3-4 print without them); every metric is in the JSON. */
#include "reports/report_columns.h"

#include <stdio.h>

#include "reports/number_format.h"
#include "reports/report.h"

const char *eq_report_format_layer(int layer, char *buf, size_t len)
{
    if (layer < 0) snprintf(buf, len, "-");
    else snprintf(buf, len, "%d", layer);
    return buf;
}

static const char *verdict(const eq_tensor_result *r, eq_expect e, char *buf, size_t len)
{
    snprintf(buf, len, "%s", eq_report_verdict_word(r));
    return buf;
}

static const char *layer(const eq_tensor_result *r, eq_expect e, char *buf, size_t len)
{
    return eq_report_format_layer(r->layer, buf, len);
}

static const char *tensor(const eq_tensor_result *r, eq_expect e, char *buf, size_t len)
{
    snprintf(buf, len, "%s", r->name);
    return buf;
}

static const char *observed(const eq_tensor_result *r, eq_expect e, char *buf, size_t len)
{
    return eq_report_observed_text(r, e, buf, len);
}

#define SIG(fn, field, digits)                                                              \
    static const char *fn(const eq_tensor_result *r, eq_expect e, char *buf, size_t len)    \
    {                                                                                       \
        return eq_format_sig(r->m.field, digits, buf, len);                                 \
    }
#define SHARE(fn, k)                                                                        \
    static const char *fn(const eq_tensor_result *r, eq_expect e, char *buf, size_t len)    \
    {                                                                                       \
        return eq_report_format_share(r->m.frac_above[k], buf, len);                        \
    }
SIG(max_abs, max_abs, 3)
SIG(mean_abs, mean_abs, 3)
SIG(median_abs, median_abs, 3)
SHARE(share_1e4, 0)
SHARE(share_1e3, 1)
SHARE(share_1e2, 3)
SIG(ulp_at_max, ulp_at_max, 3)
SIG(max_ulp, max_ulp, 3)
SIG(worst_rel, worst_rel, 2)

/* mean(dist/ref) where some element's reference is at least the tensor's rms, else "-". */
static const char *mean_ratio(const eq_tensor_result *r, eq_expect e, char *buf, size_t len)
{
    if (r->m.n_mean_ratio == 0) snprintf(buf, len, "-");
    else eq_format_sig(r->m.mean_ratio, 4, buf, len);
    return buf;
}

const eq_report_column eq_report_columns[] = {
    {"verdict", EQ_COLUMN_VERDICT, EQ_COLUMN_BOTH, NULL, verdict},
    {"Layer", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, layer},
    {"Tensor", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, tensor},
    {"observed", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, observed},
    {"max |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "max_abs", max_abs},
    {"mean |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "mean_abs", mean_abs},
    {"median |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_MARKDOWN, "median_abs", median_abs},
    {"%>1e-4", EQ_COLUMN_NUMBER, EQ_COLUMN_MARKDOWN, "frac_above_1e-4", share_1e4},
    {"%>1e-3", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "frac_above_1e-3", share_1e3},
    {"%>1e-2", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "frac_above_1e-2", share_1e2},
    {"ULP@max", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "ulp_at_max", ulp_at_max},
    {"max ULP", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "max_ulp", max_ulp},
    {"mean(dist/ref)", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "mean_ratio", mean_ratio},
    {"worst rel", EQ_COLUMN_NUMBER, EQ_COLUMN_MARKDOWN, "worst_rel", worst_rel},
};
const int eq_report_n_columns = (int)(sizeof eq_report_columns / sizeof eq_report_columns[0]);

const eq_report_section eq_report_sections[] = {
    {EQ_ROLE_ACTIVATION, "Activations"},
    {EQ_ROLE_GRAD, "Gradients"},
    {EQ_ROLE_LOSS, "Losses"},
};
const int eq_report_n_sections = (int)(sizeof eq_report_sections / sizeof eq_report_sections[0]);
