#!/usr/bin/env bash
# The test suite: the layer and format checks, unit and equality tests (Release), weft serve end to
# end (scripts/e2e.sh: node, Chromium), the unit tests again under AddressSanitizer + UBSan, the
# threaded layers under ThreadSanitizer, and bounded libFuzzer runs of the GGUF parser, the network
# frame decoders, the rendezvous store, the Jinja engine and GBNF grammars.
set -euo pipefail
cd "$(dirname "$0")/.."
# Where the time goes (CI has a limit): each stage's end, in seconds since the start.
stage() { echo "== test.sh: $1 done at ${SECONDS} s"; }
# Commands two at a time (the cores): together LOG 'COMMAND' LOG 'COMMAND' ...; each command's
# output goes to its LOG, whose end is shown when it fails.
together() {
  local pids=() logs=() rc=0 i
  while (($#)); do
    logs+=("$1")
    (eval "$2") >"$1" 2>&1 &
    pids+=($!)
    shift 2
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { rc=1; tail -100 "${logs[$i]}"; }; done
  return "$rc"
}
./scripts/setup.sh
stage setup
python3 scripts/check_layers.py  # every #include goes down the layer table (ARCHITECTURE.md)
./scripts/check_format.sh        # .clang-format
JOBS=$(nproc)
export WEFT_REQUIRE_SHARED=1  # tests needing ../shared fail, naming the file, instead of skipping

CMAKE_ARGS="-DWEFT_WERROR=ON" ./scripts/build.sh  # the project's own code builds without a warning
stage "release build"
ctest --test-dir build --output-on-failure -j"$JOBS" --timeout 600
stage "release tests"
# weft serve end to end: the openai npm client, 32 concurrent clients, the chat page in Chromium.
./scripts/e2e.sh build/weft
stage e2e

# Every test binary again under AddressSanitizer + UBSan: any memory error or undefined behaviour
# fails, whichever layer it is in (the tensor-parallel equality tests read logits through the
# same paths a user's run does).
# ASan + UBSan at -O2, the level of a RelWithDebInfo build: at -O1 GCC inlined what at -O2 it keeps
# out of line, and an out-of-line vector return it miscompiles (kernels/isa.h, WEFT_SIMD_INLINE) gave
# NaN logits only at -O2. The TSan and fuzz builds stay at -O1 (AddressSanitizer's own advice): half
# the compile time of -O3, which is most of this script's time on two cores.
# The sanitizer builds are unity builds (a few sources per translation unit: the headers' templates
# compiled once per group, not once per file); the Release build above stays one file per unit, as
# users build it, so a missing #include still fails here.
ASAN_OPT="-DCMAKE_CXX_FLAGS_RELEASE=-O2"  # one word: build.sh splits CMAKE_ARGS on spaces
SAN_OPT="-DCMAKE_CXX_FLAGS_RELEASE=-O1"
UNITY="-DCMAKE_UNITY_BUILD=ON"
BUILD_DIR=build-asan CMAKE_ARGS="-DWEFT_SANITIZE=ON -DWEFT_BUILD_BENCH=OFF $UNITY $ASAN_OPT" ./scripts/build.sh >/dev/null
stage "asan build"
ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp" \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j"$JOBS" --timeout 900
stage "asan tests"

# The layers with threads (collectives, devices, the engine) under ThreadSanitizer.
BUILD_DIR=build-tsan CMAKE_ARGS="-DWEFT_TSAN=ON -DWEFT_BUILD_BENCH=OFF $UNITY $SAN_OPT" TARGETS="parallel_tests device_tests runtime_tests" \
  ./scripts/build.sh >/dev/null
stage "tsan build"
# Left out here (they run under ASan above): the per-type and per-family sweeps of the equality tests
# (kernels and plans, not threads), the remote tests that wait out load and silence bounds in worker processes, and
# the matrix of worker counts x kill moments of device loss (DeviceLoss.* keeps one of each kind).
# scripts/tsan.supp: only lavapipe's own futex hand-overs, which TSan cannot see.
# runtime_tests, most of the time, in two halves at once (gtest's sharding), then the other two.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp"
RUNTIME="./build-tsan/tests/runtime_tests --gtest_brief=1 --gtest_filter='-Types/*:Archs/FamilySplits.*:DeviceLoss/*'"
together build-tsan/runtime0.log "GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=0 $RUNTIME" \
  build-tsan/runtime1.log "GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=1 $RUNTIME"
together build-tsan/parallel.log "./build-tsan/tests/parallel_tests --gtest_brief=1" \
  build-tsan/device.log "./build-tsan/tests/device_tests --gtest_brief=1 --gtest_filter='-RemoteLoad.*:RemoteSession.*'"
grep -h "test suites ran" build-tsan/{runtime0,runtime1,parallel,device}.log || true  # gtest: "[==========] N tests from M test suites ran."
stage "tsan tests"

# libFuzzer, for a bounded time each (clang), two at a time: each target's corpus and log live in
# build-fuzz/TARGET-corpus and build-fuzz/TARGET.log.
FUZZ_SECONDS=${WEFT_FUZZ_SECONDS:-20}  # 6 targets; the whole script must stay under the CI limit
fuzz() {  # fuzz TARGET TARGET: the two at once
  local t cmds=()
  for t in "$@"; do
    mkdir -p "build-fuzz/$t-corpus"
    cmds+=("build-fuzz/$t.log" "./build-fuzz/fuzz/$t -max_total_time=$FUZZ_SECONDS -timeout=30 -max_len=4096 -rss_limit_mb=2048 build-fuzz/$t-corpus")
  done
  together "${cmds[@]}"
  for t in "$@"; do echo "$t: $(grep -c . "build-fuzz/$t.log") log lines, no crash in $FUZZ_SECONDS s"; done
  stage "fuzz $*"
}
if command -v clang++ >/dev/null; then
  # The GGUF parser; the frame header and every session message decoder a worker runs on network
  # bytes; the rendezvous store's messages and its entry tags; the discovery datagrams (worker
  # announcements, queries) from anyone on the segment; the Jinja engine on template text (a model
  # file's chat template); GBNF text and the texts a sequence writes through its automaton (a
  # request's grammar or schema).
  FUZZ_TARGETS=(gguf_fuzz frame_fuzz kv_store_fuzz announce_fuzz jinja_fuzz grammar_fuzz)
  CXX=clang++ BUILD_DIR=build-fuzz CMAKE_ARGS="-DWEFT_FUZZ=ON -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCH=OFF $SAN_OPT" \
    TARGETS="${FUZZ_TARGETS[*]}" ./scripts/build.sh >/dev/null
  stage "fuzz build"
  fuzz gguf_fuzz frame_fuzz
  fuzz kv_store_fuzz announce_fuzz
  fuzz jinja_fuzz grammar_fuzz
fi
