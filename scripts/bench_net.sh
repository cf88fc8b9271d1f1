#!/usr/bin/env bash
# Tensor parallel across worker processes: one process with N threads beside N one-thread workers
# (tensor and layer split), on loopback and on the test bed's network profiles (scripts/netbed.sh:
# workers in network namespaces, links shaped with tc), each beside the cost model's prediction
# (weft plan). Writes the "## Network" section of bench/results.md (the rest of the file is kept)
# and prints it.
#   MODEL=models/weft-500m-q4_0.gguf  WORKERS="2 3"  REPS=3  PROFILES="none 25us-10gbit ..."
#   WEFT=build/weft  BEFORE=path/to/an/older/weft (optional: its loopback tensor rows too)
# Cost model inputs, measured here first: a device's read speed (one process, -t 1, decode) and
# one all-reduce message's latency on loopback (BM_gloo_all_reduce_blocking/2048), and through the
# host's shared memory that workers of one host use (BM_host_shm_all_reduce_spin/2048); each
# profile adds its delay (where netem exists) and its rate. On loopback (profile none) the tensor
# split runs twice: host shared memory (the default) and TCP (--net-shm off).
set -euo pipefail
cd "$(dirname "$0")/.."
WEFT=${WEFT:-build/weft}
MODEL=${MODEL:-models/weft-500m-q4_0.gguf}
WORKERS=${WORKERS:-"2 3"}
REPS=${REPS:-3}
PROFILES=${PROFILES:-$(scripts/netbed.sh profiles | awk '{ print $1 }' | tr '\n' ' ')}
BEFORE=${BEFORE:-}
MICRO=${MICRO:-build/bench/weft_microbench}
if [ ! -x "$WEFT" ] || [ ! -x "$MICRO" ]; then ./scripts/build.sh >/dev/null; fi
mkdir -p models bench
[ -f "$MODEL" ] || "$WEFT" gen-model --preset 500m --type q4_0 -o "$MODEL" 2>/dev/null
MODEL_DIR=$(dirname "$(realpath "$MODEL")")
tag=$(($$ % 10000))
tmp=$(mktemp -d)
pids=()
bed=0
stop_workers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
cleanup() {
  stop_workers
  [ "$bed" = 0 ] || scripts/netbed.sh down "$tag" "$bed" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# Workers beyond loopback require a key (the coordinator reads it from $WEFT_AUTH_KEY_FILE).
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/key"
chmod 600 "$tmp/key"
export WEFT_AUTH_KEY_FILE=$tmp/key

# pp and tg t/s of one `weft bench` (extra arguments appended), as "PP TG".
bench() {
  local weft=$1
  shift
  "$weft" bench -m "$MODEL" -p 128 -n 32 -r "$REPS" -o jsonl "$@" 2>/dev/null |
    python3 -c 'import json, sys; r = [json.loads(l) for l in sys.stdin if l.strip()]; print(r[0]["avg_ts"], r[1]["avg_ts"])'
}
# Starts one-thread workers of `weft` on the hosts in $tmp/hosts ("NAMESPACE ADDRESS"; namespace
# "-": this one); sets $devices.
start_workers() {
  local weft=$1 port=7400 ns ip
  devices=""
  while read -r ns ip; do
    port=$((port + 1))
    local run=()
    [ "$ns" = - ] || run=(ip netns exec "$ns")
    "${run[@]}" "$weft" worker --listen "$ip:$port" -t 1 --auth-key-file "$tmp/key" --model-dir "$MODEL_DIR" \
      >"$tmp/worker$port.log" 2>&1 &
    pids+=($!)
    devices+="${devices:+,}tcp://$ip:$port"
  done <"$tmp/hosts"
  sleep 1
}

# Inputs of the cost model.
read_mib=$("$WEFT" plan -m "$MODEL" | awk -F'|' '/^\| #/ { gsub(/ MiB/, "", $5); print $5 }')
read -r _ tg1 <<<"$(bench "$WEFT" -t 1)"
device_gbs=$(python3 -c "print(round($read_mib * 1048576 * $tg1 / 1e9, 2))")
latency_us() {
  "$MICRO" --benchmark_filter="$1" --benchmark_format=json 2>/dev/null |
    python3 -c "import json,sys; print(round(json.load(sys.stdin)['benchmarks'][0]['real_time'] / 1000, 1))"
}
base_us=$(latency_us 'BM_gloo_all_reduce_blocking/2048')
shm_us=$(latency_us 'BM_host_shm_all_reduce_spin/2048')

rows=""
row() { rows+="| $1 | $2 | $3 | $4 | $5 | $6 |"$'\n'; }
for n in $WORKERS; do
  read -r pp tg <<<"$(bench "$WEFT" -t "$n")"
  row "one process, -t $n" - - "$pp" "$tg" -
  for profile in $PROFILES; do
    read -r _ delay rate <<<"$(scripts/netbed.sh profiles | awk -v p="$profile" '$1 == p')"
    if [ "$profile" = none ]; then
      for _ in $(seq 1 "$n"); do echo "- 127.0.0.1"; done >"$tmp/hosts"
    else
      if ! scripts/netbed.sh up "$tag" "$n" "$profile" >"$tmp/hosts" 2>"$tmp/err"; then
        echo "bench_net: skipping $profile: $(cat "$tmp/err")" >&2
        continue
      fi
      bed=$n
      grep -q "not applied" "$tmp/err" && delay=0  # no netem: the rate only
    fi
    if [ "$profile" = none ] && [ -n "$BEFORE" ]; then
      start_workers "$BEFORE"
      read -r pp tg <<<"$(bench "$BEFORE" --devices "$devices")"
      row "$n workers (before: $(basename "$(dirname "$(dirname "$BEFORE")")"))" "$profile" tensor "$pp" "$tg" -
      stop_workers
    fi
    start_workers "$WEFT"
    delay_us=$(python3 -c "d = '$delay'; print(float(d[:-2]) if d.endswith('us') else 0.0)")
    gbit=$(python3 -c "r = '$rate'; print(float(r[:-4]) if r.endswith('gbit') else 40.0)")  # none: loopback
    runs="tensor layer"
    [ "$profile" = none ] && runs="tensor tensor-tcp layer"
    for run in $runs; do
      sm=${run%-tcp}
      extra=() link_us=$(python3 -c "print($base_us + $delay_us)") label=$sm
      if [ "$profile" = none ]; then
        case $run in
          tensor) link_us=$shm_us label="tensor, host shm" ;;
          tensor-tcp) extra=(--net-shm off) label="tensor, tcp" ;;
        esac
      fi
      read -r pp tg <<<"$(bench "$WEFT" --devices "$devices" -sm "$sm" "${extra[@]}")"
      predicted=$("$WEFT" plan -m "$MODEL" --devices "$devices" -sm "$sm" --device-gbs "$device_gbs" \
        --link-latency-us "$link_us" --link-gbit "$gbit" |
        awk -F'|' -v sm="$sm" '$2 == " " sm " " { gsub(/ /, "", $8); print $8 }')
      row "$n workers" "$profile" "$label" "$pp" "$tg" "$predicted"
    done
    stop_workers
    if [ "$bed" != 0 ]; then
      scripts/netbed.sh down "$tag" "$bed"
      bed=0
    fi
  done
