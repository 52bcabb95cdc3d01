#!/usr/bin/env bash
# tools/sim-matrix.py on a tiny matrix: every cell run once per seed, medians and the
# ratio column computed from the runs' own figures, a baseline that failed requests not
# taken as the best, runs reused when the matrix is run again, bad input refused.
# Usage: matrix_tool.sh PRFAAS_SIM SOURCE_DIR
set -euo pipefail
sim=$1
cd "$2"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat >"$out/m.yaml" <<'YAML'
under_test: fixed
baselines: [naive, homogeneous]
seeds: [1, 2]
hardware: { prfaas: 1, pd_nodes: 3, link_gbit: 100, max_batch: 8 }
policies:
  fixed: { policy: prfaas, threshold: 19400, split: 1, scheduler: "balance_ratio: 0" }
  naive: { policy: naive_heterogeneous, split: 0 }
  homogeneous: { policy: homogeneous_pd, split: homogeneous }
workloads:
  short: { args: "--rate 1 --requests 12 --output-tokens 16 --input-mu 8", law: { mu: 8.0 } }
  cut: { args: "--rate 1 --requests 12 --output-tokens 16 --input-mu 8 --link-down 3:20", law: { mu: 8.0 } }
YAML
python3 tools/sim-matrix.py --matrix "$out/m.yaml" --sim "$sim" --out "$out/r" --jobs 2 >/dev/null
python3 - "$out/r" <<'PY'
import json, os, statistics, sys
r = sys.argv[1]
m = json.load(open(os.path.join(r, "matrix.json")))
cells = {(c["policy"], c["workload"]): c for c in m["cells"]}
assert len(cells) == 6, cells.keys()
for (p, w), c in cells.items():
    runs = [json.load(open(os.path.join(r, "runs", f"{p}--{w}--{s}.json")))["summary"] for s in (1, 2)]
    assert c["seeds"] == 2
    want = statistics.median(x["ttft_ms"]["mean"] / 1e3 for x in runs)
    assert abs(c["mean_s"] - want) < 1e-9, (p, w, c["mean_s"], want)
    assert c["failed"] == max(x["requests"]["total"] - x["requests"]["ok"] for x in runs), c
# Splits: as given, and the planner's homogeneous split on 3 PD nodes (1 or 2 prefill).
assert cells[("fixed", "short")]["split"] == "1/2" and cells[("naive", "short")]["split"] == "0/3"
assert cells[("homogeneous", "short")]["split"] in ("1/2", "2/1")
# Naive loses requests while the link is cut; it must not be the best baseline there.
assert cells[("naive", "cut")]["failed"] > 0, cells[("naive", "cut")]
table = open(os.path.join(r, "matrix.md")).read()
row = [l for l in table.splitlines() if l.startswith("| cut |")][0]
ratio = row.split("|")[-2].strip()
best = cells[("homogeneous", "cut")]
me = cells[("fixed", "cut")]
want = f"{me['mean_s'] / best['mean_s']:.2f}x, {me['p90_s'] / best['p90_s']:.2f}x"
assert ratio.startswith(want), (ratio, want)
print("matrix ok:", row)
PY
before=$(stat -c %Y "$out"/r/runs/*.json | sort | md5sum)
python3 tools/sim-matrix.py --matrix "$out/m.yaml" --sim "$sim" --out "$out/r" >/dev/null
after=$(stat -c %Y "$out"/r/runs/*.json | sort | md5sum)
[ "$before" = "$after" ] || { echo "FAIL: a second run of the matrix re-ran its runs"; exit 1; }
sed 's/under_test: fixed/under_test: nobody/' "$out/m.yaml" >"$out/bad.yaml"
if msg=$(python3 tools/sim-matrix.py --matrix "$out/bad.yaml" --sim "$sim" --out "$out/b" 2>&1); then
  echo "FAIL: a matrix naming an unknown policy was accepted"; exit 1
fi
grep -q "'nobody' is not a policy of the matrix" <<<"$msg" || { echo "FAIL: unclear error: $msg"; exit 1; }
echo "ok"
