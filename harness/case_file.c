#include "harness/case_file.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

eq_status eq_layout_parse(const char *text, eq_layout *out)
{
    int dp = 0, tp = 0, used = 0;
    if (sscanf(text, "dp%d-tp%d%n", &dp, &tp, &used) != 2 || text[used] != '\0' || dp < 1 || tp < 1 ||
        dp > 1024 || tp > 1024)
        return EQ_FAIL(EQ_ERR_USAGE, "bad layout '%s' (want dpD-tpT, e.g. dp1-tp4)", text);
    out->dp = dp;
    out->tp = tp;
    return EQ_OK;
}

const char *eq_layout_name(eq_layout l, char *buf, size_t len)
{
    snprintf(buf, len, "dp%d-tp%d", l.dp, l.tp);
    return buf;
}

/* Parser state: the first error wins and stops the parse (a handler returning 0 makes inih
 * report that line). */
typedef struct {
    eq_case *c;
    char error[256];
} parse_state;

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t')) *--end = '\0';
    return s;
}

static int copy_key(char *dst, const char *src, parse_state *ps, const char *what)
{
    if (strlen(src) >= EQ_CASE_KEY_MAX) {
        snprintf(ps->error, sizeof ps->error, "%s '%.40s...' is too long", what, src);
        return 0;
    }
    strcpy(dst, src);
    return 1;
}

/* Calls item(ps, token) for each comma-separated token of value. */
static int for_each_item(parse_state *ps, const char *value, int (*item)(parse_state *, const char *))
{
    char list[512];
    snprintf(list, sizeof list, "%s", value);
    char *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!item(ps, trim(tok))) return 0;
        n++;
    }
    if (n == 0) snprintf(ps->error, sizeof ps->error, "empty list");
    return n > 0;
}

static int add_dtype(parse_state *ps, const char *tok)
{
    eq_dtype dt;
    if (eq_dtype_parse(tok, &dt) != EQ_OK) {
        eq_error_clear();
        snprintf(ps->error, sizeof ps->error, "unknown dtype '%s'", tok);
        return 0;
    }
    if (ps->c->n_dtypes == EQ_DTYPE_COUNT) {
        snprintf(ps->error, sizeof ps->error, "dtype '%s' listed twice", tok);
        return 0;
    }
    ps->c->dtypes[ps->c->n_dtypes++] = dt;
    return 1;
}

static int add_layout(parse_state *ps, const char *tok)
{
    eq_layout l;
    if (eq_layout_parse(tok, &l) != EQ_OK) {
        eq_error_clear();
        snprintf(ps->error, sizeof ps->error, "bad layout '%s' (want dpD-tpT)", tok);
        return 0;
    }
    if (ps->c->n_layouts == EQ_CASE_MAX_LAYOUTS) {
        snprintf(ps->error, sizeof ps->error, "more than %d layouts", EQ_CASE_MAX_LAYOUTS);
        return 0;
    }
    ps->c->layouts[ps->c->n_layouts++] = l;
    return 1;
}

static int parse_case_key(parse_state *ps, const char *name, const char *value)
{
    eq_case *c = ps->c;
    if (strcmp(name, "model") == 0) return copy_key(c->model, value, ps, "model");
    if (strcmp(name, "summary") == 0) {
        snprintf(c->summary, sizeof c->summary, "%s", value);
        return 1;
    }
    if (strcmp(name, "dtypes") == 0) return for_each_item(ps, value, add_dtype);
    if (strcmp(name, "layouts") == 0) return for_each_item(ps, value, add_layout);
    snprintf(ps->error, sizeof ps->error, "unknown key '%s' in [case]", name);
    return 0;
}

