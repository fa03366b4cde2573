/* OpenBLAS opened on first use (harness/base/openblas.h): the library loaded is running the core
 * equiv asked for, with the environment set for it, and its four functions are the right ones; a
 * library that cannot be loaded, or is not OpenBLAS, is an EQ_ERR_BACKEND naming why. The core
 * wanted is worked out here from /proc/cpuinfo's flags, not from the code under test. Run also
 * with EQUIV_OPENBLAS_CORETYPE=Haswell (a variant in harness/base/meson.build). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness/base/openblas.h"
#include "harness/base/testing.h"

/* 1 if /proc/cpuinfo's first "flags" line lists `flag` as a word. */
static int cpu_has_flag(const char *flag)
{
    char line[8192];
    int found = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "flags", 5) != 0) continue;
        for (char *word = strtok(strchr(line, ':'), ": \t\n"); word != NULL; word = strtok(NULL, " \t\n"))
            if (strcmp(word, flag) == 0) found = 1;
        break;
    }
    fclose(f);
    return found;
}

/* The core the rules of openblas.h name for this machine and environment; NULL: OpenBLAS's own. */
static const char *expected_core(void)
{
    const char *named = getenv("EQUIV_OPENBLAS_CORETYPE");
    if (named != NULL) return named[0] != '\0' ? named : NULL;
    const int avx512 = cpu_has_flag("avx512f") && cpu_has_flag("avx512bw") && cpu_has_flag("avx512vl") &&
                       cpu_has_flag("avx512dq");
    return avx512 ? "SKYLAKEX" : NULL;
}

static void test_opened_as_asked(void)
{
    const char *want = expected_core();
    EQ_EXPECT(eq_openblas.sgemm == NULL, "OpenBLAS resolved before it was opened");
    EQ_EXPECT_OK(eq_openblas_open());
    EQ_EXPECT(eq_openblas_try_open() == NULL, "opened, yet try_open says %s", eq_openblas_try_open());
    if (eq_openblas.get_corename == NULL) return;
    const char *threads = getenv("OPENBLAS_NUM_THREADS"), *core = getenv("OPENBLAS_CORETYPE");
    EQ_EXPECT(threads != NULL && strcmp(threads, "1") == 0, "OPENBLAS_NUM_THREADS=%s, want 1",
              threads ? threads : "(unset)");
    const char *running = eq_openblas.get_corename();
    if (want != NULL) {
        EQ_EXPECT(core != NULL && strcasecmp(core, want) == 0, "OPENBLAS_CORETYPE=%s, want %s",
                  core ? core : "(unset)", want);
        EQ_EXPECT(running != NULL && strcasecmp(running, want) == 0, "OpenBLAS runs core %s, want %s",
                  running ? running : "?", want);
    } else {
        printf("openblas_test: no core wanted on this CPU; OpenBLAS chose %s\n", running ? running : "?");
    }
    /* C = A B^T on values whose products and sums are exact: sgemm and dgemm are what they say. */
    const float a32[4] = {1, 2, 3, 4}, b32[4] = {5, 6, 7, 8}; /* [2,2] each */
    float c32[4] = {0};
    eq_openblas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 2, 2, 2, 1.0f, a32, 2, b32, 2, 0.0f, c32, 2);
    EQ_EXPECT(c32[0] == 17 && c32[1] == 23 && c32[2] == 39 && c32[3] == 53, "sgemm gave %g %g %g %g", c32[0], c32[1],
              c32[2], c32[3]);
    const double a64[2] = {0.5, 3}, b64[4] = {2, 1, -4, 0.25}; /* [1,2], [2,2] */
    double c64[2] = {0};
    eq_openblas.dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 1, 2, 2, 1.0, a64, 2, b64, 2, 0.0, c64, 2);
    EQ_EXPECT(c64[0] == 4 && c64[1] == -1.25, "dgemm gave %g %g", c64[0], c64[1]);
}

static void test_load_errors(void)
{
    eq_openblas_functions f;
    memset(&f, 0, sizeof f);
    EQ_EXPECT(eq_openblas_load("/nonexistent/libopenblas.so.0", &f) == EQ_ERR_BACKEND, "a missing library loaded");
    const char *message = eq_error_message();
    EQ_EXPECT(strstr(message, "cannot load OpenBLAS: /nonexistent/libopenblas.so.0: cannot open shared object file") !=
                  NULL,
              "message: %s", message);
    eq_error_clear();
    EQ_EXPECT(eq_openblas_load("libm.so.6", &f) == EQ_ERR_BACKEND, "libm loaded as OpenBLAS");
    message = eq_error_message();
    EQ_EXPECT(strcmp(message, "cannot load OpenBLAS: libm.so.6 has no function cblas_sgemm") == 0, "message: %s",
              message);
    eq_error_clear();
    EQ_EXPECT(f.sgemm == NULL && f.get_corename == NULL, "a failed load filled the functions in");
}

int main(void)
{
    test_opened_as_asked();
    test_load_errors();
    return eq_test_finish("openblas_test");
}
