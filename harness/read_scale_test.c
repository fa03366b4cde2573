/* Reading at scale (issue 30): a valid file of 100,000 scalar datasets (40 MB, the densest a valid
 * file gets: harness/read_scale_fixtures.h) is read whole under the reader's default limits, not
 * called damaged, every dataset found by its path; a run of 300 rank files is assembled. Checks
 * what comes back, never how fast: the times are read_bench's (meson test --benchmark). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/base/testing.h"
#include "harness/read_scale_fixtures.h"
#include "harness/run_load.h"

#define N_DATASETS 100000
#define N_RANKS 300

int main(void)
{
    char dir[] = "/tmp/equiv_read_scale_XXXXXX", path[256], ranks_dir[256];
    EQ_EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/scalars.h5", dir);
    snprintf(ranks_dir, sizeof ranks_dir, "%s/ranks", dir);
    unsetenv("EQUIV_READ_TIMEOUT_S"); /* the defaults: what a user gets */
    unsetenv("EQUIV_READ_MEMORY_MB");

    /* 1. 100,000 datasets: read, in the file's order, each found by its path */
    EQ_EXPECT(write_scalars_file(path, N_DATASETS), "cannot write %s", path);
    eq_capture cap;
    eq_status st = eq_run_load(path, &cap);
    EQ_EXPECT(st == EQ_OK, "a valid file of %d datasets was refused: %s", N_DATASETS, eq_error_message());
    eq_error_clear();
    EQ_EXPECT(cap.count == N_DATASETS, "%d datasets read, want %d", cap.count, N_DATASETS);
    int misplaced = 0, unfound = 0;
    for (int i = 0; i < cap.count; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%06d", i);
        const eq_capture_entry *e = eq_capture_find(&cap, name);
        misplaced += strcmp(cap.entries[i].path, name) != 0 || eq_tensor_get(&cap.entries[i].tensor, 0) != 0.5 * i;
        unfound += e != &cap.entries[i];
    }
    EQ_EXPECT(misplaced == 0 && unfound == 0, "%d datasets out of place or wrong, %d not found by path", misplaced,
              unfound);
    EQ_EXPECT(eq_capture_find(&cap, "t100000") == NULL && eq_capture_find(&cap, "") == NULL, "found a path not there");
    eq_capture_free(&cap);

    /* 2. 300 rank files: x assembled in rank order, w and the loss as every rank holds them */
    EQ_EXPECT(mkdir(ranks_dir, 0700) == 0, "mkdir %s", ranks_dir);
    EQ_EXPECT(write_rank_files(ranks_dir, N_RANKS), "cannot write the rank files");
    st = eq_run_load(ranks_dir, &cap);
    EQ_EXPECT(st == EQ_OK, "a run of %d rank files was refused: %s", N_RANKS, eq_error_message());
    eq_error_clear();
    const eq_capture_entry *x = eq_capture_find(&cap, "x"), *w = eq_capture_find(&cap, "w");
    EQ_EXPECT(cap.count == 3 && x != NULL && w != NULL && cap.n_findings == 0, "%d tensors, %d findings", cap.count,
              cap.n_findings);
    if (x != NULL && w != NULL) {
        EQ_EXPECT(eq_tensor_numel(&x->tensor) == 2 * N_RANKS && eq_tensor_numel(&w->tensor) == 3, "x of %lld values",
                  (long long)eq_tensor_numel(&x->tensor));
        int wrong = 0;
        for (int64_t i = 0; i < eq_tensor_numel(&x->tensor) && i < 2 * N_RANKS; i++)
            wrong += eq_tensor_get(&x->tensor, i) != (double)(i / 2) + 0.5 * (double)(i % 2);
        EQ_EXPECT(wrong == 0, "%d values of x out of place", wrong);
    }
    eq_capture_free(&cap);

    for (int r = 0; r < N_RANKS; r++) {
        char rank_path[512];
        snprintf(rank_path, sizeof rank_path, "%s/rank%05d.h5", ranks_dir, r);
        unlink(rank_path);
    }
    rmdir(ranks_dir);
    unlink(path);
    rmdir(dir);
    return eq_test_finish("read_scale_test");
}
