# Sourced by the bench scripts: a standing cluster on loopback (bcs-mm and
# K bcs-nm) that the script starts, and stops by PID (also on exit).
# Needs $bin (the build's bin directory) and $tmp (a scratch directory the
# EXIT trap removes).
#
#   cluster_start K [MANAGER OPTIONS...]   sets $port; ${pids[0]} is bcs-mm,
#                                          ${pids[1..K]} the node managers
#                                          (started with $BCS_BENCH_NM_ARGS)
#   cluster_stop
pids=()
cluster_stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cluster_start() {
  local nodes=$1
  shift
  pids=()
  : > "$tmp/port"
  "$bin/bcs-mm" --listen 127.0.0.1:0 --ready-fd 3 "$@" 3>"$tmp/port" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
  port=$(head -1 "$tmp/port")
  [ -n "$port" ] || { echo "bcs-mm did not start" >&2; exit 1; }
  for n in $(seq "$nodes"); do
    # shellcheck disable=SC2086 # BCS_BENCH_NM_ARGS: extra node manager options, split on spaces
    "$bin/bcs-nm" --manager "127.0.0.1:$port" --name "n$n" ${BCS_BENCH_NM_ARGS:-} 2>/dev/null &
    pids+=($!)
  done
}
trap 'cluster_stop; rm -rf "$tmp"' EXIT
