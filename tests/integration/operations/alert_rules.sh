#!/usr/bin/env bash
# deploy/prometheus/prfaas-alerts.yml: promtool accepts the rules, and their unit tests
# pass (prfaas-alerts.test.yml: each alert fires where it should and not elsewhere).
# Usage: alert_rules.sh SOURCE_DIR. Exit 77 (skipped) without promtool.
set -euo pipefail
dir=$1/deploy/prometheus

if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool is not installed (Debian: apt-get install prometheus)"
  exit 77
fi
promtool check rules "$dir/prfaas-alerts.yml" ||
  { echo "FAIL: promtool check rules refused $dir/prfaas-alerts.yml"; exit 1; }
# rule_files in the test file are relative to it.
(cd "$dir" && promtool test rules prfaas-alerts.test.yml) ||
  { echo "FAIL: the unit tests in $dir/prfaas-alerts.test.yml (see above which alert)"; exit 1; }
echo "ok: alert rules checked and unit-tested"
