#!/usr/bin/env bash
# Strobe benchmark: the achieved slice period (time between two strobes) of
# a machine manager driving 2 node managers, for 100, 250 and 500 us slices,
# with the fixed strobe. Two jobs per slice length: `idle` is `sleep`, no MPI
# traffic, so every slice is the strobe, the DEM and its compare-and-write
# (other microphases are skipped when idle); `busy` is the halo stencil
# (halo.c, non-blocking, one rank per node manager) for about as long, so
# most slices carry descriptors and data across the two node managers.
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
# About $secs seconds of halo steps (a step is about 1 ms plus its slices).
steps=$((secs * 400))

printf '# achieved slice period with 2 node managers, %ss per run\n' "$secs"
printf '%8s %5s %8s %10s %10s %10s %10s\n' target job slices p50_us p99_us max_us p99/target
for slice in 100 250 500; do
  for job in idle busy; do
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
    awk 'NR>1 && $2+0>0 {print $2}' "$tmp/stats" | sort -n > "$tmp/periods"
    awk -v t="$slice" -v job="$job" '{a[NR]=$1} END{
        if (NR==0) {print "no slices recorded"; exit 1}
        p50=a[int(0.50*(NR-1)+1.5)]; p99=a[int(0.99*(NR-1)+1.5)]; mx=a[NR];
        if (p50=="") p50=a[NR]; if (p99=="") p99=a[NR];
        printf "%8s %5s %8d %10.1f %10.1f %10.1f %10.3f\n", t"us", job, NR, p50, p99, mx, p99/t }' \
      "$tmp/periods"
    cluster_stop
  done
done
