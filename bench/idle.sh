#!/usr/bin/env bash
# Runtime overhead when nothing is communicated, bcs (adaptive and fixed
# strobe) next to Open MPI in the same run, 2 ranks:
#   - daemon CPU while every rank sleeps: bcs-mm + bcs-nm CPU time over a
#     window in the middle of a job whose ranks sleep (Open MPI has no
#     daemon doing per-slice work; its orted is not counted);
#   - pure computation: the slowest rank's wall time for a fixed arithmetic
#     loop between two barriers, and the ratio to Open MPI.
# Each figure is the median of BCS_BENCH_REPEAT runs (default 5), with the
# spread (min-max).
#
#   bench/idle.sh [BUILD_DIR] [WORK_ITERATIONS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
work=${2:-400000000}
repeat=${BCS_BENCH_REPEAT:-5}
window=${BCS_BENCH_WINDOW:-3}
bin=$build/bin
tmp=$(mktemp -d)
# shellcheck source=bench/cluster.sh
. "$here/bench/cluster.sh"

"$bin/mpicc" -O2 -o "$tmp/compute_bcs" "$here/bench/compute.c"
have_ompi=0
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$tmp/compute_ompi" "$here/bench/compute.c" && have_ompi=1
fi

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# median and spread of the numbers on stdin
stats() { sort -n | awk '{a[NR]=$1} END{ if (!NR) {print "-"; exit}
  printf "%.3f (%.3f-%.3f)", a[int((NR+1)/2)], a[1], a[NR] }'; }

# Daemon CPU (% of one core) while both ranks sleep, sampled over `window`
# seconds once rank 0 said it sleeps.
daemon_cpu() {  # mode
  cluster_start 1 --strobe "$1"
  local mm=${pids[0]} nm=${pids[1]}
  for _ in $(seq "$repeat"); do
    : > "$tmp/out"
    "$bin/bcs" run --manager "127.0.0.1:$port" --timeout 120s -n 2 "$tmp/compute_bcs" sleep \
      $((window + 2)) > "$tmp/out" &
    local job=$!
    for _ in $(seq 300); do grep -q sleeping "$tmp/out" && break; sleep 0.05; done
    sleep 0.5
    local a b; a=$(( $(ticks "$mm") + $(ticks "$nm") ))
    sleep "$window"
    b=$(( $(ticks "$mm") + $(ticks "$nm") ))
    wait "$job"
    awk -v d=$((b - a)) -v hz="$hz" -v w="$window" 'BEGIN{printf "%.2f\n", 100 * d / hz / w}'
  done | stats
  cluster_stop
}

compute_bcs() {  # mode
  for _ in $(seq "$repeat"); do
    "$bin/bcs" run --timeout 300s --strobe "$1" -n 2 "$tmp/compute_bcs" work "$work" |
      awk '/work_s/{print $2}'
  done
}
compute_ompi() {
  for _ in $(seq "$repeat"); do
    timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 "$tmp/compute_ompi" work \
      "$work" 2>/dev/null | awk '/work_s/{print $2}'
  done
}

printf '# runtime overhead without communication, 2 ranks, median (min-max) of %s runs\n' "$repeat"
printf 'daemon CPU while every rank sleeps, %% of one core: adaptive %s, fixed %s, Open MPI 0 (no daemon work)\n' \
  "$(daemon_cpu adaptive)" "$(daemon_cpu fixed)"
compute_bcs adaptive > "$tmp/wa"
compute_bcs fixed > "$tmp/wf"
if [ $have_ompi = 1 ]; then compute_ompi > "$tmp/wo"; else : > "$tmp/wo"; fi
printf 'pure computation, slowest rank, s: bcs adaptive %s, bcs fixed %s, Open MPI %s\n' \
  "$(stats < "$tmp/wa")" "$(stats < "$tmp/wf")" "$(stats < "$tmp/wo")"
if [ -s "$tmp/wo" ]; then
  o=$(sort -n "$tmp/wo" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  for m in wa wf; do sort -n "$tmp/$m" | awk -v o="$o" -v m="$m" '{a[NR]=$1} END{
    printf "  %s / Open MPI: %.3fx\n", (m=="wa"?"adaptive":"fixed"), a[int((NR+1)/2)] / o }'; done
fi
