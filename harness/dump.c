#include "harness/dump.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness/equiv_revision.h"
#include "harness/base/atomic_file.h"
#include "harness/base/env.h"
#include "harness/h5util.h"
#include "harness/run_cell.h"

/* The command line of this process, shell-quoted (eq_dump_set_command); "" until set. A longer
 * one is cut at the buffer's end. */
static char command_line[4096];
static size_t command_used;

static void command_append(const char *text)
{
    size_t n = strlen(text);
    if (command_used + n >= sizeof command_line) n = sizeof command_line - 1 - command_used;
    memcpy(command_line + command_used, text, n);
    command_used += n;
    command_line[command_used] = '\0';
}

void eq_dump_set_command(int argc, char *const *argv)
{
    static const char plain_bytes[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,+-@%";
    command_used = 0;
    command_line[0] = '\0';
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (i > 0) command_append(" ");
        /* As is where every byte is one a shell leaves alone; else in single quotes, a quote as '\'' */
        if (a[0] != '\0' && strspn(a, plain_bytes) == strlen(a)) {
            command_append(a);
            continue;
        }
        command_append("'");
        for (const char *c = a; *c; c++) {
            const char one[2] = {*c, '\0'};
            command_append(*c == '\'' ? "'\\''" : one);
        }
        command_append("'");
    }
}

/* When the file was written, UTC, ISO 8601; SOURCE_DATE_EPOCH (seconds) in place of the clock where
 * it is set, as reproducible builds do, so two runs can still write byte-identical files. */
static void utc_now(char *buf, size_t len)
{
    time_t now = time(NULL);
    double fixed = 0.0;
    if (eq_env_number(EQ_ENV_SOURCE_DATE_EPOCH, &fixed)) now = (time_t)fixed; /* 0..253402300799: harness/base/env.h */
    struct tm tm;
    if (gmtime_r(&now, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) snprintf(buf, len, "unknown");
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
    eq_h5_close(&attr);
    eq_h5_close(&space);
    eq_h5_close(&type);
    return rc;
}

static herr_t write_number_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                                const void *value)
{
    herr_t rc = -1;
    hid_t space = H5Screate(H5S_SCALAR), attr = H5I_INVALID_HID;
    if (space >= 0 && (attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT)) >= 0)
        rc = H5Awrite(attr, mem_type, value);
    eq_h5_close(&attr);
    eq_h5_close(&space);
    return rc;
}

/* One field of the run's identity as a root attribute (harness/run_cell.h). */
static herr_t write_cell_attr(hid_t file, const eq_run_meta *m, const eq_cell_field *f)
{
    const void *value = eq_cell_member(m, f);
    char text[EQ_NAME_MAX];
    switch (f->type) {
    case EQ_CELL_TEXT: return write_string_attr(file, f->key, value);
    case EQ_CELL_DTYPE: return write_string_attr(file, f->key, eq_cell_text(m, f, text, sizeof text));
    case EQ_CELL_INT: return write_number_attr(file, f->key, H5T_STD_I32LE, H5T_NATIVE_INT, value);
    case EQ_CELL_I64: return write_number_attr(file, f->key, H5T_STD_I64LE, H5T_NATIVE_INT64, value);
    case EQ_CELL_U64: return write_number_attr(file, f->key, H5T_STD_U64LE, H5T_NATIVE_UINT64, value);
    case EQ_CELL_F64: return write_number_attr(file, f->key, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, value);
    }
    return -1;
}

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
    if (e->dims[0] != '\0')
        H5_TRY(write_string_attr(dset, "dims", e->dims), EQ_ERR_IO,
               "cannot write dump %s: writing the dims of %s failed", path, e->path);
cleanup:
    eq_h5_close(&dset);
    eq_h5_close(&space);
    eq_h5_close(&dcpl);
    return st;
}

/* Reserves `bytes` for the file the library has open (its sec2 descriptor), so that the writes
 * that follow cannot run out of space: a full disk or a file-size limit is reported here, with
 * nothing written yet. A file system that cannot reserve is written without. */
static eq_status reserve_space(hid_t file, hid_t fapl, size_t bytes, const char *path)
{
    void *handle = NULL;
    if (H5Fget_vfd_handle(file, fapl, &handle) < 0 || handle == NULL)
        return EQ_FAIL(EQ_ERR_IO, "cannot write dump %s: the file's descriptor is unknown", path);
    int err = posix_fallocate(*(const int *)handle, 0, (off_t)bytes);
    if (err == 0 || err == EOPNOTSUPP || err == EINVAL) return EQ_OK;
    return EQ_FAIL(EQ_ERR_IO, "cannot write dump %s: %s", path, strerror(err));
}

/* Cuts the reserve the library did not use: the closed file ends at `bytes`, its size after the
 * last flush (the library truncates to it itself only where its own record of the end differs). */
static eq_status trim_reserve(const char *temp_path, off_t bytes, const char *path)
{
    struct stat sb;
    if (stat(temp_path, &sb) != 0 || (sb.st_size > bytes && truncate(temp_path, bytes) != 0))
        return EQ_FAIL(EQ_ERR_IO, "cannot write dump %s: %s", path, strerror(errno));
    return EQ_OK;
}

