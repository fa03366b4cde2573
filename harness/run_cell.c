#include "harness/run_cell.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/base/status.h"

#define MEMBER(m) offsetof(eq_run_meta, m), sizeof((eq_run_meta *)0)->m
#define NO_RANGE 0, 0
#define LAYOUT_RANGE 1, 1 << 20

/* One row per field of a run's identity, in the order of the name and of diff's cell names. The
 * slots keep the order existing dumps and reports have their attributes and keys in; a new field
 * takes the next number of each. Defaults are the command line's (harness/driver/cli.c). */
const eq_cell_field eq_cell_fields[] = {
    /* key, type, member, flags, default, name part, title part, attr slot, json slot, range, heading part */
    {"case", EQ_CELL_TEXT, MEMBER(case_name),
     EQ_CELL_SECTION | EQ_CELL_ATTR | EQ_CELL_JSON | EQ_CELL_NAME | EQ_CELL_TITLE | EQ_CELL_DIFF | EQ_CELL_GOLDEN, "",
     "", "", 0, 0, NO_RANGE, NULL},
    {"dtype", EQ_CELL_DTYPE, MEMBER(dtype), EQ_CELL_ATTR | EQ_CELL_JSON | EQ_CELL_NAME | EQ_CELL_TITLE | EQ_CELL_DIFF,
     "fp32", "-", " ", 3, 3, NO_RANGE, NULL},
    {"dp", EQ_CELL_INT, MEMBER(dp),
     EQ_CELL_SECTION | EQ_CELL_HEADING_REF | EQ_CELL_ATTR | EQ_CELL_ATTR_REQUIRED | EQ_CELL_JSON | EQ_CELL_NAME |
         EQ_CELL_TITLE | EQ_CELL_DIFF,
     "1", "-dp", " dp", 16, 4, LAYOUT_RANGE, NULL},
    {"tp", EQ_CELL_INT, MEMBER(tp),
     EQ_CELL_SECTION | EQ_CELL_HEADING_REF | EQ_CELL_ATTR | EQ_CELL_ATTR_REQUIRED | EQ_CELL_JSON | EQ_CELL_NAME |
         EQ_CELL_TITLE | EQ_CELL_DIFF,
     "1", "-tp", "-tp", 17, 5, LAYOUT_RANGE, NULL},
    /* A user's other groups (harness/run_layout.h): written, shown and in the title only when set
     * (0, not recorded, is a size of 1; a reader takes 1 as 0), so no run of dp and tp changes. */
    {"pp", EQ_CELL_INT, MEMBER(pp), EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SET | EQ_CELL_TITLE_IF_SET, "0", NULL, "-pp",
     22, 26, LAYOUT_RANGE, NULL},
    {"cp", EQ_CELL_INT, MEMBER(cp), EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SET | EQ_CELL_TITLE_IF_SET, "0", NULL, "-cp",
     23, 27, LAYOUT_RANGE, NULL},
    {"ep", EQ_CELL_INT, MEMBER(ep), EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SET | EQ_CELL_TITLE_IF_SET, "0", NULL, "-ep",
     24, 28, LAYOUT_RANGE, NULL},
    {"algorithm", EQ_CELL_TEXT, MEMBER(algorithm),
     EQ_CELL_HEADING | EQ_CELL_ATTR | EQ_CELL_JSON | EQ_CELL_NAME_IF_SET | EQ_CELL_DIFF | EQ_CELL_GOLDEN, "ring", "-",
     NULL, 5, 7, NO_RANGE, NULL},
    {"grads", EQ_CELL_TEXT, MEMBER(grads),
     EQ_CELL_HEADING_IF_SET | EQ_CELL_ATTR | EQ_CELL_JSON | EQ_CELL_NAME_IF_SET | EQ_CELL_DIFF, "avg", "-grads_", NULL,
     8, 11, NO_RANGE, "grads "},
    {"size", EQ_CELL_TEXT, MEMBER(size),
     EQ_CELL_HEADING_IF_SET | EQ_CELL_ATTR | EQ_CELL_JSON | EQ_CELL_NAME_IF_SET | EQ_CELL_DIFF | EQ_CELL_GOLDEN, "ci",
     "-size_", NULL, 2, 2, NO_RANGE, "size "},
    {"numerics", EQ_CELL_TEXT, MEMBER(numerics),
     EQ_CELL_HEADING_IF_SET | EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SET | EQ_CELL_NAME_IF_SET | EQ_CELL_DIFF, "",
     "-numerics_", NULL, 12, 16, NO_RANGE, "numerics "},
    {"nccl_channels", EQ_CELL_INT, MEMBER(nccl_channels),
     EQ_CELL_HEADING_IF_SET | EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SET | EQ_CELL_NAME_IF_SET | EQ_CELL_DIFF, "0",
     "-nccl_ch", NULL, 14, 21, 1, 64, "nccl channels "}, /* --nccl-channels' range */
    {"nccl_proto", EQ_CELL_TEXT, MEMBER(nccl_proto),
     EQ_CELL_HEADING_IF_SET | EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SET | EQ_CELL_NAME_IF_SET | EQ_CELL_DIFF, "",
     "-nccl_", NULL, 15, 22, NO_RANGE, "nccl proto "},
    {"injected", EQ_CELL_TEXT, MEMBER(injected),
     EQ_CELL_HEADING_IF_SET | EQ_CELL_ATTR | EQ_CELL_JSON | EQ_CELL_NAME_IF_SET, "none", "-bug_", NULL, 9, 12, NO_RANGE,
     "bug "},
    {"seed", EQ_CELL_U64, MEMBER(seed),
     EQ_CELL_HEADING_IF_SET | EQ_CELL_ATTR | EQ_CELL_JSON | EQ_CELL_NAME_IF_SET | EQ_CELL_GOLDEN, "1234", "-seed", NULL,
     18, 9, NO_RANGE, "seed "},
    /* Not the cell's name: how and where it ran (a --comm mpi or --backend cuda run is checked
     * against the sim or cpu run of its cell, from another --out), and what ran it. */
    {"transport", EQ_CELL_TEXT, MEMBER(transport), EQ_CELL_ATTR | EQ_CELL_JSON, "sim", NULL, NULL, 4, 6, NO_RANGE,
     NULL},
    {"backend", EQ_CELL_TEXT, MEMBER(backend), EQ_CELL_ATTR | EQ_CELL_JSON, "cpu", NULL, NULL, 6, 8, NO_RANGE, NULL},
    {"model", EQ_CELL_TEXT, MEMBER(model), EQ_CELL_ATTR | EQ_CELL_JSON, "", NULL, NULL, 1, 1, NO_RANGE, NULL},
    {"version", EQ_CELL_TEXT, MEMBER(version), EQ_CELL_ATTR | EQ_CELL_JSON, "", NULL, NULL, 7, 10, NO_RANGE, NULL},
    {"gemm_kernel", EQ_CELL_TEXT, MEMBER(kernel), EQ_CELL_ATTR | EQ_CELL_JSON_IF_SET, "", NULL, NULL, 10, 13, NO_RANGE,
     NULL},
    {"cpu", EQ_CELL_TEXT, MEMBER(cpu), EQ_CELL_ATTR | EQ_CELL_JSON_IF_SET, "", NULL, NULL, 11, 14, NO_RANGE, NULL},
    {"gpu", EQ_CELL_TEXT, MEMBER(gpu), EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SET, "", NULL, NULL, 13, 15, NO_RANGE,
     NULL},
    /* A run equiv did not compute (harness/SCHEMA.md); equiv's own dumps have none of these. */
    {"source", EQ_CELL_TEXT, MEMBER(source), EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SET, "", NULL, NULL, 19, 17,
     NO_RANGE, NULL},
    {"world_size", EQ_CELL_INT, MEMBER(world_size), EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SOURCE, "0", NULL, NULL, 20,
     18, LAYOUT_RANGE, NULL},
    {"step", EQ_CELL_I64, MEMBER(step), EQ_CELL_ATTR_IF_SET | EQ_CELL_JSON_IF_SOURCE, "0", NULL, NULL, 21, 19, 0,
     INT64_MAX, NULL},
    {"environment", EQ_CELL_TEXT, MEMBER(env), EQ_CELL_JSON_IF_SOURCE, "", NULL, NULL, -1, 20, NO_RANGE, NULL},
    /* A many-step run (--steps N > 1): in the report's run objects only, set by the driver. */
    {"steps", EQ_CELL_INT, MEMBER(steps), EQ_CELL_HEADING_IF_SET | EQ_CELL_JSON_IF_SET, "0", NULL, NULL, -1, 23, 0,
     10000, "steps "},
    {"optimizer", EQ_CELL_TEXT, MEMBER(optimizer), EQ_CELL_HEADING_IF_SET | EQ_CELL_JSON_IF_SET, "", NULL, NULL, -1, 24,
     NO_RANGE, "optimizer "},
    {"lr", EQ_CELL_F64, MEMBER(lr), EQ_CELL_HEADING_IF_SET | EQ_CELL_JSON_IF_SET, "0", NULL, NULL, -1, 25, NO_RANGE,
     "lr "},
};
const int eq_cell_field_count = (int)(sizeof eq_cell_fields / sizeof eq_cell_fields[0]);

