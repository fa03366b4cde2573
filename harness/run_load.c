#include "harness/run_load.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/dump.h"
#include "harness/dump_read_isolated.h"
#include "harness/run_stream.h"

/* The first element of t that dtype d cannot hold exactly, or -1 (NaN and Inf it holds; a tensor
 * stored in d or coarser holds only values of d). */
static int64_t first_not_of_dtype(const eq_tensor *t, eq_dtype d)
{
    if (eq_dtype_unit_roundoff(t->dtype) >= eq_dtype_unit_roundoff(d)) return -1;
    const int64_t n = eq_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        const double v = eq_tensor_get(t, i);
        if (!isfinite(v)) continue;
        const float f = (float)v; /* out of fp32's range: Inf, not v */
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        if ((double)f != v || (d == EQ_BF16 && (bits & 0xffffu) != 0)) return i;
    }
    return -1;
}

void eq_dtype_check_begin(eq_dtype_check *c, const eq_capture *run)
{
    memset(c, 0, sizeof *c);
    c->dtype = run->meta.dtype;
    c->decides = EQ_ROLE_GRAD;
    for (int i = 0; i < run->count; i++)
        if (run->entries[i].role == EQ_ROLE_ACTIVATION) c->decides = EQ_ROLE_ACTIVATION;
}

void eq_dtype_check_add(eq_dtype_check *c, const eq_capture *tensors)
{
    for (int i = 0; i < tensors->count && !c->passed; i++) {
        const eq_capture_entry *e = &tensors->entries[i];
        if (e->role != c->decides || eq_tensor_numel(&e->tensor) == 0) continue;
        const int64_t k = first_not_of_dtype(&e->tensor, c->dtype);
        if (k < 0) {
            c->passed = 1;
        } else if (!c->witnessed) {
            c->witnessed = 1;
            snprintf(c->path, sizeof c->path, "%s", e->path);
            c->stored = e->tensor.dtype;
            c->at = k;
            c->value = eq_tensor_get(&e->tensor, k);
        }
    }
}

void eq_dtype_check_merge(eq_dtype_check *c, const eq_dtype_check *later)
{
    if (c->passed) return; /* adding stops at the first tensor that passes */
    if (!c->witnessed && later->witnessed) {
        c->witnessed = 1;
        snprintf(c->path, sizeof c->path, "%s", later->path);
        c->stored = later->stored;
        c->at = later->at;
        c->value = later->value;
    }
    c->passed = later->passed;
}

eq_status eq_dtype_check_end(const eq_dtype_check *c, const char *path)
{
    if (c->passed || !c->witnessed) return EQ_OK; /* nothing it judges by a tolerance holds an element */
    return EQ_FAIL(EQ_ERR_INPUT, "%s: the run says its dtype is %s, but no %s holds %s values: %.100s is stored as %s "
                   "and element %lld is %.9g, which %s cannot hold (a dtype coarser than the data would loosen the "
                   "tolerance; declare the dtype the run computed in, or leave it out)", path, eq_dtype_name(c->dtype),
                   eq_role_name(c->decides), eq_dtype_name(c->dtype), c->path, eq_dtype_name(c->stored),
                   (long long)c->at, c->value, eq_dtype_name(c->dtype));
}

eq_status eq_run_check_dtype(const eq_capture *run, const char *path)
{
    eq_dtype_check c;
    eq_dtype_check_begin(&c, run);
    eq_dtype_check_add(&c, run);
    return eq_dtype_check_end(&c, path);
}

