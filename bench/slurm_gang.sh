#!/usr/bin/env bash
# Slurm's own gang scheduler beside bcs's (issue 43, acceptance 3): the mix
# of bench/gang.sh (one long 2-rank blocking halo stencil submitted first,
# then three short 2-rank jobs: a compute loop, an 8-byte allreduce loop, a
# 4 MiB allreduce loop), scaled up so that Slurm's quanta (seconds) are
# small against the jobs, run
#   1. under a one-node Slurm (munged, slurmctld, slurmd on this machine, in
#      a network namespace of their own with only loopback, from a generated
#      slurm.conf): FIFO (PreemptMode=OFF, OverSubscribe=NO) and gang
#      scheduling (PreemptMode=SUSPEND,GANG, SchedulerTimeSlice at its
#      minimum, 5 s, partition OverSubscribe=FORCE:2: two jobs time-sliced
#      on the node's 2 CPUs); every job is an sbatch job (-n 2) whose script
#      runs `bcs run -n 2 --nodes 2 PROGRAM ARGS` (bcs's embedded cluster:
#      its own bcs-mm and two bcs-nm inside the job);
#   2. on a standing bcs cluster (bench/cluster.sh: bcs-mm and 2 bcs-nm):
#      --mpl 1 (FIFO), --mpl 2 --quantum 10ms (gang) and --policy bcs.
# Each job's time alone is measured first under each system's FIFO (so the
# Slurm figures include sbatch and the embedded cluster's start). Prints per
# configuration: makespan, mean response time (submission to end), mean
# bounded slowdown (response / max(alone, 0.1 s), at least 1), the ratios to
# its own FIFO, and for Slurm the SchedulerTimeSlice used and how often the
# jobs were seen SUSPENDED (squeue, every 0.5 s: that the gang scheduler
# really time-sliced). One run of each (the mix takes minutes).
#
#   bench/slurm_gang.sh [BUILD_DIR]      (root; about 20 minutes)
#
# Sizes (defaults: about 15 s alone per short job, 120 s the long one, on a
# 2-vCPU machine): BCS_SG_LONG_STEPS, BCS_SG_SHORT_WORK, BCS_SG_SMALL_ITERS,
# BCS_SG_LARGE_ITERS; BCS_SG_SLICE overrides the time slice (seconds, >= 5).
# Needs slurm-wlm and munge (deploy/install-deps.sh with BCS_WITH_DEPLOY=1).
# Exit 77 when it cannot run here (not root, Slurm or munge missing).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
bin=$build/bin

