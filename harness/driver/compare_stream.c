#include "harness/driver/compare_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/clock.h"
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

/* Appends count results and n_findings findings (at any alignment) to out. */
static eq_status append_results(eq_comparison *out, const void *results, int count, const void *findings,
                                int n_findings)
{
    if (count > 0) {
        eq_tensor_result *grown = realloc(out->results, (size_t)(out->count + count) * sizeof *grown);
        if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d results", out->count + count);
        out->results = grown;
        memcpy(out->results + out->count, results, (size_t)count * sizeof *grown);
        out->count += count;
    }
    if (n_findings > 0) {
        char(*grown)[EQ_FINDING_MAX] = realloc(out->findings, (size_t)(out->n_findings + n_findings) * sizeof *grown);
        if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d findings", out->n_findings + n_findings);
        out->findings = grown;
        memcpy(out->findings + out->n_findings, findings, (size_t)n_findings * sizeof *grown);
        out->n_findings += n_findings;
    }
    return EQ_OK;
}

/* Appends the batch's results and findings to out. */
static eq_status take_batch(eq_comparison *out, const eq_comparison *batch)
{
    return append_results(out, batch->results, batch->count, batch->findings, batch->n_findings);
}

/* The progress line's phase and count: "compare: at 2.1 GB/s, tensor 12/24, 5 s, about 5 s left"
 * (both runs' bytes read per second so far; harness/progress.h adds the times). */
static void show_progress(const eq_stream_compare *c, int done, int total, double bytes, double start)
{
    if (c->progress == NULL) return;
    char phase[64];
    const double s = eq_monotonic_seconds() - start;
    snprintf(phase, sizeof phase, "at %.2g GB/s, tensor", s > 0 ? bytes / s / 1e9 : 0.0);
    eq_progress_phase(c->progress, phase, done, total, bytes);
}

/* The length of the batch that starts at tensor `first` of the reference. */
static int batch_length(const eq_capture *ref, int first)
{
    return eq_capture_batch(ref, first, EQ_STREAM_BATCH_BYTES, EQ_STREAM_BATCH_TENSORS);
}

/* The batch that starts at tensor `first`: its length, and the paths each run is asked for (the
 * batch's tensors, then their GEMM operands). One process's loop and each process of a --comm mpi
 * compare form every batch here, so that batch b is the same wherever it is compared. */
static eq_status form_batch(const eq_stream_compare *c, const eq_gemm_site *sites, int first, path_list *ask,
                            path_list *ask_truth, int *length)
{
    eq_status st = EQ_OK;
    const eq_capture *ref = eq_run_stream_index(c->ref), *test = eq_run_stream_index(c->test);
    const eq_capture *truth = c->truth != NULL ? eq_run_stream_index(c->truth) : NULL;
    const int n = batch_length(ref, first);
    ask->n = ask_truth->n = 0;
    for (int i = first; i < first + n; i++) {
        const char *path = ref->entries[i].path;
        EQ_TRY(list_add(ask, path));
        if (truth != NULL && eq_capture_find(truth, path) != NULL) EQ_TRY(list_add(ask_truth, path));
    }
    for (int i = first; i < first + n; i++) {
        char a[EQ_NAME_MAX], b[EQ_NAME_MAX];
        if (!eq_gemm_operand_paths(ref, &ref->entries[i], sites, a, b)) continue;
        const eq_capture_entry *ea = eq_capture_find(ref, a), *eb = eq_capture_find(ref, b);
        if (ea == NULL || eb == NULL || eq_capture_find(test, a) == NULL || eq_capture_find(test, b) == NULL)
            continue; /* no bound without both operands in both runs */
        EQ_TRY(list_add(ask, ea->path));
        EQ_TRY(list_add(ask, eb->path));
    }
    *length = n;
cleanup:
    return st;
}

/* Each run's dtype check (harness/run_load.h): reference, test, truth. */
typedef struct {
    eq_dtype_check run[3];
} dtype_checks;

