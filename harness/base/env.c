/* The settings equiv reads from its environment, parsed in one place (harness/base/env.h). */
#include "harness/base/env.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { KIND_INTEGER, KIND_REAL, KIND_WORD } setting_kind;

/* One row per setting, by eq_env_setting. A number is taken in [lo, hi] (KIND_REAL with
 * lo_open: above lo); `wants` completes "is not ..." in the error line. */
static const struct {
    const char *name;
    setting_kind kind;
    double lo, hi;
    int lo_open;
    const char *words[4]; /* KIND_WORD: the words it takes, NULL-terminated */
    const char *wants;
} settings[EQ_ENV_COUNT] = {
    [EQ_ENV_THREADS] = {"EQUIV_THREADS", KIND_INTEGER, 1, 1024, 0, {NULL}, "an integer in 1..1024"},
    [EQ_ENV_READ_TIMEOUT_S] = {"EQUIV_READ_TIMEOUT_S", KIND_REAL, 0, 1e9, 1, {NULL}, "a number of seconds > 0"},
    [EQ_ENV_READ_MEMORY_MB] = {"EQUIV_READ_MEMORY_MB", KIND_REAL, 0, 1e9, 1, {NULL}, "a number of megabytes > 0"},
    [EQ_ENV_READ_MAP_MB] = {"EQUIV_READ_MAP_MB", KIND_REAL, 0, 1e9, 0, {NULL}, "a number of megabytes >= 0"},
    [EQ_ENV_PROGRESS_AFTER_S] = {"EQUIV_PROGRESS_AFTER_S", KIND_REAL, 0, 1e9, 0, {NULL}, "a number of seconds >= 0"},
    [EQ_ENV_CPU_GEMM] = {"EQUIV_CPU_GEMM", KIND_WORD, 0, 0, 0, {"ordered", "blas", "padded", NULL},
                         "one of ordered, blas, padded"},
    /* 253402300799: 9999-12-31T23:59:59Z, the last second a four-digit year can write */
    [EQ_ENV_SOURCE_DATE_EPOCH] = {"SOURCE_DATE_EPOCH", KIND_INTEGER, 0, 253402300799.0, 0, {NULL},
                                  "a whole number of seconds since 1970 in 0..253402300799"},
};

/* The setting's text when set and not empty, else NULL. */
static const char *text_of(eq_env_setting s)
{
    const char *text = getenv(settings[s].name);
    return text != NULL && text[0] != '\0' ? text : NULL;
}

/* Parses text as setting s: 1 with *number (KIND_INTEGER, KIND_REAL) or *word (KIND_WORD) when it is
 * well formed and in range, else 0. */
static int parse(eq_env_setting s, const char *text, double *number, const char **word)
{
    if (settings[s].kind == KIND_WORD) {
        for (int i = 0; settings[s].words[i] != NULL; i++)
            if (strcmp(text, settings[s].words[i]) == 0) {
                *word = settings[s].words[i];
                return 1;
            }
        return 0;
    }
    double v = 0.0;
    if (settings[s].kind == KIND_INTEGER) { /* digits only: no sign, space or exponent */
        const size_t len = strlen(text);
        if (len == 0 || len > 15 || strspn(text, "0123456789") != len) return 0;
        v = strtod(text, NULL); /* exact: at most 15 digits */
    } else {
        char *end = NULL;
        v = strtod(text, &end);
        if (end == text || *end != '\0' || !isfinite(v)) return 0;
    }
    const int above_lo = settings[s].lo_open ? v > settings[s].lo : v >= settings[s].lo;
    if (!above_lo || !(v <= settings[s].hi)) return 0;
    *number = v;
    return 1;
}

eq_status eq_env_check(void)
{
    for (int s = 0; s < EQ_ENV_COUNT; s++) {
        const char *text = text_of((eq_env_setting)s), *word = NULL;
        double number = 0.0;
        if (text != NULL && !parse((eq_env_setting)s, text, &number, &word))
            return EQ_FAIL(EQ_ERR_USAGE, "%s='%.60s' is not %s; unset it for the default", settings[s].name, text,
                           settings[s].wants);
    }
    return EQ_OK;
}

int eq_env_number(eq_env_setting s, double *out)
{
    const char *text = text_of(s), *word = NULL;
    return settings[s].kind != KIND_WORD && text != NULL && parse(s, text, out, &word);
}

const char *eq_env_word(eq_env_setting s)
{
    const char *text = text_of(s), *word = NULL;
    double number = 0.0;
    return settings[s].kind == KIND_WORD && text != NULL && parse(s, text, &number, &word) ? word : NULL;
}
