#include "harness/train_curve.h"

#include <stdlib.h>
#include <string.h>

int eq_steps_curve_judge(eq_steps_curve *c)
{
    const eq_curve_class cls = c->verdict.cls;
    c->as_expected = c->bug_injected ? (cls == EQ_CURVE_FACTOR || cls == EQ_CURVE_GROWING)
                                     : (cls == EQ_CURVE_IDENTICAL || cls == EQ_CURVE_ROUNDING);
    return !c->as_expected;
}

void eq_steps_curve_free(eq_steps_curve *c)
{
    if (c == NULL) return;
    for (int k = 0; c->params != NULL && k < c->n_params; k++) free(c->params[k].rel);
    free(c->params);
    free(c->points);
    memset(c, 0, sizeof *c);
}
