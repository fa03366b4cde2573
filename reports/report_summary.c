/* The summary line that ends every report, and the orderings the writers share. */
#include <stdio.h>
#include <stdlib.h>

#include "harness/run_cell.h"
#include "reports/report.h"
#include "reports/report_steps.h"

const char *eq_report_run_name(const eq_run_meta *meta, char *buf, size_t len)
{
    return eq_cell_title(meta, buf, len);
}

int eq_report_worse_first(const eq_tensor_result *a, const eq_tensor_result *b)
{
    /* A non-finite result comes first whatever its ratio: the ratio only covers finite pairs. */
    int a_nonfinite = a->observed == EQ_OBS_NONFINITE, b_nonfinite = b->observed == EQ_OBS_NONFINITE;
    if (a_nonfinite != b_nonfinite) return a_nonfinite ? -1 : 1;
    double ra = a->m.max_tol_ratio, rb = b->m.max_tol_ratio;
    return (ra < rb) - (ra > rb);
}

int eq_report_unexpected(const eq_comparison *cmps, int n)
{
    int total = 0;
    for (int i = 0; i < n; i++) total += cmps[i].n_unexpected;
    return total;
}

const char *eq_report_summary(const eq_comparison *cmps, int n, char *buf, size_t len)
{
    int tensors = 0;
    const eq_comparison *worst_cmp = NULL, *first_cmp = NULL;
    const eq_tensor_result *worst = NULL, *first = NULL;
    for (int i = 0; i < n; i++) {
        tensors += cmps[i].count;
        if (first == NULL && (first = eq_report_first_unexpected(&cmps[i])) != NULL) first_cmp = &cmps[i];
        for (int k = 0; k < cmps[i].count; k++) {
            const eq_tensor_result *r = &cmps[i].results[k];
            if (r->as_expected) continue;
            if (worst == NULL || eq_report_worse_first(r, worst) < 0) {
                worst = r;
                worst_cmp = &cmps[i];
            }
        }
    }
    /* the assembly findings apart: "all as expected" must not be all a run with one says */
    int findings = 0;
    const eq_comparison *finding_cmp = NULL;
    for (int i = 0; i < n; i++) {
        findings += cmps[i].n_findings;
        if (finding_cmp == NULL && cmps[i].n_findings > 0) finding_cmp = &cmps[i];
    }
    int unexpected = eq_report_unexpected(cmps, n) - findings; /* tensors, and a training curve */
    int used = snprintf(buf, len, "equiv: %d comparison%s, %d tensor%s, ", n, n == 1 ? "" : "s", tensors,
                        tensors == 1 ? "" : "s");
    if (used < 0 || (size_t)used >= len) return buf;
    char curve[4 * EQ_NAME_MAX], run[3 * EQ_NAME_MAX], first_run[3 * EQ_NAME_MAX];
    if (unexpected > 0 && worst == NULL && eq_report_steps_unexpected(cmps, n, curve, sizeof curve) != NULL) {
        used += snprintf(buf + used, len - (size_t)used, "%d NOT as expected (%s)", unexpected, curve);
    } else if (unexpected <= 0 || worst == NULL) {
        used += snprintf(buf + used, len - (size_t)used, "all as expected");
    } else {
        used += snprintf(buf + used, len - (size_t)used, "%d NOT as expected (first: %s %s; worst: %s %s)", unexpected,
                         eq_report_run_name(&first_cmp->test_meta, first_run, sizeof first_run), first->path,
                         eq_report_run_name(&worst_cmp->test_meta, run, sizeof run), worst->path);
    }
    if (findings > 0 && used >= 0 && (size_t)used < len)
        snprintf(buf + used, len - (size_t)used, ", %d assembly finding%s NOT as expected (first: %s, %s)", findings,
                 findings == 1 ? "" : "s", eq_report_run_name(&finding_cmp->test_meta, run, sizeof run),
                 finding_cmp->findings[0]);
    return buf;
}

const eq_tensor_result *eq_report_first_unexpected(const eq_comparison *c)
{
    for (int i = 0; i < c->count; i++)
        if (!c->results[i].as_expected) return &c->results[i];
    return NULL;
}

static int worst_first(const void *a, const void *b)
{
    const eq_tensor_result *ra = *(const eq_tensor_result *const *)a, *rb = *(const eq_tensor_result *const *)b;
    int order = eq_report_worse_first(ra, rb);
    return order != 0 ? order : (ra > rb) - (ra < rb); /* then capture order */
}

eq_status eq_report_unexpected_worst_first(const eq_comparison *c, const eq_tensor_result ***sorted, int *n)
{
    *n = 0;
    *sorted = malloc((size_t)(c->count > 0 ? c->count : 1) * sizeof **sorted);
    if (*sorted == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "cannot sort %d results", c->count);
    for (int i = 0; i < c->count; i++)
        if (!c->results[i].as_expected) (*sorted)[(*n)++] = &c->results[i];
    qsort(*sorted, (size_t)*n, sizeof **sorted, worst_first);
    return EQ_OK;
}
