#!/bin/bash
# Start/stop a bcs cluster on this host, on loopback: one bcs-mm and K bcs-nm
# running in the background (each in its own session, so closing the terminal
# does not stop them). PIDs live in a state dir; `stop` kills exactly those
# PIDs (checked against their start time, so a recycled PID is never hit).
#
#   deploy/local-cluster.sh start K [--slice DUR] [--chunk SIZE] [--port P] [--token-file F]
#   deploy/local-cluster.sh stop
#   deploy/local-cluster.sh status
#
# `start` prints `export BCS_MANAGER=127.0.0.1:PORT` on stdout (everything else
# goes to stderr), so:  eval "$(deploy/local-cluster.sh start 2)"
#                       bcs run --manager "$BCS_MANAGER" -n 4 ./app
# Environment: BCS_STATE_DIR (default /tmp/bcs-local-$UID), BCS_BIN_DIR
# (directory holding bcs-mm/bcs-nm; default: $PATH, then ../build/bin).
set -euo pipefail

STATE=${BCS_STATE_DIR:-/tmp/bcs-local-$(id -u)}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "local-cluster: $*" >&2; exit 1; }
say() { echo "local-cluster: $*" >&2; }

find_bin() {
  local name=$1
  if [[ -n ${BCS_BIN_DIR:-} ]]; then
    [[ -x $BCS_BIN_DIR/$name ]] || die "$BCS_BIN_DIR/$name is not executable"
    echo "$BCS_BIN_DIR/$name"; return
  fi
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
  [[ -x $HERE/../build/bin/$name ]] && { echo "$HERE/../build/bin/$name"; return; }
  die "cannot find $name (set BCS_BIN_DIR or add it to PATH)"
}

# Start time of a process (field 22 of /proc/PID/stat), empty if it is gone.
starttime() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }              # fields after "comm)", starting at field 3
  # shellcheck disable=SC2086  # split into fields on purpose
  set -- $stat
  echo "${20}"
}

# Is the process recorded in pid file $1 still the one we started?
alive() {
  local pid st
  [[ -f $1 ]] || return 1
  read -r pid st < "$1"
  [[ -n $pid && $(starttime "$pid") == "$st" ]]
}

record() { echo "$2 $(starttime "$2")" > "$1"; }

pidfiles() { ls "$STATE"/mm.pid "$STATE"/nm*.pid 2>/dev/null || true; }

cmd_start() {
  local k=${1:-}; shift || true
  [[ $k =~ ^[1-9][0-9]*$ ]] || die "usage: $0 start K [--slice DUR] [--chunk SIZE] [--port P] [--token-file F]"
  local mm_args=() token="" port=0
  while [[ $# -gt 0 ]]; do
    case $1 in
      --slice|--chunk) [[ $# -ge 2 ]] || die "$1 needs a value"; mm_args+=("$1" "$2"); shift 2 ;;
      --port) port=$2; shift 2 ;;
      --token-file) token=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ -n $token ]] && mm_args+=(--token-file "$token")
  local mm nm
  mm=$(find_bin bcs-mm); nm=$(find_bin bcs-nm)

  mkdir -p "$STATE"; chmod 700 "$STATE"
  alive "$STATE/mm.pid" && die "already running (see: $0 status); stop it first"
  rm -f "$STATE"/*.pid "$STATE"/ready "$STATE"/port

  # bcs-mm writes its port to the ready fd once it listens. setsid: new
  # session (no SIGHUP from the terminal); it execs in place, so $! is the
  # daemon's own PID.
  mkfifo "$STATE/ready"
  setsid "$mm" --listen "127.0.0.1:$port" --ready-fd 3 "${mm_args[@]}" \
    3>"$STATE/ready" </dev/null >>"$STATE/mm.log" 2>&1 &
  local mm_pid=$!
  record "$STATE/mm.pid" "$mm_pid"
  local got=""
  read -r -t 10 got < "$STATE/ready" || true
  rm -f "$STATE/ready"
  if [[ ! $got =~ ^[0-9]+$ ]]; then
    kill -TERM "$mm_pid" 2>/dev/null || true
    die "bcs-mm did not come up (see $STATE/mm.log)"
  fi
  echo "$got" > "$STATE/port"
  say "bcs-mm pid $mm_pid on 127.0.0.1:$got (log $STATE/mm.log)"

  local i nm_args=()
  [[ -n $token ]] && nm_args+=(--token-file "$token")
  for ((i = 1; i <= k; i++)); do
    setsid "$nm" --manager "127.0.0.1:$got" --name "node$i" "${nm_args[@]}" \
      </dev/null >>"$STATE/nm$i.log" 2>&1 &
    record "$STATE/nm$i.pid" $!
    say "bcs-nm node$i pid $! (log $STATE/nm$i.log)"
  done
  echo "export BCS_MANAGER=127.0.0.1:$got"
}

cmd_stop() {
  local f pid st pids=()
  for f in $(pidfiles); do
    if alive "$f"; then
      read -r pid st < "$f"
      pids+=("$pid")
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  # They are not our children (no `wait`): watch them go, bounded (5 s).
  local t
  for ((t = 0; t < 50; t++)); do
    local left=0
    for f in $(pidfiles); do alive "$f" && left=1; done
    [[ $left == 0 ]] && break
    sleep 0.1
  done
  for f in $(pidfiles); do
    if alive "$f"; then
      read -r pid st < "$f"
      say "pid $pid did not stop on SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -f "$STATE"/*.pid "$STATE/port"
  say "stopped ${#pids[@]} process(es)${pids:+: ${pids[*]}}"
}

cmd_status() {
  local f pid st any=0 rc=1
  for f in $(pidfiles); do
    any=1
    read -r pid st < "$f"
    if alive "$f"; then echo "$(basename "$f" .pid) pid $pid running"; rc=0
    else echo "$(basename "$f" .pid) pid $pid gone"; fi
  done
  [[ $any == 0 ]] && { echo "not running (state dir $STATE)"; return 1; }
  [[ -f $STATE/port ]] && echo "manager 127.0.0.1:$(cat "$STATE/port")"
  return $rc
}

case ${1:-} in
  start) shift; cmd_start "$@" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 start K [--slice DUR] [--chunk SIZE] [--port P] [--token-file F] | stop | status" >&2; exit 2 ;;
esac
