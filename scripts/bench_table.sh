#!/usr/bin/env bash
# Runs `weft bench` over the standard configurations (types x threads x devices x split modes) on
# the generated 500m models and writes one markdown table (stdout, and bench/results.md).
#   TYPES="q4_0 q8_0 q4_k_m"  REPS=3  PP=128  TG=32  WEFT=build/weft
set -euo pipefail
cd "$(dirname "$0")/.."
TYPES=${TYPES:-"q4_0 q8_0 q4_k_m"}
REPS=${REPS:-3}
PP=${PP:-128}
TG=${TG:-32}
WEFT=${WEFT:-build/weft}
[ -x "$WEFT" ] || ./scripts/build.sh >/dev/null
mkdir -p models bench
CONFIGS=(
  "-t 1"
  "-t 2"
  "--devices cpu:1,cpu:1 -sm tensor"
  "--devices cpu:1,cpu:1 -sm layer"
)
out=bench/results.md
sections=$(awk '/^## / { f = 1 } f' "$out" 2>/dev/null || true)  # kept: other scripts' sections (bench_moe.sh)
for type in $TYPES; do
  model=models/weft-500m-$type.gguf
  [ -f "$model" ] || "$WEFT" gen-model --preset 500m --type "$type" -o "$model" 2>/dev/null
  for cfg in "${CONFIGS[@]}"; do
    # shellcheck disable=SC2086
    "$WEFT" bench -m "$model" -p "$PP" -n "$TG" -r "$REPS" $cfg -o jsonl 2>/dev/null
  done
done | python3 -c '
import json, sys
print("| model | size | params | devices | threads | sm | test | t/s |")
print("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |")
for line in sys.stdin:
    r = json.loads(line)
    test = ("pp%d" % r["n_prompt"] if r["n_prompt"] else "") + ("+" if r["n_prompt"] and r["n_gen"] else "") + \
           ("tg%d" % r["n_gen"] if r["n_gen"] else "")
    print("| %s | %.2f MiB | %.2f M | %s | %d | %s | %s | %.2f ± %.2f |" % (r["model_type"], r["model_size"] / 2**20,
          r["model_n_params"] / 1e6, r["devices"], r["n_threads"], r["split_mode"], test, r["avg_ts"], r["stddev_ts"]))
' | tee "$out"
if [ -n "$sections" ]; then printf '\n%s\n' "$sections" >>"$out"; fi