const eq_cell_field *eq_cell_find(const char *key)
{
    for (int i = 0; i < eq_cell_field_count; i++)
        if (strcmp(eq_cell_fields[i].key, key) == 0) return &eq_cell_fields[i];
    return NULL;
}

const eq_cell_field *eq_cell_by_attr_slot(int slot)
{
    for (int i = 0; i < eq_cell_field_count; i++)
        if (eq_cell_fields[i].attr_slot == slot) return &eq_cell_fields[i];
    return NULL;
}

const eq_cell_field *eq_cell_by_json_slot(int slot)
{
    for (int i = 0; i < eq_cell_field_count; i++)
        if (eq_cell_fields[i].json_slot == slot) return &eq_cell_fields[i];
    return NULL;
}

const void *eq_cell_member(const eq_run_meta *m, const eq_cell_field *f) { return (const char *)m + f->offset; }

void *eq_cell_member_mut(eq_run_meta *m, const eq_cell_field *f) { return (char *)m + f->offset; }

const char *eq_cell_text(const eq_run_meta *m, const eq_cell_field *f, char *buf, size_t len)
{
    const void *p = eq_cell_member(m, f);
    switch (f->type) {
    case EQ_CELL_TEXT: snprintf(buf, len, "%s", (const char *)p); break;
    case EQ_CELL_DTYPE: snprintf(buf, len, "%s", eq_dtype_name(*(const eq_dtype *)p)); break;
    case EQ_CELL_INT: snprintf(buf, len, "%d", *(const int *)p); break;
    case EQ_CELL_I64: snprintf(buf, len, "%" PRId64, *(const int64_t *)p); break;
    case EQ_CELL_U64: snprintf(buf, len, "%" PRIu64, *(const uint64_t *)p); break;
    case EQ_CELL_F64: snprintf(buf, len, "%.17g", *(const double *)p); break; /* reads back bit for bit */
    }
    return buf;
}

