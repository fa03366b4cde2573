#include "harness/run_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/dump_read_isolated.h"
#include "harness/run_layout.h"
#include "harness/run_load.h"

/* Replicas of one tensor found to differ that are read, to say how (harness/run_layout.c reports
 * one per pair of groups; four cover any run of dp, tp, cp and ep). */
#define MAX_DIFFERING 4

struct eq_run_stream {
    char **files;           /* [n] */
    int n, assemble;        /* assemble: rank files; else one file of full tensors */
    eq_dump_server *server;
    eq_capture *index;      /* [n]: each file's, without data */
    eq_capture run;         /* the run, without data */
    /* the batch asked for */
    char (*want)[EQ_NAME_MAX];
    int n_want, cap_want;
    eq_dump_request *req;   /* every read and check of the batch, in order */
    int n_req, cap_req, sent; /* requests [0, sent) are sent */
    int slot;               /* the reader's shared buffer this batch reads into (batches alternate) */
    int *at;                /* [n_want * n]: rank r's request for path k (-1: none) */
    size_t bytes;           /* of the shared buffer the batch uses */
    eq_capture *minis;      /* [n]: a rank's capture of one tensor, to assemble it */
    eq_capture_entry *slots; /* [n]: their entries */
};

static size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

eq_status eq_run_stream_open(const char *path, eq_run_stream **out)
{
    eq_status st = EQ_OK;
    eq_run_stream *s = calloc(1, sizeof *s);
    *out = NULL;
    if (s == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %s", path);
    eq_capture_init(&s->run);
    EQ_TRY(eq_run_files(path, &s->files, &s->n));
    if ((s->index = calloc((size_t)s->n, sizeof *s->index)) == NULL ||
        (s->minis = calloc((size_t)s->n, sizeof *s->minis)) == NULL ||
        (s->slots = calloc((size_t)s->n, sizeof *s->slots)) == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory for the %d files of %s", s->n, path);
        goto cleanup;
    }
    EQ_TRY(eq_dump_server_open((const char *const *)s->files, s->n, &s->server, s->index));
    EQ_TRY(eq_run_kind(path, (const char *const *)s->files, s->n, s->index, &s->assemble));
    if (s->assemble) {
        EQ_TRY(eq_run_assemble_index(s->index, (const char *const *)s->files, s->n, &s->run));
    } else {
        s->run.meta = s->index[0].meta;
        for (int i = 0; i < s->index[0].count; i++) {
            eq_capture_entry e = s->index[0].entries[i];
            e.borrowed = 1; /* no data */
            EQ_TRY(eq_capture_add_entry(&s->run, &e));
        }
    }
    *out = s;
    s = NULL;
cleanup:
    eq_run_stream_close(s);
    return st;
}

const eq_capture *eq_run_stream_index(const eq_run_stream *s) { return &s->run; }

double eq_run_stream_bytes(const eq_run_stream *s)
{
    double bytes = 0.0;
    for (int i = 0; i < s->run.count; i++) bytes += (double)eq_tensor_bytes(&s->run.entries[i].tensor);
    return bytes;
}

/* Makes room for one more request and returns it. */
static eq_dump_request *add_request(eq_run_stream *s)
{
    if (s->n_req == s->cap_req) {
        int cap = s->cap_req ? 2 * s->cap_req : 64;
        eq_dump_request *grown = realloc(s->req, (size_t)cap * sizeof *grown);
        if (grown == NULL) return NULL;
        s->req = grown;
        s->cap_req = cap;
    }
    eq_dump_request *q = &s->req[s->n_req++];
    memset(q, 0, sizeof *q);
    q->same_as = -1;
    q->same_file = q->same_entry = -1;
    q->slot = s->slot;
    return q;
}

static int entry_of(const eq_capture *file, const char *path)
{
    const eq_capture_entry *e = eq_capture_find(file, path);
    return e != NULL ? (int)(e - file->entries) : -1;
}

static size_t entry_bytes(const eq_run_stream *s, const eq_dump_request *q)
{
    return eq_tensor_bytes(&s->index[q->file].entries[q->entry].tensor);
}

/* A read q: mapped from its file where the reader found it stored as it is, else into the shared
 * buffer after the batch's reads so far. */
static void place_read(eq_run_stream *s, eq_dump_request *q)
{
    q->map = eq_dump_server_mappable(s->server, q->file, q->entry);
    if (q->map) return;
    q->offset = s->bytes;
    s->bytes += aligned(entry_bytes(s, q));
}

/* Queues the reads (and replica checks) of path, the batch's k-th. */
static eq_status plan_path(eq_run_stream *s, int k, const char *path, int *firsts)
{
    int *at = &s->at[(size_t)k * (size_t)s->n];
    for (int r = 0; r < s->n; r++) at[r] = -1;
    if (!s->assemble) {
        firsts[0] = 0;
    } else {
        eq_status st = eq_run_holders(s->index, (const char *const *)s->files, s->n, path, firsts);
        if (st != EQ_OK) return st;
    }
    for (int r = 0; r < s->n; r++) {
        if (firsts[r] < 0) continue;
        eq_dump_request *q = add_request(s);
        if (q == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %s", path);
        q->file = r;
        q->entry = entry_of(&s->index[r], path);
        const size_t bytes = entry_bytes(s, q);
        if (firsts[r] == r || bytes == 0) { /* the copy that is kept: mapped from its file, or read */
            place_read(s, q);
        } else { /* a replica, compared in the reader with the copy that is kept */
            const eq_dump_request *kept = &s->req[at[firsts[r]]];
            if (kept->map) {
                q->same_as = EQ_DUMP_SAME_AS_MAPPED;
                q->same_file = kept->file;
                q->same_entry = kept->entry;
            } else {
                q->same_as = (long long)kept->offset;
            }
        }
        at[r] = s->n_req - 1;
    }
    return EQ_OK;
}

/* Sends the next chunk of the batch's requests. */
static eq_status send_chunk(eq_run_stream *s)
{
    const int start = s->sent, n = s->n_req - start < EQ_DUMP_BATCH_MAX ? s->n_req - start : EQ_DUMP_BATCH_MAX;
    s->sent += n;
    return eq_dump_server_send(s->server, s->req + start, n);
}

eq_status eq_run_stream_send(eq_run_stream *s, const char *const *paths, int n)
{
    eq_status st = EQ_OK;
    int *firsts = malloc((size_t)s->n * sizeof *firsts);
    s->n_want = s->n_req = s->sent = 0;
    s->bytes = 0;
    s->slot = (s->slot + 1) % EQ_DUMP_SLOTS; /* the last batch's stays where it is */
    eq_dump_server_release(s->server, s->slot); /* the maps of the batch before it */
    if (firsts == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %d tensors", n);
    if (n > s->cap_want) {
        char(*want)[EQ_NAME_MAX] = realloc(s->want, (size_t)n * sizeof *want);
        int *at = want != NULL ? realloc(s->at, (size_t)n * (size_t)s->n * sizeof *at) : NULL;
        if (want != NULL) s->want = want;
        if (at != NULL) s->at = at;
        if (want == NULL || at == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %d tensors", n);
            goto cleanup;
        }
        s->cap_want = n;
    }
    for (int k = 0; k < n; k++) {
        if (eq_capture_find(&s->run, paths[k]) == NULL) {
            st = EQ_FAIL(EQ_ERR_INTERNAL, "%s: the run has no tensor %s", s->files[0], paths[k]);
            goto cleanup;
        }
        snprintf(s->want[k], EQ_NAME_MAX, "%s", paths[k]);
        s->n_want++;
        EQ_TRY(plan_path(s, k, paths[k], firsts));
    }
    EQ_TRY(eq_dump_server_reserve(s->server, s->slot, s->bytes > 0 ? s->bytes : 1));
    EQ_TRY(send_chunk(s));
cleanup:
    free(firsts);
    return st;
}

/* The replicas of the batch found to differ: read (at most MAX_DIFFERING per tensor) where the
 * assembly can say how; the others it skips, as the same. */
static eq_status read_differing(eq_run_stream *s)
{
    const int first_new = s->n_req;
    for (int k = 0; k < s->n_want; k++) {
        int *at = &s->at[(size_t)k * (size_t)s->n], read = 0;
        for (int r = 0; r < s->n; r++) {
            if (at[r] < 0 || s->req[at[r]].same_as == -1 || s->req[at[r]].same) continue;
            if (read == MAX_DIFFERING) continue;
            eq_dump_request *q = add_request(s);
            if (q == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %s", s->want[k]);
            *q = s->req[at[r]];
            q->same_as = -1;
            q->same_file = q->same_entry = -1;
            place_read(s, q);
            at[r] = s->n_req - 1;
            read++;
        }
    }
    if (s->n_req == first_new) return EQ_OK;
    eq_status st = eq_dump_server_reserve(s->server, s->slot, s->bytes);
    for (s->sent = first_new; st == EQ_OK && s->sent < s->n_req;) {
        st = send_chunk(s);
        if (st == EQ_OK) st = eq_dump_server_wait(s->server);
    }
    return st;
}

/* The tensor of answered read q: mapped, or in the shared buffer (buffer, its address now). Mapped
 * bytes are read-only: the batch's tensors are borrowed, never written. */
static void *tensor_of(const eq_dump_request *q, char *buffer)
{
    return q->map ? (void *)q->data : buffer + q->offset;
}

/* Rank r's capture of the batch's k-th tensor: its entry with its data (in the shared buffer, or
 * mapped), none for a replica found the same (assembly then skips it), no entry where r does not
 * hold it. */
static void mini_of(eq_run_stream *s, int k, int r, char *buffer)
{
    eq_capture *m = &s->minis[r];
    const int at = s->at[(size_t)k * (size_t)s->n + r];
    memset(m, 0, sizeof *m);
    m->meta = s->index[r].meta;
    m->entries = &s->slots[r];
    m->capacity = 1;
    if (at < 0) return;
    const eq_dump_request *q = &s->req[at];
    s->slots[r] = s->index[r].entries[q->entry];
    s->slots[r].borrowed = 1;
    s->slots[r].tensor.data = q->same_as != -1 ? NULL : tensor_of(q, buffer);
    m->count = 1;
}

eq_status eq_run_stream_receive(eq_run_stream *s, eq_capture *out)
{
    eq_status st = EQ_OK;
    eq_capture_init(out);
    out->meta = s->run.meta;
    EQ_TRY(eq_dump_server_wait(s->server));
    while (s->sent < s->n_req) {
        EQ_TRY(send_chunk(s));
        EQ_TRY(eq_dump_server_wait(s->server));
    }
    EQ_TRY(read_differing(s));
    char *buffer = eq_dump_server_buffer(s->server, s->slot); /* where it is now: read_differing may move it */
    for (int k = 0; k < s->n_want; k++) {
        if (!s->assemble) {
            const eq_dump_request *q = &s->req[s->at[(size_t)k * (size_t)s->n]];
            eq_capture_entry e = s->index[0].entries[q->entry];
            e.borrowed = 1;
            e.tensor.data = tensor_of(q, buffer);
            EQ_TRY(eq_capture_add_entry(out, &e));
            continue;
        }
        for (int r = 0; r < s->n; r++) mini_of(s, k, r, buffer);
        EQ_TRY(eq_run_assemble_path(s->minis, (const char *const *)s->files, s->n, s->want[k], out));
    }
cleanup:
    if (st != EQ_OK) eq_capture_free(out);
    return st;
}

void eq_run_stream_close(eq_run_stream *s)
{
    if (s == NULL) return;
    eq_dump_server_close(s->server);
    for (int i = 0; i < s->n; i++) {
        if (s->index != NULL) eq_capture_free(&s->index[i]);
        free(s->files[i]);
    }
    eq_capture_free(&s->run);
    free(s->files);
    free(s->index);
    free(s->minis);
    free(s->slots);
    free(s->want);
    free(s->req);
    free(s->at);
    free(s);
}
