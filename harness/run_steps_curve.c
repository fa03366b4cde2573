#include "harness/run_steps_curve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/run_load.h"

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* run's parameters at `step` into cap (0 where not stored: *have 0), its first finding kept. */
static eq_status load_params(eq_run_steps *run, int step, eq_capture *cap, int *have)
{
    char dir[4400];
    *have = 0;
    if (run->params_every <= 0) return EQ_OK;
    eq_run_steps_dir(run, "params", step, dir, sizeof dir);
    if (!is_dir(dir)) return EQ_OK;
    eq_status st = eq_run_load(dir, cap);
    if (st != EQ_OK) return st;
    *have = 1;
    if (cap->n_findings > 0 && run->n_findings < EQ_RUN_STEPS_FINDINGS) {
        int dup = 0; /* one finding per parameter directory kind: the first step's */
        for (int i = 0; i < run->n_findings; i++) dup |= strncmp(run->findings[i], "params_", 7) == 0;
        if (!dup) snprintf(run->findings[run->n_findings++], EQ_FINDING_MAX, "params_%06d: %s", step, cap->findings[0]);
    }
    return EQ_OK;
}

/* The curves of the parameters `ref0` holds (role param), in its order. */
static eq_status init_params(const eq_capture *ref0, int n_steps, eq_steps_curve *out)
{
    out->params = calloc((size_t)(ref0->count > 0 ? ref0->count : 1), sizeof *out->params);
    if (out->params == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d parameter curves", ref0->count);
    for (int i = 0; i < ref0->count; i++) {
        if (ref0->entries[i].role != EQ_ROLE_PARAM) continue;
        eq_param_curve *c = &out->params[out->n_params++];
        snprintf(c->path, sizeof c->path, "%s", ref0->entries[i].path);
        c->rel = calloc((size_t)n_steps, sizeof *c->rel);
        if (c->rel == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for the curve of %s", c->path);
    }
    return EQ_OK;
}

/* The distances of step t (1-based) from the three parameter sets. */
static eq_status distances(const eq_capture *ref0, const eq_capture *ref, const eq_capture *test, int t, eq_steps_curve *out)
{
    eq_step_point *pt = &out->points[t - 1];
    double dist = 0.0, trained = 0.0, max_abs = 0.0;
    for (int k = 0; k < out->n_params; k++) {
        const char *path = out->params[k].path;
        const eq_capture_entry *a = eq_capture_find(ref, path), *b = eq_capture_find(test, path), *z = eq_capture_find(ref0, path);
        if (a == NULL || b == NULL || z == NULL)
            return EQ_FAIL(EQ_ERR_INPUT, "step %d: parameter %s is missing from the %s's params_%06d", t, path,
                           a == NULL ? "reference" : b == NULL ? "test run" : "reference", z == NULL ? 0 : t);
        const int64_t n = eq_tensor_numel(&a->tensor);
        if (eq_tensor_numel(&b->tensor) != n || eq_tensor_numel(&z->tensor) != n)
            return EQ_FAIL(EQ_ERR_INPUT, "step %d: parameter %s has %lld elements in the reference, %lld in the test run", t, path,
                           (long long)n, (long long)eq_tensor_numel(&b->tensor));
        double d2 = 0.0, m2 = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const double r = eq_tensor_get(&a->tensor, i), d = eq_tensor_get(&b->tensor, i) - r, m = r - eq_tensor_get(&z->tensor, i);
            d2 += d * d, m2 += m * m;
            if (fabs(d) > max_abs || isnan(d)) max_abs = isnan(d) ? NAN : fmax(max_abs, fabs(d));
        }
        out->params[k].rel[t - 1] = m2 > 0.0 ? sqrt(d2 / m2) : 0.0;
        dist += d2, trained += m2;
    }
    pt->param_dist = sqrt(dist);
    pt->trained_dist = sqrt(trained);
    pt->param_max_abs = max_abs;
    return EQ_OK;
}

eq_status eq_run_steps_curve(eq_run_steps *ref, eq_run_steps *test, eq_steps_curve *out)
{
    eq_status st = EQ_OK;
    eq_capture ref0 = {0}, ref_t = {0}, test_t = {0};
    int have_ref0 = 0, have_test0 = 0;
    memset(out, 0, sizeof *out);
    const int n = ref->n_steps < test->n_steps ? ref->n_steps : test->n_steps;
    if (n < 2) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s and %s share %d recorded step%s: a training curve needs at least 2 (steps 1 and 2)",
                     ref->dir, test->dir, n, n == 1 ? "" : "s");
        goto cleanup;
    }
    out->n_steps = n;
    out->dtype = ref->dtype;
    const eq_run_steps *named = test->has_optimizer ? test : ref;
    if (named->has_optimizer) out->opt = named->opt;
    else eq_optimizer_defaults(EQ_OPT_SGD, &out->opt), out->opt.lr = 0.0;
    out->n_frozen = ref->n_frozen;
    out->points = calloc((size_t)n, sizeof *out->points);
    if (out->points == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d steps", n);
        goto cleanup;
    }
    EQ_TRY(load_params(ref, 0, &ref0, &have_ref0));
    { /* the test run's step 0 only checks its replicas (its start must be the reference's) */
        eq_capture test0 = {0};
        st = load_params(test, 0, &test0, &have_test0);
        eq_capture_free(&test0);
        if (st != EQ_OK) goto cleanup;
    }
    EQ_TRY(have_ref0 ? init_params(&ref0, n, out) : EQ_OK);
    for (int t = 1; t <= n; t++) {
        eq_step_point *pt = &out->points[t - 1];
        pt->loss_ref = ref->loss[t - 1], pt->loss_test = test->loss[t - 1];
        pt->grad_norm_ref = sqrt(ref->grad_sq[t - 1]), pt->grad_norm_test = sqrt(test->grad_sq[t - 1]);
        int have_ref = 0, have_test = 0;
        if (have_ref0 && have_test0) {
            EQ_TRY(load_params(ref, t, &ref_t, &have_ref));
            EQ_TRY(load_params(test, t, &test_t, &have_test));
        }
        if (have_ref && have_test) {
            EQ_TRY(distances(&ref0, &ref_t, &test_t, t, out));
        } else if (t > 1) { /* no parameters at this step: the last step's distances */
            pt->param_dist = pt[-1].param_dist, pt->trained_dist = pt[-1].trained_dist, pt->param_max_abs = pt[-1].param_max_abs;
            for (int k = 0; k < out->n_params; k++) out->params[k].rel[t - 1] = out->params[k].rel[t - 2];
        }
        eq_capture_free(&ref_t);
        eq_capture_free(&test_t);
    }
    EQ_TRY(eq_curve_classify(out->points, n, out->dtype, &out->verdict));
    eq_steps_curve_judge(out);
cleanup:
    eq_capture_free(&ref0);
    eq_capture_free(&ref_t);
    eq_capture_free(&test_t);
    if (st != EQ_OK) eq_steps_curve_free(out);
    return st;
}
