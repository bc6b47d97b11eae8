/* The machine's own floor for a strobe: a thread that sleeps to absolute
 * deadlines one period apart (t0 + k * PERIOD), as the strobe sender does,
 * with the strobe sender's settings (SCHED_FIFO 1 when the process may,
 * 1 ns timer slack), and nothing else. It prints the achieved periods'
 * p50, p99 and max in microseconds, one line:
 *
 *   timer_floor PERIOD_US SECONDS
 *   -> "periods N p50 P50 p99 P99 max MAX fifo 0|1"
 *
 * No strobe can keep its period better than this on the same machine
 * without spinning; bench/strobe.sh prints it beside bcs's strobe. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

static uint64_t ns(const struct timespec* t) {
  return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

static int cmp(const void* a, const void* b) {
  const uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc != 3 || atol(argv[1]) <= 0 || atof(argv[2]) <= 0) {
    fprintf(stderr, "usage: timer_floor PERIOD_US SECONDS\n");
    return 2;
  }
  const uint64_t period = (uint64_t)atol(argv[1]) * 1000u;
  const size_t n = (size_t)(atof(argv[2]) * 1e9 / (double)period);
  if (n < 2) {
    fprintf(stderr, "timer_floor: fewer than 2 periods\n");
    return 2;
  }
  uint64_t* got = malloc(n * sizeof *got);
  if (!got) return 1;
  prctl(PR_SET_TIMERSLACK, 1);
  struct sched_param sp = {.sched_priority = 1};
  const int fifo = sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  const uint64_t t0 = ns(&t) + period;
  for (size_t k = 0; k < n; ++k) {
    const uint64_t due = t0 + k * period;
    struct timespec d = {.tv_sec = (time_t)(due / 1000000000u), .tv_nsec = (long)(due % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, NULL) != 0) {
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    got[k] = ns(&t);
  }
  /* Periods between consecutive wake-ups, as bcs stats reports them. */
  for (size_t k = n - 1; k > 0; --k) got[k] -= got[k - 1];
  qsort(got + 1, n - 1, sizeof *got, cmp);
  const size_t m = n - 1;
  const uint64_t* p = got + 1;
  printf("periods %zu p50 %.1f p99 %.1f max %.1f fifo %d\n", m, p[(size_t)(0.5 * (double)(m - 1) + 0.5)] / 1e3,
         p[(size_t)(0.99 * (double)(m - 1) + 0.5)] / 1e3, p[m - 1] / 1e3, fifo);
  free(got);
  return 0;
}
