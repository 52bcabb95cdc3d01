#!/usr/bin/env bash
# deploy/grafana/prfaas-dashboard.json is well formed: valid JSON in the compact layout
# of tools/check-dashboard-metrics.py --format (small enough to review), unique panel
# ids, every query on the ${datasource} variable; and promtool parses every panel query
# (Grafana variables substituted).
# Usage: dashboard_promql.sh SOURCE_DIR. Exit 77 (skipped) without promtool.
set -euo pipefail
src=$1
dashboard=$src/deploy/grafana/prfaas-dashboard.json
checker=$src/tools/check-dashboard-metrics.py
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

python3 - "$dashboard" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
problems = []
if not any(v.get("type") == "datasource" and v.get("name") == "datasource"
           for v in d["templating"]["list"]):
    problems.append("no datasource variable named datasource")
ids = {}
for p in d["panels"] + [c for p in d["panels"] for c in p.get("panels", [])]:
    ids.setdefault(p.get("id"), []).append(p.get("title"))
    if p["type"] == "row":
        continue
    if not p.get("targets"):
        problems.append(f'panel "{p["title"]}" has no query')
    for t in [p] + p.get("targets", []):
        uid = (t.get("datasource") or {}).get("uid")
        if uid != "${datasource}":
            problems.append(f'panel "{p["title"]}": datasource {uid!r}, not ${{datasource}}')
problems += [f"panel id {i} used by {titles}" for i, titles in ids.items() if len(titles) > 1]
print("\n".join(problems) or f"ok: {len(ids)} panels")
sys.exit(1 if problems else 0)
PY

cp "$dashboard" "$scratch/formatted.json"
python3 "$checker" --format "$scratch/formatted.json"
diff -u "$dashboard" "$scratch/formatted.json" ||
  { echo "FAIL: $dashboard is not in the compact layout:" \
         "run tools/check-dashboard-metrics.py --format on it"; exit 1; }

if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool is not installed (Debian: apt-get install prometheus): queries not parsed"
  exit 77
fi
python3 "$checker" --dashboard "$dashboard" --emit-rules "$scratch/queries.yml"
promtool check rules "$scratch/queries.yml" ||
  { echo "FAIL: promtool cannot parse a panel query (the list above names their panels)"; exit 1; }
echo "ok: dashboard well formed, every panel query parsed"
