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
# The same under buffered coscheduling's own policy (`bcs-mm --policy
# bcs`: the rows not running wait at idle priority in a cpu cgroup instead
# of stopped, so they compute in the running row's gaps). Every figure is
# the median of BCS_BENCH_REPEAT (3) runs, the configurations interleaved;
# `worst` is the largest response / time alone over the jobs (the issue's
# bound: MPL times the time alone plus 5 %).
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
short_work=${BCS_GANG_SHORT_WORK:-100000000}
long_steps=${BCS_GANG_LONG_STEPS:-10000}
small_iters=${BCS_GANG_SMALL_ITERS:-4000}
large_iters=${BCS_GANG_LARGE_ITERS:-25}
# shellcheck source=bench/gang_mix.sh
. "$here/bench/gang_mix.sh"
# Runs job $1 (a name) on the cluster, recording its submission and end.
submit() {
  local name=$1
  now > "$tmp/$name.t0"
  # bcs run's own --timeout (running time only) ends a hung job with the
  # manager's report of what its ranks wait for; timeout(1) is the guard.
  # shellcheck disable=SC2046 # the command's words
  timeout 900 "$bin/bcs" run --manager "127.0.0.1:$port" --host n1:1,n2:1 \
    --timeout "${BCS_GANG_JOB_TIMEOUT:-120s}" $(cmd_of "$name") \
    > "$tmp/$name.out" 2>&1 && now > "$tmp/$name.t1"
}

declare -A alone
: > "$tmp/alone"
cluster_start 2 --mpl 1
for _ in $(seq "$repeat"); do
  for n in "${names[@]}"; do
    submit "$n" || { echo "$n failed:"; cat "$tmp/$n.out"; exit 1; }
    awk -v n="$n" -v a="$(cat "$tmp/$n.t0")" -v b="$(cat "$tmp/$n.t1")" 'BEGIN { printf "%s %.3f\n", n, b - a }' >> "$tmp/alone"
  done
done
cluster_stop
for n in "${names[@]}"; do alone[$n]=$(awk -v n="$n" '$1 == n { print $2 }' "$tmp/alone" | median); done
echo
printf '# gang scheduling: 4 jobs of 2 ranks on the same 2 node managers; alone (s, median of %s):' "$repeat"
for n in "${names[@]}"; do printf ' %s %s' "$n" "${alone[$n]}"; done
echo
printf '# each row: medians of %s runs, the configurations interleaved; share: of the time since\n' "$repeat"
printf '# the job started, the part it was in the running row (gang: not stopped; bcs: not in the\n'
printf '# background, where it may still compute); worst: max over jobs of response / alone;\n'
printf "# util: CPU time the jobs' ranks used (wait4) / (CPUs x makespan)\n"
printf '%-18s %9s %9s %9s %7s %5s  %-31s %9s %9s\n' config makespan mean_resp mean_bsld worst util \
  "share long/short/short/short" sw_p50_us sw_p99_us

