#!/usr/bin/env bash
# Receives of messages that arrived before them (unexpected.c): a backlog
# of N 8-byte messages received in order (2 ranks), and MPICH's sendflood
# pattern (RANKS ranks, rank 0 receives from each in turn, then sends to
# each), bcs with one node manager, with the unexpected shelf and without
# it (BCS_SHELF=off: a slice per receive), next to Open MPI in the same run.
# Median (min-max) of BCS_BENCH_REPEAT runs (default 3).
#
#   bench/unexpected.sh [BUILD_DIR] [N] [ROUNDS] [RANKS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
n=${2:-10000}
rounds=${3:-2000}
ranks=${4:-8}
repeat=${BCS_BENCH_REPEAT:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/bin/mpicc" -O2 -o "$tmp/u_bcs" "$here/bench/unexpected.c"
have_ompi=0
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$tmp/u_ompi" "$here/bench/unexpected.c" && have_ompi=1
fi
stat() { sort -n | awk '{a[NR]=$1} END{ if (!NR) {print "-"; exit} printf "%s (%s-%s)", a[int((NR+1)/2)], a[1], a[NR] }'; }
med() { sort -n | awk '{a[NR]=$1} END{ if (NR) print a[int((NR+1)/2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a+0>0 && b+0>0) printf "%.1fx", a/b; else print "-" }'; }
printf '# receives of waiting messages, median (min-max) of %s runs, us\n' "$repeat"
printf '%-26s %-24s %-24s %-24s %9s\n' test bcs bcs-shelf-off ompi bcs/ompi
for t in "backlog $n 2" "gather $rounds $ranks"; do
  set -- $t
  : > "$tmp/on"; : > "$tmp/off"; : > "$tmp/o"
  for _ in $(seq "$repeat"); do
    "$build/bin/bcs" run --timeout 300s -n "$3" "$tmp/u_bcs" "$1" "$2" | awk '{print $2}' >> "$tmp/on"
    BCS_SHELF=off "$build/bin/bcs" run --timeout 300s -n "$3" "$tmp/u_bcs" "$1" "$2" |
      awk '{print $2}' >> "$tmp/off"
    if [ $have_ompi = 1 ]; then
      timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe -np "$3" "$tmp/u_ompi" "$1" \
        "$2" 2>/dev/null | awk '{print $2}' >> "$tmp/o"
    fi
  done
  printf '%-26s %-24s %-24s %-24s %9s\n' "$1 $2 ($3 ranks)" "$(stat < "$tmp/on")" \
    "$(stat < "$tmp/off")" "$(stat < "$tmp/o")" "$(ratio "$(med < "$tmp/on")" "$(med < "$tmp/o")")"
done
