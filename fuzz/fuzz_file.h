/* Shared by the fuzz harnesses: equiv's parsers take a path, not bytes, so each input is written to
 * one private file that is rewritten in place for every input (no file per input: libFuzzer runs
 * thousands a second, and a crash must not leave a trail of them). */
#ifndef EQUIV_FUZZ_FUZZ_FILE_H
#define EQUIV_FUZZ_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>

/* A file named `name` ("input.ini", "input.h5") holding exactly data[0..size), in a directory
 * $TMPDIR/equiv-fuzz-PID-XXXXXX (or under /tmp) made once per process with mkdtemp; both are
 * removed at exit, and the first call removes those of processes that died (crashed). Returns
 * its path, the same for the slot all along. slot 0..3: several files at once. Aborts when the
 * file cannot be written: that is the harness's failure, not a finding in the parser. */
const char *eq_fuzz_file(int slot, const char *name, const uint8_t *data, size_t size);

#endif
