/* HDF5 dumps: one file per run.
 *
 *   /                     root attributes: the run's identity, one per field of harness/run_cell.h's
 *                         table (case, model, size, dtype, dp, tp, transport, algorithm, backend,
 *                         seed, version, grads, injected, ...; strings, except dp, tp: int32, seed:
 *                         uint64); command, git_revision, created_utc (provenance)
 *   /config               attributes only: every hyperparameter the step read (sizes, eps, coefficients)
 *   /bfloat16             named datatype: 16-bit float, sign bit 15, exponent 7..14 (bias 127),
 *                         mantissa 0..6, so h5dump, h5diff and h5py read bf16 data as floats
 *   /layers/NN/<name>     one dataset per captured tensor, full shape, in the run's dtype;
 *                         attributes "role" (input, param, activation, grad, loss) and, where the
 *                         model names them, "dims" ("seq,batch,hidden")
 *
 * bf16 data is written as raw bits with the named type as the memory type: HDF5 never converts
 * (its float conversion rounds ties up and clamps overflow). Files are written under a temporary
 * name and renamed when complete. */
#ifndef EQUIV_HARNESS_DUMP_H
#define EQUIV_HARNESS_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "harness/capture.h"

/* Writes cap (meta and every entry) to path, atomically. */
eq_status eq_dump_write(const char *path, const eq_capture *cap);

/* Records this process's command line for the root attribute "command" (shell-quoted). */
void eq_dump_set_command(int argc, char *const *argv);

/* Reads a dump written by eq_dump_write into out (initialised here). A missing file, a file that is
 * not HDF5, or one lacking the attributes and layout above is EQ_ERR_INPUT with the path named. */
eq_status eq_dump_read(const char *path, eq_capture *out);

/* The same file read a tensor at a time: eq_dump_open reads the root and every dataset's
 * attributes, dtype and shape into index (each entry's tensor.data NULL) and keeps the file open;
 * eq_dump_read_entry reads entry `entry`'s data (the index's entries[entry].tensor gives the shape)
 * into data, eq_tensor_bytes(shape) bytes. Same checks and errors as eq_dump_read. */
typedef struct eq_dump_file eq_dump_file;
eq_status eq_dump_open(const char *path, eq_dump_file **file, eq_capture *index);
eq_status eq_dump_read_entry(eq_dump_file *file, int entry, const eq_tensor *shape, void *data);
void eq_dump_close(eq_dump_file *file); /* NULL: nothing */
/* Where the file holds entry `entry`'s bytes exactly as eq_dump_read_entry would write them (one
 * contiguous extent in the tensor's own type, no conversion, no filter): its offset from the
 * file's start, or -1 (also for a tensor under EQ_DUMP_STORED_MIN_BYTES: not worth the look, in a
 * file of 100,000 scalars). A reader may then map or read those bytes itself. */
#define EQ_DUMP_STORED_MIN_BYTES 4096
int64_t eq_dump_entry_offset(const eq_dump_file *file, int entry);

/* A buffer of this size always holds eq_dump_filename's result (EQ_CELL_NAME_MAX and ".h5"). */
#define EQ_DUMP_FILENAME_MAX 1032

/* "<case>-<dtype>-dp<D>-tp<T>.h5" for a run at every default, the non-default fields after it
 * ("row_parallel-bf16-dp1-tp4-tree.h5"): the cell's name (eq_cell_name), unique per cell. */
const char *eq_dump_filename(const eq_run_meta *meta, char *buf, size_t len);

#endif
