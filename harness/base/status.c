#include "harness/base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char pending_message[512];
static _Thread_local char pending_where[128];

/* text into dst[cap] with every control character escaped as C writes it (a newline as the two
 * characters \n, an escape byte as \x1b), so that a message is one line whatever a name in it
 * holds: a case name or a path with a newline cannot end the error line and start a forged one.
 * Cut before an escape, never inside one. Bytes from 0x80 up (UTF-8) are kept. */
static void copy_escaped(char *dst, size_t cap, const char *text)
{
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++) {
        char one[8] = {(char)*c, '\0'};
        if (*c < 0x20 || *c == 0x7f) {
            const char *named = *c == '\n' ? "\\n" : *c == '\t' ? "\\t" : *c == '\r' ? "\\r" : NULL;
            if (named != NULL) snprintf(one, sizeof one, "%s", named);
            else snprintf(one, sizeof one, "\\x%02x", *c);
        }
        const size_t len = strlen(one);
        if (used + len >= cap) break;
        memcpy(dst + used, one, len);
        used += len;
    }
    dst[used] = '\0';
}

eq_status eq_fail(eq_status st, const char *file, int line, const char *fmt, ...)
{
    if (pending_message[0] != '\0') return st; /* the first failure is the cause; keep it */
    char text[sizeof pending_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    copy_escaped(pending_message, sizeof pending_message, text);
    /* Keep the path from the repository root: ".../equiv/harness/x.c" -> "harness/x.c". */
    const char *roots[] = {"harness/", "models/", "reductions/", "reports/"};
    const char *short_file = file;
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        const char *p = strstr(file, roots[i]);
        if (p != NULL) { short_file = p; break; }
    }
    snprintf(pending_where, sizeof pending_where, "%s:%d", short_file, line);
    if (pending_message[0] == '\0') snprintf(pending_message, sizeof pending_message, "%s", eq_status_name(st));
    return st;
}

const char *eq_error_message(void) { return pending_message; }
const char *eq_error_where(void) { return pending_where; }

void eq_error_clear(void)
{
    pending_message[0] = '\0';
    pending_where[0] = '\0';
}

const char *eq_status_name(eq_status st)
{
    switch (st) {
    case EQ_OK: return "ok";
    case EQ_ERR_USAGE: return "usage error";
    case EQ_ERR_INPUT: return "input error";
    case EQ_ERR_IO: return "i/o error";
    case EQ_ERR_NOMEM: return "out of memory";
    case EQ_ERR_BACKEND: return "backend error";
    case EQ_ERR_INTERNAL: return "internal error";
    }
    return "unknown error";
}

int eq_status_exit_code(eq_status st) { return st == EQ_OK ? 0 : 2; }
