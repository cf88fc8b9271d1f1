#!/usr/bin/env bash
# issue 38's checks and figures on a GPU machine, in one command of a few minutes, from what
# scripts/gpu_bundle.sh packed (gpu-bundle/, carried): the machine needs glibc and a GPU driver,
# nothing else (no package manager, no network). It
#   1. points the bundle's Vulkan loader at the machine's NVIDIA driver (its ICD manifest, or one
#      written for libGLX_nvidia.so.0) and prints `weft info --devices`;
#   2. generates the models (weft gen-model, PRESETS x TYPES); a type weft refuses on vk:0 is
#      skipped with a line saying why;
#   3. checks greedy equality of vk:0 against cpu:NPROC per model (reference kernels and the machine's);
#   4. measures on vk:0 per model: tg, with decode as a fraction of the GPU's memory bandwidth read
#      in the same run (weft bench --roofline), and pp in TFLOP/s (2 x the matmul weights per
#      token), each op's GPU time with them (--profile);
#      then decode and prompts under each of DECODE_SWEEP and PROMPT_SWEEP on the largest q4_0 model;
#   5. runs the Vulkan tests on the GPU under the validation layer (the conformance suite's Vk
#      instance and every other Vk test), while the slow K-quant models of the larger presets are
#      generated, then measures those;
#   6. measures vk:0,vk:0 against vk:0, the ratios -ts auto picks for vk:0,cpu:NPROC, and the CPU
#      devices at each of CPU_THREADS.
# Every step has a timeout and the whole a budget (a step that would pass it is skipped, saying
# so). The figures go to $OUT/gpu_check.md (tables for bench/results.md), everything printed to
# $OUT/gpu_check.log, the bench JSON to $OUT/gpu_check_json.tar.gz.
#
# On the device machine (the run tool, gpu-bundle in its carry list):  scripts/gpu_check.sh
# A dry run on lavapipe (README: "Vulkan on a GPU machine"):
#   PRESETS=tiny TYPES="q4_0 q8_0" PP=32 TG=16 REPS=1 CPU_THREADS="2 1" OUT=/tmp/gc scripts/gpu_check.sh
# Knobs: BUNDLE=gpu-bundle  OUT=${OUT:-gpu-check-out}  WORK=/tmp/weft-gpu (models, scratch)
#   PRESETS="500m 8b-shape"  TYPES="q4_0 q4_k_m"  PP=512  TG=128  REPS=3  CPU_THREADS="NPROC NPROC/2"
#   CPU_PP=128  CPU_TG=32  BUDGET_S=470 (seconds for the whole run)  SKIP_TESTS=1
#   FAMILIES="gpt-oss:tiny-moe:mxfp4 ..." (ARCH:PRESET:TYPE models whose greedy tokens vk:0 must match)
#   FAMILY_BENCH="qwen35:qwen35-mini:q8_0" (ARCH:PRESET:TYPE models timed on vk:0, "" none)
#   NEED_GPU=auto (1: vk:0 must be a GPU, or every vk step is skipped; auto: 1 where nvidia-smi runs)
#   DECODE_SWEEP="WEFT_VK_MATVEC=1,2 ..." PROMPT_SWEEP="WEFT_VK_GEMM=0 ..." (settings to time decode and
#   prompts under, "" none) SWEEP_TYPES=q4_0 (on the largest model of each)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
start=$(date +%s)
BUNDLE=$(cd "${BUNDLE:-gpu-bundle}" 2>/dev/null && pwd) || { echo "gpu_check: no bundle (scripts/gpu_bundle.sh)" >&2; exit 2; }
OUT=${OUT:-gpu-check-out}
WORK=${WORK:-/tmp/weft-gpu}
PRESETS=${PRESETS:-"500m 8b-shape"}
FAMILIES=${FAMILIES:-"gpt-oss:tiny-moe:mxfp4 gpt-oss:tiny-moe:q8_0 gemma3:tiny:q8_0 phi3:tiny:q4_0 qwen35:tiny:q8_0 qwen3next:tiny-moe:q8_0 deepseek2:tiny-moe:q8_0"}
# ARCH:PRESET:TYPE models timed on vk:0 beside the PRESETS (Gated DeltaNet's recurrence, MLA's latent attention)
FAMILY_BENCH=${FAMILY_BENCH:-"qwen35:qwen35-mini:q8_0 deepseek2:deepseek-mini:q8_0"}
TYPES=${TYPES:-"q4_0 q4_k_m"}
PP=${PP:-512}
TG=${TG:-128}
REPS=${REPS:-3}
NPROC=$(nproc)
CPU_THREADS=${CPU_THREADS:-"$NPROC $((NPROC / 2))"}
CPU_PP=${CPU_PP:-128}
CPU_TG=${CPU_TG:-32}
BUDGET_S=${BUDGET_S:-470}
NEED_GPU=${NEED_GPU:-auto}
SWEEP_TYPES=${SWEEP_TYPES-q4_0}
PROMPT_SWEEP=${PROMPT_SWEEP-"WEFT_VK_GEMM=0 WEFT_VK_INT_DOT=0"}
DECODE_SWEEP=${DECODE_SWEEP-"WEFT_VK_MATVEC=1,2 WEFT_VK_MATVEC=1,1 WEFT_VK_MATVEC=2,1 WEFT_VK_MATVEC=8,1 WEFT_VK_MATVEC=4,2 WEFT_VK_SUBMIT_LAYERS=0 WEFT_VK_SUBMIT_LAYERS=4 WEFT_VK_INT_DOT=0"}
mkdir -p "$OUT" "$WORK/models" "$WORK/sections"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/gpu_check.log
RES=$OUT/gpu_check.md
: >"$LOG"
rm -f "$WORK"/sections/* "$WORK"/*.json
WEFT=$BUNDLE/bin/weft

log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$LOG" >&2; }
# res SECTION LINE...: lines of a section of the results (assembled in order at the end).
res() {
  local s=$1
  shift
  printf '%s\n' "$@" >>"$WORK/sections/$s"
  publish
}
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
# run SECONDS OUTFILE CMD...: CMD under a timeout of SECONDS (less where the budget has less left;
# not at all under 10 s), stdout to OUTFILE (/dev/null: the log too), stderr to the log; returns
# its status as `timeout` gives it (124: timed out; 125 here: skipped).
run() {
  local t=$1 file=$2
  shift 2
  local l
  l=$(left)
  [ "$t" -gt "$((l - 5))" ] && t=$((l - 5))
  if [ "$t" -lt 10 ]; then
    log "skipped (budget spent): $*"
    return 125
  fi
  echo "\$ $*" >>"$LOG"
  if [ "$file" = /dev/null ]; then
    timeout -k 5 "$t" "$@" >>"$LOG" 2>&1
  else
    timeout -k 5 "$t" "$@" >"$file" 2>>"$LOG"
  fi
}
# The results so far, so that a run the device tool cuts short still brings its finished sections.
publish() { cat "$WORK"/sections/* >"$RES" 2>/dev/null; }
status() { case $1 in 0) echo ok ;; 124 | 137) echo "timed out" ;; 125) echo skipped ;; *) echo "failed ($1)" ;; esac; }

# --- 1. the bundle's libraries, the driver, the devices ---
# shellcheck disable=SC1091
source "$BUNDLE/bundle.env"
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The machine's libstdc++ unless it lacks one as new as the binaries need.
if ldd "$WEFT" 2>&1 | grep -q 'not found'; then
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$BUNDLE/lib/cxx"
  log "libstdc++/libgcc_s: the bundle's (the machine's are missing or older)"
fi
if ldd "$WEFT" 2>&1 | grep 'not found' >&2; then
  log "weft cannot start here: a library is missing (above)"
  exit 2
fi

nvidia=0
PATH=$PATH:/usr/local/nvidia/bin
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && nvidia=1
[ -e /dev/nvidia0 ] && nvidia=1
[ "$NEED_GPU" = auto ] && NEED_GPU=$nvidia
if [ -z "${VK_ICD_FILENAMES:-}${VK_DRIVER_FILES:-}" ] && [ "$nvidia" = 1 ]; then
  icd=""
  for f in /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json \
    /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd*.json /usr/local/share/vulkan/icd.d/nvidia_icd*.json; do
    [ -f "$f" ] && icd=$f && break
  done
  # The driver's Vulkan library, where the dynamic linker may not look (a manifest names it bare).
  glx=$(ldconfig -p 2>/dev/null | awk '/libGLX_nvidia\.so\.0 .*x86-64/ { print $NF; exit }')
  if [ -z "$glx" ]; then
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
      [ -e "$d/libGLX_nvidia.so.0" ] && glx=$d/libGLX_nvidia.so.0 && break
    done
    [ -n "$glx" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:${glx%/*}"
  fi
  # What the driver links or dlopens and this image may lack (glvnd's libEGL.so.1, X11): the
  # bundle's copies, after the machine's. Without libEGL.so.1 the ICD loads and offers no vkCreateInstance.
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$BUNDLE/lib/driver"
  [ -n "$glx" ] && ldd "$glx" 2>&1 | grep 'not found' >>"$LOG"
  # glvnd's libEGL finds NVIDIA's EGL through a vendor manifest; where the image has none, one.
  if ! ls /usr/share/glvnd/egl_vendor.d/*nvidia*.json /etc/glvnd/egl_vendor.d/*nvidia*.json >/dev/null 2>&1; then
    printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_nvidia.so.0"}}\n' >"$WORK/10_nvidia.json"
    export __EGL_VENDOR_LIBRARY_FILENAMES=$WORK/10_nvidia.json
  fi
  if [ -z "$icd" ] && [ -n "$glx" ]; then
    icd=$WORK/nvidia_icd.json
    printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' "$glx" >"$icd"
    log "wrote $icd for $glx (the machine has no NVIDIA ICD manifest)"
  fi
  if [ -n "$icd" ]; then
    export VK_ICD_FILENAMES=$icd VK_DRIVER_FILES=$icd
    log "Vulkan driver: $icd"
  else
    log "no NVIDIA Vulkan driver found (no nvidia_icd.json, no libGLX_nvidia.so.0)"
  fi
fi
# The validation layer the Vulkan tests run under (tests/support/vk_validation.h turns it on).
if [ -f "$BUNDLE/layers/libVkLayer_khronos_validation.so.gz" ]; then
  mkdir -p "$WORK/layers"
  gunzip -c "$BUNDLE/layers/libVkLayer_khronos_validation.so.gz" >"$WORK/layers/libVkLayer_khronos_validation.so"
  cp "$BUNDLE/layers/VkLayer_khronos_validation.json" "$WORK/layers/"
  export VK_LAYER_PATH=$WORK/layers
fi
# The paths the test binaries were built with: where missing, links into the bundle.
if [ ! -e "$WEFT_TEST_BINARY" ]; then
  mkdir -p "$(dirname "$WEFT_TEST_BINARY")" && ln -sf "$WEFT" "$WEFT_TEST_BINARY"
fi
if [ ! -e "$WEFT_TEST_SHARED_DIR/models/stories260K.gguf" ]; then
  mkdir -p "$WEFT_TEST_SHARED_DIR/models" && cp "$BUNDLE/models/stories260K.gguf" "$WEFT_TEST_SHARED_DIR/models/"
fi

res 0head "# weft gpu_check: $(date -u +%F) on $(hostname)" "" \
  "weft $WEFT_BUNDLE_COMMIT (bundle of $WEFT_BUNDLE_DATE); $NPROC cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
[ "$nvidia" = 1 ] && res 0head "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
res 0head "" '```' "$("$WEFT" info --devices 2>&1 | tee -a "$LOG")" '```'
vk0=$("$WEFT" info --devices 2>/dev/null | grep -m1 '^  vk:0 ')
have_vk=1
if [ -z "$vk0" ] || { [ "$NEED_GPU" = 1 ] && echo "$vk0" | grep -q 'software (CPU)\|unusable'; }; then
  have_vk=0
  log "vk:0 is not a usable GPU (${vk0:-none}); the loader's account:"
  VK_LOADER_DEBUG=error,warn,driver "$WEFT" info --devices 2>&1 | head -80 >>"$LOG"
  res 0head "" "**No usable Vulkan GPU: every vk:0 step is skipped** (the log has the loader's account)."
fi

# --- 2. models ---
models=()      # generated and runnable on vk:0 (every one, without vk)
background=()  # "PRESET TYPE": generated while the tests run (K-quant quantization is slow)
first_preset=${PRESETS%% *}
gen() {  # PRESET TYPE: prints the model's path once it exists
  local m=$WORK/models/$1-$2.gguf
  if [ ! -s "$m" ]; then
    run 240 /dev/null "$WEFT" gen-model --preset "$1" --type "$2" -o "$m.tmp" || {
      log "gen-model $1 $2: $(status $?)"
      return 1
    }
    mv "$m.tmp" "$m"
  fi
  echo "$m"
}
# Whether weft refuses a model on vk:0 (a weight type without a Vulkan kernel): prints the error.
vk_refuses() {
  local out rc
  out=$(timeout 120 "$WEFT" run -m "$1" --devices vk:0 -p hi -n 1 --temp 0 2>&1 >/dev/null)
  rc=$?
  [ $rc = 0 ] && return 1
  echo "$out" | grep -m1 'error' || echo "exit status $rc"
}
for type in $TYPES; do
  m=$(gen "$first_preset" "$type") || continue
  if [ "$have_vk" = 1 ] && why=$(vk_refuses "$m"); then
    log "type $type: skipped, weft refuses it on vk:0: $why"
    res 0head "" "Type $type skipped: weft refuses it on vk:0 (\`$why\`)."
    continue
  fi
  models+=("$m")
  for preset in ${PRESETS#"$first_preset"}; do
    case $type in
      q4_0 | q4_1 | q5_0 | q5_1 | q8_0 | f16 | bf16 | f32) m=$(gen "$preset" "$type") && models+=("$m") ;;
      *) [ "$have_vk" = 1 ] && background+=("$preset $type") ;;  # (the CPU steps use q4_0 only)
    esac
  done
done

# --- 3. greedy equality ---
# MODEL: one row, vk:0's greedy tokens against the CPU device's with the scalar reference kernels
# (WEFT_MAX_ISA=ref: what the shaders mirror, block by block) and with the machine's own (whose
# sums run in another order: on random weights' flat logits a last bit can pick another token).
equality() {
  local a=$WORK/eq_vk.out b=$WORK/eq_ref.out c=$WORK/eq_cpu.out
  local greedy=(run -m "$1" -p "Once upon a time" -n 32 --temp 0 --json --log-disable)
  run 120 "$a" "$WEFT" "${greedy[@]}" --devices vk:0
  local ra=$?
  run 120 "$b" env WEFT_MAX_ISA=ref "$WEFT" "${greedy[@]}" --devices "cpu:$NPROC"
  local rb=$?
  run 120 "$c" "$WEFT" "${greedy[@]}" --devices "cpu:$NPROC"
  local rc=$?
  if [ $ra != 0 ] || [ $rb != 0 ] || [ $rc != 0 ]; then
    res 2equality "| $(basename "$1") | vk:0 $(status $ra), reference $(status $rb), cpu:$NPROC $(status $rc) | |"
    return
  fi
  res 2equality "| $(basename "$1") | $(python3 - "$a" "$b" "$c" <<'EOF'
import json, sys
a, b, c = (json.load(open(p))["generated_ids"] for p in sys.argv[1:4])
def same(x, y):
    first = next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
    return f"identical ({len(x)} tokens)" if x == y else f"**differ** from token {first} of {len(x)}"
print(f"{same(a, b)} | {same(a, c)}")
EOF
) |"
}
if [ "$have_vk" = 1 ]; then
  res 2equality "" "## Greedy tokens of vk:0 against the CPU device's (32 tokens after \"Once upon a time\")" "" \
    "| model | against cpu:$NPROC, reference kernels | against cpu:$NPROC, this machine's kernels |" "| --- | --- | --- |"
  equality "$BUNDLE/models/stories260K.gguf"
  for m in "${models[@]}"; do equality "$m"; done
  for f in $FAMILIES; do  # ARCH:PRESET:TYPE: each family's own ops (sinks, windows, fused tensors) on the GPU
    IFS=: read -r arch preset type <<<"$f"
    m=$WORK/models/$arch-$preset-$type.gguf
    if run 120 /dev/null "$WEFT" gen-model --arch "$arch" --preset "$preset" --type "$type" -o "$m"; then
      equality "$m"
    else
      log "gen-model $f: did not finish"
    fi
  done
fi

# --- 4. measurements on vk:0 ---
# 2 x the multiplied weights of a model (every tensor but the token embedding, which is looked up).
flop_per_token() {
  "$WEFT" info "$1" 2>/dev/null |
    awk 'NF >= 4 && $NF ~ /^[0-9,]+$/ && $1 ~ /\.(weight|bias)$/ && $1 != "token_embd.weight" { gsub(",", "", $NF); s += $NF }
         END { printf "%.0f\n", 2 * s }'
}
# Markdown rows from bench JSON: t/s, decode against the read (tg, --roofline), TFLOP/s (pp).
summarize() {  # FLOP_PER_TOKEN FILE...
  python3 - "$@" <<'EOF'
import json, sys
flop = float(sys.argv[1])
for path in sys.argv[2:]:
    try:
        records = json.load(open(path))
    except Exception as e:
        print(f"| {path.rsplit('/', 1)[-1]} | no result ({type(e).__name__}) | | | | |")
        continue
    for r in records:
        test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        ts, roof, extra = r["avg_ts"], r.get("roofline"), ""
        if roof:
            gb = 1.073741824  # GiB/s -> GB/s
            extra = (f"{roof['decode_gibs'] * gb:.1f} of {roof['read_gibs'] * gb:.1f} GB/s read: "
                     f"**{100 * roof['of_read']:.1f}%** (p10-p90 {100 * roof['of_read_p10']:.0f}-{100 * roof['of_read_p90']:.0f})")
        elif r["n_prompt"]:
            extra = f"**{ts * flop / 1e12:.3f} TFLOP/s**"
        name = r["model_filename"].rsplit("/", 1)[-1]
        devices = r["devices"] if r["devices"].startswith("vk") else f"{r['devices']} ({r['n_threads']} threads)"
        print(f"| {name} | {devices} | {r['tensor_split']} | {test} | {ts:.2f} ± {r['stddev_ts']:.2f} | {extra} |")
EOF
}
table_head() { res "$1" "" "| model | devices | split | test | t/s | decode / prompt |" "| --- | --- | --- | --- | ---: | --- |"; }
# bench SECTION MODEL DEVICES: a tg run (with the GPU's read where every device is vk) and a pp run.
bench() {
  local section=$1 m=$2 dev=$3 tag roof=""
  tag=$(basename "$m" .gguf)-${dev//[:,]/_}
  [[ $dev != *cpu* ]] && roof=--roofline
  run 150 "$WORK/b_${tag}_tg.json" "$WEFT" bench -m "$m" --devices "$dev" -p 0 -n "$TG" -r "$REPS" $roof --profile -o json ||
    log "bench $tag tg: $(status $?)"
  run 150 "$WORK/b_${tag}_pp.json" "$WEFT" bench -m "$m" --devices "$dev" -p "$PP" -n 0 -r "$REPS" --profile -o json ||
    log "bench $tag pp: $(status $?)"
  summarize "$(flop_per_token "$m")" "$WORK/b_${tag}_tg.json" "$WORK/b_${tag}_pp.json" >>"$WORK/sections/$section"
  publish
}
if [ "$have_vk" = 1 ]; then
  res 3vk "" "## vk:0: decode against the GPU's memory read in the same run; prompts in TFLOP/s" "" \
    "tg: \`weft bench -p 0 -n $TG -r $REPS --roofline\` (the read: a shader over up to 1 GiB of device memory," \
    "timed by the GPU, between runs of 8 tokens; GB/s = 10^9 B/s). pp: \`-p $PP\`; FLOP = 2 x the matmul weights" \
    "per token (the token embedding out, attention not counted). Per-op GPU time at the end."
  table_head 3vk
  for m in "${models[@]}"; do bench 3vk "$m" vk:0; done
  for f in $FAMILY_BENCH; do
    IFS=: read -r arch preset type <<<"$f"
    m=$WORK/models/$arch-$preset-$type.gguf
    if run 120 /dev/null "$WEFT" gen-model --arch "$arch" --preset "$preset" --type "$type" -o "$m"; then
      bench 3vk "$m" vk:0
    else
      log "gen-model $f: did not finish"
    fi
  done
  res 3vknote "" "$(grep -m1 '^roofline: ' "$LOG")"
fi

# --- 4b. decode's and prompts' shader settings on the largest model of each SWEEP_TYPES ---
# sweep MODEL SETTING TEST FLOP_PER_TOKEN BENCH_ARGS...: one row, vk:0 under SETTING (VAR=VALUE, or
# default), timestamps off.
sweep() {
  local m=$1 setting=$2 test=$3 flop=$4 tag
  shift 4
  tag=$(basename "$m" .gguf)-$test-${setting//[=,]/_}
  local env_set=()
  [ "$setting" != default ] && env_set=("$setting")
  run 90 "$WORK/s_$tag.json" env WEFT_VK_TIMESTAMPS=0 "${env_set[@]}" "$WEFT" bench -m "$m" --devices vk:0 "$@" \
    -o json || log "bench $tag: $(status $?)"
  summarize "$flop" "$WORK/s_$tag.json" | sed "s/| vk:0 |/| vk:0, ${setting#WEFT_VK_} |/" >>"$WORK/sections/3vksweep"
  publish
}
if [ "$have_vk" = 1 ] && [ -n "$DECODE_SWEEP" ]; then
  res 3vksweep "" "## vk:0 under other settings: \`WEFT_VK_MATVEC=S,R\` (S subgroups a workgroup, R rows each), \`WEFT_VK_SUBMIT_LAYERS=N\` (layers a submission, 0: the step whole), \`WEFT_VK_INT_DOT=0\`, \`WEFT_VK_GEMM=0\` (prompts a thread per input row)" "" \
    "tg$TG -r 2 and pp$PP -r 1, timestamps off. Defaults on a GPU: 4,1, 1, the dot product instruction where in hardware, the tiled GEMM (before session 33: 1,2, 0, none, none); on a CPU-type device 1,16, 0, none, none."
  table_head 3vksweep
  for type in $SWEEP_TYPES; do
    m=""
    for c in "${models[@]}"; do [[ $c == *-$type.gguf ]] && m=$c; done
    [ -z "$m" ] && continue
    for setting in default $DECODE_SWEEP; do sweep "$m" "$setting" tg 0 -p 0 -n "$TG" -r 2; done
    for setting in default $PROMPT_SWEEP; do sweep "$m" "$setting" pp "$(flop_per_token "$m")" -p "$PP" -n 0 -r 1; done
  done
fi

# --- 5. the Vulkan tests, while the larger K-quant models are generated ---
bg_pid=""
if [ ${#background[@]} -gt 0 ]; then
  (for pt in "${background[@]}"; do
    read -r preset type <<<"$pt"
    m=$WORK/models/$preset-$type.gguf
    if [ ! -s "$m" ] && timeout -k 5 300 "$WEFT" gen-model --preset "$preset" --type "$type" -o "$m.tmp" >>"$LOG" 2>&1; then
      mv "$m.tmp" "$m"
    fi
  done) &
  bg_pid=$!
  log "generating in the background: ${background[*]}"
fi
if [ "$have_vk" = 1 ] && [ -z "${SKIP_TESTS:-}" ]; then
  res 1tests "" "## Vulkan tests on vk:0" "" \
    "Under the Khronos validation layer (synchronisation validation on), as in CI; each binary's output is in the log."
  for t in "device_tests *Vk* 100" "runtime_tests *Vk* 100" "cli_tests *Vulkan* 40"; do
    read -r binary filter seconds <<<"$t"
    out=$WORK/tests_$binary.txt
    run "$seconds" "$out" "$BUNDLE/bin/$binary" --gtest_filter="$filter"
    rc=$?
    cat "$out" >>"$LOG"
    # The totals and the failed tests, or the test it stopped in.
    summary=$(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$out" | tr '\n' ' ')
    failed=$(grep -E '^\[  FAILED  \] [A-Za-z]' "$out" | sed 's/^\[  FAILED  \] //; s/ (.*//; s/,.*//' | sort -u | tr '\n' ' ')
    [ -z "$summary" ] && summary="stopped in $(grep -E '^\[ RUN      \]' "$out" | tail -1 | sed 's/^\[ RUN      \] //')"
    res 1tests "- \`$binary --gtest_filter='$filter'\`: $(status $rc); $summary${failed:+; failed: $failed}"
    log "$binary $filter: $(status $rc)"
  done
