#!/usr/bin/env bash
# Ping-pong half-round-trip latency under bcs, next to Open MPI measured in
# the same run (when mpirun.openmpi is installed).
#
#   bench/pingpong.sh [BUILD_DIR] [ITERS] [ITERS_LARGE]
#
# Prints, per size: bcs latency in us and in slices (latency / slice length),
# Open MPI's latency and the ratio bcs / Open MPI. bcs is measured with one
# node manager (both ranks on one node: the DMA helper's cross-memory path)
# and with two (the ranks on different node managers: UCX between them).
# Each figure is the median (min-max) of BCS_BENCH_REPEAT runs (default 5),
# the three configurations interleaved so that they share the machine's
# moods; the ratios are of medians. 8 B, 4 KiB (the largest eager send),
# 64 KiB and 1 MiB make ITERS round trips per run (default 200), 16 MiB and
# 64 MiB ITERS_LARGE (default 20).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
iters=${2:-200}
iters_large=${3:-20}
repeat=${BCS_BENCH_REPEAT:-5}
slice=${BCS_BENCH_SLICE:-500us}
strobe=${BCS_BENCH_STROBE:-adaptive}
small=(8 4096 65536 1048576)
large=(16777216 67108864)
bcs=$build/bin/bcs
pp=$build/bin/prog_pingpong
[ -x "$bcs" ] && [ -x "$pp" ] || { echo "build first: $bcs / $pp missing" >&2; exit 1; }
slice_us=$(awk -v s="$slice" 'BEGIN{ if (s ~ /us$/) {sub(/us$/,"",s); print s} else if (s ~ /ms$/) {sub(/ms$/,"",s); print s*1000} else print s*1e6 }')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_bcs() {  # nodes -> appends "size us" lines to the file
  for set in small large; do
    if [ $set = small ]; then n=$iters; sz=("${small[@]}"); else n=$iters_large; sz=("${large[@]}"); fi
    timeout 600 "$bcs" run --timeout 550s -n 2 --nodes "$1" --slice "$slice" --strobe "$strobe" \
      "$pp" --bench "$n" "${sz[@]}" >> "$2"
  done
}
have_ompi=0
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$tmp/pp_ompi" "$here/tests/programs/pingpong.c" && have_ompi=1
fi
run_ompi() {  # Open MPI's default on one host: ob1 + vader shared memory (with CMA).
  for set in small large; do
    if [ $set = small ]; then n=$iters; sz=("${small[@]}"); else n=$iters_large; sz=("${large[@]}"); fi
    timeout 600 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 \
      "$tmp/pp_ompi" --bench "$n" "${sz[@]}" >> "$1" 2>/dev/null
  done
}
: > "$tmp/bcs1"; : > "$tmp/bcs2"; : > "$tmp/ompi"
for _ in $(seq "$repeat"); do
  run_bcs 1 "$tmp/bcs1"
  run_bcs 2 "$tmp/bcs2"
  if [ $have_ompi = 1 ]; then run_ompi "$tmp/ompi" || have_ompi=0; fi
done

# of size in file: "median min max" (empty when absent)
stats() { awk -v s="$1" '$1==s{print $2}' "$2" | sort -g |
  awk '{a[NR]=$1} END{ if (NR) print a[int((NR+1)/2)], a[1], a[NR] }'; }

printf '# ping-pong, half round trip in us, median (min-max) of %s runs; %s/%s iterations (small/large); slice %s, %s strobe\n' \
  "$repeat" "$iters" "$iters_large" "$slice" "$strobe"
printf '%10s %26s %7s %26s %7s %26s %9s %9s\n' size bcs-1nm slices bcs-2nm slices ompi ratio-1nm ratio-2nm
for s in "${small[@]}" "${large[@]}"; do
  read -r b1 b1lo b1hi <<< "$(stats "$s" "$tmp/bcs1")"
  read -r b2 b2lo b2hi <<< "$(stats "$s" "$tmp/bcs2")"
  o=""; olo=""; ohi=""
  [ $have_ompi = 1 ] && read -r o olo ohi <<< "$(stats "$s" "$tmp/ompi")"
  awk -v s="$s" -v b1="$b1" -v b1lo="$b1lo" -v b1hi="$b1hi" -v b2="$b2" -v b2lo="$b2lo" \
    -v b2hi="$b2hi" -v o="$o" -v olo="$olo" -v ohi="$ohi" -v sl="$slice_us" 'BEGIN{
    f1 = sprintf("%.1f (%.1f-%.1f)", b1, b1lo, b1hi);
    f2 = sprintf("%.1f (%.1f-%.1f)", b2, b2lo, b2hi);
    fo = (o != "") ? sprintf("%.1f (%.1f-%.1f)", o, olo, ohi) : "-";
    r1 = (o != "" && o > 0) ? sprintf("%.2fx", b1/o) : "-";
    r2 = (o != "" && o > 0) ? sprintf("%.2fx", b2/o) : "-";
    printf "%10d %26s %7.2f %26s %7.2f %26s %9s %9s\n", s, f1, b1/sl, f2, b2/sl, fo, r1, r2 }'
done
