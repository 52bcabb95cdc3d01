#!/usr/bin/env python3
"""Checks Kubernetes manifests of a prfaas deployment against the deployment file they
carry and against the deployment they were adapted from.

  tools/check-k8s-manifests.py DIR [--reference FILE] [--node-bin PRFAAS_NODE]

DIR holds the manifests (every *.yaml, every YAML document in each). Checked:
  * every document has apiVersion, kind and metadata.name; one Namespace holds the rest;
  * one ConfigMap carries deployment.yaml (the deployment file) and the start script;
  * --reference: the deployment file is the reference with only addresses, the
    gateway's listen host and a security section changed (same nodes, clusters,
    actors, ports, settings);
  * every node has exactly one workload (one replica) whose container runs it with
    --node NAME; its container ports are the node's control, data and admin ports and
    its gateways' listen ports; its probes ask /health on the admin port;
  * every node address is <service>.<namespace>.svc: that Service exists, selects the
    node's pods and no other node's, and serves the node's ports; the pod is told its
    host (PRFAAS_HOST) and its IP (POD_IP);
  * Prometheus annotations name each node's admin port, once per node; a Service
    serves each gateway's listen port from the gateway node's pods;
  * each node's secret_key_file is its own key, from a Secret that holds exactly the
    keys the file names, mounted where the file says; public keys are either the
    placeholder naming the node or a key that matches the node's key file;
  * --node-bin: for every node, the start script run as its pod would run it, plus
    --check, makes prfaas-node validate the file it rewrote (refusing it while the keys
    are placeholders, accepting it once they are filled), and the rewrite changed that
    node's addresses and nothing else.
Exit 0 when all hold, 1 with one line per mismatch otherwise, 2 on bad usage.
"""
import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import yaml
except ImportError:
    print("check-k8s-manifests: needs PyYAML (Debian: python3-yaml)", file=sys.stderr)
    sys.exit(77)

WORKLOAD_KINDS = {"StatefulSet", "Deployment"}
PLACEHOLDER_PUBLIC = "REPLACE-WITH-PUBLIC-KEY-OF-"
PLACEHOLDER_FILE = "REPLACE-WITH-KEY-FILE-OF-"
ADDRESS = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9-]+)\.svc(\.cluster\.local)?$")
TEST_NET = "192.0.2."  # documentation addresses (RFC 5737): --check binds nothing


class Report:
    def __init__(self):
        self.errors = []

    def fail(self, where, message):
        self.errors.append(f"{where}: {message}")


def load_documents(folder, report):
    """Every YAML document of every *.yaml in `folder`, as (where, doc)."""
    docs = []
    files = sorted(Path(folder).glob("*.yaml"))
    if not files:
        report.fail(folder, "no *.yaml files")
    for f in files:
        try:
            loaded = list(yaml.safe_load_all(f.read_text()))
        except yaml.YAMLError as e:
            report.fail(f.name, f"not YAML: {e}")
            continue
        for i, doc in enumerate(d for d in loaded if d is not None):
            where = f"{f.name}#{i}"
            if not isinstance(doc, dict):
                report.fail(where, "a document that is not a mapping")
                continue
            name = (doc.get("metadata") or {}).get("name")
            missing = [key for key, value in (("apiVersion", doc.get("apiVersion")),
                                              ("kind", doc.get("kind")), ("metadata.name", name))
                       if not value]
            for key in missing:
                report.fail(where, f"no {key}")
            if not missing:  # the rest is judged only on documents Kubernetes would take
                docs.append((f"{f.name} {doc['kind']}/{name}", doc))
    return docs


def split_endpoint(text):
    """'tcp://host:port' or 'host:port' → (host, port)."""
    rest = text.split("://", 1)[-1]
    host, _, port = rest.rpartition(":")
    return host.strip("[]"), int(port)


def node_ports(node):
    return {k: split_endpoint(node[k])[1] for k in ("control", "data", "admin") if k in node}


