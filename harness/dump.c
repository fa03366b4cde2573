#include "harness/dump.h"

#include <errno.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/atomic_file.h"

/* A negative HDF5 result becomes one recorded failure and a jump to the function's cleanup. */
#define H5_TRY(expr, code, ...)                \
    do {                                       \
        if ((expr) < 0) {                      \
            st = EQ_FAIL((code), __VA_ARGS__); \
            goto cleanup;                      \
        }                                      \
    } while (0)

/* Closes any HDF5 identifier this file opens and marks it closed; no-op on an invalid one. */
static void close_id(hid_t *id)
{
    if (*id < 0) return;
    switch (H5Iget_type(*id)) {
    case H5I_FILE: H5Fclose(*id); break;
    case H5I_GROUP: H5Gclose(*id); break;
    case H5I_DATATYPE: H5Tclose(*id); break;
    case H5I_DATASPACE: H5Sclose(*id); break;
    case H5I_DATASET: H5Dclose(*id); break;
    case H5I_ATTR: H5Aclose(*id); break;
    case H5I_GENPROP_LST: H5Pclose(*id); break;
    default: break;
    }
    *id = H5I_INVALID_HID;
}

/* bfloat16 as an HDF5 float: the top half of binary32 (sign bit 15, exponent bits 7..14 biased
 * by 127, mantissa bits 0..6). HDF5 checks every field against the precision and the precision
 * against the size, so the fields are moved while the type is still 32 bits wide, and only then
 * are precision and size cut to 16. */
static hid_t make_bf16_type(void)
{
    hid_t type = H5Tcopy(H5T_IEEE_F32LE);
    if (type < 0) return type;
    if (H5Tset_fields(type, 15, 7, 8, 0, 7) < 0 || H5Tset_offset(type, 0) < 0 ||
        H5Tset_precision(type, 16) < 0 || H5Tset_size(type, 2) < 0 || H5Tset_ebias(type, 127) < 0)
        close_id(&type);
    return type;
}

/* The writer's bf16 layout, little-endian (the order the writer uses and the host reads raw). */
static int is_bf16_type(hid_t type)
{
    size_t spos, epos, esize, mpos, msize;
    if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 2 || H5Tget_order(type) != H5T_ORDER_LE)
        return 0;
    if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return 0;
    return spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7 && H5Tget_ebias(type) == 127;
}

/* Strings are scalar variable-length UTF-8, which h5py reads as str. */
static herr_t write_string_attr(hid_t obj, const char *name, const char *value)
{
    herr_t rc = -1;
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR), attr = H5I_INVALID_HID;
    if (type >= 0 && space >= 0 && H5Tset_size(type, H5T_VARIABLE) >= 0 &&
        H5Tset_cset(type, H5T_CSET_UTF8) >= 0 &&
        (attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT)) >= 0)
        rc = H5Awrite(attr, type, &value);
    close_id(&attr);
    close_id(&space);
    close_id(&type);
    return rc;
}

static herr_t write_number_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                                const void *value)
{
    herr_t rc = -1;
    hid_t space = H5Screate(H5S_SCALAR), attr = H5I_INVALID_HID;
    if (space >= 0 && (attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT)) >= 0)
        rc = H5Awrite(attr, mem_type, value);
    close_id(&attr);
    close_id(&space);
    return rc;
}

/* The root attributes that are strings, in the order they are written. */
#define N_STRING_ATTRS 10
static const char *const string_attr_names[N_STRING_ATTRS] = {
    "case", "model", "size", "dtype", "transport", "algorithm", "backend", "version", "grads", "injected"};

