/* Reading one HDF5 file of the capture schema (harness/SCHEMA.md): equiv's own dumps, a rank's
 * file written by equiv_capture, or the minimal file of any writer (datasets with a role, root
 * attributes dp and tp). This file reads the datasets: it walks the groups, reads each dataset's
 * attributes, shape and data into the capture, and keeps a file open for eq_dump_read_entry; the
 * run's identity from the root is harness/dump_read_root.c's. Every problem is EQ_ERR_INPUT naming
 * the file, the dataset or attribute, and what is wrong. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/dump.h"
#include "harness/dump_read_root.h"
#include "harness/h5util.h"
#include "harness/run_layout.h"

/* Groups nested deeper than this are refused (a file is not a tree of that depth by accident). */
#define MAX_DEPTH 32

/* eq_dtype_parse, with its usage error (for the command line) left unrecorded: the caller says
 * which file and attribute held the name. */
static int parse_dtype(const char *name, eq_dtype *out)
{
    if (eq_dtype_parse(name, out) == EQ_OK) return 1;
    eq_error_clear();
    return 0;
}

/* "replicated", or a list of GROUP:D, GROUP dp, tp, cp or ep: "dp:D", "tp:D", "dp:D,tp:E" (D may
 * count from the end: -1 is the last dim). One dimension is split over one group; a pipeline stage
 * holds a tensor whole (pp is not a shard's group). */
static eq_status parse_shard(const char *text, int ndim, const char *path, const char *dset, eq_shard *out)
{
    *out = EQ_SHARD_REPLICATED;
    if (strcmp(text, "replicated") == 0) return EQ_OK;
    const char *p = text;
    while (*p) {
        int *slot = strncmp(p, "dp:", 3) == 0   ? &out->dp_dim
                    : strncmp(p, "tp:", 3) == 0 ? &out->tp_dim
                    : strncmp(p, "cp:", 3) == 0 ? &out->cp_dim
                    : strncmp(p, "ep:", 3) == 0 ? &out->ep_dim
                                                : NULL;
        char *end = NULL;
        long d = slot ? strtol(p + 3, &end, 10) : 0;
        if (slot == NULL || end == p + 3 || (*end != '\0' && *end != ',') || *slot != -1)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s: shard '%s' is not 'replicated' or a list like 'dp:0,tp:2' "
                           "(groups dp, tp, cp, ep, each once)", path, dset, text);
        if (d < 0) d += ndim;
        if (d < 0 || d >= ndim)
            return EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s: shard '%s' splits a dimension the tensor (%d-d) lacks", path,
                           dset, text, ndim);
        for (int g = 0; g < EQ_GROUP_COUNT; g++)
            if (eq_shard_dim(out, (eq_group)g) == d)
                return EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s: shard '%s' splits one dimension over two groups", path,
                               dset, text);
        *slot = (int)d;
        p = *end == ',' ? end + 1 : end;
    }
    return EQ_OK;
}

/* The layer of a dataset path: "layers/NN/<name>" (equiv's own dumps), else its `layer` attribute,
 * else the first component of the path that is a number ("blocks.3.mlp.fc1/out": 3), else -1. */
static int layer_of(const char *dset_path, const char **name)
{
    *name = dset_path;
    if (strncmp(dset_path, "layers/", 7) == 0) {
        const char *p = dset_path + 7, *slash = strchr(p, '/');
        int digits = slash != NULL && slash > p && slash - p <= 4;
        for (const char *q = p; digits && q < slash; q++) digits = isdigit((unsigned char)*q);
        if (digits && strchr(slash + 1, '/') == NULL && slash[1] != '\0') {
            *name = slash + 1;
            return atoi(p);
        }
    }
    const char *p = dset_path;
    while (*p) {
        size_t len = strcspn(p, "./");
        int digits = len > 0 && len <= 4;
        for (size_t i = 0; digits && i < len; i++) digits = isdigit((unsigned char)p[i]);
        if (digits) return atoi(p);
        p += len;
        if (*p) p++;
    }
    return -1;
}

/* Where the file holds dataset dset's values as the tensor's own bytes (bytes of them, dtype dt, in
 * the file's type `type`): one contiguous, allocated extent that a read would copy unchanged (bf16
 * is read in its file type; fp32 and fp64 only where the file's type is the native one, so no
 * conversion), in a file without a user block (an address is then a file offset). Its offset in
 * the file, or -1. */