static void dtype_checks_begin(const eq_stream_compare *c, dtype_checks *d)
{
    memset(d, 0, sizeof *d);
    eq_dtype_check_begin(&d->run[0], eq_run_stream_index(c->ref));
    eq_dtype_check_begin(&d->run[1], eq_run_stream_index(c->test));
    if (c->truth != NULL) eq_dtype_check_begin(&d->run[2], eq_run_stream_index(c->truth));
}

/* A batch in flight: what each run is asked for, then what came back. */
typedef struct {
    path_list ask, ask_truth;
    int first, n;       /* the reference's tensors [first, first + n) */
    int64_t number;     /* the batch's number, from 0 in the reference's order */
    eq_capture got[3];  /* reference, test, truth */
} batch_io;

static void batch_io_release(batch_io *b)
{
    for (int k = 0; k < 3; k++) eq_capture_free(&b->got[k]);
}

static void batch_io_free(batch_io *b)
{
    batch_io_release(b);
    free(b->ask.paths);
    free(b->ask_truth.paths);
}

/* Asks both runs' readers (and the truth's) for the batch: they read it while this process goes on. */
static eq_status send_batch(const eq_stream_compare *c, const batch_io *b)
{
    eq_status st = eq_run_stream_send(c->ref, b->ask.paths, b->ask.n);
    if (st == EQ_OK) st = eq_run_stream_send(c->test, b->ask.paths, b->ask.n);
    if (st == EQ_OK && c->truth != NULL && b->ask_truth.n > 0)
        st = eq_run_stream_send(c->truth, b->ask_truth.paths, b->ask_truth.n);
    return st;
}

static eq_status receive_batch(const eq_stream_compare *c, batch_io *b)
{
    eq_status st = eq_run_stream_receive(c->ref, &b->got[0]);
    if (st == EQ_OK) st = eq_run_stream_receive(c->test, &b->got[1]);
    if (st == EQ_OK && c->truth != NULL && b->ask_truth.n > 0) st = eq_run_stream_receive(c->truth, &b->got[2]);
    return st;
}

/* The evidence of a received batch (its first n tensors of each run) into batch; its tensors added
 * to the dtype checks. */
static eq_status batch_evidence(const eq_stream_compare *c, batch_io *b, const eq_tolerance *tol,
                                const eq_tolerance *grad_tol, eq_expect expect, dtype_checks *dtype,
                                eq_comparison *batch)
{
    const int truth = c->truth != NULL;
    if (c->check_dtype)
        for (int k = 0; k < (truth ? 3 : 2); k++) eq_dtype_check_add(&dtype->run[k], &b->got[k]);
    const eq_capture ref_batch = view_of(&b->got[0], b->n, &c->ref_meta),
                     test_batch = view_of(&b->got[1], b->n, &c->test_meta);
    b->got[0].meta = c->ref_meta; /* the bound reads the layouts from the captures with the operands */
    b->got[1].meta = c->test_meta;
    return eq_compare_evidence(&ref_batch, &test_batch, &b->got[0], &b->got[1], truth ? &b->got[2] : NULL, tol,
                               grad_tol, expect, batch);
}

/* out before the first batch: the runs as the report names them, the tolerances, the expectation. */
static eq_status begin_comparison(const eq_stream_compare *c, const eq_tolerance *tol, const eq_tolerance *grad_tol,
                                  eq_expect expect, eq_comparison *out)
{
    memset(out, 0, sizeof *out);
    out->ref_meta = c->ref_meta;
    out->test_meta = c->test_meta;
    out->tol = *tol;
    out->grad_tol = *grad_tol;
    out->expect = expect;
    return eq_compare_check_paths(eq_run_stream_index(c->ref), eq_run_stream_index(c->test));
}

