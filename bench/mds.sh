#!/usr/bin/env bash
# MMDS overhead (issue 9; the paper's Table 6.1): a communication-heavy run
# of the halo stencil (bench/halo.c, 2 ranks, few cells, many steps: mostly
# MPI calls) with BCS_MDS off, summary and all, interleaved, REPEAT times
# each; prints the median time per setting and its ratio to off. Then the
# cost of one timed call (bench/mds_cost.c: MPI_Test on MPI_REQUEST_NULL,
# one rank), which the whole-run ratio hides in the machine's noise.
#
#   bench/mds.sh [BUILD_DIR] [CELLS] [STEPS] [REPEAT]
#
# Defaults: 20000 cells, 2000 steps, 7 repeats. The job directories go to a
# temporary directory removed at the end. The paper's targets: MMDS
# overhead <= 0.5 %.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
cells=${2:-20000}
steps=${3:-2000}
repeat=${4:-7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/bin/mpicc" -O2 -o "$tmp/halo" "$here/bench/halo.c"
"$build/bin/mpicc" -O2 -o "$tmp/cost" "$here/bench/mds_cost.c"

# BCS_MDS off / summary / all, and noemds: BCS_MDS off with the EMDS (the
# daemons' per-slice statistics, on by default) off too.
modes=(off summary all noemds)
for ((i = 0; i < repeat; ++i)); do
  for m in "${modes[@]}"; do
    for form in nonblocking blocking; do
      mds=$m emds=on
      [ "$m" = noemds ] && mds=off emds=off
      t=$(cd "$tmp" && BCS_MDS=$mds BCS_EMDS=$emds "$build/bin/bcs" run --timeout 300s --job-dir "$tmp/job-$m-$form-$i" \
            -n 2 "$tmp/halo" "$form" "$cells" "$steps" 2>/dev/null | awk '/halo_s/{print $2}') || true
      [ -n "$t" ] || { echo "mds.sh: run failed (BCS_MDS=$m $form)" >&2; exit 1; }
      echo "$t" >>"$tmp/$m-$form"
    done
  done
done

median() { sort -g "$1" | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
printf '# halo stencil, 2 ranks, %s cells, %s steps: median of %s runs (s) and ratio to BCS_MDS=off (EMDS on)\n' \
  "$cells" "$steps" "$repeat"
printf '%-12s %-9s %10s %8s  %s\n' form BCS_MDS seconds ratio "runs (s)"
# (noemds: BCS_MDS=off BCS_EMDS=off; its ratio is the EMDS's cost inverted)
for form in nonblocking blocking; do
  base=$(median "$tmp/off-$form")
  for m in "${modes[@]}"; do
    med=$(median "$tmp/$m-$form")
    printf '%-12s %-9s %10.4f %8.4f  %s\n' "$form" "$m" "$med" \
      "$(awk -v a="$med" -v b="$base" 'BEGIN{print a/b}')" "$(sort -g "$tmp/$m-$form" | tr '\n' ' ')"
  done
done

printf '\n# one timed MPI call (MPI_Test on MPI_REQUEST_NULL, 1 rank): ns per call, best loop, median of %s runs\n' "$repeat"
printf '%-9s %10s %10s  %s\n' BCS_MDS ns_per_call added "runs (ns)"
cmodes=(off summary all)
for ((i = 0; i < repeat; ++i)); do
  for m in "${cmodes[@]}"; do
    t=$(cd "$tmp" && BCS_MDS=$m "$build/bin/bcs" run --timeout 300s --job-dir "$tmp/cost-$m-$i" -n 1 \
          "$tmp/cost" 2>/dev/null | awk '/mds_call_ns/{print $2}') || true
    [ -n "$t" ] || { echo "mds.sh: run failed (BCS_MDS=$m cost)" >&2; exit 1; }
    echo "$t" >>"$tmp/cost-$m"
  done
done
base=$(median "$tmp/cost-off")
for m in "${cmodes[@]}"; do
  med=$(median "$tmp/cost-$m")
  printf '%-9s %10.2f %10.2f  %s\n' "$m" "$med" "$(awk -v a="$med" -v b="$base" 'BEGIN{print a-b}')" \
    "$(sort -g "$tmp/cost-$m" | tr '\n' ' ')"
done

# The whole-run ratios above sit inside this machine's noise (runs of the
# same setting differ by 10 % and more), so the overhead is also derived
# from what is measured precisely: the added cost of one timed call (above)
# times the calls the halo runs made (their MMDS reports), over their run
# time; and the EMDS's per-microphase and per-slice costs (micro_emds_bench)
# times the slices per second of the same runs (their slices.csv).
if command -v python3 >/dev/null && [ -x "$build/bin/micro_emds_bench" ]; then
  added_summary=$(awk -v a="$(median "$tmp/cost-summary")" -v b="$base" 'BEGIN{print a-b}')
  added_all=$(awk -v a="$(median "$tmp/cost-all")" -v b="$base" 'BEGIN{print a-b}')
  "$build/bin/micro_emds_bench" --benchmark_format=csv 2>/dev/null >"$tmp/micro.csv"
  python3 - "$tmp" "$added_summary" "$added_all" <<'PY'
import csv, glob, json, os, sys
tmp, add_summary, add_all = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ns = {}
for row in csv.reader(l for l in open(os.path.join(tmp, "micro.csv")) if l.startswith('"BM_')):
    ns[row[0]] = float(row[3])  # cpu_time, ns
calls = run = 0
for f in glob.glob(os.path.join(tmp, "job-all-*", "mmds.rank*.json")):
    r = json.load(open(f))
    calls += sum(c["stats"]["count"] for c in r["calls"])
    run += r["run_ns"]
print("\n# derived: added cost x events, over the halo runs' own counts")
if run:
    rate = calls / (run / 1e9)
    print(f"MMDS: {calls} timed calls in {run / 1e9:.3f} rank-seconds ({rate:,.0f} calls/s per rank)")
    print(f"  summary: {add_summary:.1f} ns/call -> {100 * rate * add_summary / 1e9:.3f} % of run time (target 0.5 %)")
    print(f"  all:     {add_all:.1f} ns/call -> {100 * rate * add_all / 1e9:.3f} % of run time")
slices = span = 0
for f in glob.glob(os.path.join(tmp, "job-off-*", "slices.csv")):
    rows = list(csv.DictReader(open(f)))
    if len(rows) > 1:
        slices += len(rows)
        span += int(rows[-1]["start_ns"]) - int(rows[0]["start_ns"])
if span and "BM_LocalNote" in ns:
    per_slice = 5 * ns["BM_LocalNote"] + ns["BM_SliceRecord"]
    rate = slices / (span / 1e9)
    print(f"EMDS: {rate:,.0f} slices/s; {per_slice:.0f} ns per slice per node "
          f"(5 x note {ns['BM_LocalNote']:.1f} ns + record {ns['BM_SliceRecord']:.1f} ns) "
          f"-> {100 * rate * per_slice / 1e9:.3f} % of one core (target 1.5 %; "
          "the flusher's batch, at most 10 per second, not included)")
PY
fi
