/* Comparison of a run against its reference: per-tensor metrics in fp64, the observation, a
 * diagnosis a reviewer can act on, and the walk over two captures. */
#include "harness/compare.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/parallel.h"
#include "harness/compare_stats.h"
#include "harness/train_curve.h"

/* The |d| thresholds of seed 002 section 2.1 (its layer tables keep 1e-3 and 1e-2). */
const double eq_thresholds[EQ_N_THRESHOLDS] = {1e-4, 1e-3, 5e-3, 1e-2};

/* A uniform factor: the least-squares scale is off 1 by more than rounding ever moves it (bf16
 * rounding noise shifts it by ~u/sqrt(n), far below 1e-2) while the direction is kept. */
#define SCALE_OFF_ONE 1e-2
#define SCALE_MIN_COSINE 0.999
/* A scale within this relative distance of n or 1/n is named as that factor: bf16 rounding noise
 * on top of a planted factor moves the least-squares scale by ~1e-3 (2^-8 at worst). */
#define FACTOR_SNAP 5e-3
/* "A few elements": a handful, and at most a tenth of the tensor (a localized change). */
#define FEW_ELEMENTS 8
/* Beyond this relative Frobenius error a difference is not rounding in that dtype. bf16: 0.1 (28
 * layers of seed 002 section 3 reach ~1e-2; the ci matrices 1.6e-2). fp32: 1e-4 (the ci matrices
 * of every case reach at most 6.3e-6, spd's PGD loss after its Adam ascent; 16x that is still far
 * below the 1e-2 of a scaling bug in an fp32 gradient). fp64: 1e-10. */
static double not_rounding_rel(eq_dtype dt)
{
    switch (dt) {
    case EQ_BF16: return 0.1;
    case EQ_FP32: return 1e-4;
    case EQ_FP64: return 1e-10;
    }
    return 0.1;
}

/* The coarser of two dtypes: the larger unit roundoff (fewer significand bits). */
static eq_dtype coarser(eq_dtype a, eq_dtype b)
{
    return eq_dtype_unit_roundoff(a) >= eq_dtype_unit_roundoff(b) ? a : b;
}

eq_status eq_compare_tensors(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol,
                             eq_metrics *out)
{
    return eq_compare_tensors_of_run(ref, test, tol, ref->dtype, out);
}

eq_status eq_compare_tensors_of_run(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol,
                                    eq_dtype run_dtype, eq_metrics *out)
{
    if (!eq_tensor_same_shape(ref, test) || tol == NULL) return eq_compare_tensors_full(ref, test, tol, run_dtype, out);
    memset(out, 0, sizeof *out);
    out->argmax = -1;
    out->dtype = coarser(ref->dtype, run_dtype);
    out->count = eq_tensor_numel(ref);
    return eq_stats_compute(ref, test, tol, 1, out);
}

eq_status eq_compare_tensors_full(const eq_tensor *ref, const eq_tensor *test, const eq_tolerance *tol,
                                  eq_dtype run_dtype, eq_metrics *out)
{
    memset(out, 0, sizeof *out);
    out->argmax = -1;
    out->dtype = coarser(ref->dtype, run_dtype);
    if (!eq_tensor_same_shape(ref, test)) {
        char ref_shape[96], test_shape[96];
        return EQ_FAIL(EQ_ERR_INPUT, "cannot compare reference %s %s with test %s %s",
                       eq_dtype_name(ref->dtype), eq_tensor_shape_str(ref, ref_shape, sizeof ref_shape),
                       eq_dtype_name(test->dtype), eq_tensor_shape_str(test, test_shape, sizeof test_shape));
    }
    if (tol == NULL) return EQ_FAIL(EQ_ERR_INTERNAL, "eq_compare_tensors without a tolerance");
    out->count = eq_tensor_numel(ref);
    return eq_stats_compute(ref, test, tol, 0, out);
}

static int nonfinite_differs(const eq_metrics *m)
{
    return m->nonfinite_mismatch > 0 || m->nan_ref != m->nan_test || m->inf_ref != m->inf_test;
}

