#!/usr/bin/env bash
# 1-D halo-exchange stencil (halo.c), 2 ranks, non-blocking and blocking
# form: bcs with the adaptive and the fixed strobe, next to Open MPI in the
# same run. Median (min-max) of BCS_BENCH_REPEAT runs (default 5) of the
# slowest rank's time, and bcs / Open MPI.
#
#   bench/halo.sh [BUILD_DIR] [CELLS] [STEPS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
cells=${2:-1000000}
steps=${3:-100}
repeat=${BCS_BENCH_REPEAT:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/bin/mpicc" -O2 -o "$tmp/halo_bcs" "$here/bench/halo.c"
have_ompi=0
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$tmp/halo_ompi" "$here/bench/halo.c" && have_ompi=1
fi
med() { sort -n | awk '{a[NR]=$1} END{ if (!NR) {print "-"; exit} print a[int((NR+1)/2)] }'; }
spread() { sort -n | awk '{a[NR]=$1} END{ if (!NR) {print "-"; exit} printf "%.3f-%.3f", a[1], a[NR] }'; }

printf '# 1-D halo stencil, 2 ranks, %s cells, %s steps, median of %s runs (s)\n' \
  "$cells" "$steps" "$repeat"
printf '%-12s %-22s %-22s %-22s %9s %9s\n' form bcs-adaptive bcs-fixed ompi adaptive/o fixed/o
for form in nonblocking blocking; do
  for mode in adaptive fixed; do
    for _ in $(seq "$repeat"); do
      "$build/bin/bcs" run --timeout 300s --strobe "$mode" -n 2 "$tmp/halo_bcs" "$form" "$cells" \
        "$steps" | awk '/halo_s/{print $2}'
    done > "$tmp/$mode"
  done
  : > "$tmp/ompi"
  if [ $have_ompi = 1 ]; then
    for _ in $(seq "$repeat"); do
      timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 "$tmp/halo_ompi" \
        "$form" "$cells" "$steps" 2>/dev/null | awk '/halo_s/{print $2}'
    done > "$tmp/ompi"
  fi
  a=$(med < "$tmp/adaptive"); f=$(med < "$tmp/fixed"); o=$(med < "$tmp/ompi")
  printf '%-12s %-22s %-22s %-22s %9s %9s\n' "$form" "$a ($(spread < "$tmp/adaptive"))" \
    "$f ($(spread < "$tmp/fixed"))" "$o ($(spread < "$tmp/ompi"))" \
    "$(awk -v a="$a" -v o="$o" 'BEGIN{ if (o+0>0) printf "%.2fx", a/o; else print "-" }')" \
    "$(awk -v a="$f" -v o="$o" 'BEGIN{ if (o+0>0) printf "%.2fx", a/o; else print "-" }')"
done
