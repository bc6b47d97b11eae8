#!/usr/bin/env bash
# Strobe benchmark: the achieved slice period (time between two strobes) of
# a machine manager driving 2 node managers, for 100, 250 and 500 us slices,
# with the fixed strobe. Two jobs per slice length: `idle` is `sleep`, no MPI
# traffic, so every slice is the strobe, the DEM and its compare-and-write
# (other microphases are skipped when idle); `busy` is the halo stencil
# (halo.c, non-blocking, one rank per node manager) for about as long, so
# most slices carry descriptors and data across the two node managers.
# Each configuration runs BCS_BENCH_REPEAT times (default 5), each time on
# a fresh cluster; the table gives the median over the runs and, in
# brackets, the spread (min-max) of each run's p99 and max. max/target is
# the median run's longest period in slices.
# Beside each, `timer` is the machine's own floor (timer_floor.c): a thread
# that only sleeps to absolute deadlines one period apart, with the strobe
# sender's priority and timer slack, alone (idle) or while Open MPI runs
# the same stencil (busy). No strobe keeps its period better than that on
# the same machine without spinning.
#
#   bench/strobe.sh [BUILD_DIR] [SECONDS_PER_RUN]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
secs=${2:-3}
bin=$build/bin
tmp=$(mktemp -d)
# shellcheck source=bench/cluster.sh
. "$here/bench/cluster.sh"

"$bin/mpicc" -O2 -o "$tmp/halo" "$here/bench/halo.c"
cc -O2 -o "$tmp/timer_floor" "$here/bench/timer_floor.c"
have_ompi=0
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$tmp/halo_ompi" "$here/bench/halo.c" && have_ompi=1
fi
# About $secs seconds of halo steps (a step is about 1 ms plus its slices).
steps=$((secs * 400))

repeat=${BCS_BENCH_REPEAT:-5}
printf '# achieved slice period with 2 node managers, %ss per run, median (min-max) of %s runs\n' \
  "$secs" "$repeat"
# How long an idle vCPU of a guest polls before it halts: a strobe that
# wakes a halted vCPU comes that much later (docs/architecture.md, Pacing).
poll=/sys/module/haltpoll/parameters/guest_halt_poll_ns
[ -r "$poll" ] && printf '# guest halt polling: %s ns (haltpoll.guest_halt_poll_ns)\n' "$(cat "$poll")"
printf '%8s %5s %5s %8s %9s %22s %24s %10s %10s\n' target job who periods p50_us p99_us max_us \
  p99/target max/target
# One line per run into $tmp/runs: "periods p50 p99 max", from the sorted
# periods (us) in $tmp/periods.
run_line() {
  awk '{a[NR]=$1} END{
      if (NR==0) {print "no slices recorded" > "/dev/stderr"; exit 1}
      p50=a[int(0.50*(NR-1)+1.5)]; p99=a[int(0.99*(NR-1)+1.5)]; mx=a[NR];
      print NR, p50, p99, mx }' "$tmp/periods" >> "$tmp/runs"
}
# The row of the runs in $tmp/runs: medians, and the spread of p99 and max.
row() {
  local slice=$1 job=$2 who=$3
  # column c of the runs: "median min max"
  col() { awk -v c="$1" '{print $c}' "$tmp/runs" | sort -g |
    awk '{a[NR]=$1} END{ print a[int((NR+1)/2)], a[1], a[NR] }'; }
  read -r n _ _ <<< "$(col 1)"; read -r p50 _ _ <<< "$(col 2)"
  read -r p99 p99lo p99hi <<< "$(col 3)"; read -r mx mxlo mxhi <<< "$(col 4)"
  awk -v t="$slice" -v job="$job" -v who="$who" -v n="$n" -v p50="$p50" -v p99="$p99" \
    -v p99lo="$p99lo" -v p99hi="$p99hi" -v mx="$mx" -v mxlo="$mxlo" -v mxhi="$mxhi" 'BEGIN{
      printf "%8s %5s %5s %8d %9.1f %22s %24s %10.3f %10.1f\n", t "us", job, who, n, p50,
        sprintf("%.1f (%.1f-%.1f)", p99, p99lo, p99hi), sprintf("%.1f (%.1f-%.1f)", mx, mxlo, mxhi),
        p99 / t, mx / t }'
}
for slice in 100 250 500; do
  for job in idle busy; do
    : > "$tmp/runs"
    for _ in $(seq "$repeat"); do
      # shellcheck disable=SC2086 # BCS_BENCH_MM_ARGS: extra manager options, split on spaces
      cluster_start 2 --slice "${slice}us" ${BCS_BENCH_MM_ARGS:-}
      # --strobe fixed: an idle job would park the (default, adaptive) strobe.
      if [ "$job" = idle ]; then
        "$bin/bcs" run --manager "127.0.0.1:$port" --timeout 60s --strobe fixed -n 2 --nodes 2 \
          sleep "$secs"
      else
        "$bin/bcs" run --manager "127.0.0.1:$port" --timeout 120s --strobe fixed -n 2 --nodes 2 \
          "$tmp/halo" nonblocking 1000000 "$steps" > /dev/null
      fi
      "$bin/bcs" stats --manager "127.0.0.1:$port" --last 1000000 > "$tmp/stats"
      cluster_stop
      awk 'NR>1 && $2+0>0 {print $2}' "$tmp/stats" | sort -g > "$tmp/periods"
      run_line
    done
    row "$slice" "$job" bcs
    # The floor: the timer alone, or beside Open MPI's stencil.
    [ "$job" = busy ] && [ $have_ompi = 0 ] && continue
    : > "$tmp/runs"
    for _ in $(seq "$repeat"); do
      if [ "$job" = idle ]; then
        "$tmp/timer_floor" "$slice" "$secs" > "$tmp/floor"
      else
        # The stencil again and again, for as long as the timer runs.
        rm -f "$tmp/stop"
        (while [ ! -e "$tmp/stop" ]; do
          timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 "$tmp/halo_ompi" \
            nonblocking 1000000 "$steps" > /dev/null 2>&1 || { touch "$tmp/ompi_failed"; break; }
        done) &
        ompi=$!
        "$tmp/timer_floor" "$slice" "$secs" > "$tmp/floor"
        touch "$tmp/stop"
        wait "$ompi" || true
      fi
      awk '{print $2, $4, $6, $8}' "$tmp/floor" >> "$tmp/runs"
      # Without real-time priority the floor is not the strobe sender's.
      awk '$10 != 1 {exit 1}' "$tmp/floor" || touch "$tmp/no_fifo"
    done
    row "$slice" "$job" timer
    # A floor measured otherwise than the row says is marked, not mixed in.
    if [ -e "$tmp/no_fifo" ]; then
      printf '# ^ the timer ran without SCHED_FIFO in some runs (not allowed here)\n'
      rm -f "$tmp/no_fifo"
    fi
    if [ -e "$tmp/ompi_failed" ]; then
      printf '# ^ Open MPI stopped before the timer did in some runs: partly an idle floor\n'
      rm -f "$tmp/ompi_failed"
    fi
  done
done