static int64_t stored_offset(hid_t file, hid_t dset, hid_t type, eq_dtype dt, uint64_t bytes)
{
    int64_t offset = -1;
    hid_t dcpl = H5Dget_create_plist(dset), fcpl = H5Fget_create_plist(file);
    hsize_t userblock = 1;
    const int same_type = dt == EQ_BF16 || H5Tequal(type, dt == EQ_FP32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE) > 0;
    if (dcpl >= 0 && fcpl >= 0 && same_type && H5Pget_layout(dcpl) == H5D_CONTIGUOUS &&
        H5Pget_external_count(dcpl) == 0 && H5Pget_userblock(fcpl, &userblock) >= 0 && userblock == 0 &&
        H5Dget_storage_size(dset) == bytes) {
        const haddr_t addr = H5Dget_offset(dset);
        if (addr != HADDR_UNDEF && addr <= (haddr_t)INT64_MAX) offset = (int64_t)addr;
    }
    eq_h5_close(&fcpl);
    eq_h5_close(&dcpl);
    return offset;
}

/* Reads dataset dset_path into an entry of out: its attributes, shape and dtype, and its data unless
 * index (then tensor.data is NULL: eq_dump_read_entry reads it later, and *stored is where the file
 * holds its bytes as they are, or -1: stored_offset). */
