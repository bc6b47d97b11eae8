#!/usr/bin/env bash
# Collective benchmarks under bcs, next to Open MPI measured in the same run
# (when mpicc.openmpi / mpirun.openmpi are installed). 4 ranks, but 2 for
# (d).
#
#   bench/coll.sh [BUILD_DIR] [ITERS]
#
# bench/coll_bench.c is built with "$BUILD_DIR/bin/mpicc" and mpicc.openmpi.
# bcs runs with one node manager (1nm) and with two (2nm), with the strobe
# BCS_BENCH_STROBE (adaptive by default, or fixed); BCS_BENCH_SLICE
# sets the slice (default 500us). Prints three tables:
#   (a) MPI_Allreduce of 8 B and 64 KiB: median per-iteration latency (max
#       over ranks), in us and in slices, and the ratio bcs / Open MPI;
#   (b) MPI_Reduce of 4 doubles under 0/100/1000 us of random process skew
#       (the application-bypass paper's CPU benchmark): CPU time per call
#       inside MPI_Reduce, averaged over ranks, and Open MPI / bcs;
#   (c) host time to post an MPI_Iallreduce of 8 B;
#   (d) progress without MPI calls: how often, and how soon, the result of
#       an MPI_Iallreduce appears while its ranks make no MPI call (2 ranks,
#       so that the ranks' polling leaves the node managers a core);
#   (e) large collectives: MPI_Bcast, MPI_Allgather and MPI_Allreduce of
#       16 MiB, mean time per call (ITERS/20 calls, at least 3).
# ITERS (default 200) is the allreduce iteration count; skew and post run
# 5 x ITERS calls. Each measurement is repeated BCS_BENCH_REPEAT times
# (default 3, configurations interleaved) and every number shown is the
# median over the repeats: the machine is shared.
# If our mpicc cannot build the program (collectives missing from mpi.h),
# the bcs columns are skipped with a message. A run that fails is reported
# with its stderr and shown as FAIL; the script then exits 1.
# BCS_BENCH_TIMEOUT: seconds allowed per run (default 300).
# BCS_BENCH_RAW=1: also print the program's raw output lines.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
iters=${2:-200}
slice=${BCS_BENCH_SLICE:-500us}
tmo=${BCS_BENCH_TIMEOUT:-300}
repeat=${BCS_BENCH_REPEAT:-3}
np=4
sizes=(8 65536)
large=16777216
large_iters=$((iters / 20 > 3 ? iters / 20 : 3))
skews=(0 100 1000)
src=$here/bench/coll_bench.c
bcs=$build/bin/bcs
slice_us=$(awk -v s="$slice" 'BEGIN{ if (s ~ /us$/) {sub(/us$/,"",s); print s} else if (s ~ /ms$/) {sub(/ms$/,"",s); print s*1000} else print s*1e6 }')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- build -------------------------------------------------------------
have_bcs=0
if [ -x "$bcs" ] && [ -x "$build/bin/mpicc" ]; then
  if timeout 120 "$build/bin/mpicc" -O2 -std=c11 -o "$tmp/coll_bcs" "$src" 2>"$tmp/cc_bcs.err"; then
    have_bcs=1
  else
    echo "coll.sh: skipping bcs: $build/bin/mpicc cannot build bench/coll_bench.c" \
         "(are the collectives in mpi-shim yet?):" >&2
    head -n 8 "$tmp/cc_bcs.err" | sed 's/^/  /' >&2
  fi
else
  echo "coll.sh: skipping bcs: build first ($bcs / $build/bin/mpicc missing)" >&2
fi
have_ompi=0
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  if timeout 120 mpicc.openmpi -O2 -std=c11 -o "$tmp/coll_ompi" "$src" 2>"$tmp/cc_ompi.err"; then
    have_ompi=1
  else
    echo "coll.sh: skipping Open MPI: mpicc.openmpi failed:" >&2
    head -n 8 "$tmp/cc_ompi.err" | sed 's/^/  /' >&2
  fi
else
  echo "coll.sh: Open MPI not installed (BCS_WITH_PEERS=1 deploy/install-deps.sh); bcs only" >&2
fi
if [ $have_bcs = 0 ] && [ $have_ompi = 0 ]; then
  echo "coll.sh: nothing to run" >&2
  exit 1
fi

# ---- run -----------------------------------------------------------------
# Each configuration appends the program's output lines to $tmp/<config>.
configs=()
[ $have_bcs = 1 ] && configs+=(bcs1 bcs2)
[ $have_ompi = 1 ] && configs+=(ompi)
failed=0

