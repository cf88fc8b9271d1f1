#!/usr/bin/env bash
# End-to-end tests of `weft serve` (tests/e2e): the official openai npm client, a load test and the
# chat page in headless Chromium, against servers this script starts on free loopback ports and
# always stops. Builds nothing: WEFT is the CLI to test (default build/weft).
#   scripts/e2e.sh [WEFT [TEST_FILE...]]   (test files relative to tests/e2e; default: all)
# Needs node >= 20, npm and chromium (scripts/setup.sh); `npm ci` is its only download.
# stories260K from ../shared is served too when present (required where WEFT_REQUIRE_SHARED is set).
set -euo pipefail
cd "$(dirname "$0")/.."
WEFT=$(realpath "${1:-build/weft}")
shift || true
[ -x "$WEFT" ] || { echo "e2e: no weft binary at $WEFT: build it first (scripts/build.sh)" >&2; exit 1; }
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$NODE_MAJOR" -ge 20 ] || { echo "e2e: node >= 20 is needed, found $(node --version 2>/dev/null || echo none)" >&2; exit 1; }
STORIES=${WEFT_SHARED_DIR:-$PWD/../shared}/models/stories260K.gguf
TEST_TIMEOUT_S=300
source scripts/serve_procs.sh

# start NAME ARGS...: a server; prints its address and the line it prints when ready.
start() {
  start_server "$@"
  echo "e2e: $1 server at $URL: $(grep ready "$WORK/$1.err")"
}

# A generated model (no download) with a chatml template and its control tokens, and a context
# that leaves each of 8 slots 512 positions.
"$WEFT" gen-model -o "$WORK/gen.gguf" --ctx 4096 --chat-template chatml 2>/dev/null
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/api.key"
chmod 600 "$WORK/api.key"

start gen -m "$WORK/gen.gguf" -a gen -np 8 -c 4096 -t 1
export WEFT_E2E_GEN_URL=$URL
start keyed -m "$WORK/gen.gguf" -a gen -np 1 -c 512 -t 1 --api-key-file "$WORK/api.key"
export WEFT_E2E_KEYED_URL=$URL WEFT_E2E_KEY=$(cat "$WORK/api.key")
# The same model with Qwen3's own template on the Jinja engine, for tools (tools.test.mjs).
start tools -m "$WORK/gen.gguf" -a gen -np 1 -c 1024 -t 1 --chat-template-file tests/data/chat_templates/Qwen-Qwen3-0.6B.jinja
export WEFT_E2E_TOOLS_URL=$URL
if [ -f "$STORIES" ]; then
  start stories -m "$STORIES" -np 2 -t 1
  export WEFT_E2E_STORIES_URL=$URL
elif [ -n "${WEFT_REQUIRE_SHARED:-}" ]; then
  echo "e2e: missing test data $STORIES (../shared; WEFT_REQUIRE_SHARED is set)" >&2
  exit 1
else
  echo "e2e: no $STORIES: the API tests run on the generated model only"
fi

cd tests/e2e
npm ci --no-audit --no-fund --prefer-offline --loglevel=error
# One test file at a time: the load test checks the server's token counters against its own replies.
timeout "$TEST_TIMEOUT_S" node --test --test-concurrency=1 "$@"
