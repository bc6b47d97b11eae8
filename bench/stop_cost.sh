#!/usr/bin/env bash
# What stopping and restarting a job's ranks costs on this host, for gang
# scheduling (issue 43; docs/plans/issue-43-stopping.md): SIGSTOP/SIGCONT
# (per rank, and one kill(-pgid) per job), the cgroup v1 freezer, the
# cgroup v2 freezer, and two cooperative rules (the rank parks on a futex
# gate in shared memory; a signal whose handler parks it). The ranks are
# plain busy-looping (or futex-blocked) C processes that stop_cost forks
# (bench/stop_cost.c and its parts stop_cost_*.c, stop_cost.h),
# as the node manager forks its ranks; no bcs binary is used, so no build
# directory is needed.
#
#   bench/stop_cost.sh [SWITCHES]
#
# Prints, each as median and p99 over SWITCHES (default 1000) switches:
#   1. one-time freezer costs per job (mkdir, moving ranks in and out, rmdir);
#   2. a gang switch between two jobs of N = 1, 2, 4 busy ranks every 2 ms,
#      issued without waiting (the NM's time and CPU, when each incoming
#      rank ran again, how long an outgoing one went on running), and the
#      CPU a stopped rank uses over a second;
#   3. the same for N = 2, waiting until the outgoing job is confirmed
#      stopped before restarting the other (what confirming costs);
#   4. ranks blocked in FUTEX_WAIT (blocked in MPI): stop and restart, confirmed;
#   5. the cooperative restart alone: one FUTEX_WAKE of N parked ranks;
#   6. quanta of 10 and 50 ms (fewer switches: 300 and 100), N = 2;
#   7. interactions: SIGKILL of a stopped rank, re-stopping a stopped job,
#      what the parent sees (waitpid, waitid, pidfd, SIGCHLD, and the cost
#      of the NM's /proc scan on each SIGCHLD), a rank stopped inside a pipe
#      write, EINTR, a wake-up sent while stopped, children of a rank, the
#      NM copying from a stopped rank, a non-root node manager (as root).
# As root the NM's thread runs at SCHED_FIFO 1 (as bcs-sr does when it may);
# BCS_STOP_RANK_SLICE=US gives the ranks a short EEVDF slice (a woken rank
# then preempts other load at once, closer to a node of its own).
# The freezer parts are skipped, with a message, when a hierarchy is not
# mounted or not writable. Everything made is removed at the end, also on
# an interrupt: processes by PID (stop_cost's own children, and what is
# left in the cgroups it named bcs-stopcost-PID-*), then those cgroups.
# The machine is shared: quote medians of several runs, and read p99s of
# restart times as the scheduler's latency under the other load.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
k=${1:-1000}
tmp=$(mktemp -d)
prog=$tmp/stop_cost
pid=
pids=()

cleanup() {
  set +e
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null # it removes what it made
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  # Leftovers of a stop_cost that was killed: its ranks (SIGKILL on their
  # parent's death, once thawed) and its cgroups, deepest first.
  for p0 in "${pids[@]}"; do
    for root in /sys/fs/cgroup/freezer /sys/fs/cgroup/unified; do
      for d in "$root/bcs-stopcost-$p0-"*; do
        [ -d "$d" ] || continue
        for sub in $(find "$d" -mindepth 1 -type d | sort -r) "$d"; do
          [ -f "$sub/freezer.state" ] && echo THAWED > "$sub/freezer.state"
          [ -f "$sub/cgroup.freeze" ] && echo 0 > "$sub/cgroup.freeze"
          while read -r p; do kill -KILL "$p" 2>/dev/null; done < "$sub/cgroup.procs"
        done
        for sub in $(find "$d" -mindepth 1 -type d | sort -r) "$d"; do
          for _ in $(seq 50); do rmdir "$sub" 2>/dev/null && break; sleep 0.1; done
        done
      done
    done
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

b=$here/bench
${CC:-cc} -O2 -o "$prog" "$b/stop_cost.c" "$b/stop_cost_util.c" "$b/stop_cost_ranks.c" \
  "$b/stop_cost_modes.c" "$b/stop_cost_probes.c"

opts=()
[ "$(id -u)" = 0 ] && opts+=(-f)
[ -n "${BCS_STOP_RANK_SLICE:-}" ] && opts+=(-s "$BCS_STOP_RANK_SLICE")

# Freezers: say once why a part is skipped (stop_cost skips it by itself too).
for h in freezer unified; do
  d=/sys/fs/cgroup/$h
  if ! mountpoint -q "$d" 2>/dev/null; then
    echo "note: $d is not mounted: its freezer is skipped"
  elif [ ! -w "$d" ]; then
    echo "note: $d is not writable by $(id -un): its freezer is skipped"
  fi
done

run() { # stop_cost arguments...
  "$prog" "$@" &
  pid=$!
  pids+=("$pid")
  wait "$pid"
}

echo "host: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
run setup -k 200 "${opts[@]}"
echo
run switch -o -k "$k" -q 2000 -c 1000 "${opts[@]}"
echo
run switch -k "$k" -q 2000 -c 0 -r 2 "${opts[@]}"
echo
run block -k "$k" "${opts[@]}"
echo
run wake -k "$k" "${opts[@]}"
echo
run switch -o -k 300 -q 10000 -c 0 -r 2 -m sigstop,pgrp,freezer,freezer2,coop "${opts[@]}"
echo
run switch -o -k 100 -q 50000 -c 0 -r 2 -m sigstop,pgrp,freezer,freezer2,coop "${opts[@]}"
echo
run probe "${opts[@]}"
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