run_np=$np  # ranks for run(); (d) sets 2
run() {  # config mode args...
  local cfg=$1 rc=0
  shift
  case $cfg in
    bcs1|bcs2)
      timeout "$tmo" "$bcs" run --timeout "$((tmo - 10))s" -n $run_np --nodes "${cfg#bcs}" \
        --slice "$slice" --strobe "${BCS_BENCH_STROBE:-adaptive}" "$tmp/coll_bcs" "$@" \
        >>"$tmp/$cfg" 2>"$tmp/err" || rc=$? ;;
    ompi)
      # Open MPI's default on one host: ob1 + vader shared memory (with CMA).
      timeout "$tmo" mpirun.openmpi --allow-run-as-root --oversubscribe -np $run_np \
        "$tmp/coll_ompi" "$@" >>"$tmp/$cfg" 2>"$tmp/err" || rc=$? ;;
  esac
  if [ $rc != 0 ]; then
    failed=1
    echo "coll.sh: $cfg $* failed (exit $rc):" >&2
    tail -n 8 "$tmp/err" | sed 's/^/  /' >&2
  fi
}

for cfg in "${configs[@]}"; do : >"$tmp/$cfg"; done
for ((rep = 0; rep < repeat; ++rep)); do
  for cfg in "${configs[@]}"; do
    for s in "${sizes[@]}"; do run "$cfg" allreduce "$s" "$iters"; done
    for k in "${skews[@]}"; do run "$cfg" skew "$k" "$((iters * 5))"; done
    run "$cfg" post "$((iters * 5))"
    run "$cfg" large "$large" "$large_iters"
    run_np=2
    run "$cfg" progress "$iters"
    run_np=$np
  done
done

# get CONFIG MODE KEY FIELD: the median over the repeats of field FIELD of
# the lines "MODE KEY ..." ("" if none). For post and progress, KEY is
# ignored.
get() {
  [ -f "$tmp/$1" ] || { echo ""; return; }
  awk -v m="$2" -v k="$3" -v f="$4" '$1==m && (m=="post" || m=="progress" || $2==k) && $f!="-" {print $f}' "$tmp/$1" |
    sort -g | awk '{v[NR] = $1} END{ if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# Formatting in awk: "" -> FAIL (configuration ran) or - (not run).
ran() { case " ${configs[*]} " in *" $1 "*) echo 1 ;; *) echo 0 ;; esac; }
r_b1=$(ran bcs1); r_b2=$(ran bcs2); r_o=$(ran ompi)

fmt_awk='
function v(x, r)   { return x != "" ? sprintf("%.2f", x) : (r ? "FAIL" : "-") }
function sl(x)     { return x != "" ? sprintf("%.2f", x / slus) : "-" }
function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.1fx", a / b) : "-" }
'

printf '# %d ranks, %s allreduce / %s skew and post iterations, slice %s, median of %d runs\n' \
  "$np" "$iters" "$((iters * 5))" "$slice" "$repeat"
echo "# bcs-1nm: 1 node manager, bcs-2nm: 2; ompi: Open MPI, --oversubscribe (yields when idle)"
echo
echo "(a) MPI_Allreduce (SUM of doubles): median per-iteration latency in us (max over ranks)"
printf '%8s %11s %7s %11s %7s %9s %10s %10s\n' bytes bcs-1nm slices bcs-2nm slices ompi \
  bcs1/ompi bcs2/ompi
for s in "${sizes[@]}"; do
  awk -v s="$s" -v b1="$(get bcs1 allreduce "$s" 4)" -v b2="$(get bcs2 allreduce "$s" 4)" \
      -v o="$(get ompi allreduce "$s" 4)" -v slus="$slice_us" \
      -v rb1="$r_b1" -v rb2="$r_b2" -v ro="$r_o" "$fmt_awk"'BEGIN{
    printf "%8d %11s %7s %11s %7s %9s %10s %10s\n", s, v(b1, rb1), sl(b1), v(b2, rb2), sl(b2),
      v(o, ro), ratio(b1, o), ratio(b2, o) }'
done
echo
echo "(b) MPI_Reduce, 4 doubles, random skew 0..MAX us: CPU us per call inside MPI_Reduce"
echo "    (thread CPU time, mean per rank, averaged over ranks; target: ompi/bcs >= 5x at 1000)"
printf '%8s %11s %11s %9s %12s %12s\n' max-skew bcs-1nm bcs-2nm ompi ompi/bcs1 ompi/bcs2
for k in "${skews[@]}"; do
  awk -v k="$k" -v b1="$(get bcs1 skew "$k" 3)" -v b2="$(get bcs2 skew "$k" 3)" \
      -v o="$(get ompi skew "$k" 3)" -v rb1="$r_b1" -v rb2="$r_b2" -v ro="$r_o" "$fmt_awk"'BEGIN{
    printf "%8d %11s %11s %9s %12s %12s\n", k, v(b1, rb1), v(b2, rb2), v(o, ro), ratio(o, b1), ratio(o, b2) }'
