/* The --out folder, written all or nothing.
 *
 * A command writes its files (dumps, reports, comment.md, matrix.*) into a private folder inside
 * --out, ".equiv-tmp.HOST.PID.XXXXXX" (mkdtemp: mode 0700, a name no one can plant beforehand), and
 * moves them into place only when the whole command succeeded:
 *
 *   eq_out out;
 *   EQ_TRY(eq_out_open(&out, cli->out_dir));        // NULL dir: nothing is written, calls are no-ops
 *   EQ_TRY(eq_out_path(&out, "report.md", path, sizeof path));
 *   ... write path ...
 *   EQ_TRY(eq_out_commit(&out));                     // every file moved into --out
 * cleanup:
 *   eq_out_discard(&out);                            // after a commit: nothing left to do
 *
 * - A failure discards the private folder (and --out itself, if this command created it).
 * - SIGINT, SIGTERM and SIGHUP discard it too, then end the process as the signal would have (a
 *   handler installed before, e.g. the MPI transport's, is called after). So does an end that
 *   skips main's cleanup, through harness/base/exit_cleanup.h: the MPI watchdog's _exit when a
 *   collective outlasts its limit, MPI_Abort. A handler on another thread than the one committing
 *   waits for the commit to end (then nothing is left to remove: the whole set is in --out).
 * - A run killed outright (SIGKILL, power) leaves its private folder: the next command writing to
 *   that --out removes the private folders whose process (same host) is gone, and the ".NAME.tmp.*"
 *   files older equivs left.
 * - The commit holds an exclusive lock (flock) on --out while it moves the files, so two commands
 *   writing to one --out at once each leave a whole set, the later one's, never a mix. Moving is
 *   rename(2): a symlink planted at a final name is replaced, never followed; a folder there is an
 *   error before anything moves. */
#ifndef EQUIV_HARNESS_DRIVER_OUT_DIR_H
#define EQUIV_HARNESS_DRIVER_OUT_DIR_H

#include <stddef.h>

#include "harness/base/status.h"

typedef struct {
    char dir[4096];  /* --out; "" when nothing is written */
    char temp[4200]; /* the private folder inside it; "" once committed or discarded */
    char (*names)[256];
    int n_names, cap_names;
    int created_dirs; /* folders this command created: --out and its missing parents (a failure removes them again) */
} eq_out;

/* Creates --out and its missing parents unless it exists, cleans the temporaries of dead runs,
 * creates the private folder and arms the signal handlers. dir NULL: an inactive eq_out. */
eq_status eq_out_open(eq_out *out, const char *dir);
/* Whether files are written at all. */
int eq_out_active(const eq_out *out);
/* Where to write the file `name` (a plain file name, no '/'): its path in the private folder. */
eq_status eq_out_path(eq_out *out, const char *name, char *path, size_t len);
/* Moves every file into --out under the lock, removes the private folder, disarms the handlers. */
eq_status eq_out_commit(eq_out *out);
/* Removes the private folder and what is in it (and --out, if created here and empty). Safe after
 * commit and on a zeroed eq_out. */
void eq_out_discard(eq_out *out);

#endif
