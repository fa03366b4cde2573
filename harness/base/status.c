#include "harness/base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char pending_message[512];
static _Thread_local char pending_where[128];

void eq_escape_line(char *dst, size_t cap, const char *text)
{
    static const char hex[] = "0123456789abcdef";
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++) {
        char one[4] = {(char)*c};
        size_t len = 1;
        if (*c < 0x20 || *c == 0x7f) {
            const char named = *c == '\n' ? 'n' : *c == '\t' ? 't' : *c == '\r' ? 'r' : '\0';
            one[0] = '\\';
            if (named != '\0') one[1] = named, len = 2;
            else one[1] = 'x', one[2] = hex[*c >> 4], one[3] = hex[*c & 15], len = 4;
        }
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
    eq_escape_line(pending_message, sizeof pending_message, text);
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
