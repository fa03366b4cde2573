/* The reports' tables and columns and the JSON metrics (report_columns.h). The per-layer tables
 * have seed 002 section 2.2's columns after the verdict and what was observed; the HTML tables
 * leave out the median, the 1e-4 share and the worst relative error (sections 3-4 print without
 * them); every metric is in the JSON. */
#include "reports/report_columns.h"

#include <stddef.h>
#include <stdio.h>

#include "harness/rounding_bound.h"
#include "harness/truth.h"

#include "reports/number_format.h"
#include "reports/report.h"
#include "reports/report_model.h"

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
    {"verdict", EQ_COLUMN_VERDICT, EQ_COLUMN_BOTH, NULL, verdict, 0, NULL},
    {"Layer", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, layer, 0, NULL},
    {"Tensor", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, tensor, 0, NULL},
    {"observed", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, observed, 0, NULL},
    {"max |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "max_abs", max_abs, 0, NULL},
    {"mean |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "mean_abs", mean_abs, 0, NULL},
    {"median |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_MARKDOWN, "median_abs", median_abs, 0, NULL},
    {"%>1e-4", EQ_COLUMN_NUMBER, EQ_COLUMN_MARKDOWN, "frac_above_1e-4", share_1e4, 0, NULL},
    {"%>1e-3", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "frac_above_1e-3", share_1e3, 0, NULL},
    {"%>1e-2", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "frac_above_1e-2", share_1e2, 0, NULL},
    {"ULP@max", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "ulp_at_max", ulp_at_max, 0, NULL},
    {"max ULP", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "max_ulp", max_ulp, 0, NULL},
    {"mean(dist/ref)", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, "mean_ratio", mean_ratio, 0, NULL},
    {"worst rel", EQ_COLUMN_NUMBER, EQ_COLUMN_MARKDOWN, "worst_rel", worst_rel, 0, NULL},
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

/* ---- the tables: the per-layer ones, the rounding-error theory and the fp64 truth ---- */

static int of_role(const eq_tensor_result *r, eq_role role) { return r->role == role; }
static int not_as_expected(const eq_tensor_result *r) { return !r->as_expected; }
static int theory_applies(const eq_tensor_result *r, eq_role role) { return r->theory.applies; }
static int above_det_bound(const eq_tensor_result *r) { return r->theory.det_ratio > 1.0; }
static int truth_applies(const eq_tensor_result *r, eq_role role) { return r->truth.applies; }

#define CELL(fn, expr)                                                                   \
    static const char *fn(const eq_tensor_result *r, eq_expect e, char *buf, size_t len) \
    {                                                                                    \
        return expr;                                                                     \
    }
#define SIG3(fn, value) CELL(fn, eq_format_sig(value, 3, buf, len))
CELL(theory_reading, (snprintf(buf, len, "%s", eq_theory_reading(&r->theory, r->m.max_abs)), buf))
CELL(terms, (snprintf(buf, len, "%lld", (long long)r->theory.terms), buf))
CELL(split, (snprintf(buf, len, "%d -> %d", r->theory.ref_partitions, r->theory.test_partitions), buf))
SIG3(det_ratio, r->theory.det_ratio)
SIG3(prob_ratio, r->theory.prob_ratio)
SIG3(det_bound, r->theory.det_bound_max)
SIG3(prob_bound, r->theory.prob_bound_max)
SIG3(lambda, r->theory.prob_lambda)
CELL(truth_reading, eq_truth_reading(&r->truth, buf, len))
SIG3(truth_ref_max, r->truth.ref_max)
SIG3(truth_test_max, r->truth.test_max)
SIG3(truth_ref_rel, r->truth.ref_rel)
SIG3(truth_test_rel, r->truth.test_rel)

/* The last field is the Markdown alignment cell's width where it is not the header's plus two, as
 * these tables have always been printed. */
static const eq_report_column theory_columns[] = {
    {"reading", EQ_COLUMN_VERDICT, EQ_COLUMN_BOTH, NULL, theory_reading, 0, NULL},
    {"Layer", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, layer, 0, NULL},
    {"Tensor", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, tensor, 0, NULL},
    {"K", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, terms, 0, NULL},
    {"split ref -> test", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, split, 18, NULL},
    {"max |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, max_abs, 0, NULL},
    {"max |d|/det", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, det_ratio, 14, NULL},
    {"max |d|/99.9%", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, prob_ratio, 16, NULL},
    {"largest det bound", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, det_bound, 0, NULL},
    {"largest 99.9% bound", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, prob_bound, 0, NULL},
    {"lambda", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, lambda, 0, NULL},
};

static const eq_report_column truth_columns[] = {
    {"reading", EQ_COLUMN_VERDICT, EQ_COLUMN_BOTH, NULL, truth_reading, 0, NULL},
    {"Layer", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, layer, 0, NULL},
    {"Tensor", EQ_COLUMN_TEXT, EQ_COLUMN_BOTH, NULL, tensor, 0, NULL},
    {"ref max |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, truth_ref_max, 15, NULL},
    {"test max |d|", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, truth_test_max, 16, NULL},
    {"ref rel", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, truth_ref_rel, 0, NULL},
    {"test rel", EQ_COLUMN_NUMBER, EQ_COLUMN_BOTH, NULL, truth_test_rel, 0, NULL},
};

static void theory_intro(const eq_renderer *rd, const eq_comparison *c, const eq_tensor_result *first)
{
    rd->para_begin(rd);
    eq_render_textf(rd,
                    "The GEMMs whose operands are bit-identical in both runs, against the bound on |d| that rounding "
                    "allows each element for the split of K: deterministic (Higham's gamma_n: no summation order "
                    "exceeds it) and the 99.9%% bound (Higham and Mary's probabilistic bound, lambda chosen so that it "
                    "fails at an element with probability at most %g under their model of independent rounding "
                    "errors). ",
                    first->theory.prob_failure);
    rd->code(rd, "max |d|/det");
    rd->text(rd, " is the largest of the per-element ratios |d_i| / det bound_i, not max |d| over the largest bound; "
                 "above 1 it is not rounding.");
    rd->para_end(rd);
}

static void truth_intro(const eq_renderer *rd, const eq_comparison *c, const eq_tensor_result *first)
{
    rd->para_begin(rd);
    rd->text(rd, "Each run against the fp64 dp1-tp1 run of the same step: is the layout less accurate than the "
                 "reference, or only rounded differently?");
    rd->para_end(rd);
}

#define N_OF(a) ((int)(sizeof a / sizeof a[0]))
/* The per-layer tables' column count, eq_report_n_columns, is no constant here:
 * eq_report_table_columns reads it. */
#define LAYER_TABLE(role, title) {title, role, of_role, not_as_expected, 1, NULL, eq_report_columns, 0, NULL}
const eq_report_table eq_report_tables[EQ_TABLE_COUNT] = {
    [EQ_TABLE_ACTIVATIONS] = LAYER_TABLE(EQ_ROLE_ACTIVATION, "Activations"),
    [EQ_TABLE_GRADIENTS] = LAYER_TABLE(EQ_ROLE_GRAD, "Gradients"),
    [EQ_TABLE_LOSSES] = LAYER_TABLE(EQ_ROLE_LOSS, "Losses"),
    [EQ_TABLE_THEORY] = {"Rounding-error theory", 0, theory_applies, above_det_bound, 0, theory_intro, theory_columns,
     N_OF(theory_columns), NULL},
    [EQ_TABLE_TRUTH] = {"Against the fp64 truth", 0, truth_applies, NULL, 0, truth_intro, truth_columns, N_OF(truth_columns), NULL},
};
const int eq_report_n_tables = N_OF(eq_report_tables);

int eq_report_table_columns(const eq_report_table *t)
{
    return t->columns == eq_report_columns ? eq_report_n_columns : t->n_columns;
}