/* out after the last batch: the dtype checks' outcome, the case's lines, the verdict. */
static eq_status end_comparison(const eq_stream_compare *c, const dtype_checks *dtype, const eq_case *kase,
                                eq_comparison *out)
{
    eq_status st = EQ_OK;
    if (c->check_dtype) {
        EQ_TRY(eq_dtype_check_end(&dtype->run[0], c->ref_path));
        EQ_TRY(eq_dtype_check_end(&dtype->run[1], c->test_path));
        if (c->truth != NULL) EQ_TRY(eq_dtype_check_end(&dtype->run[2], c->truth_path));
    }
    if (kase != NULL) eq_comparison_apply_case(out, kase);
    eq_judge(out);
cleanup:
    return st;
}

static const eq_gemm_site *gemm_sites(const eq_stream_compare *c)
{
    const eq_model *model = eq_compare_model(&eq_run_stream_index(c->ref)->meta);
    return model != NULL ? model->gemm_sites : NULL;
}

/* What a process does with each batch it compares, in batch order: evidence and the batch's own
 * dtype checks. */
typedef eq_status (*batch_done)(void *ctx, const batch_io *b, const dtype_checks *dtype, const eq_comparison *batch);

/* From (first, number) on, the start and number of the next batch numbered rank modulo size. */
static void next_batch(const eq_capture *ref, int rank, int size, int *first, int64_t *number)
{
    while (*first < ref->count && *number % size != rank) {
        *first += batch_length(ref, *first);
        (*number)++;
    }
}

static eq_status start_batch(const eq_stream_compare *c, const eq_gemm_site *sites, int first, int64_t number,
                             batch_io *b)
{
    b->first = first;
    b->number = number;
    eq_status st = form_batch(c, sites, first, &b->ask, &b->ask_truth, &b->n);
    return st == EQ_OK ? send_batch(c, b) : st;
}

/* The reference's bytes in the batch that starts at `first`. */
static double batch_bytes(const eq_capture *ref, int first)
{
    double bytes = 0.0;
    for (int i = first, n = batch_length(ref, first); i < first + n; i++)
        bytes += (double)eq_tensor_bytes(&ref->entries[i].tensor);
    return bytes;
}

/* Compares the batches numbered rank, rank + size, ... (one process: every batch), handing each to
 * done. The readers read batch k + 1 while this process compares batch k where batch k + 1 holds
 * at most EQ_STREAM_BATCH_BYTES: then two batches are in memory at a time, a constant; a tensor
 * larger than that is read once the one before is done, so it takes 3x its size at most (the
 * reference's, the test run's parts and their assembly), less than twice its pair. */
static eq_status run_batches(const eq_stream_compare *c, const eq_tolerance *tol, const eq_tolerance *grad_tol,
                             eq_expect expect, int rank, int size, batch_done done, void *ctx)
{
    eq_status st = EQ_OK;
    const eq_capture *ref = eq_run_stream_index(c->ref);
    const eq_gemm_site *sites = gemm_sites(c);
    batch_io io[2];
    eq_comparison batch;
    dtype_checks dtype;
    memset(io, 0, sizeof io);
    memset(&batch, 0, sizeof batch);
    int cur = 0, first = 0, sent = 0;
    int64_t number = 0;
    eq_tensor_keep_freed(1); /* each batch's assembly in the storage of the batch before */
    next_batch(ref, rank, size, &first, &number);
    while (first < ref->count) {
        batch_io *b = &io[cur];
        if (!sent) EQ_TRY(start_batch(c, sites, first, number, b));
        EQ_TRY(receive_batch(c, b));
        int after = b->first + b->n;
        int64_t next = b->number + 1;
        next_batch(ref, rank, size, &after, &next);
        sent = after < ref->count && batch_bytes(ref, after) <= EQ_STREAM_BATCH_BYTES;
        if (sent) EQ_TRY(start_batch(c, sites, after, next, &io[cur ^ 1]));
        dtype_checks_begin(c, &dtype);
        EQ_TRY(batch_evidence(c, b, tol, grad_tol, expect, &dtype, &batch));
        batch_io_release(b);
        EQ_TRY(done(ctx, b, &dtype, &batch));
        eq_comparison_free(&batch);
        first = after;
        number = next;
        cur ^= 1;
    }
cleanup:
    eq_comparison_free(&batch);
    batch_io_free(&io[0]);
    batch_io_free(&io[1]);
    eq_tensor_keep_freed(0);
    return st;
}

