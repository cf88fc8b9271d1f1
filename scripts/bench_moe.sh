#!/usr/bin/env bash
# The mixture-of-experts benchmark: `weft bench` on the generated moe-2b model (qwen3moe: 32 experts,
# 8 active, 2.1B parameters, 0.6B active per token) on one device and on two devices under each
# --moe-split, with decode bandwidth counted over the bytes a token actually reads (the dense
# weights and its 8 experts, from `weft plan`), against the memory roofline measured just before each
# configuration (BM_read/2 of the microbenchmarks beside WEFT, best of 3). Writes the "## Mixture of
# experts" section of bench/results.md (moved to the end; the other sections are kept) and prints it.
#   TYPE=q4_0  REPS=3  PP=128  TG=32  WEFT=build/weft
set -euo pipefail
cd "$(dirname "$0")/.."
TYPE=${TYPE:-q4_0}
REPS=${REPS:-3}
PP=${PP:-128}
TG=${TG:-32}
WEFT=${WEFT:-build/weft}
[ -x "$WEFT" ] || ./scripts/build.sh >/dev/null
mkdir -p models bench
model=models/weft-moe-2b-qwen3moe-$TYPE.gguf
[ -f "$model" ] || "$WEFT" gen-model --preset moe-2b --arch qwen3moe --type "$TYPE" -o "$model" 2>/dev/null
CONFIGS=(
  "-t 2"
  "--devices cpu:1,cpu:1 --moe-split tensor"
  "--devices cpu:1,cpu:1 --moe-split expert"
)
MICRO=$(dirname "$WEFT")/bench/weft_microbench
bm_read() {  # GiB/s, best of 3 (the machine is shared: the best run is the roofline); 0 without the binary
  [ -x "$MICRO" ] || { echo 0; return; }
  "$MICRO" --benchmark_filter='BM_read/2/' --benchmark_repetitions=3 2>/dev/null |
    grep -v -E '_(mean|median|stddev|cv) ' | grep -o 'bytes_per_second=[0-9.]*G' | tr -dc '0-9.\n' | sort -g | tail -n 1
}
rows=$(for cfg in "${CONFIGS[@]}"; do
  roof=$(bm_read)
  # MiB read per decoded token, summed over the devices (weft plan's "read per token" column).
  # shellcheck disable=SC2086
  read_mib=$("$WEFT" plan -m "$model" $cfg | awk -F'|' '/^\| #/ { gsub(/ MiB/, "", $5); s += $5 } END { print s }')
  # shellcheck disable=SC2086
  "$WEFT" bench -m "$model" -p "$PP" -n "$TG" -r "$REPS" $cfg -o jsonl 2>/dev/null |
    sed "s/^{/{\"cfg\": \"$cfg\", \"read_mib\": $read_mib, \"bm_read\": $roof, /"
done)
# shellcheck disable=SC2016  # the backquotes are markdown, inside python
section=$(python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["cfg"], {})["pp" if r["n_prompt"] else "tg"] = r
print("## Mixture of experts: moe-2b (qwen3moe, 32 experts, 8 active per token) %s" % rows[0]["model_type"].split()[-1])
print()
print("`scripts/bench_moe.sh` (pp%d, tg%d, %d repetitions). Read per token: the weights one decoded token reads (dense" % (
    rows[0]["n_prompt"], rows[-1]["n_gen"], len(rows[0]["samples_ns"])))
print("weights and 8 of 32 experts, all devices together, from `weft plan`); decode bandwidth = that x tg t/s, against")
print("BM_read/2 (two threads streaming memory, best of 3) measured just before each configuration.")
print()
print("| devices | threads | moe split | pp t/s | tg t/s | read per token | decode bandwidth | BM_read | of BM_read |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for cfg, t in by.items():
    pp, tg = t["pp"], t["tg"]
    split = cfg.split("--moe-split ")[1] if "--moe-split" in cfg else "-"
    bw, roof = tg["read_mib"] * tg["avg_ts"] / 1024, tg["bm_read"]
    print("| %s | %d | %s | %.2f ± %.2f | %.2f ± %.2f | %.1f MiB | %.2f GiB/s | %s | %s |" % (pp["devices"], pp["n_threads"],
          split, pp["avg_ts"], pp["stddev_ts"], tg["avg_ts"], tg["stddev_ts"], tg["read_mib"], bw,
          "%.1f GiB/s" % roof if roof else "-", "%.0f%%" % (100 * bw / roof) if roof else "-"))
' <<<"$rows")
out=bench/results.md
kept=$(awk '/^## Mixture of experts/ { skip = 1; next } /^## / { skip = 0 } !skip' "$out" 2>/dev/null || true)
printf '%s\n\n%s\n' "$kept" "$section" >"$out"
echo "$section"
