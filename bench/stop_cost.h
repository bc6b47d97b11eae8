/* bench/stop_cost: what stopping and restarting a job's ranks costs (the usage
 * and the methods are described at the top of stop_cost.c). Declarations the
 * parts share; each part owns:
 *   stop_cost.c         main: the options, the signal handlers, the mode run;
 *   stop_cost_util.c    helpers: clocks, sleeps, futex calls, file reads and
 *                       writes, "median p99";
 *   stop_cost_ranks.c   the ranks (what a forked rank does) and the jobs: start
 *                       and kill a job and its cgroup, stop/restart/confirm for
 *                       each method, the cleanup of everything made;
 *   stop_cost_modes.c   the modes switch, block, wake, setup, and their options;
 *   stop_cost_probes.c  the probe mode.
 * The shared memory (Shm) is the ranks' and the NM's: mapped per job. */
#ifndef BCS_BENCH_STOP_COST_H
#define BCS_BENCH_STOP_COST_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define MAXR 8
#define NGAP 256
#define GAP_NS 20000u /* a pause longer than this in a rank's loop is a gap */
#define FREEZER1 "/sys/fs/cgroup/freezer"
#define FREEZER2 "/sys/fs/cgroup/unified"

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

/* ------------------------------------------------- helpers (stop_cost_util.c) */

uint64_t now_ns(void);
uint64_t cpu_ns(void);
void sleep_until(uint64_t t);
void sleep_us(uint64_t us);
long futex(_Atomic uint32_t* w, int op, uint32_t v, const struct timespec* ts);
void futex_wait(_Atomic uint32_t* w, uint32_t v);
void futex_wake(_Atomic uint32_t* w);
int write_file(const char* path, const char* s);
int write_pid(const char* dir, pid_t p);
int read_fd(int fd, char* buf, size_t n);
char proc_state(int fd);
uint64_t run_ns(pid_t pid);
unsigned long ticks(pid_t pid);
double rusage_us(void);
int cmp_d(const void* a, const void* b);
char* mp(double* v, size_t n, char* out);

/* ------------------------------------ the ranks and jobs (stop_cost_ranks.c) */

enum Work { W_BUSY, W_BLOCK, W_WAKE, W_PIPE, W_EPOLL, W_FUTEX_TO, W_FORK, W_WAITFLAG };

enum Method { M_SIGSTOP, M_SIGSTOP_PROC, M_PGRP, M_FREEZER, M_FREEZER2, M_COOP, M_SIGPARK, M_N };
extern const char* mname[M_N];

typedef struct {
  int n, method, used;
  pid_t pid[MAXR];
  pid_t pgid;
  Shm* sh;
  int procfd[MAXR];
  char cg[256]; /* the job's cgroup, if any */
  int cg_state, cg_events;
} Job;

extern int g_pipe_fd; /* the pipe end a W_PIPE, W_EPOLL rank is given */
extern int g_ncpu;
extern int g_nice;
extern uint64_t g_poll_us;
extern uint64_t g_slice_us;
extern volatile sig_atomic_t g_quit;

int make_cg(const char* path);
int remove_cg(const char* path);
void job_kill(Job* j);
void cleanup(void);
void on_signal(int sig);
int job_start(Job* j, int n, int work, int method, const char* name);
void m_stop(Job* j);
void m_resume(Job* j);
int m_confirm(Job* j, int want);
int gap_at(Slot* s, uint64_t t, uint64_t* from, uint64_t* to);

/* ------------------------------------------------ the modes (stop_cost_modes.c) */

extern int g_k;
extern uint64_t g_q_us;
extern int g_ranks[4], g_nranks;
extern int g_methods[M_N], g_nmethods;
extern uint64_t g_cpu_ms;
extern int g_overlap;
extern int g_fifo;

int method_usable(int m);
void mode_switch(void);
void mode_block(void);
void mode_wake(void);
void mode_setup(void);

/* ---------------------------------------------- the probes (stop_cost_probes.c) */

void mode_probe(void);

#endif
