/* The per-process phase table of harness/base/phase_time.h. */
#include "harness/base/phase_time.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <jansson.h>

int eq_phase_times_on;

static const char *const phase_names[EQ_PHASE_COUNT] = {
    [EQ_PHASE_INPUTS] = "inputs", [EQ_PHASE_GEMM] = "gemm",       [EQ_PHASE_COLLECTIVES] = "collectives",
    [EQ_PHASE_BOUND] = "bound",   [EQ_PHASE_COMPARE] = "compare", [EQ_PHASE_DUMPS] = "dumps",
    [EQ_PHASE_REPORT] = "report",
};

static struct {
    const char *path;
    int64_t start_ns;
    int64_t ns[EQ_PHASE_COUNT];    /* outermost wall time per phase */
    int64_t cpu_ns[EQ_PHASE_COUNT]; /* the process's CPU time (every thread) during those */
    int64_t open_cpu_ns;           /* the process's CPU time when the open outermost phase began */
    int64_t count[EQ_PHASE_COUNT]; /* outermost entries per phase */
    int depth;                     /* phases open on the timing thread */
    _Atomic int64_t gemm_flops;
    _Atomic int64_t blas_cpu_ns;   /* thread CPU time inside BLAS GEMM calls, every thread */
} table;

static _Thread_local int is_timing_thread;

const char *eq_phase_name(eq_phase p) { return p >= 0 && p < EQ_PHASE_COUNT ? phase_names[p] : "unknown"; }

static int64_t clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

/* The mark: 0 on another thread (nothing to do on leave), -1 nested (leave only closes it), else
 * the start time in ns (a monotonic clock is never 0 or negative). */
eq_phase_mark eq_phase_enter_slow(eq_phase p)
{
    (void)p;
    if (!is_timing_thread) return 0;
    if (table.depth++ > 0) return -1;
    table.open_cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    return now_ns();
}

void eq_phase_leave_slow(eq_phase p, eq_phase_mark mark)
{
    table.depth--;
    if (mark < 0) return;
    table.ns[p] += now_ns() - mark;
    table.cpu_ns[p] += clock_ns(CLOCK_PROCESS_CPUTIME_ID) - table.open_cpu_ns;
    table.count[p]++;
}

void eq_phase_add_gemm_flops_slow(int64_t M, int64_t N, int64_t K)
{
    atomic_fetch_add_explicit(&table.gemm_flops, 2 * M * N * K, memory_order_relaxed);
}

/* The calling thread's CPU time, at least 1 (0 means "nothing to account" to the leave). */
int64_t eq_phase_blas_enter_slow(void)
{
    const int64_t t = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    return t > 0 ? t : 1;
}

void eq_phase_blas_leave_slow(int64_t mark)
{
    atomic_fetch_add_explicit(&table.blas_cpu_ns, clock_ns(CLOCK_THREAD_CPUTIME_ID) - mark, memory_order_relaxed);
}

void eq_phase_times_start(void)
{
    const char *path = getenv("EQUIV_PHASE_TIMES");
    if (path == NULL || path[0] == '\0') return;
    table.path = path;
    table.start_ns = now_ns();
    is_timing_thread = 1;
    eq_phase_times_on = 1;
}

eq_status eq_phase_times_finish(void)
{
    if (!eq_phase_times_on) return EQ_OK;
    eq_phase_times_on = 0;
    eq_status st = EQ_OK;
    json_t *root = json_object(), *phases = json_object();
    int bad = root == NULL || phases == NULL;
    bad |= json_object_set_new(root, "wall_s", json_real((double)(now_ns() - table.start_ns) * 1e-9));
    bad |= json_object_set_new(root, "gemm_flops", json_integer(atomic_load(&table.gemm_flops)));
    bad |= json_object_set_new(root, "blas_cpu_seconds", json_real((double)atomic_load(&table.blas_cpu_ns) * 1e-9));
    for (int p = 0; p < EQ_PHASE_COUNT; p++) {
        json_t *one = json_object();
        bad |= one == NULL;
        bad |= json_object_set_new(one, "seconds", json_real((double)table.ns[p] * 1e-9));
        bad |= json_object_set_new(one, "cpu_seconds", json_real((double)table.cpu_ns[p] * 1e-9));
        bad |= json_object_set_new(one, "count", json_integer(table.count[p]));
        bad |= json_object_set_new(phases, phase_names[p], one);
    }
    bad |= json_object_set(root, "phases", phases);
    if (bad) {
        st = EQ_FAIL(EQ_ERR_NOMEM, "phase times: no memory for the table");
        goto cleanup;
    }
    if (json_dump_file(root, table.path, JSON_INDENT(2)) != 0)
        st = EQ_FAIL(EQ_ERR_IO, "cannot write the phase times to %s (EQUIV_PHASE_TIMES)", table.path);
cleanup:
    json_decref(phases);
    json_decref(root);
    return st;
}
