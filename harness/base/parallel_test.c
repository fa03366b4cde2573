/* eq_parallel_for covers [0, n) exactly once, for any worker count, and degrades to the caller. */
#include <stdlib.h>

#include "harness/base/parallel.h"
#include "harness/base/testing.h"

typedef struct {
    int *hits;
} cover_ctx;

static void mark(void *ctx, int64_t begin, int64_t end)
{
    cover_ctx *c = ctx;
    for (int64_t i = begin; i < end; i++) c->hits[i]++;
}

static void check_cover(int64_t n, int64_t grain)
{
    int *hits = calloc((size_t)(n > 0 ? n : 1), sizeof *hits);
    cover_ctx c = {hits};
    eq_parallel_for(n, grain, mark, &c);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += hits[i] != 1;
    EQ_EXPECT(bad == 0, "n=%lld grain=%lld: %lld items not covered exactly once", (long long)n, (long long)grain,
              (long long)bad);
    free(hits);
}

/* The slot form: the same cover, and each slot names one range of one call (per-worker scratch). */
typedef struct {
    int *hits;
    int slot_used[16];
} slot_ctx;

static void mark_slot(void *ctx, int slot, int64_t begin, int64_t end)
{
    slot_ctx *c = ctx;
    if (slot >= 0 && slot < 16) __atomic_fetch_add(&c->slot_used[slot], 1, __ATOMIC_RELAXED);
    else __atomic_fetch_add(&c->slot_used[0], 100, __ATOMIC_RELAXED); /* out of range: counted as a clash */
    for (int64_t i = begin; i < end; i++) c->hits[i]++;
}

static void check_slots(int64_t n, int64_t grain)
{
    slot_ctx c = {calloc((size_t)(n > 0 ? n : 1), sizeof(int)), {0}};
    eq_parallel_for_slots(n, grain, mark_slot, &c);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += c.hits[i] != 1;
    int clashes = 0;
    for (int s = 0; s < 16; s++) clashes += c.slot_used[s] > 1 || (s >= eq_parallel_workers() && c.slot_used[s]);
    EQ_EXPECT(bad == 0 && clashes == 0, "slots n=%lld grain=%lld: %lld items not covered once, %d slots misused",
              (long long)n, (long long)grain, (long long)bad, clashes);
    free(c.hits);
}

int main(void)
{
    setenv("EQUIV_THREADS", "7", 1); /* more workers than this machine may have: uneven ranges */
    EQ_EXPECT(eq_parallel_workers() == 7, "EQUIV_THREADS=7 gave %d workers", eq_parallel_workers());
    const int64_t sizes[] = {0, 1, 7, 100, 4095, 4096, 8193, 100003};
    const int64_t grains[] = {0, 1, 3, 4096};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
            check_cover(sizes[s], grains[g]);
            check_slots(sizes[s], grains[g]);
        }
    return eq_test_finish("parallel_test");
}