static eq_status read_dataset(hid_t file, const char *path, const char *dset_path, int index, eq_capture *out,
                              int64_t *stored)
{
    eq_status st = EQ_OK;
    hid_t dset = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    eq_tensor t;
    memset(&t, 0, sizeof t);
    char role_name[EQ_NAME_MAX], shard_text[EQ_NAME_MAX] = "replicated", split[EQ_NAME_MAX] = "none";
    char accumulate[EQ_NAME_MAX] = "fp32";
    eq_gemm_operands gemm = {.accumulate = EQ_FP32};
    int found = 0, found_b = 0;
    if (strlen(dset_path) >= EQ_NAME_MAX) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset path %.60s... is longer than %d bytes", path, dset_path,
                     EQ_NAME_MAX - 1);
        goto cleanup;
    }
    H5_TRY(dset = H5Dopen2(file, dset_path, H5P_DEFAULT), EQ_ERR_INPUT, "%s: %s is not a readable dataset", path,
           dset_path);
    H5_TRY(type = H5Dget_type(dset), EQ_ERR_INPUT, "%s: cannot read the type of %s", path, dset_path);
    H5_TRY(space = H5Dget_space(dset), EQ_ERR_INPUT, "%s: cannot read the shape of %s", path, dset_path);
    /* bf16 is read raw with the file's own type as memory type; fp32/fp64 as native float/double. */
    size_t type_size = H5Tget_size(type);
    int is_bf16 = eq_h5_is_bf16_type(type);
    if (!is_bf16 && (H5Tget_class(type) != H5T_FLOAT || (type_size != 4 && type_size != 8))) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s has an unsupported type (want bf16 as the named type /bfloat16, "
                     "fp32 or fp64; widen fp16 to fp32)", path, dset_path);
        goto cleanup;
    }
    eq_dtype dtype = is_bf16 ? EQ_BF16 : type_size == 4 ? EQ_FP32 : EQ_FP64;
    hid_t mem_type = is_bf16 ? type : type_size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
    int ndim = H5Sget_simple_extent_ndims(space);
    hsize_t dims[EQ_MAX_DIMS] = {1};
    int64_t shape[EQ_MAX_DIMS] = {1};
    if (ndim < 0 || ndim > EQ_MAX_DIMS || (ndim > 0 && H5Sget_simple_extent_dims(space, dims, NULL) != ndim)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s has %d dimensions (want 0 to %d)", path, dset_path, ndim,
                     EQ_MAX_DIMS);
        goto cleanup;
    }
    int tensor_ndim = ndim > 0 ? ndim : 1; /* a scalar is read as one element */
    /* Refuse extents whose byte count does not fit, before allocating. */
    uint64_t bytes = eq_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) {
        if (dims[d] != 0 && bytes > (uint64_t)(SIZE_MAX / 2) / dims[d]) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s is too large", path, dset_path);
            goto cleanup;
        }
        bytes *= dims[d];
        shape[d] = (int64_t)dims[d];
    }
    /* Nor more bytes than the file can hold: deflate, the densest filter HDF5 ships, packs at most
     * 1032:1, so a larger claim is damage (allocating it first is how a flipped byte took 8 GB). */
    hsize_t file_bytes = 0;
    H5_TRY(H5Fget_filesize(file, &file_bytes), EQ_ERR_INPUT, "%s: cannot read the file's size", path);
    if (bytes > 1032 * (uint64_t)file_bytes + (1u << 20)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s declares %llu bytes, more than a file of %llu bytes can hold "
                     "(the file is damaged)", path, dset_path, (unsigned long long)bytes,
                     (unsigned long long)file_bytes);
        goto cleanup;
    }
    EQ_TRY(eq_dump_read_attr(dset, path, dset_path, "role", H5T_STRING, H5I_INVALID_HID, role_name, sizeof role_name));
    eq_role role;
    if (eq_role_parse(role_name, &role) != EQ_OK) {
        eq_error_clear();
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s has role '%s' (want input, param, activation, grad or loss)", path,
                     dset_path, role_name);
        goto cleanup;
    }
    const char *name = NULL;
    int layer = layer_of(dset_path, &name);
    int64_t layer_attr = 0;
    EQ_TRY(eq_dump_read_optional(dset, path, dset_path, "layer", H5T_INTEGER, H5T_NATIVE_INT64, &layer_attr, 0,
                                 &found));
    if (found && (layer_attr < -1 || layer_attr > 9999)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s: attribute layer = %lld (want -1 to 9999)", path, dset_path,
                     (long long)layer_attr);
        goto cleanup;
    }
    if (found) layer = (int)layer_attr;
    eq_shard shard;
    EQ_TRY(eq_dump_read_optional(dset, path, dset_path, "shard", H5T_STRING, H5I_INVALID_HID, shard_text,
                                 sizeof shard_text, &found));
    EQ_TRY(parse_shard(shard_text, tensor_ndim, path, dset_path, &shard));
    double grad_scale = 1.0;
    EQ_TRY(eq_dump_read_optional(dset, path, dset_path, "grad_scale", H5T_FLOAT, H5T_NATIVE_DOUBLE, &grad_scale, 0,
                                 &found));
    if (!(grad_scale > 0.0) || !isfinite(grad_scale)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s: grad_scale %g is not a finite number > 0", path, dset_path,
                     grad_scale);
        goto cleanup;
    }
    EQ_TRY(eq_dump_read_optional(dset, path, dset_path, "gemm_a", H5T_STRING, H5I_INVALID_HID, gemm.a, sizeof gemm.a,
                                 &found));
    EQ_TRY(eq_dump_read_optional(dset, path, dset_path, "gemm_b", H5T_STRING, H5I_INVALID_HID, gemm.b, sizeof gemm.b,
                                 &found_b));
    if (found != found_b) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s names one GEMM operand (gemm_a and gemm_b go together)", path,
                     dset_path);
        goto cleanup;
    }
    EQ_TRY(eq_dump_read_optional(dset, path, dset_path, "gemm_k_split", H5T_STRING, H5I_INVALID_HID, split,
                                 sizeof split, &found));
    EQ_TRY(eq_dump_read_optional(dset, path, dset_path, "gemm_accumulate", H5T_STRING, H5I_INVALID_HID, accumulate,
                                 sizeof accumulate, &found));
    if ((strcmp(split, "none") != 0 && strcmp(split, "tp") != 0) || !parse_dtype(accumulate, &gemm.accumulate)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s: gemm_k_split '%s' / gemm_accumulate '%s' (want none or tp / "
                     "fp32, bf16 or fp64)", path, dset_path, split, accumulate);
        goto cleanup;
    }
    gemm.k_split_by_tp = strcmp(split, "tp") == 0;
    if (index) { /* the shape without the data */
        *stored = bytes >= EQ_DUMP_STORED_MIN_BYTES ? stored_offset(file, dset, type, dtype, bytes) : -1;
        t.dtype = dtype;
        t.ndim = tensor_ndim;
        memcpy(t.shape, shape, sizeof t.shape);
    } else {
        EQ_TRY(eq_tensor_init(&t, dtype, tensor_ndim, shape));
    }
    if (bytes > 0 && !index)
        H5_TRY(H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data), EQ_ERR_INPUT,
               "%s: reading dataset %s failed (file damaged?)", path, dset_path);
    if (name != dset_path) EQ_TRY(eq_capture_add(out, layer, name, role, &t));
    else EQ_TRY(eq_capture_add_path(out, dset_path, layer, role, &t));
    eq_capture_entry *e = &out->entries[out->count - 1];
    e->shard = shard;
    e->grad_scale = grad_scale;
    e->gemm = gemm;
