#!/usr/bin/env bash
# 1-D halo-exchange stencil (halo.c), 2 ranks, non-blocking and blocking
# form: bcs with the adaptive and the fixed strobe, next to Open MPI in the
# same run. Median (min-max) of BCS_BENCH_REPEAT runs (default 5) of the
# slowest rank's time, and bcs / Open MPI.
#
# The runs are interleaved (each round runs Open MPI, then bcs adaptive,
# then bcs fixed), so that a machine that slows down or speeds up during
# the script moves all three alike; the ratio columns are the median of the
# rounds' own ratios (each bcs run over the Open MPI run of its round),
# which that drift cannot move, with their spread.
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
# The rounds' ratios of column $1 over column $2 of $tmp/rounds: "median (min-max)x".
ratio() {
  [ $have_ompi = 1 ] || { echo -; return; }
  awk -v a="$1" -v b="$2" '$b+0>0 {printf "%.3f\n", $a/$b}' "$tmp/rounds" | sort -n |
    awk '{r[NR]=$1} END{ if (!NR) {print "-"; exit} printf "%.2fx (%.2f-%.2f)", r[int((NR+1)/2)], r[1], r[NR] }'
}

printf '# 1-D halo stencil, 2 ranks, %s cells, %s steps, median of %s interleaved runs (s)\n' \
  "$cells" "$steps" "$repeat"
printf '%-12s %-22s %-22s %-22s %-20s %-20s\n' form bcs-adaptive bcs-fixed ompi adaptive/o fixed/o
for form in nonblocking blocking; do
  # One line per round: "ompi adaptive fixed" (ompi 0 without Open MPI).
  : > "$tmp/rounds"
  for _ in $(seq "$repeat"); do
    o=0
    if [ $have_ompi = 1 ]; then
      o=$(timeout 300 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 "$tmp/halo_ompi" \
        "$form" "$cells" "$steps" 2>/dev/null | awk '/halo_s/{print $2}')
    fi
    a=$("$build/bin/bcs" run --timeout 300s --strobe adaptive -n 2 "$tmp/halo_bcs" "$form" "$cells" \
      "$steps" | awk '/halo_s/{print $2}')
    f=$("$build/bin/bcs" run --timeout 300s --strobe fixed -n 2 "$tmp/halo_bcs" "$form" "$cells" \
      "$steps" | awk '/halo_s/{print $2}')
    echo "${o:-0} $a $f" >> "$tmp/rounds"
  done
  col() { awk -v c="$1" '$c+0>0 {print $c}' "$tmp/rounds"; }
  printf '%-12s %-22s %-22s %-22s %-20s %-20s\n' "$form" \
    "$(col 2 | med) ($(col 2 | spread))" "$(col 3 | med) ($(col 3 | spread))" \
    "$(col 1 | med) ($(col 1 | spread))" "$(ratio 2 1)" "$(ratio 3 1)"
done
