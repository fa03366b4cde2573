/* eq_parallel_for: contiguous ranges on short-lived pthreads (harness/base/parallel.h). */
#include "harness/base/parallel.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness/base/env.h"

#define MAX_WORKERS 16

int eq_parallel_workers(void)
{
    static int workers = 0; /* read once; a data race only if first calls race, and they agree */
    if (workers == 0) {
        double threads = 0.0;
        long n = eq_env_number(EQ_ENV_THREADS, &threads) ? (long)threads : sysconf(_SC_NPROCESSORS_ONLN);
        workers = n < 1 ? 1 : n > MAX_WORKERS ? MAX_WORKERS : (int)n;
    }
    return workers;
}

typedef struct {
    eq_slot_range_fn fn;
    void *ctx;
    int slot;
    int64_t begin, end;
} range_job;

static void *run_range(void *arg)
{
    range_job *r = arg;
    r->fn(r->ctx, r->slot, r->begin, r->end);
    return NULL;
}

void eq_parallel_for_slots(int64_t n, int64_t grain, eq_slot_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t by_size = n / grain;
    int workers = by_size < 2 ? 1 : by_size < eq_parallel_workers() ? (int)by_size : eq_parallel_workers();
    if (workers == 1) {
        fn(ctx, 0, 0, n);
        return;
    }
    range_job jobs[MAX_WORKERS];
    pthread_t threads[MAX_WORKERS];
    for (int w = 0; w < workers; w++) jobs[w] = (range_job){fn, ctx, w, n * w / workers, n * (w + 1) / workers};
    int started = 0;
    for (; started < workers - 1; started++)
        if (pthread_create(&threads[started], NULL, run_range, &jobs[started + 1]) != 0) break;
    run_range(&jobs[0]);
    for (int w = started + 1; w < workers; w++) run_range(&jobs[w]); /* threads that did not start */
    for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
}

/* eq_parallel_for through the slot form: the plain range function, carried in the context. */
typedef struct {
    eq_range_fn fn;
    void *ctx;
} plain_range;

static void run_plain(void *ctx, int slot, int64_t begin, int64_t end)
{
    (void)slot;
    const plain_range *p = ctx;
    p->fn(p->ctx, begin, end);
}

void eq_parallel_for(int64_t n, int64_t grain, eq_range_fn fn, void *ctx)
{
    plain_range p = {fn, ctx};
    eq_parallel_for_slots(n, grain, run_plain, &p);
}
