/* stop_cost's measuring modes (see stop_cost.h): switch, block, wake and
 * setup, and the options they read. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stop_cost.h"

/* -------------------------------------------------------------- modes */

int g_k = 1000;
uint64_t g_q_us = 2000;
int g_ranks[4] = {1, 2, 4}, g_nranks = 3;
int g_methods[M_N], g_nmethods;
uint64_t g_cpu_ms = 1000;
int g_overlap;
int g_fifo;

int method_usable(int m) {
  if (m != M_FREEZER && m != M_FREEZER2) return 1;
  const char* root = m == M_FREEZER ? FREEZER1 : FREEZER2;
  char probe[300];
  snprintf(probe, sizeof probe, "%s/bcs-stopcost-%d-probe", root, (int)getpid());
  if (access(m == M_FREEZER ? FREEZER1 "/tasks" : FREEZER2 "/cgroup.procs", F_OK) != 0) {
    printf("%-12s skipped: %s is not mounted\n", mname[m], root);
    return 0;
  }
  if (make_cg(probe) != 0) {
    printf("%-12s skipped: cannot make a cgroup under %s (%s)\n", mname[m], root, strerror(errno));
    return 0;
  }
  char f[340];
  snprintf(f, sizeof f, "%s/%s", probe, m == M_FREEZER ? "freezer.state" : "cgroup.freeze");
  const int ok = access(f, W_OK) == 0;
  remove_cg(probe);
  if (!ok) printf("%-12s skipped: %s is missing or not writable\n", mname[m], f);
  return ok;
}

/* How long, in us, the rank ran between a and b: b - a less its gaps in
 * between. (A rank that was preempted before the stop and parks the
 * moment it runs again has run ~0, however late that moment is.) */
static double ran_between(Slot* s, uint64_t a, uint64_t b) {
  const uint32_t n = atomic_load_explicit(&s->ngap, memory_order_acquire);
  uint64_t idle = 0;
  for (uint32_t k = 0; k < NGAP - 16 && k < n; ++k) {
    const Gap* g = &s->gap[(n - 1 - k) % NGAP];
    uint64_t f = atomic_load_explicit(&g->from, memory_order_relaxed);
    uint64_t e = atomic_load_explicit(&g->to, memory_order_relaxed);
    if (f < a) f = a;
    if (e > b) e = b;
    if (e > f) idle += e - f;
  }
  return (double)(b - a - (idle < b - a ? idle : b - a)) / 1e3;
}

/* One method's gang: two jobs, the samples, and where it stands. */
typedef struct {
  int m, ok;
  Job job[2];
  size_t s; /* switches done */
  uint64_t t_prev;
  double* v[7];
  size_t ni, nr, nro, late, fails;
  double ru;
} Gang;

/* `count` switches of gang g, starting with job[s % 2] running. */
static void gang_run(Gang* g, size_t count, int n) {
  const double ru0 = rusage_us();
  for (size_t c = 0; c < count && !g_quit; ++c, ++g->s) {
    Job* out = &g->job[g->s % 2];
    Job* in = &g->job[(g->s + 1) % 2];
    const uint64_t t0 = now_ns(), c0 = cpu_ns();
    m_stop(out);
    const uint64_t t1 = now_ns();
    uint64_t t2 = t1;
    if (!g_overlap) {
      if (m_confirm(out, 1)) ++g->fails;
      t2 = now_ns();
    }
    m_resume(in);
    const uint64_t t3 = now_ns(), c3 = cpu_ns();
    g->v[0][g->ni] = (double)(t1 - t0) / 1e3;
    g->v[1][g->ni] = (double)(t2 - t0) / 1e3;
    g->v[2][g->ni] = (double)(t3 - t2) / 1e3;
    g->v[3][g->ni] = (double)(c3 - c0) / 1e3;
    ++g->ni;
    sleep_until(t0 + g_q_us * 1000u);
    /* The incoming job's ranks: their gap spanning t0 began when they
     * stopped (after the previous switch, t_prev) and ended when they ran
     * again. The first switch of a batch has no previous one. */
    double rmax = 0, rmin = 1e18, omax = 0;
    int missing = 0;
    for (int i = 0; i < n; ++i) {
      uint64_t f, e;
      if (!gap_at(&in->sh->r[i], t0, &f, &e)) {
        missing = 1;
        continue;
      }
      const double r = (double)(e - t0) / 1e3;
      rmax = r > rmax ? r : rmax;
      rmin = r < rmin ? r : rmin;
      const double o = g->t_prev && f > g->t_prev ? ran_between(&in->sh->r[i], g->t_prev, f) : 0;
      omax = o > omax ? o : omax;
    }
    if (missing) { /* counted as the whole quantum: at least that */
      ++g->late;
      rmax = (double)g_q_us;
      if (rmin > rmax) rmin = rmax;
    }
    g->v[4][g->nr] = rmax;
    g->v[5][g->nr] = rmin;
    ++g->nr;
    if (g->t_prev) g->v[6][g->nro++] = omax;
    g->t_prev = t0;
  }
  g->ru += rusage_us() - ru0;
}

