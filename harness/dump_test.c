/* HDF5 dumps: bit-exact round trip of every dtype (bf16 edge values included), meta and order;
 * hyperparameters (/config), dimension names and provenance written where a reader finds them, and
 * the file still read as before; readable errors for missing, foreign, truncated and malformed
 * files; no file left behind by a failed write, no temporary file by a successful one. */
#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/capture.h"
#include "harness/dump.h"
#include "harness/base/status.h"
#include "harness/base/testing.h"

static char test_dir[256];

static const char *in_dir(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", test_dir, name);
    return buf;
}

static void set_meta(eq_run_meta *m, eq_dtype dtype)
{
    memset(m, 0, sizeof *m);
    snprintf(m->case_name, sizeof m->case_name, "row_parallel");
    snprintf(m->model, sizeof m->model, "row_parallel_model");
    snprintf(m->size, sizeof m->size, "ci");
    m->dtype = dtype;
    m->dp = 2;
    m->tp = 4;
    snprintf(m->transport, sizeof m->transport, "sim");
    snprintf(m->algorithm, sizeof m->algorithm, "ring");
    snprintf(m->backend, sizeof m->backend, "cpu");
    m->seed = 0xfedcba9876543210ull; /* above INT64_MAX: must survive as unsigned */
    snprintf(m->version, sizeof m->version, "0.1.0-test");
    snprintf(m->grads, sizeof m->grads, "sum");
    snprintf(m->injected, sizeof m->injected, "skip_allreduce+grad_avg_twice");
}

