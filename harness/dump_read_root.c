/* The run's identity from the root of one HDF5 file of the capture schema (harness/SCHEMA.md):
 * the root attributes of harness/run_cell.h's field table, a rank's place in the world, the schema
 * version and the run's environment (every other root attribute), and the scalar attribute readers
 * the dump reader (harness/dump_read.c) also reads each dataset's attributes with. Every problem is
 * EQ_ERR_INPUT naming the file, the attribute and what is wrong. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness/dump_read_root.h"
#include "harness/run_cell.h"
#include "harness/run_layout.h"

/* The schema version this reader understands (root attribute "schema"; absent means 1). */
#define SCHEMA_VERSION 1

/* Text a report can print: valid UTF-8 without control characters. A damaged file's strings are
 * refused here, not later by a report writer. */
int eq_dump_is_text(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int extra = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : -1;
        if (extra < 0 || *p < 0x20 || *p == 0x7f || (extra == 1 && *p < 0xc2) || (extra == 3 && *p > 0xf4)) return 0;
        for (int i = 1; i <= extra; i++)
            if ((p[i] & 0xc0) != 0x80) return 0;
        p += 1 + extra;
    }
    return 1;
}

/* Reads one scalar attribute of `obj` ("where" names it in messages) into dest: a string of at most
 * dest_len - 1 bytes (variable- or fixed-length) when want_class is H5T_STRING, else one number of
 * class want_class (H5T_INTEGER or H5T_FLOAT; an integer is accepted as a float) converted to
 * mem_type. */
eq_status eq_dump_read_attr(hid_t obj, const char *path, const char *where, const char *name, H5T_class_t want_class,
                            hid_t mem_type, void *dest, size_t dest_len)
{
    eq_status st = EQ_OK;
    hid_t attr = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hid_t str_type = H5I_INVALID_HID;
    char *vlen_value = NULL;
    if (H5Aexists(obj, name) <= 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: %s has no attribute '%s'", path, where, name);
        goto cleanup;
    }
    attr = H5Aopen(obj, name, H5P_DEFAULT);
    type = attr >= 0 ? H5Aget_type(attr) : H5I_INVALID_HID;
    space = attr >= 0 ? H5Aget_space(attr) : H5I_INVALID_HID;
    H5_TRY(type < 0 || space < 0 ? -1 : 0, EQ_ERR_INPUT, "%s: cannot read attribute '%s' of %s", path, name, where);
    H5T_class_t have = H5Tget_class(type);
    int class_ok = have == want_class || (want_class == H5T_FLOAT && have == H5T_INTEGER);
    if (!class_ok || H5Sget_simple_extent_npoints(space) != 1) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: attribute '%s' of %s is not a single %s", path, name, where,
                     want_class == H5T_STRING ? "string" : want_class == H5T_INTEGER ? "integer" : "number");
        goto cleanup;
    }
    if (want_class != H5T_STRING) {
        H5_TRY(H5Aread(attr, mem_type, dest), EQ_ERR_INPUT, "%s: cannot read attribute '%s' of %s", path, name, where);
        goto cleanup;
    }
    htri_t is_vlen = H5Tis_variable_str(type);
    size_t fixed_len = H5Tget_size(type);
    if (is_vlen < 0 || (!is_vlen && fixed_len >= dest_len)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: attribute '%s' of %s is not a string of at most %zu bytes", path, name, where,
                     dest_len - 1);
        goto cleanup;
    }
    /* The memory type keeps the file's character set (HDF5 does not convert between them). */
    H5_TRY(str_type = H5Tcopy(type), EQ_ERR_INPUT, "%s: string type", path);
    if (is_vlen) {
        H5_TRY(H5Aread(attr, str_type, &vlen_value), EQ_ERR_INPUT, "%s: cannot read attribute '%s' of %s", path,
               name, where);
        if (vlen_value == NULL || strlen(vlen_value) >= dest_len) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: attribute '%s' of %s is not a string of at most %zu bytes", path, name,
                         where, dest_len - 1);
            goto cleanup;
        }
        memcpy(dest, vlen_value, strlen(vlen_value) + 1);
    } else {
        H5_TRY(H5Tset_size(str_type, dest_len), EQ_ERR_INPUT, "%s: string type", path);
        H5_TRY(H5Tset_strpad(str_type, H5T_STR_NULLTERM), EQ_ERR_INPUT, "%s: string type", path);
        H5_TRY(H5Aread(attr, str_type, dest), EQ_ERR_INPUT, "%s: cannot read attribute '%s' of %s", path, name,
               where);
    }
    if (!eq_dump_is_text(dest)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: attribute '%s' of %s is not text (not UTF-8, or control characters: the file "
                     "is damaged?)", path, name, where);
        goto cleanup;
    }