/* Both jobs of g stopped, confirmed (between its batches). */
static void gang_park(Gang* g) {
  Job* running = &g->job[g->s % 2];
  if (!g_overlap) {
    m_stop(running);
    m_confirm(running, 1);
    return;
  }
  m_stop(running);
  m_confirm(running, 1);
  /* The other one was stopped without confirmation: consume it too, so a
   * waitid-based confirmation later sees only new stops. */
  if (g->m == M_SIGSTOP || g->m == M_PGRP) {
    siginfo_t si;
    Job* o = &g->job[(g->s + 1) % 2];
    for (int i = 0; i < o->n; ++i) waitid(P_PID, (id_t)o->pid[i], &si, WSTOPPED | WNOHANG);
  }
}

void mode_switch(void) {
  const int rounds = g_k >= 100 ? 10 : 1;
  printf(
      "# switch: two jobs of N busy ranks (rank i of each on CPU i %% %d), the running one "
      "stopped\n"
      "# and the other restarted every %llu us, %d switches per method, the methods interleaved\n"
      "# in %d rounds (so they share the machine's changing load); %s\n",
      g_ncpu, (unsigned long long)g_q_us, g_k, rounds,
      g_overlap ? "OVERLAPPED: stop A and restart B at once, no confirmation"
                : "stop A, wait until it is confirmed stopped, then restart B");
  printf(
      "# us, median p99. stop = NM time to issue the stop; stopped = until confirmed; resume =\n"
      "# NM time to issue the restart; switch = from the quantum's end until every incoming rank\n"
      "# ran (first = the first one), seen by the ranks; run-on = how long an outgoing rank still\n"
      "# ran (its own clock, less its pauses) after the quantum's end; nm-cpu = the NM's CPU per "
      "switch (thread CPU clock; rusage =\n"
      "# getrusage(RUSAGE_SELF) over the switches / switches, sleeps included); late = switches "
      "where\n"
      "# an incoming rank had not run within the quantum (counted as the quantum); stopped-cpu = "
      "CPU\n"
      "# of a stopped rank over %llu ms while the other job runs (ns from schedstat, ticks from\n"
      "# /proc/PID/stat)\n",
      (unsigned long long)g_cpu_ms);
  printf("# the NM's thread: %s; the ranks: nice %d, slice %s\n",
         g_fifo ? "SCHED_FIFO 1" : "normal", g_nice,
         g_slice_us ? "short (custom)" : "the kernel's default");
  printf("%-12s %2s %15s %15s %15s %15s %15s %15s %15s %7s %4s %s\n", "method", "N", "stop",
         "stopped", "resume", "switch", "switch-first", "run-on", "nm-cpu", "rusage", "late",
         "stopped-cpu");
  const size_t K = (size_t)g_k;
  Gang* gs = calloc((size_t)g_nmethods, sizeof(Gang));
  int ng = 0;
  for (int mi = 0; mi < g_nmethods; ++mi) {
    if (!method_usable(g_methods[mi])) continue;
    gs[ng].m = g_methods[mi];
    for (int x = 0; x < 7; ++x) gs[ng].v[x] = calloc(K + 1, sizeof(double));
    ++ng;
  }
  for (int ri = 0; ri < g_nranks && !g_quit; ++ri) {
    const int n = g_ranks[ri];
    for (int x = 0; x < ng; ++x) {
      Gang* g = &gs[x];
      g->ok = 0;
      g->s = 0;
      g->t_prev = 0;
      g->ni = g->nr = g->nro = g->late = g->fails = 0;
      g->ru = 0;
      char na[16], nb[16];
      snprintf(na, sizeof na, "A%d", x);
      snprintf(nb, sizeof nb, "B%d", x);
      memset(&g->job[0], 0, sizeof(Job));
      memset(&g->job[1], 0, sizeof(Job));
      if (job_start(&g->job[0], n, W_BUSY, g->m, na) ||
          job_start(&g->job[1], n, W_BUSY, g->m, nb)) {
        printf("%-12s %2d failed to start\n", mname[g->m], n);
        job_kill(&g->job[0]);
        job_kill(&g->job[1]);
        continue;
      }
      g->ok = 1;
    }
    sleep_us(20000);
    for (int x = 0; x < ng; ++x) /* everybody stopped */
      if (gs[x].ok) {
        for (int k = 0; k < 2; ++k) {
          m_stop(&gs[x].job[k]);
          m_confirm(&gs[x].job[k], 1);
        }
      }
    for (int r = 0; r < rounds && !g_quit; ++r)
      for (int x = 0; x < ng && !g_quit; ++x) {
        Gang* g = &gs[x];
        if (!g->ok) continue;
        const size_t count = K / (size_t)rounds + (r == rounds - 1 ? K % (size_t)rounds : 0);
        /* job[s % 2] is stopped and about to be the outgoing one: run it
         * one quantum first */
        m_resume(&g->job[g->s % 2]);
        sleep_us(g_q_us);
        g->t_prev = 0;
        gang_run(g, count, n);
        gang_park(g);
      }
    for (int x = 0; x < ng && !g_quit; ++x) {
      Gang* g = &gs[x];
      if (!g->ok) continue;
      char cpu_s[64] = "-";
      if (g_cpu_ms > 0 && ri == 0) { /* a stopped rank's CPU, the other job running */
        Job* stopped = &g->job[0];
        Job* running = &g->job[1];
        m_resume(running);
        sleep_us(20000);
        uint64_t r0[MAXR];
        unsigned long k0[MAXR];
        for (int i = 0; i < n; ++i) r0[i] = run_ns(stopped->pid[i]), k0[i] = ticks(stopped->pid[i]);
        sleep_us(g_cpu_ms * 1000u);
        uint64_t worst = 0;
        unsigned long kw = 0;
        for (int i = 0; i < n; ++i) {
          const uint64_t d = run_ns(stopped->pid[i]) - r0[i];
          const unsigned long kd = ticks(stopped->pid[i]) - k0[i];
          worst = d > worst ? d : worst;
          kw = kd > kw ? kd : kw;
        }
        snprintf(cpu_s, sizeof cpu_s, "%llu ns, %lu ticks", (unsigned long long)worst, kw);
      }
      char s0[32], s1[32], s2[32], s3[32], s4[32], s5[32], s6[32];
      printf("%-12s %2d %s %s %s %s %s %s %s %7.1f %4zu %s%s\n", mname[g->m], n,
             mp(g->v[0], g->ni, s0), g_overlap ? "      -       -" : mp(g->v[1], g->ni, s1),
             mp(g->v[2], g->ni, s2), mp(g->v[4], g->nr, s4), mp(g->v[5], g->nr, s5),
             mp(g->v[6], g->nro, s6), mp(g->v[3], g->ni, s3), g->ni ? g->ru / (double)g->ni : 0,
             g->late, cpu_s, g->fails ? " (a confirmation timed out)" : "");
      fflush(stdout);
    }
    for (int x = 0; x < ng; ++x) {
      job_kill(&gs[x].job[0]);
      job_kill(&gs[x].job[1]);
    }
  }
  for (int x = 0; x < ng; ++x)
    for (int k = 0; k < 7; ++k) free(gs[x].v[k]);
  free(gs);
}

