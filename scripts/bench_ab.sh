#!/usr/bin/env bash
# A/B of two `weft bench` configurations, interleaved so that drift of the machine hits both alike:
# runs A then B, ROUNDS times, and prints each pair, the B/A ratio of each, and the median ratio.
#   scripts/bench_ab.sh "-t 2" "--devices cpu:1,cpu:1"      (MODEL, ROUNDS=8, TEST="-p 0 -n 32 -r 3")
# WEFT_A / WEFT_B compare two builds (default: WEFT=build/weft for both); ENV_A / ENV_B set
# environment variables for one side, e.g. AMX against VNNI prompts on one build:
#   ENV_A=WEFT_MAX_ISA=avx512 TEST="-p 128 -n 0 -r 2" scripts/bench_ab.sh "-t 1" "-t 1"
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 'weft bench args A' 'weft bench args B'" >&2; exit 2; }
MODEL=${MODEL:-models/weft-500m-q4_0.gguf}
ROUNDS=${ROUNDS:-8}
TEST=${TEST:-"-p 0 -n 32 -r 3"}
WEFT=${WEFT:-build/weft}
WEFT_A=${WEFT_A:-$WEFT}
WEFT_B=${WEFT_B:-$WEFT}
[ -x "$WEFT" ] || ./scripts/build.sh >/dev/null
[ -f "$MODEL" ] || { echo "no $MODEL (weft gen-model --preset 500m --type q4_0 -o $MODEL)" >&2; exit 2; }
tps() {  # WEFT ARGS ENV: mean t/s (avg_ts) of the last test `weft bench` prints (a record per line in jsonl)
  # shellcheck disable=SC2086
  env $3 "$1" bench -m "$MODEL" $TEST $2 -o jsonl 2>/dev/null | tail -n 1 | grep -o '"avg_ts":[0-9.eE+-]*' | cut -d: -f2
}
ratios=()
for ((i = 1; i <= ROUNDS; ++i)); do
  a=$(tps "$WEFT_A" "$1" "${ENV_A:-}")
  b=$(tps "$WEFT_B" "$2" "${ENV_B:-}")
  r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')
  ratios+=("$r")
  echo "round $i: A $a t/s  B $b t/s  B/A $r"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "median B/A over %d rounds: %.3f (min %.3f, max %.3f)\n", NR, m, v[1], v[NR] }'
