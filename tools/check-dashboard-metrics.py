#!/usr/bin/env python3
"""Do the dashboard's and the alert rules' queries name series that prfaas exports?

Every PromQL expression of a Grafana dashboard (panel targets and query variables) and
of Prometheus rule files is read with a small tokenizer: each series selector gives a
metric name and the labels of its matchers; `by`/`without` labels belong to the
selectors of the aggregated expression, `on`/`ignoring`/`group_*` labels to those of the
binary expression around them. Each is then checked against Prometheus text scraped
from URLs or read from files:

  * the metric exists as a series (a histogram's `_bucket`, `_sum`, `_count`);
  * every label used with it is set on at least one of its series;
  * an `=` matcher's value, and an `=~` matcher's regex, match one of its values
    (matchers holding a Grafana variable, and `!=`/`!~`, are not checked).

With --scrape-config the targets of a Prometheus configuration (as written by
`prfaas-node prometheus-config`) are scraped, and their series carry what Prometheus
adds: `job`, `instance` and the target's static labels. Series Prometheus makes itself
(`up`, `scrape_*`) are allowed, with those labels. Exit 1 with a list of what is
missing and where it is used.

  check-dashboard-metrics.py --dashboard D.json --rules R.yml --scrape-config P.yml
  check-dashboard-metrics.py --dashboard D.json http://127.0.0.1:9300/metrics dump.txt
  check-dashboard-metrics.py --dashboard D.json --list         what the queries use
  check-dashboard-metrics.py --dashboard D.json --emit-rules F  the panel queries as
      recording rules (variables substituted) for `promtool check rules F`
  check-dashboard-metrics.py --format D.json    rewrite D.json in the compact layout
"""
import argparse
import json
import re
import sys
import urllib.request
from collections import defaultdict
from pathlib import Path

# Series Prometheus records for each target itself; they carry only target labels.
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                  "scrape_samples_post_metric_relabeling", "scrape_series_added"}
TARGET_LABELS = {"job", "instance"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2", "start", "end"}
GROUPING = {"by", "without"}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile"}
MATCHING = {"on", "ignoring", "group_left", "group_right"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
MATCH_OPS = ("=", "!=", "=~", "!~")

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$\w+|\[\[\w+\]\])
  | (?P<number>(?:0x[0-9a-fA-F]+|\d*\.?\d+(?:[eE][+-]?\d+)?)(?:[smhdwy]|ms)*)
  | (?P<ident>[A-Za-z_:][\w:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=,(){}\[\]@])
""", re.VERBOSE)


def tokenize(expr):
    """[(kind, text)] without spaces and comments."""
    out, pos = [], 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            raise ValueError(f"cannot read {expr[pos:pos + 20]!r} in {expr!r}")
        if m.lastgroup not in ("space", "comment"):
            out.append((m.lastgroup, m.group()))
        pos = m.end()
    return out


def nest(tokens):
    """Tokens as a tree: each bracket pair becomes ('group', opener, [items])."""
    stack = [[]]
    openers = []
    for kind, text in tokens:
        if text in "({[" and kind == "op":
            openers.append(text)
            stack.append([])
        elif text in ")}]" and kind == "op":
            if not openers:
                raise ValueError(f"unbalanced {text!r}")
            items = stack.pop()
            stack[-1].append(("group", openers.pop(), items))
        else:
            stack[-1].append((kind, text))
    if openers:
        raise ValueError(f"unclosed {openers[-1]!r}")
    return stack[0]


def unquote(text):
    """A PromQL string literal's value."""
    if text[0] == "`":
        return text[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), text[1:-1])


def matchers(items):
    """The matchers of a `{...}` group: [(label, op, value or None if templated)]."""
    out, i = [], 0
    while i < len(items):
        if items[i][0] == "ident" and i + 2 < len(items) and items[i + 1][1] in MATCH_OPS:
            value = items[i + 2]
            literal = value[0] == "string" and "$" not in value[1] and "[[" not in value[1]
            out.append((items[i][1], items[i + 1][1], unquote(value[1]) if literal else None))
            i += 3
        else:
            i += 1
    return out


def labels_in(group):
    """The label names of a `by (...)`-style group."""
    return [text for kind, text in group[2] if kind == "ident"]


