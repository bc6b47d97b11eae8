/* coll_bench: collective benchmarks, plain C11 + MPI-3.1 so the same file
 * builds with bcs's mpicc and with other MPIs' (mpicc.openmpi) to compare.
 * bench/coll.sh runs it; all timers are clock_gettime, not MPI_Wtime.
 *
 *   coll_bench allreduce BYTES ITERS
 *     MPI_Allreduce(SUM) of BYTES/8 doubles (BYTES takes k/K, m/M suffixes).
 *     max(ITERS/10, 3) untimed warm-up calls, then ITERS calls back to back
 *     (nothing between them), each timed on its own (CLOCK_MONOTONIC).
 *     Prints on rank 0:  allreduce BYTES AVG_US MEDIAN_US
 *       AVG_US    = max over ranks of (time of the whole timed loop / ITERS)
 *       MEDIAN_US = median over iterations of (max over ranks of the time of
 *                   that iteration): the per-iteration times go to rank 0
 *                   in one MPI_Reduce(MAX) after the loop. Iterations are not
 *                   separated, so "iteration i" of two ranks overlap but need
 *                   not start together; the max is the rank that waited most.
 *     One more call after the timed ones checks the sums.
 *
 *   coll_bench skew MAX_US ITERS
 *     CPU cost of MPI_Reduce (4 doubles, SUM, root 0) under process skew, the
 *     CPU-utilisation benchmark of the application-bypass reduction paper
 *     (shared/seeds/000_*.txt, section VI). The paper's method:
 *       - the maximum delay is converted from microseconds to busy-loop
 *         iterations at each node; delays are busy loops, not absolute
 *         timings, so CPU stolen by asynchronous processing is captured;
 *       - 10,000 reductions, averaged over all nodes, a barrier separating
 *         iterations;
 *       - inside an iteration: start timing, random delay in [0, max], the
 *         reduction, a catch-up delay, stop timing; skew and catch-up delays
 *         are subtracted from the measured time to get the CPU utilisation;
 *       - catch-up delay = maximum skew delay + a conservative estimate of the
 *         maximum reduction latency (to capture all asynchronous processing).
 *     Here, per rank:
 *       - the busy loop is calibrated in iterations per microsecond of thread
 *         CPU time (the fastest of several runs), so a delay costs the same
 *         CPU whatever the preemption on an oversubscribed host;
 *       - skew delay: uniform in [0, MAX_US], from a splitmix64 generator
 *         seeded with the rank (and COLL_BENCH_SEED): reproducible;
 *       - catch-up delay: MAX_US + max(2 * L, 100 us), L = the largest over
 *         ranks of the 90th percentile of the wall time of one MPI_Reduce in
 *         max(ITERS/10, 10) barrier-separated untimed runs without skew
 *         (not the maximum: on a loaded host one preempted call would make
 *         the delay, and the run, many times longer);
 *         COLL_BENCH_CATCHUP_US overrides;
 *       - an MPI_Barrier between iterations, outside everything measured,
 *         as in the paper (it keeps skew from accumulating; the catch-up
 *         delay keeps a late rank's reduction inside its own window);
 *       - measured directly around the MPI_Reduce call: thread CPU time
 *         (CLOCK_THREAD_CPUTIME_ID), process CPU time
 *         (CLOCK_PROCESS_CPUTIME_ID, includes helper threads of the rank)
 *         and wall time (CLOCK_MONOTONIC);
 *       - over the whole window (skew delay + reduce + catch-up), two
 *         versions of the paper's subtraction:
 *         PAPER: process CPU time over the window minus the nominal
 *           (calibrated) CPU cost of the two busy delays. This is the
 *           paper's method, with process CPU in place of wall time: on a
 *           shared host the loops' wall time includes preemption by other
 *           ranks, which the paper's dedicated nodes did not have. The
 *           loop's speed varies with what else the core runs (other ranks,
 *           node managers, the other hardware thread), so on a shared
 *           2-CPU host this is off by up to tens of % of the delays, either
 *           sign: read it at large differences only.
 *         WINDOW: process CPU over the window minus this thread's CPU over
 *           the window, plus the thread CPU inside the call; i.e. the busy
 *           loops' measured (not nominal) cost is subtracted. Exact, and it
 *           catches work of other threads of the rank process (progress
 *           threads) anywhere in the window. Unlike PAPER it would miss
 *           asynchronous work done inside this thread during the busy loops
 *           (the paper's signal handlers); neither bcs's libmpi nor Open MPI
 *           runs any there.
 *     The root checks the sum of every reduction (outside the timing). The
 *     send buffer changes every iteration, so a runtime that returns early
 *     (application bypass) must have copied it.
 *     The fixed cost of the clock reads around the call (measured around an
 *     empty bracket, median) is subtracted from the in-call numbers.
 *     Prints on rank 0:
 *       skew MAX_US CPU_US WALL_US PCPU_US WINDOW_US PAPER_US CPU_ROOT_US CPU_NONROOT_US
 *            CATCHUP_US WALL_NONROOT_US          (one line)
 *       CPU_US    thread CPU inside MPI_Reduce per call, averaged per rank,
 *                 then averaged over ranks
 *       WALL_US   wall time inside MPI_Reduce, same averaging
 *       PCPU_US   process CPU inside MPI_Reduce, same averaging
 *       WINDOW_US, PAPER_US  the window metrics above, same averaging
 *       CPU_ROOT_US / CPU_NONROOT_US  CPU_US of rank 0 / mean over the others
 *       CATCHUP_US the catch-up delay used
 *       WALL_NONROOT_US  WALL_US averaged over ranks other than 0: with
 *                 application bypass these return at once
 *     CPU time of processes outside the rank (bcs's node managers, Open
 *     MPI's daemon) is not counted by any of these.
 *
 *   coll_bench post ITERS
 *     Host time to post a non-blocking collective: each MPI_Iallreduce (1
 *     double, 8 B, SUM) call is timed on its own (CLOCK_MONOTONIC, the
 *     post only), then MPI_Wait completes it (untimed); max(ITERS/10, 3)
 *     warm-up rounds first. All ranks' ITERS post times go to rank 0.
 *     Prints on rank 0:  post AVG_US MEDIAN_US MIN_US TIMER_US
 *       over all ranks' calls (size x ITERS samples); TIMER_US is the median
 *       cost of an empty pair of clock reads, NOT subtracted.
 *
 *   coll_bench progress ITERS
 *     Progress without MPI calls: after a barrier each rank posts an
 *     MPI_Iallreduce (1 double, SUM) and, making no MPI call, reads the
 *     result through a volatile pointer until it is there or 2000 us have
 *     passed; then MPI_Wait (untimed) and a check of the result. (Reading
 *     a pending receive buffer is outside what MPI promises: done here on
 *     purpose, read-only; a runtime that progresses only inside MPI calls
 *     never shows the result.)
 *     Prints on rank 0:  progress PCT MEDIAN_US
 *       PCT: the share of all ranks' iterations in which the result
 *       appeared within 2000 us; MEDIAN_US: the median time it took, over
 *       those (- if none).
 *
 *   coll_bench large BYTES ITERS
 *     Large collectives: ITERS calls back to back of MPI_Bcast of BYTES
 *     from rank 0, MPI_Allgather of BYTES in all (BYTES/size per rank) and
 *     MPI_Allreduce (SUM) of BYTES/8 doubles, after one untimed call of
 *     each; every result is checked after its loop.
 *     Prints on rank 0:  large BYTES BCAST_US ALLGATHER_US ALLREDUCE_US
 *       each the max over ranks of (time of its timed loop / ITERS).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, nranks;

static void die(const char *msg) {
  fprintf(stderr, "coll_bench: rank %d: %s\n", rank, msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static double now_us(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}
#define WALL() now_us(CLOCK_MONOTONIC)
#define TCPU() now_us(CLOCK_THREAD_CPUTIME_ID)
#define PCPU() now_us(CLOCK_PROCESS_CPUTIME_ID)

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static double median(double *v, size_t n) {
  if (n == 0) return 0.0;
  qsort(v, n, sizeof *v, cmp_double);
  return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static long parse_long(const char *s, const char *what) {
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (end == s) goto bad;
  if (*end == 'k' || *end == 'K') {
    v <<= 10;
    ++end;
  } else if (*end == 'm' || *end == 'M') {
    v <<= 20;
    ++end;
  }
  if (*end != '\0' || v < 0 || v > 0x7fffffffLL) goto bad;
  return (long)v;
bad:
  if (rank == 0) fprintf(stderr, "coll_bench: bad %s '%s'\n", what, s);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of memory");
  return p;
}

/* ---- busy loop -------------------------------------------------------- */

