/* The run-cell table (harness/run_cell.h): sound rows, cells' names unique and a default run's name
 * what it always was, the dump's attributes round trip, and reports/report.schema.json's run
 * object has exactly the table's JSON fields (argv[1]: the schema), so the two cannot drift. */
#include <hdf5.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/dump.h"
#include "harness/run_cell.h"
#include "harness/base/testing.h"

#define JSON_FLAGS (EQ_CELL_JSON | EQ_CELL_JSON_IF_SET | EQ_CELL_JSON_IF_SOURCE)
#define ATTR_FLAGS (EQ_CELL_ATTR | EQ_CELL_ATTR_IF_SET)

static size_t type_size(eq_cell_type t)
{
    switch (t) {
    case EQ_CELL_DTYPE: return sizeof(eq_dtype);
    case EQ_CELL_INT: return sizeof(int);
    case EQ_CELL_I64: return sizeof(int64_t);
    case EQ_CELL_U64: return sizeof(uint64_t);
    case EQ_CELL_F64: return sizeof(double);
    case EQ_CELL_TEXT: break;
    }
    return 0;
}

/* Each slot 0..n-1 held by exactly one row, n the rows that have one. */
static void check_slots(const char *what, int (*slot_of)(const eq_cell_field *))
{
    int n = 0;
    for (int i = 0; i < eq_cell_field_count; i++) n += slot_of(&eq_cell_fields[i]) >= 0;
    for (int slot = 0; slot < n; slot++) {
        int holders = 0;
        for (int i = 0; i < eq_cell_field_count; i++) holders += slot_of(&eq_cell_fields[i]) == slot;
        EQ_EXPECT(holders == 1, "%s slot %d held by %d rows", what, slot, holders);
    }
}
static int attr_slot(const eq_cell_field *f) { return f->attr_slot; }
static int json_slot(const eq_cell_field *f) { return f->json_slot; }

static void check_rows(void)
{
    eq_run_meta scratch;
    for (int i = 0; i < eq_cell_field_count; i++) {
        const eq_cell_field *f = &eq_cell_fields[i];
        EQ_EXPECT(eq_cell_find(f->key) == f, "%s: its key is another row's too", f->key);
        EQ_EXPECT(f->offset + f->size <= sizeof(eq_run_meta), "%s: outside eq_run_meta", f->key);
        EQ_EXPECT(f->type == EQ_CELL_TEXT || f->size == type_size(f->type), "%s: member size %zu for its type", f->key,
                  f->size);
        EQ_EXPECT(!(f->flags & (EQ_CELL_NAME | EQ_CELL_NAME_IF_SET)) || f->name_part != NULL, "%s: no name part", f->key);
        EQ_EXPECT(!(f->flags & EQ_CELL_TITLE) || f->title_part != NULL, "%s: no title part", f->key);
        EQ_EXPECT(((f->flags & ATTR_FLAGS) != 0) == (f->attr_slot >= 0), "%s: attribute flags and slot", f->key);
        EQ_EXPECT(((f->flags & JSON_FLAGS) != 0) == (f->json_slot >= 0), "%s: JSON flags and slot", f->key);
        memset(&scratch, 0, sizeof scratch);
        EQ_EXPECT(f->fallback[0] == '\0' || eq_cell_parse(&scratch, f, f->fallback), "%s: default '%s' unreadable",
                  f->key, f->fallback);
    }
    check_slots("attributes", attr_slot);
    check_slots("JSON", json_slot);
}

/* row_parallel at tp 4 at every default, as `equiv --case row_parallel --tp 4 --dtype fp32` runs it. */
static void default_run(eq_run_meta *m)
{
    eq_cell_defaults(m);
    snprintf(m->case_name, sizeof m->case_name, "row_parallel");
    snprintf(m->model, sizeof m->model, "row_parallel");
    m->tp = 4;
}