def gateway_listens(node):
    return [split_endpoint(a.get("listen", "127.0.0.1:8000"))
            for a in node.get("actors") or [] if a.get("type") == "gateway"]


def find_deployment_file(docs, report):
    """The ConfigMap carrying deployment.yaml: (where, configmap, parsed deployment)."""
    found = [(w, d) for w, d in docs
             if d.get("kind") == "ConfigMap" and "deployment.yaml" in (d.get("data") or {})]
    if len(found) != 1:
        report.fail("manifests", f"{len(found)} ConfigMaps carry deployment.yaml; expected 1")
        return None
    where, cm = found[0]
    try:
        dep = yaml.safe_load(cm["data"]["deployment.yaml"])
    except yaml.YAMLError as e:
        report.fail(where, f"deployment.yaml is not YAML: {e}")
        return None
    if not isinstance(dep, dict) or not isinstance(dep.get("nodes"), list):
        report.fail(where, "deployment.yaml has no nodes: list")
        return None
    return where, cm, dep


def without_addresses(node):
    """A node of a deployment file with its hosts and the gateways' listen hosts blanked."""
    n = copy.deepcopy(node)
    for key in ("control", "data", "admin"):
        if key in n:
            n[key] = split_endpoint(n[key])[1]
    for actor in n.get("actors") or []:
        if actor.get("type") == "gateway" and "listen" in actor:
            actor["listen"] = split_endpoint(actor["listen"])[1]
    return n


def differences(a, b, path):
    """(path, a's value, b's value) for every leaf where `a` and `b` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            yield from differences(a.get(k), b.get(k), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{path}[{i}]")
    elif a != b:
        yield path, a, b


def compare_with_reference(where, dep, ref, report):
    """The deployment file is the reference up to addresses and security."""
    ours = {n.get("name"): without_addresses(n) for n in dep["nodes"]}
    theirs = {n.get("name"): without_addresses(n) for n in ref.get("nodes") or []}
    for name in sorted(set(ours) ^ set(theirs)):
        side = "only in deployment.yaml" if name in ours else "missing from deployment.yaml"
        report.fail(where, f"node {name}: {side} (the reference has {sorted(theirs)})")
    a = {k: v for k, v in dep.items() if k not in ("nodes", "security")}
    b = {k: v for k, v in ref.items() if k not in ("nodes", "security")}
    a["nodes"] = {n: v for n, v in ours.items() if n in theirs}
    b["nodes"] = {n: v for n, v in theirs.items() if n in ours}
    for path, x, y in differences(a, b, "deployment.yaml"):
        report.fail(where, f"{path} is {x!r}, the reference's is {y!r}")


def container_node(container):
    """The node a container runs: the value after --node in its command and args."""
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    for i, a in enumerate(argv):
        if a == "--node" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--node="):
            return a.split("=", 1)[1]
    return None


def find_workloads(docs, dep, report):
    """node name → (where, workload, container), one per node of `dep`."""
    runs = {}
    for where, doc in docs:
        if doc.get("kind") not in WORKLOAD_KINDS:
            continue
        pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in pod.get("containers") or []:
            node = container_node(c)
            if node is not None:
                runs.setdefault(node, []).append((where, doc, c))
    names = [n.get("name") for n in dep["nodes"]]
    for node in sorted(set(runs) - set(names)):
        for where, _, _ in runs[node]:
            report.fail(where, f"runs --node {node}, which the deployment file does not have")
    found = {}
    for name in names:
        got = runs.get(name, [])
        if len(got) != 1:
            where = ", ".join(w for w, _, _ in got) or "manifests"
            report.fail(where, f"node {name}: {len(got)} workloads run --node {name}; expected 1")
            continue
        where, doc, c = got[0]
        if (doc.get("spec") or {}).get("replicas", 1) != 1:
            report.fail(where, f"node {name}: replicas must be 1 (a node is one process)")
        found[name] = got[0]
    return found


def port_number(container, port):
    """A probe's or a Service's target port (number or name) in `container`'s ports."""
    if isinstance(port, int):
        return port
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return p.get("containerPort")
    return None