cleanup:
    if (vlen_value != NULL) H5free_memory(vlen_value);
    eq_h5_close(&str_type);
    eq_h5_close(&space);
    eq_h5_close(&type);
    eq_h5_close(&attr);
    return st;
}

/* Reads an optional attribute: *found says whether it was there. */
eq_status eq_dump_read_optional(hid_t obj, const char *path, const char *where, const char *name,
                                H5T_class_t want_class, hid_t mem_type, void *dest, size_t dest_len, int *found)
{
    htri_t exists = H5Aexists(obj, name);
    *found = exists > 0;
    if (exists < 0) return EQ_FAIL(EQ_ERR_INPUT, "%s: cannot list the attributes of %s", path, where);
    return exists > 0 ? eq_dump_read_attr(obj, path, where, name, want_class, mem_type, dest, dest_len) : EQ_OK;
}

/* Root attributes read apart from the field table (harness/run_cell.h); any other is the run's
 * environment. */
static const char *const root_others[] = {"schema", "rank", "dp_rank", "tp_rank", "pp_rank", "cp_rank", "ep_rank"};
#define N_ROOT_OTHERS (int)(sizeof root_others / sizeof root_others[0])

static int is_known_root_attr(const char *name)
{
    const eq_cell_field *f = eq_cell_find(name);
    if (f != NULL && (f->flags & (EQ_CELL_ATTR | EQ_CELL_ATTR_IF_SET))) return 1;
    for (int i = 0; i < N_ROOT_OTHERS; i++)
        if (strcmp(name, root_others[i]) == 0) return 1;
    return 0;
}

typedef struct {
    const char *path;
    eq_run_meta *meta;
    eq_status st;
} env_walk;

/* Every root attribute the schema does not name (torch_version, NCCL_ALGO, device, ...) is kept as
 * "name=value" in meta->env, strings and scalar numbers alike; others are skipped. */
static herr_t collect_env(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    env_walk *w = data;
    char value[256] = "";
    if (is_known_root_attr(name) || !eq_dump_is_text(name)) return 0; /* an unprintable name is left out too */
    hid_t attr = H5Aopen(loc, name, H5P_DEFAULT), type = attr >= 0 ? H5Aget_type(attr) : H5I_INVALID_HID;
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    eq_h5_close(&type);
    eq_h5_close(&attr);
    if (cls == H5T_STRING) {
        w->st =
            eq_dump_read_attr(loc, w->path, "the root group", name, H5T_STRING, H5I_INVALID_HID, value, sizeof value);
    } else if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
        double v = 0;
        w->st = eq_dump_read_attr(loc, w->path, "the root group", name, H5T_FLOAT, H5T_NATIVE_DOUBLE, &v, 0);
        snprintf(value, sizeof value, "%.17g", v);
    } else {
        return 0;
    }
    if (w->st != EQ_OK) {
        /* an environment entry that cannot be read (too long, not scalar) is left out, not fatal */
        eq_error_clear();
        w->st = EQ_OK;
        return 0;
    }
    char *env = w->meta->env;
    size_t used = strlen(env);
    snprintf(env + used, sizeof w->meta->env - used, "%s%s=%s", used ? "; " : "", name, value);
    return 0;
}