/* A value of f's type other than its default. */
static void set_other(eq_run_meta *m, const eq_cell_field *f)
{
    const char *other = f->type == EQ_CELL_TEXT ? "other" : f->type == EQ_CELL_DTYPE ? "bf16" : "7";
    EQ_EXPECT(eq_cell_parse(m, f, other), "%s: cannot set '%s'", f->key, other);
}

static void check_names(void)
{
    eq_run_meta m;
    char name[EQ_CELL_NAME_MAX], file[EQ_DUMP_FILENAME_MAX], names[64][EQ_CELL_NAME_MAX];
    int n = 0;
    default_run(&m);
    /* The name runs at every default always had (README, cases/cli_test.sh): case-dtype-dpD-tpT.h5 */
    EQ_EXPECT(strcmp(eq_dump_filename(&m, file, sizeof file), "row_parallel-fp32-dp1-tp4.h5") == 0, "default: %s",
              file);
    EQ_EXPECT(strcmp(eq_cell_title(&m, name, sizeof name), "row_parallel fp32 dp1-tp4") == 0, "title: %s", name);
    snprintf(m.algorithm, sizeof m.algorithm, "tree");
    EQ_EXPECT(strcmp(eq_dump_filename(&m, file, sizeof file), "row_parallel-fp32-dp1-tp4-tree.h5") == 0,
              "--algo tree: %s", file);
    /* Cells that differ in one field of the name each have a name of their own. */
    default_run(&m);
    eq_cell_name(&m, names[n++], sizeof names[0]);
    for (int i = 0; i < eq_cell_field_count && n < 64; i++) {
        const eq_cell_field *f = &eq_cell_fields[i];
        if (!(f->flags & (EQ_CELL_NAME | EQ_CELL_NAME_IF_SET))) continue;
        default_run(&m);
        set_other(&m, f);
        eq_cell_name(&m, names[n++], sizeof names[0]);
    }
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) EQ_EXPECT(strcmp(names[a], names[b]) != 0, "two cells named %s", names[a]);
    /* A field that is not the cell's (the CPU) leaves the name as it is. */
    default_run(&m);
    snprintf(m.cpu, sizeof m.cpu, "AMD EPYC");
    EQ_EXPECT(strcmp(eq_cell_name(&m, name, sizeof name), names[0]) == 0, "the cpu changed the name: %s", name);
}

static int has_attr(const char *path, const char *key)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int has = file >= 0 && H5Aexists(file, key) > 0;
    if (file >= 0) H5Fclose(file);
    return has;
}

/* Every attribute field set away from its default is read back as written; at its default, a
 * field written only when set is absent from the file. */