def env_of(container):
    return {e.get("name"): e for e in container.get("env") or []}


def check_container(name, node, workload, report):
    where, doc, c = workload
    ports = node_ports(node)
    expected = set(ports.values()) | {p for _, p in gateway_listens(node)}
    actual = {p.get("containerPort") for p in c.get("ports") or []}
    if actual != expected:
        report.fail(where, f"node {name}: container ports {sorted(actual)}, "
                           f"the deployment file's are {sorted(expected)}")
    for host, port in gateway_listens(node):
        if host not in ("0.0.0.0", "*", ""):
            report.fail(where, f"node {name}: gateway listens on {host}:{port}, "
                               "which a Service cannot reach (use 0.0.0.0)")
    for probe in ("readinessProbe", "livenessProbe"):
        get = (c.get(probe) or {}).get("httpGet") or {}
        port = port_number(c, get.get("port"))
        if get.get("path") != "/health" or port != ports.get("admin"):
            report.fail(where, f"node {name}: {probe} must GET /health on the admin port "
                               f"{ports.get('admin')}, got {get.get('path')} on port "
                               f"{get.get('port')!r} ({port})")
    env = env_of(c)
    hosts = {split_endpoint(node[k])[0] for k in ("control", "data", "admin") if k in node}
    if len(hosts) != 1:
        report.fail(where, f"node {name}: its endpoints name several hosts {sorted(hosts)}")
    told = (env.get("PRFAAS_HOST") or {}).get("value")
    if told not in hosts:
        report.fail(where, f"node {name}: PRFAAS_HOST is {told!r}, its host is {sorted(hosts)}")
    field = ((env.get("POD_IP") or {}).get("valueFrom") or {}).get("fieldRef") or {}
    if field.get("fieldPath") != "status.podIP":
        report.fail(where, f"node {name}: POD_IP must come from the downward API's status.podIP")


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pod_labels(workload):
    return ((workload[1].get("spec") or {}).get("template") or {}).get("metadata", {}).get(
        "labels") or {}


def services_in(docs, namespace):
    return {d["metadata"]["name"]: (w, d) for w, d in docs
            if d.get("kind") == "Service" and d["metadata"].get("namespace") == namespace}


def serves(service, container, port):
    """True when `service` has port `port` and sends it to `port` of `container`."""
    for p in (service.get("spec") or {}).get("ports") or []:
        target = p.get("targetPort", p.get("port"))
        if p.get("port") == port and port_number(container, target) == port:
            return True
    return False


def check_addresses(name, node, workloads, services, namespace, report):
    where, _, c = workloads[name]
    host = split_endpoint(node["control"])[0]
    m = ADDRESS.match(host)
    if not m:
        report.fail(where, f"node {name}: address {host} is not <service>.<namespace>.svc")
        return
    svc_name, ns = m.group(1), m.group(3)
    if ns != namespace or svc_name not in services:
        report.fail(where, f"node {name}: address {host} names no Service of the manifests "
                           f"(services in {namespace}: {sorted(services)})")
        return
    swhere, svc = services[svc_name]
    spec = svc.get("spec") or {}
    chosen = [n for n, w in workloads.items() if selects(spec.get("selector"), pod_labels(w))]
    if chosen != [name]:
        report.fail(swhere, f"node {name}'s address Service selects the pods of {chosen}")
    if not spec.get("publishNotReadyAddresses"):
        report.fail(swhere, f"node {name}: publishNotReadyAddresses must be true "
                            "(peers reach a node before it is ready)")
    for key, port in node_ports(node).items():
        if not serves(svc, c, port):
            report.fail(swhere, f"node {name}: no port {port} ({key}) to the pod's {port}")


