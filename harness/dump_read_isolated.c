/* memfd_create (Linux) */
#define _GNU_SOURCE
#include "harness/dump_read_isolated.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/dump_read_wire.h"
#include "harness/file_map.h"

/* ---- the parent ---- */

struct eq_dump_server {
    pid_t pid;
    int fd, mem_fd[EQ_DUMP_SLOTS];
    char *map[EQ_DUMP_SLOTS];
    size_t map_size[EQ_DUMP_SLOTS];
    int n;
    const char *const *paths;
    read_limits *limits;
    const eq_capture *index;
    int *file_fd;             /* [n]: each file, opened here to map what it stores as it is (-1: not) */
    off_t *file_size;         /* [n]: its size when opened */
    int64_t **stored;         /* [n][its entries]: where the reader found each stored as it is, or -1 */
    int read_all;             /* the files outgrow memory: every tensor read, none mapped */
    eq_file_map *maps[EQ_DUMP_SLOTS]; /* the slot's reads that are mapped */
    int n_maps[EQ_DUMP_SLOTS], cap_maps[EQ_DUMP_SLOTS];
    eq_dump_request *pending; /* the batch sent, not yet answered */
    int n_pending;
    int failed; /* a send or wait failed: the reader is gone */
};

typedef struct {
    int fd;
    struct timespec deadline;
    int timed_out;
} reader;

static long ms_left(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (long)(deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
    return ms > 0 ? ms : 0;
}

/* n bytes, or -1 (the child ended early, or the deadline passed: r->timed_out). */
static int get(reader *r, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        struct pollfd pfd = {r->fd, POLLIN, 0};
        long ms = ms_left(&r->deadline);
        int ready = ms > 0 ? poll(&pfd, 1, ms > INT32_MAX ? INT32_MAX : (int)ms) : 0;
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) {
            r->timed_out = 1;
            return -1;
        }
        if (ready < 0) return -1;
        ssize_t got = read(r->fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

static int get_u32(reader *r, uint32_t *v) { return get(r, v, sizeof *v); }

/* A text of the child's into buf (cut to fit). */
static int get_text(reader *r, char *buf, size_t cap)
{
    uint32_t len = 0;
    if (get_u32(r, &len) || len > (1u << 16)) return -1;
    char scratch[1 << 16];
    if (get(r, scratch, len)) return -1;
    snprintf(buf, cap, "%.*s", (int)len, scratch);
    return 0;
}

/* An entry as the child sent it, checked: its data is not here. */
static int entry_ok(eq_capture_entry *e)
{
    e->path[sizeof e->path - 1] = e->name[sizeof e->name - 1] = '\0';
    e->gemm.a[sizeof e->gemm.a - 1] = e->gemm.b[sizeof e->gemm.b - 1] = '\0';
    e->borrowed = 0;
    eq_tensor *t = &e->tensor;
    t->data = NULL;
    if ((unsigned)t->dtype >= EQ_DTYPE_COUNT || t->ndim < 1 || t->ndim > EQ_MAX_DIMS) return 0;
    uint64_t bytes = eq_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || (t->shape[d] > 0 && bytes > (uint64_t)(SIZE_MAX / 4) / (uint64_t)t->shape[d])) return 0;
        bytes *= (uint64_t)t->shape[d];
    }
    return 1;
}

/* The index the child sent, into out, and where the file stores each entry as it is (*stored,
 * allocated here); -1 if the message is cut short or malformed. */
static int get_index(reader *r, uint32_t max_entries, eq_capture *out, int64_t **stored)
{
    uint32_t count = 0;
    if (get(r, &out->meta, sizeof out->meta) || get_u32(r, &count)) return -1;
    if (count > max_entries) return -1;
    if (count > 0 && (out->entries = calloc(count, sizeof *out->entries)) == NULL) return -1;
    out->capacity = (int)count;
    for (uint32_t i = 0; i < count; i++) {
        eq_capture_entry *e = &out->entries[i];
        if (get(r, e, sizeof *e) || !entry_ok(e)) return -1;
        out->count++;
    }
    if ((*stored = calloc(count > 0 ? count : 1, sizeof **stored)) == NULL) return -1;
    if (count > 0 && get(r, *stored, count * sizeof **stored)) return -1;
    eq_capture_reindex(out);
    return 0;
}