static eq_status write_entry(hid_t group, hid_t bf16_type, const eq_capture_entry *e, const char *path)
{
    eq_status st = EQ_OK;
    hid_t space = H5I_INVALID_HID, dset = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
    const eq_tensor *t = &e->tensor;
    hsize_t dims[EQ_MAX_DIMS];
    if (t->ndim < 1 || t->ndim > EQ_MAX_DIMS || (unsigned)t->dtype >= EQ_DTYPE_COUNT ||
        (unsigned)e->role >= EQ_ROLE_COUNT || t->data == NULL) {
        st = EQ_FAIL(EQ_ERR_INTERNAL, "cannot write dump %s: %s is not a valid tensor", path, e->path);
        goto cleanup;
    }
    for (int d = 0; d < t->ndim; d++) dims[d] = (hsize_t)t->shape[d];
    /* bf16 goes out with the committed type as both file and memory type: raw bits, no conversion. */
    hid_t file_type = t->dtype == EQ_BF16 ? bf16_type : t->dtype == EQ_FP64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
    hid_t mem_type = t->dtype == EQ_BF16 ? bf16_type : t->dtype == EQ_FP64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    H5_TRY(space = H5Screate_simple(t->ndim, dims, NULL), EQ_ERR_IO,
           "cannot write dump %s: making the dataspace of %s failed", path, e->path);
    /* No modification times: two runs of the same step give byte-identical dumps (cmp works). */
    H5_TRY(dcpl = H5Pcreate(H5P_DATASET_CREATE), EQ_ERR_IO, "cannot write dump %s: property list failed", path);
    H5_TRY(H5Pset_obj_track_times(dcpl, 0), EQ_ERR_IO, "cannot write dump %s: property list failed", path);
    H5_TRY(dset = H5Dcreate2(group, e->name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
           EQ_ERR_IO, "cannot write dump %s: creating dataset %s failed", path, e->path);
    if (eq_tensor_numel(t) > 0)
        H5_TRY(H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data), EQ_ERR_IO,
               "cannot write dump %s: writing dataset %s failed", path, e->path);
    H5_TRY(write_string_attr(dset, "role", eq_role_name(e->role)), EQ_ERR_IO,
           "cannot write dump %s: writing the role of %s failed", path, e->path);
cleanup:
    close_id(&dset);
    close_id(&space);
    close_id(&dcpl);
    return st;
}

