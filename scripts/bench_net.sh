#!/usr/bin/env bash
# Tensor vs layer split across worker processes, on loopback and on the test bed's network
# profiles (scripts/netbed.sh: workers in network namespaces, links shaped with tc), beside the
# cost model's prediction (weft plan) for each. Writes the "## Network" section of
# bench/results.md (the rest of the file is kept) and prints it.
#   MODEL=models/weft-500m-q4_0.gguf  WORKERS=2  REPS=3  PROFILES="none 25us-10gbit ..."  WEFT=build/weft
# Cost model inputs, measured here first: a device's read speed (one process, -t 1, decode) and
# one all-reduce message's latency on loopback (BM_gloo_all_reduce_blocking/2048); each profile
# adds its delay (where netem exists) and its rate.
set -euo pipefail
cd "$(dirname "$0")/.."
WEFT=${WEFT:-build/weft}
MODEL=${MODEL:-models/weft-500m-q4_0.gguf}
WORKERS=${WORKERS:-2}
REPS=${REPS:-3}
PROFILES=${PROFILES:-$(scripts/netbed.sh profiles | awk '{ print $1 }' | tr '\n' ' ')}
MICRO=${MICRO:-build/bench/weft_microbench}
[ -x "$WEFT" ] && [ -x "$MICRO" ] || ./scripts/build.sh >/dev/null
mkdir -p models bench
[ -f "$MODEL" ] || "$WEFT" gen-model --preset 500m --type q4_0 -o "$MODEL" 2>/dev/null
tag=$(($$ % 10000))
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/netbed.sh down "$tag" "$WORKERS" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# Workers beyond loopback require a key (the coordinator reads it from $WEFT_AUTH_KEY_FILE).
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/key"
chmod 600 "$tmp/key"
export WEFT_AUTH_KEY_FILE=$tmp/key

json_field() { python3 -c "import json,sys; r=[json.loads(l) for l in sys.stdin if l.strip()]; print(r[$1]['$2'])"; }

# Inputs of the cost model.
read_mib=$("$WEFT" plan -m "$MODEL" | awk -F'|' '/^\| #/ { gsub(/ MiB/, "", $5); print $5 }')
tg1=$("$WEFT" bench -m "$MODEL" -p 0 -n 32 -r "$REPS" -t 1 -o jsonl 2>/dev/null | json_field 0 avg_ts)
device_gbs=$(python3 -c "print(round($read_mib * 1048576 * $tg1 / 1e9, 2))")
base_us=$("$MICRO" --benchmark_filter='BM_gloo_all_reduce_blocking/2048' --benchmark_format=json 2>/dev/null |
  python3 -c "import json,sys; print(round(json.load(sys.stdin)['benchmarks'][0]['real_time'] / 1000, 1))")

rows=""
for profile in $PROFILES; do
  read -r _ delay rate <<<"$(scripts/netbed.sh profiles | awk -v p="$profile" '$1 == p')"
  hosts=()
  if [ "$profile" = none ]; then
    for i in $(seq 1 "$WORKERS"); do hosts+=("- 127.0.0.1"); done
  else
    if ! scripts/netbed.sh up "$tag" "$WORKERS" "$profile" >"$tmp/hosts" 2>"$tmp/err"; then
      echo "bench_net: skipping $profile: $(cat "$tmp/err")" >&2
      continue
    fi
    mapfile -t hosts <"$tmp/hosts"
    grep -q "not applied" "$tmp/err" && delay=0  # no netem: the rate only
  fi
  devices=""
  port=7400
  for h in "${hosts[@]}"; do
    read -r ns ip <<<"$h"
    port=$((port + 1))
    run=()
    [ "$ns" = - ] || run=(ip netns exec "$ns")
    "${run[@]}" "$WEFT" worker --listen "$ip:$port" -t 1 --auth-key-file "$tmp/key" --model-dir "$(dirname "$(realpath "$MODEL")")" \
      >"$tmp/worker$port.log" 2>&1 &
    pids+=($!)
    devices+="${devices:+,}tcp://$ip:$port"
  done
  sleep 1
  delay_us=$(python3 -c "d='$delay'; print(float(d[:-2]) if d.endswith('us') else 0.0)")
  gbit=$(python3 -c "r='$rate'; print(float(r[:-4]) if r.endswith('gbit') else 40.0)")  # none: loopback, ~40 Gbit/s
  link_us=$(python3 -c "print($base_us + $delay_us)")
  for sm in tensor layer; do
    res=$("$WEFT" bench -m "$MODEL" -p 128 -n 32 -r "$REPS" --devices "$devices" -sm "$sm" -o jsonl 2>/dev/null)
    pp=$(json_field 0 avg_ts <<<"$res")
    tg=$(json_field 1 avg_ts <<<"$res")
    predicted=$("$WEFT" plan -m "$MODEL" --devices "$devices" -sm "$sm" --device-gbs "$device_gbs" \
      --link-latency-us "$link_us" --link-gbit "$gbit" | awk -F'|' -v sm="$sm" '$2 == " " sm " " { print $8 }')
    rows+="| $profile | $WORKERS | $sm | $pp | $tg | $predicted |"$'\n'
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
  [ "$profile" = none ] || scripts/netbed.sh down "$tag" "$WORKERS"
done

section=$(
  echo "## Network: tensor vs layer split over worker processes"
  echo
  echo "\`scripts/bench_net.sh\` ($(basename "$MODEL"), $WORKERS workers \`-t 1\`, pp128 / tg32, $REPS repetitions)."
  echo "Profiles from \`scripts/netbed.sh\` (workers in network namespaces on a bridge; this kernel's tc may lack"
  echo "netem, in which case the rate is applied and the delay is not). Cost model inputs measured here:"
  echo "one device reads $device_gbs GB/s (\`-t 1\` decode), one all-reduce message takes $base_us us on loopback."
  echo
  echo "| profile | workers | split | pp128 t/s | tg32 t/s | tg predicted (cost model) |"
  echo "| --- | ---: | --- | ---: | ---: | ---: |"
  printf '%s' "$rows" | awk -F'|' 'BEGIN { OFS = "|" } { $5 = sprintf(" %.1f ", $5); $6 = sprintf(" %.1f ", $6); print }'
)
out=bench/results.md
kept=$(awk '/^## Network/ { skip = 1; next } /^## / { skip = 0 } !skip' "$out" 2>/dev/null || true)
printf '%s\n\n%s\n' "$kept" "$section" >"$out"
echo "$section"