/* The child's error as this process's pending error, at the child's place ("harness/x.c:42"). */
static eq_status raise_child_error(uint32_t code, const char *message, const char *where)
{
    eq_status st = code > EQ_OK && code <= EQ_ERR_INTERNAL ? (eq_status)code : EQ_ERR_INPUT;
    char file[128];
    snprintf(file, sizeof file, "%s", where);
    char *colon = strrchr(file, ':');
    int line = colon ? atoi(colon + 1) : 0;
    if (colon) *colon = '\0';
    return eq_fail(st, file, line, "%s", message);
}

/* A file the reader may open: a regular file (a FIFO would block it, a device feed it forever). */
static eq_status check_file(const char *path, off_t *size)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int err = errno;
        return err == ENOENT ? EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: no such file", path)
                             : EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) return EQ_FAIL(EQ_ERR_INPUT, "%s is not a regular file (a dump is an HDF5 file)", path);
    *size = sb.st_size;
    return EQ_OK;
}

/* What came back of one answer: complete (all of it), child_error (an error of equiv's, with code,
 * message and place), timed_out. */
typedef struct {
    int complete, child_error, timed_out;
    uint32_t code, kind;
    char message[512], where[128];
} answer;

/* Reads one answer's head and, for an error, its text. */
static void get_answer(reader *r, answer *a)
{
    uint32_t magic = 0;
    memset(a, 0, sizeof *a);
    if (get_u32(r, &magic) == 0 && magic == MAGIC && get_u32(r, &a->kind) == 0) {
        if (a->kind == KIND_ERROR)
            a->complete = a->child_error = get_u32(r, &a->code) == 0 &&
                                           get_text(r, a->message, sizeof a->message) == 0 &&
                                           get_text(r, a->where, sizeof a->where) == 0;
        else
            a->complete = 1;
    }
    a->timed_out = r->timed_out;
}

/* What ended a read of one file: its limits, and what came back of it. */
static eq_status read_failure(const char *path, double timeout_s, double memory_mb, const answer *a, int wstatus)
{
    if (a->complete && a->child_error && a->code == EQ_ERR_NOMEM)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: reading it needed more than %.0f MB (EQUIV_READ_MEMORY_MB allows more): %s",
                       path, memory_mb, a->message);
    if (a->complete && a->child_error) return raise_child_error(a->code, a->message, a->where);
    if (a->timed_out)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: reading it took over %.0f s (a damaged file makes the HDF5 library loop; "
                       "EQUIV_READ_TIMEOUT_S allows more)", path, timeout_s);
    if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGXCPU)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: reading it used over %.0f s of CPU (a damaged file makes the HDF5 library "
                       "loop; EQUIV_READ_TIMEOUT_S allows more)", path, timeout_s);
    if (WIFSIGNALED(wstatus))
        return EQ_FAIL(EQ_ERR_INPUT, "%s is damaged: the HDF5 library crashed reading it (signal %d, %s): the file is "
                       "not a dump, or was cut or corrupted, or reading it needed more than %.0f MB "
                       "(EQUIV_READ_MEMORY_MB allows more)", path, WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)),
                       memory_mb);
    return EQ_FAIL(EQ_ERR_INPUT, "%s is damaged: reading it needed more than %.0f MB or ended early (the HDF5 "
                   "library was asked for a size the file cannot hold; EQUIV_READ_MEMORY_MB allows more)", path,
                   memory_mb);
}

static void deadline_in(struct timespec *deadline, double seconds)
{
    clock_gettime(CLOCK_MONOTONIC, deadline);
    deadline->tv_sec += (time_t)seconds;
    deadline->tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (deadline->tv_nsec >= 1000000000L) {
        deadline->tv_sec++;
        deadline->tv_nsec -= 1000000000L;
    }
}

/* Ends the reader (killed where it may still be working) and reaps it; its wait status. */
static int end_reader(eq_dump_server *s, int kill_it)
{
    int wstatus = 0;
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    if (s->pid > 0) {
        if (kill_it) kill(s->pid, SIGKILL);
        while (waitpid(s->pid, &wstatus, 0) < 0 && errno == EINTR) {}
        s->pid = -1;
    }
    return wstatus;
}

