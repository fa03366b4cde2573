#include "harness/base/signal_chain.h"

#include <string.h>

const int eq_signal_chain_signals[EQ_SIGNAL_CHAIN_N] = {SIGINT, SIGTERM, SIGHUP};

void eq_signal_chain_arm(eq_signal_chain *c, void (*handler)(int sig, siginfo_t *info, void *context))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < EQ_SIGNAL_CHAIN_N; i++) sigaddset(&sa.sa_mask, eq_signal_chain_signals[i]);
    for (int i = 0; i < EQ_SIGNAL_CHAIN_N; i++) {
        struct sigaction now;
        const int sig = eq_signal_chain_signals[i];
        if (c->armed[i] || sigaction(sig, NULL, &now) != 0 || now.sa_handler == SIG_IGN) continue;
        if (sigaction(sig, &sa, &c->previous[i]) == 0) c->armed[i] = 1;
    }
}

void eq_signal_chain_pass_on(eq_signal_chain *c, int sig, siginfo_t *info, void *context)
{
    for (int i = 0; i < EQ_SIGNAL_CHAIN_N; i++) {
        if (eq_signal_chain_signals[i] != sig || !c->armed[i]) continue;
        const struct sigaction before = c->previous[i];
        sigaction(sig, &before, NULL);
        c->armed[i] = 0;
        /* raise() would make this process the sender: the handler before sees the real one */
        if ((before.sa_flags & SA_SIGINFO) && before.sa_sigaction != NULL) {
            before.sa_sigaction(sig, info, context);
            return;
        }
        if (!(before.sa_flags & SA_SIGINFO) && before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) {
            before.sa_handler(sig);
            return;
        }
    }
    raise(sig);
}

void eq_signal_chain_disarm(eq_signal_chain *c)
{
    for (int i = 0; i < EQ_SIGNAL_CHAIN_N; i++)
        if (c->armed[i]) {
            sigaction(eq_signal_chain_signals[i], &c->previous[i], NULL);
            c->armed[i] = 0;
        }
}
