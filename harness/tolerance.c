/* Tolerance tables (golden/tolerances.ini) read with inih, and the expectation logic.
 *
 * inih reports only the line of the first error it meets, so the file is fed to it through the
 * line reader of harness/input_file.h: the handler then knows the line it is on, every complaint
 * names FILE:LINE, and what inih does not pass on or would cut (a heading with no keys under it,
 * a heading given twice, a name longer than inih keeps) is caught as well. */
#include "harness/tolerance.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/input_file.h"

/* Keys every entry must hold, as bits of tol_entry_state.keys_seen. */
enum { KEY_ATOL = 1, KEY_RTOL = 2, KEY_SOURCE = 4, KEY_ALL = 7, KEY_SCALE = 8 /* optional */ };

typedef struct {
    int header_line; /* line of the [name] heading */
    int keys_seen;   /* KEY_* bits */
} tol_entry_state;

typedef struct {
    eq_ini_reader r;          /* the line inih is on, the last heading's, the first complaint */
    int header_of_current;    /* heading line of the entry being filled, 0 if none */
    int current;              /* its index in table, -1 if the heading was rejected */
    eq_tolerance_table *table;
    tol_entry_state state[EQ_TOL_MAX_ENTRIES];
} tol_parse;

static void note_error(tol_parse *p, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The first complaint is kept and ends the parse (the reader stops there). */
static void note_error(tol_parse *p, int line, const char *fmt, ...)
{
    char text[sizeof p->r.error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    eq_ini_error(&p->r, line, "%s", text);
}

/* Parses a whole value as a finite number >= 0. */
static int parse_nonnegative(const char *value, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end != '\0' || errno == ERANGE || !isfinite(v) || v < 0.0) return 0;
    *out = v;
    return 1;
}

/* Opens the entry for `section` when the first key under a new heading arrives. */
static eq_tolerance *entry_for(tol_parse *p, const char *section)
{
    eq_tolerance_table *t = p->table;
    if (p->header_of_current == p->r.heading_line) return p->current < 0 ? NULL : &t->entries[p->current];
    p->header_of_current = p->r.heading_line;
    p->current = -1;
    /* (a heading given twice, or one longer than inih keeps, the reader has refused already) */
    if (t->count == EQ_TOL_MAX_ENTRIES) {
        note_error(p, p->r.line, "more than %d entries", EQ_TOL_MAX_ENTRIES);
        return NULL;
    }
    if (section[0] == '\0' || strlen(section) >= EQ_TOL_NAME_MAX) {
        note_error(p, p->r.line, "section name '%s' is empty or longer than %d characters", section,
                   EQ_TOL_NAME_MAX - 1);
        return NULL;
    }
    eq_tolerance *e = &t->entries[t->count];
    memset(e, 0, sizeof *e);
    memcpy(e->name, section, strlen(section) + 1);
    p->state[t->count].header_line = p->r.heading_line;
    p->state[t->count].keys_seen = 0;
    p->current = t->count++;
    return e;
}

/* inih handler: one call per name = value line. Returns 0 to make inih report the line. */
static int handle_key(void *user, const char *section, const char *name, const char *value)
{
    tol_parse *p = user;
    if (p->r.heading_line == 0) {
        note_error(p, p->r.line, "'%s' is outside any [section]", name);
        return 0;
    }
    eq_tolerance *e = entry_for(p, section);
    if (e == NULL) return 0;
    tol_entry_state *s = &p->state[e - p->table->entries];
    int key = strcmp(name, "atol") == 0     ? KEY_ATOL
              : strcmp(name, "rtol") == 0   ? KEY_RTOL
              : strcmp(name, "source") == 0 ? KEY_SOURCE
              : strcmp(name, "scale") == 0  ? KEY_SCALE
                                            : 0;
    if (key == 0) {
        note_error(p, p->r.line, "unknown key '%s' in [%s] (known: atol, rtol, source, scale)", name, section);
        return 0;
    }
    if (s->keys_seen & key) { /* also what an indented continuation line looks like to inih */
        note_error(p, p->r.line, "'%s' given twice in [%s] (or continued by an indented line)",
                   name, section);
        return 0;
    }
    s->keys_seen |= key;
    if (key == KEY_SOURCE) {
        if (value[0] == '\0' || strlen(value) >= EQ_TOL_SOURCE_MAX) {
            note_error(p, p->r.line, "source in [%s] is empty or longer than %d characters", section,
                       EQ_TOL_SOURCE_MAX - 1);
            return 0;
        }
        memcpy(e->source, value, strlen(value) + 1);
        return 1;
    }
    if (key == KEY_SCALE) {
        if (strcmp(value, "absolute") == 0) e->atol_scale = EQ_ATOL_ABSOLUTE;
        else if (strcmp(value, "ref_rms") == 0) e->atol_scale = EQ_ATOL_REF_RMS;
        else {
            note_error(p, p->r.line, "scale = '%s' in [%s] (want absolute or ref_rms)", value, section);
            return 0;
        }
        return 1;
    }
    double number;
    if (!parse_nonnegative(value, &number)) {
        note_error(p, p->r.line, "%s = '%s' in [%s] is not a finite number >= 0", name, value, section);
        return 0;
    }
    if (key == KEY_ATOL) e->atol = number;
    else e->rtol = number;
    return 1;
}

eq_status eq_tolerance_load(const char *path, eq_tolerance_table *out)
{
    eq_status st = EQ_OK;
    memset(out, 0, sizeof *out);
    tol_parse *p = calloc(1, sizeof *p);
    if (p == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "cannot allocate the tolerance parser");
    p->table = out;
    p->r.what = "tolerance file";
    p->r.empty_section = "has no atol, rtol or source";
    EQ_TRY(eq_ini_parse(path, &p->r, handle_key, p));
    for (int i = 0; i < out->count && p->r.error_line == 0; i++) {
        int missing = KEY_ALL & ~p->state[i].keys_seen;
        if (missing == 0) continue;
        note_error(p, p->state[i].header_line, "[%s] has no %s", out->entries[i].name,
                   (missing & KEY_ATOL) ? "atol" : (missing & KEY_RTOL) ? "rtol" : "source");
    }
    if (p->r.error_line != 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "tolerance file %s:%d: %s", path, p->r.error_line, p->r.error);
        goto cleanup;
    }
    if (out->count == 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "tolerance file %s: no entries", path);
        goto cleanup;
    }