/* The progress of the batches a process compares. */
typedef struct {
    const eq_stream_compare *c;
    double start, done_bytes;
} progress_state;

static void batch_progress(progress_state *p, const batch_io *b)
{
    const eq_capture *ref = eq_run_stream_index(p->c->ref);
    p->done_bytes += 2.0 * batch_bytes(ref, b->first); /* both runs' */
    show_progress(p->c, b->first + b->n, ref->count, p->done_bytes, p->start);
}

/* One process: every batch's results into the comparison, its dtype checks into the run's. */
typedef struct {
    progress_state progress;
    eq_comparison *out;
    dtype_checks *dtype;
} whole_state;

static eq_status take_whole(void *ctx, const batch_io *b, const dtype_checks *dtype, const eq_comparison *batch)
{
    whole_state *w = ctx;
    for (int k = 0; w->progress.c->check_dtype && k < 3; k++) eq_dtype_check_merge(&w->dtype->run[k], &dtype->run[k]);
    eq_status st = take_batch(w->out, batch);
    batch_progress(&w->progress, b);
    return st;
}

eq_status eq_compare_streams(const eq_stream_compare *c, const eq_tolerance *tol, const eq_tolerance *grad_tol,
                             eq_expect expect, const eq_case *kase, eq_comparison *out)
{
    eq_status st = EQ_OK;
    dtype_checks dtype;
    EQ_TRY(begin_comparison(c, tol, grad_tol, expect, out));
    dtype_checks_begin(c, &dtype);
    eq_progress_work(c->progress, eq_run_stream_bytes(c->ref) + eq_run_stream_bytes(c->test));
    whole_state w = {{c, eq_monotonic_seconds(), 0.0}, out, &dtype};
    EQ_TRY(run_batches(c, tol, grad_tol, expect, 0, 1, take_whole, &w));
    EQ_TRY(end_comparison(c, &dtype, kase, out));
cleanup:
    if (st != EQ_OK) eq_comparison_free(out);
    return st;
}

/* --comm mpi: a process's batches as bytes for rank 0. Each batch is a record: its header, then
 * `count` eq_tensor_result, then `n_findings` findings (plain data: every rank runs the same
 * build, which the ranks check when they start). */
typedef struct {
    int64_t batch;                 /* its number, from 0 in the reference's order */
    int32_t count, n_findings;
    dtype_checks dtype;            /* the dtype checks of its tensors alone */
} batch_record;

typedef struct {
    char *bytes;
    size_t n, cap;
} byte_buffer;

static eq_status put_bytes(byte_buffer *b, const void *bytes, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : (size_t)1 << 16;
        while (cap < b->n + n) cap *= 2;
        char *grown = realloc(b->bytes, cap);
        if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %zu bytes of results", cap);
        b->bytes = grown;
        b->cap = cap;
    }
    if (n > 0) memcpy(b->bytes + b->n, bytes, n);
    b->n += n;
    return EQ_OK;
}

static eq_status put_batch(byte_buffer *b, int64_t number, const dtype_checks *dtype, const eq_comparison *batch)
{
    eq_status st = EQ_OK;
    batch_record r;
    memset(&r, 0, sizeof r);
    r.batch = number;
    r.count = batch->count;
    r.n_findings = batch->n_findings;
    r.dtype = *dtype;
    EQ_TRY(put_bytes(b, &r, sizeof r));
    EQ_TRY(put_bytes(b, batch->results, (size_t)batch->count * sizeof *batch->results));
    EQ_TRY(put_bytes(b, batch->findings, (size_t)batch->n_findings * sizeof *batch->findings));
cleanup:
    return st;
}

/* --comm mpi: each batch this process compares as a record of its part. */
typedef struct {
    progress_state progress;
    byte_buffer bytes;
} part_state;

static eq_status take_part(void *ctx, const batch_io *b, const dtype_checks *dtype, const eq_comparison *batch)
{
    part_state *p = ctx;
    eq_status st = put_batch(&p->bytes, b->number, dtype, batch);
    batch_progress(&p->progress, b);
    return st;
}