static int parse_size_key(parse_state *ps, const char *size_name, const char *name, const char *value)
{
    eq_case *c = ps->c;
    eq_case_size *s = NULL;
    for (int i = 0; i < c->n_sizes; i++)
        if (strcmp(c->sizes[i].name, size_name) == 0) s = &c->sizes[i];
    if (s == NULL) {
        if (c->n_sizes == EQ_CASE_MAX_SIZES) {
            snprintf(ps->error, sizeof ps->error, "more than %d sizes", EQ_CASE_MAX_SIZES);
            return 0;
        }
        s = &c->sizes[c->n_sizes++];
        if (!copy_key(s->name, size_name, ps, "size name")) return 0;
    }
    if (s->count == EQ_CASE_MAX_PARAMS) {
        snprintf(ps->error, sizeof ps->error, "more than %d parameters in [size.%s]", EQ_CASE_MAX_PARAMS,
                 size_name);
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno != 0 || end == value || *trim(end) != '\0' || v < 1) {
        snprintf(ps->error, sizeof ps->error, "[size.%s] %s = '%s' is not a positive integer", size_name, name,
                 value);
        return 0;
    }
    eq_size_param *p = &s->params[s->count];
    if (!copy_key(p->key, name, ps, "size key")) return 0;
    p->value = v;
    s->count++;
    return 1;
}

static int parse_tolerance_key(parse_state *ps, const char *name, const char *value)
{
    eq_dtype dt;
    char dtype_name[EQ_CASE_KEY_MAX];
    snprintf(dtype_name, sizeof dtype_name, "%.*s", (int)strcspn(name, "."), name);
    const char *role = name + strlen(dtype_name); /* "" or ".grad" */
    if (eq_dtype_parse(dtype_name, &dt) != EQ_OK || (role[0] != '\0' && strcmp(role, ".grad") != 0)) {
        eq_error_clear();
        snprintf(ps->error, sizeof ps->error, "[tolerance] key '%s' is not a dtype or dtype.grad", name);
        return 0;
    }
    char *slot = role[0] ? ps->c->grad_tolerance[dt] : ps->c->tolerance[dt];
    return copy_key(slot, value, ps, "tolerance entry");
}

static int parse_expect_key(parse_state *ps, const char *name, const char *value)
{
    eq_case *c = ps->c;
    if (c->n_expects == EQ_CASE_MAX_EXPECT) {
        snprintf(ps->error, sizeof ps->error, "more than %d expectations", EQ_CASE_MAX_EXPECT);
        return 0;
    }
    eq_case_expect *e = &c->expects[c->n_expects];
    if (eq_expect_parse(value, &e->expect) != EQ_OK) {
        eq_error_clear();
        snprintf(ps->error, sizeof ps->error, "[expect] %s = '%s' (want bit_exact, within, differs, must_fail)",
                 name, value);
        return 0;
    }
    if (!copy_key(e->key, name, ps, "expectation key")) return 0;
    c->n_expects++;
    return 1;
}

