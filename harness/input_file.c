#include "harness/input_file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

eq_status eq_input_open(const char *path, const char *what, long max_bytes, FILE **out)
{
    *out = NULL;
    /* O_NONBLOCK: opening a FIFO waits for a writer otherwise; it is refused below anyway. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return EQ_FAIL(EQ_ERR_INPUT, "%s %s: cannot open: %s", what, path, strerror(errno));
    struct stat sb;
    const char *why = NULL;
    if (fstat(fd, &sb) != 0) why = strerror(errno);
    else if (S_ISDIR(sb.st_mode)) why = "is a directory, not a file";
    else if (!S_ISREG(sb.st_mode)) why = "is not a regular file (a device, a FIFO or a socket)";
    if (why != NULL) {
        close(fd);
        return EQ_FAIL(EQ_ERR_INPUT, "%s %s: %s", what, path, why);
    }
    if (sb.st_size > max_bytes) {
        close(fd);
        return EQ_FAIL(EQ_ERR_INPUT, "%s %s: %lld bytes, more than the %ld a %s may have", what, path,
                       (long long)sb.st_size, max_bytes, what);
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *fp = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "r");
    if (fp == NULL) {
        int err = errno;
        close(fd);
        return EQ_FAIL(EQ_ERR_INPUT, "%s %s: cannot open: %s", what, path, strerror(err));
    }
    *out = fp;
    return EQ_OK;
}

void eq_ini_error(eq_ini_reader *r, int line, const char *fmt, ...)
{
    if (r->error_line != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->error_line = line > 0 ? line : 1;
}

/* inih's own scanning (ini.c, r55), so that the reader sees each line as inih will. */
static char *skip_space(char *s)
{
    while (*s && isspace((unsigned char)*s)) s++;
    return s;
}

static char *strip_right(char *s)
{
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) *--end = '\0';
    return s;
}

