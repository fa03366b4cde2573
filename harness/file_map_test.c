/* Tensors mapped from their files rather than read (harness/file_map.h; eq_dump_entry_offset,
 * harness/dump.h; the isolated reader's map, harness/dump_read_isolated.h):
 *   - the stored offset is where the file holds the tensor's own bytes (read back with pread, an
 *     independent reader of the file), and it is -1 where a read would convert (a big-endian
 *     fp32 dataset), where the bytes are not one extent (chunked), and for small tensors;
 *   - the reader maps what it may (EQUIV_READ_MAP_MB) and nothing else, and every path gives the
 *     capture eq_dump_read gives in-process, bit for bit;
 *   - a replica is checked against a mapped kept copy, whether the replica is mapped too or read
 *     through HDF5 (converted), and one element's difference is seen;
 *   - files larger than half the memory are read, not mapped;
 *   - a file cut short under a map ends the process with one error line naming it, and status 2. */
#define _GNU_SOURCE /* pread, ftruncate */
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/base/testing.h"
#include "harness/dump.h"
#include "harness/dump_read_isolated.h"
#include "harness/file_map.h"

enum { ROWS = 64, COLS = 64 };

/* t_fp32, t_bf16, t_fp64 [ROWS, COLS] (over a page each: mappable) and small [3, 5], in that order;
 * `flip` >= 0 changes that element of t_fp32. */
static void build(eq_capture *cap, int64_t flip)
{
    eq_capture_init(cap);
    snprintf(cap->meta.case_name, sizeof cap->meta.case_name, "mapped");
    snprintf(cap->meta.model, sizeof cap->meta.model, "row_parallel");
    snprintf(cap->meta.kernel, sizeof cap->meta.kernel, "ordered C");
    cap->meta.dtype = EQ_FP32;
    cap->meta.dp = cap->meta.tp = 1;
    const eq_dtype dtypes[4] = {EQ_FP32, EQ_BF16, EQ_FP64, EQ_FP32};
    const char *names[4] = {"t_fp32", "t_bf16", "t_fp64", "small"};
    for (int i = 0; i < 4; i++) {
        eq_tensor t;
        EQ_EXPECT_OK(eq_tensor_init_2d(&t, dtypes[i], i < 3 ? ROWS : 3, i < 3 ? COLS : 5));
        for (int64_t k = 0; k < eq_tensor_numel(&t); k++) eq_tensor_set(&t, k, 0.125 * (double)(k % 89) - 5.0 + i);
        if (i == 0 && flip >= 0) eq_tensor_set(&t, flip, 1000.0);
        EQ_EXPECT_OK(eq_capture_add(cap, i, names[i], EQ_ROLE_ACTIVATION, &t));
    }
}

/* Adds dataset `name` [ROWS, COLS] holding t_fp32's values (as build(…, -1) makes them) in file
 * type `type`, chunked or contiguous, with the role attribute a dump's dataset needs. */
static void add_dataset(const char *path, const char *name, hid_t type, int chunked)
{
    float values[ROWS * COLS];
    for (int k = 0; k < ROWS * COLS; k++) values[k] = (float)(0.125 * (double)(k % 89) - 5.0);
    const hsize_t dims[2] = {ROWS, COLS}, chunk[2] = {ROWS / 4, COLS};
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), space = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (chunked) H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dset = H5Dcreate2(file, name, type, space, lcpl, dcpl, H5P_DEFAULT);
    EQ_EXPECT(dset >= 0 && H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0,
              "writing %s", name);
    hid_t str = H5Tcopy(H5T_C_S1), scalar = H5Screate(H5S_SCALAR);
    H5Tset_size(str, strlen("activation"));
    hid_t attr = H5Acreate2(dset, "role", str, scalar, H5P_DEFAULT, H5P_DEFAULT);
    EQ_EXPECT(attr >= 0 && H5Awrite(attr, str, "activation") >= 0, "the role of %s", name);
    H5Aclose(attr), H5Sclose(scalar), H5Tclose(str), H5Dclose(dset), H5Pclose(lcpl), H5Pclose(dcpl), H5Sclose(space);
    H5Fclose(file);
}

/* Writes the test's dump to path: build(…, flip), then a chunked and a big-endian copy of t_fp32. */
static void write_dump(const char *path, int64_t flip)
{
    eq_capture cap;
    build(&cap, flip);
    EQ_EXPECT_OK(eq_dump_write(path, &cap));
    eq_capture_free(&cap);
    add_dataset(path, "layers/90/chunked", H5T_IEEE_F32LE, 1);
    add_dataset(path, "layers/91/big_endian", H5T_IEEE_F32BE, 0);
}

static int entry_of(const eq_capture *cap, const char *name)
{
    for (int i = 0; i < cap->count; i++)
        if (strcmp(cap->entries[i].name, name) == 0) return i;
    return -1;
}

