/* harness/base/phase_time.h: off without EQUIV_PHASE_TIMES (nothing kept, nothing written); on, a
 * phase nested in another adds nothing of its own (its time is the outer one's), a phase entered
 * on another thread adds nothing, every GEMM's 2 M N K FLOPs count wherever it ran, and the file
 * holds every phase. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "harness/base/clock.h"
#include "harness/base/phase_time.h"
#include "harness/base/testing.h"

static void busy_ms(int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) * 1e-6 < ms);
}

static void *worker(void *arg)
{
    (void)arg;
    const eq_phase_mark mark = eq_phase_enter(EQ_PHASE_COMPARE);
    busy_ms(20);
    eq_phase_leave(EQ_PHASE_COMPARE, mark);
    eq_phase_add_gemm_flops(3, 5, 7); /* 210 */
    return NULL;
}

static double phase_field(json_t *root, const char *phase, const char *field)
{
    return json_number_value(json_object_get(json_object_get(json_object_get(root, "phases"), phase), field));
}

int main(void)
{
    char path[] = "/tmp/phase_time_test.XXXXXX";
    const int fd = mkstemp(path);
    EQ_EXPECT(fd >= 0, "mkstemp");
    close(fd);

    /* Off: enter gives the no-op mark, finish writes nothing. */
    unsetenv("EQUIV_PHASE_TIMES");
    eq_phase_times_start();
    EQ_EXPECT(eq_phase_enter(EQ_PHASE_GEMM) == 0, "an enter while off gave a mark");
    EQ_EXPECT_OK(eq_phase_times_finish());
    FILE *fp = fopen(path, "r");
    EQ_EXPECT(fp != NULL && fgetc(fp) == EOF, "the table was written while off");
    if (fp) fclose(fp);

    setenv("EQUIV_PHASE_TIMES", path, 1);
    eq_phase_times_start();
    /* bound around a GEMM: at least the time inside both in bound, no GEMM time or entry, but
     * the GEMM's FLOPs. Times are bounded by readings of the same clock taken just inside (a
     * phase lasts at least that) or just outside (at most that) the phase. */
    eq_phase_mark outer = eq_phase_enter(EQ_PHASE_BOUND);
    const double bound_t0 = eq_monotonic_seconds();
    eq_phase_mark inner = eq_phase_enter(EQ_PHASE_GEMM);
    eq_phase_add_gemm_flops(2, 3, 4); /* 48 */
    busy_ms(30);
    eq_phase_leave(EQ_PHASE_GEMM, inner);
    const double bound_inside = eq_monotonic_seconds() - bound_t0;
    eq_phase_leave(EQ_PHASE_BOUND, outer);
    /* a GEMM alone, twice: two entries, their time and no more */
    double gemm_inside = 0.0, gemm_outside = 0.0;
    for (int i = 0; i < 2; i++) {
        const double t0 = eq_monotonic_seconds();
        inner = eq_phase_enter(EQ_PHASE_GEMM);
        const double t1 = eq_monotonic_seconds();
        eq_phase_add_gemm_flops(10, 10, 10); /* 2000 */
        busy_ms(5);
        const double t2 = eq_monotonic_seconds();
        eq_phase_leave(EQ_PHASE_GEMM, inner);
        gemm_inside += t2 - t1;
        gemm_outside += eq_monotonic_seconds() - t0;
    }
    /* another thread's phase: not timed, its FLOPs counted */
    pthread_t t;
    EQ_EXPECT(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    EQ_EXPECT_OK(eq_phase_times_finish());

    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    EQ_EXPECT(root != NULL, "the table does not parse: %s", err.text);
    EQ_EXPECT(json_number_value(json_object_get(root, "gemm_flops")) == 48 + 2 * 2000 + 210, "gemm_flops %g, want %d",
              json_number_value(json_object_get(root, "gemm_flops")), 48 + 2 * 2000 + 210);
    EQ_EXPECT(phase_field(root, "bound", "count") == 1, "bound count %g", phase_field(root, "bound", "count"));
    EQ_EXPECT(phase_field(root, "bound", "seconds") >= bound_inside, "bound %g s, want at least %g",
              phase_field(root, "bound", "seconds"), bound_inside);
    EQ_EXPECT(phase_field(root, "gemm", "count") == 2, "gemm count %g, want 2 (the nested one not counted)",
              phase_field(root, "gemm", "count"));
    const double gemm_s = phase_field(root, "gemm", "seconds");
    EQ_EXPECT(gemm_s >= gemm_inside && gemm_s <= gemm_outside, "gemm %g s, want the two GEMMs alone: %g .. %g", gemm_s,
              gemm_inside, gemm_outside);
    EQ_EXPECT(phase_field(root, "compare", "count") == 0 && phase_field(root, "compare", "seconds") == 0,
              "a worker thread's phase was timed");
    EQ_EXPECT(json_number_value(json_object_get(root, "wall_s")) >= bound_inside + gemm_inside, "wall_s %g",
              json_number_value(json_object_get(root, "wall_s")));
    for (int p = 0; p < EQ_PHASE_COUNT; p++)
        EQ_EXPECT(json_is_number(json_object_get(json_object_get(json_object_get(root, "phases"), eq_phase_name(p)),
                                                 "cpu_seconds")),
                  "phase %s missing", eq_phase_name(p));
    json_decref(root);
    unlink(path);
    return eq_test_finish("phase_time_test");
}
