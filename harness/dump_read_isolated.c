#include "harness/dump_read_isolated.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/base/env.h"
#include "harness/dump.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* The child's message: a header, then an error or the capture.
 *   error:   status, message length + bytes, place length + bytes
 *   capture: eq_run_meta, count, n_findings; per entry its struct (tensor.data meaningless) and
 *            its data; the findings */
enum { MAGIC = 0x65717276 /* "eqrv" */, KIND_ERROR = 1, KIND_CAPTURE = 2 };
/* Entries the child may announce for a file: a dataset takes at least 64 bytes of a valid file
 * (its object header and its link), so more is a garbled message, not a file. */
#define MIN_DATASET_BYTES 64

/* ---- the child ---- */

static int put(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int put_u32(int fd, uint32_t v) { return put(fd, &v, sizeof v); }

static int put_text(int fd, const char *s)
{
    uint32_t len = (uint32_t)strlen(s);
    return put_u32(fd, len) || put(fd, s, len);
}

static void send_result(int fd, eq_status st, const eq_capture *cap)
{
    if (put_u32(fd, MAGIC)) return;
    if (st != EQ_OK) {
        if (put_u32(fd, KIND_ERROR) || put_u32(fd, (uint32_t)st) || put_text(fd, eq_error_message())) return;
        put_text(fd, eq_error_where());
        return;
    }
    if (put_u32(fd, KIND_CAPTURE) || put(fd, &cap->meta, sizeof cap->meta) || put_u32(fd, (uint32_t)cap->count) ||
        put_u32(fd, (uint32_t)cap->n_findings))
        return;
    for (int i = 0; i < cap->count; i++) {
        const eq_capture_entry *e = &cap->entries[i];
        if (put(fd, e, sizeof *e) || put(fd, e->tensor.data, eq_tensor_bytes(&e->tensor))) return;
    }
    put(fd, cap->findings, (size_t)cap->n_findings * sizeof cap->findings[0]);
}

/* The limits of one file's read: wall-clock seconds (the parent's deadline; the child's CPU time
 * is held to the same) and the bytes it may map beyond what the reader holds when it starts it. */
typedef struct {
    double timeout_s, memory_mb;
    uint32_t max_entries; /* the most datasets the file can hold (MIN_DATASET_BYTES) */
} read_limits;

/* The address space this process has mapped now (so the limit is what the read may add). */
static rlim_t mapped_bytes(void)
{
    unsigned long long pages = 0;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (fp == NULL) return 0;
    if (fscanf(fp, "%llu", &pages) != 1) pages = 0;
    fclose(fp);
    return (rlim_t)(pages * (unsigned long long)sysconf(_SC_PAGESIZE));
}

/* CPU seconds this process has used, rounded up. */
static rlim_t cpu_used(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (rlim_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1;
}

/* Sets the soft limit of resource (at most its hard limit, which stays: a later file's read may
 * need a higher soft limit than this one's). */
static void set_soft_limit(int resource, rlim_t soft)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) != 0) return;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && soft > rl.rlim_max ? rl.rlim_max : soft;
    setrlimit(resource, &rl);
}

/* Reads the files in turn, each under its own limits (what it may add to what the files before it
 * used), sending each result as it is read; stops after an error. */
static _Noreturn void child_main(int fd, const char *const *paths, const read_limits *limits, int n)
{
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGXCPU, SIG_DFL); /* the CPU limit ends the reader, whatever the parent set */
    /* what a crashing library or a sanitizer prints is not equiv's one line: the parent speaks */
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        close(devnull);
    }
    for (int i = 0; i < n; i++) {
        set_soft_limit(RLIMIT_CPU, cpu_used() + (rlim_t)limits[i].timeout_s + 1);
        if (!UNDER_ASAN) set_soft_limit(RLIMIT_AS, mapped_bytes() + (rlim_t)(limits[i].memory_mb * (1 << 20)));
        eq_capture cap;
        eq_status st = eq_dump_read(paths[i], &cap);
        send_result(fd, st, &cap);
        eq_capture_free(&cap);
        if (st != EQ_OK) break;
    }
    _exit(0); /* no atexit handlers, no stdio buffers of the parent's flushed twice */
}

/* ---- the parent ---- */

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