static void expect_same(const eq_capture *a, const eq_capture *b, const char *what)
{
    EQ_EXPECT(a->count == b->count, "%s: %d tensors vs %d", what, a->count, b->count);
    for (int i = 0; i < a->count && i < b->count; i++) {
        const eq_tensor *x = &a->entries[i].tensor, *y = &b->entries[i].tensor;
        EQ_EXPECT(strcmp(a->entries[i].path, b->entries[i].path) == 0 && x->dtype == y->dtype &&
                      eq_tensor_bytes(x) == eq_tensor_bytes(y) && memcmp(x->data, y->data, eq_tensor_bytes(x)) == 0,
                  "%s: entry %d (%s) differs", what, i, a->entries[i].path);
    }
}

/* 1. Where the file stores each entry as it is: the bytes there, read with pread, are the data. */
static void test_stored_offsets(const char *path)
{
    eq_dump_file *f = NULL;
    eq_capture index, whole;
    EQ_EXPECT_OK(eq_dump_open(path, &f, &index));
    EQ_EXPECT_OK(eq_dump_read(path, &whole));
    const char *as_is[3] = {"t_fp32", "t_bf16", "t_fp64"}, *not_as_is[3] = {"small", "chunked", "big_endian"};
    int fd = open(path, O_RDONLY);
    for (int k = 0; k < 3; k++) {
        const int e = entry_of(&index, as_is[k]);
        const int64_t at = e >= 0 ? eq_dump_entry_offset(f, e) : -1;
        EQ_EXPECT(at > 0, "%s: stored offset %lld", as_is[k], (long long)at);
        if (at <= 0) continue;
        const size_t bytes = eq_tensor_bytes(&index.entries[e].tensor);
        char *got = malloc(bytes);
        EQ_EXPECT(pread(fd, got, bytes, (off_t)at) == (ssize_t)bytes &&
                      memcmp(got, whole.entries[e].tensor.data, bytes) == 0,
                  "%s: the %zu bytes at %lld are not its data", as_is[k], bytes, (long long)at);
        free(got);
    }
    for (int k = 0; k < 3; k++) {
        const int e = entry_of(&index, not_as_is[k]);
        EQ_EXPECT(e >= 0 && eq_dump_entry_offset(f, e) == -1, "%s: a stored offset %lld", not_as_is[k],
                  (long long)(e >= 0 ? eq_dump_entry_offset(f, e) : 0));
    }
    close(fd);
    eq_dump_close(f);
    eq_capture_free(&index);
    eq_capture_free(&whole);
}

/* 2. What the reader maps, at a threshold of 0 and of 1e9 MB; every way gives the in-process capture. */
static void test_reader_maps(const char *path)
{
    eq_capture whole, isolated, index;
    EQ_EXPECT_OK(eq_dump_read(path, &whole));
    const char *thresholds[2] = {"0", "1e9"};
    for (int t = 0; t < 2; t++) {
        setenv("EQUIV_READ_MAP_MB", thresholds[t], 1);
        EQ_EXPECT_OK(eq_dump_read_isolated(path, &isolated));
        expect_same(&whole, &isolated, thresholds[t]);
        eq_capture_free(&isolated);
        eq_dump_server *s = NULL;
        EQ_EXPECT_OK(eq_dump_server_open(&path, 1, &s, &index));
        if (s == NULL) continue;
        for (int e = 0; e < index.count; e++) {
            const char *name = index.entries[e].name;
            const int want = t == 0 && (strcmp(name, "t_fp32") == 0 || strcmp(name, "t_bf16") == 0 ||
                                        strcmp(name, "t_fp64") == 0);
            EQ_EXPECT(eq_dump_server_mappable(s, 0, e) == want, "threshold %s: %s mappable %d, want %d",
                      thresholds[t], name, eq_dump_server_mappable(s, 0, e), want);
        }
        eq_dump_server_close(s);
        eq_capture_free(&index);
    }
    unsetenv("EQUIV_READ_MAP_MB");
    eq_capture_free(&whole);
}

/* One request's answer: entry `name` of file 0 mapped and, of file 1, entry `replica` checked
 * against it. */
static int replica_same(const char *const *paths, const char *replica)
{
    eq_dump_server *s = NULL;
    eq_capture index[2];
    int same = -1;
    EQ_EXPECT_OK(eq_dump_server_open(paths, 2, &s, index));
    if (s == NULL) return -1;
    const int kept = entry_of(&index[0], "t_fp32"), theirs = entry_of(&index[1], replica);
    eq_dump_request req[2] = {
        {.file = 0, .entry = kept, .same_as = -1, .same_file = -1, .same_entry = -1, .map = 1},
        {.file = 1, .entry = theirs, .same_as = EQ_DUMP_SAME_AS_MAPPED, .same_file = 0, .same_entry = kept}};
    EQ_EXPECT(eq_dump_server_mappable(s, 0, kept), "t_fp32 not mappable");
    EQ_EXPECT_OK(eq_dump_server_reserve(s, 0, 1));
    EQ_EXPECT_OK(eq_dump_server_send(s, req, 2));
    EQ_EXPECT_OK(eq_dump_server_wait(s));
    EQ_EXPECT(req[0].data != NULL, "the kept copy was not mapped");
    if (req[0].data != NULL) { /* the mapped bytes are the tensor's */
        eq_capture whole;
        EQ_EXPECT_OK(eq_dump_read(paths[0], &whole));
        EQ_EXPECT(memcmp(req[0].data, whole.entries[kept].tensor.data, eq_tensor_bytes(&whole.entries[kept].tensor)) ==
                      0, "the mapped t_fp32 is not its data");
        eq_capture_free(&whole);
    }
    same = req[1].same;
    eq_dump_server_release(s, 0);
    eq_dump_server_close(s);
    eq_capture_free(&index[0]);
    eq_capture_free(&index[1]);
    return same;
}

