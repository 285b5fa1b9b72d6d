#!/usr/bin/env bash
# deploy/check.sh: checks the Prometheus alert rules, their unit tests, the
# Grafana dashboard's queries and a live /metrics scrape with promtool.
# Installs Debian's prometheus package (for promtool) when promtool is
# missing; that needs root and apt, as on the project's machines and CI.
# Runs from any directory; takes well under two minutes once promtool is
# installed (the install itself takes about a minute).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! command -v promtool >/dev/null 2>&1; then
	echo "deploy/check.sh: promtool not found; installing Debian's prometheus package"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
promtool --version 2>&1 | sed -n 1p # sed, not head: with pipefail a SIGPIPE would fail the check

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml

# One test run produces both the live scrape (loopback HTTP against a
# registry that went through the scripted emissions) and the dashboard's
# queries as a rules file; it also fails if an alert or a panel queries a
# metric hooksproxy does not export.
go test ./metrics -count=1 -run '^(TestWriteExposition|TestDeployFiles)$' \
	-args -out "$tmp/metrics.prom" -dashboard-rules "$tmp/dashboard-rules.yml"
promtool check rules "$tmp/dashboard-rules.yml"
promtool check metrics <"$tmp/metrics.prom"
echo "deploy/check.sh: metrics exposition passes promtool check metrics ($(grep -c '^hooksproxy_' "$tmp/metrics.prom") hooksproxy samples)"
echo "deploy/check.sh: ok"
