#!/usr/bin/env bash
# Configures and builds weft into build/ (or $BUILD_DIR).
#   CMAKE_ARGS="-DWEFT_SANITIZE=ON"  extra configure flags
#   TARGETS="gguf_tests model_tests" build only these
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j"$(nproc)" ${TARGETS:+--target $TARGETS}
