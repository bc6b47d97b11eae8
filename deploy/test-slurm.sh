#!/usr/bin/env bash
# A three-host Slurm cluster on this machine, and bcs jobs submitted to it
# with deploy/slurm/bcs.sbatch, exactly as an operator's users would.
#
#   deploy/test-slurm.sh [BUILD_DIR]        (root; default BUILD_DIR: ./build)
#
# The hosts are network namespaces (h1, h2, h3), each with its own UTS
# namespace (so `hostname` says h1, h2, h3), joined by a bridge in a fourth
# namespace that also runs slurmctld. One munged serves them all (a shared
# munge key, as on a real cluster); one slurmd per host (`slurmd -N hN`).
# The namespaces share /dev/shm, so UCX is forced onto TCP (UCX_TLS=tcp):
# the daemons of different hosts talk over the bridge, as over a network.
#
# The story, each step checked:
#   1. ring, ping-pong and collectives on 3 hosts x 2 ranks: correct output,
#      exit code 0; the ring again with `sbatch --wrap "bcs run --slurm ..."`,
#      and a rank exiting 3 under `salloc ... bcs run --slurm` (salloc says 3);
#   2. a rank that exits with code 3: `sbatch --wait` and the Slurm job
#      both say 3;
#   3. scancel in the middle of a job: no bcs daemon or rank is left on any
#      host (the time it took is printed; more than 10 s fails), and then
#      the hosts run nothing but their slurmd;
#   4. no process's command line held a job's token at any point we looked
#      (every 0.2 s of every job, /proc/*/cmdline), and no log or job
#      output holds one afterwards.
# Everything started here is stopped by PID, the namespaces are deleted and
# the state directory removed, also when a step fails (EXIT trap).
# Needs: slurm-wlm, munge, iproute2 (deploy/install-deps.sh installs them
# with BCS_WITH_DEPLOY=1). Exit 0: every step passed; 1: a step failed;
# 77: cannot run here (not root, or Slurm/munge missing).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
bin=$build/bin

