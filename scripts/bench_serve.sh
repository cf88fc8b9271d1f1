#!/usr/bin/env bash
# weft serve under streaming load: aggregate generated tokens/s with 1, 8 and 16 concurrent clients
# (128-token prompts, 32 generated, greedy), and the time to first token of a 128-token prompt alone
# and while 7 other sequences decode. Starts the server (and workers) on free loopback ports and
# stops them.
#   scripts/bench_serve.sh MODEL [weft serve args...]          e.g. -t 2
#   WORKERS=2 scripts/bench_serve.sh MODEL                     over 2 local `weft worker -t 1`
#   ENGINE=1 scripts/bench_serve.sh MODEL -t 2                 and `weft batched-bench`, same devices
# Env: WEFT (build/weft), CLIENTS (1,8,16), NPP (128), NTG (32), ROUNDS (2 requests per client),
# SLOT_CTX (512 positions per slot), CONSTRAIN (json_object, schema or a schema's FILE: every reply
# constrained by its grammar, to compare with the same run without). The server gets -np (largest
# of CLIENTS) and -c np * SLOT_CTX.
# The model's end-of-generation token ends a reply early (weft serve has no ignore_eos): the table
# counts the tokens each reply really had (usage).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 MODEL [weft serve args...]" >&2; exit 2; }
MODEL=$1
shift
WEFT=$(realpath "${WEFT:-build/weft}")
CLIENTS=${CLIENTS:-1,8,16}
NPP=${NPP:-128}
NTG=${NTG:-32}
ROUNDS=${ROUNDS:-2}
SLOT_CTX=${SLOT_CTX:-512}
WORKERS=${WORKERS:-0}
[ -x "$WEFT" ] || { echo "no weft binary at $WEFT (scripts/build.sh)" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "no $MODEL (weft gen-model --preset 500m --type q4_0 -o $MODEL)" >&2; exit 2; }
NP=$(tr ',' '\n' <<<"$CLIENTS" | sort -n | tail -1)
[ "$NP" -ge 8 ] || NP=8  # the TTFT test runs 8 at once

source scripts/serve_procs.sh

DEVICE_ARGS=("$@")
if [ "$WORKERS" -gt 0 ]; then
  devices=""
  for ((w = 0; w < WORKERS; w++)); do
    start_proc "worker$w" "$WEFT" worker --listen 127.0.0.1:0 -t 1
    addr=$(wait_line "worker$w" 'listening on [0-9.]+:[0-9]+')
    devices+="${devices:+,}tcp://${addr#listening on }"
  done
  DEVICE_ARGS+=(--devices "$devices")
fi

start_server serve -m "$MODEL" -np "$NP" -c $((NP * SLOT_CTX)) "${DEVICE_ARGS[@]}"
SERVE_PID=${PIDS[-1]}
echo "weft serve ${DEVICE_ARGS[*]}: $(grep ready "$WORK/serve.err")"
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
echo
node scripts/bench_serve.mjs "$URL" --npp "$NPP" --ntg "$NTG" --clients "$CLIENTS" --rounds "$ROUNDS" \
  ${CONSTRAIN:+--constrain "$CONSTRAIN"}

if [ -n "${ENGINE:-}" ]; then
  kill "$SERVE_PID" && wait "$SERVE_PID" || true  # a worker serves one session at a time
  echo
  echo "weft batched-bench (the engine alone, no HTTP):"
  "$WEFT" batched-bench -m "$MODEL" -npp "$NPP" -ntg "$NTG" -npl "$CLIENTS" "${DEVICE_ARGS[@]}" | tee "$WORK/engine.md"
  # The table's generated tokens over its whole time, as the serve table counts them.
  awk -F'|' '$2 + 0 > 0 { printf "B=%d: %.1f generated t/s end to end\n", $4, $3 * $4 / $10 }' "$WORK/engine.md"
fi