void mode_block(void) {
  printf(
      "# block: one job of N ranks blocked in FUTEX_WAIT (a rank blocked in MPI); %d rounds of\n"
      "# stop until confirmed, 200 us, restart until confirmed; us, median p99\n",
      g_k);
  printf("%-12s %2s %15s %15s %15s %15s %15s %15s\n", "method", "N", "stop-issue", "stop-done",
         "stop-cpu", "resume-issue", "resume-done", "resume-cpu");
  const size_t K = (size_t)g_k;
  double* v[6];
  for (int i = 0; i < 6; ++i) v[i] = calloc(K, sizeof(double));
  for (int mi = 0; mi < g_nmethods && !g_quit; ++mi) {
    const int m = g_methods[mi];
    if (m == M_COOP) {
      printf(
          "%-12s  - nothing to do: a rank blocked in MPI is parked already; the NM holds its"
          " completions\n",
          mname[m]);
      continue;
    }
    if (!method_usable(m)) continue;
    for (int ri = 0; ri < g_nranks; ++ri) {
      const int n = g_ranks[ri];
      Job a;
      if (job_start(&a, n, W_BLOCK, m, "blk")) {
        printf("%-12s %2d failed to start\n", mname[m], n);
        job_kill(&a);
        continue;
      }
      sleep_us(20000);
      size_t k = 0, fails = 0;
      for (; k < K && !g_quit; ++k) {
        const uint64_t t0 = now_ns(), c0 = cpu_ns();
        m_stop(&a);
        const uint64_t t1 = now_ns();
        fails += m_confirm(&a, 1) != 0;
        const uint64_t t2 = now_ns(), c2 = cpu_ns();
        sleep_us(200);
        const uint64_t t3 = now_ns(), c3 = cpu_ns();
        m_resume(&a);
        const uint64_t t4 = now_ns();
        fails += m_confirm(&a, 0) != 0;
        const uint64_t t5 = now_ns(), c5 = cpu_ns();
        v[0][k] = (double)(t1 - t0) / 1e3;
        v[1][k] = (double)(t2 - t0) / 1e3;
        v[2][k] = (double)(c2 - c0) / 1e3;
        v[3][k] = (double)(t4 - t3) / 1e3;
        v[4][k] = (double)(t5 - t3) / 1e3;
        v[5][k] = (double)(c5 - c3) / 1e3;
        sleep_us(200);
      }
      char s[6][32];
      printf("%-12s %2d %s %s %s %s %s %s%s\n", mname[m], n, mp(v[0], k, s[0]), mp(v[1], k, s[1]),
             mp(v[2], k, s[2]), mp(v[3], k, s[3]), mp(v[4], k, s[4]), mp(v[5], k, s[5]),
             fails ? " (a confirm timed out)" : "");
      fflush(stdout);
      job_kill(&a);
    }
  }
  for (int i = 0; i < 6; ++i) free(v[i]);
}

