/* A run read a few tensors at a time, for `equiv compare` on captures larger than memory.
 *
 * eq_run_stream_open starts one reader process for the run's files (harness/dump_read_isolated.h:
 * every file opened once, never by HDF5 in this process) and reads their indexes: the run's
 * tensors, assembled in shape only (harness/run_layout.h), with no data. Then, batch by batch,
 * eq_run_stream_send asks for some of them by path and eq_run_stream_receive hands them over whole:
 * assembled from their parts exactly as eq_run_load assembles them (findings included), a file of
 * full tensors' borrowed from the reader's shared buffer with no copy. A replica (a part another
 * rank holds too) is compared in the reader, bit for bit, with the copy that is kept, so it costs
 * no memory here; only one that differs is read, to say how. Memory: the batch's tensors once in
 * the shared buffer, and once more assembled where they come in parts. */
#ifndef EQUIV_HARNESS_RUN_STREAM_H
#define EQUIV_HARNESS_RUN_STREAM_H

#include "harness/capture.h"

typedef struct eq_run_stream eq_run_stream;

/* Opens the run at path (a file or a directory of rank files, as eq_run_load takes it). */
eq_status eq_run_stream_open(const char *path, eq_run_stream **out);
/* The run: its meta and every tensor in capture order, with its full shape, dtype and role, and no
 * data (tensor.data NULL). */
const eq_capture *eq_run_stream_index(const eq_run_stream *s);
/* Asks for the tensors at these paths (each in the index); the reader starts on them at once. One
 * batch at a time: receive it before sending the next. */
eq_status eq_run_stream_send(eq_run_stream *s, const char *const *paths, int n);
/* The tensors asked for, into out (initialised here: meta, the entries in the order asked, and the
 * findings of their assembly). A file of full tensors' borrow the reader's shared buffer, which has
 * two slots that batches take in turn: they stay valid through the next send (the reader may read
 * the next batch while this one is compared) until the one after. */
eq_status eq_run_stream_receive(eq_run_stream *s, eq_capture *out);
/* Bytes the run's tensors hold in all (for progress). */
double eq_run_stream_bytes(const eq_run_stream *s);
void eq_run_stream_close(eq_run_stream *s); /* NULL: nothing */

#endif