/* Adds a tensor of the given shape whose raw elements are `bits` (as many as the shape holds). */
static void add_tensor(eq_capture *cap, int layer, const char *name, eq_role role, eq_dtype dtype, int ndim,
                       const int64_t *shape, const void *bits)
{
    eq_tensor t;
    EQ_EXPECT_OK(eq_tensor_init(&t, dtype, ndim, shape));
    if (t.data != NULL) memcpy(t.data, bits, eq_tensor_bytes(&t));
    EQ_EXPECT_OK(eq_capture_add(cap, layer, name, role, &t));
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Two layers, every dtype and role; within each layer the creation order differs from name order. */
static void build_capture(eq_capture *cap)
{
    eq_capture_init(cap);
    set_meta(&cap->meta, EQ_BF16);
    snprintf(cap->meta.gpu, sizeof cap->meta.gpu, "NVIDIA H200 (sm_90, 132 SMs, 139 GiB), driver 580.159.04 (CUDA 13.0)");
    /* +0, -0, 1, -2, largest finite, smallest subnormal, +Inf, -Inf, a NaN with payload, 1+2^-7,
     * -smallest subnormal, -largest finite */
    static const uint16_t bf16_edges[12] = {0x0000, 0x8000, 0x3f80, 0xc000, 0x7f7f, 0x0001,
                                            0x7f80, 0xff80, 0x7fc1, 0x3f81, 0x8001, 0xff7f};
    const int64_t edge_shape[2] = {3, 4};
    add_tensor(cap, 0, "input", EQ_ROLE_INPUT, EQ_BF16, 2, edge_shape, bf16_edges);

    uint32_t f32[24];
    for (int i = 0; i < 24; i++) f32[i] = f32_bits(0.37f * (float)i - 3.0f);
    f32[1] = 0x80000000u; /* -0 */
    f32[5] = 0x7fc00123u; /* NaN with payload */
    f32[9] = 0x00000001u; /* smallest subnormal */
    f32[23] = 0xff800000u; /* -Inf */
    const int64_t act_shape[3] = {3, 2, 4};
    add_tensor(cap, 0, "fc1_out", EQ_ROLE_ACTIVATION, EQ_FP32, 3, act_shape, f32);

    const double f64[5] = {-0.0, 1e-310, 3.141592653589793, -1.0 / 3.0, 1e300};
    const int64_t param_shape[1] = {5};
    add_tensor(cap, 1, "weight", EQ_ROLE_PARAM, EQ_FP64, 1, param_shape, f64);
    const float loss = 2.5f;
    const int64_t loss_shape[1] = {1};
    add_tensor(cap, 1, "loss", EQ_ROLE_LOSS, EQ_FP32, 1, loss_shape, &loss);
    const uint16_t grad[4] = {0x3c00, 0xbc01, 0x0080, 0x807f};
    const int64_t grad_shape[4] = {1, 2, 1, 2};
    add_tensor(cap, 1, "grad_w", EQ_ROLE_GRAD, EQ_BF16, 4, grad_shape, grad);
}

static void expect_same_meta(const eq_run_meta *want, const eq_run_meta *got)
{
    EQ_EXPECT(strcmp(want->case_name, got->case_name) == 0, "case '%s'", got->case_name);
    EQ_EXPECT(strcmp(want->model, got->model) == 0, "model '%s'", got->model);
    EQ_EXPECT(strcmp(want->size, got->size) == 0, "size '%s'", got->size);
    EQ_EXPECT(want->dtype == got->dtype, "dtype %s", eq_dtype_name(got->dtype));
    EQ_EXPECT(want->dp == got->dp && want->tp == got->tp, "dp %d tp %d", got->dp, got->tp);
    EQ_EXPECT(strcmp(want->transport, got->transport) == 0, "transport '%s'", got->transport);
    EQ_EXPECT(strcmp(want->algorithm, got->algorithm) == 0, "algorithm '%s'", got->algorithm);
    EQ_EXPECT(strcmp(want->backend, got->backend) == 0, "backend '%s'", got->backend);
    EQ_EXPECT_EQ_U64(got->seed, want->seed);
    EQ_EXPECT(strcmp(want->version, got->version) == 0, "version '%s'", got->version);
    EQ_EXPECT(strcmp(want->grads, got->grads) == 0, "grads '%s'", got->grads);
    EQ_EXPECT(strcmp(want->injected, got->injected) == 0, "injected '%s'", got->injected);
    EQ_EXPECT(strcmp(want->gpu, got->gpu) == 0, "gpu '%s', want '%s'", got->gpu, want->gpu);
}

/* Same entries in the same order, every element bit for bit. */
static void expect_same_entries(const eq_capture *want, const eq_capture *got)
{
    EQ_EXPECT(want->count == got->count, "%d entries read, %d written", got->count, want->count);
    for (int i = 0; i < want->count && i < got->count; i++) {
        const eq_capture_entry *w = &want->entries[i], *g = &got->entries[i];
        EQ_EXPECT(strcmp(w->path, g->path) == 0, "entry %d path '%s', want '%s'", i, g->path, w->path);
        EQ_EXPECT(strcmp(w->name, g->name) == 0, "entry %d name '%s', want '%s'", i, g->name, w->name);
        EQ_EXPECT(w->layer == g->layer, "%s: layer %d, want %d", w->path, g->layer, w->layer);
        EQ_EXPECT(w->role == g->role, "%s: role %s", w->path, eq_role_name(g->role));
        char ws[64], gs[64];
        EQ_EXPECT(eq_tensor_same_shape(&w->tensor, &g->tensor), "%s: %s %s, want %s %s", w->path,
                  eq_dtype_name(g->tensor.dtype), eq_tensor_shape_str(&g->tensor, gs, sizeof gs),
                  eq_dtype_name(w->tensor.dtype), eq_tensor_shape_str(&w->tensor, ws, sizeof ws));
        if (!eq_tensor_same_shape(&w->tensor, &g->tensor)) continue;
        size_t elem = eq_dtype_size(w->tensor.dtype);
        for (int64_t k = 0; k < eq_tensor_numel(&w->tensor); k++) {
            uint64_t wb = 0, gb = 0;
            memcpy(&wb, (const char *)w->tensor.data + k * (int64_t)elem, elem);
            memcpy(&gb, (const char *)g->tensor.data + k * (int64_t)elem, elem);
            EQ_EXPECT(wb == gb, "%s[%lld]: bits 0x%llx, want 0x%llx", w->path, (long long)k,
                      (unsigned long long)gb, (unsigned long long)wb);
        }
    }
}

static int count_temp_files(void)
{
    int n = 0;
    DIR *dir = opendir(test_dir);
    if (dir == NULL) return -1;
    for (struct dirent *d = readdir(dir); d != NULL; d = readdir(dir))
        if (strstr(d->d_name, ".tmp.") != NULL) n++;
    closedir(dir);
    return n;
}

static int file_exists(const char *path) { return access(path, F_OK) == 0; }

/* Files, groups, datasets, named types and attributes still open: 0 after every dump call. */
static long open_hdf5_objects(void) { return (long)H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); }