static int parse_tensor_expect_key(parse_state *ps, const char *grads, const char *name, const char *value)
{
    eq_case *c = ps->c;
    if (strcmp(grads, "avg") != 0 && strcmp(grads, "sum") != 0) {
        snprintf(ps->error, sizeof ps->error, "unknown section [expect.%s] (want expect.avg or expect.sum)", grads);
        return 0;
    }
    if (c->n_tensor_expects == EQ_CASE_MAX_EXPECT) {
        snprintf(ps->error, sizeof ps->error, "more than %d tensor expectations", EQ_CASE_MAX_EXPECT);
        return 0;
    }
    eq_case_tensor_expect *e = &c->tensor_expects[c->n_tensor_expects];
    if (eq_expect_parse(value, &e->expect) != EQ_OK) {
        eq_error_clear();
        snprintf(ps->error, sizeof ps->error, "[expect.%s] %s = '%s' (want bit_exact, within, differs, must_fail)",
                 grads, name, value);
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
    if (strncmp(section, "expect.", 7) == 0) return parse_tensor_expect_key(ps, section + 7, name, value);
    if (strcmp(section, "case") == 0) return parse_case_key(ps, name, value);
    if (strncmp(section, "size.", 5) == 0 && section[5] != '\0')
        return parse_size_key(ps, section + 5, name, value);
    if (strcmp(section, "tolerance") == 0) return parse_tolerance_key(ps, name, value);
    if (strcmp(section, "expect") == 0) return parse_expect_key(ps, name, value);
    snprintf(ps->error, sizeof ps->error, "unknown section [%s]", section);
    return 0;
}

eq_status eq_case_load(const char *path, eq_case *out)
{
    memset(out, 0, sizeof *out);
    if (strlen(path) >= sizeof out->path) return EQ_FAIL(EQ_ERR_USAGE, "case path too long");
    strcpy(out->path, path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out->name, sizeof out->name, "%.*s", (int)strcspn(base, "."), base);

    FILE *fp = fopen(path, "r");
    if (fp == NULL) return EQ_FAIL(EQ_ERR_INPUT, "cannot read case file %s: %s", path, strerror(errno));
    parse_state ps = {.c = out};
    int line = ini_parse_file(fp, on_entry, &ps);
    fclose(fp);
    if (line != 0) {
        if (ps.error[0] == '\0') snprintf(ps.error, sizeof ps.error, "syntax error");
        return EQ_FAIL(EQ_ERR_INPUT, "case file %s:%d: %s", path, line, ps.error);
    }
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

/* Appends ", item" (or "item" first) to list when it fits in cap bytes. */
static void append_listed(char *list, size_t cap, const char *item)
{
    size_t used = strlen(list), len = strlen(item);
    if (used + len + 3 > cap) return;
    if (used > 0) {
        memcpy(list + used, ", ", 2);
        used += 2;
    }
    memcpy(list + used, item, len + 1);
}

static int compare_names(const void *a, const void *b) { return strcmp(a, b); }

eq_status eq_case_list(const char *dir, char names[][EQ_CASE_KEY_MAX], int max, int *count)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (d == NULL) return EQ_FAIL(EQ_ERR_INPUT, "cannot read the cases folder %s: %s", dir, strerror(errno));
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || len - 4 >= EQ_CASE_KEY_MAX || strcmp(e->d_name + len - 4, ".ini") != 0) continue;
        if (e->d_name[0] == '.' || *count == max) continue;
        snprintf(names[*count], EQ_CASE_KEY_MAX, "%.*s", (int)(len - 4), e->d_name);
        (*count)++;
    }
    closedir(d);
    qsort(names, (size_t)*count, EQ_CASE_KEY_MAX, compare_names);
    return EQ_OK;
}

eq_status eq_case_load_named(const char *dir, const char *name, eq_case *out)
{
    char known[64][EQ_CASE_KEY_MAX];
    int n = 0;
    eq_status st = eq_case_list(dir, known, 64, &n);
    if (st != EQ_OK) return st;
    for (int i = 0; i < n; i++) {
        if (strcmp(known[i], name) == 0) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s.ini", dir, name);
            return eq_case_load(path, out);
        }
    }
    char list[512] = "";
    for (int i = 0; i < n; i++) append_listed(list, sizeof list, known[i]);
    return EQ_FAIL(EQ_ERR_USAGE, "unknown case '%s' (known: %s)", name, list);
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

eq_expect eq_case_expectation(const eq_case *c, eq_dtype dt, eq_layout l)
{
    if (l.dp == 1 && l.tp == 1) return EQ_EXPECT_BIT_EXACT;
    char layout[32], both[EQ_CASE_KEY_MAX + 32];
    eq_layout_name(l, layout, sizeof layout);
    snprintf(both, sizeof both, "%s.%s", eq_dtype_name(dt), layout);
    const char *keys[] = {both, layout, eq_dtype_name(dt), "default"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (int i = 0; i < c->n_expects; i++)
            if (strcmp(c->expects[i].key, keys[k]) == 0) return c->expects[i].expect;
    return EQ_EXPECT_WITHIN;
}

int eq_case_tensor_expectation(const eq_case *c, const char *grads, eq_layout l, const char *name, eq_expect *out)
{
    if (l.dp <= 1) return 0;
    for (int i = 0; i < c->n_tensor_expects; i++) {
        const eq_case_tensor_expect *e = &c->tensor_expects[i];
        if (strcmp(e->grads, grads) == 0 && fnmatch(e->pattern, name, 0) == 0) {
            *out = e->expect;
            return 1;
        }
    }
    return 0;
}
