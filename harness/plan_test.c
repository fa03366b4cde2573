/* The plan of a request (harness/plan.h): layouts and tolerances, for run and matrix alike. The
 * wanted values are the rules README and equiv --help state: without --dp or --tp every layout the
 * case lists but dp1-tp1 (dp1-tp1 alone: itself); a gradient entry of its own or the dtype's. */
#include <stdio.h>
#include <string.h>

#include "harness/plan.h"
#include "harness/base/testing.h"

static eq_case a_case(int n, const eq_layout *layouts)
{
    eq_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "toy");
    snprintf(c.path, sizeof c.path, "cases/toy.ini");
    memcpy(c.layouts, layouts, (size_t)n * sizeof *layouts);
    c.n_layouts = n;
    return c;
}

static int same(eq_layout a, eq_layout b) { return a.dp == b.dp && a.tp == b.tp; }

static void test_layouts(void)
{
    eq_layout out[EQ_CASE_MAX_LAYOUTS];
    const eq_layout three[] = {{1, 1}, {1, 2}, {2, 1}};
    eq_case c = a_case(3, three);
    int n = eq_plan_layouts(&c, (eq_layout){0, 0}, out);
    EQ_EXPECT(n == 2 && same(out[0], three[1]) && same(out[1], three[2]), "case's layouts: %d, dp%d-tp%d first", n,
              out[0].dp, out[0].tp);
    const eq_layout ref_only[] = {{1, 1}};
    c = a_case(1, ref_only);
    n = eq_plan_layouts(&c, (eq_layout){0, 0}, out);
    EQ_EXPECT(n == 1 && same(out[0], (eq_layout){1, 1}), "dp1-tp1 alone: %d layouts", n);
    c = a_case(3, three);
    n = eq_plan_layouts(&c, (eq_layout){0, 4}, out); /* --tp 4 only: dp 1 */
    EQ_EXPECT(n == 1 && same(out[0], (eq_layout){1, 4}), "--tp 4: dp%d-tp%d", out[0].dp, out[0].tp);
    n = eq_plan_layouts(&c, (eq_layout){2, 0}, out);
    EQ_EXPECT(n == 1 && same(out[0], (eq_layout){2, 1}), "--dp 2: dp%d-tp%d", out[0].dp, out[0].tp);
}

static void test_tolerances(void)
{
    eq_tolerance_table table;
    memset(&table, 0, sizeof table);
    table.count = 2;
    snprintf(table.entries[0].name, EQ_TOL_NAME_MAX, "loose");
    table.entries[0].atol = 0.5;
    snprintf(table.entries[1].name, EQ_TOL_NAME_MAX, "grads");
    table.entries[1].atol = 0.25;
    const eq_layout ref_only[] = {{1, 1}};
    eq_case c = a_case(1, ref_only);
    snprintf(c.tolerance[EQ_BF16], EQ_CASE_KEY_MAX, "loose");
    snprintf(c.tolerance[EQ_FP32], EQ_CASE_KEY_MAX, "loose");
    snprintf(c.grad_tolerance[EQ_FP32], EQ_CASE_KEY_MAX, "grads");
    eq_tolerance tol, grad;
    EQ_EXPECT_OK(eq_plan_case_tolerances(&table, "tol.ini", &c, EQ_BF16, &tol, &grad));
    EQ_EXPECT(tol.atol == 0.5 && grad.atol == 0.5, "bf16, no grad entry: %g, %g", tol.atol, grad.atol);
    EQ_EXPECT_OK(eq_plan_case_tolerances(&table, "tol.ini", &c, EQ_FP32, &tol, &grad));
    EQ_EXPECT(tol.atol == 0.5 && grad.atol == 0.25, "fp32, grad entry: %g, %g", tol.atol, grad.atol);
    EQ_EXPECT(eq_plan_case_tolerances(&table, "tol.ini", &c, EQ_FP64, &tol, &grad) == EQ_ERR_USAGE,
              "a dtype the case names no entry for");
    eq_error_clear();
    snprintf(c.grad_tolerance[EQ_BF16], EQ_CASE_KEY_MAX, "missing");
    EQ_EXPECT(eq_plan_case_tolerances(&table, "tol.ini", &c, EQ_BF16, &tol, &grad) == EQ_ERR_INPUT,
              "an entry the table lacks");
    EQ_EXPECT(strcmp(eq_error_message(), "case file cases/toy.ini names tolerance entry 'missing', which tol.ini lacks") ==
                  0,
              "%s", eq_error_message());
    eq_error_clear();
}

int main(void)
{
    test_layouts();
    test_tolerances();
    return eq_test_finish("plan_test");
}
