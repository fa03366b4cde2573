/* A comparison's verdict from its evidence (verdict.h). */
#include "harness/verdict.h"

#include <stdio.h>
#include <string.h>

#include "harness/structure.h"
#include "harness/train_curve.h"
#include "harness/truth.h"

/* What the metrics and the rounding-error bound say the difference is, into observed and diagnosis. */
static void observe(eq_tensor_result *res)
{
    res->observed = eq_observe(&res->m);
    eq_diagnose(&res->m, res->diagnosis, sizeof res->diagnosis);
    if (res->theory.applies && res->theory.det_ratio > 1.0 && res->observed == EQ_OBS_WITHIN) {
        res->observed = EQ_OBS_OUTSIDE;
        snprintf(res->diagnosis, sizeof res->diagnosis,
                 "above the rounding-error bound (x%.3g of it): no summation order explains it", res->theory.det_ratio);
        return;
    }
    /* A user's run: structure, then the truth (a tolerance-table OUTSIDE gets the reason appended) */
    char why[sizeof res->diagnosis];
    why[0] = '\0';
    if (eq_structure_flagged(&res->structure)) eq_structure_reading(&res->structure, why, sizeof why);
    else if (eq_truth_flagged(&res->truth))
        snprintf(why, sizeof why, "x%.3g less accurate than the reference against the %s truth (rounding allows x%g)",
                 eq_truth_ratio(&res->truth),
                 eq_dtype_name(res->truth.truth_dtype), EQ_TRUTH_RATIO);
    if (why[0] == '\0') return;
    if (res->observed == EQ_OBS_WITHIN) {
        res->observed = EQ_OBS_OUTSIDE;
        snprintf(res->diagnosis, sizeof res->diagnosis, "%s", why);
    } else if (res->observed == EQ_OBS_OUTSIDE && strstr(res->diagnosis, "uniform scale") == NULL) {
        size_t used = strlen(res->diagnosis);
        snprintf(res->diagnosis + used, sizeof res->diagnosis - used, "; %s", why);
    }
}

/* Is the observed difference the one expected, of the size a differs states? (observe first) */
static int met(eq_tensor_result *res)
{
    if (!eq_expectation_met(res->expect, res->observed)) return 0;
    /* NaN in both runs is no sign of the bug a must_fail plants: that must show in the finite rest */
    if (res->expect == EQ_EXPECT_MUST_FAIL && eq_nonfinite_in_both(&res->m) && res->m.n_outside == 0) return 0;
    if (res->expect != EQ_EXPECT_DIFFERS || eq_expect_size_met(&res->expect_size, res->m.worst_rel, res->m.ls_scale))
        return 1;
    const eq_expect_size *size = &res->expect_size;
    size_t used = strlen(res->diagnosis);
    snprintf(res->diagnosis + used, sizeof res->diagnosis - used, "; %s %.3g, expected differs %s %.3g..%.3g",
             eq_size_metric_name(size->metric), size->metric == EQ_SIZE_REL ? res->m.worst_rel : res->m.ls_scale,
             eq_size_metric_name(size->metric), size->lo, size->hi);
    return 0;
}

/* The finding's tensor when it is one that should be replicated and is not ("test run: PATH (role)
 * should be replicated over ...", harness/run_load.c), else NULL. */
static eq_tensor_result *replica_finding(eq_comparison *cmp, const char *finding)
{
    const char *p = strncmp(finding, "test run: ", 10) == 0 ? finding + 10
                    : strncmp(finding, "reference: ", 11) == 0 ? finding + 11 : NULL;
    const char *end = p != NULL ? strstr(p, ") should be replicated over ") : NULL;
    const char *open = end != NULL ? end : NULL;
    while (open != NULL && open > p && *open != '(') open--;
    if (open == NULL || open - p < 2 || open[-1] != ' ') return NULL;
    size_t len = (size_t)(open - 1 - p);
    for (int i = 0; i < cmp->count; i++)
        if (strlen(cmp->results[i].path) == len && strncmp(cmp->results[i].path, p, len) == 0) return &cmp->results[i];
    return NULL;
}

void eq_judge(eq_comparison *cmp)
{
    cmp->n_unexpected = cmp->n_findings;
    for (int i = 0; i < cmp->count; i++) {
        eq_tensor_result *res = &cmp->results[i];
        observe(res);
        res->as_expected = met(res);
        cmp->n_unexpected += !res->as_expected;
    }
    /* A tensor whose ranks disagree where they should hold one copy is not as expected itself, so
     * "where it starts" can name it in capture order; the finding already counted it. */
    for (int f = 0; f < cmp->n_findings; f++) {
        eq_tensor_result *res = replica_finding(cmp, cmp->findings[f]);
        if (res == NULL || !res->as_expected) continue;
        res->as_expected = 0;
        snprintf(res->diagnosis, sizeof res->diagnosis, "its ranks differ where they should hold one copy (the "
                 "assembly finding); the copy compared is %s", eq_observed_name(res->observed));
    }
    if (cmp->steps != NULL) cmp->n_unexpected += eq_steps_curve_judge(cmp->steps); /* --steps N: the curve */
}
