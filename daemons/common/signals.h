// Termination signals of the daemons, taken synchronously (sigwait or a
// signalfd) rather than by handlers.
#pragma once

#include <signal.h>

namespace bcs {

// SIGTERM, SIGINT and SIGHUP.
inline sigset_t termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// Blocks them in the calling thread and every thread it creates afterwards
// (children reset the mask before exec), and ignores SIGPIPE: a closed
// socket or pipe is an error return, not a death.
inline sigset_t block_termination_signals() {
  sigset_t set = termination_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return set;
}

}  // namespace bcs
