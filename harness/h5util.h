/* Small HDF5 helpers shared by the dump writer (dump.c) and reader (dump_read.c, dump_read_root.c). */
#ifndef EQUIV_HARNESS_H5UTIL_H
#define EQUIV_HARNESS_H5UTIL_H

#include <hdf5.h>

#include "harness/base/status.h"

/* A negative HDF5 result becomes one recorded failure and a jump to the function's cleanup
 * (the function has `eq_status st` and a `cleanup:` label). */
#define H5_TRY(expr, code, ...)                \
    do {                                       \
        if ((expr) < 0) {                      \
            st = EQ_FAIL((code), __VA_ARGS__); \
            goto cleanup;                      \
        }                                      \
    } while (0)

/* Closes any HDF5 identifier and marks it closed; no-op on an invalid one. */
void eq_h5_close(hid_t *id);

/* bfloat16 as an HDF5 float: the top half of binary32 (sign bit 15, exponent bits 7..14 biased by
 * 127, mantissa bits 0..6). A negative id on failure. */
hid_t eq_h5_make_bf16_type(void);

/* Is `type` that layout, little-endian (whoever wrote it: equiv, or h5py through equiv_capture)? */
int eq_h5_is_bf16_type(hid_t type);

#endif