static eq_status read_int_attr(hid_t file, const char *path, const char *name, int required, int64_t lo, int64_t hi,
                               int64_t *out, int *found)
{
    eq_status st =
        eq_dump_read_optional(file, path, "the root group", name, H5T_INTEGER, H5T_NATIVE_INT64, out, 0, found);
    if (st != EQ_OK) return st;
    if (!*found && required)
        return EQ_FAIL(EQ_ERR_INPUT, "%s: the root group has no attribute '%s' (every file names its run's dp and tp)",
                       path, name);
    if (*found && (*out < lo || *out > hi))
        return EQ_FAIL(EQ_ERR_INPUT, "%s: root attribute %s = %lld (want %lld to %lld)", path, name, (long long)*out,
                       (long long)lo, (long long)hi);
    return EQ_OK;
}

/* One field of the run's identity (harness/run_cell.h) from its root attribute, when the file
 * has it; *found says whether it did. */
static eq_status read_cell_attr(hid_t file, const char *path, const eq_cell_field *f, eq_run_meta *m, int *found)
{
    eq_status st = EQ_OK;
    char text[EQ_NAME_MAX];
    int64_t v = 0;
    void *dest = eq_cell_member_mut(m, f);
    switch (f->type) {
    case EQ_CELL_TEXT:
        return eq_dump_read_optional(file, path, "the root group", f->key, H5T_STRING, H5I_INVALID_HID, dest, f->size,
                                     found);
    case EQ_CELL_DTYPE:
        EQ_TRY(eq_dump_read_optional(file, path, "the root group", f->key, H5T_STRING, H5I_INVALID_HID, text,
                                     sizeof text, found));
        if (*found && !eq_cell_parse(m, f, text))
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: root attribute %s is '%s' (want fp32, bf16 or fp64)", path, f->key, text);
        break;
    case EQ_CELL_INT:
    case EQ_CELL_I64:
        EQ_TRY(read_int_attr(file, path, f->key, (f->flags & EQ_CELL_ATTR_REQUIRED) != 0, f->lo, f->hi, &v, found));
        if (!*found) break;
        if (f->type == EQ_CELL_INT) *(int *)dest = (int)v;
        else *(int64_t *)dest = v;
        break;
    case EQ_CELL_U64:
        return eq_dump_read_optional(file, path, "the root group", f->key, H5T_INTEGER, H5T_NATIVE_UINT64, dest, 0,
                                     found);
    case EQ_CELL_F64:
        return eq_dump_read_optional(file, path, "the root group", f->key, H5T_FLOAT, H5T_NATIVE_DOUBLE, dest, 0,
                                     found);
    }
cleanup:
    return st;
}

/* pp, cp, ep (a size of 1 read as 0, not recorded, so that it names no layout) and a rank's place in
 * them: pp_rank, cp_rank, ep_rank, required in a rank's file of a run where the group has more than
 * one rank, each below its size. */
static eq_status read_other_groups(hid_t file, const char *path, eq_run_meta *m)
{
    static const eq_group groups[] = {EQ_GROUP_PP, EQ_GROUP_CP, EQ_GROUP_EP};
    int *sizes[] = {&m->pp, &m->cp, &m->ep}, *places[] = {&m->pp_rank, &m->cp_rank, &m->ep_rank};
    for (int i = 0; i < 3; i++) {
        char key[16];
        int64_t v = 0;
        int found = 0;
        if (*sizes[i] == 1) *sizes[i] = 0;
        snprintf(key, sizeof key, "%s_rank", eq_group_name(groups[i]));
        eq_status st = read_int_attr(file, path, key, 0, 0, (1 << 20) - 1, &v, &found);
        if (st != EQ_OK) return st;
        if (found && v >= eq_layout_size(m, groups[i]))
            return EQ_FAIL(EQ_ERR_INPUT, "%s: root attribute %s = %lld, but %s is %d", path, key, (long long)v,
                           eq_group_name(groups[i]), eq_layout_size(m, groups[i]));
        if (!found && m->has_rank && eq_layout_size(m, groups[i]) > 1)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: a rank's file of a run of %s %d needs %s in its root", path,
                           eq_group_name(groups[i]), eq_layout_size(m, groups[i]), key);
        *places[i] = (int)v;
    }
    return EQ_OK;
}

