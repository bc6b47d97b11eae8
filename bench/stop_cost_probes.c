/* stop_cost's probe mode (see stop_cost.h): how stopping a rank interacts
 * with SIGKILL, the parent's view, pipes, EINTR, wake-ups, children, CMA, and a
 * non-root node manager. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stop_cost.h"

/* -------------------------------------------------------------- probes */

static int pidfd_open(pid_t p) { return (int)syscall(SYS_pidfd_open, p, 0); }

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

void mode_probe(void) {
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