done
echo "    same runs, us: wall inside MPI_Reduce (all ranks / non-root ranks),"
echo "    CPU inside it on the root, CPU of the window (inside the call + other threads"
echo "    of the rank over skew delay + reduce + catch-up)"
printf '%8s %-26s %-26s %-26s\n' max-skew "bcs-1nm wall/nr/root/win" "bcs-2nm wall/nr/root/win" \
  "ompi wall/nr/root/win"
for k in "${skews[@]}"; do
  line=$(printf '%8d' "$k")
  for cfg in bcs1 bcs2 ompi; do
    w=$(get $cfg skew "$k" 4); nr=$(get $cfg skew "$k" 11)
    r=$(get $cfg skew "$k" 8); x=$(get $cfg skew "$k" 6)
    if [ -n "$w" ]; then
      cell=$(awk -v w="$w" -v nr="$nr" -v r="$r" -v x="$x" 'BEGIN{printf "%.0f/%.0f/%.1f/%.1f", w, nr, r, x}')
    elif [ "$(ran $cfg)" = 1 ]; then cell=FAIL; else cell=-; fi
    line+=$(printf ' %-26s' "$cell")
  done
  echo "$line"
done
echo
echo "(c) MPI_Iallreduce 8 B: host time of the posting call alone, us, over all ranks' calls"
echo "    (target for bcs: <= 0.5 us; includes one clock read, see timer)"
printf '%8s %9s %9s %9s %9s\n' impl avg median min timer
for cfg in bcs1 bcs2 ompi; do
  name=$(case $cfg in bcs1) echo bcs-1nm ;; bcs2) echo bcs-2nm ;; ompi) echo ompi ;; esac)
  awk -v n="$name" -v a="$(get $cfg post - 2)" -v m="$(get $cfg post - 3)" \
      -v lo="$(get $cfg post - 4)" -v t="$(get $cfg post - 5)" -v r="$(ran $cfg)" "$fmt_awk"'BEGIN{
    printf "%8s %9s %9s %9s %9s\n", n, v(a, r), v(m, r), v(lo, r), v(t, r) }'
done

echo
echo "(d) MPI_Iallreduce 8 B, 2 ranks, no MPI call until MPI_Wait: % of iterations whose"
echo "    result appeared within 2000 us, and the median time it took (over those), us"
printf '%8s %9s %9s\n' impl appeared median
for cfg in bcs1 bcs2 ompi; do
  name=$(case $cfg in bcs1) echo bcs-1nm ;; bcs2) echo bcs-2nm ;; ompi) echo ompi ;; esac)
  awk -v n="$name" -v p="$(get $cfg progress - 2)" -v m="$(get $cfg progress - 3)" \
      -v r="$(ran $cfg)" "$fmt_awk"'BEGIN{
    printf "%8s %8s%% %9s\n", n, v(p, r), (m != "" ? sprintf("%.1f", m) : "-") }'
done

echo
echo "(e) $large B collectives, $np ranks: mean time per call, ms (max over ranks)"
printf '%10s %9s %9s %9s %10s %10s\n' op bcs-1nm bcs-2nm ompi bcs1/ompi bcs2/ompi
f=3
for op in bcast allgather allreduce; do
  awk -v op="$op" -v b1="$(get bcs1 large "$large" $f)" -v b2="$(get bcs2 large "$large" $f)" \
      -v o="$(get ompi large "$large" $f)" -v rb1="$r_b1" -v rb2="$r_b2" -v ro="$r_o" "$fmt_awk"'
    function ms(x, r) { return x != "" ? sprintf("%.2f", x / 1000) : (r ? "FAIL" : "-") }
    BEGIN{ printf "%10s %9s %9s %9s %10s %10s\n", op, ms(b1, rb1), ms(b2, rb2), ms(o, ro),
      ratio(b1, o), ratio(b2, o) }'
  f=$((f + 1))
done

if [ "${BCS_BENCH_RAW:-0}" = 1 ]; then
  echo
  echo "# raw output (see bench/coll_bench.c for the fields)"
  for cfg in "${configs[@]}"; do sed "s/^/$cfg: /" "$tmp/$cfg"; done
fi
exit $failed