eq_status eq_dump_write(const char *path, const eq_capture *cap)
{
    eq_status st = EQ_OK;
    eq_atomic_file af;
    memset(&af, 0, sizeof af);
    hid_t fcpl = H5I_INVALID_HID, gcpl = H5I_INVALID_HID, file = H5I_INVALID_HID;
    hid_t bf16_type = H5I_INVALID_HID, layers = H5I_INVALID_HID, group = H5I_INVALID_HID;
    const eq_run_meta *m = &cap->meta;
    const char *string_attr_values[N_STRING_ATTRS] = {
        m->case_name, m->model, m->size, eq_dtype_name(m->dtype), m->transport, m->algorithm, m->backend,
        m->version, m->grads, m->injected};

    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* failures are reported once, through EQ_FAIL */
    EQ_TRY(eq_atomic_begin(&af, path, 0));
    /* Track link creation order so a reader can list each layer's tensors in capture order. */
    const unsigned order = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;
    fcpl = H5Pcreate(H5P_FILE_CREATE);
    gcpl = H5Pcreate(H5P_GROUP_CREATE);
    H5_TRY(fcpl < 0 || gcpl < 0 || H5Pset_link_creation_order(fcpl, order) < 0 ||
                   H5Pset_link_creation_order(gcpl, order) < 0 || H5Pset_obj_track_times(fcpl, 0) < 0 ||
                   H5Pset_obj_track_times(gcpl, 0) < 0 ? -1 : 0,
           EQ_ERR_IO, "cannot write dump %s: setting up property lists failed", path);
    H5_TRY(file = H5Fcreate(af.temp_path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT), EQ_ERR_IO,
           "cannot write dump %s: creating the file failed (does the folder exist, is it writable?)", path);

    for (int i = 0; i < N_STRING_ATTRS; i++)
        H5_TRY(write_string_attr(file, string_attr_names[i], string_attr_values[i]), EQ_ERR_IO,
               "cannot write dump %s: writing root attribute %s failed", path, string_attr_names[i]);
    H5_TRY(write_number_attr(file, "dp", H5T_STD_I32LE, H5T_NATIVE_INT, &m->dp), EQ_ERR_IO,
           "cannot write dump %s: writing root attribute dp failed", path);
    H5_TRY(write_number_attr(file, "tp", H5T_STD_I32LE, H5T_NATIVE_INT, &m->tp), EQ_ERR_IO,
           "cannot write dump %s: writing root attribute tp failed", path);
    H5_TRY(write_number_attr(file, "seed", H5T_STD_U64LE, H5T_NATIVE_UINT64, &m->seed), EQ_ERR_IO,
           "cannot write dump %s: writing root attribute seed failed", path);

    H5_TRY(bf16_type = make_bf16_type(), EQ_ERR_IO, "cannot write dump %s: making the bf16 type failed", path);
    H5_TRY(H5Tcommit2(file, "bfloat16", bf16_type, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), EQ_ERR_IO,
           "cannot write dump %s: committing /bfloat16 failed", path);
    H5_TRY(layers = H5Gcreate2(file, "layers", H5P_DEFAULT, gcpl, H5P_DEFAULT), EQ_ERR_IO,
           "cannot write dump %s: creating /layers failed", path);

    int open_layer = -1;
    for (int i = 0; i < cap->count; i++) {
        const eq_capture_entry *e = &cap->entries[i];
        if (e->layer != open_layer) {
            char group_name[16];
            snprintf(group_name, sizeof group_name, "%02d", e->layer);
            close_id(&group);
            htri_t exists = H5Lexists(layers, group_name, H5P_DEFAULT);
            if (exists > 0)
                H5_TRY(group = H5Gopen2(layers, group_name, H5P_DEFAULT), EQ_ERR_IO,
                       "cannot write dump %s: opening group layers/%s failed", path, group_name);
            else
                H5_TRY(group = H5Gcreate2(layers, group_name, H5P_DEFAULT, gcpl, H5P_DEFAULT), EQ_ERR_IO,
                       "cannot write dump %s: creating group layers/%s failed", path, group_name);
            open_layer = e->layer;
        }
        EQ_TRY(write_entry(group, bf16_type, e, path));
    }
    close_id(&group);
    close_id(&layers);
    close_id(&bf16_type);
    /* Closing the file flushes it; only a cleanly closed file is moved into place. */
    herr_t closed = H5Fclose(file);
    file = H5I_INVALID_HID;
    H5_TRY(closed, EQ_ERR_IO, "cannot write dump %s: closing (flushing) the file failed", path);
    EQ_TRY(eq_atomic_commit(&af));
cleanup:
    close_id(&group);
    close_id(&layers);
    close_id(&bf16_type);
    close_id(&file);
    close_id(&gcpl);
    close_id(&fcpl);
    eq_atomic_abort(&af); /* removes the temporary file unless it was committed */
    return st;
}

/* Reads one scalar attribute of `obj` ("where" names it in messages) into dest: a string of at most
 * dest_len - 1 bytes (variable- or fixed-length) when want_class is H5T_STRING, else one number
 * converted to mem_type. */