int eq_nonfinite_in_both(const eq_metrics *m)
{
    return !nonfinite_differs(m) && (m->nan_ref > 0 || (m->count > 0 && m->n_finite == 0));
}

eq_observed eq_observe(const eq_metrics *m)
{
    if (nonfinite_differs(m) || eq_nonfinite_in_both(m)) return EQ_OBS_NONFINITE;
    if (m->n_differ == 0) return EQ_OBS_BIT_EXACT;
    if (m->n_outside == 0) return EQ_OBS_WITHIN;
    return EQ_OBS_OUTSIDE;
}

/* "3 NaN, 1 Inf", "2 NaN", "1 Inf" or "no NaN/Inf". */
static const char *count_nonfinite(int64_t nan, int64_t inf, char *buf, size_t len)
{
    if (nan > 0 && inf > 0) snprintf(buf, len, "%" PRId64 " NaN, %" PRId64 " Inf", nan, inf);
    else if (nan > 0) snprintf(buf, len, "%" PRId64 " NaN", nan);
    else if (inf > 0) snprintf(buf, len, "%" PRId64 " Inf", inf);
    else snprintf(buf, len, "no NaN/Inf");
    return buf;
}

/* "8", "0.0625 = 1/16", "-1", "1.5": the whole number n or 1/n the scale is within rounding of
 * (the factors reduction bugs produce: world sizes and their inverses), else the scale itself. */
static const char *name_factor(double scale, char *buf, size_t len)
{
    double magnitude = fabs(scale), whole = round(magnitude);
    double inverse = magnitude > 0.0 ? round(1.0 / magnitude) : 0.0;
    const char *sign = scale < 0.0 ? "-" : "";
    if (whole >= 1.0 && fabs(magnitude / whole - 1.0) < FACTOR_SNAP)
        snprintf(buf, len, "%s%.0f", sign, whole);
    else if (inverse >= 2.0 && fabs(magnitude * inverse - 1.0) < FACTOR_SNAP)
        snprintf(buf, len, "%s%.4g = %s1/%.0f", sign, 1.0 / inverse, sign, inverse);
    else
        snprintf(buf, len, "%.4g", scale);
    return buf;
}

/* The uniform-scale branch of eq_diagnose: a difference the least-squares scale explains. */
static int is_uniform_scale(const eq_metrics *m)
{
    return !nonfinite_differs(m) && m->n_differ > 0 && m->max_abs > 0.0 && m->n_finite > 0 &&
           fabs(m->ls_scale - 1.0) > SCALE_OFF_ONE && fabs(m->cosine) > SCALE_MIN_COSINE;
}

const char *eq_factor_name(const eq_metrics *m, char *buf, size_t len)
{
    if (len > 0) buf[0] = '\0';
    if (!is_uniform_scale(m)) return NULL;
    double magnitude = fabs(m->ls_scale), whole = round(magnitude);
    double inverse = magnitude > 0.0 ? round(1.0 / magnitude) : 0.0;
    const char *sign = m->ls_scale < 0.0 ? "-" : "";
    if (whole >= 1.0 && fabs(magnitude / whole - 1.0) < FACTOR_SNAP) snprintf(buf, len, "%s%.0f", sign, whole);
    else if (inverse >= 2.0 && fabs(magnitude * inverse - 1.0) < FACTOR_SNAP)
        snprintf(buf, len, "%s1/%.0f", sign, inverse);
    else snprintf(buf, len, "%.4g", m->ls_scale);
    return buf;
}

int eq_unflatten_index(int ndim, const int64_t *shape, int64_t flat, int64_t *index)
{
    int64_t numel = eq_shape_numel(ndim, shape);
    if (flat < 0 || numel < 0 || flat >= numel) return 0;
    for (int d = ndim - 1; d >= 0; d--) {
        index[d] = flat % shape[d];
        flat /= shape[d];
    }
    return 1;
}