eq_status eq_compare_streams_part(const eq_stream_compare *c, const eq_tolerance *tol, const eq_tolerance *grad_tol,
                                  eq_expect expect, int rank, int size, void **part, size_t *part_bytes)
{
    eq_status st = EQ_OK;
    eq_comparison none;
    part_state p = {{c, eq_monotonic_seconds(), 0.0}, {0}};
    *part = NULL;
    *part_bytes = 0;
    EQ_TRY(begin_comparison(c, tol, grad_tol, expect, &none)); /* every process checks the paths */
    eq_progress_work(c->progress, (eq_run_stream_bytes(c->ref) + eq_run_stream_bytes(c->test)) / size);
    EQ_TRY(run_batches(c, tol, grad_tol, expect, rank, size, take_part, &p));
    *part = p.bytes.bytes;
    *part_bytes = p.bytes.n;
    p.bytes.bytes = NULL;
cleanup:
    free(p.bytes.bytes);
    return st;
}

/* Appends the record at *at of part (rank `from`'s, `bytes` long) to out, which must be batch
 * `number` of `count` tensors' results, and moves *at past it. */
static eq_status take_record(const char *part, size_t bytes, size_t *at, int from, int64_t number, int count,
                             dtype_checks *dtype, const eq_stream_compare *c, eq_comparison *out)
{
    batch_record r;
    if (bytes - *at < sizeof r)
        return EQ_FAIL(EQ_ERR_INTERNAL, "rank %d sent no batch %lld (%zu of its %zu bytes read)", from,
                       (long long)number, *at, bytes);
    memcpy(&r, part + *at, sizeof r);
    const size_t results = (size_t)r.count * sizeof(eq_tensor_result), findings = (size_t)r.n_findings * EQ_FINDING_MAX;
    if (r.batch != number || r.count < 0 || r.count > count || r.n_findings < 0 ||
        bytes - *at - sizeof r < results + findings)
        return EQ_FAIL(EQ_ERR_INTERNAL, "rank %d sent batch %lld (%d results) where batch %lld (at most %d) was due",
                       from, (long long)r.batch, (int)r.count, (long long)number, count);
    for (int k = 0; c->check_dtype && k < 3; k++) eq_dtype_check_merge(&dtype->run[k], &r.dtype.run[k]);
    const char *body = part + *at + sizeof r;
    const eq_status st = append_results(out, body, r.count, body + results, r.n_findings);
    *at += sizeof r + results + findings;
    return st;
}

eq_status eq_compare_streams_merge(const eq_stream_compare *c, const eq_tolerance *tol, const eq_tolerance *grad_tol,
                                   eq_expect expect, const eq_case *kase, void *const *parts, const size_t *sizes,
                                   int size, eq_comparison *out)
{
    eq_status st = EQ_OK;
    const eq_capture *ref = eq_run_stream_index(c->ref);
    dtype_checks dtype;
    size_t *at = calloc((size_t)size, sizeof *at);
    if (at == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to merge %d processes' results", size);
    EQ_TRY(begin_comparison(c, tol, grad_tol, expect, out));
    dtype_checks_begin(c, &dtype);
    int64_t number = 0;
    for (int first = 0; first < ref->count; number++) { /* batch b from process b % size, in order */
        const int n = batch_length(ref, first), from = (int)(number % size);
        EQ_TRY(take_record(parts[from], sizes[from], &at[from], from, number, n, &dtype, c, out));
        first += n;
    }
    for (int r = 0; r < size; r++)
        if (at[r] != sizes[r])
            EQ_TRY(EQ_FAIL(EQ_ERR_INTERNAL, "rank %d sent %zu bytes more than its batches of %lld", r,
                           sizes[r] - at[r], (long long)number));
    EQ_TRY(end_comparison(c, &dtype, kase, out));
cleanup:
    free(at);
    if (st != EQ_OK) eq_comparison_free(out);
    return st;
}