cleanup:
    eq_tensor_free(&t);
    eq_h5_close(&space);
    eq_h5_close(&type);
    eq_h5_close(&dset);
    return st;
}

/* Orders names that are all numbers by their value. */
static int compare_numeric_names(const void *a, const void *b)
{
    long x = strtol(*(char *const *)a, NULL, 10), y = strtol(*(char *const *)b, NULL, 10);
    return (x > y) - (x < y);
}

/* What list_group's iteration gathers: the names so far, or the first problem. */
typedef struct {
    char **names;
    hsize_t n, capacity;
    const char *path, *where;
    eq_status st;
} name_list;

static herr_t collect_name(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    (void)group;
    (void)info;
    name_list *l = data;
    size_t len = strlen(name);
    if (len == 0 || len >= EQ_NAME_MAX) {
        l->st = EQ_FAIL(EQ_ERR_INPUT, "%s: cannot list %s (a name longer than %d bytes?)", l->path, l->where,
                        EQ_NAME_MAX - 1);
        return -1;
    }
    if (!eq_dump_is_text(name)) {
        l->st = EQ_FAIL(EQ_ERR_INPUT, "%s: a name in %s is not text (not UTF-8, or control characters: the file is "
                        "damaged?)", l->path, l->where);
        return -1;
    }
    if (l->n == l->capacity) {
        hsize_t capacity = l->capacity ? 2 * l->capacity : 16;
        char **grown = realloc(l->names, (size_t)capacity * sizeof *grown);
        if (grown == NULL) {
            l->st = EQ_FAIL(EQ_ERR_NOMEM, "%s: no memory to list %s", l->path, l->where);
            return -1;
        }
        l->names = grown;
        l->capacity = capacity;
    }
    if ((l->names[l->n] = malloc(len + 1)) == NULL) {
        l->st = EQ_FAIL(EQ_ERR_NOMEM, "%s: no memory to list %s", l->path, l->where);
        return -1;
    }
    memcpy(l->names[l->n++], name, len + 1);
    return 0;
}

/* The links of one group in the order a reader expects: creation order where the writer tracked
 * it, else by name; a group whose children are all numbers ("00", "01", ..., "100": equiv's
 * /layers) by number. Fills names (malloc'd, n entries). One pass over the group: asking for the
 * i-th name costs HDF5 a walk of the group each time, quadratic in its size. */
