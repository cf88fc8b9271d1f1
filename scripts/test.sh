#!/usr/bin/env bash
# The test suite: unit and equality tests (Release), the hostile-input tests again under
# AddressSanitizer + UBSan, and bounded libFuzzer runs of the GGUF parser and the network frame decoders.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
JOBS=$(nproc)

./scripts/build.sh
ctest --test-dir build --output-on-failure -j"$JOBS" --timeout 600

# Malformed GGUF files, generated models and tokenizers under ASan/UBSan: any memory error fails.
BUILD_DIR=build-asan CMAKE_ARGS="-DWEFT_SANITIZE=ON -DWEFT_BUILD_BENCH=OFF" TARGETS="gguf_tests model_tests" ./scripts/build.sh >/dev/null
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 ./build-asan/tests/gguf_tests --gtest_brief=1
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 ./build-asan/tests/model_tests --gtest_brief=1

# libFuzzer on the GGUF parser for a bounded time (clang).
if command -v clang++ >/dev/null; then
  CXX=clang++ BUILD_DIR=build-fuzz CMAKE_ARGS="-DWEFT_FUZZ=ON -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCH=OFF" TARGETS=gguf_fuzz ./scripts/build.sh >/dev/null
  mkdir -p build-fuzz/corpus
  ./build-fuzz/fuzz/gguf_fuzz -max_total_time="${WEFT_FUZZ_SECONDS:-30}" -max_len=4096 -rss_limit_mb=2048 build-fuzz/corpus \
    2>build-fuzz/fuzz.log || { tail -50 build-fuzz/fuzz.log; exit 1; }
  echo "fuzz: $(grep -c . build-fuzz/fuzz.log) log lines, no crash in ${WEFT_FUZZ_SECONDS:-30} s"

  # The same for the frame header and every session message decoder a worker runs on network bytes.
  CXX=clang++ BUILD_DIR=build-fuzz CMAKE_ARGS="-DWEFT_FUZZ=ON -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCH=OFF" TARGETS=frame_fuzz ./scripts/build.sh >/dev/null
  mkdir -p build-fuzz/frame-corpus
  ./build-fuzz/fuzz/frame_fuzz -max_total_time="${WEFT_FUZZ_SECONDS:-30}" -max_len=4096 -rss_limit_mb=2048 build-fuzz/frame-corpus \
    2>build-fuzz/frame-fuzz.log || { tail -50 build-fuzz/frame-fuzz.log; exit 1; }
  echo "frame fuzz: $(grep -c . build-fuzz/frame-fuzz.log) log lines, no crash in ${WEFT_FUZZ_SECONDS:-30} s"
fi