/* The first of `chars` in s, or an inline comment (';' after whitespace), or the end. */
static char *find_chars_or_comment(char *s, const char *chars)
{
    int was_space = 0;
    while (*s && !strchr(chars, *s) && !(was_space && strchr(INI_INLINE_COMMENT_PREFIXES, *s))) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

static void check_empty_section(eq_ini_reader *r)
{
    if (r->heading_line == 0 || r->keys_since_heading > 0) return;
    eq_ini_error(r, r->heading_line, "[%s] %s", r->sections[r->n_sections - 1],
                 r->empty_section ? r->empty_section : "has no keys");
}

/* A heading: its name whole (inih would cut it), not given before, the last one not empty. */
static void on_heading(eq_ini_reader *r, const char *name, size_t len)
{
    check_empty_section(r);
    if (len > EQ_INI_NAME_MAX) {
        eq_ini_error(r, r->line, "section name '%.*s' is longer than %d characters", (int)len, name,
                     EQ_INI_NAME_MAX);
        return;
    }
    for (int i = 0; i < r->n_sections; i++) {
        if (strlen(r->sections[i]) == len && memcmp(r->sections[i], name, len) == 0) {
            eq_ini_error(r, r->line, "section [%.*s] appears twice (first at line %d)", (int)len, name,
                         r->section_lines[i]);
            return;
        }
    }
    if (r->n_sections == EQ_INI_MAX_SECTIONS) {
        eq_ini_error(r, r->line, "more than %d sections", EQ_INI_MAX_SECTIONS);
        return;
    }
    memcpy(r->sections[r->n_sections], name, len);
    r->sections[r->n_sections][len] = '\0';
    r->section_lines[r->n_sections++] = r->line;
    r->heading_line = r->line;
    r->keys_since_heading = 0;
    r->continuable = 0;
}

/* What inih will make of the line in `text` (newline removed): the checks it does not make. */
static void look_at_line(eq_ini_reader *r, char *text)
{
    char *line = text;
    if (r->line == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0) line += 3; /* UTF-8 BOM */
    char *start = skip_space(strip_right(line));
    if (*start == '\0' || strchr(INI_START_COMMENT_PREFIXES, *start)) return; /* blank, comment */
    if (r->continuable && start > text) { /* inih: the last key's value continued */
        r->keys_since_heading++;
        return;
    }
    if (*start == '[') {
        char *end = find_chars_or_comment(start + 1, "]");
        if (*end != ']') eq_ini_error(r, r->line, "syntax error: a section heading without ']'");
        else on_heading(r, start + 1, (size_t)(end - start - 1));
        return;
    }
    char *end = find_chars_or_comment(start, "=:");
    if (*end != '=' && *end != ':') {
        eq_ini_error(r, r->line, "syntax error: expected [section], name = value, or a comment");
        return;
    }
    const char separator = *end;
    *end = '\0';
    const char *name = strip_right(start);
    size_t len = strlen(name);
    if (len == 0) eq_ini_error(r, r->line, "syntax error: no name before '%c'", separator);
    else if (len > EQ_INI_NAME_MAX)
        eq_ini_error(r, r->line, "name '%s' is longer than %d characters", name, EQ_INI_NAME_MAX);
    else if (r->heading_line == 0) eq_ini_error(r, r->line, "'%s' is outside any [section]", name);
    r->keys_since_heading++;
    r->continuable = 1;
}

/* inih's reader: one line into str (at most num - 1 bytes, newline included), checked first. */
static char *read_line(char *str, int num, void *stream)
{
    eq_ini_reader *r = stream;
    if (r->error_line != 0) return NULL; /* the first complaint ends the parse */
    int c = EOF, len = 0;
    while (len < num - 1 && (c = getc(r->file)) != EOF) {
        r->bytes++;
        if (c == '\0') {
            eq_ini_error(r, r->line + 1, "a NUL byte: not a text file");
            return NULL;
        }
        str[len++] = (char)c;
        if (c == '\n') break;
    }
    if (ferror(r->file)) {
        eq_ini_error(r, r->line + 1, "read error: %s", strerror(errno));
        return NULL;
    }
    if (len == 0) { /* the end: the last section must have had keys */
        check_empty_section(r);
        return NULL;
    }
    r->line++;
    if (r->bytes > EQ_INI_MAX_BYTES) {
        eq_ini_error(r, r->line, "more than %ld bytes", EQ_INI_MAX_BYTES);
        return NULL;
    }
    if (str[len - 1] != '\n' && len == num - 1 && (c = getc(r->file)) != EOF && c != '\n') {
        eq_ini_error(r, r->line, "line longer than %d characters", EQ_INI_LINE_MAX);
        return NULL;
    }
    str[len] = '\0';
    /* inih reads the same bytes; the look is taken on a copy */
    char copy[INI_MAX_LINE + 1];
    size_t n = strcspn(str, "\n");
    memcpy(copy, str, n);
    copy[n] = '\0';
    look_at_line(r, copy);
    return r->error_line != 0 ? NULL : str;
}

eq_status eq_ini_parse(const char *path, eq_ini_reader *r, ini_handler handler, void *user)
{
    const char *what = r->what ? r->what : "file", *empty_section = r->empty_section;
    memset(r, 0, sizeof *r);
    r->what = what;
    r->empty_section = empty_section;
    eq_status st = eq_input_open(path, what, EQ_INI_MAX_BYTES, &r->file);
    if (st != EQ_OK) return st;
    int bad_line = ini_parse_stream(read_line, r, handler, user);
    fclose(r->file);
    r->file = NULL;
    if (bad_line < 0 && r->error_line == 0) return EQ_FAIL(EQ_ERR_NOMEM, "%s %s: inih could not allocate", what, path);
    if (bad_line > 0) eq_ini_error(r, bad_line, "syntax error: expected [section], name = value, or a comment");
    if (r->error_line != 0) return EQ_FAIL(EQ_ERR_INPUT, "%s %s:%d: %s", what, path, r->error_line, r->error);
    return EQ_OK;
}