static eq_status list_group(hid_t group, const char *path, const char *where, char ***names_out, hsize_t *n_out)
{
    eq_status st = EQ_OK;
    hid_t gcpl = H5I_INVALID_HID;
    unsigned order_flags = 0;
    name_list l = {.path = path, .where = where, .st = EQ_OK};
    *names_out = NULL;
    *n_out = 0;
    gcpl = H5Gget_create_plist(group);
    H5_TRY(gcpl < 0 || H5Pget_link_creation_order(gcpl, &order_flags) < 0 ? -1 : 0, EQ_ERR_INPUT, "%s: cannot list %s",
           path, where);
    H5_index_t order = (order_flags & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
    hsize_t idx = 0;
    herr_t walked = H5Literate(group, order, H5_ITER_INC, &idx, collect_name, &l);
    if (l.st != EQ_OK) {
        st = l.st;
        goto cleanup;
    }
    H5_TRY(walked, EQ_ERR_INPUT, "%s: cannot list %s", path, where);
    int all_numbers = l.n > 0;
    for (hsize_t i = 0; i < l.n && all_numbers; i++) {
        size_t len = strlen(l.names[i]);
        all_numbers = len <= 4 && strspn(l.names[i], "0123456789") == len;
    }
    if (all_numbers) qsort(l.names, (size_t)l.n, sizeof *l.names, compare_numeric_names);
    *names_out = l.names;
    *n_out = l.n;
    l.names = NULL;
    l.n = 0;
cleanup:
    for (hsize_t i = 0; i < l.n; i++) free(l.names[i]);
    free(l.names);
    eq_h5_close(&gcpl);
    return st;
}

/* Reads every dataset under group `prefix` ("" for the root), depth first; named datatypes
 * (/bfloat16) are skipped, soft and external links refused. */
/* The dataset paths of a file's entries, in entry order (an entry's path is not always its dataset's:
 * "layers/7/x" is entry "layers/07/x"). */
typedef struct {
    char path[EQ_NAME_MAX];
    int64_t stored; /* where the file holds its bytes as they are, or -1 (stored_offset) */
} listed_dataset;

typedef struct {
    listed_dataset *at;
    int count, capacity;
} dataset_list;

static eq_status list_dataset(dataset_list *list, const char *dset_path, int64_t stored)
{
    if (list->count == list->capacity) {
        int capacity = list->capacity ? 2 * list->capacity : 64;
        listed_dataset *grown = realloc(list->at, (size_t)capacity * sizeof *grown);
        if (grown == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to list %d datasets", capacity);
        list->at = grown;
        list->capacity = capacity;
    }
    listed_dataset *d = &list->at[list->count++];
    snprintf(d->path, EQ_NAME_MAX, "%s", dset_path);
    d->stored = stored;
    return EQ_OK;
}

/* Reads every dataset under prefix into out (index: without their data), listing their paths in
 * list where given. */
static eq_status walk(hid_t file, const char *path, const char *prefix, int depth, int index, dataset_list *list,
                      eq_capture *out)
{
    eq_status st = EQ_OK;
    hid_t group = H5I_INVALID_HID;
    char **names = NULL;
    hsize_t n = 0;
    if (depth > MAX_DEPTH) return EQ_FAIL(EQ_ERR_INPUT, "%s: groups nested deeper than %d at /%s", path, MAX_DEPTH, prefix);
    H5_TRY(group = H5Gopen2(file, prefix[0] ? prefix : "/", H5P_DEFAULT), EQ_ERR_INPUT, "%s: /%s is not a readable group",
           path, prefix);
    EQ_TRY(list_group(group, path, prefix[0] ? prefix : "the root group", &names, &n));
    for (hsize_t i = 0; i < n; i++) {
        char child[EQ_NAME_MAX];
        H5L_info_t link;
        H5O_info_t obj;
        if ((size_t)snprintf(child, sizeof child, "%s%s%s", prefix, prefix[0] ? "/" : "", names[i]) >= sizeof child) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: path /%s/%s is longer than %d bytes", path, prefix, names[i],
                         EQ_NAME_MAX - 1);
            goto cleanup;
        }
        H5_TRY(H5Lget_info(group, names[i], &link, H5P_DEFAULT), EQ_ERR_INPUT, "%s: cannot read link /%s", path, child);
        if (link.type != H5L_TYPE_HARD) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: /%s is a soft or external link (write datasets, not links)", path, child);
            goto cleanup;
        }
        H5_TRY(H5Oget_info_by_name2(group, names[i], &obj, H5O_INFO_BASIC, H5P_DEFAULT), EQ_ERR_INPUT,
               "%s: cannot read object /%s", path, child);
        if (obj.type == H5O_TYPE_GROUP) EQ_TRY(walk(file, path, child, depth + 1, index, list, out));
        else if (obj.type == H5O_TYPE_DATASET) {
            int64_t stored = -1;
            EQ_TRY(read_dataset(file, path, child, index, out, &stored));
            if (list != NULL) EQ_TRY(list_dataset(list, child, stored));
        }
        /* a named datatype: the bf16 type, nothing to compare */
    }
cleanup:
    for (hsize_t i = 0; i < n; i++) free(names[i]);
    free(names);
    eq_h5_close(&group);
    return st;
}

/* Without a dtype attribute: the dtype of the first activation, else of the first gradient, else of
 * the first tensor (the tensors eq_run_check_dtype holds the dtype to, harness/run_load.h). */
static eq_dtype run_dtype(const eq_capture *cap)
{
    for (int i = 0; i < cap->count; i++)
        if (cap->entries[i].role == EQ_ROLE_ACTIVATION) return cap->entries[i].tensor.dtype;
    for (int i = 0; i < cap->count; i++)
        if (cap->entries[i].role == EQ_ROLE_GRAD) return cap->entries[i].tensor.dtype;
    return cap->count > 0 ? cap->entries[0].tensor.dtype : EQ_FP32;
}

struct eq_dump_file {
    hid_t file;
    char path[4096];
    dataset_list datasets; /* of the index's entries, in order */
};

/* Opens path and reads its root and every dataset's attributes and shape into out (data NULL
 * where index, else read too); *file_out keeps the file open where given. */