/* What eq_diagnose says of NaN or Inf in both runs at the same places (eq_nonfinite_in_both). */
static const char *diagnose_in_both(const eq_metrics *m, char *buf, size_t len)
{
    char counts[64];
    if (m->n_finite == 0 && m->nan_ref == m->count)
        snprintf(buf, len, "all %" PRId64 " elements NaN in both runs: the reference computed no value to judge the "
                 "layout by", m->count);
    else if (m->n_finite == 0 && m->inf_ref == m->count)
        snprintf(buf, len, "all %" PRId64 " elements Inf in both runs, of the same signs: nothing finite to compare",
                 m->count);
    else if (m->n_finite == 0)
        snprintf(buf, len, "all %" PRId64 " elements NaN or Inf in both runs (%s in each): nothing finite to compare",
                 m->count, count_nonfinite(m->nan_ref, m->inf_ref, counts, sizeof counts));
    else
        snprintf(buf, len, "%" PRId64 " of %" PRId64 " elements NaN in both runs, at the same places: the reference "
                 "computed no value there to judge the layout by (the %" PRId64 " finite pairs: max |d| %.6g)",
                 m->nan_ref, m->count, m->n_finite, m->max_abs);
    return buf;
}

static const char *diagnose_finite(const eq_metrics *m, char *buf, size_t len);

const char *eq_diagnose(const eq_metrics *m, char *buf, size_t len)
{
    if (eq_nonfinite_in_both(m)) return diagnose_in_both(m, buf, len);
    diagnose_finite(m, buf, len);
    size_t used = strlen(buf);
    if (!nonfinite_differs(m) && m->inf_ref > 0 && used < len)
        snprintf(buf + used, len - used, "; %" PRId64 " of %" PRId64 " elements Inf in both runs, at the same places "
                 "(compared as equal)", m->inf_ref, m->count);
    return buf;
}

/* eq_diagnose where no NaN or Inf is shared by both runs at the same places. */
static const char *diagnose_finite(const eq_metrics *m, char *buf, size_t len)
{
    char ref_part[64], test_part[64];
    if (nonfinite_differs(m)) {
        count_nonfinite(m->nan_ref, m->inf_ref, ref_part, sizeof ref_part);
        count_nonfinite(m->nan_test, m->inf_test, test_part, sizeof test_part);
        if (m->nan_ref + m->inf_ref == 0)
            snprintf(buf, len, "%s in test where the reference is finite", test_part);
        else if (m->nan_test + m->inf_test == 0)
            snprintf(buf, len, "%s in the reference where test is finite", ref_part);
        else
            snprintf(buf, len, "NaN/Inf differ at %" PRId64 " elements (reference %s, test %s)",
                     m->nonfinite_mismatch, ref_part, test_part);
        return buf;
    }
    if (m->n_differ == 0) {
        snprintf(buf, len, "bit-exact");
        return buf;
    }
    const char *plural = m->n_differ == 1 ? "element differs" : "elements differ";
    if (m->max_abs == 0.0) {
        snprintf(buf, len, "%" PRId64 " %s in bits only (sign of zero or NaN payload), values equal",
                 m->n_differ, plural);
        return buf;
    }
    if (m->n_finite > 0 && fabs(m->ls_scale - 1.0) > SCALE_OFF_ONE && fabs(m->cosine) > SCALE_MIN_COSINE) {
        snprintf(buf, len, "uniform scale x%s (ls %.6g, cos %.6f)",
                 name_factor(m->ls_scale, ref_part, sizeof ref_part), m->ls_scale, m->cosine);
        return buf;
    }
    if (m->n_differ <= FEW_ELEMENTS && m->n_differ * 10 <= m->count) {
        snprintf(buf, len, "%" PRId64 " %s, %s%.4g ULP at index %" PRId64, m->n_differ, plural,
                 m->n_differ == 1 ? "" : "max ", m->max_ulp, m->argmax);
        return buf;
    }
    if (m->rel_fro > not_rounding_rel(m->dtype))
        snprintf(buf, len, "not rounding: rel %.1e, cos %.6f, max |d| %.6g at index %" PRId64,
                 m->rel_fro, m->cosine, m->max_abs, m->argmax);
    else
        snprintf(buf, len, "rounding: max %.4g ULP, rel %.1e", m->max_ulp, m->rel_fro);
    return buf;
}