def check_services(dep, workloads, services, report):
    """Scrape annotations (one per admin endpoint) and a Service for every gateway."""
    admins = {n["name"]: node_ports(n).get("admin") for n in dep["nodes"] if "admin" in n}
    scraped = {}
    for sname, (where, svc) in services.items():
        notes = svc["metadata"].get("annotations") or {}
        if str(notes.get("prometheus.io/scrape")) != "true":
            continue
        selector = (svc.get("spec") or {}).get("selector")
        chosen = [n for n, w in workloads.items() if selects(selector, pod_labels(w))]
        if len(chosen) != 1:
            report.fail(where, f"scraped Service selects {len(chosen)} nodes' pods {chosen}")
            continue
        scraped.setdefault(chosen[0], []).append(sname)
        if str(notes.get("prometheus.io/port")) != str(admins.get(chosen[0])):
            report.fail(where, f"prometheus.io/port is {notes.get('prometheus.io/port')}, "
                               f"node {chosen[0]}'s admin port is {admins.get(chosen[0])}")
    for name in sorted(admins):
        if len(scraped.get(name, [])) != 1 and name in workloads:
            report.fail("manifests", f"node {name}: its admin endpoint is scraped through "
                                     f"{scraped.get(name, [])}; expected one Service")
    for node in dep["nodes"]:
        for _, port in gateway_listens(node):
            w = workloads.get(node["name"])
            ok = w and any(selects((s.get("spec") or {}).get("selector"), pod_labels(w))
                           and serves(s, w[2], port) for _, s in services.values())
            if not ok:
                report.fail("manifests", f"node {node['name']}: no Service serves its "
                                         f"gateway's port {port}")


def key_volume(doc, container, mount_dir):
    """The volume mounted at `mount_dir` in `container`, from the workload's pod spec."""
    pod = doc["spec"]["template"]["spec"]
    for m in container.get("volumeMounts") or []:
        if m.get("mountPath", "").rstrip("/") == mount_dir:
            for v in pod.get("volumes") or []:
                if v.get("name") == m.get("name"):
                    return v
    return None


def secret_values(doc):
    """A Secret's values by key (stringData as is; data is base64 and left encoded)."""
    values = dict(doc.get("data") or {})
    values.update(doc.get("stringData") or {})
    return values


def check_public_key(name, public, key_file, where, report):
    """A placeholder naming this node with a placeholder key file, or a real key that
    matches the key file's public_key."""
    if public == PLACEHOLDER_PUBLIC + name:
        if key_file != PLACEHOLDER_FILE + name:
            report.fail(where, f"node {name}: the public key is a placeholder but its key file "
                               "is not the matching placeholder")
        return "placeholder"
    if public.startswith("REPLACE-WITH-") or len(public) != 40:
        report.fail(where, f"node {name}: public_key {public!r} is neither a 40-character key "
                           f"nor the placeholder {PLACEHOLDER_PUBLIC + name}")
        return "bad"
    try:
        held = yaml.safe_load(key_file) if isinstance(key_file, str) else None
    except yaml.YAMLError:
        held = None
    if not isinstance(held, dict) or held.get("public_key") != public:
        report.fail(where, f"node {name}: the Secret's key file does not hold the ConfigMap's "
                           "public_key (a key file of prfaas-node keygen, for this node)")
    return "key"


