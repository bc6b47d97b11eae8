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
  "$bin/bcs-mm" --listen 127.0.0.1:0 --ready-fd 3 "$@" 3>"$tmp/port" 2>>"$tmp/daemons.log" &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
  port=$(head -1 "$tmp/port")
  [ -n "$port" ] || { echo "bcs-mm did not start" >&2; exit 1; }
  for n in $(seq "$nodes"); do
    # shellcheck disable=SC2086 # BCS_BENCH_NM_ARGS: extra node manager options, split on spaces
    "$bin/bcs-nm" --manager "127.0.0.1:$port" --name "n$n" ${BCS_BENCH_NM_ARGS:-} 2>>"$tmp/daemons.log" &
    pids+=($!)
  done
}
# The daemons' warnings go to $tmp/daemons.log; a script that fails (a job
# that ran into its --timeout, say) shows their end before it is removed.
trap 'rc=$?; cluster_stop
  if [ "$rc" != 0 ] && [ -s "$tmp/daemons.log" ]; then
    echo "--- the daemons said (last 50 lines):" >&2; tail -n 50 "$tmp/daemons.log" >&2
  fi
  rm -rf "$tmp"' EXIT
