#!/usr/bin/env bash
# clang-tidy (.clang-tidy) over the project's sources, or over the files given, using build/'s
# compile_commands.json (run scripts/build.sh first).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/compile_commands.json ] || { echo "tidy: run scripts/build.sh first" >&2; exit 2; }
if [ $# -eq 0 ]; then
  mapfile -t files < <(git ls-files 'src/*.cpp' 'apps/*.cpp')
else
  files=("$@")
fi
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p build --quiet 2>/dev/null
