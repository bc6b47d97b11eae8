/* stop_cost's helpers (see stop_cost.h): clocks and sleeps, the futex calls,
 * small file reads and writes (/proc, cgroup files), and "median p99". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stop_cost.h"

/* ------------------------------------------------------------ helpers */

uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
uint64_t cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
void sleep_until(uint64_t t) {
  struct timespec ts = {(time_t)(t / 1000000000u), (long)(t % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}
void sleep_us(uint64_t us) { sleep_until(now_ns() + us * 1000u); }
long futex(_Atomic uint32_t* w, int op, uint32_t v, const struct timespec* ts) {
  return syscall(SYS_futex, (uint32_t*)w, op, v, ts, NULL, 0);
}
void futex_wait(_Atomic uint32_t* w, uint32_t v) { futex(w, FUTEX_WAIT, v, NULL); }
void futex_wake(_Atomic uint32_t* w) { futex(w, FUTEX_WAKE, INT_MAX, NULL); }

int write_file(const char* path, const char* s) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n = write(fd, s, strlen(s));
  int e = n < 0 ? -errno : 0;
  close(fd);
  return e;
}
int write_pid(const char* dir, pid_t p) {
  char path[320], s[32];
  snprintf(path, sizeof path, "%s/cgroup.procs", dir);
  snprintf(s, sizeof s, "%d", (int)p);
  return write_file(path, s);
}
int read_fd(int fd, char* buf, size_t n) {
  ssize_t r = pread(fd, buf, n - 1, 0);
  buf[r > 0 ? r : 0] = 0;
  return (int)r;
}
/* The state letter of /proc/PID/stat, from an open fd. */
char proc_state(int fd) {
  char b[512];
  if (read_fd(fd, b, sizeof b) <= 0) return '?';
  char* p = strrchr(b, ')');
  return p && p[1] ? p[2] : '?';
}
/* CPU time the process has run, ns (/proc/PID/schedstat), and utime+stime
 * in clock ticks (/proc/PID/stat fields 14 and 15). */
uint64_t run_ns(pid_t pid) {
  char path[64], b[128];
  snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  read_fd(fd, b, sizeof b);
  close(fd);
  return strtoull(b, NULL, 10);
}
unsigned long ticks(pid_t pid) {
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

double rusage_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int cmp_d(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
/* "median p99" of v[0..n), in the units given. */
char* mp(double* v, size_t n, char* out) {
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