int eq_cell_parse(eq_run_meta *m, const eq_cell_field *f, const char *text)
{
    void *p = eq_cell_member_mut(m, f);
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case EQ_CELL_TEXT:
        if (strlen(text) >= f->size) return 0;
        memcpy(p, text, strlen(text) + 1);
        return 1;
    case EQ_CELL_DTYPE: {
        eq_dtype dt;
        if (eq_dtype_parse(text, &dt) != EQ_OK) {
            eq_error_clear(); /* the caller says which file held the name */
            return 0;
        }
        *(eq_dtype *)p = dt;
        return 1;
    }
    case EQ_CELL_INT: {
        long long v = strtoll(text, &end, 10);
        if (end == text || *end != '\0' || errno != 0 || v < INT32_MIN || v > INT32_MAX) return 0;
        *(int *)p = (int)v;
        return 1;
    }
    case EQ_CELL_I64: {
        long long v = strtoll(text, &end, 10);
        if (end == text || *end != '\0' || errno != 0) return 0;
        *(int64_t *)p = (int64_t)v;
        return 1;
    }
    case EQ_CELL_U64: {
        unsigned long long v = strtoull(text, &end, 10);
        if (end == text || *end != '\0' || errno != 0 || text[0] == '-') return 0;
        *(uint64_t *)p = (uint64_t)v;
        return 1;
    }
    case EQ_CELL_F64: {
        double v = strtod(text, &end);
        if (end == text || *end != '\0' || errno != 0) return 0;
        *(double *)p = v;
        return 1;
    }
    }
    return 0;
}

