#include "harness/capture.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const role_names[EQ_ROLE_COUNT] = {"input", "param", "activation", "grad", "loss"};

const char *eq_role_name(eq_role r) { return (unsigned)r < EQ_ROLE_COUNT ? role_names[r] : "?"; }

eq_status eq_role_parse(const char *name, eq_role *out)
{
    for (int r = 0; r < EQ_ROLE_COUNT; r++) {
        if (strcmp(name, role_names[r]) == 0) {
            *out = (eq_role)r;
            return EQ_OK;
        }
    }
    return EQ_FAIL(EQ_ERR_INPUT, "unknown tensor role '%s'", name);
}

void eq_capture_init(eq_capture *cap) { memset(cap, 0, sizeof *cap); }

void eq_capture_free(eq_capture *cap)
{
    for (int i = 0; i < cap->count; i++)
        if (!cap->entries[i].borrowed) eq_tensor_free(&cap->entries[i].tensor);
    free(cap->entries);
    free(cap->index);
    free(cap->findings);
    free(cap->config);
    memset(cap, 0, sizeof *cap);
}

/* Empties *t, freeing its storage unless it is borrowed. */
static void let_go(eq_tensor *t, int borrowed)
{
    if (borrowed) memset(t, 0, sizeof *t);
    else eq_tensor_free(t);
}

/* Appends an entry (path, layer, name) owning *t, or borrowing its storage; *t is left empty, also
 * on failure. */
static eq_status append(eq_capture *cap, const char *path, int layer, const char *name, eq_role role, eq_tensor *t,
                        int borrowed)
{
    eq_status st = EQ_OK;
    if (strlen(path) >= EQ_NAME_MAX || strlen(name) >= EQ_NAME_MAX) {
        st = EQ_FAIL(EQ_ERR_INPUT, "tensor path '%.60s...' is longer than %d bytes", path, EQ_NAME_MAX - 1);
        goto cleanup;
    }
    if (cap->count == cap->capacity) {
        int capacity = cap->capacity ? 2 * cap->capacity : 16;
        eq_capture_entry *grown = realloc(cap->entries, (size_t)capacity * sizeof *grown);
        if (grown == NULL) {
            st = EQ_FAIL(EQ_ERR_NOMEM, "cannot grow the capture to %d tensors", capacity);
            goto cleanup;
        }
        cap->entries = grown;
        cap->capacity = capacity;
    }
    eq_capture_entry *e = &cap->entries[cap->count];
    memset(e, 0, sizeof *e);
    snprintf(e->path, sizeof e->path, "%s", path);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->layer = layer;
    e->role = role;
    e->tensor = *t;
    e->borrowed = borrowed;
    e->shard = EQ_SHARD_REPLICATED;
    e->assembled_tp_dim = -1;
    e->grad_scale = 1.0;
    e->gemm.accumulate = EQ_FP32;
    memset(t, 0, sizeof *t);
    cap->count++;
    eq_capture_reindex(cap);
    return EQ_OK;
cleanup:
    let_go(t, borrowed);
    return st;
}

static eq_status append_in_layer(eq_capture *cap, int layer, const char *name, eq_role role, eq_tensor *t,
                                 int borrowed)
{
    char path[EQ_NAME_MAX];
    if (layer < 0 || layer > 9999 || strlen(name) + 12 >= EQ_NAME_MAX) {
        let_go(t, borrowed);
        return EQ_FAIL(EQ_ERR_INTERNAL, "bad capture name layer %d '%s'", layer, name);
    }
    snprintf(path, sizeof path, "layers/%02d/%s", layer, name);
    return append(cap, path, layer, name, role, t, borrowed);
}

eq_status eq_capture_add(eq_capture *cap, int layer, const char *name, eq_role role, eq_tensor *t)
{
    return append_in_layer(cap, layer, name, role, t, 0);
}

eq_status eq_capture_add_borrowed(eq_capture *cap, int layer, const char *name, eq_role role, eq_tensor *t)
{
    return append_in_layer(cap, layer, name, role, t, 1);
}

eq_status eq_capture_add_path(eq_capture *cap, const char *path, int layer, eq_role role, eq_tensor *t)
{
    return append(cap, path, layer, path, role, t, 0);
}

eq_status eq_capture_add_entry(eq_capture *cap, eq_capture_entry *e)
{
    eq_status st = append(cap, e->path, e->layer, e->name, e->role, &e->tensor, e->borrowed);
    if (st != EQ_OK) return st;
    eq_capture_entry *added = &cap->entries[cap->count - 1];
    added->shard = e->shard;
    added->assembled_tp_dim = e->assembled_tp_dim;
    added->grad_scale = e->grad_scale;
    added->gemm = e->gemm;
    memcpy(added->dims, e->dims, sizeof added->dims);
    return EQ_OK;
}

int eq_capture_batch(const eq_capture *cap, int first, double max_bytes, int max_count)
{
    int n = 0;
    double bytes = 0.0;
    while (first + n < cap->count && n < max_count) {
        const double b = (double)eq_tensor_bytes(&cap->entries[first + n].tensor);
        if (n > 0 && bytes + b > max_bytes) break;
        bytes += b;
        n++;
    }
    return n;
}

eq_status eq_capture_add_finding(eq_capture *cap, const char *fmt, ...)
{
    char(*grown)[EQ_FINDING_MAX] = realloc(cap->findings, (size_t)(cap->n_findings + 1) * sizeof *grown);
    if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for a finding");
    cap->findings = grown;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cap->findings[cap->n_findings], EQ_FINDING_MAX, fmt, ap);
    va_end(ap);
    cap->n_findings++;
    return EQ_OK;
}

