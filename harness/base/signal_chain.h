/* Handlers for the signals that end a run from outside (SIGINT, SIGTERM, SIGHUP) that do their part
 * and then let the signal end the process as it would have without them: the handler armed before
 * (another part of equiv's), or the default action. Used by the --out cleanup (harness/driver/out_dir.c)
 * and the MPI watch (reductions/mpi_watch.c), which chain: whichever is armed later runs first.
 *
 *   static eq_signal_chain chain;
 *   static void on_signal(int sig, siginfo_t *info, void *ctx)
 *   { ...; eq_signal_chain_pass_on(&chain, sig, info, ctx); }
 *   eq_signal_chain_arm(&chain, on_signal);
 *
 * The handler before gets the signal as it came (its sender's pid in info->si_pid), not a copy this
 * process raised: the MPI watch tells its launcher's signal from anyone else's by that pid.
 * A signal ignored when arming (nohup's SIGHUP) stays ignored. */
#ifndef EQUIV_HARNESS_BASE_SIGNAL_CHAIN_H
#define EQUIV_HARNESS_BASE_SIGNAL_CHAIN_H

#include <signal.h>

#define EQ_SIGNAL_CHAIN_N 3

typedef struct {
    struct sigaction previous[EQ_SIGNAL_CHAIN_N];
    int armed[EQ_SIGNAL_CHAIN_N];
} eq_signal_chain;

/* The signals, for masks: SIGINT, SIGTERM, SIGHUP. */
extern const int eq_signal_chain_signals[EQ_SIGNAL_CHAIN_N];

/* Installs handler (SA_SIGINFO, the three blocked while it runs) for each signal not yet armed here
 * and not ignored. */
void eq_signal_chain_arm(eq_signal_chain *c, void (*handler)(int sig, siginfo_t *info, void *context));
/* From inside the handler: restores the previous action of sig; a handler there is called with
 * the signal's own info and context, the default action is raised again (delivered when the
 * handler returns). Async-signal-safe. */
void eq_signal_chain_pass_on(eq_signal_chain *c, int sig, siginfo_t *info, void *context);
/* Restores every previous action. */
void eq_signal_chain_disarm(eq_signal_chain *c);

#endif
