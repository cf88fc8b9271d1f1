#!/usr/bin/env bash
# The main job: build weft, make its own 500M-parameter Q4_0 model (random weights, no download),
# and generate with tensor parallelism across two in-process CPU devices.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh >/dev/null
MODEL=models/weft-500m-q4_0.gguf
mkdir -p models
[ -f "$MODEL" ] || ./build/weft gen-model --preset 500m --type q4_0 -o "$MODEL"
./build/weft plan -m "$MODEL" --devices cpu:1,cpu:1 -sm tensor
./build/weft run -m "$MODEL" --devices cpu:1,cpu:1 -sm tensor -p "Once upon a time" -n 32 --temp 0
