/* The isolated reader's process (harness/dump_read_isolated.h): it opens a run's files, sends
 * their indexes, then reads what the parent asks for into the shared buffers, under the limits. */
#define _GNU_SOURCE /* MAP_SHARED buffers, /proc */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness/dump.h"
#include "harness/dump_read_wire.h"
#include "harness/file_map.h"

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


static void send_error(int fd, eq_status st)
{
    if (put_u32(fd, MAGIC) || put_u32(fd, KIND_ERROR) || put_u32(fd, (uint32_t)st) || put_text(fd, eq_error_message()))
        return;
    put_text(fd, eq_error_where());
}

static int send_index(int fd, const eq_capture *cap, const eq_dump_file *file)
{
    if (put_u32(fd, MAGIC) || put_u32(fd, KIND_INDEX) || put(fd, &cap->meta, sizeof cap->meta) ||
        put_u32(fd, (uint32_t)cap->count))
        return -1;
    for (int i = 0; i < cap->count; i++)
        if (put(fd, &cap->entries[i], sizeof cap->entries[i])) return -1;
    for (int i = 0; i < cap->count; i++) {
        const int64_t stored = eq_dump_entry_offset(file, i);
        if (put(fd, &stored, sizeof stored)) return -1;
    }
    return 0;
}

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

/* Sets the soft limit of resource (at most its hard limit, which stays: a later read may need a
 * higher soft limit than this one's). */
static void set_soft_limit(int resource, rlim_t soft)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) != 0) return;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && soft > rl.rlim_max ? rl.rlim_max : soft;
    setrlimit(resource, &rl);
}

static void limit_to(double timeout_s, double memory_mb)
{
    set_soft_limit(RLIMIT_CPU, cpu_used() + (rlim_t)timeout_s + 1);
    if (!UNDER_ASAN) set_soft_limit(RLIMIT_AS, mapped_bytes() + (rlim_t)(memory_mb * (1 << 20)));
}

/* The child's side of a request; 0 to go on, -1 to end. */
typedef struct {
    int fd, mem_fd[EQ_DUMP_SLOTS];
    const int *file_fd; /* [n]: each file opened for its stored bytes (-1: not) */
    const char *const *paths;
    char *map[EQ_DUMP_SLOTS];
    size_t map_size[EQ_DUMP_SLOTS];
    void *scratch; /* a replica's bytes, for a check */
    size_t scratch_size;
} child_state;

/* The scratch buffer, grown to hold bytes (a replica's, for a check); NULL after sending the error. */
static void *scratch_of(child_state *c, size_t bytes)
{
    if (bytes <= c->scratch_size) return c->scratch;
    free(c->scratch);
    c->scratch_size = 0;
    if ((c->scratch = malloc(bytes)) == NULL) {
        send_error(c->fd, EQ_FAIL(EQ_ERR_NOMEM, "no memory for %zu bytes", bytes));
        return NULL;
    }
    c->scratch_size = bytes;
    return c->scratch;
}

/* The stored bytes of entry `entry` of file `file` mapped (eq_dump_entry_offset), into *m; -1 where
 * the file does not store them as they are. */
static int map_stored(const child_state *c, eq_dump_file **files, int file, int entry, size_t bytes, eq_file_map *m)
{
    const int64_t at = eq_dump_entry_offset(files[file], entry);
    if (at < 0 || c->file_fd[file] < 0) return -1;
    return eq_file_map_open(c->file_fd[file], c->paths[file], (uint64_t)at, bytes, m) == EQ_OK ? 0 : -1;
}

/* A read the parent maps: the file's read ahead of it started (the parent then finds the pages
 * read or coming); or a replica compared with a kept copy the parent mapped, both from the file. */
static int serve_stored(child_state *c, const wire_request *q, eq_dump_file **files, const eq_capture *index,
                        int n, size_t bytes)
{
    if (q->map) {
        const int64_t at = eq_dump_entry_offset(files[q->file], q->entry);
        if (at < 0 || c->file_fd[q->file] < 0) return -1;
        /* the kernel reads ahead at most its read-ahead window per call (8 MiB here): a call per
         * piece starts the whole tensor's read, none of them waits for it */
        const size_t piece = (size_t)4 << 20;
        for (size_t done = 0; done < bytes; done += piece) {
            const size_t len = bytes - done < piece ? bytes - done : piece;
            posix_fadvise(c->file_fd[q->file], (off_t)((size_t)at + done), (off_t)len, POSIX_FADV_WILLNEED);
        }
        return put_u32(c->fd, MAGIC) || put_u32(c->fd, KIND_DONE) ? -1 : 0;
    }
    if (q->same_file < 0 || q->same_file >= n || q->same_entry < 0 || q->same_entry >= index[q->same_file].count ||
        eq_tensor_bytes(&index[q->same_file].entries[q->same_entry].tensor) != bytes)
        return -1;
    eq_file_map kept, replica;
    memset(&replica, 0, sizeof replica);
    if (map_stored(c, files, q->same_file, q->same_entry, bytes, &kept)) return -1;
    const void *theirs = NULL;
    if (map_stored(c, files, q->file, q->entry, bytes, &replica) == 0) {
        theirs = replica.data;
    } else {
        if (scratch_of(c, bytes) == NULL) {
            eq_file_map_close(&kept);
            return -1;
        }
        eq_status st = eq_dump_read_entry(files[q->file], q->entry, &index[q->file].entries[q->entry].tensor,
                                          c->scratch);
        if (st != EQ_OK) {
            eq_file_map_close(&kept);
            send_error(c->fd, st);
            return -1;
        }
        theirs = c->scratch;
    }
    const uint32_t kind = memcmp(kept.data, theirs, bytes) == 0 ? KIND_SAME : KIND_DIFFERS;
    eq_file_map_close(&replica);
    eq_file_map_close(&kept);
    return put_u32(c->fd, MAGIC) || put_u32(c->fd, kind) ? -1 : 0;
}

