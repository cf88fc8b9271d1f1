#!/usr/bin/env bash
# -ts auto against an even split on an unbalanced pair: two local workers of one thread, the second
# at nice 10 on a core it shares with a busy loop (two cores at least). Prints each run's decode
# tokens/s and -ts auto's measurements, ROUNDS times interleaved (trust the medians on a busy
# machine), then one --rebalance run that starts even. Not part of the test suite.
#   scripts/bench_auto_split.sh [MODEL]   default: generates the 500m q4_0 model in $TMPDIR
set -euo pipefail
cd "$(dirname "$0")/.."
WEFT=${WEFT:-build/weft}
TMP=${TMPDIR:-/tmp}
MODEL=${1:-$TMP/500m.gguf}
ROUNDS=${ROUNDS:-3}
N=${N:-48}
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

[ -f "$MODEL" ] || "$WEFT" gen-model -o "$MODEL" --preset 500m --type q4_0 >/dev/null
DIR=$(dirname "$(realpath "$MODEL")")
start_worker() {  # PORT, then the command prefix that places it
  local port=$1
  shift
  "$@" "$WEFT" worker --listen "127.0.0.1:$port" -t 1 --model-dir "$DIR" --net-poll block >/dev/null 2>&1 &
  PIDS+=($!)
}
start_worker 7311 taskset -c 0
start_worker 7312 taskset -c 1 nice -n 10
taskset -c 1 sh -c 'while :; do :; done' &
PIDS+=($!)
sleep 2
DEVICES=tcp://127.0.0.1:7311,tcp://127.0.0.1:7312
run() {
  "$WEFT" run -m "$MODEL" -p "Once upon a time" -n "$1" --temp 0 --devices "$DEVICES" --net-poll block "${@:2}" \
    2>&1 >/dev/null | grep -E "generation:|ratios|calibration over|rebalance:" || true
}
for round in $(seq "$ROUNDS"); do
  for ts in 1,1 auto; do
    echo "== round $round: -ts $ts"
    run "$N" -ts "$ts"
  done
done
echo "== -ts 1,1 --rebalance (default policy: 15% over 64 steps)"
run 200 -ts 1,1 --rebalance
