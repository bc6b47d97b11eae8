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
 * and bench/stop_cost.sh removes what a killed one left. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXR 8
#define NGAP 256
#define GAP_NS 20000u /* a pause longer than this in a rank's loop is a gap */
#define FREEZER1 "/sys/fs/cgroup/freezer"
#define FREEZER2 "/sys/fs/cgroup/unified"

/* ------------------------------------------------------------ helpers */

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
static uint64_t cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
static void sleep_until(uint64_t t) {
  struct timespec ts = {(time_t)(t / 1000000000u), (long)(t % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}
static void sleep_us(uint64_t us) { sleep_until(now_ns() + us * 1000u); }
static long futex(_Atomic uint32_t* w, int op, uint32_t v, const struct timespec* ts) {
  return syscall(SYS_futex, (uint32_t*)w, op, v, ts, NULL, 0);
}
static void futex_wait(_Atomic uint32_t* w, uint32_t v) { futex(w, FUTEX_WAIT, v, NULL); }
static void futex_wake(_Atomic uint32_t* w) { futex(w, FUTEX_WAKE, INT_MAX, NULL); }
static int pidfd_open(pid_t p) { return (int)syscall(SYS_pidfd_open, p, 0); }

static int write_file(const char* path, const char* s) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n = write(fd, s, strlen(s));
  int e = n < 0 ? -errno : 0;
  close(fd);
  return e;
}
static int write_pid(const char* dir, pid_t p) {
  char path[320], s[32];
  snprintf(path, sizeof path, "%s/cgroup.procs", dir);
  snprintf(s, sizeof s, "%d", (int)p);
  return write_file(path, s);
}
static int read_fd(int fd, char* buf, size_t n) {
  ssize_t r = pread(fd, buf, n - 1, 0);
  buf[r > 0 ? r : 0] = 0;
  return (int)r;
}
/* The state letter of /proc/PID/stat, from an open fd. */
static char proc_state(int fd) {
  char b[512];
  if (read_fd(fd, b, sizeof b) <= 0) return '?';
  char* p = strrchr(b, ')');
  return p && p[1] ? p[2] : '?';
}
/* CPU time the process has run, ns (/proc/PID/schedstat), and utime+stime
 * in clock ticks (/proc/PID/stat fields 14 and 15). */
static uint64_t run_ns(pid_t pid) {
  char path[64], b[128];
  snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  read_fd(fd, b, sizeof b);
  close(fd);
  return strtoull(b, NULL, 10);
}
static unsigned long ticks(pid_t pid) {
  char path[64], b[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  read_fd(fd, b, sizeof b);
  close(fd);
  char* p = strrchr(b, ')');
  unsigned long ut = 0, st = 0;
  if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
  return ut + st;
}

static double rusage_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int cmp_d(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
/* "median p99" of v[0..n), in the units given. */
static char* mp(double* v, size_t n, char* out) {
  if (n == 0) {
    strcpy(out, "      -       -");
    return out;
  }
  qsort(v, n, sizeof *v, cmp_d);
  size_t i99 = (size_t)((double)n * 0.99);
  if (i99 >= n) i99 = n - 1;
  sprintf(out, "%7.1f %7.1f", v[(n - 1) / 2], v[i99]);
  return out;
}

/* ------------------------------------------------------- shared memory */

typedef struct {
  _Atomic uint64_t from, to;
} Gap;
typedef struct {
  _Atomic uint64_t progress;
  _Atomic uint32_t ngap;
  _Atomic uint32_t parked;  /* coop/sigpark: 1 while parked */
  _Atomic uint32_t ran;     /* wake: the bell value last seen */
  _Atomic uint64_t woke_at; /* wake: when it returned from the futex */
  _Atomic int64_t result;   /* probes */
  _Atomic int32_t result_errno;
  _Atomic uint32_t done;
  _Atomic int32_t kids[2]; /* probes: the rank's children */
  Gap gap[NGAP];
} __attribute__((aligned(128))) Slot;

typedef struct {
  _Atomic uint32_t gate __attribute__((aligned(128))); /* 1: park */
  _Atomic uint32_t bell __attribute__((aligned(128))); /* wake mode */
  _Atomic uint32_t block __attribute__((aligned(128)));
  _Atomic uint32_t waiting __attribute__((aligned(128)));
  Slot r[MAXR];
} Shm;

/* ---------------------------------------------------------- the ranks */

enum Work { W_BUSY, W_BLOCK, W_WAKE, W_PIPE, W_EPOLL, W_FUTEX_TO, W_FORK, W_WAITFLAG };

static Shm* g_sh;
static int g_idx;
static int g_pipe_fd = -1;

static void park_handler(int sig) {
  (void)sig;
  int e = errno;
  Slot* s = &g_sh->r[g_idx];
  atomic_store(&s->parked, 1);
  futex_wake(&s->parked); /* the NM may wait for it */
  while (atomic_load(&g_sh->gate) == 1) futex_wait(&g_sh->gate, 1);
  atomic_store(&s->parked, 0);
  futex_wake(&s->parked);
  errno = e;
}

static void busy_loop(Shm* sh, int i) {
  Slot* s = &sh->r[i];
  uint64_t prev = now_ns();
  for (;;) {
    if (atomic_load_explicit(&sh->gate, memory_order_relaxed) == 1) {
      atomic_store(&s->parked, 1);
      futex_wake(&s->parked); /* the NM may wait for it */
      while (atomic_load(&sh->gate) == 1) futex_wait(&sh->gate, 1);
      atomic_store(&s->parked, 0);
    }
    const uint64_t t = now_ns();
    if (t - prev > GAP_NS) {
      const uint32_t k = atomic_load_explicit(&s->ngap, memory_order_relaxed);
      atomic_store_explicit(&s->gap[k % NGAP].from, prev, memory_order_relaxed);
      atomic_store_explicit(&s->gap[k % NGAP].to, t, memory_order_relaxed);
      atomic_store_explicit(&s->ngap, k + 1, memory_order_release);
    }
    prev = t;
    atomic_store_explicit(&s->progress,
                          atomic_load_explicit(&s->progress, memory_order_relaxed) + 1,
                          memory_order_relaxed);
  }
}

static void rank_main(Shm* sh, int i, int work) {
  Slot* s = &sh->r[i];
  switch (work) {
    case W_BUSY:
      busy_loop(sh, i);
      break;
    case W_BLOCK:
      for (;;) futex_wait(&sh->block, 0);
    case W_WAKE: {
      uint32_t v = atomic_load(&sh->bell);
      for (;;) {
        while (atomic_load(&sh->bell) == v) futex_wait(&sh->bell, v);
        v = atomic_load(&sh->bell);
        atomic_store(&s->woke_at, now_ns());
        atomic_store(&s->ran, v);
      }
    }
    case W_PIPE: { /* one 1 MiB write(2) into a pipe nobody reads yet */
      static char buf[1 << 20];
      memset(buf, 'x', sizeof buf);
      ssize_t n = write(g_pipe_fd, buf, sizeof buf);
      atomic_store(&s->result_errno, n < 0 ? errno : 0);
      atomic_store(&s->result, n);
      atomic_store(&s->done, 1);
      for (;;) pause();
    }
    case W_EPOLL: { /* epoll_wait(-1) on a pipe nobody writes */
      int ep = epoll_create1(0);
      struct epoll_event ev = {.events = EPOLLIN};
      epoll_ctl(ep, EPOLL_CTL_ADD, g_pipe_fd, &ev);
      int n = epoll_wait(ep, &ev, 1, -1);
      atomic_store(&s->result_errno, n < 0 ? errno : 0);
      atomic_store(&s->result, n);
      atomic_store(&s->done, 1);
      for (;;) pause();
    }
    case W_FUTEX_TO: { /* FUTEX_WAIT with a 5 s timeout, as rank_sleep does */
      struct timespec ts = {5, 0};
      long n = futex(&sh->block, FUTEX_WAIT, 0, &ts);
      atomic_store(&s->result_errno, n < 0 ? errno : 0);
      atomic_store(&s->result, n);
      atomic_store(&s->done, 1);
      for (;;) pause();
    }
    case W_FORK: { /* a rank with a child in its group and one that left it */
      for (int k = 0; k < 2; ++k) {
        pid_t c = fork();
        if (c == 0) {
          prctl(PR_SET_PDEATHSIG, SIGKILL);
          if (k == 1) setsid();
          for (;;) {
          }
        }
        atomic_store(&s->kids[k], c);
      }
      for (;;) {
      }
    }
    case W_WAITFLAG: /* rank_announce_wait + rank_sleep, then note the wake */
      while (atomic_load(&sh->waiting) == 1) futex_wait(&sh->waiting, 1);
      atomic_store(&s->woke_at, now_ns());
      for (;;) pause();
  }
  _exit(0);
}

/* ---------------------------------------------------------------- jobs */

enum Method { M_SIGSTOP, M_SIGSTOP_PROC, M_PGRP, M_FREEZER, M_FREEZER2, M_COOP, M_SIGPARK, M_N };
static const char* mname[M_N] = {"sigstop",  "sigstop-proc", "pgrp",   "freezer",
                                 "freezer2", "coop",         "sigpark"};

typedef struct {
  int n, method, used;
  pid_t pid[MAXR];
  pid_t pgid;
  Shm* sh;
  int procfd[MAXR];
  char cg[256]; /* the job's cgroup, if any */
  int cg_state, cg_events;
} Job;

static Job* g_jobs[32];
static char g_made[32][256]; /* cgroups made, removed at exit */
static int g_nmade;
static int g_ncpu = 1;
static int g_nice;
static uint64_t g_poll_us = 10;
static uint64_t g_slice_us;
static volatile sig_atomic_t g_quit;

static void forget_cg(const char* path) {
  for (int i = 0; i < g_nmade; ++i)
    if (strcmp(g_made[i], path) == 0) g_made[i][0] = 0;
}
static int make_cg(const char* path) {
  if (mkdir(path, 0755) != 0) return -errno;
  for (int i = 0; i < 32; ++i)
    if (!g_made[i][0]) {
      snprintf(g_made[i], sizeof g_made[i], "%s", path);
      if (i >= g_nmade) g_nmade = i + 1;
      break;
    }
  return 0;
}
/* rmdir, retried while the last tasks finish exiting. */
static int remove_cg(const char* path) {
  for (int i = 0; i < 2000; ++i) {
    if (rmdir(path) == 0 || errno == ENOENT) {
      forget_cg(path);
      return 0;
    }
    if (errno != EBUSY) break;
    usleep(500);
  }
  return -errno;
}

static void job_kill(Job* j) {
  if (!j->used) return;
  /* A frozen v1 task does not die until thawed (see probe): thaw first. */
  if (j->cg_state >= 0) {
    if (j->method == M_FREEZER) pwrite(j->cg_state, "THAWED", 6, 0);
    if (j->method == M_FREEZER2) pwrite(j->cg_state, "0", 1, 0);
  }
  atomic_store(&j->sh->gate, 0);
  futex_wake(&j->sh->gate);
  for (int i = 0; i < j->n; ++i)
    if (j->pid[i] > 0) kill(j->pid[i], SIGKILL);
  for (int i = 0; i < j->n; ++i)
    if (j->pid[i] > 0) {
      while (waitpid(j->pid[i], NULL, 0) < 0 && errno == EINTR) {
      }
      j->pid[i] = 0;
    }
  for (int i = 0; i < j->n; ++i)
    if (j->procfd[i] >= 0) close(j->procfd[i]);
  if (j->cg_state >= 0) close(j->cg_state);
  if (j->cg_events >= 0) close(j->cg_events);
  if (j->cg[0]) remove_cg(j->cg);
  munmap(j->sh, sizeof(Shm));
  j->used = 0;
  for (int i = 0; i < 32; ++i)
    if (g_jobs[i] == j) g_jobs[i] = NULL;
}

static void cleanup(void) {
  for (int i = 0; i < 32; ++i)
    if (g_jobs[i]) job_kill(g_jobs[i]);
  for (int i = 0; i < g_nmade; ++i)
    if (g_made[i][0]) remove_cg(g_made[i]);
}
static void on_signal(int sig) {
  (void)sig;
  g_quit = 1;
  cleanup();
  _exit(130);
}

static pid_t spawn(Shm* sh, int i, int cpu, pid_t pgid, int work, const char* cg) {
  const pid_t parent = getpid();
  pid_t p = fork();
  if (p == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    setpgid(0, pgid);
    if (g_nice) setpriority(PRIO_PROCESS, 0, g_nice);
    if (g_slice_us) { /* EEVDF's custom slice (Linux 6.12+): a woken rank preempts a longer one */
      struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t prio;
        uint64_t runtime, deadline, period;
      } at = {48, 0 /* SCHED_OTHER */, 0, g_nice, 0, g_slice_us * 1000u, 0, 0};
      syscall(SYS_sched_setattr, 0, &at, 0);
    }
    /* Into the job's cgroup before anything else (the NM's child would do
     * this before its setuid and exec): nothing it forks is outside. */
    if (cg && cg[0] && write_pid(cg, 0)) _exit(1);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      sched_setaffinity(0, sizeof set, &set);
    }
    g_sh = sh;
    g_idx = i;
    struct sigaction sa = {.sa_handler = park_handler, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    rank_main(sh, i, work);
  }
  if (p > 0) setpgid(p, pgid); /* both sides, so kill(-pgid) cannot race */
  return p;
}

/* Makes the job's cgroup and opens its state (and events) file. */
static int job_cgroup(Job* j, const char* name) {
  const int v1 = j->method == M_FREEZER;
  snprintf(j->cg, sizeof j->cg, "%s/bcs-stopcost-%d-%s", v1 ? FREEZER1 : FREEZER2, (int)getpid(),
           name);
  int e = make_cg(j->cg);
  if (e) {
    fprintf(stderr, "stop_cost: mkdir %s: %s\n", j->cg, strerror(-e));
    j->cg[0] = 0;
    return e;
  }
  char path[300];
  snprintf(path, sizeof path, "%s/%s", j->cg, v1 ? "freezer.state" : "cgroup.freeze");
  j->cg_state = open(path, O_RDWR | O_CLOEXEC);
  if (!v1) {
    snprintf(path, sizeof path, "%s/cgroup.events", j->cg);
    j->cg_events = open(path, O_RDONLY | O_CLOEXEC);
  }
  return j->cg_state < 0 ? -errno : 0;
}

static int job_start(Job* j, int n, int work, int method, const char* name) {
  memset(j, 0, sizeof *j);
  j->n = n;
  j->method = method;
  j->cg_state = j->cg_events = -1;
  for (int i = 0; i < MAXR; ++i) j->procfd[i] = -1;
  j->sh = mmap(NULL, sizeof(Shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (j->sh == MAP_FAILED) return -1;
  j->used = 1;
  for (int i = 0; i < 32; ++i)
    if (!g_jobs[i]) {
      g_jobs[i] = j;
      break;
    }
  /* The cgroup first, and each rank moved in right after fork: a rank that
   * forks is then never outside it. (The NM would have the child move
   * itself before exec.) */
  if ((method == M_FREEZER || method == M_FREEZER2) && job_cgroup(j, name)) return -1;
  for (int i = 0; i < n; ++i) {
    const pid_t pg = method == M_PGRP && i > 0 ? j->pid[0] : 0;
    j->pid[i] = spawn(j->sh, i, i % g_ncpu, pg, work, j->cg);
    if (j->pid[i] < 0) return -1;
    if (j->cg[0] && write_pid(j->cg, j->pid[i])) {
      fprintf(stderr, "stop_cost: cannot move %d into %s\n", j->pid[i], j->cg);
      return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)j->pid[i]);
    j->procfd[i] = open(path, O_RDONLY | O_CLOEXEC);
  }
  j->pgid = j->pid[0];
  return 0;
}

/* The NM's halves: issue (what it must do), confirm (waiting until done). */
static void m_stop(Job* j) {
  switch (j->method) {
    case M_SIGSTOP:
    case M_SIGSTOP_PROC:
      for (int i = 0; i < j->n; ++i) kill(j->pid[i], SIGSTOP);
      break;
    case M_PGRP:
      kill(-j->pgid, SIGSTOP);
      break;
    case M_FREEZER:
      pwrite(j->cg_state, "FROZEN", 6, 0);
      break;
    case M_FREEZER2:
      pwrite(j->cg_state, "1", 1, 0);
      break;
    case M_COOP:
      atomic_store(&j->sh->gate, 1);
      break;
    case M_SIGPARK:
      atomic_store(&j->sh->gate, 1);
      for (int i = 0; i < j->n; ++i) kill(j->pid[i], SIGUSR2);
      break;
  }
}
static void m_resume(Job* j) {
  switch (j->method) {
    case M_SIGSTOP:
    case M_SIGSTOP_PROC:
      for (int i = 0; i < j->n; ++i) kill(j->pid[i], SIGCONT);
      break;
    case M_PGRP:
      kill(-j->pgid, SIGCONT);
      break;
    case M_FREEZER:
      pwrite(j->cg_state, "THAWED", 6, 0);
      break;
    case M_FREEZER2:
      pwrite(j->cg_state, "0", 1, 0);
      break;
    case M_COOP:
    case M_SIGPARK:
      atomic_store(&j->sh->gate, 0);
      futex_wake(&j->sh->gate);
      break;
  }
}
/* Waits (at most 1 s) until every rank is stopped (want=1) or no longer
 * stopped (want=0). 0, or -1 on timeout. It never spins: on two CPUs a
 * spinning NM takes the very CPU the rank needs to stop (it then waits a
 * whole tick). Where the kernel tells (waitid, the rank's futex) it sleeps
 * until told; /proc, freezer.state and cgroup.events are read with 10 us
 * sleeps between reads. */
static int m_confirm(Job* j, int want) {
  const uint64_t limit = now_ns() + 1000000000u;
  char b[128];
  switch (j->method) {
    case M_SIGSTOP:
    case M_PGRP:
      for (int i = 0; i < j->n; ++i) {
        siginfo_t si;
        const idtype_t t = j->method == M_PGRP ? P_PGID : P_PID;
        const id_t id = (id_t)(j->method == M_PGRP ? j->pgid : j->pid[i]);
        while (waitid(t, id, &si, want ? WSTOPPED : WCONTINUED) < 0 && errno == EINTR) {
        }
      }
      return 0;
    case M_SIGSTOP_PROC:
      for (int i = 0; i < j->n; ++i)
        while ((proc_state(j->procfd[i]) == 'T') != want) {
          if (now_ns() > limit) return -1;
          sleep_us(g_poll_us);
        }
      return 0;
    case M_FREEZER:
      for (;;) {
        read_fd(j->cg_state, b, sizeof b);
        if (strncmp(b, want ? "FROZEN" : "THAWED", 6) == 0) return 0;
        if (now_ns() > limit) return -1;
        sleep_us(g_poll_us);
      }
    case M_FREEZER2:
      for (;;) {
        read_fd(j->cg_events, b, sizeof b);
        if (strstr(b, want ? "frozen 1" : "frozen 0")) return 0;
        if (now_ns() > limit) return -1;
        /* (cgroup.events can be polled for POLLPRI, but the kernel sends
         * at most one notification per file every 10 ms, so a poll here
         * waits out most switches: polled like freezer.state instead.) */
        sleep_us(g_poll_us);
      }
    case M_COOP:
    case M_SIGPARK:
      for (int i = 0; i < j->n; ++i) {
        const struct timespec ms = {0, 1000000};
        uint32_t v;
        while ((v = atomic_load(&j->sh->r[i].parked)) != (uint32_t)want) {
          if (now_ns() > limit) return -1;
          futex(&j->sh->r[i].parked, FUTEX_WAIT, v, &ms);
        }
      }
      return 0;
  }
  return -1;
}

/* The rank's gap that spans time t: 1 and its ends, or 0. */
static int gap_at(Slot* s, uint64_t t, uint64_t* from, uint64_t* to) {
  const uint32_t n = atomic_load_explicit(&s->ngap, memory_order_acquire);
  for (uint32_t k = 0; k < NGAP - 16 && k < n; ++k) {
    const Gap* g = &s->gap[(n - 1 - k) % NGAP];
    const uint64_t f = atomic_load_explicit(&g->from, memory_order_relaxed);
    const uint64_t e = atomic_load_explicit(&g->to, memory_order_relaxed);
    if (f <= t && t < e) {
      *from = f;
      *to = e;
      return 1;
    }
  }
  return 0;
}

/* -------------------------------------------------------------- modes */

static int g_k = 1000;
static uint64_t g_q_us = 2000;
static int g_ranks[4] = {1, 2, 4}, g_nranks = 3;
static int g_methods[M_N], g_nmethods;
static uint64_t g_cpu_ms = 1000;
static int g_overlap;
static int g_fifo;

static int method_usable(int m) {
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

static void mode_switch(void) {
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

static void mode_block(void) {
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

static void mode_wake(void) {
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

static void mode_setup(void) {
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

/* -------------------------------------------------------------- probes */

static int usable[M_N];

/* A one-rank job in `work`, stopped by `m` and confirmed. */
static int probe_job(Job* j, int m, int work, const char* name) {
  if (job_start(j, 1, work, m, name)) return -1;
  sleep_us(20000);
  m_stop(j);
  return m_confirm(j, 1);
}

static void probe_kill(void) {
  printf(
      "\n## SIGKILL of a stopped rank, until its pidfd is readable (dead); 20 tries each, us"
      " median max\n");
  for (int m = -1; m < M_N; ++m) {
    if (m == M_SIGSTOP_PROC || m == M_PGRP || (m >= 0 && !usable[m])) continue;
    double v[20];
    int nv = 0;
    char st = '?';
    for (int t = 0; t < 20 && !g_quit; ++t) {
      Job j;
      const int bad =
          m < 0 ? job_start(&j, 1, W_BUSY, M_COOP, "kill") : probe_job(&j, m, W_BUSY, "kill");
      if (bad) {
        job_kill(&j);
        break;
      }
      if (m < 0) sleep_us(20000);
      st = proc_state(j.procfd[0]);
      int pfd = pidfd_open(j.pid[0]);
      const uint64_t t0 = now_ns();
      kill(j.pid[0], SIGKILL);
      struct pollfd p = {pfd, POLLIN, 0};
      if (poll(&p, 1, 200) == 1) {
        v[nv++] = (double)(now_ns() - t0) / 1e3;
      } else {
        const char st2 = proc_state(j.procfd[0]);
        const uint64_t t1 = now_ns();
        m_resume(&j);
        const int r = poll(&p, 1, 1000);
        printf(
            "%-12s state '%c': NOT dead 200 ms after SIGKILL (state '%c'); %s %.1f us after the"
            " thaw\n",
            mname[m], st, st2, r == 1 ? "dead" : "still alive", (double)(now_ns() - t1) / 1e3);
        close(pfd);
        waitpid(j.pid[0], NULL, 0);
        j.pid[0] = 0;
        job_kill(&j);
        break;
      }
      close(pfd);
      waitpid(j.pid[0], NULL, 0);
      j.pid[0] = 0;
      job_kill(&j);
    }
    if (nv) {
      qsort(v, (size_t)nv, sizeof *v, cmp_d);
      printf("%-12s state '%c': dead %.1f us (max %.1f) after SIGKILL\n",
             m < 0 ? "(running)" : mname[m], st, v[(nv - 1) / 2], v[nv - 1]);
    }
  }
  /* Re-asserting a stop on a job that is stopped already: what it costs to
   * repeat it at every slice of a suspended job (against a user's SIGCONT). */
  const int ms[3] = {M_PGRP, M_FREEZER, M_FREEZER2};
  for (int x = 0; x < 3; ++x) {
    const int m = ms[x];
    if (!usable[m]) continue;
    Job j;
    if (job_start(&j, 2, W_BUSY, m, "again") == 0) {
      sleep_us(20000);
      m_stop(&j);
      m_confirm(&j, 1);
      double v[1000];
      for (int t = 0; t < 1000; ++t) {
        const uint64_t c0 = cpu_ns();
        m_stop(&j);
        v[t] = (double)(cpu_ns() - c0) / 1e3;
      }
      char s0[32];
      printf("%-12s stopping an already stopped job of 2 ranks again: %s us NM CPU (median p99)\n",
             mname[m], mp(v, 1000, s0));
    }
    job_kill(&j);
  }
}

static int count_sigchld(int sfd) {
  struct signalfd_siginfo si;
  int c = 0;
  while (read(sfd, &si, sizeof si) == sizeof si) ++c;
  return c;
}

static uint64_t scan_proc(int* nproc) {
  /* What the NM's reap_orphans does on every SIGCHLD: read every
   * /proc/PID/stat. */
  const uint64_t t0 = now_ns();
  DIR* d = opendir("/proc");
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d))) {
    char* end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    char path[64], b[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    read_fd(fd, b, sizeof b);
    close(fd);
    ++n;
  }
  closedir(d);
  *nproc = n;
  return now_ns() - t0;
}

static void probe_visibility(void) {
  printf("\n## What the parent (the NM) sees of a stopped rank\n");
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old);
  int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  for (int pass = 0; pass < 2; ++pass) {
    struct sigaction sa = {.sa_handler = SIG_DFL, .sa_flags = pass ? SA_NOCLDSTOP : 0};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    for (int m = 0; m < M_N; ++m) {
      if (m == M_SIGSTOP_PROC || m == M_PGRP || !usable[m]) continue;
      if (pass && m != M_SIGSTOP) continue;
      Job j;
      if (job_start(&j, 1, W_BUSY, m, "vis")) {
        job_kill(&j);
        continue;
      }
      sleep_us(20000);
      count_sigchld(sfd);
      m_stop(&j);
      sleep_us(20000);
      const char st = proc_state(j.procfd[0]);
      int status = 0;
      const pid_t w0 = waitpid(j.pid[0], &status, WNOHANG); /* as the NM reaps: no WUNTRACED */
      siginfo_t si;
      memset(&si, 0, sizeof si);
      waitid(P_PID, (id_t)j.pid[0], &si, WSTOPPED | WNOHANG | WNOWAIT);
      int pfd = pidfd_open(j.pid[0]);
      struct pollfd p = {pfd, POLLIN, 0};
      const int pr = poll(&p, 1, 0);
      const int c1 = count_sigchld(sfd);
      m_resume(&j);
      sleep_us(20000);
      const int c2 = count_sigchld(sfd);
      printf(
          "%-12s%s state '%c'; waitpid(0) %s; waitid(WSTOPPED) %s; pidfd %s; SIGCHLD at stop %d,"
          " at restart %d\n",
          mname[m], pass ? " (SA_NOCLDSTOP)" : "", st, w0 == 0 ? "sees nothing" : "reports it",
          si.si_pid == j.pid[0] ? "reports it" : "sees nothing",
          pr == 1 ? "readable" : "not readable", c1, c2);
      close(pfd);
      if (m == M_SIGSTOP) { /* consume the stop report */
        waitid(P_PID, (id_t)j.pid[0], &si, WSTOPPED | WNOHANG);
      }
      job_kill(&j);
    }
  }
  struct sigaction sa = {.sa_handler = SIG_DFL};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, NULL);
  close(sfd);
  sigprocmask(SIG_SETMASK, &old, NULL);
  double v[50];
  int np = 0;
  for (int i = 0; i < 50; ++i) v[i] = (double)scan_proc(&np) / 1e3;
  char s[32];
  printf(
      "a /proc scan as the NM's reap_orphans does on each SIGCHLD: %d processes, %s us"
      " (median p99)\n",
      np, mp(v, 50, s));
}

static void probe_pipe(void) {
  printf("\n## A rank stopped inside write(2) of 1 MiB to its stdout pipe (nobody reading)\n");
  for (int m = -1; m < M_N; ++m) {
    if (m == M_SIGSTOP_PROC || m == M_PGRP || m == M_COOP || (m >= 0 && !usable[m])) continue;
    int fds[2];
    if (pipe(fds)) return;
    g_pipe_fd = fds[1];
    Job j;
    if (job_start(&j, 1, W_PIPE, m < 0 ? M_COOP : m, "pipe")) {
      job_kill(&j);
      close(fds[0]);
      close(fds[1]);
      continue;
    }
    close(fds[1]);
    g_pipe_fd = -1;
    sleep_us(50000); /* the pipe is full and the rank sleeps in pipe_write */
    if (m >= 0) {
      m_stop(&j);
      m_confirm(&j, 1);
      sleep_us(20000);
      m_resume(&j);
    }
    sleep_us(20000);
    static char buf[1 << 16];
    size_t total = 0;
    ssize_t r;
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    const uint64_t limit = now_ns() + 2000000000u;
    while (!atomic_load(&j.sh->r[0].done) && now_ns() < limit) {
      r = read(fds[0], buf, sizeof buf);
      if (r > 0)
        total += (size_t)r;
      else
        usleep(100);
    }
    while ((r = read(fds[0], buf, sizeof buf)) > 0) total += (size_t)r;
    const long res = (long)atomic_load(&j.sh->r[0].result);
    printf("%-12s write() returned %ld of 1048576%s; the reader got %zu bytes\n",
           m < 0 ? "(no stop)" : mname[m], res, res == 1048576 ? "" : " (SHORT WRITE)", total);
    close(fds[0]);
    job_kill(&j);
  }
}

static void probe_eintr(void) {
  printf("\n## A rank blocked in epoll_wait(-1) or FUTEX_WAIT(5 s), stopped 20 ms and restarted\n");
  const int works[2] = {W_EPOLL, W_FUTEX_TO};
  const char* wn[2] = {"epoll_wait", "futex_wait"};
  for (int w = 0; w < 2; ++w)
    for (int m = 0; m < M_N; ++m) {
      if (m == M_SIGSTOP_PROC || m == M_PGRP || m == M_COOP || !usable[m]) continue;
      int fds[2];
      if (pipe(fds)) return;
      g_pipe_fd = fds[0];
      Job j;
      if (job_start(&j, 1, works[w], m, "eintr")) {
        job_kill(&j);
        close(fds[0]);
        close(fds[1]);
        continue;
      }
      g_pipe_fd = -1;
      sleep_us(20000);
      m_stop(&j);
      m_confirm(&j, 1);
      sleep_us(20000);
      m_resume(&j);
      sleep_us(20000);
      if (atomic_load(&j.sh->r[0].done))
        printf("%-12s %s returned %ld, %s\n", mname[m], wn[w],
               (long)atomic_load(&j.sh->r[0].result),
               strerror(atomic_load(&j.sh->r[0].result_errno)));
      else
        printf("%-12s %s still waiting (restarted transparently)\n", mname[m], wn[w]);
      job_kill(&j);
      close(fds[0]);
      close(fds[1]);
    }
}

static void probe_lost_wake(void) {
  printf("\n## A rank asleep in MPI (rank_sleep), the NM wakes it while it is stopped\n");
  for (int m = 0; m < M_N; ++m) {
    if (m == M_SIGSTOP_PROC || m == M_PGRP || m == M_COOP || !usable[m]) continue;
    Job j;
    if (job_start(&j, 1, W_WAITFLAG, m, "wake")) {
      job_kill(&j);
      continue;
    }
    atomic_store(&j.sh->waiting, 1);
    sleep_us(20000);
    m_stop(&j);
    m_confirm(&j, 1);
    atomic_store(&j.sh->waiting, 0); /* rank_wake */
    futex_wake(&j.sh->waiting);
    sleep_us(20000);
    const int ran_stopped = atomic_load(&j.sh->r[0].woke_at) != 0;
    const uint64_t t0 = now_ns();
    m_resume(&j);
    sleep_us(20000);
    const uint64_t w = atomic_load(&j.sh->r[0].woke_at);
    printf("%-12s ran while stopped: %s; after the restart: %s\n", mname[m],
           ran_stopped ? "YES" : "no",
           w ? (w > t0 ? "woke (the wake was kept)" : "had woken before") : "still asleep (LOST)");
    job_kill(&j);
  }
}

static void probe_fork(void) {
  printf("\n## Children of a rank: one in its process group, one that called setsid()\n");
  prctl(PR_SET_CHILD_SUBREAPER, 1); /* as the NM is */
  const int ms[4] = {M_SIGSTOP, M_PGRP, M_FREEZER, M_FREEZER2};
  for (int x = 0; x < 4; ++x) {
    const int m = ms[x];
    if (!usable[m]) continue;
    Job j;
    if (job_start(&j, 1, W_FORK, m, "fork")) {
      job_kill(&j);
      continue;
    }
    sleep_us(50000);
    pid_t p[3] = {j.pid[0], atomic_load(&j.sh->r[0].kids[0]), atomic_load(&j.sh->r[0].kids[1])};
    m_stop(&j);
    if (m == M_FREEZER || m == M_FREEZER2) m_confirm(&j, 1);
    sleep_us(20000);
    uint64_t r0[3], d[3];
    for (int i = 0; i < 3; ++i) r0[i] = run_ns(p[i]);
    sleep_us(200000);
    for (int i = 0; i < 3; ++i) d[i] = run_ns(p[i]) - r0[i];
    printf("%-12s CPU over 200 ms: rank %.1f ms, child %.1f ms, setsid child %.1f ms\n", mname[m],
           (double)d[0] / 1e6, (double)d[1] / 1e6, (double)d[2] / 1e6);
    m_resume(&j);
    kill(p[1], SIGKILL);
    kill(p[2], SIGKILL);
    job_kill(&j);
    while (waitpid(p[1], NULL, 0) < 0 && errno == EINTR) {
    }
    while (waitpid(p[2], NULL, 0) < 0 && errno == EINTR) {
    }
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

static void probe_cma(void) {
  printf("\n## The NM copying from a stopped rank (process_vm_readv of 64 KiB)\n");
  for (int m = 0; m < M_N; ++m) {
    if (m == M_SIGSTOP_PROC || m == M_PGRP || !usable[m]) continue;
    Job j;
    if (probe_job(&j, m, W_BUSY, "cma")) {
      job_kill(&j);
      continue;
    }
    static char buf[1 << 16];
    /* the rank's own copy of the static buffer is at the same address */
    struct iovec l = {buf, sizeof buf}, r = {buf, sizeof buf};
    const uint64_t t0 = now_ns();
    ssize_t n = process_vm_readv(j.pid[0], &l, 1, &r, 1, 0);
    printf("%-12s %zd bytes in %.1f us\n", mname[m], n, (double)(now_ns() - t0) / 1e3);
    job_kill(&j);
  }
}

/* A node manager that is not root: uid 65534 with CAP_SETUID, CAP_SETGID
 * and CAP_KILL (deploy/systemd/bcs-nm.service), running a rank as 65533. */
static int drop_to_nm(void) {
  prctl(PR_SET_KEEPCAPS, 1);
  if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
    return -1;
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  memset(d, 0, sizeof d);
  d[0].effective = d[0].permitted = (1u << CAP_SETUID) | (1u << CAP_SETGID) | (1u << CAP_KILL);
  return (int)syscall(SYS_capset, &h, d);
}

static void probe_nonroot_one(int v2, int inside) {
  const char* root = v2 ? FREEZER2 : FREEZER1;
  const char* name = v2 ? "freezer2" : "freezer";
  const char* statef = v2 ? "cgroup.freeze" : "freezer.state";
  const char* frozen = v2 ? "1" : "FROZEN";
  const char* thawed = v2 ? "0" : "THAWED";
  char deleg[256], nmcg[300], jobcg[300], f[400];
  snprintf(deleg, sizeof deleg, "%s/bcs-stopcost-%d-deleg", root, (int)getpid());
  snprintf(nmcg, sizeof nmcg, "%s/nm", deleg);
  snprintf(jobcg, sizeof jobcg, "%s/job", deleg);
  Shm* sh = mmap(NULL, sizeof(Shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return;
  /* [0] mkdir at the root, [1] mkdir in the delegated dir, [2] the rank
   * moves itself in before its setuid, [3] the NM moves a rank already
   * running as another uid, [4] the NM freezes the job, [5] the rank is
   * frozen (1), [6] SIGSTOP by the NM, [7] the rank's own user writes the
   * state file, [8] it SIGCONTs a rank the NM stopped, [9] that rank runs
   * again (1) */
  _Atomic int64_t* res = (_Atomic int64_t*)&sh->r[0];
  for (int i = 0; i < 10; ++i) res[i] = -9999;
  if (make_cg(deleg)) {
    printf("%-12s cannot mkdir %s\n", name, deleg);
    munmap(sh, sizeof(Shm));
    return;
  }
  /* Delegation: the directory and its files belong to the NM's user. */
  const char* files[] = {"", "/cgroup.procs", "/tasks", "/cgroup.threads",
                         "/cgroup.subtree_control"};
  for (size_t i = 0; i < sizeof files / sizeof *files; ++i) {
    snprintf(f, sizeof f, "%s%s", deleg, files[i]);
    chown(f, 65534, 65534);
  }
  if (inside) { /* the NM's own cgroup inside the delegated tree (systemd's Delegate=yes) */
    make_cg(nmcg);
    chown(nmcg, 65534, 65534);
    snprintf(f, sizeof f, "%s/cgroup.procs", nmcg);
    chown(f, 65534, 65534);
  }
  const pid_t nm = fork();
  if (nm == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (inside) write_pid(nmcg, 0); /* placed there by root, as systemd does */
    if (drop_to_nm()) _exit(3);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char p[400];
    snprintf(p, sizeof p, "%s/bcs-stopcost-%d-nr", root, (int)getppid());
    res[0] = mkdir(p, 0755) == 0 ? 0 : errno;
    if (res[0] == 0) rmdir(p);
    res[1] = mkdir(jobcg, 0755) == 0 ? 0 : errno;
    pid_t rk[2];
    for (int k = 0; k < 2; ++k) {
      rk[k] = fork();
      if (rk[k] == 0) {
        if (k == 0) res[2] = -write_pid(jobcg, 0);
        if (setresgid(65533, 65533, 65533) || setresuid(65533, 65533, 65533)) _exit(3);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* (a credential change clears it) */
        for (;;) {
        }
      }
    }
    usleep(20000);
    res[3] = -write_pid(jobcg, rk[1]);
    snprintf(p, sizeof p, "%s/%s", jobcg, statef);
    res[4] = -write_file(p, frozen);
    usleep(50000);
    const uint64_t r0 = run_ns(rk[0]);
    usleep(100000);
    res[5] = run_ns(rk[0]) - r0 < 1000000 ? 1 : 0;
    write_file(p, thawed);
    if (res[3] == 0) { /* B is in the job: take it out again for the SIGSTOP test */
      char q[400];
      snprintf(q, sizeof q, "%s", deleg);
      write_pid(q, rk[1]);
    }
    res[6] = kill(rk[1], SIGSTOP) == 0 ? 0 : errno;
    usleep(20000);
    const pid_t u = fork(); /* another process of the rank's user */
    if (u == 0) {
      if (setresgid(65533, 65533, 65533) || setresuid(65533, 65533, 65533)) _exit(3);
      res[7] = -write_file(p, thawed);
      res[8] = kill(rk[1], SIGCONT) == 0 ? 0 : errno;
      _exit(0);
    }
    waitpid(u, NULL, 0);
    usleep(20000);
    const uint64_t r1 = run_ns(rk[1]);
    usleep(100000);
    res[9] = run_ns(rk[1]) - r1 > 10000000 ? 1 : 0;
    kill(rk[0], SIGKILL);
    kill(rk[1], SIGKILL);
    waitpid(rk[0], NULL, 0);
    waitpid(rk[1], NULL, 0);
    _exit(0);
  }
  waitpid(nm, NULL, 0);
  remove_cg(jobcg);
  if (inside) remove_cg(nmcg);
  remove_cg(deleg);
#define ERR(x) ((x) == 0 ? "ok" : (x) == -9999 ? "not tried" : strerror((int)(x)))
  const char* where = inside ? "NM inside its delegated cgroup" : "NM in the root cgroup";
  printf("%-12s [%s] mkdir at the hierarchy's root: %s; in a directory chowned to it: %s\n", name,
         where, ERR(res[0]), ERR(res[1]));
  printf(
      "%-12s [%s] the rank moves itself in before its setuid: %s; the NM moves a rank"
      " already running as another uid: %s\n",
      name, where, ERR(res[2]), ERR(res[3]));
  printf(
      "%-12s [%s] the NM freezes the job: %s, rank frozen: %s; the rank's own user writes"
      " the state file: %s\n",
      name, where, ERR(res[4]),
      res[5] == 1   ? "yes"
      : res[2] != 0 ? "no (it is not in the cgroup)"
      : res[5] == 0 ? "NO"
                    : "not tried",
      ERR(res[7]));
  if (!v2)
    printf(
        "%-12s [non-root NM with CAP_KILL] stops a rank of another uid: %s; the rank's own"
        " user then SIGCONTs it: %s, and it runs again: %s\n",
        "SIGSTOP", ERR(res[6]), ERR(res[8]),
        res[9] == 1   ? "YES"
        : res[9] == 0 ? "no"
                      : "not tried");
  munmap(sh, sizeof(Shm));
}

static void mode_probe(void) {
  for (int m = 0; m < M_N; ++m) usable[m] = method_usable(m);
  probe_kill();
  probe_visibility();
  probe_pipe();
  probe_eintr();
  probe_lost_wake();
  probe_fork();
  probe_cma();
  if (geteuid() == 0) {
    printf(
        "\n## A node manager that is not root (uid 65534 with CAP_SETUID, CAP_SETGID, CAP_KILL)"
        "\n");
    if (usable[M_FREEZER]) probe_nonroot_one(0, 0);
    if (usable[M_FREEZER2]) probe_nonroot_one(1, 0);
    if (usable[M_FREEZER2]) probe_nonroot_one(1, 1);
  } else {
    printf("\n## non-root NM: not probed (needs root to make the users)\n");
  }
}

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