void mode_wake(void) {
  printf(
      "# wake: N ranks parked on one futex word, one FUTEX_WAKE (all), until each ran;\n"
      "# %d rounds, 500 us apart; us, median p99\n",
      g_k);
  printf("%-12s %2s %15s %15s %15s %15s %4s\n", "method", "N", "wake-call", "wake-cpu", "first-ran",
         "all-ran", "late");
  const size_t K = (size_t)g_k;
  double* v[4];
  for (int i = 0; i < 4; ++i) v[i] = calloc(K, sizeof(double));
  for (int ri = 0; ri < g_nranks && !g_quit; ++ri) {
    const int n = g_ranks[ri];
    Job a;
    if (job_start(&a, n, W_WAKE, M_COOP, "wake")) {
      job_kill(&a);
      continue;
    }
    sleep_us(20000);
    size_t k = 0, nr = 0, late = 0;
    for (; k < K && !g_quit; ++k) {
      const uint64_t t0 = now_ns(), c0 = cpu_ns();
      const uint32_t bell = atomic_fetch_add(&a.sh->bell, 1) + 1;
      futex_wake(&a.sh->bell);
      const uint64_t t1 = now_ns(), c1 = cpu_ns();
      v[0][k] = (double)(t1 - t0) / 1e3;
      v[1][k] = (double)(c1 - c0) / 1e3;
      sleep_until(t0 + 500000u);
      double lo = 1e18, hi = 0;
      int missing = 0;
      for (int i = 0; i < n; ++i) {
        if (atomic_load(&a.sh->r[i].ran) != bell) {
          missing = 1;
          continue;
        }
        const double d = (double)(atomic_load(&a.sh->r[i].woke_at) - t0) / 1e3;
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
      }
      if (missing) {
        ++late;
      } else {
        v[2][nr] = lo;
        v[3][nr] = hi;
        ++nr;
      }
    }
    char s[4][32];
    printf("%-12s %2d %s %s %s %s %4zu\n", "futex-wake", n, mp(v[0], k, s[0]), mp(v[1], k, s[1]),
           mp(v[2], nr, s[2]), mp(v[3], nr, s[3]), late);
    fflush(stdout);
    job_kill(&a);
  }
  for (int i = 0; i < 4; ++i) free(v[i]);
}