def check_security(dep, workloads, docs, namespace, report):
    """Each node mounts its own key file, from a Secret holding the keys the file names.
    Returns whether the keys are placeholders (True), filled (False) or mixed (None)."""
    nodes = (dep.get("security") or {}).get("nodes") or {}
    if not nodes:
        report.fail("deployment.yaml", "no security.nodes: nodes across machines need CURVE")
        return None
    secrets = {d["metadata"]["name"]: (w, d) for w, d in docs
               if d.get("kind") == "Secret" and d["metadata"].get("namespace") == namespace}
    wanted, kinds = {}, set()
    for name, (where, doc, c) in workloads.items():
        entry = nodes.get(name) or {}
        path = entry.get("secret_key_file")
        if not path or not os.path.isabs(path):
            report.fail(where, f"node {name}: security.nodes.{name}.secret_key_file must be an "
                               f"absolute path in the pod, got {path!r}")
            continue
        folder, key = os.path.dirname(path), os.path.basename(path)
        vol = key_volume(doc, c, folder)
        secret = (vol or {}).get("secret") or {}
        items = [i.get("key") for i in secret.get("items") or []]
        if not secret or items != [key]:
            report.fail(where, f"node {name}: {folder} must be a Secret volume with the one item "
                               f"{key} (its own key only), got {vol}")
            continue
        sname = secret.get("secretName")
        wanted.setdefault(sname, set()).add(key)
        if sname not in secrets:
            report.fail(where, f"node {name}: Secret {sname} is not in the manifests")
            continue
        swhere, sdoc = secrets[sname]
        value = secret_values(sdoc).get(key)
        kinds.add(check_public_key(name, str(entry.get("public_key")), value, swhere, report))
    for sname, keys in wanted.items():
        if sname in secrets:
            held = set(secret_values(secrets[sname][1]))
            if held != keys:
                report.fail(secrets[sname][0], f"holds {sorted(held)}; the deployment file's "
                                               f"secret_key_file entries name {sorted(keys)}")
    if kinds == {"placeholder"}:
        return True
    if kinds == {"key"}:
        return False
    if len(kinds) > 1:
        report.fail("manifests", f"keys are partly placeholders, partly filled: {sorted(kinds)}")
    return None


def script_of(cm, workload):
    """The ConfigMap key the container's command runs: it must be mounted from `cm`."""
    where, doc, c = workload
    argv = [str(a) for a in c.get("command") or []]
    for m in c.get("volumeMounts") or []:
        vol = next((v for v in doc["spec"]["template"]["spec"].get("volumes") or []
                    if v.get("name") == m.get("name")), {})
        if (vol.get("configMap") or {}).get("name") != cm["metadata"]["name"]:
            continue
        for a in argv:
            if os.path.dirname(a) == m.get("mountPath", "").rstrip("/"):
                return os.path.basename(a), m["mountPath"]
    return None, None