static int compare_strings(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The *.h5 files of a directory, sorted by name. */
static eq_status list_h5(const char *dir, char ***paths_out, int *n_out)
{
    eq_status st = EQ_OK;
    char **paths = NULL;
    int n = 0, cap = 0;
    DIR *d = opendir(dir);
    *paths_out = NULL;
    *n_out = 0;
    if (d == NULL) return EQ_FAIL(EQ_ERR_INPUT, "cannot open run directory %s: %s", dir, strerror(errno));
    for (struct dirent *ent; (ent = readdir(d)) != NULL;) {
        size_t len = strlen(ent->d_name);
        if (len < 4 || strcmp(ent->d_name + len - 3, ".h5") != 0 || ent->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(paths, (size_t)cap * sizeof *grown);
            if (grown == NULL) {
                st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to list %s", dir);
                goto cleanup;
            }
            paths = grown;
        }
        size_t size = strlen(dir) + len + 2;
        if ((paths[n] = malloc(size)) == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to list %s", dir);
            goto cleanup;
        }
        snprintf(paths[n++], size, "%s/%s", dir, ent->d_name);
    }
    if (n > 0) qsort(paths, (size_t)n, sizeof *paths, compare_strings);
    *paths_out = paths;
    *n_out = n;
    paths = NULL;
cleanup:
    closedir(d);
    if (paths != NULL)
        for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    return st;
}

eq_status eq_run_kind(const char *path, const char *const *files, int n, const eq_capture *caps, int *assemble)
{
    *assemble = 0;
    if (n == 1) {
        const eq_run_meta *m = &caps[0].meta;
        if (m->has_rank && m->world_size > 1)
            return EQ_FAIL(EQ_ERR_INPUT, "%s is rank %d's file of a run of %d ranks: compare the directory that holds "
                           "all %d", files[0], m->rank, m->world_size, m->world_size);
        *assemble = m->has_rank; /* the only rank of a world of one; else full tensors already */
        return EQ_OK;
    }
    for (int i = 0; i < n; i++)
        if (!caps[i].meta.has_rank)
            return EQ_FAIL(EQ_ERR_INPUT, "run directory %s holds %d files and %s is not a rank's file (a run directory "
                           "holds one run's rank files; name one dump to compare it)", path, n, files[i]);
    *assemble = 1;
    return EQ_OK;
}

eq_status eq_run_files(const char *path, char ***files, int *n)
{
    struct stat sb;
    *files = NULL;
    *n = 0;
    if (stat(path, &sb) != 0) {
        int err = errno;
        return err == ENOENT ? EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: no such file or directory", path)
                             : EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: %s", path, strerror(err));
    }
    if (S_ISDIR(sb.st_mode)) {
        eq_status st = list_h5(path, files, n);
        if (st == EQ_OK && *n == 0) st = EQ_FAIL(EQ_ERR_INPUT, "run directory %s holds no .h5 files", path);
        return st;
    }
    if ((*files = calloc(1, sizeof **files)) == NULL || ((*files)[0] = strdup(path)) == NULL) {
        free(*files);
        *files = NULL;
        return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %s", path);
    }
    *n = 1;
    return EQ_OK;
}

/* eq_run_load_with: every file read whole by read, then assembled (eq_run_load streams instead). */
static eq_status load(const char *path, eq_dump_reader read, eq_capture *out)
{
    eq_status st = EQ_OK;
    char **paths = NULL;
    eq_capture *ranks = NULL;
    int n = 0, assemble = 0;
    eq_capture_init(out);
    EQ_TRY(eq_run_files(path, &paths, &n));
    if ((ranks = calloc((size_t)n, sizeof *ranks)) == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the %d rank files of %s", n, path);
        goto cleanup;
    }
    for (int i = 0; i < n; i++) EQ_TRY(read(paths[i], &ranks[i]));
    EQ_TRY(eq_run_kind(path, (const char *const *)paths, n, ranks, &assemble));
    if (assemble) {
        EQ_TRY(eq_run_assemble(ranks, (const char *const *)paths, n, out));
    } else { /* already whole: handed over */
        *out = ranks[0];
        eq_capture_init(&ranks[0]);
    }
cleanup:
    for (int i = 0; i < n; i++) {
        if (ranks != NULL) eq_capture_free(&ranks[i]);
        free(paths[i]);
    }
    free(ranks);
    free(paths);
    return st;
}

/* Tensors eq_run_load asks the stream for at a time: at most this many bytes (one larger tensor
 * alone), at most EQ_DUMP_BATCH_MAX of them. */
#define LOAD_BATCH_BYTES ((double)(256 << 20))

eq_status eq_run_load(const char *path, eq_capture *out)
{
    eq_status st = EQ_OK;
    eq_run_stream *s = NULL;
    eq_capture got;
    const char **paths = NULL;
    eq_capture_init(out);
    eq_capture_init(&got);
    EQ_TRY(eq_run_stream_open(path, &s));
    const eq_capture *run = eq_run_stream_index(s);
    out->meta = run->meta;
    if ((paths = calloc((size_t)(run->count > 0 ? run->count : 1), sizeof *paths)) == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %s", path);
        goto cleanup;
    }
    for (int first = 0; first < run->count;) {
        const int n = eq_capture_batch(run, first, LOAD_BATCH_BYTES, EQ_DUMP_BATCH_MAX);
        for (int k = 0; k < n; k++) paths[k] = run->entries[first + k].path;
        EQ_TRY(eq_run_stream_send(s, paths, n));
        EQ_TRY(eq_run_stream_receive(s, &got));
        for (int i = 0; i < got.count; i++) {
            eq_capture_entry e = got.entries[i];
            if (e.borrowed) EQ_TRY(eq_tensor_clone(&e.tensor, &got.entries[i].tensor));
            else memset(&got.entries[i].tensor, 0, sizeof got.entries[i].tensor); /* handed over */
            e.borrowed = 0;
            EQ_TRY(eq_capture_add_entry(out, &e));
        }
        for (int i = 0; i < got.n_findings; i++) EQ_TRY(eq_capture_add_finding(out, "%s", got.findings[i]));
        eq_capture_free(&got);
        first += n;
    }
cleanup:
    eq_capture_free(&got);
    eq_run_stream_close(s);
    free(paths);
    if (st != EQ_OK) eq_capture_free(out);
    return st;
}

eq_status eq_run_load_with(const char *path, eq_dump_reader read, eq_capture *out) { return load(path, read, out); }
