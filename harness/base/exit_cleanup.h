/* What a process must undo however it ends, also where the end bypasses main's cleanup: the MPI
 * watchdog thread's _exit (reductions/mpi_watch.c), MPI_Abort (reductions/world.c), a signal.
 * The part that made something registers how to remove it (harness/driver/out_dir.c: the --out
 * private folder and the --out folders it created), the part that ends the process runs it:
 *
 *   eq_exit_cleanup_set(remove_my_folder);    // when made; NULL once it is committed or removed
 *   eq_exit_cleanup_run();                    // just before _exit or MPI_Abort
 *
 * The function must be async-signal-safe (system calls only) and harmless to run twice or from
 * two threads at once: a signal handler may run it while the watchdog does. One slot: a second
 * registration replaces the first (one --out is open at a time). */
#ifndef EQUIV_HARNESS_BASE_EXIT_CLEANUP_H
#define EQUIV_HARNESS_BASE_EXIT_CLEANUP_H

typedef void (*eq_exit_cleanup_fn)(void);

/* Registers fn (NULL: nothing to do). */
void eq_exit_cleanup_set(eq_exit_cleanup_fn fn);
/* Runs the registered function, if any. Async-signal-safe. */
void eq_exit_cleanup_run(void);

#endif
