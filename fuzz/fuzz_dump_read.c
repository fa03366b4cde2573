/* libFuzzer harness: HDF5 dumps, as `equiv compare` reads them.
 *
 * Default: eq_run_load (harness/run_load.h) on the input as a one-file run, the path `compare`
 * takes. It reads the file in a child process (harness/dump_read_isolated.h), so a file that
 * crashes, hangs or bloats libhdf5 must come back as an error: a finding is a crash, hang or leak
 * in equiv's own code around the read (the message from the child, the capture sent back).
 *
 * EQ_FUZZ_IN_PROCESS: the same load with the reader (eq_dump_read) in this process, so the
 * coverage of dump_read.c, dump_read_root.c and run_load.c guides the fuzzer. libhdf5 1.10
 * crashes inside the library on damaged files within seconds there, which no code of ours can
 * prevent: run it with -fork and -ignore_crashes and triage by the top frames (fuzz/README.md).
 *
 * Either way no HDF5 object may stay open after a load: a leaked file id would also make HDF5
 * hand the next input the previous file's cached state. */
#include <hdf5.h>
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz/fuzz_file.h"
#include "harness/dump.h"
#include "harness/run_load.h"

const char *__asan_default_options(void);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A damaged file can make libhdf5 ask for gigabytes. Under ASan the isolated reader sets no
 * address-space limit on its child, so a request over 2 GB fails (NULL, as malloc may return)
 * instead: the reader then reports an error and the machine keeps its memory. (ASAN_OPTIONS in
 * the environment still overrides these.) */
const char *__asan_default_options(void) { return "max_allocation_size_mb=2048:allocator_may_return_null=1"; }

/* A reader child is a copy of this process, libFuzzer's crash handlers included: a crash there
 * would write a crash-* file as if the fuzzer had found one, though the reader in the parent
 * handles it. So the child dies plainly, and the parent alone decides what is a finding. */
static void plain_child(void)
{
    __sanitizer_set_death_callback(NULL);
    static const int deadly[] = {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    for (size_t i = 0; i < sizeof deadly / sizeof deadly[0]; i++) signal(deadly[i], SIG_DFL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* Under the fuzzer's own -timeout (10 s in the suite): the isolated reader's wall-clock limit
     * (30 s or more by default) must end a hung child first. Unused where the read is in-process. */
    setenv("EQUIV_READ_TIMEOUT_S", "3", 0);
    pthread_atfork(NULL, NULL, plain_child);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = eq_fuzz_file(0, "input.h5", data, size);
    eq_capture cap;
#ifdef EQ_FUZZ_IN_PROCESS
    (void)eq_run_load_with(path, eq_dump_read, &cap);
#else
    (void)eq_run_load(path, &cap);
#endif
    eq_capture_free(&cap); /* empty after a failure; the sanitizers' leak check covers the rest */
    if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) > 0) __builtin_trap(); /* an HDF5 id leaked */
    eq_error_clear(); /* the first error is kept until cleared: each input starts clean */
    return 0;
}