static eq_status read_attr(hid_t obj, const char *path, const char *where, const char *name,
                           H5T_class_t want_class, hid_t mem_type, void *dest, size_t dest_len)
{
    eq_status st = EQ_OK;
    hid_t attr = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hid_t str_type = H5I_INVALID_HID;
    char *vlen_value = NULL;
    if (H5Aexists(obj, name) <= 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: %s has no attribute '%s'", path, where, name);
        goto cleanup;
    }
    attr = H5Aopen(obj, name, H5P_DEFAULT);
    type = attr >= 0 ? H5Aget_type(attr) : H5I_INVALID_HID;
    space = attr >= 0 ? H5Aget_space(attr) : H5I_INVALID_HID;
    H5_TRY(type < 0 || space < 0 ? -1 : 0, EQ_ERR_INPUT, "dump %s: cannot read attribute '%s' of %s", path, name,
           where);
    if (H5Tget_class(type) != want_class || H5Sget_simple_extent_npoints(space) != 1) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: attribute '%s' of %s is not a single %s", path, name, where,
                     want_class == H5T_STRING ? "string" : "integer");
        goto cleanup;
    }
    if (want_class != H5T_STRING) {
        H5_TRY(H5Aread(attr, mem_type, dest), EQ_ERR_INPUT, "dump %s: cannot read attribute '%s' of %s", path,
               name, where);
        goto cleanup;
    }
    htri_t is_vlen = H5Tis_variable_str(type);
    size_t fixed_len = H5Tget_size(type);
    if (is_vlen < 0 || (!is_vlen && fixed_len >= dest_len)) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: attribute '%s' of %s is not a string of at most %zu bytes", path,
                     name, where, dest_len - 1);
        goto cleanup;
    }
    /* The memory type keeps the file's character set (HDF5 does not convert between them). */
    H5_TRY(str_type = H5Tcopy(type), EQ_ERR_INPUT, "dump %s: string type", path);
    if (is_vlen) {
        H5_TRY(H5Aread(attr, str_type, &vlen_value), EQ_ERR_INPUT, "dump %s: cannot read attribute '%s' of %s",
               path, name, where);
        if (vlen_value == NULL || strlen(vlen_value) >= dest_len) {
            st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: attribute '%s' of %s is not a string of at most %zu bytes",
                         path, name, where, dest_len - 1);
            goto cleanup;
        }
        memcpy(dest, vlen_value, strlen(vlen_value) + 1);
    } else {
        H5_TRY(H5Tset_size(str_type, dest_len), EQ_ERR_INPUT, "dump %s: string type", path);
        H5_TRY(H5Tset_strpad(str_type, H5T_STR_NULLTERM), EQ_ERR_INPUT, "dump %s: string type", path);
        H5_TRY(H5Aread(attr, str_type, dest), EQ_ERR_INPUT, "dump %s: cannot read attribute '%s' of %s", path,
               name, where);
    }
cleanup:
    if (vlen_value != NULL) H5free_memory(vlen_value);
    close_id(&str_type);
    close_id(&space);
    close_id(&type);
    close_id(&attr);
    return st;
}

static eq_status read_meta(hid_t file, const char *path, eq_run_meta *m)
{
    eq_status st = EQ_OK;
    char dtype_name[EQ_NAME_MAX];
    char *dests[N_STRING_ATTRS] = {m->case_name, m->model, m->size, dtype_name, m->transport, m->algorithm,
                                   m->backend, m->version, m->grads, m->injected};
    for (int i = 0; i < N_STRING_ATTRS; i++)
        EQ_TRY(read_attr(file, path, "the root group", string_attr_names[i], H5T_STRING, H5I_INVALID_HID,
                         dests[i], EQ_NAME_MAX));
    int dtype_known = 0;
    for (int d = 0; d < EQ_DTYPE_COUNT && !dtype_known; d++) {
        if (strcmp(dtype_name, eq_dtype_name((eq_dtype)d)) == 0) {
            m->dtype = (eq_dtype)d;
            dtype_known = 1;
        }
    }
    if (!dtype_known) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: root attribute dtype is '%s' (want fp32, bf16 or fp64)", path,
                     dtype_name);
        goto cleanup;
    }
    EQ_TRY(read_attr(file, path, "the root group", "dp", H5T_INTEGER, H5T_NATIVE_INT, &m->dp, 0));
    EQ_TRY(read_attr(file, path, "the root group", "tp", H5T_INTEGER, H5T_NATIVE_INT, &m->tp, 0));
    EQ_TRY(read_attr(file, path, "the root group", "seed", H5T_INTEGER, H5T_NATIVE_UINT64, &m->seed, 0));
    if (m->dp < 1 || m->tp < 1) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: root attributes dp=%d, tp=%d (want >= 1)", path, m->dp, m->tp);
        goto cleanup;
    }
cleanup:
    return st;
}

