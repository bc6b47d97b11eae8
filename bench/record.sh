#!/usr/bin/env bash
# Record and replay overhead (issue 10): a communication-heavy program with
# wildcard receives (bench/anysource.c, 3 ranks, MSGS messages per worker)
# run plain, with --record and replayed, interleaved, REPEAT times each;
# prints the median time of rank 0's receive loop per setting, its ratio to
# plain (target for record: <= 1.05), and the recording's size per event.
#
#   bench/record.sh [BUILD_DIR] [MSGS] [REPEAT]
#
# Defaults: 20000 messages per worker, 7 repeats. Recordings go to a
# temporary directory removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
msgs=${2:-20000}
repeat=${3:-7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/bin/mpicc" -O2 -o "$tmp/anysource" "$here/bench/anysource.c"
bcs=$build/bin/bcs

for form in recv iprobe; do
  for ((i = 0; i < repeat; ++i)); do
    t=$("$bcs" run --timeout 300s -n 3 "$tmp/anysource" "$form" "$msgs" | awk '/anysource_s/{print $2}')
    echo "$t" >>"$tmp/plain-$form"
    rec=$tmp/rec-$form-$i
    t=$("$bcs" run --timeout 300s --record "$rec" -n 3 "$tmp/anysource" "$form" "$msgs" | awk '/anysource_s/{print $2}')
    echo "$t" >>"$tmp/record-$form"
    t=$("$bcs" replay "$rec" --timeout 300s | awk '/anysource_s/{print $2}')
    echo "$t" >>"$tmp/replay-$form"
  done
done

median() { sort -g "$1" | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
printf '# anysource, 3 ranks, %s messages per worker: median of %s runs (s), ratio to plain\n' "$msgs" "$repeat"
printf '%-7s %-7s %10s %8s  %s\n' form mode seconds ratio "runs (s)"
for form in recv iprobe; do
  base=$(median "$tmp/plain-$form")
  for m in plain record replay; do
    med=$(median "$tmp/$m-$form")
    printf '%-7s %-7s %10.4f %8.4f  %s\n' "$form" "$m" "$med" \
      "$(awk -v a="$med" -v b="$base" 'BEGIN{print a/b}')" "$(sort -g "$tmp/$m-$form" | tr '\n' ' ')"
  done
done
printf '\n# recording size (the last repeat): bytes per recorded event\n'
for form in recv iprobe; do
  rec=$tmp/rec-$form-$((repeat - 1))
  events=$("$bcs" replay "$rec" --info | awk '/rank [0-9]+: [0-9]+ events/{n += $3} END{print n}')
  bytes=$(cat "$rec"/rank*.rec | wc -c)
  printf '%-7s %9s events %10s bytes  %6.2f bytes/event\n' "$form" "$events" "$bytes" \
    "$(awk -v b="$bytes" -v e="$events" 'BEGIN{print e ? b / e : 0}')"
done
