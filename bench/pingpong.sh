#!/usr/bin/env bash
# Ping-pong half-round-trip latency under bcs, next to Open MPI measured in
# the same run (when mpirun.openmpi is installed).
#
#   bench/pingpong.sh [BUILD_DIR] [ITERS]
#
# Prints, per size: bcs latency in us and in slices (latency / slice length),
# Open MPI's latency and the ratio bcs / Open MPI. bcs is measured with one
# node manager (both ranks on one node: the DMA helper's cross-memory path)
# and with two (the ranks on different node managers: UCX between them).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
iters=${2:-200}
slice=${BCS_BENCH_SLICE:-500us}
strobe=${BCS_BENCH_STROBE:-adaptive}
sizes=(8 65536 1048576 16777216)
bcs=$build/bin/bcs
pp=$build/bin/prog_pingpong
[ -x "$bcs" ] && [ -x "$pp" ] || { echo "build first: $bcs / $pp missing" >&2; exit 1; }
slice_us=$(awk -v s="$slice" 'BEGIN{ if (s ~ /us$/) {sub(/us$/,"",s); print s} else if (s ~ /ms$/) {sub(/ms$/,"",s); print s*1000} else print s*1e6 }')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_bcs() {  # nodes -> file
  timeout 600 "$bcs" run --timeout 550s -n 2 --nodes "$1" --slice "$slice" --strobe "$strobe" "$pp" \
    --bench "$iters" "${sizes[@]}" > "$2"
}
run_bcs 1 "$tmp/bcs1"
run_bcs 2 "$tmp/bcs2"

have_ompi=0
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$tmp/pp_ompi" "$here/tests/programs/pingpong.c"
  # Open MPI's default on one host: ob1 + vader shared memory (with CMA).
  timeout 600 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 \
    "$tmp/pp_ompi" --bench "$iters" "${sizes[@]}" > "$tmp/ompi" 2>/dev/null && have_ompi=1
fi

printf '# ping-pong, half round trip, %s iterations, slice %s, %s strobe\n' "$iters" "$slice" "$strobe"
printf '%10s %12s %8s %12s %8s %12s %10s %10s\n' size bcs-1nm-us slices bcs-2nm-us slices ompi-us ratio-1nm ratio-2nm
for s in "${sizes[@]}"; do
  b1=$(awk -v s="$s" '$1==s{print $2}' "$tmp/bcs1")
  b2=$(awk -v s="$s" '$1==s{print $2}' "$tmp/bcs2")
  o=$( [ $have_ompi = 1 ] && awk -v s="$s" '$1==s{print $2}' "$tmp/ompi" || echo "")
  awk -v s="$s" -v b1="$b1" -v b2="$b2" -v o="$o" -v sl="$slice_us" 'BEGIN{
    r1 = (o != "" && o > 0) ? sprintf("%.1fx", b1/o) : "-";
    r2 = (o != "" && o > 0) ? sprintf("%.1fx", b2/o) : "-";
    printf "%10d %12.1f %8.2f %12.1f %8.2f %12s %10s %10s\n", s, b1, b1/sl, b2, b2/sl, (o==""?"-":sprintf("%.1f",o)), r1, r2 }'
done