/* Reads the dataset `name` of layer group `group` and appends it to out. */
static eq_status read_entry(hid_t group, const char *path, int layer, const char *name, eq_capture *out)
{
    eq_status st = EQ_OK;
    hid_t dset = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    eq_tensor t;
    memset(&t, 0, sizeof t);
    char entry_path[EQ_NAME_MAX + 16], role_name[EQ_NAME_MAX];
    snprintf(entry_path, sizeof entry_path, "layers/%02d/%s", layer, name);
    if (strlen(name) + 12 >= EQ_NAME_MAX) { /* eq_capture_add's limit on names */
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: tensor name %s is too long", path, entry_path);
        goto cleanup;
    }
    H5_TRY(dset = H5Dopen2(group, name, H5P_DEFAULT), EQ_ERR_INPUT, "dump %s: %s is not a readable dataset",
           path, entry_path);
    H5_TRY(type = H5Dget_type(dset), EQ_ERR_INPUT, "dump %s: cannot read the type of %s", path, entry_path);
    H5_TRY(space = H5Dget_space(dset), EQ_ERR_INPUT, "dump %s: cannot read the shape of %s", path, entry_path);
    /* bf16 is read raw with the file's own type as memory type; fp32/fp64 as native float/double. */
    size_t type_size = H5Tget_size(type);
    int is_bf16 = is_bf16_type(type);
    if (!is_bf16 && (H5Tget_class(type) != H5T_FLOAT || (type_size != 4 && type_size != 8))) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: dataset %s has an unknown type (want bf16, fp32 or fp64)", path,
                     entry_path);
        goto cleanup;
    }
    eq_dtype dtype = is_bf16 ? EQ_BF16 : type_size == 4 ? EQ_FP32 : EQ_FP64;
    hid_t mem_type = is_bf16 ? type : type_size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
    int ndim = H5Sget_simple_extent_ndims(space);
    hsize_t dims[EQ_MAX_DIMS];
    int64_t shape[EQ_MAX_DIMS];
    if (ndim < 1 || ndim > EQ_MAX_DIMS || H5Sget_simple_extent_dims(space, dims, NULL) != ndim) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: dataset %s has %d dimensions (want 1 to %d)", path, entry_path, ndim,
                     EQ_MAX_DIMS);
        goto cleanup;
    }
    /* Refuse extents whose byte count does not fit, before allocating. */
    uint64_t bytes = eq_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) {
        if (dims[d] != 0 && bytes > (uint64_t)(SIZE_MAX / 2) / dims[d]) {
            st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: dataset %s is too large", path, entry_path);
            goto cleanup;
        }
        bytes *= dims[d];
        shape[d] = (int64_t)dims[d];
    }
    EQ_TRY(read_attr(dset, path, entry_path, "role", H5T_STRING, H5I_INVALID_HID, role_name, sizeof role_name));
    eq_role role = EQ_ROLE_COUNT;
    for (int r = 0; r < EQ_ROLE_COUNT; r++)
        if (strcmp(role_name, eq_role_name((eq_role)r)) == 0) role = (eq_role)r;
    if (role == EQ_ROLE_COUNT) {
        st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: dataset %s has an unknown role '%s'", path, entry_path, role_name);
        goto cleanup;
    }
    EQ_TRY(eq_tensor_init(&t, dtype, ndim, shape));
    if (bytes > 0)
        H5_TRY(H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data), EQ_ERR_INPUT,
               "dump %s: reading dataset %s failed (file damaged?)", path, entry_path);
    EQ_TRY(eq_capture_add(out, layer, name, role, &t));
cleanup:
    eq_tensor_free(&t);
    close_id(&space);
    close_id(&type);
    close_id(&dset);
    return st;
}