static eq_status open_dump(const char *path, int index, eq_dump_file **file_out, eq_capture *out)
{
    eq_status st = EQ_OK;
    eq_dump_file *f = calloc(1, sizeof *f);
    struct stat sb;
    int has_dtype = 0;
    eq_capture_init(out);
    if (file_out != NULL) *file_out = NULL;
    if (f == NULL) return EQ_FAIL(EQ_ERR_NOMEM, "no memory to open %s", path);
    f->file = H5I_INVALID_HID;
    snprintf(f->path, sizeof f->path, "%s", path);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* failures are reported once, through EQ_FAIL */
    if (stat(path, &sb) != 0) {
        int err = errno;
        st = err == ENOENT ? EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: no such file", path)
                           : EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: %s", path, strerror(err));
        goto cleanup;
    }
    if (H5Fis_hdf5(path) <= 0 || (f->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s is not a readable HDF5 dump", path);
        goto cleanup;
    }
    EQ_TRY(eq_dump_read_root(f->file, path, &out->meta, &has_dtype));
    EQ_TRY(walk(f->file, path, "", 0, index, file_out != NULL ? &f->datasets : NULL, out));
    if (out->count == 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s holds no datasets", path);
        goto cleanup;
    }
    if (!has_dtype) out->meta.dtype = run_dtype(out);
    for (int i = 0; i < out->count; i++) {
        const eq_capture_entry *e = &out->entries[i];
        if (e->gemm.a[0] && (eq_capture_find(out, e->gemm.a) == NULL || eq_capture_find(out, e->gemm.b) == NULL)) {
            st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s names GEMM operands %s and %s, which the file does not hold "
                         "both of", path, e->path, e->gemm.a, e->gemm.b);
            goto cleanup;
        }
    }
    if (file_out != NULL) {
        *file_out = f;
        f = NULL;
    }
cleanup:
    eq_dump_close(f);
    if (st != EQ_OK) eq_capture_free(out); /* the caller gets an empty capture, meta zeroed too */
    return st;
}

eq_status eq_dump_read(const char *path, eq_capture *out) { return open_dump(path, 0, NULL, out); }

eq_status eq_dump_open(const char *path, eq_dump_file **file, eq_capture *index)
{
    return open_dump(path, 1, file, index);
}

eq_status eq_dump_read_entry(eq_dump_file *f, int entry, const eq_tensor *shape, void *data)
{
    eq_status st = EQ_OK;
    hid_t dset = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    if (entry < 0 || entry >= f->datasets.count)
        return EQ_FAIL(EQ_ERR_INTERNAL, "%s: no dataset %d (of %d)", f->path, entry, f->datasets.count);
    const char *dset_path = f->datasets.at[entry].path;
    H5_TRY(dset = H5Dopen2(f->file, dset_path, H5P_DEFAULT), EQ_ERR_INPUT, "%s: %s is not a readable dataset",
           f->path, dset_path);
    H5_TRY(type = H5Dget_type(dset), EQ_ERR_INPUT, "%s: cannot read the type of %s", f->path, dset_path);
    H5_TRY(space = H5Dget_space(dset), EQ_ERR_INPUT, "%s: cannot read the shape of %s", f->path, dset_path);
    /* the file is open and unchanged since its index was read: the same type and extent */
    const hssize_t points = H5Sget_simple_extent_npoints(space);
    const int is_bf16 = eq_h5_is_bf16_type(type);
    const eq_dtype dtype = is_bf16 ? EQ_BF16 : H5Tget_size(type) == 4 ? EQ_FP32 : EQ_FP64;
    if (points != eq_tensor_numel(shape) || dtype != shape->dtype) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s: dataset %s changed since it was opened", f->path, dset_path);
        goto cleanup;
    }
    if (points > 0)
        H5_TRY(H5Dread(dset, is_bf16 ? type : dtype == EQ_FP32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, H5S_ALL,
                       H5S_ALL, H5P_DEFAULT, data), EQ_ERR_INPUT, "%s: reading dataset %s failed (file damaged?)",
               f->path, dset_path);
cleanup:
    eq_h5_close(&space);
    eq_h5_close(&type);
    eq_h5_close(&dset);
    return st;
}

int64_t eq_dump_entry_offset(const eq_dump_file *f, int entry)
{
    return entry >= 0 && entry < f->datasets.count ? f->datasets.at[entry].stored : -1;
}

void eq_dump_close(eq_dump_file *f)
{
    if (f == NULL) return;
    eq_h5_close(&f->file);
    free(f->datasets.at);
    free(f);
}
