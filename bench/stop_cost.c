/* What it costs to stop and restart a job's ranks on this host, for gang
 * scheduling (issue 43, docs/plans/issue-43-stopping.md): SIGSTOP/SIGCONT,
 * the cgroup v1 freezer, the cgroup v2 freezer, and two cooperative rules
 * (a rank parks itself on a futex gate in shared memory; a signal whose
 * handler parks it). The ranks are plain C processes forked by this
 * program, as the node manager forks its ranks (each its own process
 * group, bound to CPU i % ncpu). bench/stop_cost.sh runs every mode.
 *
 *   stop_cost switch [-r 1,2,4] [-k SWITCHES] [-q QUANTUM_US] [-m METHODS] [-o] [-c MS]
 *       Two jobs A and B of N busy ranks per method; every quantum the
 *       running job is stopped and the other one restarted, as at a
 *       quantum's end. The methods take turns in 10 rounds, so that they
 *       share the machine's changing load. Per switch: the NM's time and
 *       CPU to issue the stop and the restart; with confirmation (without
 *       -o) the time until the outgoing ranks are confirmed stopped (each
 *       method's own confirmation) before the restart; and, seen by the
 *       ranks themselves (each records the pauses of its own clock): how
 *       long an outgoing rank still ran after the switch (run-on) and when
 *       the first and the last incoming rank ran again. -c: the CPU a
 *       stopped rank uses over MS while the other job runs.
 *   stop_cost block [-r ...] [-k N] [-m ...]
 *       One job whose ranks are blocked in FUTEX_WAIT (a rank blocked in
 *       MPI): stop until confirmed, then restart until confirmed.
 *   stop_cost wake [-r ...] [-k N]
 *       The cooperative restart alone: N ranks parked on one futex, one
 *       FUTEX_WAKE, until each has run.
 *   stop_cost setup [-r ...] [-k N]
 *       One-time freezer costs: mkdir a job's cgroup, move N ranks in, move
 *       them out, rmdir (v1 and v2).
 *   stop_cost probe
 *       Interactions: SIGKILL of a stopped rank, re-stopping a stopped job,
 *       what a parent sees (waitpid, waitid, pidfd, SIGCHLD, and the NM's
 *       /proc scan on each SIGCHLD), a rank stopped inside a pipe write,
 *       EINTR, a wake-up sent while stopped, children of ranks, CMA from a
 *       stopped rank, a non-root node manager (as root only).
 *   Everywhere: -f puts this program's thread (the NM) at SCHED_FIFO 1, as
 *   bcs-sr is when it may; -n NICE and -s SLICE_US set the ranks' nice and
 *   EEVDF custom slice. STOP_COST_POLL_US (default 10) is the sleep between
 *   two reads of a polled confirmation.
 *
 * Methods: sigstop (kill each rank; confirmed by waitid(WSTOPPED) as their
 * parent), sigstop-proc (kill; confirmed by reading /proc/PID/stat for
 * 'T'), pgrp (one kill(-pgid) for the job; waitid(P_PGID)), freezer (v1
 * freezer.state; read back until FROZEN), freezer2 (v2 cgroup.freeze;
 * cgroup.events read until "frozen 1"), coop (a gate word the rank checks;
 * FUTEX_WAKE to restart; the rank wakes the NM when it parks), sigpark
 * (SIGUSR2, whose handler parks on the gate). Cgroups are named
 * bcs-stopcost-PID-*; every cgroup and process this program makes is
 * removed before it exits (also on SIGINT, SIGTERM, SIGHUP and SIGPIPE),
 * and bench/stop_cost.sh removes what a killed one left.
 *
 * This file is main (the options, the mode run); the helpers, the ranks and
 * jobs, the modes and the probes are in stop_cost_*.c, and stop_cost.h says
 * which part owns what. */
#define _GNU_SOURCE
#include "stop_cost.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* ---------------------------------------------------------------- main */

static int parse_list(const char* s, int* out, int max) {
  int n = 0;
  for (const char* p = s; *p && n < max;) {
    out[n++] = atoi(p);
    p = strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return n;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: stop_cost switch|block|wake|setup|probe [-r 1,2,4] [-k N] [-q US] "
            "[-m METHOD,...] [-c MS] [-o] [-n NICE] [-f] [-s SLICE_US]\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  prctl(PR_SET_TIMERSLACK, 1); /* short sleeps mean what they say */
  if (getenv("STOP_COST_POLL_US")) g_poll_us = (uint64_t)atol(getenv("STOP_COST_POLL_US"));
  g_ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (g_ncpu < 1) g_ncpu = 1;
  for (int m = 0; m < M_N; ++m) g_methods[g_nmethods++] = m;
  int opt;
  optind = 2;
  while ((opt = getopt(argc, argv, "r:k:q:m:c:on:fs:")) != -1) {
    switch (opt) {
      case 'r':
        g_nranks = parse_list(optarg, g_ranks, 4);
        for (int i = 0; i < g_nranks; ++i)
          if (g_ranks[i] < 1 || g_ranks[i] > MAXR) return fprintf(stderr, "1..%d ranks\n", MAXR), 2;
        break;
      case 'k':
        g_k = atoi(optarg);
        break;
      case 'q':
        g_q_us = (uint64_t)atol(optarg);
        break;
      case 'c':
        g_cpu_ms = (uint64_t)atol(optarg);
        break;
      case 'o':
        g_overlap = 1;
        break;
      case 's': /* the ranks' custom slice, us */
        g_slice_us = (uint64_t)atol(optarg);
        break;
      case 'n': /* the ranks' nice */
        g_nice = atoi(optarg);
        break;
      case 'f': { /* the NM's switching thread at SCHED_FIFO 1, as bcs-sr when permitted */
        struct sched_param sp = {.sched_priority = 1};
        if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) != 0)
          fprintf(stderr, "stop_cost: SCHED_FIFO refused (%s): the NM thread stays normal\n",
                  strerror(errno));
        else
          g_fifo = 1;
        break;
      }
      case 'm': {
        g_nmethods = 0;
        char* s = strdup(optarg);
        for (char* t = strtok(s, ","); t; t = strtok(NULL, ",")) {
          int found = 0;
          for (int m = 0; m < M_N; ++m)
            if (strcmp(t, mname[m]) == 0) g_methods[g_nmethods++] = m, found = 1;
          if (!found) return fprintf(stderr, "unknown method %s\n", t), 2;
        }
        free(s);
        break;
      }
      default:
        return 2;
    }
  }
  if (g_k < 1) g_k = 1;
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sigaction(SIGPIPE, &sa, NULL); /* (stdout closed under us: clean up too) */
  const char* mode = argv[1];
  if (strcmp(mode, "switch") == 0)
    mode_switch();
  else if (strcmp(mode, "block") == 0)
    mode_block();
  else if (strcmp(mode, "wake") == 0)
    mode_wake();
  else if (strcmp(mode, "setup") == 0)
    mode_setup();
  else if (strcmp(mode, "probe") == 0)
    mode_probe();
  else
    return fprintf(stderr, "unknown mode %s\n", mode), 2;
  cleanup();
  return 0;
}
