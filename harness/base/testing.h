/* A minimal check harness for the *_test.c programs: every check counts, failures print where
 * they happened, and the program's exit status is the truth (meson reads it).
 *
 *     int main(void) {
 *         EQ_EXPECT(x == 3, "x was %d", x);
 *         EQ_EXPECT_EQ_U64(bits, 0x3f80u);
 *         return eq_test_finish("bf16_test");
 *     }
 */
#ifndef EQUIV_HARNESS_BASE_TESTING_H
#define EQUIV_HARNESS_BASE_TESTING_H

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int eq_test_checks, eq_test_failures;

#define EQ_EXPECT(cond, ...)                                                 \
    do {                                                                     \
        eq_test_checks++;                                                    \
        if (!(cond)) {                                                       \
            eq_test_failures++;                                              \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

#define EQ_EXPECT_EQ_U64(a, b)                                                        \
    EQ_EXPECT((uint64_t)(a) == (uint64_t)(b), "%s = 0x%" PRIx64 ", want 0x%" PRIx64, #a, \
              (uint64_t)(a), (uint64_t)(b))

#define EQ_EXPECT_OK(call)                                                                 \
    do {                                                                                   \
        eq_status eq_test_st_ = (call);                                                    \
        EQ_EXPECT(eq_test_st_ == EQ_OK, "%s (%s)", eq_error_message(), eq_error_where()); \
        eq_error_clear();                                                                  \
    } while (0)

/* Writes n bytes to path (a fixture file), counted as a check: 1 when written and closed. */
static inline int eq_test_write_file(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL && fwrite(bytes, 1, n, f) == n;
    if (f != NULL && fclose(f) != 0) ok = 0;
    EQ_EXPECT(ok, "cannot write %s", path);
    return ok;
}

/* The same for a text, its characters up to the terminating NUL. */
static inline int eq_test_write_text(const char *path, const char *text)
{
    return eq_test_write_file(path, text, strlen(text));
}

static inline int eq_test_finish(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, eq_test_checks, eq_test_failures);
    return eq_test_failures == 0 && eq_test_checks > 0 ? 0 : 1;
}

#endif