/* An entry as the child sent it, checked before its data is allocated. */
static int entry_ok(eq_capture_entry *e)
{
    e->path[sizeof e->path - 1] = e->name[sizeof e->name - 1] = '\0';
    e->gemm.a[sizeof e->gemm.a - 1] = e->gemm.b[sizeof e->gemm.b - 1] = '\0';
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

/* The capture the child sent, into out; -1 if the message is cut short or malformed. */
static int get_capture(reader *r, uint32_t max_entries, eq_capture *out)
{
    uint32_t count = 0, n_findings = 0;
    if (get(r, &out->meta, sizeof out->meta) || get_u32(r, &count) || get_u32(r, &n_findings)) return -1;
    if (count > max_entries || n_findings > max_entries) return -1;
    if (count > 0 && (out->entries = calloc(count, sizeof *out->entries)) == NULL) return -1;
    out->capacity = (int)count;
    for (uint32_t i = 0; i < count; i++) {
        eq_capture_entry *e = &out->entries[i];
        if (get(r, e, sizeof *e) || !entry_ok(e)) return -1;
        eq_tensor t = e->tensor;
        if (eq_tensor_init(&e->tensor, t.dtype, t.ndim, t.shape) != EQ_OK) return -1;
        out->count++; /* from here eq_capture_free frees its data */
        if (get(r, e->tensor.data, eq_tensor_bytes(&e->tensor))) return -1;
    }
    if (n_findings > 0) {
        if ((out->findings = calloc(n_findings, sizeof out->findings[0])) == NULL) return -1;
        if (get(r, out->findings, n_findings * sizeof out->findings[0])) return -1;
        out->n_findings = (int)n_findings;
        for (uint32_t i = 0; i < n_findings; i++) out->findings[i][EQ_FINDING_MAX - 1] = '\0';
    }
    eq_capture_reindex(out);
    return 0;
}

static double env_number(eq_env_setting setting, double fallback)
{
    double v = 0.0;
    return eq_env_number(setting, &v) ? v : fallback;
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

/* What ended the read of one file: its limits, and what came back of it. */
static eq_status read_failure(const char *path, const read_limits *lim, int complete, int child_error, uint32_t code,
                              const char *message, const char *where, int timed_out, int wstatus)
{
    if (complete && child_error && code == EQ_ERR_NOMEM)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: reading it needed more than %.0f MB (EQUIV_READ_MEMORY_MB allows more): %s",
                       path, lim->memory_mb, message);
    if (complete && child_error) return raise_child_error(code, message, where);
    if (timed_out)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: reading it took over %.0f s (a damaged file makes the HDF5 library loop; "
                       "EQUIV_READ_TIMEOUT_S allows more)", path, lim->timeout_s);
    if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGXCPU)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: reading it used over %.0f s of CPU (a damaged file makes the HDF5 library "
                       "loop; EQUIV_READ_TIMEOUT_S allows more)", path, lim->timeout_s);
    if (WIFSIGNALED(wstatus))
        return EQ_FAIL(EQ_ERR_INPUT, "%s is damaged: the HDF5 library crashed reading it (signal %d, %s): the file is "
                       "not a dump, or was cut or corrupted, or reading it needed more than %.0f MB "
                       "(EQUIV_READ_MEMORY_MB allows more)", path, WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)),
                       lim->memory_mb);
    return EQ_FAIL(EQ_ERR_INPUT, "%s is damaged: reading it needed more than %.0f MB or ended early (the HDF5 "
                   "library was asked for a size the file cannot hold; EQUIV_READ_MEMORY_MB allows more)", path,
                   lim->memory_mb);
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

eq_status eq_dump_read_isolated(const char *path, eq_capture *out) { return eq_dump_read_isolated_many(&path, 1, out); }

eq_status eq_dump_read_isolated_many(const char *const *paths, int n, eq_capture *out)
{
    eq_status st = EQ_OK;
    read_limits *limits = NULL;
    int fds[2] = {-1, -1};
    pid_t pid = -1;
    for (int i = 0; i < n; i++) eq_capture_init(&out[i]);
    if (n < 1) return EQ_OK;
    if ((limits = calloc((size_t)n, sizeof *limits)) == NULL)
        return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read %d files", n);
    for (int i = 0; i < n; i++) {
        off_t size = 0;
        EQ_TRY(check_file(paths[i], &size));
        const double mb = (double)size / (1 << 20);
        /* Reading is linear in a file's datasets, and the densest valid file (scalar datasets, about
         * 400 bytes each) reads at 10 to 30 MB/s here (read_bench): 1 s per MB leaves it ten times
         * that, so a valid file is never called damaged for its size; a looping library is still
         * stopped, later in a larger file. */
        limits[i].timeout_s = env_number(EQ_ENV_READ_TIMEOUT_S, 30.0 + mb);
        limits[i].memory_mb = env_number(EQ_ENV_READ_MEMORY_MB, 1024.0 + 8.0 * mb);
        const off_t most = size / MIN_DATASET_BYTES + 1024;
        limits[i].max_entries = most < INT32_MAX ? (uint32_t)most : INT32_MAX;
    }
    if (pipe(fds) != 0) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot read %s: no pipe to a reader process: %s", paths[0], strerror(errno));
        goto cleanup;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        st = EQ_FAIL(EQ_ERR_IO, "cannot read %s: cannot start a reader process: %s", paths[0], strerror(errno));
        goto cleanup;
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(fds[1], paths, limits, n);
    }
    close(fds[1]);
    fds[1] = -1;

    /* One file at a time, each under its own deadline; the first that fails is the error. */
    int failed = -1, complete = 0, child_error = 0, timed_out = 0;
    uint32_t code = 0;
    char message[512] = "", where[128] = "";
    for (int i = 0; i < n && failed < 0; i++) {
        reader r = {.fd = fds[0]};
        deadline_in(&r.deadline, limits[i].timeout_s);
        uint32_t magic = 0, kind = 0;
        complete = child_error = 0;
        if (get_u32(&r, &magic) == 0 && magic == MAGIC && get_u32(&r, &kind) == 0) {
            if (kind == KIND_ERROR)
                complete = child_error = get_u32(&r, &code) == 0 && get_text(&r, message, sizeof message) == 0 &&
                                         get_text(&r, where, sizeof where) == 0;
            else if (kind == KIND_CAPTURE)
                complete = get_capture(&r, limits[i].max_entries, &out[i]) == 0;
        }
        timed_out = r.timed_out;
        if (!complete || child_error) failed = i;
    }
    close(fds[0]);
    fds[0] = -1;
    if (failed >= 0) kill(pid, SIGKILL); /* a reader that hangs, or one that has more to send */
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {}
    if (failed >= 0)
        st = read_failure(paths[failed], &limits[failed], complete, child_error, code, message, where, timed_out,
                          wstatus);
cleanup:
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    free(limits);
    if (st != EQ_OK)
        for (int i = 0; i < n; i++) eq_capture_free(&out[i]);
    return st;
}