void mode_setup(void) {
  printf(
      "# setup: one-time freezer costs per job (N ranks blocked in FUTEX_WAIT), %d rounds; us,"
      " median p99\n",
      g_k);
  printf("%-12s %2s %15s %15s %15s %15s %15s\n", "method", "N", "mkdir", "move-in/rank",
         "move-out/rank", "rmdir", "total");
  const size_t K = (size_t)g_k;
  double* v[5];
  for (int i = 0; i < 5; ++i) v[i] = calloc(K * MAXR, sizeof(double));
  const int ms[2] = {M_FREEZER, M_FREEZER2};
  for (int x = 0; x < 2 && !g_quit; ++x) {
    const int m = ms[x];
    if (!method_usable(m)) continue;
    const char* root = m == M_FREEZER ? FREEZER1 : FREEZER2;
    for (int ri = 0; ri < g_nranks; ++ri) {
      const int n = g_ranks[ri];
      Job a;
      if (job_start(&a, n, W_BLOCK, M_COOP, "setup")) {
        job_kill(&a);
        continue;
      }
      char path[256];
      snprintf(path, sizeof path, "%s/bcs-stopcost-%d-setup", root, (int)getpid());
      size_t k = 0, ki = 0, ko = 0;
      for (; k < K && !g_quit; ++k) {
        const uint64_t t0 = now_ns();
        if (make_cg(path)) break;
        const uint64_t t1 = now_ns();
        for (int i = 0; i < n; ++i) {
          const uint64_t u = now_ns();
          write_pid(path, a.pid[i]);
          v[1][ki++] = (double)(now_ns() - u) / 1e3;
        }
        for (int i = 0; i < n; ++i) {
          const uint64_t u = now_ns();
          write_pid(root, a.pid[i]);
          v[2][ko++] = (double)(now_ns() - u) / 1e3;
        }
        const uint64_t t2 = now_ns();
        remove_cg(path);
        const uint64_t t3 = now_ns();
        v[0][k] = (double)(t1 - t0) / 1e3;
        v[3][k] = (double)(t3 - t2) / 1e3;
        v[4][k] = (double)(t3 - t0) / 1e3;
      }
      char s[5][32];
      printf("%-12s %2d %s %s %s %s %s\n", mname[m], n, mp(v[0], k, s[0]), mp(v[1], ki, s[1]),
             mp(v[2], ko, s[2]), mp(v[3], k, s[3]), mp(v[4], k, s[4]));
      fflush(stdout);
      job_kill(&a);
    }
  }
  for (int i = 0; i < 5; ++i) free(v[i]);
}
