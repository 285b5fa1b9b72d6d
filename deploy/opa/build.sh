#!/usr/bin/env bash
# Builds the OPA server the OPA example and app/opa_test.go use, from the Go
# module proxy, into <repo>/.cache/bin/opa. Idempotent: an existing binary is
# kept (delete it to rebuild). Cold (module download and full compile) it
# takes about 3-4 CPU-minutes; with a warm Go build cache about 20 s (the link).
set -euo pipefail

OPA_VERSION="${OPA_VERSION:-v1.22.3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$root/.cache/bin"

if [[ -x "$bin/opa" ]]; then
	echo "opa already built: $bin/opa ($("$bin/opa" version 2>/dev/null | sed -n 1p))"
	exit 0
fi

mkdir -p "$bin"
start=$(date +%s)
# pkg@version builds OPA from its own go.mod; this repo's go.mod is not
# touched.
cd "$root"
GOBIN="$bin" go install "github.com/open-policy-agent/opa@${OPA_VERSION}"
echo "built $bin/opa ${OPA_VERSION} in $(( $(date +%s) - start ))s"
# sed reads the whole version text: head would exit after one line and, with
# pipefail, an opa still writing would fail the script with SIGPIPE (141).
"$bin/opa" version | sed -n 1p
