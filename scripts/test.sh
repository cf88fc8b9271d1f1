#!/usr/bin/env bash
# The test suite: the layer check, unit and equality tests (Release), the hostile-input tests again under
# AddressSanitizer + UBSan, and bounded libFuzzer runs of the GGUF parser, the network frame decoders and the rendezvous store.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
python3 scripts/check_layers.py  # every #include goes down the layer table (ARCHITECTURE.md)
JOBS=$(nproc)

./scripts/build.sh
ctest --test-dir build --output-on-failure -j"$JOBS" --timeout 600

# Malformed GGUF files, generated models and tokenizers under ASan/UBSan: any memory error fails.
BUILD_DIR=build-asan CMAKE_ARGS="-DWEFT_SANITIZE=ON -DWEFT_BUILD_BENCH=OFF" TARGETS="gguf_tests tokenizer_tests tools_tests model_tests" ./scripts/build.sh >/dev/null
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 ./build-asan/tests/gguf_tests --gtest_brief=1
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 ./build-asan/tests/model_tests --gtest_brief=1
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 ./build-asan/tests/tokenizer_tests --gtest_brief=1
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 ./build-asan/tests/tools_tests --gtest_brief=1

# libFuzzer, for a bounded time each (clang): fuzz TARGET names the target; its corpus and log
# live in build-fuzz/TARGET-corpus and build-fuzz/TARGET.log.
FUZZ_SECONDS=${WEFT_FUZZ_SECONDS:-60}
fuzz() {
  CXX=clang++ BUILD_DIR=build-fuzz CMAKE_ARGS="-DWEFT_FUZZ=ON -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCH=OFF" TARGETS="$1" ./scripts/build.sh >/dev/null
  mkdir -p "build-fuzz/$1-corpus"
  "./build-fuzz/fuzz/$1" -max_total_time="$FUZZ_SECONDS" -max_len=4096 -rss_limit_mb=2048 "build-fuzz/$1-corpus" \
    2>"build-fuzz/$1.log" || { tail -50 "build-fuzz/$1.log"; exit 1; }
  echo "$1: $(grep -c . "build-fuzz/$1.log") log lines, no crash in $FUZZ_SECONDS s"
}
if command -v clang++ >/dev/null; then
  fuzz gguf_fuzz      # the GGUF parser
  fuzz frame_fuzz     # the frame header and every session message decoder a worker runs on network bytes
  fuzz kv_store_fuzz  # the rendezvous store's messages and its entry tags
fi