/* Every path of `have` must be in `want` with the same dtype and shape. */
static eq_status check_paths(const eq_capture *have, const char *have_name, const eq_capture *want,
                             const char *want_name)
{
    for (int i = 0; i < have->count; i++) {
        const eq_capture_entry *a = &have->entries[i];
        const eq_capture_entry *b = eq_capture_find(want, a->path);
        if (b == NULL)
            return EQ_FAIL(EQ_ERR_INPUT, "tensor %s is in the %s but not in the %s", a->path, have_name,
                           want_name);
        if (!eq_tensor_same_shape(&a->tensor, &b->tensor)) {
            char a_shape[96], b_shape[96];
            eq_tensor_shape_str(&a->tensor, a_shape, sizeof a_shape);
            eq_tensor_shape_str(&b->tensor, b_shape, sizeof b_shape);
            /* a shard compared as if it were the whole tensor: say how to mark it */
            const char *hint = eq_tensor_numel(&a->tensor) != eq_tensor_numel(&b->tensor)
                                   ? " (if one run holds only a rank's shard of it, its file must say how it is "
                                     "split: the dataset's shard attribute, e.g. 'tp:-1', harness/SCHEMA.md)"
                                   : "";
            return EQ_FAIL(EQ_ERR_INPUT, "tensor %s: %s %s %s vs %s %s %s%s", a->path, have_name,
                           eq_dtype_name(a->tensor.dtype), a_shape, want_name, eq_dtype_name(b->tensor.dtype),
                           b_shape, hint);
        }
    }
    return EQ_OK;
}

eq_status eq_compare_check_paths(const eq_capture *ref, const eq_capture *test)
{
    eq_status st = check_paths(ref, "reference", test, "test run");
    return st != EQ_OK ? st : check_paths(test, "test run", ref, "reference");
}

eq_status eq_compare_captures(const eq_capture *ref, const eq_capture *test, const eq_tolerance *tol,
                              eq_expect expect, eq_comparison *out)
{
    return eq_compare_captures_by_role(ref, test, tol, tol, expect, out);
}

/* The metrics of every tensor pair: the small ones side by side, one tensor per item of
 * eq_parallel_for, then the large ones one at a time, each spreading its blocks over the workers
 * (harness/compare_stats.h: either way the thread count changes no value). */
typedef struct {
    eq_status st;
    char message[256]; /* the failure's message, taken on its thread */
} tensor_failure;

typedef struct {
    const eq_capture *ref, *test;
    const eq_tolerance *tol, *grad_tol;
    eq_tensor_result *results; /* [ref->count] */
    tensor_failure *failed;    /* [ref->count] */
    int large;                 /* this pass takes the tensors of at least EQ_STATS_PARALLEL_MIN elements */
} metrics_job;

static void tensor_metrics(void *ctx, int64_t begin, int64_t end)
{
    metrics_job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        const eq_capture_entry *r = &j->ref->entries[i];
        if ((eq_tensor_numel(&r->tensor) >= EQ_STATS_PARALLEL_MIN) != j->large) continue;
        const eq_capture_entry *t = eq_capture_find(j->test, r->path);
        eq_status st = eq_compare_tensors_of_run(&r->tensor, &t->tensor, r->role == EQ_ROLE_GRAD ? j->grad_tol : j->tol,
                                                 j->ref->meta.dtype, &j->results[i].m);
        if (st == EQ_OK) continue;
        j->failed[i].st = st;
        snprintf(j->failed[i].message, sizeof j->failed[i].message, "%s (%s)", eq_error_message(), eq_error_where());
        eq_error_clear();
    }
}