# One run of the mix under `bcs-mm --mpl $1 --quantum $2 --policy $3`:
# appends "makespan mean_resp mean_bsld worst shares p50 p99" to $tmp/mix.$1.$2.$3.
mix_once() {
  local mpl=$1 q=$2 policy=$3
  cluster_start 2 --mpl "$mpl" --quantum "$q" --policy "$policy"
  local jobs=()  # not `pids`: cluster.sh's daemons are in that one
  submit long & jobs+=($!)
  # The long job first: the short ones come once it runs.
  for _ in $(seq 200); do "$bin/bcs" jobs --manager "127.0.0.1:$port" | grep -q ' running ' && break; sleep 0.02; done
  for n in compute allreduce large; do submit "$n" & jobs+=($!); done
  for p in "${jobs[@]}"; do wait "$p" || { echo "a job failed ($policy, mpl $mpl, quantum $q)"; tail -n 5 "$tmp"/*.out; exit 1; }; done
  "$bin/bcs" jobs --manager "127.0.0.1:$port" > "$tmp/jobs"
  cluster_stop
  local t0s=() t1s=() shares=()
  for n in "${names[@]}"; do t0s+=("$(cat "$tmp/$n.t0")"); t1s+=("$(cat "$tmp/$n.t1")"); done
  # SHARE, SW_P50_US, SW_P99_US, CPU_S are the last four columns; job 1 is
  # the long one, 2-4 the short ones (in the order they reached the manager).
  mapfile -t shares < <(awk 'NR > 1 { print $(NF-3) }' "$tmp/jobs")
  local p50 p99 cpu
  cpu=$(awk 'NR > 1 { s += $NF } END { printf "%.3f", s }' "$tmp/jobs")
  read -r p50 p99 < <(awk 'NR > 1 && $(NF-2) != "-" { print $(NF-2), $(NF-1) }' "$tmp/jobs" |
    sort -g | awk '{ a[NR] = $1; if ($2 > m) m = $2 } END { if (NR) print a[int((NR + 1) / 2)], m; else print "-", "-" }')
  awk -v t0="${t0s[*]}" -v t1="${t1s[*]}" -v al="${alone[long]} ${alone[compute]} ${alone[allreduce]} ${alone[large]}" \
      -v sh="$(IFS=/; echo "${shares[*]}")" -v p50="$p50" -v p99="$p99" -v cpu="$cpu" -v ncpu="$(nproc)" '
    BEGIN { n = split(t0, a, " "); split(t1, b, " "); split(al, c, " ")
      lo = a[1]; hi = 0; r = 0; s = 0; w = 0
      for (i = 1; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (b[i] > hi) hi = b[i]
        resp = b[i] - a[i]; r += resp; d = c[i] > 0.1 ? c[i] : 0.1; x = resp / d; s += x < 1 ? 1 : x
        if (resp / c[i] > w) w = resp / c[i] }
      printf "%.3f %.3f %.2f %.2f %s %s %s %.2f\n", hi - lo, r / n, s / n, w, sh, p50, p99, cpu / (ncpu * (hi - lo)) }' >> "$tmp/mix.$mpl.$q.$policy"
}

configs=("1 10ms gang" "2 2ms gang" "2 10ms gang" "2 50ms gang" "4 10ms gang"
         "2 2ms bcs" "2 10ms bcs" "2 50ms bcs" "4 10ms bcs")
for _ in $(seq "$repeat"); do
  for c in "${configs[@]}"; do
    # shellcheck disable=SC2086 # the configuration's three words
    mix_once $c
  done
done
declare -A res
for c in "${configs[@]}"; do
  read -r mpl q policy <<< "$c"
  f=$tmp/mix.$mpl.$q.$policy
  mk=$(cut -d' ' -f1 "$f" | median); mr=$(cut -d' ' -f2 "$f" | median)
  ms=$(cut -d' ' -f3 "$f" | median); wo=$(cut -d' ' -f4 "$f" | median)
  sh=$(awk -v m="$mk" '$1 == m { print $5; exit }' "$f")
  p50=$(cut -d' ' -f6 "$f" | grep -v '^-$' | median || true)
  p99=$(cut -d' ' -f7 "$f" | grep -v '^-$' | median || true)
  ut=$(cut -d' ' -f8 "$f" | median)
  res[$mpl,$q,$policy]="$mk $mr $wo"
  printf '%-18s %9s %9s %9s %7s %5s  %-31s %9s %9s\n' "$policy mpl $mpl q $q" "$mk" "$mr" "$ms" "$wo" \
    "$ut" "$sh" "${p50:--}" "${p99:--}"
done
read -r fk fr _ <<< "${res[1,10ms,gang]}"
for policy in gang bcs; do
  for mpl in 2 4; do
    read -r gk gr gw <<< "${res[$mpl,10ms,$policy]}"
    awk -v p="$policy" -v m="$mpl" -v fk="$fk" -v fr="$fr" -v gk="$gk" -v gr="$gr" -v gw="$gw" 'BEGIN {
      printf "%s mpl %d (10 ms) vs FIFO: mean response %.2fx (target <= 0.6x at mpl 2), makespan %.2fx (target <= 1.05x), worst job %.2fx its time alone (target <= %.2fx)\n",
        p, m, gr / fr, gk / fk, gw, m * 1.05 }'
  done
done
