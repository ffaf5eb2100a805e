/* store_signal.c — SIGINT/SIGTERM handlers for a recording process (store.h). Promise: the handler
 * only stores the signal number (async-signal-safe); a second signal restores the default action
 * and re-raises it, so a stuck process can still be stopped. The library never exits. */
#include <signal.h>
#include <string.h>
#include "error.h"
#include "store.h"

static volatile sig_atomic_t received;

static void on_signal(int sig)
{
    if (received) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    received = sig;
}

int fp_store_install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return fp_fail(FP_EINTERNAL, "cannot install the SIGINT/SIGTERM handlers");
    return FP_OK;
}

int fp_store_signalled(void)
{
    return (int)received;
}