/* The reader failed on file `file` (within a limit of timeout_s): the error, the reader ended. */
static eq_status failure(eq_dump_server *s, int file, double timeout_s, const answer *a)
{
    s->failed = 1;
    int wstatus = end_reader(s, 1);
    return read_failure(s->paths[file], timeout_s, s->limits[file].memory_mb, a, wstatus);
}

int eq_dump_files_outgrow(double file_bytes, double memory_bytes)
{
    return memory_bytes > 0.0 && file_bytes > 0.5 * memory_bytes;
}

/* eq_dump_files_outgrow for n files of these sizes and this machine's memory. */
static int files_outgrow_memory(const off_t *size, int n)
{
    double bytes = 0.0;
    for (int i = 0; i < n; i++) bytes += (double)size[i];
    return eq_dump_files_outgrow(bytes, (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE));
}

eq_status eq_dump_server_open(const char *const *paths, int n, eq_dump_server **out, eq_capture *index)
{
    eq_status st = EQ_OK;
    int fds[2] = {-1, -1};
    eq_dump_server *s = calloc(1, sizeof *s);
    *out = NULL;
    for (int i = 0; i < n; i++) eq_capture_init(&index[i]);
    if (s == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %d files", n);
    s->fd = s->mem_fd[0] = s->mem_fd[1] = -1;
    s->pid = -1;
    s->n = 0; /* the files opened here, for the cleanup; n once all are */
    s->paths = paths;
    s->index = index;
    if (n < 1) {
        st = EQ_FAIL(EQ_ERR_INTERNAL, "a reader of no files");
        goto cleanup;
    }
    if ((s->limits = calloc((size_t)n, sizeof *s->limits)) == NULL ||
        (s->file_fd = malloc((size_t)n * sizeof *s->file_fd)) == NULL ||
        (s->file_size = calloc((size_t)n, sizeof *s->file_size)) == NULL ||
        (s->stored = calloc((size_t)n, sizeof *s->stored)) == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %d files", n);
        goto cleanup;
    }
    for (int i = 0; i < n; i++, s->n++) {
        off_t size = 0;
        EQ_TRY(check_file(paths[i], &size));
        /* this process's own view of the file, for the maps: its size now is the bound of any range */
        struct stat sb;
        s->file_fd[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
        if (s->file_fd[i] >= 0 && fstat(s->file_fd[i], &sb) == 0) s->file_size[i] = sb.st_size;
        const double mb = (double)size / (1 << 20);
        /* Reading is linear in a file's datasets, and the densest valid file (scalar datasets, about
         * 400 bytes each) reads at 10 to 30 MB/s here (read_bench): 1 s per MB leaves it ten times
         * that, so a valid file is never called damaged for its size; a looping library is still
         * stopped, later in a larger file. */
        s->limits[i].timeout_s = env_number(EQ_ENV_READ_TIMEOUT_S, 30.0 + mb);
        s->limits[i].memory_mb = env_number(EQ_ENV_READ_MEMORY_MB, 1024.0 + 8.0 * mb);
        const off_t most = size / MIN_DATASET_BYTES + 1024;
        s->limits[i].max_entries = most < INT32_MAX ? (uint32_t)most : INT32_MAX;
    }
    s->read_all = files_outgrow_memory(s->file_size, n);
    if ((s->mem_fd[0] = memfd_create("equiv-read", MFD_CLOEXEC)) < 0 ||
        (s->mem_fd[1] = memfd_create("equiv-read", MFD_CLOEXEC)) < 0) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot read %s: no shared memory for a reader process: %s", paths[0],
                     strerror(errno));
        goto cleanup;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot read %s: no socket to a reader process: %s", paths[0], strerror(errno));
        goto cleanup;
    }
    fflush(NULL);
    s->pid = fork();
    if (s->pid < 0) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot read %s: cannot start a reader process: %s", paths[0], strerror(errno));
        goto cleanup;
    }
    if (s->pid == 0) {
        close(fds[0]);
        eq_dump_reader_main(fds[1], s->mem_fd, paths, s->limits, n);
    }
    close(fds[1]);
    fds[1] = -1;
    s->fd = fds[0];
    fds[0] = -1;
    /* One file at a time, each under its own deadline; the first that fails is the error. */
    for (int i = 0; i < n; i++) {
        reader r = {.fd = s->fd};
        deadline_in(&r.deadline, s->limits[i].timeout_s);
        answer a;
        get_answer(&r, &a);
        if (a.complete && a.kind == KIND_INDEX) {
            if (get_index(&r, s->limits[i].max_entries, &index[i], &s->stored[i]) == 0) continue;
            a.complete = 0;
            a.timed_out = r.timed_out;
        } else if (a.complete && !a.child_error) {
            a.complete = 0; /* garbled */
        }
        st = failure(s, i, s->limits[i].timeout_s, &a);
        goto cleanup;
    }
    *out = s;
    s = NULL;
