#!/usr/bin/env bash
# End-to-end tests of hooksproxy with real OpenAI clients: openai-go v3,
# langchaingo's agent loop and npm openai on Node. CI calls this script.
#
#   e2e/run.sh            # what CI runs: 2,000-stream abort count, no race detector
#   e2e/run.sh -race      # with the race detector (about twice as long)
#   e2e/run.sh -short     # 200 streams instead of 2,000
#   e2e/run.sh -run Node  # any other go test flags pass through
#
# CI runs these without the race detector: the proxy's concurrency is
# raced by the unit tests (go test -race ./... at the root), and here the
# detector doubled the step (to over 5 minutes on 2 cores) while it
# instrumented mostly the clients' code.
#
# When node and npm are installed, node_modules is (re)installed from the
# committed package-lock.json with `npm ci` if it is missing or older than
# the lockfile, and the npm test may not skip (E2E_REQUIRE_NODE=1).
set -euo pipefail
cd "$(dirname "$0")"

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  if [ ! -f node/node_modules/.package-lock.json ] || [ node/package-lock.json -nt node/node_modules/.package-lock.json ]; then
    (cd node && npm ci --no-audit --no-fund)
  fi
  export E2E_REQUIRE_NODE=1
  echo "run.sh: node $(node --version), npm $(npm --version)" >&2
else
  echo "run.sh: node/npm not found: the npm openai test will be skipped" >&2
fi

exec go test -count=1 -timeout 10m "$@" ./...
