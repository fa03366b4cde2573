/* The per-layer tables' sections and columns (report_columns.h). Seed 002 section 2.2's columns
 * after the verdict and what was observed; the HTML tables leave out the median, the 1e-4 share
 * and the worst relative error (sections 3-4 print without them); every metric is in the JSON. */
#include "reports/report_columns.h"

#include <stddef.h>
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
    {"verdict", EQ_COLUMN_VERDICT, EQ_COLUMN_BOTH, NULL, verdict, 0},
    {"Layer", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, layer, 0},
    {"Tensor", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, tensor, 0},
    {"observed", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, observed, 0},
    {"max |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "max_abs", max_abs, 0},
    {"mean |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "mean_abs", mean_abs, 0},
    {"median |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_MARKDOWN, "median_abs", median_abs, 0},
    {"%>1e-4", EQ_COLUMN_NUMBER, EQ_COLUMN_MARKDOWN, "frac_above_1e-4", share_1e4, 0},
    {"%>1e-3", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "frac_above_1e-3", share_1e3, 0},
    {"%>1e-2", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "frac_above_1e-2", share_1e2, 0},
    {"ULP@max", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "ulp_at_max", ulp_at_max, 0},
    {"max ULP", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "max_ulp", max_ulp, 0},
    {"mean(dist/ref)", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "mean_ratio", mean_ratio, 0},
    {"worst rel", EQ_COLUMN_NUMBER, EQ_COLUMN_MARKDOWN, "worst_rel", worst_rel, 0},
};
const int eq_report_n_columns = (int)(sizeof eq_report_columns / sizeof eq_report_columns[0]);

#define COUNT(key, field) {key, EQ_METRIC_COUNT, offsetof(eq_metrics, field)}
#define REAL(key, field) {key, EQ_METRIC_REAL, offsetof(eq_metrics, field)}
const eq_report_metric eq_report_metrics[] = {
    COUNT("count", count),
    COUNT("n_finite", n_finite),
    COUNT("nan_ref", nan_ref),
    COUNT("inf_ref", inf_ref),
    COUNT("nan_test", nan_test),
    COUNT("inf_test", inf_test),
    COUNT("nonfinite_mismatch", nonfinite_mismatch),
    COUNT("n_differ", n_differ),
    REAL("max_abs", max_abs),
    REAL("mean_abs", mean_abs),
    REAL("median_abs", median_abs),
    COUNT("argmax", argmax),
    REAL("frac_above_1e-4", frac_above[0]), /* eq_thresholds' order */
    REAL("frac_above_1e-3", frac_above[1]),
    REAL("frac_above_5e-3", frac_above[2]),
    REAL("frac_above_1e-2", frac_above[3]),
    REAL("max_ulp", max_ulp),
    REAL("ulp_at_max", ulp_at_max),
    REAL("rel_fro", rel_fro),
    REAL("cosine", cosine),
    REAL("ls_scale", ls_scale),
    REAL("mean_ratio", mean_ratio),
    REAL("worst_rel", worst_rel),
    REAL("ref_absmax", ref_absmax),
    REAL("ref_mean", ref_mean),
    REAL("ref_std", ref_std),
    COUNT("n_outside", n_outside),
    REAL("max_tol_ratio", max_tol_ratio),
};
const int eq_report_n_metrics = (int)(sizeof eq_report_metrics / sizeof eq_report_metrics[0]);
_Static_assert(EQ_N_THRESHOLDS == 4, "eq_report_metrics must name every threshold");