cleanup:
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    if (st != EQ_OK)
        for (int i = 0; i < n; i++) eq_capture_free(&index[i]);
    eq_dump_server_close(s);
    return st;
}

eq_status eq_dump_server_reserve(eq_dump_server *s, int slot, size_t bytes)
{
    if (bytes <= s->map_size[slot]) return EQ_OK;
    const size_t grain = (size_t)2 << 20;
    size_t size = (bytes + grain - 1) / grain * grain;
    if (s->map[slot] != NULL) munmap(s->map[slot], s->map_size[slot]);
    s->map[slot] = NULL;
    s->map_size[slot] = 0;
    if (ftruncate(s->mem_fd[slot], (off_t)size) != 0)
        return EQ_FAIL(EQ_ERR_NOMEM, "no shared memory of %zu MB to read %s into: %s", size >> 20, s->paths[0],
                       strerror(errno));
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, s->mem_fd[slot], 0);
    if (map == MAP_FAILED)
        return EQ_FAIL(EQ_ERR_NOMEM, "cannot map %zu MB of shared memory to read %s into: %s", size >> 20, s->paths[0],
                       strerror(errno));
    s->map[slot] = map;
    s->map_size[slot] = size;
    return EQ_OK;
}

void *eq_dump_server_buffer(eq_dump_server *s, int slot) { return s->map[slot]; }

/* The tensors from this many bytes on are mapped where they can be. */
static double map_from_bytes(void) { return env_number(EQ_ENV_READ_MAP_MB, 1.0) * (1 << 20); }

int eq_dump_server_mappable(const eq_dump_server *s, int file, int entry)
{
    if (s->read_all || file < 0 || file >= s->n || entry < 0 || entry >= s->index[file].count || s->file_fd[file] < 0)
        return 0;
    const eq_tensor *t = &s->index[file].entries[entry].tensor;
    const int64_t at = s->stored[file][entry];
    const size_t bytes = eq_tensor_bytes(t);
    return at >= 0 && bytes > 0 && (double)bytes >= map_from_bytes() && at % (int64_t)eq_dtype_size(t->dtype) == 0 &&
           (uint64_t)at <= (uint64_t)s->file_size[file] && bytes <= (uint64_t)s->file_size[file] - (uint64_t)at;
}

void eq_dump_server_release(eq_dump_server *s, int slot)
{
    for (int i = 0; i < s->n_maps[slot]; i++) eq_file_map_close(&s->maps[slot][i]);
    s->n_maps[slot] = 0;
}

/* Maps request q's stored bytes into its slot's maps; q->data is then the tensor. */
static eq_status map_read(eq_dump_server *s, eq_dump_request *q, size_t bytes)
{
    const int k = q->slot;
    if (s->n_maps[k] == s->cap_maps[k]) {
        const int cap = s->cap_maps[k] ? 2 * s->cap_maps[k] : 64;
        eq_file_map *grown = realloc(s->maps[k], (size_t)cap * sizeof *grown);
        if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to map %d tensors", cap);
        s->maps[k] = grown;
        s->cap_maps[k] = cap;
    }
    eq_file_map *m = &s->maps[k][s->n_maps[k]];
    eq_status st = eq_file_map_open(s->file_fd[q->file], s->paths[q->file], (uint64_t)s->stored[q->file][q->entry],
                                    bytes, m);
    if (st != EQ_OK) return st;
    s->n_maps[k]++;
    q->data = m->data;
    return EQ_OK;
}

