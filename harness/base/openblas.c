/* OpenBLAS, opened on first use (harness/base/openblas.h says why and when). */
#include "harness/base/openblas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "equiv_config.h"

eq_openblas_functions eq_openblas;

const char *eq_openblas_wanted_core(void)
{
    const char *want = getenv("EQUIV_OPENBLAS_CORETYPE"); /* an explicit choice for equiv wins */
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (want == NULL && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        want = "SKYLAKEX";
#endif
    return want != NULL && want[0] != '\0' ? want : NULL;
}

/* Loads `library` into *out: 1, or 0 with the reason in why[len]. */
static int load_functions(const char *library, eq_openblas_functions *out, char *why, size_t len)
{
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(why, len, "%s", dlerror());
        return 0;
    }
    eq_openblas_functions f;
#define RESOLVE(field, symbol)                                                  \
    f.field = (__typeof__(f.field))dlsym(lib, #symbol);                         \
    if (f.field == NULL) {                                                      \
        snprintf(why, len, "%s has no function %s", library, #symbol);          \
        dlclose(lib);                                                           \
        return 0;                                                               \
    }
    RESOLVE(sgemm, cblas_sgemm)
    RESOLVE(dgemm, cblas_dgemm)
    RESOLVE(set_num_threads, openblas_set_num_threads)
    RESOLVE(get_corename, openblas_get_corename)
#undef RESOLVE
    *out = f; /* the library stays loaded until exit */
    return 1;
}

eq_status eq_openblas_load(const char *library, eq_openblas_functions *out)
{
    char why[512];
    if (!load_functions(library, out, why, sizeof why))
        return EQ_FAIL(EQ_ERR_BACKEND, "cannot load OpenBLAS: %s", why);
    return EQ_OK;
}

/* The outcome of the one open, for every caller on any thread (the error state is per thread). */
static pthread_once_t open_once = PTHREAD_ONCE_INIT;
static int opened;
static char open_failure[1100];

static void open_library(void)
{
    const char *core = eq_openblas_wanted_core();
    if ((core != NULL && setenv("OPENBLAS_CORETYPE", core, 1) != 0) || setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) {
        snprintf(open_failure, sizeof open_failure, "cannot set OpenBLAS's environment (no memory)");
        return;
    }
    char first[512], second[512];
    const char *chosen = getenv("EQUIV_OPENBLAS_LIBRARY");
    if (chosen != NULL && chosen[0] != '\0') {
        opened = load_functions(chosen, &eq_openblas, first, sizeof first);
        if (!opened) snprintf(open_failure, sizeof open_failure, "%s (EQUIV_OPENBLAS_LIBRARY)", first);
        return;
    }
    opened = load_functions(EQUIV_OPENBLAS_PATH, &eq_openblas, first, sizeof first) ||
             load_functions(EQUIV_OPENBLAS_SONAME, &eq_openblas, second, sizeof second);
    if (!opened) snprintf(open_failure, sizeof open_failure, "%s; %s", first, second);
}

const char *eq_openblas_try_open(void)
{
    pthread_once(&open_once, open_library);
    return opened ? NULL : open_failure;
}

eq_status eq_openblas_open(void)
{
    const char *failure = eq_openblas_try_open();
    if (failure != NULL) return EQ_FAIL(EQ_ERR_BACKEND, "cannot load OpenBLAS: %s", failure);
    return EQ_OK;
}
