#!/usr/bin/env bash
# Fails naming the files clang-format (.clang-format) would change; `scripts/check_format.sh --fix`
# rewrites them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'apps/*.cpp' 'apps/*.h' 'tests/*.cpp' 'tests/*.h' 'bench/*.cpp' \
  'fuzz/*.cpp' | grep -v 'unicode_tables.cpp')  # generated
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
clang-format --dry-run -Werror "${files[@]}" 2>&1 | grep -o '^[^:]*\.\(cpp\|h\):' | sort -u | sed 's/:$//' > /tmp/weft-format.$$ || true
if [ -s /tmp/weft-format.$$ ]; then
  echo "check_format: not formatted (run scripts/check_format.sh --fix):" >&2
  cat /tmp/weft-format.$$ >&2
  rm -f /tmp/weft-format.$$
  exit 1
fi
rm -f /tmp/weft-format.$$
echo "check_format: ${#files[@]} files formatted"