static void check_dump_round_trip(void)
{
    char path[] = "/tmp/equiv_run_cell_test.XXXXXX";
    int fd = mkstemp(path);
    EQ_EXPECT(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    for (int set = 0; set < 2; set++) {
        eq_capture cap, back;
        eq_tensor t;
        eq_capture_init(&cap);
        default_run(&cap.meta);
        for (int i = 0; set && i < eq_cell_field_count; i++) {
            const eq_cell_field *f = &eq_cell_fields[i];
            if (!(f->flags & ATTR_FLAGS)) continue;
            if (f->lo > 0 || f->hi > 0) EQ_EXPECT(eq_cell_parse(&cap.meta, f, "2"), "%s", f->key); /* in range */
            else set_other(&cap.meta, f);
        }
        if (set) /* world_size = dp x tp x pp x cp, ep dividing dp */
            cap.meta.dp = 2, cap.meta.tp = 1, cap.meta.world_size = cap.meta.dp * cap.meta.tp * cap.meta.pp * cap.meta.cp;
        EQ_EXPECT_OK(eq_tensor_init_2d(&t, cap.meta.dtype, 2, 2));
        EQ_EXPECT_OK(eq_capture_add(&cap, 0, "out", EQ_ROLE_ACTIVATION, &t));
        EQ_EXPECT_OK(eq_dump_write(path, &cap));
        EQ_EXPECT_OK(eq_dump_read(path, &back));
        for (int i = 0; i < eq_cell_field_count; i++) {
            const eq_cell_field *f = &eq_cell_fields[i];
            char wrote[EQ_ENV_MAX], read[EQ_ENV_MAX];
            if (!(f->flags & ATTR_FLAGS)) continue;
            eq_cell_text(&cap.meta, f, wrote, sizeof wrote);
            eq_cell_text(&back.meta, f, read, sizeof read);
            EQ_EXPECT(strcmp(wrote, read) == 0, "%s: wrote '%s', read '%s'", f->key, wrote, read);
            if (!set && (f->flags & EQ_CELL_ATTR_IF_SET))
                EQ_EXPECT(!has_attr(path, f->key), "%s at its default is in the file", f->key);
        }
        eq_capture_free(&cap);
        eq_capture_free(&back);
    }
    unlink(path);
}

/* The schema's run object: a property per JSON field, of its type, and required where always written. */
static void check_schema(const char *schema_path)
{
    json_error_t err;
    json_t *schema = json_load_file(schema_path, 0, &err);
    EQ_EXPECT(schema != NULL, "%s: %s", schema_path, err.text);
    if (schema == NULL) return;
    json_t *run = json_object_get(json_object_get(schema, "$defs"), "run");
    json_t *props = json_object_get(run, "properties"), *required = json_object_get(run, "required");
    EQ_EXPECT(json_is_object(props) && json_is_array(required), "no $defs.run properties and required");
    EQ_EXPECT(json_is_false(json_object_get(run, "additionalProperties")), "run objects may have other keys");
    int n_json = 0, n_required = 0;
    for (int i = 0; i < eq_cell_field_count; i++) {
        const eq_cell_field *f = &eq_cell_fields[i];
        if (!(f->flags & JSON_FLAGS)) continue;
        n_json++;
        json_t *p = json_object_get(props, f->key);
        EQ_EXPECT(p != NULL, "the schema lacks the run's %s", f->key);
        if (p == NULL) continue;
        const char *type = json_string_value(json_object_get(p, "type"));
        switch (f->type) {
        case EQ_CELL_TEXT: EQ_EXPECT(type && strcmp(type, "string") == 0, "%s: not a string in the schema", f->key); break;
        case EQ_CELL_DTYPE: EQ_EXPECT(json_is_array(json_object_get(p, "enum")), "%s: not an enum", f->key); break;
        case EQ_CELL_INT:
        case EQ_CELL_I64: EQ_EXPECT(type && strcmp(type, "integer") == 0, "%s: not an integer", f->key); break;
        case EQ_CELL_U64: EQ_EXPECT(json_is_array(json_object_get(p, "anyOf")), "%s: not integer or string", f->key); break;
        case EQ_CELL_F64: EQ_EXPECT(type && strcmp(type, "number") == 0, "%s: not a number", f->key); break;
        }
        int listed = 0;
        for (size_t k = 0; k < json_array_size(required); k++)
            listed |= strcmp(json_string_value(json_array_get(required, k)), f->key) == 0;
        EQ_EXPECT(listed == ((f->flags & EQ_CELL_JSON) != 0), "%s: required in the schema %d, always written %d", f->key,
                  listed, (f->flags & EQ_CELL_JSON) != 0);
        n_required += listed;
    }
    const char *key;
    json_t *value;
    json_object_foreach(props, key, value) {
        const eq_cell_field *f = eq_cell_find(key);
        EQ_EXPECT(f != NULL && (f->flags & JSON_FLAGS), "the schema's run has %s, the table writes no such key", key);
    }
    EQ_EXPECT((int)json_object_size(props) == n_json, "the schema has %zu run properties, the table %d",
              json_object_size(props), n_json);
    EQ_EXPECT((int)json_array_size(required) == n_required, "the schema requires %zu, the table writes %d always",
              json_array_size(required), n_required);
    json_decref(schema);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: run_cell_test REPORT_SCHEMA.json\n");
        return 2;
    }
    check_rows();
    check_names();
    check_dump_round_trip();
    check_schema(argv[1]);
    return eq_test_finish("run_cell_test");
}