/* 3. Replica checks against a mapped copy. */
static void test_replicas(const char *path, const char *twin, const char *flipped)
{
    setenv("EQUIV_READ_MAP_MB", "0", 1);
    const char *same_files[2] = {path, twin}, *flipped_files[2] = {path, flipped};
    EQ_EXPECT(replica_same(same_files, "t_fp32") == 1, "a mapped replica of the same bytes said to differ");
    EQ_EXPECT(replica_same(same_files, "big_endian") == 1,
              "the same values stored big-endian (read through HDF5, converted) said to differ");
    EQ_EXPECT(replica_same(flipped_files, "t_fp32") == 0, "one element changed, and the replica said the same");
    unsetenv("EQUIV_READ_MAP_MB");
}

/* 4. Files larger than half the memory are read, not mapped (eq_dump_files_outgrow). */
static void test_outgrow(void)
{
    const double gib = (double)(1 << 30);
    EQ_EXPECT(!eq_dump_files_outgrow(1.6 * 2 * gib / 2, 24 * gib), "a 1.6 GB run on 24 GiB is mapped");
    EQ_EXPECT(!eq_dump_files_outgrow(12 * gib, 24 * gib), "half the memory exactly is mapped");
    EQ_EXPECT(eq_dump_files_outgrow(12 * gib + 1, 24 * gib), "over half the memory is read");
    EQ_EXPECT(eq_dump_files_outgrow(16 * gib, 24 * gib), "a 16 GB run on 24 GiB is read");
    EQ_EXPECT(!eq_dump_files_outgrow(16 * gib, 0.0), "an unknown memory size maps");
}

/* 5. A file cut short under its map: in a child, which maps t_fp32, truncates the file and reads. */
static void test_cut_short(const char *path)
{
    int err[2];
    EQ_EXPECT(pipe(err) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(err[1], STDERR_FILENO);
        close(err[0]);
        eq_file_map m;
        eq_dump_file *f = NULL;
        eq_capture index;
        if (eq_dump_open(path, &f, &index) != EQ_OK) _exit(10);
        const int e = entry_of(&index, "t_fp32");
        const int64_t at = eq_dump_entry_offset(f, e);
        const size_t bytes = eq_tensor_bytes(&index.entries[e].tensor);
        int fd = open(path, O_RDONLY);
        if (at < 0 || fd < 0 || eq_file_map_open(fd, path, (uint64_t)at, bytes, &m) != EQ_OK) _exit(11);
        if (truncate(path, 0) != 0) _exit(12);
        volatile unsigned char sum = 0;
        for (size_t i = 0; i < bytes; i++) sum += ((const unsigned char *)m.data)[i];
        _exit(13); /* read a file of 0 bytes without a fault */
    }
    close(err[1]);
    char text[4096] = {0};
    size_t n = 0;
    for (ssize_t got; n + 1 < sizeof text && (got = read(err[0], text + n, sizeof text - 1 - n)) > 0;) n += (size_t)got;
    close(err[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    EQ_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status %s %d, want exit 2",
              WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    char escaped[512];
    eq_escape_line(escaped, sizeof escaped, path);
    EQ_EXPECT(strncmp(text, "equiv: error: ", 14) == 0 && strstr(text, escaped) != NULL &&
                  strstr(escaped, "cut\\nshort") != NULL && strstr(text, "cut short") != NULL &&
                  strchr(text, '\n') == text + n - 1,
              "stderr '%s': want one line naming %s", text, path);
}

int main(void)
{
    char dir[] = "/tmp/equiv_file_map_XXXXXX", path[256], twin[256], flipped[256], doomed[256];
    EQ_EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/rank0.h5", dir);
    snprintf(twin, sizeof twin, "%s/rank1.h5", dir);
    snprintf(flipped, sizeof flipped, "%s/flipped.h5", dir);
    snprintf(doomed, sizeof doomed, "%s/cut\nshort.h5", dir); /* a newline the line must escape */
    write_dump(path, -1);
    write_dump(twin, -1);
    write_dump(flipped, ROWS * COLS - 7);
    write_dump(doomed, -1);
    test_stored_offsets(path);
    test_reader_maps(path);
    test_replicas(path, twin, flipped);
    test_outgrow();
    test_cut_short(doomed);
    unlink(path), unlink(twin), unlink(flipped), unlink(doomed), rmdir(dir);
    return eq_test_finish("file_map_test");
}
