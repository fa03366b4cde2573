/* "How to read this report": the definition of every column and bound the reports print, for the
 * HTML pages (README.md's section of the same name says the same; a test holds every term here to
 * appear there). */
#ifndef EQUIV_REPORTS_HOW_TO_READ_H
#define EQUIV_REPORTS_HOW_TO_READ_H

#include <stdio.h>

/* The anchor the HTML pages link to. */
#define EQ_HOW_TO_READ_URL "#how-to-read"

typedef struct {
    const char *term;       /* as the column header prints it, e.g. "max ULP" */
    const char *definition; /* plain text */
} eq_glossary_entry;

/* The entries, ended by {NULL, NULL}. */
extern const eq_glossary_entry eq_glossary[];

/* Writes <section id="how-to-read"> with a <dl> of the entries (escaped). */
void eq_how_to_read_html(FILE *out);

#endif
