/* The runs against the fp64 truth (truth.h). */
#include "harness/truth.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* max |a - truth| and ||a - truth||_F over the elements finite in a, b and truth. */
static void distances(const eq_tensor *a, const eq_tensor *b, const eq_tensor *truth, eq_truth *out)
{
    double sum_a = 0, sum_b = 0, sum_t = 0;
    for (int64_t i = 0; i < eq_tensor_numel(truth); i++) {
        double x = eq_tensor_get(a, i), y = eq_tensor_get(b, i), t = eq_tensor_get(truth, i);
        if (!isfinite(x) || !isfinite(y) || !isfinite(t)) continue;
        out->ref_max = fmax(out->ref_max, fabs(x - t));
        out->test_max = fmax(out->test_max, fabs(y - t));
        sum_a += (x - t) * (x - t), sum_b += (y - t) * (y - t), sum_t += t * t;
        out->elements++;
    }
    out->ref_rel = sum_t > 0 ? sqrt(sum_a / sum_t) : sqrt(sum_a);
    out->test_rel = sum_t > 0 ? sqrt(sum_b / sum_t) : sqrt(sum_b);
}

eq_status eq_truth_apply(eq_comparison *cmp, const eq_capture *ref, const eq_capture *test, const eq_capture *truth)
{
    for (int i = 0; i < cmp->count; i++) {
        eq_tensor_result *r = &cmp->results[i];
        if (r->role != EQ_ROLE_ACTIVATION && r->role != EQ_ROLE_GRAD && r->role != EQ_ROLE_LOSS) continue;
        const eq_capture_entry *t = eq_capture_find(truth, r->path), *a = eq_capture_find(ref, r->path),
                               *b = eq_capture_find(test, r->path);
        if (t == NULL || a == NULL || b == NULL) continue;
        const eq_tensor *tt = &t->tensor, *at = &a->tensor;
        if (tt->ndim != at->ndim || memcmp(tt->shape, at->shape, (size_t)tt->ndim * sizeof tt->shape[0]) != 0)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: the fp64 truth's shape differs from the reference's", r->path);
        memset(&r->truth, 0, sizeof r->truth);
        distances(at, &b->tensor, tt, &r->truth);
        /* the run's dtype, not the storage's: losses are kept in fp64 */
        r->truth.unit_roundoff = eq_dtype_unit_roundoff(ref->meta.dtype);
        r->truth.truth_dtype = truth->meta.dtype;
        r->truth.applies = 1;
    }
    return EQ_OK;
}

const char *eq_truth_reading(const eq_truth *t, char *buf, size_t len)
{
    if (t->ref_rel == t->test_rel) snprintf(buf, len, "as accurate");
    else if (fmax(t->ref_rel, t->test_rel) <= 4.0 * t->unit_roundoff)
        snprintf(buf, len, "as accurate, both within 4 u");
    else if (t->ref_rel == 0.0) snprintf(buf, len, "less accurate (the reference is exact)");
    else if (t->test_rel == 0.0) snprintf(buf, len, "more accurate (exact)");
    else {
        double ratio = t->test_rel / t->ref_rel;
        if (ratio > 2.0) snprintf(buf, len, "less accurate (x%.3g)", ratio);
        else if (ratio < 0.5) snprintf(buf, len, "more accurate (x%.3g)", ratio);
        else snprintf(buf, len, "as accurate (x%.3g)", ratio);
    }
    return buf;
}

double eq_truth_ratio(const eq_truth *t)
{
    if (t->ref_rel > 0) return t->test_rel / t->ref_rel;
    return t->test_rel > 0 ? INFINITY : 1.0;
}

int eq_truth_flagged(const eq_truth *t)
{
    return t->applies && t->judged && t->elements >= EQ_TRUTH_MIN_ELEMENTS &&
           t->test_rel > EQ_TRUTH_FLOOR_U * t->unit_roundoff && eq_truth_ratio(t) > EQ_TRUTH_RATIO;
}
