/* Files equiv reads from its user: case files, tolerance tables, JSON reports.
 *
 * Each is opened the same way: a regular file of bounded size, or one error line (a directory, a
 * device such as /dev/zero, a FIFO with no writer are refused at once, never read forever).
 *
 * INI files go through inih, with a line reader in front of it (eq_ini_reader) that sees what
 * inih does not pass on and says what inih would do silently: a line longer than inih's buffer
 * (it would split it), a section or key name longer than inih keeps (it would cut it, so two long
 * names could meet), a NUL byte, a key outside any section, a section heading given twice or
 * with nothing under it. It also counts lines, so a complaint from a handler names the line the
 * handler was called for, and the first complaint stops the parse. */
#ifndef EQUIV_HARNESS_INPUT_FILE_H
#define EQUIV_HARNESS_INPUT_FILE_H

#include <ini.h>
#include <stdio.h>

#include "harness/base/status.h"

#define EQ_INI_MAX_BYTES (1L << 20)   /* a case file or a tolerance table: 1 MiB */
#define EQ_JSON_MAX_BYTES (256L << 20) /* a report: 256 MiB */

/* Opens path for reading: a regular file of at most max_bytes (a FIFO is opened without waiting
 * for a writer, and refused). Else EQ_ERR_INPUT "<what> <path>: <why>". */
eq_status eq_input_open(const char *path, const char *what, long max_bytes, FILE **out);

/* The longest section or key name inih keeps whole (its buffers are 50 bytes). */
#define EQ_INI_NAME_MAX 49
/* The longest line inih reads in one piece (its buffer is INI_MAX_LINE, newline and NUL in it). */
#define EQ_INI_LINE_MAX (INI_MAX_LINE - 2)
#define EQ_INI_MAX_SECTIONS 128

typedef struct {
    /* set by the caller */
    const char *what;           /* "case file", "tolerance file": the start of every message */
    const char *empty_section;  /* what a heading with no key under it lacks ("has no atol, rtol or
                                   source"); NULL: "has no keys" */
    /* the reader's */
    FILE *file;
    long bytes;
    int line;                   /* the line inih is on (1-based): the one a handler is called for */
    int heading_line;           /* the last [heading]'s line, 0 before any */
    int keys_since_heading;     /* name = value lines under it so far */
    int continuable;            /* an indented line now continues the last key's value (inih's
                                   multi-line values) */
    int n_sections;
    char sections[EQ_INI_MAX_SECTIONS][EQ_INI_NAME_MAX + 1];
    int section_lines[EQ_INI_MAX_SECTIONS];
    int error_line;             /* the first complaint: its line (0: none) and text */
    char error[400];
} eq_ini_reader;

/* Records a complaint about `line` unless one is already recorded; the parse stops there. */
void eq_ini_error(eq_ini_reader *r, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Parses path (eq_input_open, EQ_INI_MAX_BYTES) with inih, calling handler(user, section, name,
 * value) per key; the handler reports through eq_ini_error(r, r->line, ...) and returns 0. Set
 * r->what (and r->empty_section) first; the rest of *r is initialised here. A complaint, inih's
 * own syntax errors, a read error and an empty file (no section) are EQ_ERR_INPUT
 * "<what> PATH:LINE: ...". */
eq_status eq_ini_parse(const char *path, eq_ini_reader *r, ini_handler handler, void *user);

#endif