say() { echo "slurm_gang: $*" >&2; }
skip() { say "skipped: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root (slurmd, a network namespace)"
for c in slurmctld slurmd munged sbatch squeue scontrol sinfo ip unshare; do
  command -v "$c" >/dev/null || skip "$c not installed (BCS_WITH_DEPLOY=1 deploy/install-deps.sh)"
done
for b in bcs bcs-mm bcs-nm mpicc; do
  [[ -x $bin/$b ]] || { say "missing $bin/$b: build first"; exit 1; }
done

slice=${BCS_SG_SLICE:-5}  # slurm.conf(5): SchedulerTimeSlice "must be between 5 seconds and 65533 seconds"
long_steps=${BCS_SG_LONG_STEPS:-360000}
short_work=${BCS_SG_SHORT_WORK:-5400000000}
small_iters=${BCS_SG_SMALL_ITERS:-128000}
large_iters=${BCS_SG_LARGE_ITERS:-1500}

tmp=$(mktemp -d /tmp/bcs-slurm-gang.XXXXXX)
chmod 755 "$tmp"  # the job scripts (run by slurmstepd) read and write here
ns=bcs-sg-$$
ns_made=0
spids=()  # munged, slurmctld, slurmd: stopped in reverse order
# shellcheck source=bench/cluster.sh
. "$here/bench/cluster.sh"   # cluster_start/cluster_stop, $pids; its EXIT trap is replaced below

stop_pids() {  # stops the given PIDs (TERM, then KILL after 10 s)
  local p i
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do
    for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}
slurm_stop() {
  local i rev=()
  for ((i = ${#spids[@]} - 1; i >= 0; i--)); do rev+=("${spids[i]}"); done
  ((${#rev[@]})) && stop_pids "${rev[@]}"
  spids=()
  # Whatever is left in our namespace (a slurmstepd, a job's ranks) is ours.
  if ((ns_made)); then
    for sig in TERM KILL; do
      for p in $(ip netns pids "$ns" 2>/dev/null); do kill -"$sig" "$p" 2>/dev/null || true; done
      sleep 0.5
    done
  fi
}
teardown() {
  local rc=$?
  set +e
  cluster_stop
  slurm_stop
  if [[ $rc != 0 ]]; then
    for f in "$tmp"/slurmctld.log "$tmp"/slurmd.log "$tmp"/daemons.log "$tmp"/*.out; do
      [[ -s $f ]] && { echo "--- $f (last 20 lines)" >&2; tail -n 20 "$f" >&2; }
    done
  fi
  ((ns_made)) && ip netns del "$ns" 2>/dev/null
  rm -rf "$tmp"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
# shellcheck source=bench/gang_mix.sh
. "$here/bench/gang_mix.sh"

# ------------------------------------------------------------------ Slurm
ip netns add "$ns"; ns_made=1
ip -n "$ns" link set lo up
# An address besides loopback: Slurm's daemons bind with getaddrinfo's
# AI_ADDRCONFIG, which finds nothing on a host with only loopback.
addr=10.79.$(($$ % 250)).1
ip -n "$ns" link add v0 type veth peer name v1  # (no dummy module here)
ip -n "$ns" addr add "$addr/24" dev v0
ip -n "$ns" link set v1 up
ip -n "$ns" link set v0 up
in_ns() { timeout 30 ip netns exec "$ns" "$@"; }

mkdir -m 711 "$tmp/munge"
head -c 1024 /dev/urandom > "$tmp/munge/munge.key"
chmod 400 "$tmp/munge/munge.key"
munged --foreground --force --key-file "$tmp/munge/munge.key" \
  --socket "$tmp/munge/munge.sock" --pid-file "$tmp/munge/munged.pid" \
  --seed-file "$tmp/munge/munged.seed" --log-file "$tmp/munged.log" > "$tmp/munged.out" 2>&1 &
spids+=($!)
munge_pid=$!

# slurm.conf for mode fifo or gang.
write_conf() {
  local mode=$1
  {
    echo "ClusterName=bcsgang$$"
    echo "SlurmctldHost=sg($addr)"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$tmp/munge/munge.sock"
    echo "StateSaveLocation=$tmp/ctld-$mode"
    echo "SlurmdSpoolDir=$tmp/spool-$mode"
    echo "SlurmctldPidFile=$tmp/slurmctld.pid"
    echo "SlurmdPidFile=$tmp/slurmd.pid"
    echo "SlurmctldLogFile=$tmp/slurmctld.log"
    echo "SlurmdLogFile=$tmp/slurmd.log"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    echo "DebugFlags=Gang"
    # linuxproc: a job's processes are the batch script's descendants (bcs
    # puts its daemons and ranks in process groups of their own, so
    # proctrack/pgid would not suspend them).
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SwitchType=switch/none"
    echo "MpiDefault=none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "SchedulerType=sched/builtin"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "ReturnToService=2"
    echo "SlurmdParameters=config_overrides"
    echo "KillWait=2"
    echo "InactiveLimit=0"
    echo "MinJobAge=600"
    echo "NodeName=sg NodeAddr=$addr CPUs=2 State=UNKNOWN"
    if [[ $mode == gang ]]; then
      echo "PreemptType=preempt/partition_prio"  # SUSPEND with preempt/none: "PreemptType and PreemptMode values incompatible"
      echo "PreemptMode=SUSPEND,GANG"
      echo "SchedulerTimeSlice=$slice"
      echo "PartitionName=p Nodes=sg Default=YES MaxTime=120 State=UP OverSubscribe=FORCE:2"
    else
      echo "PreemptMode=OFF"
      echo "PartitionName=p Nodes=sg Default=YES MaxTime=120 State=UP OverSubscribe=NO"
    fi
  } > "$tmp/slurm-$mode.conf"
  echo "CgroupPlugin=cgroup/v1" > "$tmp/cgroup.conf"
  echo "CgroupAutomount=no" >> "$tmp/cgroup.conf"
}

# Starts slurmctld and slurmd with the configuration of mode $1 (fresh state).
slurm_start() {
  local mode=$1 conf=$tmp/slurm-$1.conf i
  write_conf "$mode"
  mkdir -p "$tmp/ctld-$mode" "$tmp/spool-$mode"
  export SLURM_CONF=$conf
  echo "==== $mode" >> "$tmp/slurmctld.log"
  # shellcheck disable=SC2016 # $1 is the inner shell's
  ip netns exec "$ns" unshare --uts \
    bash -c 'hostname sg && exec slurmctld -D -i -f "$1"' _ "$conf" >> "$tmp/slurmctld.out" 2>&1 &
  spids+=($!)
  # shellcheck disable=SC2016 # $1 is the inner shell's
  ip netns exec "$ns" unshare --uts \
    bash -c 'hostname sg && exec slurmd -D -N sg -f "$1"' _ "$conf" >> "$tmp/slurmd.out" 2>&1 &
  spids+=($!)
  SECONDS=0
  for ((;;)); do
    [[ $(in_ns sinfo -h -N -o '%t' 2>/dev/null || true) == idle ]] && break
    ((SECONDS < 60)) || { say "the node did not come up in 60 s: $(in_ns sinfo -N 2>&1 | tr '\n' ' ')"; exit 1; }
    for p in "${spids[@]}"; do kill -0 "$p" 2>/dev/null || { say "a Slurm daemon (pid $p) exited"; exit 1; }; done
    sleep 0.2
  done
}
# Stops slurmctld and slurmd (not munged).
slurm_restart_prep() {
  local keep=() p
  for p in "${spids[@]}"; do [[ $p == "$munge_pid" ]] || keep+=("$p"); done
  local i rev=()
  for ((i = ${#keep[@]} - 1; i >= 0; i--)); do rev+=("${keep[i]}"); done
  stop_pids "${rev[@]}"
  for sig in TERM KILL; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -"$sig" "$p" 2>/dev/null || true; done
    sleep 0.3
  done
  spids=("$munge_pid")
}

# The job script: timestamps at its start and end around bcs run.
cat > "$tmp/job.sh" <<'EOF'
#!/bin/bash
name=$1; dir=$2; shift 2
date +%s.%N > "$dir/$name.s"
bcs run -n 2 --nodes 2 --timeout 30m "$@"
rc=$?
date +%s.%N > "$dir/$name.t1"
exit $rc
EOF
chmod 755 "$tmp/job.sh"

# Submits job $1 with sbatch; records the submission time; prints the job id.
sb_submit() {
  local name=$1
  rm -f "$tmp/$name.s" "$tmp/$name.t1"
  now > "$tmp/$name.t0"
  # shellcheck disable=SC2046 # the command's words
  in_ns sbatch --parsable -n 2 -J "$name" --chdir="$tmp" --output="$tmp/$name.out" \
    --export=ALL,PATH="$bin:$PATH" "$tmp/job.sh" "$name" "$tmp" $(cmd_of "$name")
}
# Waits until Slurm runs none of our jobs; counts the samples (every 0.5 s)
# in which some job was SUSPENDED into $tmp/susp, and the most jobs seen
# RUNNING at once into $tmp/maxrun.
sb_wait() {
  local susp=0 maxrun=0 st r s
  SECONDS=0
  for ((;;)); do
    st=$(in_ns squeue -h -o '%T' 2>/dev/null || echo ERR)
    [[ $st == ERR ]] && { say "squeue failed"; exit 1; }
    [[ -z $st ]] && break
    r=$(grep -c '^RUNNING$' <<< "$st" || true); s=$(grep -c '^SUSPENDED$' <<< "$st" || true)
    ((r > maxrun)) && maxrun=$r
    ((s > 0)) && susp=$((susp + 1))
    ((SECONDS < 1800)) || { say "jobs still queued after 30 min"; exit 1; }
    sleep 0.5
  done
  echo "$susp" > "$tmp/susp"; echo "$maxrun" > "$tmp/maxrun"
}
resp_of() { awk -v a="$(cat "$tmp/$1.t0")" -v b="$(cat "$tmp/$1.t1")" 'BEGIN { printf "%.3f", b - a }'; }
check_ok() {  # job $1 ended and said nothing wrong
  [[ -s $tmp/$1.t1 ]] || { say "$1: the job did not finish: $(tail -3 "$tmp/$1.out" 2>/dev/null)"; exit 1; }
  if ! grep -q . "$tmp/$1.out" || grep -qiE 'error|fail|abort' "$tmp/$1.out"; then
    say "$1: output: $(tail -3 "$tmp/$1.out")"
  fi
}

# Prints "makespan mean_resp mean_bsld worst" from $tmp/NAME.t0/.t1 and the alone times $1..$4.
summarize() {
  local t0s=() t1s=() n
  for n in "${names[@]}"; do t0s+=("$(cat "$tmp/$n.t0")"); t1s+=("$(cat "$tmp/$n.t1")"); done
  awk -v t0="${t0s[*]}" -v t1="${t1s[*]}" -v al="$*" '
    BEGIN { n = split(t0, a, " "); split(t1, b, " "); split(al, c, " ")
      lo = a[1]; hi = 0; r = 0; s = 0; w = 0
      for (i = 1; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (b[i] > hi) hi = b[i]
        resp = b[i] - a[i]; r += resp; d = c[i] > 0.1 ? c[i] : 0.1; x = resp / d; s += x < 1 ? 1 : x
        if (resp / c[i] > w) w = resp / c[i] }
      printf "%.3f %.3f %.2f %.2f\n", hi - lo, r / n, s / n, w }'
}

declare -A alone res
slurm_note=""

# Slurm, FIFO: each job alone, then the mix.
say "Slurm FIFO (PreemptMode=OFF, OverSubscribe=NO): each job alone"
slurm_start fifo
for n in "${names[@]}"; do
  sb_submit "$n" > /dev/null
  sb_wait
  check_ok "$n"
  alone[slurm,$n]=$(resp_of "$n")
  say "  $n alone: ${alone[slurm,$n]} s"
done
# One mix under the running Slurm: prints its summary, leaves the suspension counts.
slurm_mix() {
  local n
  sb_submit long > /dev/null
  SECONDS=0
  until [[ -s $tmp/long.s ]]; do
    ((SECONDS < 60)) || { say "the long job did not start"; exit 1; }
    sleep 0.1
  done
  for n in compute allreduce large; do sb_submit "$n" > /dev/null; done
  sb_wait
  for n in "${names[@]}"; do check_ok "$n"; done
  summarize "${alone[slurm,long]}" "${alone[slurm,compute]}" "${alone[slurm,allreduce]}" "${alone[slurm,large]}"
}
say "Slurm FIFO: the mix"
res[slurm_fifo]=$(slurm_mix)
susp_fifo=$(cat "$tmp/susp"); maxrun_fifo=$(cat "$tmp/maxrun")
slurm_restart_prep

say "Slurm gang (PreemptMode=SUSPEND,GANG, SchedulerTimeSlice=$slice, OverSubscribe=FORCE:2): the mix"
slurm_start gang
grep -E 'SchedulerTimeSlice|PreemptMode' <(in_ns scontrol show config) | sed 's/^/slurm_gang:   /' >&2 || true
res[slurm_gang]=$(slurm_mix)
susp_gang=$(cat "$tmp/susp"); maxrun_gang=$(cat "$tmp/maxrun")
gang_log=$(sed -n '/==== gang/,$p' "$tmp/slurmctld.log")
n_susp_log=$(grep -ciE 'gang.*suspend' <<< "$gang_log" || true)
if ((susp_gang == 0)); then
  slurm_note="Slurm's gang scheduler did not time-slice: no job was ever seen SUSPENDED (at most $maxrun_gang running at once); slurmctld's log said: $(grep -iE 'gang|preempt|oversubscribe|error' <<< "$gang_log" | tail -n 5 | tr '\n' ' ')"
fi
slurm_restart_prep
slurm_stop

# ------------------------------------------------------------------- bcs
submit() {  # as in bench/gang.sh
  local name=$1
  now > "$tmp/$name.t0"
  # shellcheck disable=SC2046 # the command's words
  timeout 1800 "$bin/bcs" run --manager "127.0.0.1:$port" --host n1:1,n2:1 $(cmd_of "$name") \
    > "$tmp/$name.out" 2>&1 && now > "$tmp/$name.t1"
}
say "bcs --mpl 1 (FIFO): each job alone"
cluster_start 2 --mpl 1
for n in "${names[@]}"; do
  submit "$n" || { say "$n failed: $(tail -3 "$tmp/$n.out")"; exit 1; }
  alone[bcs,$n]=$(resp_of "$n")
  say "  $n alone: ${alone[bcs,$n]} s"
done
cluster_stop
bcs_mix() {
  cluster_start 2 "$@"
  local jobs=() p
  submit long & jobs+=($!)
  for _ in $(seq 200); do "$bin/bcs" jobs --manager "127.0.0.1:$port" | grep -q ' running ' && break; sleep 0.02; done
  for n in compute allreduce large; do submit "$n" & jobs+=($!); done
  for p in "${jobs[@]}"; do wait "$p" || { say "a job failed ($*)"; tail -3 "$tmp"/*.out >&2; exit 1; }; done
  cluster_stop
  summarize "${alone[bcs,long]}" "${alone[bcs,compute]}" "${alone[bcs,allreduce]}" "${alone[bcs,large]}"
}
say "bcs: the mix under --mpl 1"
res[bcs_fifo]=$(bcs_mix --mpl 1 --quantum 10ms)
say "bcs: the mix under --mpl 2 --quantum 10ms"
res[bcs_gang]=$(bcs_mix --mpl 2 --quantum 10ms --policy gang)
say "bcs: the mix under --mpl 2 --quantum 10ms --policy bcs"
res[bcs_bcs]=$(bcs_mix --mpl 2 --quantum 10ms --policy bcs)

# ------------------------------------------------------------------ table
echo "# Slurm gang scheduling beside bcs's: the bench/gang.sh mix, scaled (one run each)"
printf '# alone (s), Slurm (sbatch + embedded bcs run):'
for n in "${names[@]}"; do printf ' %s %s' "$n" "${alone[slurm,$n]}"; done
printf '\n# alone (s), bcs standing cluster (--mpl 1):    '
for n in "${names[@]}"; do printf ' %s %s' "$n" "${alone[bcs,$n]}"; done
echo
printf '%-40s %9s %9s %9s %7s %9s %9s %9s\n' config makespan mean_resp mean_bsld worst mk/fifo resp/fifo bsld/fifo
row() {  # label key fifo_key
  local mk mr ms wo fk fr fs _
  read -r mk mr ms wo <<< "${res[$2]}"
  read -r fk fr fs _ <<< "${res[$3]}"
  awk -v l="$1" -v mk="$mk" -v mr="$mr" -v ms="$ms" -v wo="$wo" -v fk="$fk" -v fr="$fr" -v fs="$fs" 'BEGIN {
    printf "%-40s %9.3f %9.3f %9.2f %7.2f %9.2f %9.2f %9.2f\n", l, mk, mr, ms, wo, mk / fk, mr / fr, ms / fs }'
}
row "slurm FIFO (PreemptMode=OFF)" slurm_fifo slurm_fifo
row "slurm gang (SchedulerTimeSlice=${slice}s)" slurm_gang slurm_fifo
row "bcs mpl 1 (FIFO)" bcs_fifo bcs_fifo
row "bcs gang mpl 2 q 10ms" bcs_gang bcs_fifo
row "bcs policy bcs mpl 2 q 10ms" bcs_bcs bcs_fifo
echo "# Slurm: samples (every 0.5 s) with a job SUSPENDED: FIFO $susp_fifo, gang $susp_gang; most jobs RUNNING at once: FIFO $maxrun_fifo, gang $maxrun_gang; slurmctld gang log lines about suspending: $n_susp_log"
[[ -z $slurm_note ]] || echo "# NOTE: $slurm_note"
