/* Output files that appear whole or not at all: written under a temporary name in the same
 * folder, renamed over the final name when complete, removed on any failure. */
#ifndef EQUIV_HARNESS_BASE_ATOMIC_FILE_H
#define EQUIV_HARNESS_BASE_ATOMIC_FILE_H

#include <stdio.h>

#include "harness/base/status.h"

typedef struct {
    char final_path[4096];
    char temp_path[4096]; /* "<dir>/.<name>.tmp.XXXXXX" (mkstemp: unpredictable, created O_EXCL) */
    FILE *fp;             /* open on temp_path for stdio writers; NULL for library writers */
} eq_atomic_file;

/* Creates the temporary file; with `open_stdio` also opens it for writing (else a library writer
 * opens it by temp_path, truncating). */
eq_status eq_atomic_begin(eq_atomic_file *af, const char *final_path, int open_stdio);
/* Closes (if open), checks for write errors, renames over final_path. */
eq_status eq_atomic_commit(eq_atomic_file *af);
/* Closes (if open) and removes the temporary file. Safe to call after commit (then a no-op). */
void eq_atomic_abort(eq_atomic_file *af);

/* Creates the folder (one level, like mkdir) unless it exists. */
eq_status eq_ensure_dir(const char *dir);

#endif