eq_status eq_dump_read_root(hid_t file, const char *path, eq_run_meta *m, int *has_dtype)
{
    eq_status st = EQ_OK;
    int found = 0, f_rank = 0, f_dp_rank = 0, f_tp_rank = 0;
    int64_t v = 0, schema = SCHEMA_VERSION;
    memset(m, 0, sizeof *m);
    *has_dtype = 0;
    EQ_TRY(read_int_attr(file, path, "schema", 0, 1, INT32_MAX, &schema, &found));
    if (schema > SCHEMA_VERSION) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: written for capture schema %lld; this equiv reads schema %d (update equiv)",
                     path, (long long)schema, SCHEMA_VERSION);
        goto cleanup;
    }
    for (int i = 0; i < eq_cell_field_count; i++) {
        const eq_cell_field *f = &eq_cell_fields[i];
        if (!(f->flags & (EQ_CELL_ATTR | EQ_CELL_ATTR_IF_SET))) continue;
        EQ_TRY(read_cell_attr(file, path, f, m, &found));
        if (f->type == EQ_CELL_DTYPE) *has_dtype = found;
    }
    const int f_world = m->world_size > 0; /* read as 1 or more, or absent */
    EQ_TRY(read_int_attr(file, path, "rank", 0, 0, (1 << 20) - 1, &v, &f_rank));
    m->rank = (int)v;
    EQ_TRY(read_int_attr(file, path, "dp_rank", 0, 0, (1 << 20) - 1, &v, &f_dp_rank));
    m->dp_rank = (int)v;
    EQ_TRY(read_int_attr(file, path, "tp_rank", 0, 0, (1 << 20) - 1, &v, &f_tp_rank));
    m->tp_rank = (int)v;
    /* A rank's file names all of its place in the world, or none of it. */
    if (f_rank || f_dp_rank || f_tp_rank) {
        if (!(f_rank && f_dp_rank && f_tp_rank && f_world)) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: a rank's file needs all of world_size, rank, dp_rank and tp_rank in its "
                         "root (this one lacks %s)", path, !f_world ? "world_size" : !f_rank ? "rank"
                                                                     : !f_dp_rank ? "dp_rank" : "tp_rank");
            goto cleanup;
        }
        m->has_rank = 1;
    }
    EQ_TRY(read_other_groups(file, path, m));
    const int64_t world = (int64_t)m->dp * m->tp * eq_layout_size(m, EQ_GROUP_PP) * eq_layout_size(m, EQ_GROUP_CP);
    if (f_world && (int64_t)m->world_size != world) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: world_size %d is not dp x tp x pp x cp = %d x %d x %d x %d", path,
                     m->world_size, m->dp, m->tp, eq_layout_size(m, EQ_GROUP_PP), eq_layout_size(m, EQ_GROUP_CP));
        goto cleanup;
    }
    if (m->dp % eq_layout_size(m, EQ_GROUP_EP) != 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: ep %d does not divide dp %d (expert parallelism is carved from dp)", path, m->ep,
                     m->dp);
        goto cleanup;
    }
    if (m->has_rank && (m->rank >= m->world_size || m->dp_rank >= m->dp || m->tp_rank >= m->tp)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: rank %d (dp_rank %d, tp_rank %d) is outside its world of %d (dp %d x tp %d)",
                     path, m->rank, m->dp_rank, m->tp_rank, m->world_size, m->dp, m->tp);
        goto cleanup;
    }
    env_walk w = {path, m, EQ_OK};
    hsize_t idx = 0;
    H5_TRY(H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_env, &w), EQ_ERR_INPUT,
           "%s: cannot list the root's attributes", path);
    st = w.st;
cleanup:
    return st;
}