/* The datasets of one layer group, in creation order where the writer tracked it. */
static eq_status read_layer(hid_t layers, const char *path, int layer, eq_capture *out)
{
    eq_status st = EQ_OK;
    hid_t group = H5I_INVALID_HID, gcpl = H5I_INVALID_HID;
    char group_name[16], name[EQ_NAME_MAX];
    unsigned order_flags = 0;
    H5G_info_t info;
    snprintf(group_name, sizeof group_name, "%02d", layer);
    H5_TRY(group = H5Gopen2(layers, group_name, H5P_DEFAULT), EQ_ERR_INPUT,
           "dump %s: layers/%s is not a readable group", path, group_name);
    gcpl = H5Gget_create_plist(group);
    H5_TRY(gcpl < 0 || H5Pget_link_creation_order(gcpl, &order_flags) < 0 || H5Gget_info(group, &info) < 0 ? -1 : 0,
           EQ_ERR_INPUT, "dump %s: cannot list layers/%s", path, group_name);
    H5_index_t order = (order_flags & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
    for (hsize_t i = 0; i < info.nlinks; i++) {
        ssize_t len = H5Lget_name_by_idx(group, ".", order, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
        if (len < 0 || (size_t)len >= sizeof name) {
            st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: cannot list layers/%s (a name too long?)", path, group_name);
            goto cleanup;
        }
        EQ_TRY(read_entry(group, path, layer, name, out));
    }
cleanup:
    close_id(&gcpl);
    close_id(&group);
    return st;
}

static int compare_ints(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

eq_status eq_dump_read(const char *path, eq_capture *out)
{
    eq_status st = EQ_OK;
    hid_t file = H5I_INVALID_HID, layers = H5I_INVALID_HID;
    int *layer_numbers = NULL;
    H5G_info_t info;
    struct stat sb;
    eq_capture_init(out);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* failures are reported once, through EQ_FAIL */
    if (stat(path, &sb) != 0) {
        int err = errno;
        st = err == ENOENT ? EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: no such file", path)
                           : EQ_FAIL(EQ_ERR_INPUT, "cannot open dump %s: %s", path, strerror(err));
        goto cleanup;
    }
    if (H5Fis_hdf5(path) <= 0 || (file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) {
        st = EQ_FAIL(EQ_ERR_INPUT, "%s is not a readable HDF5 dump", path);
        goto cleanup;
    }
    EQ_TRY(read_meta(file, path, &out->meta));
    H5_TRY(layers = H5Gopen2(file, "layers", H5P_DEFAULT), EQ_ERR_INPUT, "dump %s has no /layers group", path);
    H5_TRY(H5Gget_info(layers, &info), EQ_ERR_INPUT, "dump %s: cannot list /layers", path);
    layer_numbers = malloc((info.nlinks > 0 ? info.nlinks : 1) * sizeof *layer_numbers);
    if (layer_numbers == NULL) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "cannot list the %llu layers of dump %s", (unsigned long long)info.nlinks, path);
        goto cleanup;
    }
    /* Groups are named "%02d" (capture.h), so "100" sorts before "11" by name: sort by number. */
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char name[16], canonical[16], *end = NULL;
        ssize_t len = H5Lget_name_by_idx(layers, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                                         H5P_DEFAULT);
        long layer = len > 0 && (size_t)len < sizeof name ? strtol(name, &end, 10) : -1;
        if (layer >= 0 && layer <= 9999) snprintf(canonical, sizeof canonical, "%02ld", layer);
        if (layer < 0 || layer > 9999 || *end != '\0' || strcmp(name, canonical) != 0) {
            st = EQ_FAIL(EQ_ERR_INPUT, "dump %s: /layers holds '%s', not a layer group like '07'", path,
                         len > 0 && (size_t)len < sizeof name ? name : "(a long name)");
            goto cleanup;
        }
        layer_numbers[i] = (int)layer;
    }
    qsort(layer_numbers, (size_t)info.nlinks, sizeof *layer_numbers, compare_ints);
    for (hsize_t i = 0; i < info.nlinks; i++) EQ_TRY(read_layer(layers, path, layer_numbers[i], out));
cleanup:
    free(layer_numbers);
    close_id(&layers);
    close_id(&file);
    if (st != EQ_OK) eq_capture_free(out); /* the caller gets an empty capture, meta zeroed too */
    return st;
}

const char *eq_dump_filename(const eq_run_meta *meta, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%s-dp%d-tp%d.h5", meta->case_name, eq_dtype_name(meta->dtype), meta->dp, meta->tp);
    return buf;
}