static double spin_per_us; /* busy-loop iterations per microsecond of CPU */

static void spin(uint64_t n) {
  volatile uint64_t k = 0;
  while (k < n) k = k + 1;
}

static uint64_t spin_iters(double us) { return (uint64_t)(us * spin_per_us + 0.5); }

/* Iterations per CPU microsecond: fastest of several ~2 ms runs, timed in
 * thread CPU time so preemption does not skew it. */
static void calibrate_spin(void) {
  uint64_t n = 1000;
  double best = 0.0;
  int run;
  for (;;) { /* grow n until one run takes >= 2 ms of CPU */
    double t0 = TCPU();
    spin(n);
    if (TCPU() - t0 >= 2000.0) break;
    n *= 2;
  }
  for (run = 0; run < 7; ++run) {
    double t0 = TCPU(), dt;
    spin(n);
    dt = TCPU() - t0;
    if (dt > 0 && (double)n / dt > best) best = (double)n / dt;
  }
  spin_per_us = best;
}

/* ---- reproducible per-rank random numbers ---------------------------- */

static uint64_t rng_state;

static uint64_t splitmix64(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double uniform01(void) { return (double)(splitmix64() >> 11) * (1.0 / 9007199254740992.0); }

/* ---- allreduce -------------------------------------------------------- */

static void fill_allreduce(double *s, long n, long it) {
  long i;
  for (i = 0; i < n; ++i) s[i] = (double)(rank + 1) + (double)((i + it) % 7);
}

static void check_allreduce(const double *r, long n, long it) {
  long i;
  for (i = 0; i < n; ++i) {
    const double want = (double)nranks * (nranks + 1) / 2.0 + (double)nranks * (double)((i + it) % 7);
    if (r[i] != want) {
      fprintf(stderr, "coll_bench: rank %d: allreduce element %ld = %g, want %g\n", rank, i, r[i],
              want);
      die("wrong allreduce result");
    }
  }
}

static void bench_allreduce(long bytes, long iters) {
  const long n = bytes / 8 > 0 ? bytes / 8 : 1;
  const long warm = iters / 10 > 3 ? iters / 10 : 3;
  double *s = (double *)xmalloc(sizeof(double) * (size_t)n);
  double *r = (double *)xmalloc(sizeof(double) * (size_t)n);
  double *t = (double *)xmalloc(sizeof(double) * (size_t)iters);
  double *tmax = (double *)xmalloc(sizeof(double) * (size_t)iters);
  double t0, t1, avg, avg_max = 0.0;
  long it;

  fill_allreduce(s, n, 0);
  for (it = 0; it < warm; ++it) MPI_Allreduce(s, r, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  check_allreduce(r, n, 0);
  MPI_Barrier(MPI_COMM_WORLD);

  t0 = WALL();
  for (it = 0; it < iters; ++it) {
    const double a = WALL();
    MPI_Allreduce(s, r, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    t[it] = WALL() - a;
  }
  t1 = WALL();
  avg = (t1 - t0) / (double)iters;

  /* The path measured also delivers right. */
  fill_allreduce(s, n, 3);
  MPI_Allreduce(s, r, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  check_allreduce(r, n, 3);

  MPI_Reduce(t, tmax, (int)iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&avg, &avg_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("allreduce %ld %.3f %.3f\n", bytes, avg_max, median(tmax, (size_t)iters));
    fflush(stdout);
  }
  free(s);
  free(r);
  free(t);
  free(tmax);
}

/* ---- large ------------------------------------------------------------ */

static unsigned char large_byte(long i, int src) {
  return (unsigned char)(i * 7 + src * 31 + 1);
}

/* Mean time of ITERS calls of `call` (after one untimed), max over ranks. */
static double timed_loop(void (*call)(void *), void *arg, long iters) {
  double t0, mine, worst = 0.0;
  long it;
  call(arg);
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = WALL();
  for (it = 0; it < iters; ++it) call(arg);
  mine = (WALL() - t0) / (double)iters;
  MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

struct large_args {
  long bytes, blk;
  unsigned char *b, *sb, *g;
  double *s, *r;
};
static void large_bcast(void *p) {
  struct large_args *a = (struct large_args *)p;
  MPI_Bcast(a->b, (int)a->bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
}
static void large_allgather(void *p) {
  struct large_args *a = (struct large_args *)p;
  MPI_Allgather(a->sb, (int)a->blk, MPI_BYTE, a->g, (int)a->blk, MPI_BYTE, MPI_COMM_WORLD);
}
static void large_allreduce(void *p) {
  struct large_args *a = (struct large_args *)p;
  MPI_Allreduce(a->s, a->r, (int)(a->bytes / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static void bench_large(long bytes, long iters) {
  struct large_args a;
  double tb, tg, tr;
  long i;
  int src;
  a.bytes = bytes / 8 * 8 > 0 ? bytes / 8 * 8 : 8;
  a.blk = a.bytes / nranks;
  a.b = (unsigned char *)xmalloc((size_t)a.bytes);
  a.sb = (unsigned char *)xmalloc((size_t)a.blk + 1);
  a.g = (unsigned char *)xmalloc((size_t)(a.blk * nranks) + 1);
  a.s = (double *)xmalloc((size_t)a.bytes);
  a.r = (double *)xmalloc((size_t)a.bytes);
  for (i = 0; i < a.bytes; ++i) a.b[i] = rank == 0 ? large_byte(i, 0) : 0;
  for (i = 0; i < a.blk; ++i) a.sb[i] = large_byte(i, rank);
  fill_allreduce(a.s, a.bytes / 8, 0);
  tb = timed_loop(large_bcast, &a, iters);
  tg = timed_loop(large_allgather, &a, iters);
  tr = timed_loop(large_allreduce, &a, iters);
  for (i = 0; i < a.bytes; ++i)
    if (a.b[i] != large_byte(i, 0)) die("wrong broadcast result");
  for (src = 0; src < nranks; ++src)
    for (i = 0; i < a.blk; ++i)
      if (a.g[(long)src * a.blk + i] != large_byte(i, src)) die("wrong allgather result");
  check_allreduce(a.r, a.bytes / 8, 0);
  if (rank == 0) {
    printf("large %ld %.3f %.3f %.3f\n", bytes, tb, tg, tr);
    fflush(stdout);
  }
  free(a.b);
  free(a.sb);
  free(a.g);
  free(a.s);
  free(a.r);
}

/* ---- skew ------------------------------------------------------------- */

enum { SKEW_COUNT = 4 }; /* doubles per reduction, as the paper's 4-element case */

static void bench_skew(long max_us, long iters) {
  const long warm = iters / 10 > 10 ? iters / 10 : 10;
  double s[SKEW_COUNT], r[SKEW_COUNT];
  double sum_cpu = 0, sum_wall = 0, sum_pcpu = 0, sum_window = 0, sum_paper = 0;
  double *lat = (double *)xmalloc(sizeof(double) * (size_t)(iters / 10 > 10 ? iters / 10 : 10));
  double lat_p90, lat_all = 0.0, catchup_us;
  double ovh_cpu, ovh_wall, ovh_pcpu, ovh_other;
  uint64_t catchup_n;
  const char *env;
  long it;
  int j;

  calibrate_spin();
  env = getenv("COLL_BENCH_SEED");
  rng_state = 0x5eedull * 0x100000001b3ull + (uint64_t)(env ? strtoull(env, NULL, 10) : 0) * 1000003ull +
              (uint64_t)rank;

  /* Cost of the clock reads of the bracket around MPI_Reduce (same order,
   * nothing inside): subtracted from the in-call figures. */
  {
    enum { N = 201 };
    double oc[N], ow[N], op[N], oo[N];
    int k;
    for (k = 0; k < N; ++k) {
      const double p0 = PCPU(), c0 = TCPU(), w0 = WALL();
      const double w1 = WALL(), c1 = TCPU(), p1 = PCPU();
      oc[k] = c1 - c0;
      ow[k] = w1 - w0;
      op[k] = p1 - p0;
    }
    for (k = 0; k < N; ++k) { /* the window's own bracket */
      const double p0 = PCPU(), c0 = TCPU();
      const double c1 = TCPU(), p1 = PCPU();
      oo[k] = (p1 - p0) - (c1 - c0);
    }
    ovh_cpu = median(oc, N);
    ovh_wall = median(ow, N);
    ovh_pcpu = median(op, N);
    ovh_other = median(oo, N);
  }

  /* Untimed reductions without skew: warm-up and the latency estimate L. */
  for (j = 0; j < SKEW_COUNT; ++j) s[j] = (double)(rank + 1);
  for (it = 0; it < warm; ++it) {
    double w0;
    MPI_Barrier(MPI_COMM_WORLD);
    w0 = WALL();
    MPI_Reduce(s, r, SKEW_COUNT, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    lat[it] = WALL() - w0;
  }
  qsort(lat, (size_t)warm, sizeof *lat, cmp_double);
  lat_p90 = lat[(warm * 9) / 10 < warm ? (warm * 9) / 10 : warm - 1];
  free(lat);
  MPI_Allreduce(&lat_p90, &lat_all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  env = getenv("COLL_BENCH_CATCHUP_US");
  if (env && *env)
    catchup_us = strtod(env, NULL);
  else
    catchup_us = (double)max_us + (2.0 * lat_all > 100.0 ? 2.0 * lat_all : 100.0);
  catchup_n = spin_iters(catchup_us);

  for (it = 0; it < iters; ++it) {
    const double delay_us = uniform01() * (double)max_us;
    const uint64_t delay_n = spin_iters(delay_us);
    double win_p0, win_c0, win_c1, win_p1, p0, c0, w0, w1, c1, p1;

    for (j = 0; j < SKEW_COUNT; ++j) s[j] = (double)(rank + 1) + (double)((it + j) % 5);
    MPI_Barrier(MPI_COMM_WORLD); /* separates iterations; not measured */

    win_p0 = PCPU(); /* the paper's window starts */
    win_c0 = TCPU();
    spin(delay_n); /* skew */
    p0 = PCPU();
    c0 = TCPU();
    w0 = WALL();
    MPI_Reduce(s, r, SKEW_COUNT, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    w1 = WALL();
    c1 = TCPU();
    p1 = PCPU();
    spin(catchup_n); /* catch-up */
    win_c1 = TCPU();
    win_p1 = PCPU(); /* the paper's window ends */

    sum_cpu += (c1 - c0) - ovh_cpu;
    sum_wall += (w1 - w0) - ovh_wall;
    sum_pcpu += (p1 - p0) - ovh_pcpu;
    /* busy delays at their calibrated CPU cost; what the window holds more
     * is the reduction, wherever in the window it ran */
    sum_paper += (win_p1 - win_p0) - ((double)delay_n + (double)catchup_n) / spin_per_us;
    sum_window += ((win_p1 - win_p0) - (win_c1 - win_c0) - ovh_other) + ((c1 - c0) - ovh_cpu);

    if (rank == 0)
      for (j = 0; j < SKEW_COUNT; ++j) {
        const double want = (double)nranks * (nranks + 1) / 2.0 + (double)nranks * (double)((it + j) % 5);
        if (r[j] != want) {
          fprintf(stderr, "coll_bench: reduce iteration %ld element %d = %g, want %g\n", it, j, r[j],
                  want);
          die("wrong reduce result");
        }
      }
  }

  {
    enum { M = 5 };
    double mine[M], *all = NULL;
    mine[0] = sum_cpu / (double)iters;
    mine[1] = sum_wall / (double)iters;
    mine[2] = sum_pcpu / (double)iters;
    mine[3] = sum_window / (double)iters;
    mine[4] = sum_paper / (double)iters;
    if (rank == 0) all = (double *)xmalloc(sizeof(double) * M * (size_t)nranks);
    MPI_Gather(mine, M, MPI_DOUBLE, all, M, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double a[M] = {0, 0, 0, 0, 0}, nonroot = 0.0, nonroot_wall = 0.0;
      int q, k;
      for (q = 0; q < nranks; ++q)
        for (k = 0; k < M; ++k) a[k] += all[M * q + k] / (double)nranks;
      for (q = 1; q < nranks; ++q) {
        nonroot += all[M * q] / (double)(nranks - 1);
        nonroot_wall += all[M * q + 1] / (double)(nranks - 1);
      }
      printf("skew %ld %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.1f %.3f\n", max_us, a[0], a[1], a[2],
             a[3], a[4], all[0], nonroot, catchup_us, nonroot_wall);
      fflush(stdout);
      free(all);
    }
  }
}

/* ---- post ------------------------------------------------------------- */

/* The 8 B allreduces of post and progress: round k's contribution of this
   rank, and the sum every rank must get. */
static double contribution(long k) { return (double)(rank + 1) + (double)(k % 3); }
static double expected_sum(long k) {
  return (double)nranks * (nranks + 1) / 2.0 + (double)nranks * (double)(k % 3);
}

static void bench_post(long iters) {
  const long warm = iters / 10 > 3 ? iters / 10 : 3;
  double *t = (double *)xmalloc(sizeof(double) * (size_t)iters);
  double *all = NULL, timer_us;
  double s, r;
  long it;

  { /* cost of the two clock reads themselves */
    enum { N = 201 };
    double o[N];
    int k;
    for (k = 0; k < N; ++k) {
      const double a = WALL();
      o[k] = WALL() - a;
    }
    timer_us = median(o, N);
  }

  for (it = -warm; it < iters; ++it) {
    MPI_Request req;
    double a, b;
    s = contribution(it + warm);
    a = WALL();
    MPI_Iallreduce(&s, &r, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    b = WALL();
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (r != expected_sum(it + warm)) die("wrong iallreduce result");
    if (it >= 0) t[it] = b - a;
  }

  if (rank == 0) all = (double *)xmalloc(sizeof(double) * (size_t)iters * (size_t)nranks);
  MPI_Gather(t, (int)iters, MPI_DOUBLE, all, (int)iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    const size_t n = (size_t)iters * (size_t)nranks;
    double sum = 0.0, mn;
    size_t i;
    for (i = 0; i < n; ++i) sum += all[i];
    mn = median(all, n); /* sorts: all[0] is the minimum afterwards */
    printf("post %.3f %.3f %.3f %.3f\n", sum / (double)n, mn, all[0], timer_us);
    fflush(stdout);
    free(all);
  }
  free(t);
}

/* ---- progress --------------------------------------------------------- */

static void bench_progress(long iters) {
  const long warm = iters / 10 > 3 ? iters / 10 : 3;
  const double limit_us = 2000.0;
  double *t = (double *)xmalloc(sizeof(double) * (size_t)iters);
  double *all = NULL;
  long it;

  for (it = -warm; it < iters; ++it) {
    MPI_Request req;
    double s = contribution(it + warm), r = -1.0, a, b;
    const double want = expected_sum(it + warm);
    volatile double *vr = &r;
    MPI_Barrier(MPI_COMM_WORLD);
    a = WALL();
    MPI_Iallreduce(&s, &r, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    /* No MPI call from here to MPI_Wait. */
    for (b = WALL(); *vr != want && b - a < limit_us; b = WALL()) {
    }
    if (it >= 0) t[it] = *vr == want ? b - a : -1.0;
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (r != want) die("wrong iallreduce result");
  }

  if (rank == 0) all = (double *)xmalloc(sizeof(double) * (size_t)iters * (size_t)nranks);
  MPI_Gather(t, (int)iters, MPI_DOUBLE, all, (int)iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    const size_t n = (size_t)iters * (size_t)nranks;
    size_t i, k = 0;
    for (i = 0; i < n; ++i)
      if (all[i] >= 0.0) all[k++] = all[i];
    if (k)
      printf("progress %.1f %.1f\n", 100.0 * (double)k / (double)n, median(all, k));
    else
      printf("progress 0.0 -\n");
    fflush(stdout);
    free(all);
  }
  free(t);
}

static void usage(void) {
  if (rank == 0)
    fprintf(stderr,
            "usage: coll_bench allreduce BYTES ITERS | skew MAX_US ITERS | post ITERS | "
            "progress ITERS | large BYTES ITERS\n");
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (argc < 2) usage();
  if (strcmp(argv[1], "allreduce") == 0 && argc == 4) {
    const long bytes = parse_long(argv[2], "BYTES"), iters = parse_long(argv[3], "ITERS");
    if (iters < 1) usage();
    bench_allreduce(bytes, iters);
  } else if (strcmp(argv[1], "skew") == 0 && argc == 4) {
    const long max_us = parse_long(argv[2], "MAX_US"), iters = parse_long(argv[3], "ITERS");
    if (iters < 1) usage();
    bench_skew(max_us, iters);
  } else if (strcmp(argv[1], "post") == 0 && argc == 3) {
    const long iters = parse_long(argv[2], "ITERS");
    if (iters < 1) usage();
    bench_post(iters);
  } else if (strcmp(argv[1], "large") == 0 && argc == 4) {
    const long bytes = parse_long(argv[2], "BYTES"), iters = parse_long(argv[3], "ITERS");
    if (iters < 1 || bytes < 8) usage();
    bench_large(bytes, iters);
  } else if (strcmp(argv[1], "progress") == 0 && argc == 3) {
    const long iters = parse_long(argv[2], "ITERS");
    if (iters < 1) usage();
    bench_progress(iters);
  } else {
    usage();
  }
  MPI_Finalize();
  return 0;
}
