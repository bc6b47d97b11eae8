#!/usr/bin/env bash
# Coscheduling benchmark (issue 43): several jobs on one standing cluster.
#
# Part 1, space sharing: two one-rank compute jobs (compute.c, a fixed
# amount of arithmetic) submitted together, each to its own node manager
# (--host n1:1 and --host n2:1), under `bcs-mm --space-share off` (one job
# at a time, bcs before issue 43: FIFO) and on (the default: jobs on
# disjoint node managers run at once). Prints each job's response time
# (submission to exit), the makespan, and the ratio on/off. With one core
# per job the ideal ratio is 0.5.
#
# Part 2, gang scheduling: the mix gang scheduling exists for, on the same
# two node managers (every job 2 ranks, --host n1:1,n2:1): one long job (a
# blocking halo stencil, about eight times the others) submitted first,
# then three short ones of other kinds (a compute loop, an 8-byte
# allreduce loop, a 4 MiB allreduce loop: large messages). Under --mpl 1
# (jobs sharing node managers run one after another: FIFO) and gang
# scheduling at --mpl 2 and 4, quanta 2, 10 and 50 ms: makespan, mean
# response time, mean bounded slowdown (response / max(alone, 0.1 s), at
# least 1), each job's share of the time since it started that it was not
# suspended (the manager's SHARE), and what stopping or continuing a job's
# ranks cost its node managers per switch (median and p99 over the jobs'
# switches). Each job's time alone is measured first, in the same run.
#
#   bench/gang.sh [BUILD_DIR] [WORK_ITERATIONS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
work=${2:-400000000}
bin=$build/bin
tmp=$(mktemp -d)
# shellcheck source=bench/cluster.sh
. "$here/bench/cluster.sh"

"$bin/mpicc" -O2 -o "$tmp/compute" "$here/bench/compute.c"
now() { date +%s.%N; }
repeat=${BCS_BENCH_REPEAT:-3}

# Runs the two jobs on a fresh 2-node-manager cluster started with "$@";
# prints "makespan respA respB" in seconds.
two_jobs() {
  cluster_start 2 "$@"
  local t0 a b ta tb
  t0=$(now)
  ( timeout 600 "$bin/bcs" run --manager "127.0.0.1:$port" --host n1:1 \
      "$tmp/compute" work "$work" > "$tmp/a.out" && now > "$tmp/a.t" ) &
  a=$!
  ( timeout 600 "$bin/bcs" run --manager "127.0.0.1:$port" --host n2:1 \
      "$tmp/compute" work "$work" > "$tmp/b.out" && now > "$tmp/b.t" ) &
  b=$!
  wait "$a" || { echo "job A failed" >&2; exit 1; }
  wait "$b" || { echo "job B failed" >&2; exit 1; }
  cluster_stop
  ta=$(cat "$tmp/a.t"); tb=$(cat "$tmp/b.t")
  awk -v t0="$t0" -v a="$ta" -v b="$tb" \
    'BEGIN { m = a > b ? a : b; printf "%.3f %.3f %.3f\n", m - t0, a - t0, b - t0 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '# space sharing: two 1-rank compute jobs (%s iterations each) on disjoint node managers\n' "$work"
printf '# median of %s runs, seconds\n' "$repeat"
printf '%-22s %10s %10s %10s\n' mode makespan resp_A resp_B
declare -A mk
for mode in off on; do
  : > "$tmp/runs"
  for _ in $(seq "$repeat"); do two_jobs --space-share "$mode" >> "$tmp/runs"; done
  m=$(cut -d' ' -f1 "$tmp/runs" | median)
  ra=$(cut -d' ' -f2 "$tmp/runs" | median)
  rb=$(cut -d' ' -f3 "$tmp/runs" | median)
  mk[$mode]=$m
  printf '%-22s %10s %10s %10s\n' "space-share $mode" "$m" "$ra" "$rb"
done
awk -v on="${mk[on]}" -v off="${mk[off]}" \
  'BEGIN { printf "makespan on/off: %.2fx (target <= 0.6x; ideal 0.5x)\n", on / off }'

# ------------------------------------------------------------ part 2: gang
"$bin/mpicc" -O2 -o "$tmp/halo" "$here/bench/halo.c"
"$bin/mpicc" -O2 -o "$tmp/coll" "$here/bench/coll_bench.c"
short_work=${BCS_GANG_SHORT_WORK:-100000000}
long_steps=${BCS_GANG_LONG_STEPS:-10000}
small_iters=${BCS_GANG_SMALL_ITERS:-4000}
large_iters=${BCS_GANG_LARGE_ITERS:-25}
names=(long compute allreduce large)
cmd_of() {
  case $1 in
    long) echo "$tmp/halo blocking 100000 $long_steps" ;;
    compute) echo "$tmp/compute work $short_work" ;;
    allreduce) echo "$tmp/coll allreduce 8 $small_iters" ;;
    large) echo "$tmp/coll allreduce 4M $large_iters" ;;
  esac
}
# Runs job $1 (a name) on the cluster, recording its submission and end.
submit() {
  local name=$1
  now > "$tmp/$name.t0"
  # shellcheck disable=SC2046 # the command's words
  timeout 900 "$bin/bcs" run --manager "127.0.0.1:$port" --host n1:1,n2:1 $(cmd_of "$name") \
    > "$tmp/$name.out" 2>&1 && now > "$tmp/$name.t1"
}

