# Sourced by scripts/e2e.sh and scripts/bench_serve.sh: background weft processes (servers,
# workers) on free loopback ports, stopped and their work folder removed whatever way the script
# ends. Each wait is bounded.
WORK=$(mktemp -d -t weft-serve.XXXXXX)
PIDS=()
stop_procs() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap stop_procs EXIT
trap 'exit 130' INT TERM

# start_proc NAME CMD...: runs CMD in the background, stdout to $WORK/NAME.out, stderr to .err.
start_proc() {
  local name=$1
  shift
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
}

# wait_line NAME REGEX: prints the first match of REGEX in NAME's stdout, waiting up to 60 s while
# the process started last lives.
wait_line() {
  local line i
  for ((i = 0; i < 600; i++)); do
    line=$(grep -m1 -oE "$2" "$WORK/$1.out" || true)
    [ -n "$line" ] && { echo "$line"; return; }
    kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "$1 exited:" >&2; cat "$WORK/$1.out" "$WORK/$1.err" >&2; exit 1; }
    sleep 0.1
  done
  echo "$1 printed no '$2' in 60 s" >&2
  exit 1
}

# start_server NAME WEFT_SERVE_ARGS...: `weft serve --port 0 ARGS` ($WEFT), its address read from
# the line it prints first; sets URL once /health answers 200 (the model loaded), within
# HEALTH_TIMEOUT_S (default 120 s).
start_server() {
  local name=$1 i
  shift
  start_proc "$name" "$WEFT" serve --port 0 "$@"
  URL=$(wait_line "$name" 'http://[0-9.]+:[0-9]+')
  for ((i = 0; i < ${HEALTH_TIMEOUT_S:-120} * 10; i++)); do
    curl -sf -m 2 "$URL/health" >/dev/null && return
    kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "$name exited:" >&2; cat "$WORK/$name.err" >&2; exit 1; }
    sleep 0.1
  done
  echo "$name is not healthy after ${HEALTH_TIMEOUT_S:-120} s:" >&2
  cat "$WORK/$name.err" >&2
  exit 1
}
