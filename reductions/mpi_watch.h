/* The watch over a multi-process run (--comm mpi, and the MPI world --comm nccl bootstraps over):
 * every wait for other ranks is bounded, and when a rank stops, dies or is killed the job ends with
 * one line that names that rank, not one line per rank that waited for it.
 *
 * What each rank knows of the others (taken at the start, eq_mpi_watch_start): every rank's pid and
 * host, and, shared in memory by the ranks of one host, each one's state: running, waiting (and
 * since when), finished, or ending on a signal; plus one flag "the job's error line is out".
 *
 * - A wait (a collective, an agreement) that lasts longer than EQUIV_COLLECTIVE_TIMEOUT_S seconds
 *   (default 300; 0: no limit) ends the rank with exit status 2. Before it ends, its watchdog
 *   looks at the ranks of its host (/proc/PID/stat) for the one that did not arrive: stopped
 *   (state T: SIGSTOP, a debugger), gone without finishing (killed, crashed), exited, or running
 *   outside any wait (computing or hung), and names it: "equiv: error: rank 2 (pid 4242 on node7)
 *   is stopped ...". The first rank of the host to get there prints; the others end silently.
 *   Where no rank of its host is to blame (the missing rank runs on another host), it waits
 *   EQ_MPI_WATCH_GRACE_S more, so that the line from the missing rank's host comes first, then
 *   prints one line naming itself and the wait.
 * - Rank 0 working alone (the dp1-tp1 references, the comparisons, the reports) is not a
 *   collective: eq_mpi_watch_root_alone() makes rank 0's watchdog thread send the waiting ranks a
 *   sign of life every second (at most a quarter of the limit), and each one restarts their
 *   wait's clock. However long the references take, the others wait; when rank 0 stops or dies,
 *   the signs stop and its absence is reported within the limit as above. (They need MPI's
 *   MPI_THREAD_SERIALIZED, which reductions/world.c asks for; with less the wait keeps the plain
 *   limit.) A rank 0 whose process is alive but whose work never ends is not bounded, as a
 *   --comm sim run is not.
 * - A rank killed by a signal cannot speak; the launcher then ends the others with SIGTERM. Their
 *   handler (SIGTERM, SIGINT, SIGHUP) finds the rank of their host that is gone without having
 *   finished or been signalled itself, and the first of them prints "equiv: error: rank R (pid P
 *   on HOST) was killed by a signal or crashed". A rank sent such a signal by someone other than
 *   its launcher says so itself ("... was ended by SIGTERM from bash, pid 977"). The launcher's
 *   signal while the job runs, with no rank gone and no line out, means the launcher itself was
 *   interrupted or stopped: "equiv: error: the launcher (mpirun, pid 977) ended the job with
 *   SIGTERM to every rank while none had failed: ...". At the job's end (a rank finished) or with
 *   the line out it is silent. The handler then hands the signal on to the handler before it or
 *   the default action.
 * - However a rank ends, what it made goes first (harness/base/exit_cleanup.h: rank 0's --out
 *   private folder and the --out folders it created): the watchdog runs the cleanup before its
 *   _exit, the handler before anything else. The launcher kills every rank outright (SIGKILL) as
 *   soon as one has ended after its SIGTERM, so on its signal the other ranks of rank 0's host end
 *   only once rank 0 has handled it (or after 0.9 s: mpirun kills outright 1 s after its SIGTERM
 *   anyway). A rank 0 killed outright (kill -9, the OOM killer) leaves its private folder; the
 *   next run into that --out removes it (harness/driver/out_dir.h).
 *
 * One line per job on one host. Across hosts the flag is not shared: a host whose ranks cannot see
 * the missing one may add a line of its own, after the grace. */
#ifndef EQUIV_REDUCTIONS_MPI_WATCH_H
#define EQUIV_REDUCTIONS_MPI_WATCH_H

#include "equiv_config.h"
#include "harness/base/status.h"

#define EQ_MPI_WATCH_GRACE_S 2.0

#if EQUIV_HAVE_MPI
#include <mpi.h>

/* After MPI_Init, collective over `world` the first time (later calls only count users, as nested
 * worlds do): reads EQUIV_COLLECTIVE_TIMEOUT_S (EQ_ERR_USAGE if malformed), exchanges every rank's
 * pid and host, maps the host's shared states (falls back to this rank's own where the host has no
 * shared memory), installs the signal handlers and starts the watchdog thread. */
eq_status eq_mpi_watch_start(MPI_Comm world);
/* The last user: stops the watchdog thread (the handlers stay). After MPI_Finalize. */
void eq_mpi_watch_stop(void);

/* Around a blocking step that waits for other ranks: begin names it, end clears it. Not nested.
 * begin also ends rank 0's signs of life (eq_mpi_watch_root_alone): the main thread calls MPI
 * again. */
void eq_mpi_watch_begin(const char *what);
void eq_mpi_watch_end(void);

/* Every rank, after the steps they take together, when rank 0 goes on alone: rank 0's watchdog
 * starts sending signs of life. Until eq_mpi_watch_share_root_int, rank 0's main thread calls no
 * MPI function (eq_mpi_watch_begin ends the signs first). No-op on other ranks. */
void eq_mpi_watch_root_alone(void);
/* Rank 0's *value on every rank: rank 0 ends its signs of life and sends it; the others wait for
 * it, their clock restarted by each sign of life, and give the CPU back while they wait. */
eq_status eq_mpi_watch_share_root_int(int *value);
/* Rank 0 only: 1 while the others wait for eq_mpi_watch_share_root_int. */
int eq_mpi_watch_root_owes_share(void);

/* 1 if this rank is the one to print the job's error line (the first of its host to ask), 0 if a
 * line is out already. */
int eq_mpi_watch_claim_report(void);
/* This rank ends normally from now on (its exit is no failure). */
void eq_mpi_watch_finished(void);
#endif

#endif
