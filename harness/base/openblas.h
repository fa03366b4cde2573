/* OpenBLAS, opened on first use.
 *
 * equiv does not link OpenBLAS: it loads it with dlopen, once, after setting the two variables
 * OpenBLAS reads in its constructor when it is loaded (a linked OpenBLAS reads them before main,
 * so equiv used to set them and re-execute itself, loading OpenBLAS twice; `equiv --list`, which
 * never uses it, took 21 ms of CPU, now 9):
 * - OPENBLAS_CORETYPE, the kernels. Debian's 0.3.21 does not recognise AVX-512 on newer AMD CPUs
 *   and picks its AVX2 (Haswell) kernels, which are slower and, as the column_parallel case shows,
 *   not invariant to how the output is split: a GEMM over a slice of N or M may round differently
 *   from the full GEMM. The SKYLAKEX kernels are invariant (checked by models/parallel_linear_test).
 *   So where the CPU has AVX-512 (F, BW, VL, DQ): SKYLAKEX, also over a value inherited from the
 *   environment. EQUIV_OPENBLAS_CORETYPE=NAME picks another core on purpose (e.g. Haswell, to see
 *   its kernels break column-parallel bit-exactness). Never AVX-512 on a CPU without it.
 * - OPENBLAS_NUM_THREADS=1, also over an inherited value: no thread pool at load. equiv threads its
 *   GEMMs itself, one single-threaded OpenBLAS call per block (models/backend_cpu.c), and a pool
 *   started at load only spins: each of its threads calls sched_yield for about 0.1 s before it
 *   sleeps (row_parallel --tp 4 on 2 cores: 0.085 s of CPU with the pool, 0.029 s without). A
 *   caller that wants OpenBLAS's own threads (`equiv bench`'s SGEMM peak) asks
 *   eq_openblas.set_num_threads(n), which starts them.
 * Both stay in the environment, for child processes.
 *
 * The library: EQUIV_OPENBLAS_LIBRARY=PATH (or a name for the loader's search path) when set, to
 * try another OpenBLAS build without rebuilding equiv; else the file meson found behind the
 * openblas dependency (EQUIV_OPENBLAS_PATH, equiv_config.h), else its SONAME on the loader's search
 * path (LD_LIBRARY_PATH: how ci/gpu-bundle.sh's copy is found on a machine without the package).
 *
 * Where it is opened: by the code that calls OpenBLAS and returns a status, so that no GEMM call
 * site has a failure it cannot return: the CPU backend when it is chosen (models/backends.c, before
 * a run writes anything) and its kernel choice (models/backend_cpu.c, for programs that take the
 * backend directly), the rounding bound's products, `equiv bench`'s SGEMM peak. The functions in
 * eq_openblas are valid only after eq_openblas_open() has returned EQ_OK (NULL before). Opening
 * sets environment variables, so it should happen before the program starts threads that read the
 * environment; once done it costs one pthread_once check. */
#ifndef EQUIV_HARNESS_BASE_OPENBLAS_H
#define EQUIV_HARNESS_BASE_OPENBLAS_H

#include <cblas.h>

#include "harness/base/status.h"

/* The OpenBLAS functions equiv calls (types from cblas.h). */
typedef struct {
    __typeof__(&cblas_sgemm) sgemm;
    __typeof__(&cblas_dgemm) dgemm;
    __typeof__(&openblas_set_num_threads) set_num_threads;
    __typeof__(&openblas_get_corename) get_corename;
} eq_openblas_functions;

extern eq_openblas_functions eq_openblas;

/* Sets the environment above and loads the library, once per process (thread-safe); every call
 * returns the outcome of that once: EQ_OK, or EQ_ERR_BACKEND "cannot load OpenBLAS: DLERROR" (or
 * naming a missing function). */
eq_status eq_openblas_open(void);

/* The same, recording no error (for code that cannot return one): NULL once open, else why not. */
const char *eq_openblas_try_open(void);

/* The core equiv asks OpenBLAS for (the value it gives OPENBLAS_CORETYPE): EQUIV_OPENBLAS_CORETYPE
 * when set (set empty: NULL), else "SKYLAKEX" on a CPU with AVX-512 F, BW, VL and DQ, else NULL:
 * NULL leaves OPENBLAS_CORETYPE as inherited (OpenBLAS chooses when it is unset). */
const char *eq_openblas_wanted_core(void);

/* Loads `library` (a path or a name for the loader) and resolves the functions above into *out;
 * EQ_ERR_BACKEND with the loader's message when it cannot. eq_openblas_open's loader, apart for
 * tests of its errors: it sets no environment. */
eq_status eq_openblas_load(const char *library, eq_openblas_functions *out);

#endif
