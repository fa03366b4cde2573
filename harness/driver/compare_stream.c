#include "harness/driver/compare_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/driver/runner.h"
#include "harness/rounding_bound.h"
#include "harness/run_load.h"
#include "harness/verdict.h"

/* The paths one run is asked for in a batch: the batch's tensors first, then what they need. */
typedef struct {
    const char **paths;
    int n, cap;
} path_list;

static eq_status list_add(path_list *l, const char *path)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->paths[i], path) == 0) return EQ_OK;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        const char **grown = realloc(l->paths, (size_t)cap * sizeof *grown);
        if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for a batch of %d tensors", cap);
        l->paths = grown;
        l->cap = cap;
    }
    l->paths[l->n++] = path;
    return EQ_OK;
}

/* The batch's first `count` tensors of got, as a capture of their own (no copy, no index: found in
 * order) with the run's meta as the report names it and got's findings. */
static eq_capture view_of(const eq_capture *got, int count, const eq_run_meta *meta)
{
    eq_capture v;
    memset(&v, 0, sizeof v);
    v.meta = *meta;
    v.entries = got->entries;
    v.count = v.capacity = count;
    v.findings = got->findings;
    v.n_findings = got->n_findings;
    return v;
}

/* Appends the batch's results and findings to out. */
static eq_status take_batch(eq_comparison *out, eq_comparison *batch)
{
    if (batch->count > 0) {
        eq_tensor_result *grown = realloc(out->results, (size_t)(out->count + batch->count) * sizeof *grown);
        if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d results", out->count + batch->count);
        out->results = grown;
        memcpy(out->results + out->count, batch->results, (size_t)batch->count * sizeof *grown);
        out->count += batch->count;
    }
    if (batch->n_findings > 0) {
        char(*grown)[EQ_FINDING_MAX] = realloc(out->findings, (size_t)(out->n_findings + batch->n_findings) *
                                                                  sizeof *grown);
        if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d findings", out->n_findings + batch->n_findings);
        out->findings = grown;
        memcpy(out->findings + out->n_findings, batch->findings, (size_t)batch->n_findings * sizeof *grown);
        out->n_findings += batch->n_findings;
    }
    return EQ_OK;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The progress line's phase: "compare, 2.1 GB/s" (both runs' bytes read per second). */
static void show_progress(const eq_stream_compare *c, int done, int total, double bytes, double start)
{
    if (c->progress == NULL) return;
    char phase[64];
    const double s = now_s() - start;
    snprintf(phase, sizeof phase, "compare, %.2g GB/s", s > 0 ? bytes / s / 1e9 : 0.0);
    eq_progress_phase(c->progress, phase, done, total, bytes);
}