/* A read that must fail with EQ_ERR_INPUT, name the file (and `detail`), and leave cap empty. */
static void expect_read_fails(const char *path, const char *detail)
{
    eq_capture cap;
    eq_status st = eq_dump_read(path, &cap);
    const char *msg = eq_error_message();
    EQ_EXPECT(st == EQ_ERR_INPUT, "%s: status %s (%s)", path, eq_status_name(st), msg);
    EQ_EXPECT(strstr(msg, path) != NULL, "message '%s' does not name %s", msg, path);
    EQ_EXPECT(strstr(msg, detail) != NULL, "message '%s' does not say '%s'", msg, detail);
    EQ_EXPECT(cap.count == 0 && cap.entries == NULL && cap.meta.case_name[0] == '\0',
              "%s: capture not empty after a failed read (%d entries)", path, cap.count);
    EQ_EXPECT(open_hdf5_objects() == 0, "%s: %ld HDF5 objects left open", path, open_hdf5_objects());
    eq_error_clear();
    eq_capture_free(&cap);
}

/* Replaces (or adds) the string attribute `name` of object `obj_path` in an existing file. */
static void set_string_attr(const char *file_path, const char *obj_path, const char *name, const char *value)
{
    hid_t file = H5Fopen(file_path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t obj = H5Oopen(file, obj_path, H5P_DEFAULT);
    if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    H5Tset_size(type, H5T_VARIABLE);
    hid_t attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    EQ_EXPECT(attr >= 0 && H5Awrite(attr, type, &value) >= 0, "cannot set %s:%s", file_path, obj_path);
    H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
    H5Oclose(obj);
    EQ_EXPECT(H5Fclose(file) >= 0, "cannot close %s", file_path);
}

static void test_round_trip(void)
{
    char path[1024];
    eq_capture written, read_back;
    build_capture(&written);
    in_dir("round_trip.h5", path, sizeof path);
    EQ_EXPECT_OK(eq_dump_write(path, &written));
    EQ_EXPECT(file_exists(path), "%s was not written", path);
    EQ_EXPECT(count_temp_files() == 0, "a temporary file remains in %s", test_dir);
    EQ_EXPECT_OK(eq_dump_read(path, &read_back));
    expect_same_meta(&written.meta, &read_back.meta);
    expect_same_entries(&written, &read_back);
    EQ_EXPECT(open_hdf5_objects() == 0, "%ld HDF5 objects left open", open_hdf5_objects());

    /* bf16 datasets use the committed /bfloat16 type, so h5dump/h5py see a named float type. */
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(file, "layers/00/input", H5P_DEFAULT);
    hid_t type = H5Dget_type(dset);
    EQ_EXPECT(H5Tcommitted(type) > 0, "layers/00/input does not use the committed /bfloat16");
    EQ_EXPECT(H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == 2, "bf16 dataset type is not a 2-byte float");
    H5Tclose(type);
    H5Dclose(dset);
    H5Fclose(file);

    /* Writing again over an existing dump replaces it. */
    written.meta.tp = 8;
    EQ_EXPECT_OK(eq_dump_write(path, &written));
    eq_capture_free(&read_back);
    EQ_EXPECT_OK(eq_dump_read(path, &read_back));
    EQ_EXPECT(read_back.meta.tp == 8, "rewritten dump has tp %d", read_back.meta.tp);
    eq_capture_free(&read_back);
    eq_capture_free(&written);
}

/* Layers read back in numeric order ("100" after "20", where name order puts it before), each
 * layer's tensors in capture order. */
static void test_layer_order(void)
{
    char path[1024];
    eq_capture written, read_back;
    eq_capture_init(&written);
    set_meta(&written.meta, EQ_FP32);
    const float v = 1.0f;
    const int64_t shape[1] = {1};
    add_tensor(&written, 100, "b", EQ_ROLE_ACTIVATION, EQ_FP32, 1, shape, &v);
    add_tensor(&written, 2, "z", EQ_ROLE_ACTIVATION, EQ_FP32, 1, shape, &v);
    add_tensor(&written, 20, "a", EQ_ROLE_GRAD, EQ_FP32, 1, shape, &v);
    add_tensor(&written, 2, "y", EQ_ROLE_GRAD, EQ_FP32, 1, shape, &v);
    EQ_EXPECT_OK(eq_dump_write(in_dir("order.h5", path, sizeof path), &written));
    EQ_EXPECT_OK(eq_dump_read(path, &read_back));
    const char *want[4] = {"layers/02/z", "layers/02/y", "layers/20/a", "layers/100/b"};
    EQ_EXPECT(read_back.count == 4, "%d entries", read_back.count);
    for (int i = 0; i < 4 && i < read_back.count; i++)
        EQ_EXPECT(strcmp(read_back.entries[i].path, want[i]) == 0, "entry %d is %s, want %s", i,
                  read_back.entries[i].path, want[i]);
    eq_capture_free(&read_back);
    eq_capture_free(&written);
}

static void test_read_errors(void)
{
    char path[1024], valid[1024];
    expect_read_fails(in_dir("missing.h5", path, sizeof path), "no such file");

    unsigned char noise[4096];
    uint32_t x = 12345u;
    for (size_t i = 0; i < sizeof noise; i++) { /* xorshift32: fixed bytes, no HDF5 signature */
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise[i] = (unsigned char)x;
    }
    eq_test_write_file(in_dir("noise.h5", path, sizeof path), noise, sizeof noise);
    expect_read_fails(path, "is not a readable HDF5 dump");

    /* The first 200 bytes of a valid dump: the superblock signature is there, the rest is not. */
    eq_capture cap;
    build_capture(&cap);
    EQ_EXPECT_OK(eq_dump_write(in_dir("valid.h5", valid, sizeof valid), &cap));
    FILE *fp = fopen(valid, "rb");
    unsigned char head[200];
    EQ_EXPECT(fp != NULL && fread(head, 1, sizeof head, fp) == sizeof head, "cannot read %s", valid);
    if (fp != NULL) fclose(fp);
    eq_test_write_file(in_dir("truncated.h5", path, sizeof path), head, sizeof head);
    expect_read_fails(path, "is not a readable HDF5 dump");

    /* A valid HDF5 file with a /layers group but none of the root attributes: dp and tp are the
     * two every file of the schema must have. */
    hid_t file = H5Fcreate(in_dir("bare.h5", path, sizeof path), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t group = H5Gcreate2(file, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EQ_EXPECT(file >= 0 && group >= 0, "cannot create %s", path);
    H5Gclose(group);
    H5Fclose(file);
    expect_read_fails(path, "has no attribute 'dp'");

    /* A dataset of an unknown type (int32) among valid ones. */
    EQ_EXPECT_OK(eq_dump_write(in_dir("int_dataset.h5", path, sizeof path), &cap));
    file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t dims[1] = {3};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t dset = H5Dcreate2(file, "layers/01/counts", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EQ_EXPECT(dset >= 0, "cannot add layers/01/counts to %s", path);
    H5Dclose(dset);
    H5Sclose(space);
    H5Fclose(file);
    set_string_attr(path, "layers/01/counts", "role", "activation");
    expect_read_fails(path, "layers/01/counts has an unsupported type");

    /* A dataset whose role is not one of ours. */
    EQ_EXPECT_OK(eq_dump_write(in_dir("bad_role.h5", path, sizeof path), &cap));
    set_string_attr(path, "layers/00/fc1_out", "role", "weights");
    expect_read_fails(path, "layers/00/fc1_out has role 'weights'");

    /* A root attribute of the wrong kind. */
    EQ_EXPECT_OK(eq_dump_write(in_dir("bad_dtype.h5", path, sizeof path), &cap));
    set_string_attr(path, "/", "dtype", "fp16");
    expect_read_fails(path, "dtype is 'fp16'");
    eq_capture_free(&cap);
}

static void test_write_errors(void)
{
    char path[1024], folder[1024];
    eq_capture cap;
    build_capture(&cap);

    /* Into a folder that does not exist: an error, and nothing created. */
    in_dir("no_such_folder", folder, sizeof folder);
    in_dir("no_such_folder/x.h5", path, sizeof path);
    eq_status st = eq_dump_write(path, &cap);
    EQ_EXPECT(st == EQ_ERR_IO, "write into a missing folder: %s", eq_status_name(st));
    EQ_EXPECT(strstr(eq_error_message(), path) != NULL, "message '%s' does not name %s", eq_error_message(), path);
    eq_error_clear();
    EQ_EXPECT(!file_exists(path) && !file_exists(folder), "%s appeared", path);

    /* A failure half-way (a duplicate tensor name): no final file, no temporary file. */
    const float v = 0.0f;
    const int64_t shape[1] = {1};
    add_tensor(&cap, 1, "loss", EQ_ROLE_LOSS, EQ_FP32, 1, shape, &v);
    st = eq_dump_write(in_dir("half_written.h5", path, sizeof path), &cap);
    EQ_EXPECT(st == EQ_ERR_IO, "write with a duplicate name: %s", eq_status_name(st));
    EQ_EXPECT(strstr(eq_error_message(), "layers/01/loss") != NULL, "message '%s'", eq_error_message());
    eq_error_clear();
    EQ_EXPECT(!file_exists(path), "%s was left after a failed write", path);
    EQ_EXPECT(count_temp_files() == 0, "a temporary file remains in %s", test_dir);
    EQ_EXPECT(open_hdf5_objects() == 0, "%ld HDF5 objects left open", open_hdf5_objects());
    eq_capture_free(&cap);
}

/* The writer reserves the dump's space before the library writes (at least 1 MiB: 1 MiB of room for
 * the metadata and each tensor's bytes) and cuts what it did not use: a dump of these few small
 * tensors is a few KiB, and a file-size limit below the reserve fails before anything is written,
 * naming the cause, leaving no file, no temporary file and nothing open. */
static void test_write_reserve(void)
{
    char path[1024];
    eq_capture cap;
    build_capture(&cap);
    struct stat sb;
    eq_status st = eq_dump_write(in_dir("reserve.h5", path, sizeof path), &cap);
    EQ_EXPECT(st == EQ_OK, "write: %s", eq_error_message());
    EQ_EXPECT(stat(path, &sb) == 0 && sb.st_size > 0 && sb.st_size < 256 * 1024,
              "%s is %lld bytes: the unused reserve was kept", path, (long long)sb.st_size);

    struct rlimit was, limit;
    EQ_EXPECT(getrlimit(RLIMIT_FSIZE, &was) == 0, "getrlimit: %s", strerror(errno));
    limit = was;
    limit.rlim_cur = 512 * 1024; /* below the reserve, above the dump written above */
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN); /* EFBIG, not the signal's death */
    EQ_EXPECT(setrlimit(RLIMIT_FSIZE, &limit) == 0, "setrlimit: %s", strerror(errno));
    st = eq_dump_write(in_dir("over_limit.h5", path, sizeof path), &cap);
    setrlimit(RLIMIT_FSIZE, &was);
    signal(SIGXFSZ, old_handler);
    EQ_EXPECT(st == EQ_ERR_IO, "write over a file-size limit: %s", eq_status_name(st));
    EQ_EXPECT(strstr(eq_error_message(), path) != NULL && strstr(eq_error_message(), strerror(EFBIG)) != NULL,
              "message '%s' does not name %s and '%s'", eq_error_message(), path, strerror(EFBIG));
    eq_error_clear();
    EQ_EXPECT(!file_exists(path), "%s was left after a failed write", path);
    EQ_EXPECT(count_temp_files() == 0, "a temporary file remains in %s", test_dir);
    EQ_EXPECT(open_hdf5_objects() == 0, "%ld HDF5 objects left open", open_hdf5_objects());
    eq_capture_free(&cap);
}

static void test_filename(void)
{
    eq_run_meta m;
    char buf[EQ_DUMP_FILENAME_MAX];
    set_meta(&m, EQ_BF16);
    eq_dump_filename(&m, buf, sizeof buf);
    /* the cell's name: the layout's, then each setting that is not the default (grads, bugs, seed) */
    EQ_EXPECT(strcmp(buf, "row_parallel-bf16-dp2-tp4-grads_sum-bug_skip_allreduce+grad_avg_twice-"
                          "seed18364758544493064720.h5") == 0, "filename '%s'", buf);
    set_meta(&m, EQ_FP32);
    m.dp = 1;
    m.tp = 1;
    snprintf(m.grads, sizeof m.grads, "avg"); /* every default: the name runs have always had */
    snprintf(m.injected, sizeof m.injected, "none");
    m.seed = 1234;
    eq_dump_filename(&m, buf, sizeof buf);
    EQ_EXPECT(strcmp(buf, "row_parallel-fp32-dp1-tp1.h5") == 0, "filename '%s'", buf);
}

/* Reads a scalar attribute of obj_path as text ("" if absent or not a string) or a double. */
static void read_text_attr(hid_t file, const char *obj_path, const char *name, char *buf, size_t len)
{
    buf[0] = '\0';
    hid_t attr = H5Aopen_by_name(file, obj_path, name, H5P_DEFAULT, H5P_DEFAULT);
    hid_t type = attr >= 0 ? H5Aget_type(attr) : H5I_INVALID_HID;
    char *value = NULL;
    if (type >= 0 && H5Tget_class(type) == H5T_STRING && H5Aread(attr, type, &value) >= 0 && value != NULL)
        snprintf(buf, len, "%s", value);
    if (value != NULL) H5free_memory(value);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
}

static double read_number_attr(hid_t file, const char *obj_path, const char *name, H5T_class_t *cls)
{
    double v = -1;
    hid_t attr = H5Aopen_by_name(file, obj_path, name, H5P_DEFAULT, H5P_DEFAULT);
    hid_t type = attr >= 0 ? H5Aget_type(attr) : H5I_INVALID_HID;
    *cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (attr >= 0 && H5Aread(attr, H5T_NATIVE_DOUBLE, &v) < 0) v = -1;
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    return v;
}

static void test_config_dims_provenance(void)
{
    char path[1024], text[600];
    eq_capture written, read_back;
    build_capture(&written);
    char *argv[] = {"equiv", "--out", "it's here"};
    eq_dump_set_command(3, argv);
    EQ_EXPECT_OK(eq_capture_config_int(&written, "heads", 3));
    EQ_EXPECT_OK(eq_capture_config_number(&written, "eps", 0.5));
    EQ_EXPECT_OK(eq_capture_config_number(&written, "eps", 1e-5)); /* replaces */
    EQ_EXPECT_OK(eq_capture_config_text(&written, "gelu", "erf"));
    EQ_EXPECT(written.n_config == 3, "%d config items, want 3", written.n_config);
    static const eq_dims_rule wrong[] = {{"fc1_out", "seq,hidden"}, {NULL, NULL}};
    EQ_EXPECT(eq_capture_name_dims(&written, wrong) == EQ_ERR_INTERNAL, "a 2-name dims on a 3-d tensor accepted");
    eq_error_clear();
    static const eq_dims_rule rules[] = {{"fc1_*", "seq,batch,ffn"}, {"weight", "ffn"}, {NULL, NULL}};
    EQ_EXPECT_OK(eq_capture_name_dims(&written, rules));
    setenv("SOURCE_DATE_EPOCH", "86400", 1);
    EQ_EXPECT_OK(eq_dump_write(in_dir("config.h5", path, sizeof path), &written));
    unsetenv("SOURCE_DATE_EPOCH");

    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    EQ_EXPECT(file >= 0, "cannot open %s", path);
    H5T_class_t cls;
    EQ_EXPECT(read_number_attr(file, "/config", "heads", &cls) == 3.0 && cls == H5T_INTEGER, "heads");
    EQ_EXPECT(read_number_attr(file, "/config", "eps", &cls) == 1e-5 && cls == H5T_FLOAT, "eps");
    read_text_attr(file, "/config", "gelu", text, sizeof text);
    EQ_EXPECT(strcmp(text, "erf") == 0, "gelu '%s'", text);
    read_text_attr(file, "/layers/00/fc1_out", "dims", text, sizeof text);
    EQ_EXPECT(strcmp(text, "seq,batch,ffn") == 0, "fc1_out dims '%s'", text);
    read_text_attr(file, "/layers/01/weight", "dims", text, sizeof text);
    EQ_EXPECT(strcmp(text, "ffn") == 0, "weight dims '%s'", text);
    EQ_EXPECT(H5Aexists_by_name(file, "/layers/01/loss", "dims", H5P_DEFAULT) == 0, "loss was not named");
    read_text_attr(file, "/", "command", text, sizeof text);
    EQ_EXPECT(strcmp(text, "equiv --out 'it'\\''s here'") == 0, "command '%s'", text);
    read_text_attr(file, "/", "created_utc", text, sizeof text);
    EQ_EXPECT(strcmp(text, "1970-01-02T00:00:00Z") == 0, "created_utc '%s'", text);
    read_text_attr(file, "/", "git_revision", text, sizeof text);
    EQ_EXPECT(text[0] != '\0', "no git_revision");
    if (file >= 0) H5Fclose(file);

    /* The reader takes the new file as it took the old: same meta and entries, nothing more. */
    EQ_EXPECT_OK(eq_dump_read(path, &read_back));
    expect_same_meta(&written.meta, &read_back.meta);
    expect_same_entries(&written, &read_back);
    eq_capture_free(&written);
    eq_capture_free(&read_back);
}

static void remove_test_dir(void)
{
    char path[1024];
    DIR *dir = opendir(test_dir);
    if (dir == NULL) return;
    for (struct dirent *d = readdir(dir); d != NULL; d = readdir(dir))
        if (strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0) unlink(in_dir(d->d_name, path, sizeof path));
    closedir(dir);
    rmdir(test_dir);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(test_dir, sizeof test_dir, "%s/dump_test.XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(test_dir) == NULL) {
        fprintf(stderr, "dump_test: cannot create a folder under %s\n", test_dir);
        return 1;
    }
    test_round_trip();
    test_layer_order();
    test_config_dims_provenance();
    test_read_errors();
    test_write_errors();
    test_write_reserve();
    test_filename();
    EQ_EXPECT(count_temp_files() == 0, "a temporary file remains in %s", test_dir);
    remove_test_dir();
    return eq_test_finish("dump_test");
}