class Uses:
    """What expressions use: per metric, its uses and, per label, the places using it."""

    def __init__(self):
        # Each maps to the set of places ("panel ...", "alert ...") using it.
        self.metrics = defaultdict(set)                      # metric
        self.labels = defaultdict(lambda: defaultdict(set))  # metric -> label
        self.values = defaultdict(set)                       # (metric, label, op, value)
        self.bare_labels = defaultdict(set)                  # label of label_values(label)
        self.shown = defaultdict(set)  # (the query's metrics, label in a legend or annotation)

    def add_expr(self, expr, where):
        """Records the uses of one expression; returns the metrics it selects."""
        self._later = []
        return self._group(("group", "(", nest(tokenize(expr))), where, {})

    def _walk(self, items, where, seen):
        """The selectors (metric names) in `items`, recording their uses on the way."""
        found, i = [], 0
        while i < len(items):
            kind, text = items[i][0], items[i][1]
            nxt = items[i + 1] if i + 1 < len(items) else None
            if kind == "group":
                if text == "(":
                    found += self._group(items[i], where, seen)
                elif text == "{":  # a selector with no name before it
                    found += self._selector(None, items[i], where)
                i += 1
            elif kind == "ident" and text in GROUPING and nxt and nxt[0] == "group":
                found += self._grouping(items, i, where, seen)
                i += 3 if i + 2 < len(items) and items[i + 2][0] == "group" else 2
            elif kind == "ident" and text in MATCHING:
                labels = labels_in(nxt) if nxt and nxt[0] == "group" else []
                self._later.append((labels, where))
                i += 2 if nxt and nxt[0] == "group" else 1
            elif kind == "ident" and (nxt and nxt[0] == "group" and nxt[1] == "(" or
                                      text in AGGREGATIONS and nxt and nxt[1] in GROUPING):
                i += 1  # a function or aggregation: its argument group comes next
            elif kind == "ident" and text.lower() not in KEYWORDS:
                brace = nxt if nxt and nxt[0] == "group" and nxt[1] == "{" else None
                found += self._selector(text, brace, where)
                i += 2 if brace else 1
            else:
                i += 1
        return found

    def _group(self, group, where, seen):
        if id(group) not in seen:
            saved, self._later = self._later, []
            seen[id(group)] = self._walk(group[2], where, seen)
            for labels, w in self._later:  # on/ignoring labels: both sides of the operator
                for metric in seen[id(group)]:
                    for label in labels:
                        self.labels[metric][label].add(w)
            self._later = saved
        return seen[id(group)]

    def _grouping(self, items, i, where, seen):
        """`agg by (l) (x)` or `agg (x) by (l)`: the labels go with x's selectors."""
        labels = labels_in(items[i + 1])
        if i + 2 < len(items) and items[i + 2][0] == "group" and items[i + 2][1] == "(":
            operand, found = items[i + 2], self._group(items[i + 2], where, seen)
        else:
            operand = items[i - 1] if i > 0 else None
            found = []  # already counted when the operand was walked
        metrics = self._group(operand, where, seen) if operand and operand[0] == "group" else []
        for metric in metrics:
            for label in labels:
                self.labels[metric][label].add(where)
        return found

    def _selector(self, name, brace, where):
        ms = matchers(brace[2]) if brace else []
        for label, op, value in ms:
            if label == "__name__" and op == "=" and value:
                name = value
        if name is None:
            return []
        self.metrics[name].add(where)
        for label, op, value in ms:
            if label == "__name__":
                continue
            self.labels[name][label].add(where)
            if value is not None and op in ("=", "=~"):
                self.values[(name, label, op, value)].add(where)
        return [name]

    def add_variable(self, query, where):
        """A Grafana query variable: label_values(selector, label), or a plain query."""
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query, re.S)
        one = re.fullmatch(r"\s*label_values\(\s*(\w+)\s*\)\s*", query)
        if one:
            self.bare_labels[one[1]].add(where)
        elif m:
            for metric in self.add_expr(m[1], where):
                self.labels[metric][m[2]].add(where)
        elif not re.match(r"\s*\w+\(\s*\)\s*$", query):  # label_names(), metrics(): nothing
            self.add_expr(re.sub(r"^\s*query_result\((.*)\)\s*$", r"\1", query, flags=re.S), where)


