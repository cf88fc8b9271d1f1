#!/usr/bin/env bash
# Loading a real-size model onto two workers on loopback, with the figures that matter: the time to
# read the file (cat), streaming (MiB/s per worker, both at once), a --model-dir load, a cached load,
# and weft bench's tokens/s once loaded. Not part of the test suite (minutes, GBs of disk).
#   scripts/bench_remote_load.sh [MODEL]   default: generates the 8b-shape q4_0 model (4.5 GB) in $TMPDIR
set -euo pipefail
cd "$(dirname "$0")/.."
WEFT=${WEFT:-build/weft}
TMP=${TMPDIR:-/tmp}
MODEL=${1:-$TMP/weft-8b-shape-q4_0.gguf}
WORK=$(mktemp -d "$TMP/weft-load.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

[ -f "$MODEL" ] || "$WEFT" gen-model -o "$MODEL" --preset 8b-shape --type q4_0 >/dev/null
mkdir -p "$WORK/models" "$WORK/cache"
ln -s "$(realpath "$MODEL")" "$WORK/models/$(basename "$MODEL")"

# Starts a worker with extra flags; sets PORT.
start_worker() {
  local out="$WORK/port.${#PIDS[@]}"
  "$WEFT" worker --listen 127.0.0.1:0 -t 1 --net-poll block "$@" >"$out" 2>>"$WORK/workers.log" &
  PIDS+=($!)
  for _ in $(seq 200); do grep -q listening "$out" 2>/dev/null && break; sleep 0.05; done
  PORT=$(sed 's/.*://' "$out")
}
# Two fresh workers with the given flags (none: the last run's workers again), then weft bench on
# them; prints the load lines, the table and the workers' timings.
A= B=
run() {
  local label=$1
  shift
  if [ $# -gt 0 ]; then
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    PIDS=()
    start_worker "$@"
    A=$PORT
    start_worker "$@"
    B=$PORT
  fi
  local a=$A b=$B
  echo "== $label (worker flags: ${*:-as before})"
  local t0=$SECONDS
  "$WEFT" bench -m "$MODEL" --devices "tcp://127.0.0.1:$a,tcp://127.0.0.1:$b" -p 16 -n 4 -r 1 --net-poll block 2>&1 |
    grep -E 'streamed|loaded|weights from|\|' || true
  echo "   (whole command: $((SECONDS - t0)) s)"
  grep -E 'found in|after' "$WORK/workers.log" | sed 's/^/   /'
  : >"$WORK/workers.log"
}

echo "== model $MODEL ($(du -h "$(realpath "$MODEL")" | cut -f1))"
for i in 1 2; do
  /usr/bin/time -f "   cat > /dev/null, run $i: %e s" cat "$MODEL" >/dev/null
done
run "streamed, no cache" --no-cache
# The same workers again: their memory has been touched once (a VM's first touch of fresh memory
# can cost more than the network).
run "streamed again to the same workers"
run "from --model-dir" --no-cache --model-dir "$WORK/models"
run "streamed into an empty cache" --cache-dir "$WORK/cache"
# Workers write their entries in the background (hash, write, fsync); a killed worker leaves none.
t0=$SECONDS
until [ "$(find "$WORK/cache" -name '*.gguf' | wc -l)" -ge 2 ] && [ -z "$(find "$WORK/cache" -name '*.tmp*')" ]; do
  [ $((SECONDS - t0)) -lt 300 ] || { echo "   cache entries not written in 300 s"; break; }
  sleep 0.5
done
echo "   cache entries complete $((SECONDS - t0)) s after the run"
run "from the cache" --cache-dir "$WORK/cache"