eq_status eq_dump_server_send(eq_dump_server *s, eq_dump_request *req, int n)
{
    if (s->failed || s->n_pending > 0 || n > EQ_DUMP_BATCH_MAX)
        return EQ_FAIL(EQ_ERR_INTERNAL, "a reader asked %d more before it answered %d", n, s->n_pending);
    for (int i = 0; i < n; i++) {
        const eq_dump_request *q = &req[i];
        if (q->file < 0 || q->file >= s->n || q->entry < 0 || q->entry >= s->index[q->file].count)
            return EQ_FAIL(EQ_ERR_INTERNAL, "a read of entry %d of file %d", q->entry, q->file);
        const size_t bytes = eq_tensor_bytes(&s->index[q->file].entries[q->entry].tensor);
        const size_t at = q->same_as >= 0 ? (size_t)q->same_as : q->offset;
        const int in_buffer = !q->map && q->same_as != EQ_DUMP_SAME_AS_MAPPED;
        if (q->slot < 0 || q->slot >= EQ_DUMP_SLOTS ||
            (in_buffer && (at > s->map_size[q->slot] || bytes > s->map_size[q->slot] - at)))
            return EQ_FAIL(EQ_ERR_INTERNAL, "a read of %zu bytes at %zu past the shared buffer's end", bytes, at);
        if ((q->map && (q->same_as != -1 || !eq_dump_server_mappable(s, q->file, q->entry))) ||
            (q->same_as == EQ_DUMP_SAME_AS_MAPPED && !eq_dump_server_mappable(s, q->same_file, q->same_entry)))
            return EQ_FAIL(EQ_ERR_INTERNAL, "a map of entry %d of file %d that is not stored as it is", q->entry,
                           q->file);
        /* what the file's limit allows its reader to map, the shared buffer's share included */
        if ((double)bytes > s->limits[q->file].memory_mb * (1 << 20))
            return EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s declares %.0f MB, more than reading the file may take (%.0f "
                           "MB; EQUIV_READ_MEMORY_MB allows more)", s->paths[q->file],
                           s->index[q->file].entries[q->entry].path, (double)bytes / (1 << 20),
                           s->limits[q->file].memory_mb);
    }
    /* one send for the batch: the reader's answers can then fill the socket while this process
     * reads them, never while it is still sending */
    wire_request *wire = calloc((size_t)(n > 0 ? n : 1), sizeof *wire);
    if (wire == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for %d requests", n);
    for (int i = 0; i < n; i++)
        wire[i] = (wire_request){MAGIC,           req[i].file,      req[i].entry, req[i].offset, req[i].same_as,
                                 req[i].slot,     s->map_size[req[i].slot], req[i].map, req[i].same_file,
                                 req[i].same_entry};
    const int sent = put(s->fd, wire, (size_t)n * sizeof *wire);
    free(wire);
    if (sent != 0) {
        answer a;
        memset(&a, 0, sizeof a);
        return failure(s, req[0].file, s->limits[req[0].file].timeout_s, &a);
    }
    s->pending = req;
    s->n_pending = n;
    return EQ_OK;
}

eq_status eq_dump_server_wait(eq_dump_server *s)
{
    eq_dump_request *req = s->pending;
    const int n = s->n_pending;
    s->pending = NULL;
    s->n_pending = 0;
    for (int i = 0; i < n; i++) {
        const size_t bytes = eq_tensor_bytes(&s->index[req[i].file].entries[req[i].entry].tensor);
        const double timeout = tensor_timeout(bytes);
        reader r = {.fd = s->fd};
        deadline_in(&r.deadline, timeout);
        answer a;
        get_answer(&r, &a);
        if (a.complete && (a.kind == KIND_DONE || a.kind == KIND_SAME || a.kind == KIND_DIFFERS)) {
            req[i].same = a.kind == KIND_SAME;
            if (!req[i].map) continue;
            eq_status st = map_read(s, &req[i], bytes);
            if (st != EQ_OK) return st;
            continue;
        }
        if (a.complete && !a.child_error) a.complete = 0; /* garbled */
        return failure(s, req[i].file, timeout, &a);
    }
    return EQ_OK;
}

void eq_dump_server_close(eq_dump_server *s)
{
    if (s == NULL) return;
    end_reader(s, 1); /* it has nothing left to do, and may be reading still */
    for (int k = 0; k < EQ_DUMP_SLOTS; k++) {
        if (s->map[k] != NULL) munmap(s->map[k], s->map_size[k]);
        if (s->mem_fd[k] >= 0) close(s->mem_fd[k]);
        eq_dump_server_release(s, k);
        free(s->maps[k]);
    }
    for (int i = 0; i < s->n; i++) {
        if (s->file_fd[i] >= 0) close(s->file_fd[i]);
        free(s->stored[i]);
    }
    free(s->file_fd);
    free(s->file_size);
    free(s->stored);
    free(s->limits);
    free(s);
}

/* ---- whole files, read through the server ---- */

/* Every entry of index file `file` into out's own memory, in batches of at most BATCH_BYTES (one
 * tensor larger than that alone). */
#define BATCH_BYTES ((double)(256 << 20))
static eq_status read_whole(eq_dump_server *s, int file, const eq_capture *index, eq_capture *out)
{
    eq_status st = EQ_OK;
    eq_dump_request *req = calloc((size_t)(index->count > 0 ? index->count : 1), sizeof *req);
    if (req == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %d datasets", index->count);
    eq_capture_init(out);
    out->meta = index->meta;
    for (int first = 0; first < index->count;) {
        const int n = eq_capture_batch(index, first, BATCH_BYTES, EQ_DUMP_BATCH_MAX);
        size_t bytes = 0;
        eq_dump_server_release(s, 0);
        for (int k = 0; k < n; k++) {
            req[k] = (eq_dump_request){.file = file, .entry = first + k, .offset = bytes, .same_as = -1, .same_file = -1,
                                       .same_entry = -1, .map = eq_dump_server_mappable(s, file, first + k)};
            if (!req[k].map) bytes += (eq_tensor_bytes(&index->entries[first + k].tensor) + 63) / 64 * 64;
        }
        EQ_TRY(eq_dump_server_reserve(s, 0, bytes > 0 ? bytes : 1));
        EQ_TRY(eq_dump_server_send(s, req, n));
        EQ_TRY(eq_dump_server_wait(s));
        for (int k = 0; k < n; k++) {
            eq_capture_entry e = index->entries[first + k];
            eq_tensor t;
            EQ_TRY(eq_tensor_init(&t, e.tensor.dtype, e.tensor.ndim, e.tensor.shape));
            const void *from = req[k].map ? req[k].data : (char *)eq_dump_server_buffer(s, 0) + req[k].offset;
            memcpy(t.data, from, eq_tensor_bytes(&t));
            e.tensor = t;
            EQ_TRY(eq_capture_add_entry(out, &e));
        }
        first += n;
    }
cleanup:
    free(req);
    if (st != EQ_OK) eq_capture_free(out);
    return st;
}

eq_status eq_dump_read_isolated(const char *path, eq_capture *out) { return eq_dump_read_isolated_many(&path, 1, out); }

eq_status eq_dump_read_isolated_many(const char *const *paths, int n, eq_capture *out)
{
    eq_status st = EQ_OK;
    eq_dump_server *s = NULL;
    eq_capture *index = calloc((size_t)(n > 0 ? n : 1), sizeof *index);
    for (int i = 0; i < n; i++) eq_capture_init(&out[i]);
    if (index == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %d files", n);
    if (n < 1) goto cleanup;
    EQ_TRY(eq_dump_server_open(paths, n, &s, index));
    for (int i = 0; i < n; i++) EQ_TRY(read_whole(s, i, &index[i], &out[i]));
cleanup:
    eq_dump_server_close(s);
    for (int i = 0; i < n; i++) {
        eq_capture_free(&index[i]);
        if (st != EQ_OK) eq_capture_free(&out[i]);
    }
    free(index);
    return st;
}