static int serve(child_state *c, const wire_request *q, eq_dump_file **files, const eq_capture *index, int n,
                 const read_limits *limits)
{
    if (q->magic != MAGIC || q->file < 0 || q->file >= n || q->entry < 0 || q->entry >= index[q->file].count ||
        q->slot < 0 || q->slot >= EQ_DUMP_SLOTS)
        return -1;
    const eq_tensor *shape = &index[q->file].entries[q->entry].tensor;
    const size_t bytes = eq_tensor_bytes(shape);
    const int k = q->slot;
    if (q->map || q->same_as == EQ_DUMP_SAME_AS_MAPPED) {
        limit_to(tensor_timeout(bytes), limits[q->file].memory_mb);
        return serve_stored(c, q, files, index, n, bytes);
    }
    if (q->map_size != c->map_size[k]) { /* the parent grew the buffer */
        if (c->map[k] != NULL) munmap(c->map[k], c->map_size[k]);
        c->map[k] = mmap(NULL, q->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->mem_fd[k], 0);
        c->map_size[k] = c->map[k] == MAP_FAILED ? 0 : q->map_size;
        if (c->map[k] == MAP_FAILED) return -1;
    }
    char *map = c->map[k];
    const size_t end = q->same_as >= 0 ? (size_t)q->same_as : q->offset;
    if (end > c->map_size[k] || bytes > c->map_size[k] - end) return -1;
    limit_to(tensor_timeout(bytes), limits[q->file].memory_mb);
    void *into = map + q->offset;
    if (q->same_as >= 0 && (into = scratch_of(c, bytes)) == NULL) return -1;
    eq_status st = eq_dump_read_entry(files[q->file], q->entry, shape, into);
    if (st != EQ_OK) {
        send_error(c->fd, st);
        return -1;
    }
    uint32_t kind = q->same_as < 0 ? KIND_DONE : memcmp(c->scratch, map + q->same_as, bytes) == 0 ? KIND_SAME
                                                                                                   : KIND_DIFFERS;
    return put_u32(c->fd, MAGIC) || put_u32(c->fd, kind) ? -1 : 0;
}

/* Closes every descriptor but standard input, output and error and the two kept: another reader's
 * socket, inherited at fork, would keep that reader from seeing its parent close it. */
static void close_others(int keep1, int keep2, int keep3)
{
    int fds[1024], n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 1024;) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end == '\0' && end != e->d_name && fd > 2 && fd != keep1 && fd != keep2 && fd != keep3 && fd != dirfd(d))
            fds[n++] = (int)fd;
    }
    closedir(d);
    for (int i = 0; i < n; i++) close(fds[i]);
}

_Noreturn void eq_dump_reader_main(int fd, const int *mem_fd, const char *const *paths, const read_limits *limits, int n)
{
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    close_others(fd, mem_fd[0], mem_fd[1]);
    signal(SIGXCPU, SIG_DFL); /* the CPU limit ends the reader, whatever the parent set */
    /* what a crashing library or a sanitizer prints is not equiv's one line: the parent speaks */
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        close(devnull);
    }
    eq_dump_file **files = calloc((size_t)n, sizeof *files);
    eq_capture *index = calloc((size_t)n, sizeof *index);
    if (files == NULL || index == NULL) {
        send_error(fd, EQ_FAIL(EQ_ERR_NOMEM, "no memory to open %d files", n));
        _exit(0);
    }
    for (int i = 0; i < n; i++) {
        limit_to(limits[i].timeout_s, limits[i].memory_mb);
        eq_status st = eq_dump_open(paths[i], &files[i], &index[i]);
        if (st != EQ_OK) {
            send_error(fd, st);
            _exit(0);
        }
        if (send_index(fd, &index[i], files[i])) _exit(0);
    }
    int *file_fd = calloc((size_t)n, sizeof *file_fd);
    if (file_fd == NULL) _exit(0);
    for (int i = 0; i < n; i++) file_fd[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
    child_state c = {fd, {mem_fd[0], mem_fd[1]}, file_fd, paths, {NULL, NULL}, {0, 0}, NULL, 0};
    for (;;) {
        wire_request q;
        size_t got = 0;
        while (got < sizeof q) {
            ssize_t r = recv(fd, (char *)&q + got, sizeof q - got, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) _exit(0); /* the parent is done */
            got += (size_t)r;
        }
        if (serve(&c, &q, files, index, n, limits)) _exit(0);
    }
}
