/* Reading a dump in a child process (harness/dump_read_isolated.h): what comes back through the
 * pipe is the capture eq_dump_read gives in-process, bit for bit (meta, paths, shapes, data,
 * annotations); an error in the child comes back as the same message at the same place; a child
 * that runs past the deadline or the memory limit is one error naming the file; a non-regular
 * file is refused before any child starts. Many files read by one child (a run's rank files) come
 * back each as read in-process, and the first that fails is the error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/dump.h"
#include "harness/dump_read_isolated.h"
#include "harness/base/testing.h"

static void build(eq_capture *cap, int64_t big_rows)
{
    eq_capture_init(cap);
    snprintf(cap->meta.case_name, sizeof cap->meta.case_name, "isolated");
    snprintf(cap->meta.model, sizeof cap->meta.model, "row_parallel");
    snprintf(cap->meta.kernel, sizeof cap->meta.kernel, "ordered C");
    cap->meta.dtype = EQ_FP32;
    cap->meta.dp = 1;
    cap->meta.tp = 2;
    const eq_dtype dtypes[3] = {EQ_FP32, EQ_BF16, EQ_FP64};
    for (int i = 0; i < 3; i++) {
        eq_tensor t;
        EQ_EXPECT_OK(eq_tensor_init_2d(&t, dtypes[i], i == 0 ? big_rows : 3, 5));
        for (int64_t k = 0; k < eq_tensor_numel(&t); k++) eq_tensor_set(&t, k, 0.25 * (double)(k % 97) - 3.0);
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        EQ_EXPECT_OK(eq_capture_add(cap, i, name, i == 2 ? EQ_ROLE_GRAD : EQ_ROLE_ACTIVATION, &t));
    }
    cap->entries[1].grad_scale = 4.0;
}

static void expect_same(const eq_capture *a, const eq_capture *b)
{
    EQ_EXPECT(memcmp(&a->meta, &b->meta, sizeof a->meta) == 0, "meta differs");
    EQ_EXPECT(a->count == b->count, "%d tensors vs %d", a->count, b->count);
    for (int i = 0; i < a->count && i < b->count; i++) {
        const eq_capture_entry *x = &a->entries[i], *y = &b->entries[i];
        EQ_EXPECT(strcmp(x->path, y->path) == 0 && strcmp(x->name, y->name) == 0 && x->layer == y->layer &&
                      x->role == y->role && x->grad_scale == y->grad_scale,
                  "entry %d: %s vs %s", i, x->path, y->path);
        EQ_EXPECT(x->tensor.dtype == y->tensor.dtype && x->tensor.ndim == y->tensor.ndim &&
                      memcmp(x->tensor.shape, y->tensor.shape, sizeof x->tensor.shape) == 0,
                  "entry %d: dtype or shape differs", i);
        EQ_EXPECT(eq_tensor_bytes(&x->tensor) == eq_tensor_bytes(&y->tensor) &&
                      memcmp(x->tensor.data, y->tensor.data, eq_tensor_bytes(&x->tensor)) == 0,
                  "entry %d: data differs", i);
    }
}

static void expect_error(eq_status st, const char *part, const char *what)
{
    EQ_EXPECT(st == EQ_ERR_INPUT, "%s: status %d (%s)", what, (int)st, eq_error_message());
    EQ_EXPECT(strstr(eq_error_message(), part) != NULL, "%s: message '%s' lacks '%s'", what, eq_error_message(), part);
    eq_error_clear();
}

int main(void)
{
    char dir[] = "/tmp/equiv_isolated_XXXXXX", path[256], bad[256];
    EQ_EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/run.h5", dir);
    snprintf(bad, sizeof bad, "%s/missing_attr.h5", dir);

    /* 0. past the memory limit (not under AddressSanitizer, which maps terabytes). Checked first,
     * with the file written by another process: the limit is on what the reader maps beyond what
     * it inherits, and memory this process had freed would be inherited free. */
#if !defined(__SANITIZE_ADDRESS__)
    char big[256];
    snprintf(big, sizeof big, "%s/big.h5", dir);
    pid_t writer = fork();
    if (writer == 0) {
        eq_capture cap;
        build(&cap, 800000);
        _exit(eq_dump_write(big, &cap) == EQ_OK ? 0 : 1);
    }
    int wstatus = 0;
    waitpid(writer, &wstatus, 0);
    EQ_EXPECT(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0, "writing %s failed", big);
    setenv("EQUIV_READ_MEMORY_MB", "0.5", 1);
    eq_capture limited;
    eq_status st = eq_dump_read_isolated(big, &limited);
    EQ_EXPECT(st == EQ_ERR_INPUT && strstr(eq_error_message(), "MB") != NULL,
              "a 16 MB tensor under a 0.5 MB limit: status %d, '%s'", (int)st, eq_error_message());
    eq_error_clear();
    unsetenv("EQUIV_READ_MEMORY_MB");
    unlink(big);