say() { echo "test-slurm: $*"; }
skip() { say "skipped: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root (network namespaces, slurmd)"
for c in slurmctld slurmd munged sbatch salloc scancel scontrol sinfo squeue ip unshare; do
  command -v "$c" >/dev/null || skip "$c not installed (apt-get install slurm-wlm munge iproute2)"
done
for b in bcs bcs-mm bcs-nm prog_ring prog_pingpong prog_coll_basic prog_exit prog_periodic; do
  [[ -x $bin/$b ]] || { say "missing $bin/$b: build first"; exit 1; }
done

tag=$$
net=10.78.$((tag % 250))
ns_c=bcs-sl-$tag-c
state=$(mktemp -d /tmp/bcs-slurm.XXXXXX)
chmod 755 "$state"  # slurmd's job steps (run as root) read the script here
pids=()             # every daemon we start, stopped in reverse order
nss=()
sb=                 # a running sbatch --wait

teardown() {
  local rc=$? i p
  set +e
  [[ -n $sb ]] && kill -TERM "$sb" 2>/dev/null && wait "$sb" 2>/dev/null
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  # Anything still inside our namespaces (a slurmstepd finishing a step
  # whose slurmd is gone, a rank of a failed step) is ours: stopped by PID.
  for sig in TERM KILL; do
    for n in "${nss[@]}"; do
      for p in $(ip netns pids "$n" 2>/dev/null); do kill -"$sig" "$p" 2>/dev/null; done
    done
    sleep 0.5
  done
  for n in "${nss[@]}"; do ip netns del "$n" 2>/dev/null; done
  if [[ $rc != 0 && -d $state ]]; then
    say "failed (status $rc); the daemons' logs:"
    for f in "$state"/*.log "$state"/job-*.out; do
      [[ -f $f ]] && { echo "--- $f"; tail -n 30 "$f"; }
    done
  fi
  rm -rf "$state"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

fail() { say "FAIL: $*"; exit 1; }

# ---- the network: a bridge in ns_c, a veth from it to each host -----------
ip netns add "$ns_c"; nss+=("$ns_c")
ip -n "$ns_c" link set lo up
ip -n "$ns_c" link add br0 type bridge
ip -n "$ns_c" addr add "$net.1/24" dev br0
ip -n "$ns_c" link set br0 up
for i in 1 2 3; do
  h=bcs-sl-$tag-h$i
  ip netns add "$h"; nss+=("$h")
  ip link add "bsl$tag$i" type veth peer name "bsm$tag$i"
  ip link set "bsl$tag$i" netns "$ns_c"
  ip link set "bsm$tag$i" netns "$h"
  ip -n "$ns_c" link set "bsl$tag$i" master br0 up
  ip -n "$h" link set "bsm$tag$i" name eth0
  ip -n "$h" addr add "$net.1$i/24" dev eth0
  ip -n "$h" link set eth0 up
  ip -n "$h" link set lo up
done

# ---- munge -------------------------------------------------------------
mkdir -m 711 "$state/munge"
head -c 1024 /dev/urandom > "$state/munge/munge.key"
chmod 400 "$state/munge/munge.key"
munged --foreground --force --key-file "$state/munge/munge.key" \
  --socket "$state/munge/munge.sock" --pid-file "$state/munge/munged.pid" \
  --seed-file "$state/munge/munged.seed" --log-file "$state/munged.log" > "$state/munged.out" 2>&1 &
pids+=($!)

# ---- slurm -------------------------------------------------------------
conf=$state/slurm.conf
mkdir -p "$state/ctld" "$state/spool"
{
  echo "ClusterName=bcstest$tag"
  echo "SlurmctldHost=ctl($net.1)"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "AuthType=auth/munge"
  echo "CredType=cred/munge"
  echo "AuthInfo=socket=$state/munge/munge.sock"
  echo "StateSaveLocation=$state/ctld"
  echo "SlurmdSpoolDir=$state/spool/%n"
  echo "SlurmctldPidFile=$state/slurmctld.pid"
  echo "SlurmdPidFile=$state/slurmd-%n.pid"
  echo "SlurmctldLogFile=$state/slurmctld.log"
  echo "SlurmdLogFile=$state/slurmd-%n.log"
  echo "ProctrackType=proctrack/pgid"
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
  for i in 1 2 3; do echo "NodeName=h$i NodeAddr=$net.1$i CPUs=2 State=UNKNOWN"; done
  echo "PartitionName=test Nodes=h[1-3] Default=YES MaxTime=60 State=UP OverSubscribe=NO"
} > "$conf"
# No cgroup confinement (proctrack/pgid, task/none): the test must not
# depend on how this machine mounts cgroups. Slurm still loads the plugin.
echo "CgroupPlugin=cgroup/v1" > "$state/cgroup.conf"
echo "CgroupAutomount=no" >> "$state/cgroup.conf"
export SLURM_CONF=$conf

# Each daemon in its host's namespaces, under its host's name (slurmctld
# checks that it runs on SlurmctldHost).
ip netns exec "$ns_c" unshare --uts \
  bash -c 'hostname ctl && exec slurmctld -D -i -f "$1"' _ "$conf" > "$state/slurmctld.out" 2>&1 &
pids+=($!)
for i in 1 2 3; do
  mkdir -p "$state/spool/h$i"
  ip netns exec "bcs-sl-$tag-h$i" unshare --uts \
    bash -c 'hostname "$1" && exec slurmd -D -N "$1" -f "$2"' _ "h$i" "$conf" \
    > "$state/slurmd-h$i.out" 2>&1 &
  pids+=($!)
done

# Slurm's own clients run where a user would: on a host (h1).
# Slurm's clients retry a dead controller for a long time: bounded.
on_h1() { timeout 20 ip netns exec "bcs-sl-$tag-h1" "$@"; }

say "waiting for 3 idle nodes"
SECONDS=0
for ((i = 0; ; i++)); do
  idle=$(on_h1 sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l || true)
  [[ $idle == 3 ]] && break
  ((SECONDS < 60)) || fail "the nodes did not come up in 60 s: $(on_h1 sinfo -N 2>&1 | tr '\n' ' ')"
  for d in "${pids[@]}"; do kill -0 "$d" 2>/dev/null || fail "a daemon (pid $d) exited"; done
  sleep 0.2
done
say "3 hosts up: $(on_h1 sinfo -h -N -o '%N@%o' | tr '\n' ' ')"

# ---- jobs --------------------------------------------------------------
# The job's processes are found by a marker in their environment
# (BCS_SLURM_TEST, which Slurm, srun, the daemons and `bcs run` pass on), so
# nothing else on this machine counts and a process that escaped every
# process tree is still found.
ours() {  # pids of this test's bcs daemons and ranks
  local p exe
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    [[ $exe == "$bin"/* ]] || continue
    { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qx "BCS_SLURM_TEST=$tag" && echo "${p#/proc/}"
  done
  return 0
}

token_seen=0
tokens=()  # every cluster token found in the environment of the jobs' processes
# While a job runs: the token each job's daemons hold (bcs.sbatch makes a
# fresh one per allocation and passes it in the environment) must not be in
# any process's command line on the machine.
scan_cmdlines() {
  local p t f known
  for p in $(ours); do
    t=$({ tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | sed -n 's/^BCS_TOKEN=//p' | head -n 1)
    [[ -n $t ]] || continue
    known=0
    for f in "${tokens[@]}"; do [[ $f == "$t" ]] && known=1; done
    ((known)) || tokens+=("$t")
  done
  for t in "${tokens[@]}"; do
    for f in /proc/[0-9]*/cmdline; do
      if grep -qaF -- "$t" "$f" 2>/dev/null; then
        say "the token is in the command line of ${f%/cmdline}: $({ tr '\0' ' ' < "$f"; } 2>/dev/null)"
        token_seen=1
      fi
    done
  done
}

# submit NAME EXPECTED_RC TASKS_PER_NODE SBATCH_ARGS...: runs the job (the
# script and its arguments, or --wrap) to its end (sbatch --wait, bounded by
# `timeout`), checks both exit statuses.
submit() {
  local name=$1 want=$2 per=$3; shift 3
  local out=$state/job-$name.out rc jobid
  set +e
  timeout 300 ip netns exec "bcs-sl-$tag-h1" sbatch --wait -N 3 --ntasks-per-node="$per" --chdir="$state" \
    --output="$out" --job-name="$name" --parsable \
    --export=ALL,BCS_BIN="$bin",UCX_TLS=tcp,BCS_SLICE=1ms,BCS_SLURM_TEST=$tag "$@" \
    > "$state/sbatch-$name.txt" 2>&1 &
  sb=$!
  while kill -0 "$sb" 2>/dev/null; do scan_cmdlines; sleep 0.2; done
  wait "$sb"; rc=$?
  sb=
  set -e
  jobid=$(head -n 1 "$state/sbatch-$name.txt" | tr -dc 0-9)
  [[ $rc == "$want" ]] || fail "$name: sbatch --wait exited with $rc, not $want: $(cat "$state/sbatch-$name.txt") $(cat "$out" 2>/dev/null)"
  local slurm_rc
  slurm_rc=$(on_h1 scontrol show job "$jobid" 2>/dev/null | grep -o ' ExitCode=[0-9]*' | head -n 1 | cut -d= -f2)
  [[ $slurm_rc == "$want" ]] || fail "$name: Slurm says exit code '$slurm_rc', not $want"
  say "$name: job $jobid exited $rc (Slurm: ExitCode=$slurm_rc)"
}

script=$here/deploy/slurm/bcs.sbatch
submit ring 0 2 "$script" "$bin/prog_ring"
grep -q "ring ok" "$state/job-ring.out" || fail "ring: no 'ring ok' in its output"
sed 's/^/    /' "$state/job-ring.out"
grep -q "bcs-mm listening on $net.11:" "$state/job-ring.out" || fail "ring: the manager was not on h1"

submit pingpong 0 1 "$script" "$bin/prog_pingpong" 8 4k 1m
grep -q "pingpong ok" "$state/job-pingpong.out" || fail "pingpong: no 'pingpong ok'"

submit coll 0 2 "$script" "$bin/prog_coll_basic"
grep -q "coll_basic ok" "$state/job-coll.out" || fail "coll: no 'coll_basic ok'"

submit exit3 3 2 "$script" "$bin/prog_exit" 4 3

# No script: `bcs run --slurm` inside the allocation does the same, with
# bcs run's own options (-l labels each line with its rank).
submit wrap 0 2 --wrap "$bin/bcs run --slurm -l $bin/prog_ring"
grep -q "^\[0\] ring ok" "$state/job-wrap.out" || fail "wrap: no '[0] ring ok' in its output"

# Inside salloc, whose command runs where salloc was called (not on a node
# of the allocation): the same, and its exit status is the job's.
set +e
env UCX_TLS=tcp BCS_SLICE=1ms BCS_SLURM_TEST="$tag" timeout 300 \
  ip netns exec "bcs-sl-$tag-h1" salloc -N 3 --ntasks-per-node=1 --job-name=salloc \
  "$bin/bcs" run --slurm "$bin/prog_exit" 2 3 > "$state/job-salloc.out" 2>&1
rc=$?
set -e
[[ $rc == 3 ]] || fail "salloc: exited with $rc, not 3: $(cat "$state/job-salloc.out")"
say "salloc: bcs run --slurm exited 3, as its rank 2 did"

# ---- scancel mid-job -----------------------------------------------------
# prog_periodic 100000 100000: 100 ms of computation between barriers, for
# hours. Cancel it once every rank has started.
on_h1 sbatch -N 3 --ntasks-per-node=2 --chdir="$state" --output="$state/job-cancel.out" \
  --job-name=cancel --parsable --export=ALL,BCS_BIN="$bin",UCX_TLS=tcp,BCS_SLICE=1ms,BCS_SLURM_TEST=$tag \
  "$here/deploy/slurm/bcs.sbatch" "$bin/prog_periodic" 100000 100000 > "$state/sbatch-cancel.txt"
jobid=$(tr -dc 0-9 < "$state/sbatch-cancel.txt")
SECONDS=0
for ((;;)); do
  n=0
  for p in $(ours); do [[ $(readlink "/proc/$p/exe" 2>/dev/null) == */prog_periodic ]] && n=$((n + 1)); done
  [[ $n == 6 ]] && break
  ((SECONDS < 60)) || fail "cancel: 6 ranks were not running after 60 s: $(cat "$state/job-cancel.out" 2>/dev/null)"
  scan_cmdlines
  sleep 0.1
done
# Once more with every daemon of the job running: the scans during the
# short jobs above may each miss their daemons (a scan of every process's
# command line takes a good part of such a job's life on a loaded machine),
# and the check below needs at least one token.
scan_cmdlines
say "cancel: job $jobid runs 6 ranks and $(($(ours | wc -l) - 6)) bcs processes (manager, node managers, bcs run); scancel"
t0=$(date +%s%N)
on_h1 scancel "$jobid"
for ((i = 0; ; i++)); do
  left=$(ours | wc -l)
  [[ $left == 0 ]] && break
  ((i < 200)) || fail "cancel: 10 s after scancel these are still running: $(ours | while read -r p; do echo "$p:$(readlink /proc/$p/exe)"; done | tr '\n' ' ')"
  sleep 0.05
done
say "cancel: nothing of the job left $((($(date +%s%N) - t0) / 1000000)) ms after scancel"

# Slurm finishes the cancelled job (its step daemons exit) before the
# cluster is torn down: the hosts then hold nothing but their slurmd.
SECONDS=0
for ((;;)); do
  extra=0
  for i in 1 2 3; do
    extra=$((extra + $(ip netns pids "bcs-sl-$tag-h$i" | wc -l) - 1))
  done
  [[ $extra == 0 && -z $(on_h1 squeue -h 2>/dev/null) ]] && break
  ((SECONDS < 30)) || fail "30 s after scancel the hosts still run $extra processes besides slurmd: $(for i in 1 2 3; do ip netns pids "bcs-sl-$tag-h$i"; done | while read -r p; do tr '\0' ' ' < "/proc/$p/cmdline"; echo; done)"
  sleep 0.2
done
say "cancel: the hosts run nothing but their slurmd again"

((${#tokens[@]} > 0)) || fail "never saw a job's token: the scan checked nothing"
((token_seen == 0)) || fail "a token appeared on a command line (above)"
for t in "${tokens[@]}"; do
  f=$(grep -rlF -- "$t" "$state" --exclude-dir=munge 2>/dev/null || true)
  [[ -z $f ]] || fail "a token is written in $f"
done
say "${#tokens[@]} tokens: on no command line, in no log or job output"
say "PASS"