int eq_cell_is_default(const eq_run_meta *m, const eq_cell_field *f)
{
    char value[EQ_ENV_MAX];
    eq_cell_text(m, f, value, sizeof value);
    return strcmp(value, f->fallback) == 0 || (f->type == EQ_CELL_TEXT && value[0] == '\0');
}

void eq_cell_defaults(eq_run_meta *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < eq_cell_field_count; i++)
        if (eq_cell_fields[i].fallback[0] != '\0') eq_cell_parse(m, &eq_cell_fields[i], eq_cell_fields[i].fallback);
}

/* The fields with `flags` (or `if_set` and set), each as part + value. */
static const char *join_parts(const eq_run_meta *m, unsigned flags, unsigned if_set, int title, char *buf, size_t len)
{
    size_t used = 0;
    char value[EQ_ENV_MAX];
    buf[0] = '\0';
    for (int i = 0; i < eq_cell_field_count; i++) {
        const eq_cell_field *f = &eq_cell_fields[i];
        const char *part = title ? f->title_part : f->name_part;
        if (part == NULL || !((f->flags & flags) || ((f->flags & if_set) && !eq_cell_is_default(m, f)))) continue;
        int n = snprintf(buf + used, len - used, "%s%s", part, eq_cell_text(m, f, value, sizeof value));
        if (n < 0 || (size_t)n >= len - used) break; /* cut at the buffer's end */
        used += (size_t)n;
    }
    return buf;
}

const char *eq_cell_name(const eq_run_meta *m, char *buf, size_t len)
{
    return join_parts(m, EQ_CELL_NAME, EQ_CELL_NAME_IF_SET, 0, buf, len);
}

const char *eq_cell_title(const eq_run_meta *m, char *buf, size_t len)
{
    return join_parts(m, EQ_CELL_TITLE, EQ_CELL_TITLE_IF_SET, 1, buf, len);
}

/* Appends text at buf[*used], cut at the buffer's end. */
static void append(char *buf, size_t len, size_t *used, const char *text)
{
    int n = snprintf(buf + *used, len - *used, "%s", text);
    *used = n < 0 || (size_t)n >= len - *used ? len - 1 : *used + (size_t)n;
}

const char *eq_cell_heading(const eq_run_meta *t, const eq_run_meta *r, unsigned leave_out, char *buf, size_t len)
{
    size_t used = 0;
    char value[EQ_ENV_MAX];
    buf[0] = '\0';
    for (int pass = 0; pass < 2; pass++) { /* the test run's title, then the reference's */
        const eq_run_meta *m = pass == 0 ? t : r;
        int shown = 0;
        for (int i = 0; i < eq_cell_field_count; i++) {
            const eq_cell_field *f = &eq_cell_fields[i];
            unsigned want = pass == 0 ? EQ_CELL_TITLE : EQ_CELL_HEADING_REF;
            int set = (f->flags & EQ_CELL_TITLE_IF_SET) && !eq_cell_is_default(m, f);
            if (!((f->flags & want) || set) || (f->flags & leave_out) || f->title_part == NULL) continue;
            if (pass == 1 && shown++ == 0) append(buf, len, &used, " vs");
            /* the first part of a heading that leaves out the ones before it has no separator */
            const char *part = used == 0 ? f->title_part + strspn(f->title_part, " ") : f->title_part;
            append(buf, len, &used, part);
            append(buf, len, &used, eq_cell_text(m, f, value, sizeof value));
        }
    }
    int settings = 0;
    for (int i = 0; i < eq_cell_field_count; i++) {
        const eq_cell_field *f = &eq_cell_fields[i];
        int shown = (f->flags & EQ_CELL_HEADING) ? eq_cell_text(t, f, value, sizeof value)[0] != '\0'
                                                  : (f->flags & EQ_CELL_HEADING_IF_SET) && !eq_cell_is_default(t, f);
        if (!shown || (f->flags & leave_out)) continue;
        append(buf, len, &used, settings++ == 0 ? (used == 0 ? "(" : " (") : ", ");
        append(buf, len, &used, f->heading_part != NULL ? f->heading_part : "");
        append(buf, len, &used, eq_cell_text(t, f, value, sizeof value));
    }
    if (settings > 0) append(buf, len, &used, ")");
    return buf;
}
