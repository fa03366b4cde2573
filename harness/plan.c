/* The plan of a request (harness/plan.h). */
#include "harness/plan.h"

#include <stdio.h>

int eq_plan_layouts(const eq_case *kase, eq_layout asked, eq_layout *out)
{
    if (asked.dp || asked.tp) {
        out[0] = (eq_layout){asked.dp ? asked.dp : 1, asked.tp ? asked.tp : 1};
        return 1;
    }
    int n = 0;
    for (int i = 0; i < kase->n_layouts; i++)
        if (kase->layouts[i].dp != 1 || kase->layouts[i].tp != 1) out[n++] = kase->layouts[i];
    if (n == 0) out[n++] = (eq_layout){1, 1};
    return n;
}

eq_status eq_plan_tolerance(const eq_tolerance_table *table, const char *table_path, const char *entry,
                            const char *who, eq_tolerance *out)
{
    const eq_tolerance *t = eq_tolerance_find(table, entry);
    if (t == NULL) return EQ_FAIL(EQ_ERR_INPUT, "%s names tolerance entry '%s', which %s lacks", who, entry, table_path);
    *out = *t;
    return EQ_OK;
}

eq_status eq_plan_case_tolerances(const eq_tolerance_table *table, const char *table_path, const eq_case *kase,
                                  eq_dtype dtype, eq_tolerance *tol, eq_tolerance *grad_tol)
{
    char who[1100];
    if (kase->tolerance[dtype][0] == '\0')
        return EQ_FAIL(EQ_ERR_USAGE, "case %s has no tolerance entry for %s (it runs: see equiv --list)", kase->name,
                       eq_dtype_name(dtype));
    snprintf(who, sizeof who, "case file %s", kase->path);
    const char *grad_entry = kase->grad_tolerance[dtype][0] ? kase->grad_tolerance[dtype] : kase->tolerance[dtype];
    eq_status st = eq_plan_tolerance(table, table_path, kase->tolerance[dtype], who, tol);
    if (st == EQ_OK) st = eq_plan_tolerance(table, table_path, grad_entry, who, grad_tol);
    return st;
}
