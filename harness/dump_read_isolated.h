/* Reading a file without trusting it.
 *
 * libhdf5 (1.10 here) crashes, loops or allocates without bound on some damaged files, inside the
 * library, before any check of ours can run: one byte flipped in a dump's object headers is
 * enough. So every file `equiv compare` reads is read in a child process: the child runs
 * eq_dump_read (harness/dump.h) under a memory limit, a CPU-time limit and no core file, and sends
 * the capture back through a pipe; the parent waits under a wall-clock deadline and never calls
 * HDF5 on the file. A crash, a hang or an allocation past the limit in the child is one error line
 * naming the file; equiv's own error in the child (a missing attribute, a bad shard) comes back as
 * the line it would have been in-process, with its place.
 *
 * Limits (environment):
 *   EQUIV_READ_TIMEOUT_S   wall-clock seconds per file, and CPU seconds (default 30 + 1 s per MB of
 *                          file: ten times what the densest valid file, 100,000 scalar datasets in
 *                          40 MB, takes here, so no valid file is called damaged for its size)
 *   EQUIV_READ_MEMORY_MB   memory the child may map for a file beyond what it holds when it starts
 *                          the file (default 1024 + 8x the file's size: an uncompressed file needs
 *                          about 1x)
 * Under AddressSanitizer the memory limit is not set (its shadow memory is terabytes of address
 * space); its allocator then ends the child instead, which is reported the same way. */
#ifndef EQUIV_HARNESS_DUMP_READ_ISOLATED_H
#define EQUIV_HARNESS_DUMP_READ_ISOLATED_H

#include "harness/capture.h"

/* eq_dump_read(path, out) in a child process, as described above; same contract. */
eq_status eq_dump_read_isolated(const char *path, eq_capture *out);

/* The same for n files (a run's rank files) in one child, which reads them in turn, each under its
 * own limits and deadline: out[i] is paths[i]'s capture. A child per file cost 2 to 7 ms each
 * (starting it, and HDF5 starting in it), far more than reading a small file. The first file that
 * fails is the error, named as eq_dump_read_isolated names it; then every out[i] is empty. */
eq_status eq_dump_read_isolated_many(const char *const *paths, int n, eq_capture *out);

#endif
