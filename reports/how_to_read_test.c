/* The glossary the HTML pages write (how_to_read.c) and README.md's "How to read this report"
 * say the same: every term of the one is a row of the other's table (README escapes '|' as '\|'
 * inside the table). The README's path is the first argument. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/testing.h"
#include "reports/how_to_read.h"

/* term as a Markdown table cell: "| max \|d\| |" */
static void as_cell(const char *term, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "| ");
    for (const char *c = term; *c != '\0' && n + 4 < len; c++) {
        if (*c == '|') buf[n++] = '\\';
        buf[n++] = *c;
    }
    snprintf(buf + n, len - n, " |");
}

int main(int argc, char **argv)
{
    EQ_EXPECT(argc > 1, "usage: how_to_read_test README.md");
    if (argc < 2) return eq_test_finish("how_to_read_test");
    FILE *f = fopen(argv[1], "r");
    EQ_EXPECT(f != NULL, "cannot open %s", argv[1]);
    if (f == NULL) return eq_test_finish("how_to_read_test");
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *section = strstr(text, "\n## How to read this report\n");
    EQ_EXPECT(section != NULL, "README has no 'How to read this report' section");
    if (section == NULL) return eq_test_finish("how_to_read_test");
    const char *end = strstr(section + 1, "\n## ");
    int terms = 0;
    for (const eq_glossary_entry *e = eq_glossary; e->term != NULL; e++, terms++) {
        char cell[128];
        as_cell(e->term, cell, sizeof cell);
        const char *at = strstr(section, cell);
        EQ_EXPECT(at != NULL && (end == NULL || at < end), "README's section lacks the row '%s'", cell);
    }
    EQ_EXPECT(terms >= 19, "%d glossary terms", terms);
    return eq_test_finish("how_to_read_test");
}
