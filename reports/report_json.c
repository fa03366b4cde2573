/* JSON report (jansson): every metric of every tensor, for programs (equiv diff, dashboards).
 *
 *   {"equiv_report": 1, "version": "0.1.0",
 *    "thresholds": [0.0001, 0.001, 0.005, 0.01],
 *    "comparisons": [{"reference": {run}, "test": {run}, "tolerance": {...}, "expect": "within",
 *                     "tensors": 3, "unexpected": 1,
 *                     "results": [{"path", "layer", "name", "role", "expect", "observed",
 *                                  "as_expected", "diagnosis", "shape": [4, 16],
 *                                  "argmax_index": [2, 7] (null: no element differs),
 *                                  "fitted_factor": ls_scale, "factor_name": "1/8" (null: the
 *                                  difference is not a uniform factor), "metrics": {...},
 *                                  "expect_size": {"metric": "rel", "lo", "hi"} for a differs
 *                                  that states its size,
 *                                  "theory": {...} where a rounding bound applies,
 *                                  "truth": {...} with --truth,
 *                                  "structure": {...} for a user's run}],
 *                     "steps": {...} with --steps N > 1 (reports/report_steps.h)}],
 *    "summary": {"comparisons", "tensors", "unexpected", "line"}}
 *
 * JSON has no NaN or Infinity. A non-finite metric (max_tol_ratio under a zero tolerance,
 * rel_fro against an all-zero reference) is written as the string "NaN", "Infinity" or
 * "-Infinity": the value survives (null would not say which), and Python's float() and
 * JavaScript's Number() both read those strings back. Finite reals are written with 17
 * significant digits, so they read back bit for bit. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>

#include "harness/run_cell.h"
#include "harness/structure.h"
#include "reports/report.h"
#include "reports/report_columns.h"
#include "reports/report_steps.h"

static json_t *number(double v)
{
    if (isnan(v)) return json_string("NaN");
    if (isinf(v)) return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

/* Every metric, in eq_report_metrics' order (reports/report_columns.h). */
static json_t *metrics_json(const eq_metrics *m)
{
    json_t *o = json_object();
    int bad = o == NULL;
    for (int k = 0; k < eq_report_n_metrics && !bad; k++) {
        const eq_report_metric *metric = &eq_report_metrics[k];
        const char *at = (const char *)m + metric->offset;
        bad |= json_object_set_new(o, metric->key, metric->kind == EQ_METRIC_COUNT ? json_integer(*(const int64_t *)at)
                                                                                   : number(*(const double *)at));
    }
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

/* One field of the run's identity (harness/run_cell.h) as JSON. */
static json_t *cell_json(const eq_run_meta *meta, const eq_cell_field *f)
{
    char text[EQ_NAME_MAX];
    const void *value = eq_cell_member(meta, f);
    switch (f->type) {
    case EQ_CELL_TEXT: return json_string(value);
    case EQ_CELL_DTYPE: return json_string(eq_cell_text(meta, f, text, sizeof text));
    case EQ_CELL_INT: return json_integer(*(const int *)value);
    case EQ_CELL_I64: return json_integer(*(const int64_t *)value);
    case EQ_CELL_U64: {
        /* json_int_t is signed 64-bit: a value above INT64_MAX goes out as its decimal string. */
        const uint64_t v = *(const uint64_t *)value;
        return v <= INT64_MAX ? json_integer((json_int_t)v) : json_string(eq_cell_text(meta, f, text, sizeof text));
    }
    case EQ_CELL_F64: return number(*(const double *)value);
    }
    return NULL;
}

/* The run's identity, its fields in the order reports have always had them (json_slot). */
static json_t *run_json(const eq_run_meta *meta)
{
    json_t *o = json_object();
    int bad = o == NULL;
    const int has_source = meta->source[0] != '\0'; /* a run equiv did not compute (harness/SCHEMA.md) */
    for (int slot = 0; !bad && eq_cell_by_json_slot(slot) != NULL; slot++) {
        const eq_cell_field *f = eq_cell_by_json_slot(slot);
        if ((f->flags & EQ_CELL_JSON) || ((f->flags & EQ_CELL_JSON_IF_SET) && !eq_cell_is_default(meta, f)) ||
            ((f->flags & EQ_CELL_JSON_IF_SOURCE) && has_source))
            bad |= json_object_set_new(o, f->key, cell_json(meta, f));
    }
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

/* What rounding-error theory says of the tensor (harness/rounding_bound.h). */
static json_t *theory_json(const eq_theory *th)
{
    json_t *o = json_object();
    int bad = o == NULL;
    bad |= json_object_set_new(o, "terms", json_integer(th->terms));
    bad |= json_object_set_new(o, "ref_partitions", json_integer(th->ref_partitions));
    bad |= json_object_set_new(o, "test_partitions", json_integer(th->test_partitions));
    bad |= json_object_set_new(o, "det_bound_max", number(th->det_bound_max));
    bad |= json_object_set_new(o, "det_ratio", number(th->det_ratio));
    bad |= json_object_set_new(o, "prob_bound_max", number(th->prob_bound_max));
    bad |= json_object_set_new(o, "prob_ratio", number(th->prob_ratio));
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

/* --truth: both runs against the fp64 run (harness/truth.h). */
static json_t *truth_json(const eq_truth *t)
{
    json_t *o = json_object();
    int bad = o == NULL;
    bad |= json_object_set_new(o, "ref_max", number(t->ref_max));
    bad |= json_object_set_new(o, "test_max", number(t->test_max));
    bad |= json_object_set_new(o, "ref_rel", number(t->ref_rel));
    bad |= json_object_set_new(o, "test_rel", number(t->test_rel));
    bad |= json_object_set_new(o, "truth_dtype", json_string(eq_dtype_name(t->truth_dtype)));
    bad |= json_object_set_new(o, "judged", json_boolean(t->judged));
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

/* A user's run: what rounding cannot do (harness/structure.h); only the tests that ran. */
static json_t *structure_json(const eq_structure *s)
{
    json_t *o = json_object();
    int bad = o == NULL;
    if (s->factor_tested) {
        bad |= json_object_set_new(o, "factor", number(s->factor));
        bad |= json_object_set_new(o, "factor_spread", number(s->factor_spread));
        bad |= json_object_set_new(o, "factor_t", number(s->factor_t));
        bad |= json_object_set_new(o, "factor_limit", number(s->factor_limit));
    }
    if (s->shift_tested) {
        bad |= json_object_set_new(o, "shift_rel", number(s->shift_rel));
        bad |= json_object_set_new(o, "shift_t", number(s->shift_t));
        bad |= json_object_set_new(o, "shift_limit", number(s->shift_limit));
    }
    if (s->shard_tested) {
        bad |= json_object_set_new(o, "shard_worst", json_integer(s->shard_worst));
        bad |= json_object_set_new(o, "shard_ratio", number(s->shard_ratio));
        bad |= json_object_set_new(o, "shard_rel", number(s->shard_rel));
        bad |= json_object_set_new(o, "shard_share", number(s->shard_share));
    }
    bad |= json_object_set_new(o, "flagged", json_boolean(eq_structure_flagged(s)));
    bad |= json_object_set_new(o, "margin", number(eq_structure_margin(s)));
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

/* The extents of a shape, or of a position in it, as a JSON array of integers. */
static json_t *index_json(int ndim, const int64_t *extents)
{
    json_t *a = json_array();
    int bad = a == NULL;
    for (int d = 0; d < ndim; d++) bad |= json_array_append_new(a, json_integer(extents[d]));
    if (bad) json_decref(a);
    return bad ? NULL : a;
}

/* The argmax's position in the tensor's shape, or null when there is none (no element differs). */
static json_t *argmax_json(const eq_tensor_result *r)
{
    int64_t index[EQ_MAX_DIMS];
    if (!eq_unflatten_index(r->ndim, r->shape, r->m.argmax, index)) return json_null();
    return index_json(r->ndim, index);
}

static json_t *result_json(const eq_tensor_result *r)
{
    json_t *o = json_object();
    int bad = o == NULL;
    char factor[32];
    bad |= json_object_set_new(o, "path", json_string(r->path));
    bad |= json_object_set_new(o, "layer", json_integer(r->layer));
    bad |= json_object_set_new(o, "name", json_string(r->name));
    bad |= json_object_set_new(o, "role", json_string(eq_role_name(r->role)));
    bad |= json_object_set_new(o, "expect", json_string(eq_expect_name(r->expect)));
    if (r->expect == EQ_EXPECT_DIFFERS && r->expect_size.metric != EQ_SIZE_ANY)
        bad |= json_object_set_new(o, "expect_size",
                                   json_pack("{s:s, s:f, s:f}", "metric", eq_size_metric_name(r->expect_size.metric),
                                             "lo", r->expect_size.lo, "hi", r->expect_size.hi));
    bad |= json_object_set_new(o, "observed", json_string(eq_observed_name(r->observed)));
    bad |= json_object_set_new(o, "as_expected", json_boolean(r->as_expected));
    bad |= json_object_set_new(o, "diagnosis", json_string(r->diagnosis));
    bad |= json_object_set_new(o, "shape", index_json(r->ndim, r->shape));
    bad |= json_object_set_new(o, "argmax_index", argmax_json(r));
    bad |= json_object_set_new(o, "fitted_factor", number(r->m.ls_scale));
    bad |= json_object_set_new(o, "factor_name", eq_factor_name(&r->m, factor, sizeof factor) != NULL
                                                     ? json_string(factor)
                                                     : json_null());
    bad |= json_object_set_new(o, "metrics", metrics_json(&r->m));
    if (r->theory.applies) bad |= json_object_set_new(o, "theory", theory_json(&r->theory));
    if (r->truth.applies) bad |= json_object_set_new(o, "truth", truth_json(&r->truth));
    if (r->structure.applies) bad |= json_object_set_new(o, "structure", structure_json(&r->structure));
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

static json_t *tolerance_json(const eq_tolerance *t)
{
    json_t *o = json_object();
    int bad = o == NULL;
    bad |= json_object_set_new(o, "name", json_string(t->name));
    bad |= json_object_set_new(o, "atol", number(t->atol));
    bad |= json_object_set_new(o, "rtol", number(t->rtol));
    bad |= json_object_set_new(o, "scale", json_string(t->atol_scale == EQ_ATOL_REF_RMS ? "ref_rms" : "absolute"));
    bad |= json_object_set_new(o, "source", json_string(t->source));
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

static json_t *comparison_json(const eq_comparison *c)
{
    json_t *o = json_object(), *tol = tolerance_json(&c->tol), *results = json_array();
    int bad = o == NULL || tol == NULL || results == NULL;
    for (int i = 0; i < c->count; i++) bad |= json_array_append_new(results, result_json(&c->results[i]));
    bad |= json_object_set_new(o, "reference", run_json(&c->ref_meta));
    bad |= json_object_set_new(o, "test", run_json(&c->test_meta));
    bad |= json_object_set_new(o, "tolerance", tol);
    bad |= json_object_set_new(o, "grad_tolerance", tolerance_json(&c->grad_tol));
    bad |= json_object_set_new(o, "expect", json_string(eq_expect_name(c->expect)));
    bad |= json_object_set_new(o, "tensors", json_integer(c->count));
    bad |= json_object_set_new(o, "unexpected", json_integer(c->n_unexpected));
    bad |= json_object_set_new(o, "results", results);
    if (c->steps != NULL) bad |= json_object_set_new(o, "steps", eq_report_steps_json(c->steps));
    if (c->n_findings > 0) {
        json_t *findings = json_array();
        bad |= findings == NULL;
        for (int i = 0; i < c->n_findings; i++) bad |= json_array_append_new(findings, json_string(c->findings[i]));
        bad |= json_object_set_new(o, "findings", findings);
    }
    if (bad) json_decref(o);
    return bad ? NULL : o;
}

eq_status eq_report_json(FILE *out, const eq_comparison *cmps, int n)
{
    eq_status st = EQ_OK;
    char line[1024]; /* up to two names and a finding (EQ_FINDING_MAX) */
    int tensors = 0;
    json_t *root = json_object(), *list = json_array(), *thresholds = json_array(), *summary = json_object();
    int bad = root == NULL || list == NULL || thresholds == NULL || summary == NULL;
    for (int k = 0; k < EQ_N_THRESHOLDS; k++) bad |= json_array_append_new(thresholds, number(eq_thresholds[k]));
    for (int i = 0; i < n; i++) {
        bad |= json_array_append_new(list, comparison_json(&cmps[i]));
        tensors += cmps[i].count;
    }
    bad |= json_object_set_new(summary, "comparisons", json_integer(n));
    bad |= json_object_set_new(summary, "tensors", json_integer(tensors));
    bad |= json_object_set_new(summary, "unexpected", json_integer(eq_report_unexpected(cmps, n)));
    bad |= json_object_set_new(summary, "line", json_string(eq_report_summary(cmps, n, line, sizeof line)));
    bad |= json_object_set_new(root, "equiv_report", json_integer(1));
    bad |= json_object_set_new(root, "version", json_string(n > 0 ? cmps[0].ref_meta.version : ""));
    bad |= json_object_set_new(root, "thresholds", thresholds);
    bad |= json_object_set_new(root, "comparisons", list);
    bad |= json_object_set_new(root, "summary", summary);
    if (bad) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot build the JSON report (out of memory or a string not UTF-8)");
        goto cleanup;
    }
    if (json_dumpf(root, out, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0 || fputc('\n', out) == EOF ||
        fflush(out) != 0 || ferror(out)) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot write the JSON report");
        goto cleanup;
    }
cleanup:
    json_decref(root);
    return st;
}
