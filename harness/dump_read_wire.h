/* The isolated reader's two sides (harness/dump_read_isolated.h): what the parent and the reader
 * process say to each other, and the reader's limits. Internal to dump_read_isolated.c (the parent)
 * and dump_reader_child.c (the reader). */
#ifndef EQUIV_HARNESS_DUMP_READ_WIRE_H
#define EQUIV_HARNESS_DUMP_READ_WIRE_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "harness/base/env.h"
#include "harness/dump_read_isolated.h"

/* The conversation, over one socket (send with MSG_NOSIGNAL: a dead reader is an error, not a
 * SIGPIPE):
 *   the child, first, per file:  MAGIC, KIND_INDEX, eq_run_meta, count, entries (data meaningless),
 *                                count int64 stored offsets (eq_dump_entry_offset)
 *                                or MAGIC, KIND_ERROR, status, message, place (and it ends)
 *   then per request:            the parent's wire_request; the child's MAGIC, KIND_DONE or
 *                                KIND_SAME or KIND_DIFFERS, or KIND_ERROR as above
 * The tensors themselves go through the shared buffer, a memfd both map, or (map) the parent maps
 * their stored bytes from the file itself, and the child only starts the file's read ahead. */
enum { MAGIC = 0x65717276 /* "eqrv" */, KIND_ERROR = 1, KIND_INDEX = 2, KIND_DONE = 3, KIND_SAME = 4, KIND_DIFFERS = 5 };
/* Entries the child may announce for a file: a dataset takes at least 64 bytes of a valid file
 * (its object header and its link), so more is a garbled message, not a file. */
#define MIN_DATASET_BYTES 64

typedef struct {
    uint32_t magic;
    int32_t file, entry;
    uint64_t offset;
    int64_t same_as;   /* -1: read into offset; else compare with the bytes there */
    int32_t slot;      /* which of the two shared buffers */
    uint64_t map_size; /* that buffer's size now */
    int32_t map;       /* 1: the parent maps this read (its stored offset): read ahead, reply KIND_DONE */
    int32_t same_file, same_entry; /* same_as == EQ_DUMP_SAME_AS_MAPPED: the kept copy, mapped there */
} wire_request;

/* The limits of one file: wall-clock seconds for its index (the parent's deadline; the child's CPU
 * time is held to the same) and the bytes its reads may map beyond what the reader holds. */
typedef struct {
    double timeout_s, memory_mb;
    uint32_t max_entries; /* the most datasets the file can hold (MIN_DATASET_BYTES) */
} read_limits;

static inline double env_number(eq_env_setting setting, double fallback)
{
    double v = 0.0;
    return eq_env_number(setting, &v) ? v : fallback;
}

/* The deadline of one tensor's read: as a file's of that many bytes. */
static inline double tensor_timeout(size_t bytes) { return env_number(EQ_ENV_READ_TIMEOUT_S, 30.0 + (double)bytes / (1 << 20)); }

/* ---- both sides ---- */

static inline int put(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static inline int put_u32(int fd, uint32_t v) { return put(fd, &v, sizeof v); }

static inline int put_text(int fd, const char *s)
{
    uint32_t len = (uint32_t)strlen(s);
    return put_u32(fd, len) || put(fd, s, len);
}

/* The reader process: opens the files in turn, each under its own limits, sending each index as it
 * is read; then answers requests (reading into the shared buffers mem_fd[EQ_DUMP_SLOTS]) until the
 * parent closes the socket fd. Ends after an error, which it sends first. */
_Noreturn void eq_dump_reader_main(int fd, const int *mem_fd, const char *const *paths, const read_limits *limits,
                                   int n);

#endif