eq_status eq_capture_add_copy(eq_capture *cap, int layer, const char *name, eq_role role,
                              const eq_tensor *t)
{
    eq_tensor copy;
    eq_status st = eq_tensor_clone(&copy, t);
    if (st != EQ_OK) return st;
    return eq_capture_add(cap, layer, name, role, &copy);
}

/* FNV-1a: paths share long prefixes ("layers/07/"), which it spreads well enough. */
static unsigned hash_path(const char *path)
{
    unsigned h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) h = (h ^ *p) * 16777619u;
    return h;
}

/* Enters entry i in the table (size a power of two, under half full), unless an earlier entry has
 * its path. */
static void index_insert(int *table, int size, const eq_capture_entry *entries, int i)
{
    for (unsigned slot = hash_path(entries[i].path) & (unsigned)(size - 1);; slot = (slot + 1) & (unsigned)(size - 1)) {
        if (table[slot] == 0) {
            table[slot] = i + 1;
            return;
        }
        if (strcmp(entries[table[slot] - 1].path, entries[i].path) == 0) return;
    }
}

void eq_capture_reindex(eq_capture *cap)
{
    if (cap->indexed > cap->count) cap->indexed = 0; /* entries were dropped: start again */
    if (2 * (int64_t)cap->count >= cap->index_size || cap->indexed == 0) {
        int size = 64;
        while (size <= 2 * cap->count) size *= 2;
        int *table = calloc((size_t)size, sizeof *table);
        free(cap->index);
        cap->index = table;
        cap->index_size = table != NULL ? size : 0;
        cap->indexed = 0;
        if (table == NULL) return; /* eq_capture_find searches in order */
    }
    for (; cap->indexed < cap->count; cap->indexed++)
        index_insert(cap->index, cap->index_size, cap->entries, cap->indexed);
}

const eq_capture_entry *eq_capture_find(const eq_capture *cap, const char *path)
{
    if (cap->index != NULL && cap->indexed == cap->count) {
        const unsigned mask = (unsigned)(cap->index_size - 1);
        for (unsigned slot = hash_path(path) & mask; cap->index[slot] != 0; slot = (slot + 1) & mask)
            if (strcmp(cap->entries[cap->index[slot] - 1].path, path) == 0) return &cap->entries[cap->index[slot] - 1];
        return NULL;
    }
    for (int i = 0; i < cap->count; i++)
        if (strcmp(cap->entries[i].path, path) == 0) return &cap->entries[i];
    return NULL;
}

/* The item named `name`, appended (zeroed) when there is none. */
static eq_status config_slot(eq_capture *cap, const char *name, eq_config_item **out)
{
    if (strlen(name) >= EQ_CONFIG_NAME_MAX) return EQ_FAIL(EQ_ERR_INTERNAL, "config name '%.40s...' too long", name);
    for (int i = 0; i < cap->n_config; i++) {
        if (strcmp(cap->config[i].name, name) == 0) {
            *out = &cap->config[i];
            return EQ_OK;
        }
    }
    eq_config_item *grown = realloc(cap->config, (size_t)(cap->n_config + 1) * sizeof *grown);
    if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory for config item %s", name);
    cap->config = grown;
    *out = &cap->config[cap->n_config++];
    memset(*out, 0, sizeof **out);
    snprintf((*out)->name, sizeof (*out)->name, "%s", name);
    return EQ_OK;
}

eq_status eq_capture_config_number(eq_capture *cap, const char *name, double value)
{
    eq_config_item *item = NULL;
    eq_status st = config_slot(cap, name, &item);
    if (st != EQ_OK) return st;
    item->is_text = item->is_integer = 0;
    item->number = value;
    return EQ_OK;
}

eq_status eq_capture_config_int(eq_capture *cap, const char *name, int64_t value)
{
    eq_status st = eq_capture_config_number(cap, name, (double)value);
    if (st == EQ_OK) cap->config[cap->n_config - 1].is_integer = 1;
    return st;
}

eq_status eq_capture_config_text(eq_capture *cap, const char *name, const char *text)
{
    eq_config_item *item = NULL;
    eq_status st = config_slot(cap, name, &item);
    if (st != EQ_OK) return st;
    if (strlen(text) >= sizeof item->text) return EQ_FAIL(EQ_ERR_INTERNAL, "config %s: text too long", name);
    item->is_text = 1;
    item->is_integer = 0;
    snprintf(item->text, sizeof item->text, "%s", text);
    return EQ_OK;
}

eq_status eq_capture_name_dims(eq_capture *cap, const eq_dims_rule *rules)
{
    for (int i = 0; i < cap->count; i++) {
        eq_capture_entry *e = &cap->entries[i];
        if (e->dims[0] != '\0') continue;
        for (const eq_dims_rule *r = rules; r->pattern != NULL; r++) {
            if (fnmatch(r->pattern, e->name, 0) != 0) continue;
            int n = 1;
            for (const char *c = r->dims; *c; c++) n += *c == ',';
            if (n != e->tensor.ndim || strlen(r->dims) >= sizeof e->dims)
                return EQ_FAIL(EQ_ERR_INTERNAL, "dims '%s' do not fit %s (%d dimensions)", r->dims, e->path,
                               e->tensor.ndim);
            snprintf(e->dims, sizeof e->dims, "%s", r->dims);
            break;
        }
    }
    return EQ_OK;
}