eq_status eq_dump_write(const char *path, const eq_capture *cap)
{
    eq_status st = EQ_OK;
    eq_atomic_file af;
    memset(&af, 0, sizeof af);
    hid_t fcpl = H5I_INVALID_HID, gcpl = H5I_INVALID_HID, fapl = H5I_INVALID_HID, file = H5I_INVALID_HID;
    hid_t bf16_type = H5I_INVALID_HID, layers = H5I_INVALID_HID, group = H5I_INVALID_HID;
    const eq_run_meta *m = &cap->meta;

    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* failures are reported once, through EQ_FAIL */
    /* Track link creation order so a reader can list each layer's tensors in capture order. */
    const unsigned order = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;
    fcpl = H5Pcreate(H5P_FILE_CREATE);
    gcpl = H5Pcreate(H5P_GROUP_CREATE);
    H5_TRY(fcpl < 0 || gcpl < 0 || H5Pset_link_creation_order(fcpl, order) < 0 ||
                   H5Pset_link_creation_order(gcpl, order) < 0 || H5Pset_obj_track_times(fcpl, 0) < 0 ||
                   H5Pset_obj_track_times(gcpl, 0) < 0 ? -1 : 0,
           EQ_ERR_IO, "cannot write dump %s: setting up property lists failed", path);
    /* The file is written by the library straight into a temporary file in the folder (HDF5's sec2
     * driver), renamed over `path` once complete and closed without error: no image of the dump is
     * held in memory beside the capture. Its space is reserved first (reserve_space), so that a full
     * disk or a file-size limit fails there, before the library has written anything, and not
     * half-way (libhdf5 1.10 can crash at exit holding a file whose flush failed). */
    size_t expected = 1 << 20;
    for (int i = 0; i < cap->count; i++) expected += eq_tensor_bytes(&cap->entries[i].tensor) + 1024;
    EQ_TRY(eq_atomic_begin(&af, path, 0));
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5_TRY(fapl < 0 ? -1 : H5Pset_fapl_sec2(fapl), EQ_ERR_IO, "cannot write dump %s: setting up the file driver failed",
           path);
    H5_TRY(file = H5Fcreate(af.temp_path, H5F_ACC_TRUNC, fcpl, fapl), EQ_ERR_IO,
           "cannot write dump %s: creating the file failed", path);
    EQ_TRY(reserve_space(file, fapl, expected, path));

    /* The run's identity, in the order dumps have always had it (attr_slot); a field written
     * only when set leaves other dumps' bytes as they were. */
    for (int slot = 0; eq_cell_by_attr_slot(slot) != NULL; slot++) {
        const eq_cell_field *f = eq_cell_by_attr_slot(slot);
        if ((f->flags & EQ_CELL_ATTR) || ((f->flags & EQ_CELL_ATTR_IF_SET) && !eq_cell_is_default(m, f)))
            H5_TRY(write_cell_attr(file, m, f), EQ_ERR_IO, "cannot write dump %s: writing root attribute %s failed",
                   path, f->key);
    }

    /* Provenance: what ran, from which source, when. */
    char created[32];
    utc_now(created, sizeof created);
    H5_TRY(write_string_attr(file, "command", command_line), EQ_ERR_IO,
           "cannot write dump %s: writing root attribute command failed", path);
    H5_TRY(write_string_attr(file, "git_revision", EQUIV_GIT_REVISION), EQ_ERR_IO,
           "cannot write dump %s: writing root attribute git_revision failed", path);
    H5_TRY(write_string_attr(file, "created_utc", created), EQ_ERR_IO,
           "cannot write dump %s: writing root attribute created_utc failed", path);
    /* The step's hyperparameters, as attributes of /config (no datasets: compare reads none). */
    if (cap->n_config > 0) {
        H5_TRY(group = H5Gcreate2(file, "config", H5P_DEFAULT, gcpl, H5P_DEFAULT), EQ_ERR_IO,
               "cannot write dump %s: creating /config failed", path);
        for (int i = 0; i < cap->n_config; i++) {
            const eq_config_item *c = &cap->config[i];
            const int64_t integer = (int64_t)c->number;
            H5_TRY(c->is_text      ? write_string_attr(group, c->name, c->text)
                   : c->is_integer ? write_number_attr(group, c->name, H5T_STD_I64LE, H5T_NATIVE_INT64, &integer)
                                   : write_number_attr(group, c->name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &c->number),
                   EQ_ERR_IO, "cannot write dump %s: writing /config attribute %s failed", path, c->name);
        }
        eq_h5_close(&group);
    }

    H5_TRY(bf16_type = eq_h5_make_bf16_type(), EQ_ERR_IO, "cannot write dump %s: making the bf16 type failed", path);
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
            eq_h5_close(&group);
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
    eq_h5_close(&group);
    eq_h5_close(&layers);
    eq_h5_close(&bf16_type);
    /* The whole file, written and closed without error, is moved into place; nothing else is. */
    H5_TRY(H5Fflush(file, H5F_SCOPE_GLOBAL), EQ_ERR_IO, "cannot write dump %s: flushing the file failed", path);
    hsize_t file_bytes = 0;
    H5_TRY(H5Fget_filesize(file, &file_bytes), EQ_ERR_IO, "cannot write dump %s: its size is unknown", path);
    herr_t closed = H5Fclose(file);
    file = H5I_INVALID_HID;
    H5_TRY(closed, EQ_ERR_IO, "cannot write dump %s: closing the file failed", path);
    EQ_TRY(trim_reserve(af.temp_path, (off_t)file_bytes, path));
    EQ_TRY(eq_atomic_commit(&af));
cleanup:
    eq_h5_close(&group);
    eq_h5_close(&layers);
    eq_h5_close(&bf16_type);
    eq_h5_close(&file);
    eq_h5_close(&gcpl);
    eq_h5_close(&fcpl);
    eq_h5_close(&fapl);
    eq_atomic_abort(&af); /* removes the temporary file unless it was committed */
    return st;
}

const char *eq_dump_filename(const eq_run_meta *meta, char *buf, size_t len)
{
    char name[EQ_CELL_NAME_MAX];
    snprintf(buf, len, "%s.h5", eq_cell_name(meta, name, sizeof name));
    return buf;
}
