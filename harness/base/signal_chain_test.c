/* Chained handlers (harness/base/signal_chain.h): the handler armed first sees the signal as it
 * came, its sender's pid included (not this process's own, as a raise() would make it), and the
 * process then ends as the signal ends it by default. Each case in a child process, signalled by
 * its parent. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/base/signal_chain.h"
#include "harness/base/testing.h"

static eq_signal_chain first, second;
static int report_fd = -1;

/* The handler armed first (the MPI watch's place): writes the sender's pid, then passes on. */
static void first_handler(int sig, siginfo_t *info, void *context)
{
    const int pid = info != NULL ? (int)info->si_pid : -1;
    if (write(report_fd, &pid, sizeof pid) != (ssize_t)sizeof pid) _exit(3);
    eq_signal_chain_pass_on(&first, sig, info, context);
}

/* The handler armed later (the --out cleanup's place): runs first, then passes on. */
static void second_handler(int sig, siginfo_t *info, void *context)
{
    eq_signal_chain_pass_on(&second, sig, info, context);
}

/* A child arms `chains` handlers (1: the first alone, 2: both), says so, and waits for sig from
 * the parent: the pid the first handler saw, and how the child ended. */
static void check_chain(int chains, int sig)
{
    int ready[2], report[2];
    if (pipe(ready) != 0 || pipe(report) != 0) {
        EQ_EXPECT(0, "pipe failed");
        return;
    }
    const pid_t child = fork();
    if (child == 0) {
        report_fd = report[1];
        memset(&first, 0, sizeof first);
        memset(&second, 0, sizeof second);
        eq_signal_chain_arm(&first, first_handler);
        if (chains == 2) eq_signal_chain_arm(&second, second_handler);
        char c = 'r';
        if (write(ready[1], &c, 1) != 1) _exit(3);
        for (;;) pause();
    }
    close(ready[1]);
    close(report[1]);
    char c = 0;
    EQ_EXPECT(read(ready[0], &c, 1) == 1, "the child never armed its handlers");
    kill(child, sig);
    int seen = 0, status = 0;
    EQ_EXPECT(read(report[0], &seen, sizeof seen) == (ssize_t)sizeof seen, "the first handler never ran");
    waitpid(child, &status, 0);
    EQ_EXPECT(seen == (int)getpid(), "%d handler(s), signal %d: the first handler saw pid %d as the sender, want "
              "the parent's %d (the child is %d)", chains, sig, seen, (int)getpid(), (int)child);
    EQ_EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == sig, "%d handler(s): the child ended with status 0x%x, "
              "want killed by signal %d", chains, status, sig);
    close(ready[0]);
    close(report[0]);
}

int main(void)
{
    for (int i = 0; i < EQ_SIGNAL_CHAIN_N; i++) {
        check_chain(1, eq_signal_chain_signals[i]);
        check_chain(2, eq_signal_chain_signals[i]);
    }
    return eq_test_finish("signal_chain_test");
}