eq_status eq_compare_streams(const eq_stream_compare *c, const eq_tolerance *tol, const eq_tolerance *grad_tol,
                             eq_expect expect, const eq_case *kase, eq_comparison *out)
{
    eq_status st = EQ_OK;
    const eq_capture *ref = eq_run_stream_index(c->ref), *test = eq_run_stream_index(c->test);
    const eq_capture *truth = c->truth != NULL ? eq_run_stream_index(c->truth) : NULL;
    path_list ask = {0}, ask_truth = {0};
    eq_capture got_ref, got_test, got_truth;
    eq_comparison batch;
    eq_dtype_check dtype_ref, dtype_test, dtype_truth;
    memset(out, 0, sizeof *out);
    memset(&batch, 0, sizeof batch);
    eq_capture_init(&got_ref);
    eq_capture_init(&got_test);
    eq_capture_init(&got_truth);
    EQ_TRY(eq_compare_check_paths(ref, test));
    eq_dtype_check_begin(&dtype_ref, ref);
    eq_dtype_check_begin(&dtype_test, test);
    if (truth != NULL) eq_dtype_check_begin(&dtype_truth, truth);
    const eq_model *model = eq_compare_model(&ref->meta);
    const eq_gemm_site *sites = model != NULL ? model->gemm_sites : NULL;
    const double total = eq_run_stream_bytes(c->ref) + eq_run_stream_bytes(c->test), start = now_s();
    double done_bytes = 0.0;
    eq_progress_work(c->progress, total);
    out->ref_meta = c->ref_meta;
    out->test_meta = c->test_meta;
    out->tol = *tol;
    out->grad_tol = *grad_tol;
    out->expect = expect;
    for (int first = 0; first < ref->count;) {
        /* the batch: tensors [first, first + n) of the reference, then their GEMM operands */
        int n = 0;
        double bytes = 0.0;
        ask.n = ask_truth.n = 0;
        while (first + n < ref->count && n < EQ_STREAM_BATCH_TENSORS) {
            const double b = (double)eq_tensor_bytes(&ref->entries[first + n].tensor);
            if (n > 0 && bytes + b > EQ_STREAM_BATCH_BYTES) break;
            const char *path = ref->entries[first + n].path;
            EQ_TRY(list_add(&ask, path));
            if (truth != NULL && eq_capture_find(truth, path) != NULL) EQ_TRY(list_add(&ask_truth, path));
            bytes += b;
            n++;
        }
        for (int i = first; i < first + n; i++) {
            char a[EQ_NAME_MAX], b[EQ_NAME_MAX];
            if (!eq_gemm_operand_paths(ref, &ref->entries[i], sites, a, b)) continue;
            const eq_capture_entry *ea = eq_capture_find(ref, a), *eb = eq_capture_find(ref, b);
            if (ea == NULL || eb == NULL || eq_capture_find(test, a) == NULL || eq_capture_find(test, b) == NULL)
                continue; /* no bound without both operands in both runs */
            EQ_TRY(list_add(&ask, ea->path));
            EQ_TRY(list_add(&ask, eb->path));
        }
        /* both readers (and the truth's) work at once */
        EQ_TRY(eq_run_stream_send(c->ref, ask.paths, ask.n));
        EQ_TRY(eq_run_stream_send(c->test, ask.paths, ask.n));
        if (truth != NULL && ask_truth.n > 0) EQ_TRY(eq_run_stream_send(c->truth, ask_truth.paths, ask_truth.n));
        EQ_TRY(eq_run_stream_receive(c->ref, &got_ref));
        EQ_TRY(eq_run_stream_receive(c->test, &got_test));
        if (truth != NULL && ask_truth.n > 0) EQ_TRY(eq_run_stream_receive(c->truth, &got_truth));
        if (c->check_dtype) {
            eq_dtype_check_add(&dtype_ref, &got_ref);
            eq_dtype_check_add(&dtype_test, &got_test);
            if (truth != NULL) eq_dtype_check_add(&dtype_truth, &got_truth);
        }
        const eq_capture ref_batch = view_of(&got_ref, n, &c->ref_meta), test_batch = view_of(&got_test, n,
                                                                                                &c->test_meta);
        got_ref.meta = c->ref_meta; /* the bound reads the layouts from the captures with the operands */
        got_test.meta = c->test_meta;
        EQ_TRY(eq_compare_evidence(&ref_batch, &test_batch, &got_ref, &got_test, truth != NULL ? &got_truth : NULL,
                                   tol, grad_tol, expect, &batch));
        EQ_TRY(take_batch(out, &batch));
        eq_comparison_free(&batch);
        eq_capture_free(&got_ref);
        eq_capture_free(&got_test);
        eq_capture_free(&got_truth);
        for (int i = first; i < first + n; i++) done_bytes += 2.0 * (double)eq_tensor_bytes(&ref->entries[i].tensor);
        first += n;
        show_progress(c, first, ref->count, done_bytes, start);
    }
    if (c->check_dtype) {
        EQ_TRY(eq_dtype_check_end(&dtype_ref, c->ref_path));
        EQ_TRY(eq_dtype_check_end(&dtype_test, c->test_path));
        if (truth != NULL) EQ_TRY(eq_dtype_check_end(&dtype_truth, c->truth_path));
    }
    if (kase != NULL) eq_comparison_apply_case(out, kase);
    eq_judge(out);
cleanup:
    eq_comparison_free(&batch);
    eq_capture_free(&got_ref);
    eq_capture_free(&got_test);
    eq_capture_free(&got_truth);
    free(ask.paths);
    free(ask_truth.paths);
    if (st != EQ_OK) eq_comparison_free(out);
    return st;
}