done

section=$(
  echo "## Network: one process vs worker processes, tensor vs layer split"
  echo
  echo "\`scripts/bench_net.sh\` ($(basename "$MODEL"), workers \`-t 1\`, pp128 / tg32 t/s, $REPS repetitions)."
  echo "Profiles from \`scripts/netbed.sh\` (none: loopback; else workers in network namespaces on a bridge, links"
  echo "shaped with tc; where the kernel has no netem the rate is applied and the delay is not). Cost model"
  echo "inputs measured here: one device reads $device_gbs GB/s (\`-t 1\` decode), one all-reduce message"
  echo "takes $base_us us on loopback TCP and $shm_us us through host shared memory (workers of one host, the"
  echo "default: \`--net-shm on\`); tg predicted = 1 / the model's decode step (\`weft plan --device-gbs\`)."
  echo
  echo "| run | profile | split | pp128 t/s | tg32 t/s | tg predicted |"
  echo "| --- | --- | --- | ---: | ---: | ---: |"
  printf '%s' "$rows" | awk -F'|' 'BEGIN { OFS = "|" } { $5 = sprintf(" %.1f ", $5); $6 = sprintf(" %.1f ", $6); print }'
)
out=bench/results.md
kept=$(awk '/^## Network/ { skip = 1; next } /^## / { skip = 0 } !skip' "$out" 2>/dev/null || true)
printf '%s\n\n%s\n' "$kept" "$section" >"$out"
echo "$section"