def dashboard_panels(dashboard):
    """Every panel, rows' nested panels included."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def read_dashboard(path, uses):
    dashboard = json.loads(Path(path).read_text())
    exprs = []
    for panel in dashboard_panels(dashboard):
        for target in panel.get("targets", []):
            if target.get("expr"):
                where = f'panel "{panel.get("title", "?")}" ({target.get("refId", "?")})'
                exprs.append((where, target["expr"], target.get("legendFormat", "")))
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var.get("query")
            query = query.get("query", "") if isinstance(query, dict) else query or ""
            uses.add_variable(query, f'variable "{var.get("name")}"')
    for where, expr, legend in exprs:
        metrics = uses.add_expr(expr, where)
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend):
            uses.shown[(tuple(sorted(set(metrics))), label)].add(where + " legend")
    return [(where, expr) for where, expr, _ in exprs]


def read_rules(path, uses):
    import yaml  # python3-yaml; only rule files need it
    doc = yaml.safe_load(Path(path).read_text()) or {}
    for group in doc.get("groups", []):
        for rule in group.get("rules", []):
            kind = "alert" if "alert" in rule else "rule"
            where = f"{kind} {rule.get('alert') or rule.get('record')}"
            metrics = uses.add_expr(str(rule["expr"]), where)
            text = " ".join(str(v) for v in (rule.get("annotations") or {}).values())
            for label in set(re.findall(r"\$labels\.(\w+)", text)):
                uses.shown[(tuple(sorted(set(metrics))), label)].add(where + " annotations")


_SERIES = re.compile(r'^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+\S+')
_LABEL = re.compile(r'\s*([A-Za-z_]\w*)\s*=\s*"((?:\\.|[^"\\])*)"\s*,?')


def parse_text(text, extra=None):
    """Prometheus text: [(name, {label: value})], `extra` labels added to each."""
    series = []
    for line in text.splitlines():
        m = _SERIES.match(line)
        if not m or line.startswith("#"):
            continue
        labels = dict(extra or {})
        for lm in _LABEL.finditer(m[2] or ""):
            labels[lm[1]] = re.sub(r"\\(.)", lambda e: "\n" if e[1] == "n" else e[1], lm[2])
        series.append((m[1], labels))
    return series


def fetch(source):
    if re.match(r"https?://", source):
        with urllib.request.urlopen(source, timeout=10) as response:
            return response.read().decode()
    return Path(source).read_text()


def scrape_config_targets(path):
    """[(url, target labels)] of every static target in a Prometheus configuration."""
    import yaml
    doc = yaml.safe_load(Path(path).read_text()) or {}
    out = []
    for job in doc.get("scrape_configs", []):
        scheme, metrics_path = job.get("scheme", "http"), job.get("metrics_path", "/metrics")
        for static in job.get("static_configs", []):
            for target in static.get("targets", []):
                labels = {"job": job["job_name"], "instance": target}
                labels.update({k: str(v) for k, v in (static.get("labels") or {}).items()})
                out.append((f"{scheme}://{target}{metrics_path}", labels))
    return out


def collect(sources, scrape_config):
    """{metric: [labels]} over every source. A scrape-config target also gets the series
    Prometheus records about it (`up` ...) with its target labels."""
    index = defaultdict(list)
    targets = [(s, {}) for s in sources]
    if scrape_config:
        targets += scrape_config_targets(scrape_config)
    for source, labels in targets:
        try:
            text = fetch(source)
        except OSError as e:
            raise SystemExit(f"cannot read {source}: {e}")
        for name, series_labels in parse_text(text, labels):
            index[name].append(series_labels)
        if labels:
            for name in PROMETHEUS_OWN:
                index[name].append(dict(labels))
    return index


def describe(wheres):
    return "; ".join(sorted(wheres))


def check_metric(metric, wheres, uses, index):
    """What is missing of one metric and its labels."""
    if metric not in index:
        if metric in PROMETHEUS_OWN:  # no scrape config: only its target labels are known
            return [f"missing label {label} on {metric} (Prometheus sets: job, instance)\n"
                    f"    used in: {describe(w)}"
                    for label, w in sorted(uses.labels[metric].items())
                    if label not in TARGET_LABELS]
        base = next((metric[:-len(s)] for s in HISTOGRAM_SUFFIXES if metric.endswith(s)), None)
        hint = ""
        if f"{metric}_bucket" in index:
            hint = f" (a histogram: use {metric}_bucket, _sum or _count)"
        elif base and any(k.startswith(base + "_") for k in index):
            hint = f" (series of {base}: " + ", ".join(
                sorted(k for k in index if k.startswith(base + "_"))) + ")"
        return [f"missing metric {metric}{hint}\n    used in: {describe(wheres)}"]
    present = set().union(*({k for k, v in s.items() if v != ""} for s in index[metric]))
    return [f"missing label {label} on {metric} (its series have: "
            f"{', '.join(sorted(present)) or 'no labels'})\n    used in: {describe(w)}"
            for label, w in sorted(uses.labels[metric].items()) if label not in present]


def check_value(metric, label, op, value, wheres, index):
    """Whether an `=`/`=~` matcher matches a value of the label (None: not checkable)."""
    seen = sorted({s[label] for s in index.get(metric, []) if s.get(label)})
    if not seen:
        return []  # metric or label missing: reported by check_metric
    ok = value in seen if op == "=" else any(re.fullmatch(value, v) for v in seen)
    return [] if ok else [f'missing value {label}{op}"{value}" of {metric} (seen: '
                          f'{", ".join(seen)})\n    used in: {describe(wheres)}']


def check(uses, index):
    """Lines describing what is missing (empty: all found)."""
    problems = []
    for metric, wheres in sorted(uses.metrics.items()):
        problems += check_metric(metric, wheres, uses, index)
    for (metric, label, op, value), wheres in sorted(uses.values.items()):
        problems += check_value(metric, label, op, value, wheres, index)
    for (metrics, label), wheres in sorted(uses.shown.items()):
        if not any(m in index for m in metrics):
            continue  # no metric of the query exists: reported above
        if not any(s.get(label) for m in metrics for s in index.get(m, [])) and \
                not any(m in PROMETHEUS_OWN and label in TARGET_LABELS for m in metrics):
            problems.append(f"missing label {label} on every series of {', '.join(metrics)}\n"
                            f"    used in: {describe(wheres)}")
    every_label = {k for series in index.values() for s in series for k in s}
    for label, wheres in sorted(uses.bare_labels.items()):
        if label not in every_label:
            problems.append(f"missing label {label} on any series\n    used in: {describe(wheres)}")
    return problems


def substitute_variables(expr):
    """Grafana variables replaced so that Prometheus can parse the query."""
    expr = re.sub(r"\$\{?__(?:rate_interval|interval|range)\}?", "5m", expr)
    return re.sub(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]", ".*", expr)


def emit_rules(exprs, path):
    """The queries as recording rules dashboard:query_N; prints which panel each is."""
    rules = []
    for n, (where, expr) in enumerate(exprs, 1):
        rules.append({"record": f"dashboard:query_{n}", "expr": substitute_variables(expr)})
        print(f"dashboard:query_{n} is {where}")
    doc = {"groups": [{"name": "dashboard-queries", "rules": rules}]}
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")  # JSON is YAML


def compact(value):
    return json.dumps(value, ensure_ascii=False)


def format_panel(panel, indent):
    pad = " " * indent
    lines = []
    for key, value in panel.items():
        if key in ("targets", "panels") and value:
            inner = [f"{pad}    {compact(v)}" for v in value] if key == "targets" else \
                    [format_panel(v, indent + 4) for v in value]
            lines.append(f'{pad}  "{key}": [\n' + ",\n".join(inner) + f"\n{pad}  ]")
        else:
            lines.append(f'{pad}  {compact(key)}: {compact(value)}')
    return f"{pad}{{\n" + ",\n".join(lines) + f"\n{pad}}}"


def format_dashboard(dashboard):
    """One line per key; panels one key per line, each target on one line."""
    lines = []
    for key, value in dashboard.items():
        if key == "panels":
            body = ",\n".join(format_panel(p, 4) for p in value)
            lines.append(f'  "panels": [\n{body}\n  ]')
        elif key == "templating":
            body = ",\n".join(f"    {compact(v)}" for v in value.get("list", []))
            lines.append(f'  "templating": {{"list": [\n{body}\n  ]}}')
        else:
            lines.append(f"  {compact(key)}: {compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sources", nargs="*", help="Prometheus text: http(s) URLs or files")
    p.add_argument("--dashboard", action="append", default=[], help="Grafana dashboard JSON")
    p.add_argument("--rules", action="append", default=[], help="Prometheus rule file")
    p.add_argument("--scrape-config", help="scrape every static target of this prometheus.yml")
    p.add_argument("--list", action="store_true", help="print what the queries use and exit")
    p.add_argument("--emit-rules", metavar="FILE",
                   help="write the panel queries as recording rules")
    p.add_argument("--format", metavar="DASHBOARD",
                   help="rewrite a dashboard in the compact layout")
    args = p.parse_args(argv)
    if args.format:
        path = Path(args.format)
        path.write_text(format_dashboard(json.loads(path.read_text())))
        return 0
    uses, exprs = Uses(), []
    try:
        for d in args.dashboard:
            exprs += read_dashboard(d, uses)
        for r in args.rules:
            read_rules(r, uses)
    except ValueError as e:
        print(f"cannot parse a query: {e}")
        return 1
    if args.emit_rules:
        emit_rules(exprs, args.emit_rules)
    if args.list:
        for metric in sorted(uses.metrics):
            print(metric, " ".join(sorted(uses.labels[metric])))
        return 0
    if args.emit_rules and not (args.sources or args.scrape_config):
        return 0
    if not (args.sources or args.scrape_config):
        p.error("give Prometheus text sources or --scrape-config")
    index = collect(args.sources, args.scrape_config)
    problems = check(uses, index)
    for line in problems:
        print(line)
    n_labels = sum(len(v) for v in uses.labels.values())
    print(f"{'FAIL' if problems else 'ok'}: {len(problems)} missing; {len(uses.metrics)} metrics, "
          f"{n_labels} labels in matchers and groupings, {len(uses.shown)} in legends and "
          f"annotations, {len(uses.values)} matcher values checked against "
          f"{sum(len(v) for v in index.values())} series")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
