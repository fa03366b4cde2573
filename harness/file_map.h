/* A byte range of a file mapped read-only, so that a reader's tensor is the page cache itself: no
 * copy into this process (harness/dump_read_isolated.c maps what the reader process found stored
 * as the tensor's own bytes, eq_dump_entry_offset).
 *
 * A file cut short while it is mapped (another process truncating it) makes the next read of a
 * page past its new end raise SIGBUS. While any range is mapped, a handler names the file in one
 * error line, runs the exit cleanup (harness/base/exit_cleanup.h: no half-written --out) and ends
 * the process with status 2; a SIGBUS elsewhere ends the process as it would have. */
#ifndef EQUIV_HARNESS_FILE_MAP_H
#define EQUIV_HARNESS_FILE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "harness/base/status.h"

typedef struct {
    void *base;       /* the mapping, from a page boundary */
    size_t length;
    const void *data; /* the range's first byte */
    int slot;         /* its row in the handler's table, or -1 */
} eq_file_map;

/* Maps bytes > 0 of open file fd from offset (path: the file's name for the error line; it must stay
 * valid until eq_file_map_close). The range must lie within the file. */
eq_status eq_file_map_open(int fd, const char *path, uint64_t offset, size_t bytes, eq_file_map *out);
/* Unmaps (an all-zero map: nothing). */
void eq_file_map_close(eq_file_map *m);

#endif
