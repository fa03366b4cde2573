/* The run's identity and the attribute readers, from harness/dump_read_root.c. Internal to the dump
 * reader (harness/dump_read.c); everything else reads dumps through harness/dump.h. */
#ifndef EQUIV_HARNESS_DUMP_READ_ROOT_H
#define EQUIV_HARNESS_DUMP_READ_ROOT_H

#include <stddef.h>

#include "harness/capture.h"
#include "harness/h5util.h"

/* Is s text a report can print (valid UTF-8, no control characters)? 1 or 0; records no error. */
int eq_dump_is_text(const char *s);

/* Reads obj's scalar attribute name into dest (string, or number as mem_type); EQ_ERR_INPUT if absent or mistyped. */
eq_status eq_dump_read_attr(hid_t obj, const char *path, const char *where, const char *name, H5T_class_t want_class,
                            hid_t mem_type, void *dest, size_t dest_len);

/* eq_dump_read_attr where absence is allowed (*found = 0, EQ_OK); EQ_ERR_INPUT if it cannot be read. */
eq_status eq_dump_read_optional(hid_t obj, const char *path, const char *where, const char *name,
                                H5T_class_t want_class, hid_t mem_type, void *dest, size_t dest_len, int *found);

/* Reads the run's identity and env from file's root into *m, *has_dtype if named; EQ_ERR_INPUT if any is bad. */
eq_status eq_dump_read_root(hid_t file, const char *path, eq_run_meta *m, int *has_dtype);

#endif
