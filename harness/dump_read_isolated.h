/* Reading a file without trusting it.
 *
 * libhdf5 (1.10 here) crashes, loops or allocates without bound on some damaged files, inside the
 * library, before any check of ours can run: one byte flipped in a dump's object headers is
 * enough. So every file `equiv compare` reads is read in a child process: the child opens it
 * (eq_dump_open, harness/dump.h) and reads what the parent asks for under a memory limit, a
 * CPU-time limit and no core file; the parent waits under a wall-clock deadline and never calls
 * HDF5 on the file. A crash, a hang or an allocation past the limit in the child is one error line
 * naming the file; equiv's own error in the child (a missing attribute, a bad shard) comes back as
 * the line it would have been in-process, with its place.
 *
 * Limits (environment):
 *   EQUIV_READ_TIMEOUT_S   wall-clock seconds per file's index and per tensor, and CPU seconds
 *                          (default 30 + 1 s per MB of the file, or of the tensor: ten times what
 *                          the densest valid file, 100,000 scalar datasets in 40 MB, takes here, so
 *                          no valid file is called damaged for its size)
 *   EQUIV_READ_MEMORY_MB   memory the child may map for a file beyond what it holds when it starts
 *                          the file or a tensor, the shared buffer aside (default 1024 + 8x the
 *                          file's size: an uncompressed file needs about 1x)
 * Under AddressSanitizer the memory limit is not set (its shadow memory is terabytes of address
 * space); its allocator then ends the child instead, which is reported the same way. */
#ifndef EQUIV_HARNESS_DUMP_READ_ISOLATED_H
#define EQUIV_HARNESS_DUMP_READ_ISOLATED_H

#include "harness/capture.h"

/* A reader process serving the n files of one run, a tensor at a time: every file is opened once,
 * in the child, which keeps them open. Tensors come back through memory the two processes share
 * (a memfd), so a tensor crosses no pipe and no copy: the child reads a dataset straight into the
 * buffer where the parent compares it. Only the requests and the answers cross a socket.
 *
 * The limits apply to each file's index (its attributes and shapes, read by eq_dump_server_open)
 * and to each tensor's read: its deadline and CPU time are the timeout for its bytes (30 s + 1 s
 * per MB by default), its memory the file's limit beyond the shared buffer. */
typedef struct eq_dump_server eq_dump_server;

/* Starts the reader and reads every file's index: index[i] (n of them, initialised here) holds
 * paths[i]'s meta and entries with their shapes and no data (tensor.data NULL). The first file
 * that fails is the error, named as eq_dump_read_isolated names it. */
eq_status eq_dump_server_open(const char *const *paths, int n, eq_dump_server **out, eq_capture *index);

/* One read: entry `entry` of file `file` into the shared buffer at byte offset `offset`, or, with
 * map (an entry eq_dump_server_mappable says yes to), its stored bytes mapped from the file by this
 * process: no copy, and the reader only starts the file's read ahead; `data` is then the tensor
 * once the batch is answered. With same_as >= 0 the tensor is instead compared bit
 * for bit in the reader with the bytes at that offset of the shared buffer, or with
 * EQ_DUMP_SAME_AS_MAPPED with entry same_entry of file same_file (a copy that was mapped): a
 * replica's check, which then costs no memory here; *same says whether they are equal. */
#define EQ_DUMP_SAME_AS_MAPPED (-2)
typedef struct {
    int file, entry;
    size_t offset;
    long long same_as;   /* -1: read */
    int same_file, same_entry;
    int same;            /* the answer of a check */
    int slot;            /* the shared buffer it reads into, and the slot its map belongs to */
    int map;
    const void *data;    /* a mapped read's tensor, once answered */
} eq_dump_request;

/* Two shared buffers (slots), so that the reader can fill one while this process reads the other. */
#define EQ_DUMP_SLOTS 2
/* Makes shared buffer `slot` at least bytes long (the pointers eq_dump_server_buffer gave for that
 * slot before are then stale; the other slot's stay). */
eq_status eq_dump_server_reserve(eq_dump_server *s, int slot, size_t bytes);
/* Shared buffer `slot` (NULL before its first reserve). */
void *eq_dump_server_buffer(eq_dump_server *s, int slot);
/* Whether entry `entry` of file `file` may be read with map: the reader found it stored as the
 * tensor's own bytes (eq_dump_entry_offset) within the file, at the element's alignment, it holds
 * at least EQUIV_READ_MAP_MB (default 1 MB; harness/base/env.h), and the server's files fit in
 * half the machine's memory (eq_dump_files_outgrow). Files larger than that cannot stay cached:
 * each page is read into a page the cache gives up, and on this virtual machine the first touch
 * of such a page, in equiv's loops when mapped, cost more than the reader's copy (16 GB fp32 dp4,
 * cold: 22 to 23 s mapped against 17 to 19 s read; 1.6 GB: 1.1 to 1.4x faster mapped). */
int eq_dump_server_mappable(const eq_dump_server *s, int file, int entry);
/* Whether files of file_bytes in all outgrow a machine of memory_bytes: hold more than half of it. */
int eq_dump_files_outgrow(double file_bytes, double memory_bytes);
/* Unmaps the maps of slot `slot`'s reads (their data pointers are then stale), as reserving the
 * slot again ends what its buffer held. */
void eq_dump_server_release(eq_dump_server *s, int slot);

/* Sends n <= EQ_DUMP_BATCH_MAX requests (the buffer must hold every offset + the entry's bytes),
 * answered in order by eq_dump_server_wait; the reader works on them while this process goes on.
 * One batch at a time (its answers, 8 bytes each, fit the socket's buffer: neither side blocks). */
#define EQ_DUMP_BATCH_MAX 1024
eq_status eq_dump_server_send(eq_dump_server *s, eq_dump_request *req, int n);
eq_status eq_dump_server_wait(eq_dump_server *s);
/* Ends the reader (NULL: nothing). After a failed send or wait the server only closes. */
void eq_dump_server_close(eq_dump_server *s);

/* Whole files through the server. equiv's commands read runs through harness/run_stream.h (and
 * eq_run_load); these read any files, whatever they hold, and are how dump_read_isolated_test holds
 * the reader to its limits and its error lines.
 *
 * eq_dump_read(path, out) in a child process, as described above; same contract. */
eq_status eq_dump_read_isolated(const char *path, eq_capture *out);

/* The same for n files (a run's rank files) in one reader: out[i] is paths[i]'s capture. A child
 * per file cost 2 to 7 ms each (starting it, and HDF5 starting in it), far more than reading a
 * small file. The first file that fails is the error, named as eq_dump_read_isolated names it;
 * then every out[i] is empty. */
eq_status eq_dump_read_isolated_many(const char *const *paths, int n, eq_capture *out);

#endif
