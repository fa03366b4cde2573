#include "harness/case_file.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/input_file.h"

/* [case] keys, as bits of parse_state.case_keys (each may be given once). */
enum { CASE_MODEL = 1, CASE_SUMMARY = 2, CASE_DTYPES = 4, CASE_LAYOUTS = 8 };

/* Parser state: the reader (harness/input_file.h) counts lines and keeps the first complaint,
 * which stops the parse; a handler complains about the line it is called for. */
typedef struct {
    eq_case *c;
    eq_ini_reader r;
    int case_keys; /* CASE_* bits seen */
} parse_state;

static void complain(parse_state *ps, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void complain(parse_state *ps, const char *fmt, ...)
{
    char text[sizeof ps->r.error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    eq_ini_error(&ps->r, ps->r.line, "%s", text);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t')) *--end = '\0';
    return s;
}

/* Copies a name or value whole into dst[cap], or complains: nothing read is ever cut. */
static int copy_text(char *dst, size_t cap, const char *src, parse_state *ps, const char *what)
{
    size_t len = strlen(src);
    if (len >= cap) {
        complain(ps, "%s '%s' is longer than %zu characters", what, src, cap - 1);
        return 0;
    }
    memcpy(dst, src, len + 1);
    return 1;
}

static int copy_key(char *dst, const char *src, parse_state *ps, const char *what)
{
    return copy_text(dst, EQ_CASE_KEY_MAX, src, ps, what);
}

/* Calls item(ps, token) for each comma-separated token of value; an empty token is an error. */
static int for_each_item(parse_state *ps, const char *key, const char *value,
                         int (*item)(parse_state *, const char *))
{
    char list[INI_MAX_LINE + 1];
    if (!copy_text(list, sizeof list, value, ps, key)) return 0;
    char *tok = list;
    for (;;) {
        char *comma = strchr(tok, ',');
        if (comma != NULL) *comma = '\0';
        tok = trim(tok);
        if (tok[0] == '\0') {
            complain(ps, "%s = '%s' has an empty item", key, value);
            return 0;
        }
        if (!item(ps, tok)) return 0;
        if (comma == NULL) return 1;
        tok = comma + 1;
    }
}

static int add_dtype(parse_state *ps, const char *tok)
{
    eq_dtype dt;
    if (eq_dtype_parse(tok, &dt) != EQ_OK) {
        eq_error_clear();
        complain(ps, "unknown dtype '%s' (known: fp32, bf16, fp64)", tok);
        return 0;
    }
    for (int i = 0; i < ps->c->n_dtypes; i++) {
        if (ps->c->dtypes[i] == dt) {
            complain(ps, "dtype '%s' listed twice", tok);
            return 0;
        }
    }
    ps->c->dtypes[ps->c->n_dtypes++] = dt; /* at most EQ_DTYPE_COUNT: no dtype twice */
    return 1;
}

static int add_layout(parse_state *ps, const char *tok)
{
    eq_layout l;
    if (eq_layout_parse(tok, &l) != EQ_OK) {
        eq_error_clear();
        complain(ps, "bad layout '%s' (want dpD-tpT, D and T in 1..1024)", tok);
        return 0;
    }
    for (int i = 0; i < ps->c->n_layouts; i++) {
        if (ps->c->layouts[i].dp == l.dp && ps->c->layouts[i].tp == l.tp) {
            complain(ps, "layout '%s' listed twice", tok);
            return 0;
        }
    }
    if (ps->c->n_layouts == EQ_CASE_MAX_LAYOUTS) {
        complain(ps, "more than %d layouts", EQ_CASE_MAX_LAYOUTS);
        return 0;
    }
    ps->c->layouts[ps->c->n_layouts++] = l;
    return 1;
}

static int parse_case_key(parse_state *ps, const char *name, const char *value)
{
    eq_case *c = ps->c;
    const int key = strcmp(name, "model") == 0     ? CASE_MODEL
                    : strcmp(name, "summary") == 0 ? CASE_SUMMARY
                    : strcmp(name, "dtypes") == 0  ? CASE_DTYPES
                    : strcmp(name, "layouts") == 0 ? CASE_LAYOUTS
                                                   : 0;
    if (key == 0) {
        complain(ps, "unknown key '%s' in [case] (known: model, summary, dtypes, layouts)", name);
        return 0;
    }
    if (ps->case_keys & key) {
        complain(ps, "'%s' given twice in [case] (or continued by an indented line)", name);
        return 0;
    }
    ps->case_keys |= key;
    switch (key) {
    case CASE_MODEL: return copy_key(c->model, value, ps, "model");
    case CASE_SUMMARY: return copy_text(c->summary, sizeof c->summary, value, ps, "summary");
    case CASE_DTYPES: return for_each_item(ps, name, value, add_dtype);
    default: return for_each_item(ps, name, value, add_layout);
    }
}

static int parse_size_key(parse_state *ps, const char *size_name, const char *name, const char *value)
{
    eq_case *c = ps->c;
    eq_case_size *s = NULL;
    for (int i = 0; i < c->n_sizes; i++)
        if (strcmp(c->sizes[i].name, size_name) == 0) s = &c->sizes[i];
    if (s == NULL) {
        if (c->n_sizes == EQ_CASE_MAX_SIZES) {
            complain(ps, "more than %d sizes", EQ_CASE_MAX_SIZES);
            return 0;
        }
        s = &c->sizes[c->n_sizes++];
        if (!copy_key(s->name, size_name, ps, "size name")) return 0;
    }
    for (int i = 0; i < s->count; i++) {
        if (strcmp(s->params[i].key, name) == 0) {
            complain(ps, "'%s' given twice in [size.%s] (or continued by an indented line)", name, size_name);
            return 0;
        }
    }
    if (s->count == EQ_CASE_MAX_PARAMS) {
        complain(ps, "more than %d parameters in [size.%s]", EQ_CASE_MAX_PARAMS, size_name);
        return 0;
    }
    /* Digits only (strtoll would take a sign, spaces, and clamp an overflow to LLONG_MAX). */
    size_t digits = strspn(value, "0123456789");
    errno = 0;
    long long v = digits > 0 && value[digits] == '\0' ? strtoll(value, NULL, 10) : 0;
    if (v == 0 && errno == 0) {
        complain(ps, "[size.%s] %s = '%s' is not a positive integer", size_name, name, value);
        return 0;
    }
    if (errno != 0 || v > EQ_CASE_SIZE_MAX) {
        complain(ps, "[size.%s] %s = %s is out of range (1..%lld)", size_name, name, value,
                 (long long)EQ_CASE_SIZE_MAX);
        return 0;
    }
    eq_size_param *p = &s->params[s->count];
    if (!copy_key(p->key, name, ps, "size key")) return 0;
    p->value = v;
    p->line = ps->r.line;
    s->count++;
    return 1;
}

static int parse_tolerance_key(parse_state *ps, const char *name, const char *value)
{
    eq_dtype dt;
    char dtype_name[EQ_CASE_KEY_MAX];
    const size_t dtype_len = strcspn(name, ".");
    const char *role = name + dtype_len; /* "" or ".grad" */
    dtype_name[0] = '\0';
    if (dtype_len < sizeof dtype_name) {
        memcpy(dtype_name, name, dtype_len);
        dtype_name[dtype_len] = '\0';
    }
    if (eq_dtype_parse(dtype_name, &dt) != EQ_OK || (role[0] != '\0' && strcmp(role, ".grad") != 0)) {
        eq_error_clear();
        complain(ps, "[tolerance] key '%s' is not a dtype or dtype.grad", name);
        return 0;
    }
    char *slot = role[0] ? ps->c->grad_tolerance[dt] : ps->c->tolerance[dt];
    if (slot[0] != '\0') {
        complain(ps, "'%s' given twice in [tolerance] (or continued by an indented line)", name);
        return 0;
    }
    return copy_text(slot, EQ_CASE_KEY_MAX, value, ps, "tolerance entry");
}

static int parse_expect_key(parse_state *ps, const char *name, const char *value)
{
    eq_case *c = ps->c;
    for (int i = 0; i < c->n_expects; i++) {
        if (strcmp(c->expects[i].key, name) == 0) {
            complain(ps, "'%s' given twice in [expect] (or continued by an indented line)", name);
            return 0;
        }
    }
    if (c->n_expects == EQ_CASE_MAX_EXPECT) {
        complain(ps, "more than %d expectations", EQ_CASE_MAX_EXPECT);
        return 0;
    }
    eq_case_expect *e = &c->expects[c->n_expects];
    if (eq_expect_parse(value, &e->expect) != EQ_OK) {
        eq_error_clear();
        complain(ps, "[expect] %s = '%s' (want bit_exact, within, differs, must_fail)", name, value);
        return 0;
    }
    if (!copy_key(e->key, name, ps, "expectation key")) return 0;
    c->n_expects++;
    return 1;
}

static int parse_tensor_expect_key(parse_state *ps, const char *grads, const char *name, const char *value)
{
    eq_case *c = ps->c;
    if (strcmp(grads, "avg") != 0 && strcmp(grads, "sum") != 0 && strcmp(grads, "any") != 0) {
        complain(ps, "unknown section [expect.%s] (want expect.avg, expect.sum or expect.any)", grads);
        return 0;
    }
    for (int i = 0; i < c->n_tensor_expects; i++) {
        if (strcmp(c->tensor_expects[i].grads, grads) == 0 && strcmp(c->tensor_expects[i].pattern, name) == 0) {
            complain(ps, "'%s' given twice in [expect.%s] (or continued by an indented line)", name, grads);
            return 0;
        }
    }
    if (c->n_tensor_expects == EQ_CASE_MAX_EXPECT) {
        complain(ps, "more than %d tensor expectations", EQ_CASE_MAX_EXPECT);
        return 0;
    }
    eq_case_tensor_expect *e = &c->tensor_expects[c->n_tensor_expects];
    if (eq_expect_parse_sized(value, &e->expect, &e->size) != EQ_OK) {
        char why[200];
        snprintf(why, sizeof why, "%s", eq_error_message());
        eq_error_clear();
        complain(ps, "[expect.%s] %s = '%s': %s", grads, name, value, why);
        return 0;
    }
    snprintf(e->grads, sizeof e->grads, "%s", grads);
    if (!copy_key(e->pattern, name, ps, "tensor pattern")) return 0;
    c->n_tensor_expects++;
    return 1;
}

static int on_entry(void *user, const char *section, const char *name, const char *value)
{
    parse_state *ps = user;
    if (value[0] == '\0') {
        complain(ps, "'%s' in [%s] has no value", name, section);
        return 0;
    }
    if (strncmp(section, "expect.", 7) == 0) return parse_tensor_expect_key(ps, section + 7, name, value);
    if (strcmp(section, "case") == 0) return parse_case_key(ps, name, value);
    if (strncmp(section, "size.", 5) == 0 && section[5] != '\0')
        return parse_size_key(ps, section + 5, name, value);
    if (strcmp(section, "tolerance") == 0) return parse_tolerance_key(ps, name, value);
    if (strcmp(section, "expect") == 0) return parse_expect_key(ps, name, value);
    complain(ps, "unknown section [%s] (known: case, size.NAME, tolerance, expect, expect.avg, expect.sum, "
             "expect.any)", section);
    return 0;
}

/* The case's name: the file name without ".ini" (every other dot kept, as eq_case_list lists it). */
static size_t case_name_length(const char *base)
{
    size_t len = strlen(base);
    return len > 4 && strcmp(base + len - 4, ".ini") == 0 ? len - 4 : len;
}

eq_status eq_case_load(const char *path, eq_case *out)
{
    eq_status st = EQ_OK;
    memset(out, 0, sizeof *out);
    if (strlen(path) >= sizeof out->path)
        return EQ_FAIL(EQ_ERR_USAGE, "case file path longer than %zu characters: %s", sizeof out->path - 1, path);
    strcpy(out->path, path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const size_t name_len = case_name_length(base);
    if (name_len == 0 || name_len >= sizeof out->name)
        return EQ_FAIL(EQ_ERR_INPUT, "case file %s: the case's name '%.*s' is empty or longer than %zu characters",
                       path, (int)name_len, base, sizeof out->name - 1);
    memcpy(out->name, base, name_len);
    out->name[name_len] = '\0';

    parse_state *ps = calloc(1, sizeof *ps);
    if (ps == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to read case file %s", path);
    ps->c = out;
    ps->r.what = "case file";
    st = eq_ini_parse(path, &ps->r, on_entry, ps);
    const int has_case = ps->case_keys != 0;
    free(ps);
    if (st != EQ_OK) return st;
    if (!has_case) return EQ_FAIL(EQ_ERR_INPUT, "case file %s: no [case] section (an empty file?)", path);
    if (out->model[0] == '\0') return EQ_FAIL(EQ_ERR_INPUT, "case file %s: [case] has no model", path);
    if (out->n_dtypes == 0) return EQ_FAIL(EQ_ERR_INPUT, "case file %s: [case] has no dtypes", path);
    if (out->n_layouts == 0) return EQ_FAIL(EQ_ERR_INPUT, "case file %s: [case] has no layouts", path);
    if (out->n_sizes == 0) return EQ_FAIL(EQ_ERR_INPUT, "case file %s: no [size.NAME] section", path);
    for (int i = 0; i < out->n_dtypes; i++)
        if (out->tolerance[out->dtypes[i]][0] == '\0')
            return EQ_FAIL(EQ_ERR_INPUT, "case file %s: [tolerance] has no entry for %s", path,
                           eq_dtype_name(out->dtypes[i]));
    for (int i = 0; i < out->n_sizes; i++) out->sizes[i].case_path = out->path;
    return EQ_OK;
}

/* Appends ", item" (or "item" first) to list when it fits in cap bytes; else ", ..." once. */
static void append_listed(char *list, size_t cap, const char *item)
{
    size_t used = strlen(list), len = strlen(item);
    if (used >= 5 && strcmp(list + used - 5, ", ...") == 0) return;
    if (used + len + 3 > cap - 5) {
        if (used + 6 <= cap) memcpy(list + used, ", ...", 6);
        return;
    }
    if (used > 0) {
        memcpy(list + used, ", ", 2);
        used += 2;
    }
    memcpy(list + used, item, len + 1);
}

static int compare_names(const void *a, const void *b) { return strcmp(a, b); }

/* Every <name>.ini in dir (not hidden), sorted, into *names (malloc'd, *count of them). A name too
 * long to be a case is an error, never skipped, unless skip_long (the list an error message shows). */
static eq_status collect_cases(const char *dir, int skip_long, char (**names)[EQ_CASE_KEY_MAX], int *count)
{
    eq_status st = EQ_OK;
    char (*list)[EQ_CASE_KEY_MAX] = NULL;
    int n = 0, cap = 0;
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (d == NULL) return EQ_FAIL(EQ_ERR_INPUT, "cannot read the cases folder %s: %s", dir, strerror(errno));
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 4 || strcmp(e->d_name + len - 4, ".ini") != 0) continue;
        if (len - 4 >= EQ_CASE_KEY_MAX && skip_long) continue;
        if (len - 4 >= EQ_CASE_KEY_MAX) {
            st = EQ_FAIL(EQ_ERR_INPUT, "case file %s/%s: the case's name is longer than %d characters", dir,
                         e->d_name, EQ_CASE_KEY_MAX - 1);
            goto cleanup;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            void *grown = realloc(list, (size_t)cap * sizeof *list);
            if (grown == NULL) {
                st = EQ_FAIL(EQ_ERR_NOMEM, "no memory to list the cases in %s", dir);
                goto cleanup;
            }
            list = grown;
        }
        memcpy(list[n], e->d_name, len - 4);
        list[n++][len - 4] = '\0';
    }
    if (n > 0) qsort(list, (size_t)n, sizeof *list, compare_names);
    *names = list;
    *count = n;
    list = NULL;
cleanup:
    closedir(d);
    free(list);
    return st;
}

eq_status eq_case_list(const char *dir, char names[][EQ_CASE_KEY_MAX], int max, int *count)
{
    char (*all)[EQ_CASE_KEY_MAX] = NULL;
    int n = 0;
    *count = 0;
    eq_status st = collect_cases(dir, 0, &all, &n);
    if (st == EQ_OK && n > max)
        st = EQ_FAIL(EQ_ERR_INPUT, "%d case files in %s: more than the %d this command takes", n, dir, max);
    if (st == EQ_OK) {
        if (n > 0) memcpy(names, all, (size_t)n * sizeof *all);
        *count = n;
    }
    free(all);
    return st;
}

/* A name `equiv --case` can mean: a file name in the cases folder, nothing else (no path). (One
 * too long to be a case's name is refused by eq_case_load, saying so.) */
static int is_case_name(const char *name)
{
    return name[0] != '\0' && name[0] != '.' && strchr(name, '/') == NULL;
}

eq_status eq_case_load_named(const char *dir, const char *name, eq_case *out)
{
    char path[1024];
    struct stat sb;
    /* Looked up by name, not in a listing: any number of cases, in any directory order. */
    if (is_case_name(name)) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s.ini", dir, name) >= sizeof path)
            return EQ_FAIL(EQ_ERR_USAGE, "cases folder path too long: %s", dir);
        if (stat(path, &sb) == 0 || errno != ENOENT) return eq_case_load(path, out);
    }
    char (*known)[EQ_CASE_KEY_MAX] = NULL;
    int n = 0;
    eq_status st = collect_cases(dir, 1, &known, &n);
    if (st != EQ_OK) return st;
    char list[400] = "";
    for (int i = 0; i < n; i++) append_listed(list, sizeof list, known[i]);
    free(known);
    return EQ_FAIL(EQ_ERR_USAGE, "unknown case '%s' (known: %s)", name, n > 0 ? list : "none");
}

eq_status eq_case_find_size(const eq_case *c, const char *name, const eq_case_size **out)
{
    char list[256] = "";
    for (int i = 0; i < c->n_sizes; i++) {
        if (strcmp(c->sizes[i].name, name) == 0) {
            *out = &c->sizes[i];
            return EQ_OK;
        }
        append_listed(list, sizeof list, c->sizes[i].name);
    }
    return EQ_FAIL(EQ_ERR_USAGE, "case %s has no size '%s' (it has: %s)", c->name, name, list);
}

eq_status eq_size_get(const eq_case_size *s, const char *key, int64_t *out)
{
    for (int i = 0; i < s->count; i++) {
        if (strcmp(s->params[i].key, key) == 0) {
            *out = s->params[i].value;
            return EQ_OK;
        }
    }
    return EQ_FAIL(EQ_ERR_INPUT, "case file %s: [size.%s] lacks '%s'", s->case_path ? s->case_path : "?", s->name,
                   key);
}

int64_t eq_size_get_or(const eq_case_size *s, const char *key, int64_t fallback)
{
    for (int i = 0; i < s->count; i++)
        if (strcmp(s->params[i].key, key) == 0) return s->params[i].value;
    return fallback;
}

eq_expect eq_case_expectation(const eq_case *c, const char *backend, eq_dtype dt, eq_layout l)
{
    if (l.dp == 1 && l.tp == 1) return EQ_EXPECT_BIT_EXACT;
    char layout[32], both[EQ_CASE_KEY_MAX + 32], on[4][EQ_CASE_KEY_MAX + 64];
    eq_layout_name(l, layout, sizeof layout);
    snprintf(both, sizeof both, "%s.%s", eq_dtype_name(dt), layout);
    const char *plain[] = {both, layout, eq_dtype_name(dt), "default"};
    for (int k = 0; k < 4; k++) snprintf(on[k], sizeof on[k], "%s.%s", backend != NULL ? backend : "", plain[k]);
    const int with_backend = backend != NULL && backend[0] != '\0';
    const char *keys[] = {on[0], on[1], on[2], on[3], plain[0], plain[1], plain[2], plain[3]};
    for (size_t k = with_backend ? 0 : 4; k < sizeof keys / sizeof keys[0]; k++)
        for (int i = 0; i < c->n_expects; i++)
            if (strcmp(c->expects[i].key, keys[k]) == 0) return c->expects[i].expect;
    return EQ_EXPECT_WITHIN;
}

int eq_case_tensor_expectation_sized(const eq_case *c, const char *grads, eq_layout l, const char *name,
                                     eq_expect *out, eq_expect_size *size)
{
    if (l.dp <= 1) return 0;
    for (int i = 0; i < c->n_tensor_expects; i++) {
        const eq_case_tensor_expect *e = &c->tensor_expects[i];
        if ((strcmp(e->grads, grads) == 0 || strcmp(e->grads, "any") == 0) && fnmatch(e->pattern, name, 0) == 0) {
            *out = e->expect;
            *size = e->size;
            return 1;
        }
    }
    return 0;
}

int eq_case_tensor_expectation(const eq_case *c, const char *grads, eq_layout l, const char *name, eq_expect *out)
{
    eq_expect_size size;
    return eq_case_tensor_expectation_sized(c, grads, l, name, out, &size);
}
