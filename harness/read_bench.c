/* Benchmark (meson test --benchmark, or build/read_bench): the time `equiv compare` takes to load
 * one run (eq_run_load: every file read in the isolated reader, rank files assembled) of files as
 * another writer makes them (harness/read_scale_fixtures.h): one file of 10,000, 30,000 and
 * 100,000 scalar datasets, and directories of 1,000 and 10,000 rank files. Linear reading shows
 * as a time per dataset or per file that stays the same down the table. Asserts nothing about
 * speed; exit status 1 only when a run is not read. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/base/clock.h"
#include "harness/read_scale_fixtures.h"
#include "harness/run_load.h"

static double megabytes(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (double)sb.st_size / (1 << 20) : 0.0;
}

/* Loads path, prints the line; 0 when it was read. */
static int time_load(const char *path, const char *what, int units, const char *unit, double mb)
{
    eq_capture cap;
    const double t0 = eq_monotonic_seconds();
    eq_status st = eq_run_load(path, &cap);
    const double took = eq_monotonic_seconds() - t0;
    if (st != EQ_OK) {
        printf("%-28s not read: %s\n", what, eq_error_message());
        eq_error_clear();
        return 1;
    }
    printf("%-28s %8.1f MB  %7.2f s  %6.1f us a %s\n", what, mb, took, 1e6 * took / units, unit);
    eq_capture_free(&cap);
    return 0;
}

int main(void)
{
    static const int datasets[] = {10000, 30000, 100000}, ranks[] = {1000, 10000};
    char dir[] = "/tmp/equiv_read_bench_XXXXXX", path[512], what[64];
    int failed = 0;
    if (mkdtemp(dir) == NULL) return 1;
    printf("eq_run_load, one run (equiv compare reads two)\n");
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/scalars%d.h5", dir, datasets[k]);
        if (!write_scalars_file(path, datasets[k])) return 1;
        snprintf(what, sizeof what, "%d scalar datasets", datasets[k]);
        failed |= time_load(path, what, datasets[k], "dataset", megabytes(path));
        unlink(path);
    }
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/ranks%d", dir, ranks[k]);
        if (mkdir(path, 0700) != 0 || !write_rank_files(path, ranks[k])) return 1;
        char one[600];
        snprintf(one, sizeof one, "%s/rank00000.h5", path);
        snprintf(what, sizeof what, "%d rank files", ranks[k]);
        failed |= time_load(path, what, ranks[k], "file", ranks[k] * megabytes(one));
        for (int r = 0; r < ranks[k]; r++) {
            snprintf(one, sizeof one, "%s/rank%05d.h5", path, r);
            unlink(one);
        }
        rmdir(path);
    }
    rmdir(dir);
    return failed;
}
