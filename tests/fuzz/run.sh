#!/usr/bin/env bash
# Coverage-guided fuzzing of the fuzz targets (README.md here): configures a
# clang build with -DBCS_FUZZ=ON (ASan + UBSan + libFuzzer) in
# FUZZ_BUILD_DIR (default ./build-fuzz), builds only the fuzz programs and
# runs each for SECONDS (default 60), keeping its corpus in the build dir
# so that later runs start where this one stopped. Prints each target's
# executions and coverage; exits non-zero on any finding (the crashing input
# is saved next to the corpus and named in the output).
#   tests/fuzz/run.sh [SECONDS]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
build=${FUZZ_BUILD_DIR:-$here/build-fuzz}
BCS_WITH_FUZZ=1 "$here/deploy/install-deps.sh"
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBCS_FUZZ=ON >/dev/null
fi
cmake --build "$build" -j"${BUILD_JOBS:-2}" --target fuzz_wire fuzz_ring fuzz_record
status=0
for t in wire ring record; do
  corpus=$build/corpus/$t
  mkdir -p "$corpus" "$build/findings/$t"
  log=$build/fuzz_$t.log
  echo "fuzz_$t: ${secs} s"
  if "$build/bin/fuzz_$t" -max_total_time="$secs" -max_len=4096 -len_control=0 -timeout=20 -rss_limit_mb=2048 \
      -artifact_prefix="$build/findings/$t/" -print_final_stats=1 "$corpus" >"$log" 2>&1; then
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | sed "s/^/  /"
    tail -n 40 "$log" | grep -E "^#[0-9]+ +DONE" | sed "s/^/  /" || true
  else
    status=1
    echo "fuzz_$t: FINDING (log: $log)"
    grep -E "ERROR|SUMMARY|fuzz finding|fakes:|Test unit written" "$log" | head -20 | sed "s/^/  /"
  fi
done
exit $status