#endif

    /* 1. the same capture either way (a 16 MB tensor: far more than a pipe buffer) */
    eq_capture written, direct, isolated;
    build(&written, 800000);
    EQ_EXPECT_OK(eq_dump_write(path, &written));
    EQ_EXPECT_OK(eq_dump_read(path, &direct));
    EQ_EXPECT_OK(eq_dump_read_isolated(path, &isolated));
    expect_same(&direct, &isolated);
    eq_capture_free(&direct);
    eq_capture_free(&isolated);

    /* 2. equiv's own error in the child: the same message, at the same place */
    eq_capture broken;
    build(&broken, 4);
    broken.meta.dp = 0; /* written as is, refused by the reader: "root attribute dp = 0" */
    EQ_EXPECT_OK(eq_dump_write(bad, &broken));
    eq_capture_free(&broken);
    char message[512], where[128];
    EQ_EXPECT(eq_dump_read(bad, &direct) == EQ_ERR_INPUT, "the in-process read accepted dp = 0");
    snprintf(message, sizeof message, "%s", eq_error_message());
    snprintf(where, sizeof where, "%s", eq_error_where());
    eq_error_clear();
    EQ_EXPECT(eq_dump_read_isolated(bad, &isolated) == EQ_ERR_INPUT, "the isolated read accepted it");
    EQ_EXPECT(strcmp(eq_error_message(), message) == 0, "message '%s', in-process '%s'", eq_error_message(), message);
    EQ_EXPECT(strcmp(eq_error_where(), where) == 0, "place '%s', in-process '%s'", eq_error_where(), where);
    eq_error_clear();

    /* 3. past the deadline: killed, one error naming the file */
    setenv("EQUIV_READ_TIMEOUT_S", "0.000001", 1);
    expect_error(eq_dump_read_isolated(path, &isolated), "took over", "deadline");
    EQ_EXPECT(isolated.count == 0, "a capture came back from a killed reader");
    unsetenv("EQUIV_READ_TIMEOUT_S");

    /* 4. many files in one reader: each the capture read in-process; the first that fails named,
     * with its own message, and nothing handed back */
    {
        char cut[256];
        snprintf(cut, sizeof cut, "%s/cut.h5", dir);
        FILE *in = fopen(path, "rb"), *out = fopen(cut, "wb");
        char head[4096];
        size_t got = in != NULL ? fread(head, 1, sizeof head, in) : 0;
        EQ_EXPECT(out != NULL && got == sizeof head && fwrite(head, 1, got, out) == got, "cannot write %s", cut);
        if (in != NULL) fclose(in);
        if (out != NULL) fclose(out);
        snprintf(bad, sizeof bad, "%s/missing_attr.h5", dir);
        const char *three[3] = {path, path, path};
        eq_capture many[3];
        EQ_EXPECT_OK(eq_dump_read_isolated_many(three, 3, many));
        EQ_EXPECT_OK(eq_dump_read(path, &direct));
        for (int i = 0; i < 3; i++) {
            expect_same(&direct, &many[i]);
            EQ_EXPECT(eq_capture_find(&many[i], "layers/02/t2") == &many[i].entries[2], "file %d: t2 not found", i);
            eq_capture_free(&many[i]);
        }
        eq_capture_free(&direct);
        const char *second_bad[3] = {path, bad, path}, *third_cut[3] = {path, path, cut};
        EQ_EXPECT(eq_dump_read_isolated_many(second_bad, 3, many) == EQ_ERR_INPUT, "dp = 0 in the second file accepted");
        EQ_EXPECT(strcmp(eq_error_message(), message) == 0, "message '%s', in-process '%s'", eq_error_message(), message);
        eq_error_clear();
        EQ_EXPECT(many[0].count == 0 && many[1].count == 0 && many[2].count == 0, "captures handed back on an error");
        expect_error(eq_dump_read_isolated_many(third_cut, 3, many), "cut.h5 is not a readable HDF5 dump", "cut");
        const char *with_folder[2] = {path, dir};
        expect_error(eq_dump_read_isolated_many(with_folder, 2, many), "not a regular file", "a folder among files");
        setenv("EQUIV_READ_TIMEOUT_S", "0.000001", 1);
        expect_error(eq_dump_read_isolated_many(three, 3, many), "took over", "deadline of many");
        unsetenv("EQUIV_READ_TIMEOUT_S");
        unlink(cut);
    }

    /* 5. not a regular file, and a missing one */
    expect_error(eq_dump_read_isolated(dir, &isolated), "not a regular file", "a folder");
    expect_error(eq_dump_read_isolated("/dev/zero", &isolated), "not a regular file", "/dev/zero");
    snprintf(bad, sizeof bad, "%s/none.h5", dir);
    expect_error(eq_dump_read_isolated(bad, &isolated), "no such file", "a missing file");

    eq_capture_free(&written);
    eq_capture_free(&direct);
    snprintf(bad, sizeof bad, "%s/missing_attr.h5", dir);
    unlink(bad);
    unlink(path);
    rmdir(dir);
    return eq_test_finish("dump_read_isolated_test");
}