fi
if [ -n "$bg_pid" ]; then
  log "waiting for the background models"
  wait "$bg_pid"
  for pt in "${background[@]}"; do
    read -r preset type <<<"$pt"
    m=$WORK/models/$preset-$type.gguf
    if [ ! -s "$m" ]; then
      log "gen-model $preset $type: did not finish"
      res 0head "" "Model $preset $type not generated in time."
      continue
    fi
    models+=("$m")
    if [ "$have_vk" = 1 ]; then
      equality "$m"
      bench 3vk "$m" vk:0
    fi
  done
fi

# --- 6. two devices on the GPU, -ts auto beside the CPU, CPU devices ---
largest_q4_0=""
for m in "${models[@]}"; do [[ $m == *-q4_0.gguf ]] && largest_q4_0=$m; done
[ -z "$largest_q4_0" ] && [ ${#models[@]} -gt 0 ] && largest_q4_0=${models[-1]}
if [ "$have_vk" = 1 ] && [ -n "$largest_q4_0" ]; then
  res 4split "" "## vk:0,vk:0 (two logical devices on the GPU) against vk:0: the collective path's cost" "" \
    "The last row: vk:0's decode without the per-op timestamp queries (what --profile's GPU times cost)."
  table_head 4split
  bench 4split "$largest_q4_0" vk:0,vk:0
  tag=$(basename "$largest_q4_0" .gguf)-vk_0
  summarize "$(flop_per_token "$largest_q4_0")" "$WORK/b_${tag}_tg.json" "$WORK/b_${tag}_pp.json" >>"$WORK/sections/4split"
  run 150 "$WORK/b_${tag}_tg_nots.json" env WEFT_VK_TIMESTAMPS=0 "$WEFT" bench -m "$largest_q4_0" --devices vk:0 \
    -p 0 -n "$TG" -r "$REPS" --roofline -o json || log "bench $tag tg without timestamps: $(status $?)"
  summarize 0 "$WORK/b_${tag}_tg_nots.json" | sed 's/| vk:0 |/| vk:0, WEFT_VK_TIMESTAMPS=0 |/' >>"$WORK/sections/4split"
  run 150 "$WORK/tsauto.out" "$WEFT" run -m "$largest_q4_0" --devices "vk:0,cpu:$NPROC" -ts auto \
    -p "Once upon a time" -n 64 --temp 0
  rc=$?
  # What the run printed after its command line: the calibration, the ratios, the generation.
  auto=$(awk '/^\$ .*-ts auto/ { n = NR } { line[NR] = $0 } END { for (i = n; i <= NR; ++i) print line[i] }' "$LOG" |
    grep -E -- '-ts auto:|calibration over|^generation:' | sed 's/^\[engine\] //')
  res 5tsauto "" "## -ts auto on vk:0,cpu:$NPROC ($(basename "$largest_q4_0"), \`weft run -n 64\`): $(status $rc)" "" '```' \
    "$(echo "$auto" | tail -3)" '```'
fi
if [ ${#models[@]} -gt 0 ]; then
  res 6cpu "" "## CPU devices: -t ${CPU_THREADS// / against -t } (-p $CPU_PP -n $CPU_TG -r 2)"
  table_head 6cpu
  cpu_models=("$largest_q4_0")
  [ "${models[0]}" != "$largest_q4_0" ] && cpu_models=("${models[0]}" "$largest_q4_0")
  for m in "${cpu_models[@]}"; do
    for t in $CPU_THREADS; do
      tag=$(basename "$m" .gguf)-t$t
      run 150 "$WORK/c_$tag.json" "$WEFT" bench -m "$m" -t "$t" -p "$CPU_PP" -n "$CPU_TG" -r 2 -o json ||
        log "bench $tag: $(status $?)"
      summarize "$(flop_per_token "$m")" "$WORK/c_$tag.json" >>"$WORK/sections/6cpu"
      publish
    done
  done
fi

# Each vk bench's per-op GPU time (--profile: ms per step over all its steps, warm-up included).
if [ "$have_vk" = 1 ]; then
  res 7profile "" "## Per-op time of the vk benches (\`--profile\`, ms/step over every step of the run)" "" '```'
  grep -E '^\$ .*weft bench .*--devices vk|^vk:[0-9]+: |^  [a-z_() ]+ +[0-9.]+ ms/step' "$LOG" |
    sed -E 's/^\$ .*bench -m ([^ ]*) --devices ([^ ]*) -p ([0-9]*) -n ([0-9]*).*/== \1 \2 -p \3 -n \4/' >>"$WORK/sections/7profile"
  res 7profile '```'
fi

cat "$WORK"/sections/* >"$RES"
# A file comes back from the device run only under 16 MiB: the log's head and tail where it is longer.
if [ "$(stat -c %s "$LOG")" -gt $((15 << 20)) ]; then
  { head -c $((7 << 20)) "$LOG"; printf '\n[... cut to 14 MiB ...]\n'; tail -c $((7 << 20)) "$LOG"; } >"$LOG.cut"
  mv "$LOG.cut" "$LOG"
fi
(cd "$WORK" && tar -czf "$OUT/gpu_check_json.tar.gz" ./*.json 2>/dev/null)
log "done in $(($(date +%s) - start)) s (budget $BUDGET_S s): $RES"
cat "$RES"