cleanup:
    free(p);
    if (st != EQ_OK) memset(out, 0, sizeof *out);
    return st;
}

const eq_tolerance *eq_tolerance_find(const eq_tolerance_table *table, const char *name)
{
    for (int i = 0; i < table->count; i++)
        if (strcmp(table->entries[i].name, name) == 0) return &table->entries[i];
    return NULL;
}

static const char *const expect_names[EQ_EXPECT_COUNT] = {"bit_exact", "within", "differs", "must_fail"};

const char *eq_expect_name(eq_expect e) { return (unsigned)e < EQ_EXPECT_COUNT ? expect_names[e] : "?"; }

eq_status eq_expect_parse(const char *name, eq_expect *out)
{
    for (int e = 0; e < EQ_EXPECT_COUNT; e++) {
        if (strcmp(name, expect_names[e]) == 0) {
            *out = (eq_expect)e;
            return EQ_OK;
        }
    }
    return EQ_FAIL(EQ_ERR_INPUT, "unknown expectation '%s' (want bit_exact, within, differs, must_fail)",
                   name);
}

const char *eq_observed_name(eq_observed o)
{
    switch (o) {
    case EQ_OBS_BIT_EXACT: return "bit-exact";
    case EQ_OBS_WITHIN: return "within";
    case EQ_OBS_OUTSIDE: return "OUTSIDE";
    case EQ_OBS_NONFINITE: return "NON-FINITE";
    }
    return "?";
}

int eq_expectation_met(eq_expect e, eq_observed o)
{
    switch (e) {
    case EQ_EXPECT_BIT_EXACT: return o == EQ_OBS_BIT_EXACT;
    case EQ_EXPECT_WITHIN: return o == EQ_OBS_BIT_EXACT || o == EQ_OBS_WITHIN;
    case EQ_EXPECT_DIFFERS: return o == EQ_OBS_WITHIN || o == EQ_OBS_OUTSIDE;
    case EQ_EXPECT_MUST_FAIL: return o == EQ_OBS_OUTSIDE || o == EQ_OBS_NONFINITE;
    }
    return 0;
}

/* A whole string as a finite number. */
static int parse_finite(const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

eq_status eq_expect_parse_sized(const char *text, eq_expect *out, eq_expect_size *size)
{
    char word[32], metric[32], range[96], extra[2];
    *size = (eq_expect_size){EQ_SIZE_ANY, 0.0, 0.0};
    int n = sscanf(text, "%31s %31s %95s %1s", word, metric, range, extra);
    if (n < 1) return EQ_FAIL(EQ_ERR_INPUT, "empty expectation");
    if (n == 1) return eq_expect_parse(word, out);
    const char *want = "want differs rel LO..HI or differs factor LO..HI";
    if (strcmp(word, "differs") != 0)
        return EQ_FAIL(EQ_ERR_INPUT, "'%s': only differs takes a size (%s)", text, want);
    if (n != 3) return EQ_FAIL(EQ_ERR_INPUT, "'%s' (%s)", text, want);
    if (strcmp(metric, "rel") == 0) size->metric = EQ_SIZE_REL;
    else if (strcmp(metric, "factor") == 0) size->metric = EQ_SIZE_FACTOR;
    else return EQ_FAIL(EQ_ERR_INPUT, "'%s': unknown size '%s' (%s)", text, metric, want);
    char *dots = strstr(range, "..");
    if (dots == NULL) return EQ_FAIL(EQ_ERR_INPUT, "'%s': the range '%s' is not LO..HI", text, range);
    *dots = '\0';
    if (!parse_finite(range, &size->lo) || !parse_finite(dots + 2, &size->hi))
        return EQ_FAIL(EQ_ERR_INPUT, "'%s': the range's ends are not finite numbers", text);
    if (size->lo > size->hi) return EQ_FAIL(EQ_ERR_INPUT, "'%s': LO is above HI", text);
    if (size->metric == EQ_SIZE_REL && size->lo < 0.0)
        return EQ_FAIL(EQ_ERR_INPUT, "'%s': a relative error is >= 0", text);
    *out = EQ_EXPECT_DIFFERS;
    return EQ_OK;
}

const char *eq_size_metric_name(eq_size_metric m)
{
    switch (m) {
    case EQ_SIZE_REL: return "rel";
    case EQ_SIZE_FACTOR: return "factor";
    case EQ_SIZE_ANY: break;
    }
    return "";
}

int eq_expect_size_met(const eq_expect_size *size, double worst_rel, double ls_scale)
{
    switch (size->metric) {
    case EQ_SIZE_REL: return worst_rel >= size->lo && worst_rel <= size->hi; /* NaN: not met */
    case EQ_SIZE_FACTOR: return ls_scale >= size->lo && ls_scale <= size->hi;
    case EQ_SIZE_ANY: break;
    }
    return 1;
}
