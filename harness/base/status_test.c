/* A recorded error is one line whatever it quotes: control characters escaped as C writes them,
 * the first failure kept, the message cut before an escape rather than inside one. */
#include <string.h>

#include "harness/base/status.h"
#include "harness/base/testing.h"

static void expect_message(const char *name, const char *want)
{
    eq_error_clear();
    (void)EQ_FAIL(EQ_ERR_USAGE, "unknown case '%s'", name);
    char full[600];
    snprintf(full, sizeof full, "unknown case '%s'", want);
    EQ_EXPECT(strcmp(eq_error_message(), full) == 0, "got \"%s\", want \"%s\"", eq_error_message(), full);
}

int main(void)
{
    expect_message("gpt\nequiv: error: fake", "gpt\\nequiv: error: fake");
    expect_message("a\tb\rc", "a\\tb\\rc");
    expect_message("esc\x1b[2Jdel\x7f", "esc\\x1b[2Jdel\\x7f");
    expect_message("caf\xc3\xa9 back\\slash", "caf\xc3\xa9 back\\slash"); /* UTF-8 and '\' kept as they are */

    /* the first failure is the cause */
    eq_error_clear();
    (void)EQ_FAIL(EQ_ERR_INPUT, "first");
    (void)EQ_FAIL(EQ_ERR_INPUT, "second\n");
    EQ_EXPECT(strcmp(eq_error_message(), "first") == 0, "got \"%s\"", eq_error_message());

    /* a message of newlines: cut to the buffer, each escape whole, no newline left */
    char many[400];
    memset(many, '\n', sizeof many - 1);
    many[sizeof many - 1] = '\0';
    eq_error_clear();
    (void)EQ_FAIL(EQ_ERR_USAGE, "x%s", many);
    const char *m = eq_error_message();
    const size_t len = strlen(m);
    EQ_EXPECT(strchr(m, '\n') == NULL, "a raw newline is left");
    EQ_EXPECT(len > 400 && len < 512 && len % 2 == 1 && m[len - 1] == 'n' && m[len - 2] == '\\',
              "length %zu, ends \"%s\"", len, m + (len > 4 ? len - 4 : 0));
    eq_error_clear();
    return eq_test_finish("status_test");
}