def run_start_script(name, workload, cm, node_bin, placeholders, scratch, index, report):
    """The start script as the pod runs it, plus --check; then the file it wrote."""
    where, _, c = workload
    script, mount = script_of(cm, workload)
    if script not in (cm.get("data") or {}):
        report.fail(where, f"node {name}: its command {c.get('command')} runs no script of "
                           f"ConfigMap {cm['metadata']['name']} mounted in the container")
        return None
    work = Path(scratch) / name
    (work / "bin").mkdir(parents=True)
    (work / "bin" / "prfaas-node").symlink_to(Path(node_bin).resolve())
    (work / "deployment.yaml").write_text(cm["data"]["deployment.yaml"])
    (work / script).write_text(cm["data"][script])
    env = dict(os.environ, PATH=f"{work / 'bin'}:{os.environ.get('PATH', '')}",
               PRFAAS_HOST=str((env_of(c).get("PRFAAS_HOST") or {}).get("value", "")),
               POD_IP=f"{TEST_NET}{index + 1}", PRFAAS_CONFIG=str(work / "deployment.yaml"),
               PRFAAS_RUN_DIR=str(work / "run"))
    cmd = [str(a) for a in c["command"]]
    cmd = [str(work / script) if a == f"{mount.rstrip('/')}/{script}" else a for a in cmd]
    try:
        got = subprocess.run(cmd + [str(a) for a in c.get("args") or []] + ["--check"],
                             env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        report.fail(where, f"node {name}: its start script did not run to the end: {e}")
        return None
    said = (got.stdout + got.stderr).strip().replace("\n", " | ")
    if placeholders and not (got.returncode == 2 and "public_key" in got.stderr):
        report.fail(where, f"node {name}: prfaas-node --check must refuse the placeholder keys "
                           f"(exit 2, naming public_key), got exit {got.returncode}: {said}")
    elif not placeholders and (got.returncode != 0 or not got.stdout.startswith("ok:")):
        report.fail(where, f"node {name}: prfaas-node --check refused the file start.sh wrote: "
                           f"exit {got.returncode}: {said}")
    rewritten = work / "run" / "deployment.yaml"
    return yaml.safe_load(rewritten.read_text()) if rewritten.exists() else None


def check_rewrite(name, dep, rewritten, ip, where, report):
    """Only node `name`'s addresses changed, each to `ip`."""
    if rewritten is None:
        report.fail(where, f"node {name}: the start script wrote no deployment file")
        return
    expected = copy.deepcopy(dep)
    for node in expected["nodes"]:
        if node.get("name") != name:
            continue
        for key in ("control", "data", "admin"):
            if key in node:
                port = split_endpoint(node[key])[1]
                node[key] = (f"tcp://{ip}:{port}" if key != "admin" else f"{ip}:{port}")
    for path, got, want in differences(rewritten, expected, "deployment.yaml"):
        report.fail(where, f"node {name}: in the file its start script wrote, {path} is "
                           f"{got!r}; expected {want!r} (only this node's hosts become its IP)")


def check(folder, reference, node_bin):
    report = Report()
    docs = load_documents(folder, report)
    spaces = [d["metadata"]["name"] for _, d in docs if d.get("kind") == "Namespace"]
    if len(spaces) != 1:
        report.fail("manifests", f"{len(spaces)} Namespaces; expected 1")
        return report, docs, None
    namespace = spaces[0]
    for where, d in docs:
        if d.get("kind") != "Namespace" and (d.get("metadata") or {}).get("namespace") != namespace:
            report.fail(where, f"not in namespace {namespace}")
    found = find_deployment_file(docs, report)
    if not found:
        return report, docs, None
    cm_where, cm, dep = found
    if reference:
        compare_with_reference(cm_where, dep, yaml.safe_load(Path(reference).read_text()), report)
    workloads = find_workloads(docs, dep, report)
    services = services_in(docs, namespace)
    nodes = {n.get("name"): n for n in dep["nodes"]}
    for name, w in workloads.items():
        check_container(name, nodes[name], w, report)
        check_addresses(name, nodes[name], workloads, services, namespace, report)
    check_services(dep, workloads, services, report)
    placeholders = check_security(dep, workloads, docs, namespace, report)
    if node_bin and placeholders is not None:
        with tempfile.TemporaryDirectory() as scratch:
            for i, (name, w) in enumerate(sorted(workloads.items())):
                rewritten = run_start_script(name, w, cm, node_bin, placeholders, scratch, i,
                                             report)
                check_rewrite(name, dep, rewritten, f"{TEST_NET}{i + 1}", w[0], report)
    return report, docs, placeholders


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="the manifests (every *.yaml in it)")
    ap.add_argument("--reference", help="the deployment file the manifests adapt")
    ap.add_argument("--node-bin", help="prfaas-node, to run the start script with --check")
    args = ap.parse_args()
    if not Path(args.folder).is_dir():
        ap.error(f"{args.folder} is not a folder")
    report, docs, placeholders = check(args.folder, args.reference, args.node_bin)
    for e in report.errors:
        print(f"FAIL {e}")
    if report.errors:
        print(f"check-k8s-manifests: {len(report.errors)} problems in {args.folder}")
        return 1
    print(f"check-k8s-manifests: ok: {len(docs)} documents in {args.folder}"
          + (f", consistent with {args.reference}" if args.reference else "")
          + (", CURVE keys: " + ("placeholders" if placeholders else "filled"))
          + ((", every node's start script run: prfaas-node --check "
              + ("refuses the placeholders" if placeholders else "accepts its file"))
             if args.node_bin else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