declare -A alone
cluster_start 2 --mpl 1
for n in "${names[@]}"; do
  submit "$n" || { echo "$n failed:"; cat "$tmp/$n.out"; exit 1; }
  alone[$n]=$(awk -v a="$(cat "$tmp/$n.t0")" -v b="$(cat "$tmp/$n.t1")" 'BEGIN { printf "%.3f", b - a }')
done
cluster_stop
echo
printf '# gang scheduling: 4 jobs of 2 ranks on the same 2 node managers; alone (s):'
for n in "${names[@]}"; do printf ' %s %s' "$n" "${alone[$n]}"; done
echo
printf '%-16s %9s %9s %9s  %-31s %9s %9s\n' config makespan mean_resp mean_bsld \
  "share long/short/short/short" sw_p50_us sw_p99_us

declare -A res
mix() {  # mpl quantum -> prints a row; sets res[mpl,q]
  local mpl=$1 q=$2
  cluster_start 2 --mpl "$mpl" --quantum "$q"
  local jobs=()  # not `pids`: cluster.sh's daemons are in that one
  submit long & jobs+=($!)
  # The long job first: the short ones come once it runs.
  for _ in $(seq 200); do "$bin/bcs" jobs --manager "127.0.0.1:$port" | grep -q ' running ' && break; sleep 0.02; done
  for n in compute allreduce large; do submit "$n" & jobs+=($!); done
  for p in "${jobs[@]}"; do wait "$p" || { echo "a job failed (mpl $mpl, quantum $q)"; tail -3 "$tmp"/*.out; exit 1; }; done
  "$bin/bcs" jobs --manager "127.0.0.1:$port" > "$tmp/jobs"
  cluster_stop
  local t0s=() t1s=() shares=() p50s=() p99s=()
  for n in "${names[@]}"; do t0s+=("$(cat "$tmp/$n.t0")"); t1s+=("$(cat "$tmp/$n.t1")"); done
  # SHARE, SW_P50_US, SW_P99_US are the last three columns; job 1 is the
  # long one, 2-4 the short ones (in the order they reached the manager).
  mapfile -t shares < <(awk 'NR > 1 { print $(NF-2) }' "$tmp/jobs")
  read -r p50 p99 < <(awk 'NR > 1 && $(NF-1) != "-" { print $(NF-1), $NF }' "$tmp/jobs" |
    sort -g | awk '{ a[NR] = $1; if ($2 > m) m = $2 } END { if (NR) print a[int((NR + 1) / 2)], m; else print "-", "-" }')
  local line
  line=$(awk -v t0="${t0s[*]}" -v t1="${t1s[*]}" -v al="${alone[long]} ${alone[compute]} ${alone[allreduce]} ${alone[large]}" '
    BEGIN { n = split(t0, a, " "); split(t1, b, " "); split(al, c, " ")
      lo = a[1]; hi = 0; r = 0; s = 0
      for (i = 1; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (b[i] > hi) hi = b[i]
        resp = b[i] - a[i]; r += resp; d = c[i] > 0.1 ? c[i] : 0.1; x = resp / d; s += x < 1 ? 1 : x }
      printf "%.3f %.3f %.2f", hi - lo, r / n, s / n }')
  read -r mk mr ms <<< "$line"
  res[$mpl,$q]="$mk $mr"
  printf '%-16s %9s %9s %9s  %-31s %9s %9s\n' "mpl $mpl q $q" "$mk" "$mr" "$ms" \
    "$(IFS=/; echo "${shares[*]}")" "$p50" "$p99"
}
mix 1 10ms
for q in 2ms 10ms 50ms; do mix 2 "$q"; done
mix 4 10ms
read -r fk fr <<< "${res[1,10ms]}"
read -r gk gr <<< "${res[2,10ms]}"
awk -v fk="$fk" -v fr="$fr" -v gk="$gk" -v gr="$gr" 'BEGIN {
  printf "mpl 2 (10 ms) vs FIFO: mean response %.2fx (target <= 0.6x), makespan %.2fx (target <= 1.05x)\n", gr / fr, gk / fk }'
echo "buffered coscheduling's own policy: not implemented yet (issue 43)"
