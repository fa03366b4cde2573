/* Errors in equiv: a status enum returned upward, the first failure's message recorded with the
 * place it happened, one cleanup label per function. Only main() turns a status into an exit code.
 *
 *     eq_status st = EQ_OK;
 *     EQ_TRY(eq_tensor_init(&t, EQ_FP32, 2, shape));
 *     if (n % tp) { st = EQ_FAIL(EQ_ERR_USAGE, "tp=%d does not divide %d", tp, n); goto cleanup; }
 * cleanup:
 *     eq_tensor_free(&t);
 *     return st;
 */
#ifndef EQUIV_HARNESS_BASE_STATUS_H
#define EQUIV_HARNESS_BASE_STATUS_H

#include <stddef.h>

typedef enum {
    EQ_OK = 0,
    EQ_ERR_USAGE,    /* bad command line: unknown case, dtype, algorithm; layout does not divide */
    EQ_ERR_INPUT,    /* malformed case or tolerance file, missing or corrupt HDF5 dump */
    EQ_ERR_IO,       /* an output could not be written */
    EQ_ERR_NOMEM,    /* an allocation failed */
    EQ_ERR_BACKEND,  /* the compute backend or a transport failed */
    EQ_ERR_INTERNAL, /* a broken invariant: a bug in equiv */
} eq_status;

/* Records the message (printf-style; control characters escaped, "\n" for a newline, so that it is
 * one line whatever names it quotes) with file:line unless an error is already pending, and
 * returns `st` so that `return EQ_FAIL(...)` and `st = EQ_FAIL(...)` both read naturally. */
eq_status eq_fail(eq_status st, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#define EQ_FAIL(st, ...) eq_fail((st), __FILE__, __LINE__, __VA_ARGS__)

/* Evaluate a call returning eq_status; on failure keep it in the local `st` and jump to the
 * function's single `cleanup:` label. */
#define EQ_TRY(call)                    \
    do {                                \
        st = (call);                    \
        if (st != EQ_OK) goto cleanup;  \
    } while (0)

/* The pending message ("" when none) and its place ("harness/case_file.c:42"). */
const char *eq_error_message(void);
const char *eq_error_where(void);
/* Forget the pending error (tests that expect a failure, then go on). */
void eq_error_clear(void);

/* text into dst[cap] with every control character escaped as C writes it (a newline as the two
 * characters \n, an escape byte as \x1b), so that a message is one line whatever a name in it
 * holds: a case name or a path with a newline cannot end the error line and start a forged one.
 * Cut before an escape, never inside one. Bytes from 0x80 up (UTF-8) are kept. System calls and
 * plain stores only: a signal handler may call it (harness/file_map.c). */
void eq_escape_line(char *dst, size_t cap, const char *text);

const char *eq_status_name(eq_status st);

/* Exit code for a status: 0 ok, 2 usage/input/io errors and anything else that stopped a run. */
int eq_status_exit_code(eq_status st);

#endif