eq_status eq_compare_captures_by_role(const eq_capture *ref, const eq_capture *test, const eq_tolerance *tol,
                                      const eq_tolerance *grad_tol, eq_expect expect, eq_comparison *out)
{
    eq_status st = EQ_OK;
    metrics_job job = {ref, test, tol, grad_tol, NULL, NULL, 0};
    memset(out, 0, sizeof *out);
    if (tol == NULL || grad_tol == NULL) return EQ_FAIL(EQ_ERR_INTERNAL, "eq_compare_captures without a tolerance");
    EQ_TRY(eq_compare_check_paths(ref, test));
    out->ref_meta = ref->meta;
    out->test_meta = test->meta;
    out->tol = *tol;
    out->grad_tol = *grad_tol;
    out->expect = expect;
    out->results = calloc((size_t)(ref->count > 0 ? ref->count : 1), sizeof *out->results);
    if (out->results == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %d comparison results", ref->count);
        goto cleanup;
    }
    job.results = out->results;
    job.failed = calloc((size_t)(ref->count > 0 ? ref->count : 1), sizeof *job.failed);
    if (job.failed == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate %d comparison results", ref->count);
        goto cleanup;
    }
    eq_parallel_for(ref->count, 1, tensor_metrics, &job);
    job.large = 1;
    tensor_metrics(&job, 0, ref->count);
    for (int i = 0; i < ref->count; i++) /* the first failure in capture order, whatever the threads */
        if (job.failed[i].st != EQ_OK) {
            st = EQ_FAIL(job.failed[i].st, "%s", job.failed[i].message);
            goto cleanup;
        }
    for (int i = 0; i < ref->count; i++) {
        const eq_capture_entry *r = &ref->entries[i];
        eq_tensor_result *res = &out->results[i];
        snprintf(res->path, sizeof res->path, "%s", r->path);
        snprintf(res->name, sizeof res->name, "%s", r->name);
        res->layer = r->layer;
        res->role = r->role;
        res->ndim = r->tensor.ndim;
        memcpy(res->shape, r->tensor.shape, sizeof res->shape);
        /* Inputs are identical by construction and parameters are initialised as the full master
         * tensor then sliced (seed 002 section 1): any difference there is a harness bug. */
        res->expect = (r->role == EQ_ROLE_INPUT || r->role == EQ_ROLE_PARAM) ? EQ_EXPECT_BIT_EXACT : expect;
        out->count++;
    }
    if (ref->n_findings + test->n_findings > 0) {
        out->findings = calloc((size_t)(ref->n_findings + test->n_findings), sizeof *out->findings);
        if (out->findings == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d findings", ref->n_findings + test->n_findings);
            goto cleanup;
        }
        for (int i = 0; i < ref->n_findings + test->n_findings; i++) {
            int of_ref = i < ref->n_findings;
            snprintf(out->findings[i], EQ_FINDING_MAX, "%s: %s", of_ref ? "reference" : "test run",
                     of_ref ? ref->findings[i] : test->findings[i - ref->n_findings]);
        }
        out->n_findings = ref->n_findings + test->n_findings;
    }
cleanup:
    free(job.failed);
    if (st != EQ_OK) eq_comparison_free(out);
    return st;
}

void eq_comparison_free(eq_comparison *c)
{
    free(c->results);
    free(c->findings);
    eq_steps_curve_free(c->steps);
    free(c->steps);
    memset(c, 0, sizeof *c);
}

void eq_comparison_apply_case(eq_comparison *cmp, const eq_case *kase)
{
    const eq_layout l = {cmp->test_meta.dp, cmp->test_meta.tp};
    for (int i = 0; i < cmp->count; i++) {
        eq_tensor_result *res = &cmp->results[i];
        eq_expect e;
        eq_expect_size size;
        if (res->role == EQ_ROLE_INPUT || res->role == EQ_ROLE_PARAM) continue;
        if (!eq_case_tensor_expectation_sized(kase, cmp->test_meta.grads, l, res->name, &e, &size)) continue;
        res->expect = e;
        res->expect_size = size;
    }
}
