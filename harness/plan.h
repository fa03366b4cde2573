/* The plan of a request, the same for run, matrix and golden: which layouts a case is checked
 * under, and the tolerances each dtype's comparison (and its gradients') is judged by. */
#ifndef EQUIV_HARNESS_PLAN_H
#define EQUIV_HARNESS_PLAN_H

#include "harness/case_file.h"
#include "harness/base/status.h"
#include "harness/tolerance.h"

/* The layouts to check, into out (EQ_CASE_MAX_LAYOUTS of them at most); returns how many. `asked`
 * is --dp and --tp (0: not given): when either is given, that layout alone (the other 1); else
 * every layout the case lists but the reference, or the reference against itself (a determinism
 * check) when that is all it lists. */
int eq_plan_layouts(const eq_case *kase, eq_layout asked, eq_layout *out);

/* The entry `entry` of the tolerance table (read from table_path) into out; EQ_ERR_INPUT "WHO
 * names tolerance entry 'E', which TABLE_PATH lacks" when it has none. */
eq_status eq_plan_tolerance(const eq_tolerance_table *table, const char *table_path, const char *entry,
                            const char *who, eq_tolerance *out);

/* The case's tolerances for dtype: its entry, and for gradients its dtype.grad entry or, without
 * one, the same. EQ_ERR_USAGE when the case names no entry for dtype (a --dtype it does not list),
 * EQ_ERR_INPUT when the table lacks an entry the case names. */
eq_status eq_plan_case_tolerances(const eq_tolerance_table *table, const char *table_path, const eq_case *kase,
                                  eq_dtype dtype, eq_tolerance *tol, eq_tolerance *grad_tol);

#endif
