/* Where a run's wall time goes: a per-process table of monotonic seconds and entry counts per
 * phase, and the FLOPs of the GEMMs, for `equiv bench` (harness/driver/cmd_bench.c).
 *
 * Off unless EQUIV_PHASE_TIMES=PATH is set when eq_phase_times_start() runs (main does, once);
 * then eq_phase_times_finish() writes the table to PATH as JSON (below). Off, an enter/leave
 * pair is one load and one branch each.
 *
 * What each phase holds (the code between its enter and leave):
 *   inputs       eq_rng_fill_normal: the counter-based normals of inputs and weights;
 *   gemm         a backend's GEMM call (models/backend_cpu.c cpu_gemm_nt, with the bf16
 *                widening and rounding) and eq_gemm's operand transposes (models/gemm.c);
 *   collectives  eq_all_reduce, eq_reduce_scatter, eq_all_gather, eq_broadcast
 *                (reductions/collectives.h), the ring or tree fold included;
 *   bound        eq_rounding_bounds_apply: the rounding-bound table, its fp64 GEMMs included;
 *   compare      eq_compare_captures_by_role and eq_truth_apply: the statistics per tensor;
 *   dumps        eq_dump_write and eq_dump_read (HDF5);
 *   report       the reports, on standard output and under --out (harness/driver/commands.c);
 * and whatever else the process does is "other" (startup, model code between GEMMs, softmax,
 * LayerNorm, frees), found by the reader as wall time minus the phases.
 *
 * Nesting: the outermost phase wins. A phase entered while another is open (on the thread that
 * started the table) adds nothing to its own time or count; its time is the outer phase's. So the
 * phases never overlap and their times sum to at most the process's wall time. Only the thread
 * that called eq_phase_times_start() times phases (a phase entered on a worker thread is inside
 * whatever that thread's caller is in). GEMM FLOPs (2 M N K per call) are counted for every
 * backend GEMM, on any thread and at any depth.
 *
 * Each phase also accumulates the process's CPU time (all threads, CLOCK_PROCESS_CPUTIME_ID)
 * while it is open: the GEMM share of CPU time.
 *
 * BLAS time: apart from the phases, every GEMM library call (OpenBLAS's sgemm, dgemm), on any
 * thread and in any phase (the model's GEMMs and the rounding bound's), adds the CPU time of its
 * calling thread (CLOCK_THREAD_CPUTIME_ID) to "blas_cpu_seconds": what `perf` would attribute to
 * the BLAS library. equiv's runs call OpenBLAS with one thread per call (their blocks are the
 * threads), so the calling thread's CPU time is the call's. (The fp64 bound of dumps compared on
 * their own may run OpenBLAS's threads: then only the calling thread's share is counted.)
 *
 * The file: {"wall_s": S, "gemm_flops": F, "blas_cpu_seconds": B, "phases": {"inputs": {"seconds": S, "cpu_seconds": C,
 * "count": N}, ...}} with every phase present, written once: by a command that succeeded just
 * before its report goes to standard output and --out is moved into place (so an unwritable table
 * fails the command whole; harness/driver/commands.h eq_cmd_finish), else at exit. */
#ifndef EQUIV_HARNESS_BASE_PHASE_TIME_H
#define EQUIV_HARNESS_BASE_PHASE_TIME_H

#include <stdint.h>

#include "harness/base/status.h"

typedef enum {
    EQ_PHASE_INPUTS,
    EQ_PHASE_GEMM,
    EQ_PHASE_COLLECTIVES,
    EQ_PHASE_BOUND,
    EQ_PHASE_COMPARE,
    EQ_PHASE_DUMPS,
    EQ_PHASE_REPORT,
    EQ_PHASE_COUNT
} eq_phase;

/* "inputs", "gemm", ... as in the file. */
const char *eq_phase_name(eq_phase p);

/* Nonzero while a table is being kept (EQUIV_PHASE_TIMES was set at start). */
extern int eq_phase_times_on;

/* The opaque mark an enter returns and its leave takes (0: nothing to account). */
typedef int64_t eq_phase_mark;

eq_phase_mark eq_phase_enter_slow(eq_phase p);
void eq_phase_leave_slow(eq_phase p, eq_phase_mark mark);
void eq_phase_add_gemm_flops_slow(int64_t M, int64_t N, int64_t K);
int64_t eq_phase_blas_enter_slow(void);
void eq_phase_blas_leave_slow(int64_t mark);

/*     eq_phase_mark mark = eq_phase_enter(EQ_PHASE_BOUND);
 *     ... the phase's work ...
 *     eq_phase_leave(EQ_PHASE_BOUND, mark);          (on every path out) */
static inline eq_phase_mark eq_phase_enter(eq_phase p) { return eq_phase_times_on ? eq_phase_enter_slow(p) : 0; }
static inline void eq_phase_leave(eq_phase p, eq_phase_mark mark)
{
    if (mark != 0) eq_phase_leave_slow(p, mark);
}
static inline void eq_phase_add_gemm_flops(int64_t M, int64_t N, int64_t K)
{
    if (eq_phase_times_on) eq_phase_add_gemm_flops_slow(M, N, K);
}

/* Around one BLAS GEMM call, on any thread:
 *     const int64_t blas = eq_phase_blas_enter();
 *     eq_openblas.sgemm(...);
 *     eq_phase_blas_leave(blas); */
static inline int64_t eq_phase_blas_enter(void) { return eq_phase_times_on ? eq_phase_blas_enter_slow() : 0; }
static inline void eq_phase_blas_leave(int64_t mark)
{
    if (mark != 0) eq_phase_blas_leave_slow(mark);
}

/* Reads EQUIV_PHASE_TIMES; with it set (and not empty), starts the table on the calling thread.
 * (Under --comm mpi every rank would write the same path: a table is for one-process runs.) */
void eq_phase_times_start(void);
/* Writes the table to EQUIV_PHASE_TIMES (when on). A failure to write is an EQ_ERR_IO. */
eq_status eq_phase_times_finish(void);

#endif
