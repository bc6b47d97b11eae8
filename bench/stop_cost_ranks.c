/* stop_cost's ranks and jobs (see stop_cost.h): what a rank does once forked,
 * starting and killing a job of ranks (and its cgroup), the NM's halves of a
 * stop and a restart for each method, the cleanup at exit. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stop_cost.h"

/* ---------------------------------------------------------- the ranks */

static Shm* g_sh;
static int g_idx;
int g_pipe_fd = -1;

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

const char* mname[M_N] = {"sigstop",  "sigstop-proc", "pgrp",   "freezer",
                          "freezer2", "coop",         "sigpark"};

static Job* g_jobs[32];
static char g_made[32][256]; /* cgroups made, removed at exit */
static int g_nmade;
int g_ncpu = 1;
int g_nice;
uint64_t g_poll_us = 10;
uint64_t g_slice_us;
volatile sig_atomic_t g_quit;

static void forget_cg(const char* path) {
  for (int i = 0; i < g_nmade; ++i)
    if (strcmp(g_made[i], path) == 0) g_made[i][0] = 0;
}
int make_cg(const char* path) {
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
int remove_cg(const char* path) {
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

void job_kill(Job* j) {
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

void cleanup(void) {
  for (int i = 0; i < 32; ++i)
    if (g_jobs[i]) job_kill(g_jobs[i]);
  for (int i = 0; i < g_nmade; ++i)
    if (g_made[i][0]) remove_cg(g_made[i]);
}
void on_signal(int sig) {
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

int job_start(Job* j, int n, int work, int method, const char* name) {
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
void m_stop(Job* j) {
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
void m_resume(Job* j) {
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
int m_confirm(Job* j, int want) {
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
int gap_at(Slot* s, uint64_t t, uint64_t* from, uint64_t* to) {
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
