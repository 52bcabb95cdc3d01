#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "prfaas/runtime/config.hpp"

using namespace prfaas;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

namespace fs = std::filesystem;

/// A valid one-node deployment; the table rows append sections to it.
const std::string one_node = R"(deployment: d
nodes:
  - { name: n0, control: "tcp://127.0.0.1:7100", data: "tcp://127.0.0.1:7200" }
)";

/// Everything but the nodes, for rows that bring their own.
const std::string header = "deployment: d\n";

/// The error a bad config must produce: where and (part of) why.
struct bad_config {
  std::string yaml;
  std::string path;
  std::string reason;
};

const std::vector<bad_config> bad_configs = {
    // -- the document --
    {"deployment: [unclosed\nnodes: []\n", "", "YAML syntax error at line 2"},
    {"", "", "the document is empty"},
    {"- a\n- b\n", "", "expected a mapping at the top level, got a sequence"},
    {one_node + "---\n" + one_node, "", "expected one YAML document, found 2"},
    // -- required and unknown keys, at every level --
    {"nodes: [{ name: n0, control: 'tcp://h:1', data: 'tcp://h:2' }]\n", "deployment",
     "missing required key"},
    {header, "nodes", "missing required key"},
    {header + "nodes: []\n", "nodes", "must list at least one node"},
    {one_node + "logging: info\n", "logging", "unknown key (expected one of: deployment, plugins"},
    {one_node + "failure_detector: { interval_ms: 100 }\n", "failure_detector.interval_ms",
     "unknown key (expected one of: interval, misses, suspect_misses)"},
    {one_node + "supervision: { intensity: 1, intensity: 2 }\n", "supervision.intensity",
     "duplicate key"},
    // -- the data plane and links --
    {one_node + "data_plane: { window: 4 }\n", "data_plane.window",
     "unknown key (expected one of: window_chunks, window_bytes"},
    {one_node + "data_plane: { window_chunks: 0 }\n", "data_plane.window_chunks", "at least 1"},
    {one_node + "data_plane: { nice: 20 }\n", "data_plane.nice", "must be at most 19, got 20"},
    {one_node + "data_plane: { nice: -1 }\n", "data_plane.nice", "expected a non-negative integer"},
    {one_node + "data_plane: { chunk_timeout: 5s, transfer_timeout: 1s }\n",
     "data_plane.chunk_timeout", "must be less than transfer_timeout"},
    {one_node + "data_plane: { faults: { corrupt: 1.5 } }\n", "data_plane.faults.corrupt",
     "expected a probability between 0 and 1"},
    {one_node + "data_plane: { faults: { drop: lots } }\n", "data_plane.faults.drop",
     "expected a probability between 0 and 1"},
    {one_node + "data_plane: { faults: { blackhole_peers: n1 } }\n",
     "data_plane.faults.blackhole_peers", "expected a sequence of node names"},
    {header + "clusters: { a: { kind: pd }, b: { kind: pd } }\n"
              "links: [{ between: [a, b], rate: fast }]\n"
              "nodes:\n  - { name: n0, cluster: a, control: 'tcp://h:1', data: 'tcp://h:2' }\n",
     "links[0].rate", "fast"},
    {header + "clusters: { a: { kind: pd }, b: { kind: pd } }\n"
              "links: [{ between: [a, b], connections: 100 }]\n"
              "nodes:\n  - { name: n0, cluster: a, control: 'tcp://h:1', data: 'tcp://h:2' }\n",
     "links[0].connections", "at most 64 connections"},
    {one_node + "transport: { timeout: 1s }\n", "transport.timeout",
     "unknown key (expected one of: request_timeout, retry_interval"},
    {header + "nodes:\n  - { name: n0, control: 'tcp://h:1', data: 'tcp://h:2', http: 'h:80' }\n",
     "nodes[0].http", "unknown key (expected one of: name, cluster, control, data, admin"},
    {header + "nodes:\n  - { name: n0, data: 'tcp://h:2' }\n", "nodes[0].control",
     "missing required key"},
    {header + "nodes:\n  - { name: n0, control: 'tcp://h:1' }\n", "nodes[0].data",
     "missing required key"},
    {header + "nodes:\n  - { control: 'tcp://h:1', data: 'tcp://h:2' }\n", "nodes[0].name",
     "missing required key"},
    // -- wrong types --
    {one_node + "supervision: { intensity: five }\n", "supervision.intensity",
     "expected a non-negative integer, got \"five\""},
    {one_node + "supervision: { intensity: -1 }\n", "supervision.intensity",
     "expected a non-negative integer, got \"-1\""},
    {one_node + "seed: 1.5\n", "seed", "expected a non-negative integer, got \"1.5\""},
    {one_node + "seed: 18446744073709551616\n", "seed", "must be at most 18446744073709551615"},
    {one_node + "transport: { dedup_capacity: 5000000000 }\n", "transport.dedup_capacity",
     "must be at most 4294967295"},
    {one_node + "supervision: [1, 2]\n", "supervision", "expected a mapping, got a sequence"},
    {one_node + "plugins: libx.so\n", "plugins", "expected a sequence of paths, got \"libx.so\""},
    {one_node + "plugins: [[a]]\n", "plugins[0]", "expected a string, got a sequence"},
    {one_node + "model: [a, b]\n", "model", "expected a mapping, got a sequence"},
    {header + "nodes: { n0: x }\n", "nodes", "expected a sequence of nodes, got a mapping"},
    {header + "nodes: [n0]\n", "nodes[0]", "expected a mapping, got \"n0\""},
    {one_node + "deployment2: ~\n", "deployment2", "unknown key"},
    // -- durations and sizes --
    {one_node + "transport: { linger: 10 parsecs }\n", "transport.linger",
     "invalid duration \"10 parsecs\""},
    {one_node + "supervision: { period: 10 }\n", "supervision.period", "invalid duration \"10\""},
    {one_node + "supervision: { period: 0s }\n", "supervision.period", "must be greater than zero"},
    {one_node + "failure_detector: { interval: -200ms }\n", "failure_detector.interval",
     "invalid duration \"-200ms\""},
    {one_node + "transport: { max_bulk_bytes: 12 potatoes }\n", "transport.max_bulk_bytes",
     "invalid size \"12 potatoes\""},
    {one_node + "transport: { max_envelope_bytes: 0 }\n", "transport.max_envelope_bytes",
     "must be greater than zero"},
    // -- ranges and cross-field rules --
    {one_node + "failure_detector: { misses: 3, suspect_misses: 3 }\n",
     "failure_detector.suspect_misses", "must be less than misses (3)"},
    {one_node + "failure_detector: { suspect_misses: 0 }\n", "failure_detector.suspect_misses",
     "must be at least 1"},
    {one_node + "failure_detector: { misses: 2 }\n", "failure_detector.misses",
     "must be greater than suspect_misses (2)"},
    {one_node + "transport: { retry_interval: 2s }\n", "transport.retry_interval",
     "must be less than request_timeout (2s)"},
    {one_node + "transport: { request_timeout: 100ms }\n", "transport.request_timeout",
     "must be greater than retry_interval (250ms)"},
    {one_node + "transport: { retry_interval: 500ms, max_retry_interval: 200ms }\n",
     "transport.max_retry_interval", "must not be less than retry_interval (500ms)"},
    {one_node + "transport: { outbound_queue: 0 }\n", "transport.outbound_queue",
     "must be at least 1"},
    // -- enums --
    {one_node + "transport: { overflow: drop_all }\n", "transport.overflow",
     "invalid value \"drop_all\" (expected one of: drop_newest, drop_oldest)"},
    {one_node + "transport: { inline_delivery: maybe }\n", "transport.inline_delivery",
     "invalid value \"maybe\" (expected one of: true, false)"},
    {one_node + "log_level: verbose\n", "log_level",
     "invalid value \"verbose\" (expected one of: trace, debug, info, warn, error, off)"},
    {header +
         "nodes:\n  - { name: n0, control: 'tcp://h:1', data: 'tcp://h:2', log_level: loud }\n",
     "nodes[0].log_level", "invalid value \"loud\""},
    {header + "nodes:\n  - name: n0\n    control: tcp://h:1\n    data: tcp://h:2\n"
              "    actors: [{ type: echo, name: e0, restart: always }]\n",
     "nodes[0].actors[0].restart",
     "invalid value \"always\" (expected one of: permanent, transient, temporary)"},
    {one_node + "clusters: { pd: { kind: decode-only } }\n", "clusters.pd.kind",
     "invalid value \"decode-only\" (expected one of: prefill-only, pd)"},
    {one_node + "clusters: { pd: { kind: pd, share: 0 } }\n", "clusters.pd.share", "at least 1"},
    {one_node + "clusters: { pf: { kind: prefill-only, share: 2 } }\n", "clusters.pf.share",
     "a prefill-only cluster has none"},
    {one_node + "fair_share: dependency\n", "fair_share",
     "invalid value \"dependency\" (expected one of: share, link_rate)"},
    {one_node +
         "fair_share: link_rate\nclusters: { pf: { kind: prefill-only }, pd: { kind: pd } }\n"
         "links: [{ between: [pd, pf] }]\n",
     "links[0]", "this link between \"pd\" and \"pf\" needs a rate"},
    // -- names --
    {header + "nodes:\n  - { name: n0, control: 'tcp://h:1', data: 'tcp://h:2' }\n"
              "  - { name: n0, control: 'tcp://h:3', data: 'tcp://h:4' }\n",
     "nodes[1].name", "duplicate node name \"n0\" (also nodes[0])"},
    {header + "nodes:\n  - { name: a/b, control: 'tcp://h:1', data: 'tcp://h:2' }\n",
     "nodes[0].name", "invalid name \"a/b\""},
    {"deployment: ''\nnodes:\n  - { name: n0, control: 'tcp://h:1', data: 'tcp://h:2' }\n",
     "deployment", "must not be empty"},
    // -- actors --
    {header + "nodes:\n  - name: n0\n    control: tcp://h:1\n    data: tcp://h:2\n    actors:\n"
              "      - { type: echo, name: e0 }\n      - { type: echo, name: e1 }\n"
              "      - { type: sink, name: e0 }\n",
     "nodes[0].actors[2].name", "duplicate actor name \"e0\" (also nodes[0].actors[0])"},
    {header + "nodes:\n  - name: n0\n    control: tcp://h:1\n    data: tcp://h:2\n"
              "    actors: [{ name: e0 }]\n",
     "nodes[0].actors[0].type", "missing required key"},
    {header + "nodes:\n  - name: n0\n    control: tcp://h:1\n    data: tcp://h:2\n"
              "    actors: [{ type: [echo], name: e0 }]\n",
     "nodes[0].actors[0].type", "expected a string, got a sequence"},
    {header + "nodes:\n  - name: n0\n    control: tcp://h:1\n    data: tcp://h:2\n"
              "    actors: [{ type: echo }]\n",
     "nodes[0].actors[0].name", "missing required key"},
    {header + "nodes:\n  - name: n0\n    control: tcp://h:1\n    data: tcp://h:2\n"
              "    actors: { e0: echo }\n",
     "nodes[0].actors", "expected a sequence of actors, got a mapping"},
    {header + "nodes:\n  - name: n0\n    control: tcp://h:1\n    data: tcp://h:2\n"
              "    actors: [echo]\n",
     "nodes[0].actors[0]", "expected a mapping, got \"echo\""},
    // -- endpoints --
    {header +
         "nodes:\n  - { name: a, control: 'tcp://127.0.0.1:7100', data: 'tcp://127.0.0.1:7200' }\n"
         "  - { name: b, control: 'tcp://127.0.0.1:7100', data: 'tcp://127.0.0.1:7201' }\n",
     "nodes[1].control", "clashes with nodes[0].control (the same endpoint)"},
    {header +
         "nodes:\n  - { name: a, control: 'tcp://127.0.0.1:7100', data: 'tcp://127.0.0.1:7200' }\n"
         "  - { name: b, control: 'tcp://127.0.0.1:7101', data: 'tcp://localhost:7100' }\n",
     "nodes[1].data", "clashes with nodes[0].control (\"tcp://127.0.0.1:7100\")"},
    {header +
         "nodes:\n  - { name: a, control: 'tcp://10.0.0.1:7100', data: 'tcp://10.0.0.1:7200' }\n"
         "  - { name: b, control: 'tcp://*:7200', data: 'tcp://10.0.0.2:7201' }\n",
     "nodes[1].control", "clashes with nodes[0].data"},
    {header + "nodes:\n  - { name: a, control: 'tcp://0.0.0.0:7100', data: 'tcp://host-a:7100' }\n",
     "nodes[0].data", "clashes with nodes[0].control"},
    {header + "nodes:\n  - { name: a, control: 'ipc:///tmp/a', data: 'ipc:///tmp/a' }\n",
     "nodes[0].data", "clashes with nodes[0].control (the same endpoint)"},
    {header + "nodes:\n  - { name: a, control: 'inproc://x', data: 'inproc://y' }\n"
              "  - { name: b, control: 'inproc://y', data: 'inproc://z' }\n",
     "nodes[1].control", "clashes with nodes[0].data"},
    {header + "nodes:\n  - { name: a, control: 'tcp://h:1', data: 'tcp://h:2', admin: 'h:9100' }\n"
              "  - { name: b, control: 'tcp://h:3', data: 'tcp://h:4', admin: 'h:9100' }\n",
     "nodes[1].admin", "clashes with nodes[0].admin"},
    {header + "nodes:\n  - { name: a, control: 'tcp://h:1', data: 'tcp://h:2' }\n"
              "  - { name: b, control: 'tcp://h:3', data: 'tcp://h:4', admin: '0.0.0.0:2' }\n",
     "nodes[1].admin", "clashes with nodes[0].data (\"tcp://h:2\")"},
    {header + "nodes:\n  - { name: a, control: 'tcp://127.0.0.1:*', data: 'tcp://h:2' }\n",
     "nodes[0].control", "the port must be concrete"},
    {header + "nodes:\n  - { name: a, control: 'tcp://h:1', data: 'udp://h:2' }\n", "nodes[0].data",
     "unsupported transport \"udp\""},
    {header + "nodes:\n  - { name: a, control: 'tcp://127.0.0.1', data: 'tcp://h:2' }\n",
     "nodes[0].control", "invalid endpoint \"tcp://127.0.0.1\""},
    {header + "nodes:\n  - { name: a, control: 'tcp://h:70000', data: 'tcp://h:2' }\n",
     "nodes[0].control", "is not a number from 1 to 65535"},
    {header + "nodes:\n  - { name: a, control: '127.0.0.1:7100', data: 'tcp://h:2' }\n",
     "nodes[0].control", "expected tcp://host:port, ipc://path or inproc://name"},
    {header + "nodes:\n  - { name: a, control: 'tcp://h:1', data: 'tcp://h:2', admin: '9100' }\n",
     "nodes[0].admin", "invalid address \"9100\""},
    // -- clusters and links --
    {header + "clusters: { pd: {} }\n", "clusters.pd.kind", "missing required key"},
    {header + "clusters: { pd: { kind: pd, size: 3 } }\n", "clusters.pd.size",
     "unknown key (expected one of: kind, share)"},
    {header + "clusters: { pd: { kind: pd } }\n"
              "nodes:\n  - { name: a, control: 'tcp://h:1', data: 'tcp://h:2' }\n",
     "nodes[0].cluster", "missing required key"},
    {header + "clusters: { pd: { kind: pd } }\n"
              "nodes:\n  - { name: a, cluster: pf, control: 'tcp://h:1', data: 'tcp://h:2' }\n",
     "nodes[0].cluster", "unknown cluster \"pf\""},
    {header + "nodes:\n  - { name: a, cluster: pd, control: 'tcp://h:1', data: 'tcp://h:2' }\n",
     "nodes[0].cluster", "unknown cluster \"pd\" (no clusters are declared)"},
    {one_node + "links: [{ between: [pd, x] }]\n", "links[0].between[0]",
     "unknown cluster \"pd\" (no clusters are declared)"},
    {header + "clusters: { pd: { kind: pd }, pf: { kind: prefill-only } }\n"
              "links: [{ between: [pd, x] }]\n",
     "links[0].between[1]", "unknown cluster \"x\""},
    {header + "clusters: { pd: { kind: pd } }\nlinks: [{ between: [pd, pd] }]\n",
     "links[0].between", "a link needs two distinct clusters, got \"pd\" twice"},
    {header + "clusters: { pd: { kind: pd } }\nlinks: [{ between: [pd] }]\n", "links[0].between",
     "expected two cluster names"},
    {header + "clusters: { pd: { kind: pd } }\nlinks: [{ rate: 1gbit }]\n", "links[0].between",
     "missing required key"},
    {header + "links: [pd]\n", "links[0]", "expected a mapping, got \"pd\""},
    {header + "clusters: { pd: { kind: pd }, pf: { kind: prefill-only } }\n"
              "links: [{ between: [pd, pf] }, { between: [pf, pd] }]\n",
     "links[1].between", "duplicate link between \"pf\" and \"pd\" (also links[0])"},
};

/// The config_error `yaml` raises, or a failed check if it raises none.
std::optional<config_error> error_of(const std::string& yaml) {
  try {
    parse_deployment(yaml, "<string>");
  } catch (const config_error& e) {
    return e;
  }
  return std::nullopt;
}

/// A fresh empty folder under the temp dir, removed with the object.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() /
           ("prfaas-test-config-" + std::to_string(::getpid()) + "-" + std::to_string(++count_));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    auto file = path / name;
    fs::create_directories(file.parent_path());
    std::ofstream{file} << text;
    return file;
  }

private:
  static inline int count_ = 0;
};

} // namespace

TEST_CASE("bad configs are rejected naming the key path", "[config]") {
  REQUIRE(bad_configs.size() >= 25);
  for (const auto& row : bad_configs) {
    CAPTURE(row.yaml);
    auto error = error_of(row.yaml);
    REQUIRE(error.has_value());
    CHECK(error->path() == row.path);
    CHECK_THAT(error->reason(), Contains(row.reason));
    CHECK(std::string{error->what()} ==
          "<string>: " + (row.path.empty() ? "" : row.path + ": ") + error->reason());
  }
}

TEST_CASE("the table rows differ from a valid config only in their fault", "[config]") {
  // Guards the table against rows that fail for an unintended reason: the bases are valid.
  CHECK_NOTHROW(parse_deployment(one_node, "<string>"));
  CHECK_NOTHROW(parse_deployment(header + "clusters: { pd: { kind: pd }, pf: { kind: "
                                          "prefill-only } }\nlinks: [{ between: [pd, pf] }]\n"
                                          "nodes:\n  - { name: a, cluster: pd, control: "
                                          "'tcp://h:1', data: 'tcp://h:2' }\n",
                                 "<string>"));
  // The data plane's nice steps, as the nice rows would have them.
  CHECK(parse_deployment(one_node + "data_plane: { nice: 0 }\n", "<string>").data_plane.nice == 0);
  CHECK(parse_deployment(one_node, "<string>").data_plane.nice == 10);
  // A PD cluster's share, as the share rows would have it.
  auto shared = parse_deployment(header + "clusters: { pd: { kind: pd, share: 3 } }\n"
                                          "nodes:\n  - { name: a, cluster: pd, control: "
                                          "'tcp://h:1', data: 'tcp://h:2' }\n",
                                 "<string>");
  CHECK(shared.clusters.at("pd").share == 3);
}

TEST_CASE("error messages name the source file", "[config]") {
  temp_dir dir;
  auto file = dir.write("bad.yaml", one_node + "supervision: { intensity: five }\n");
  try {
    load_deployment(file.string());
    FAIL("no error");
  } catch (const config_error& e) {
    CHECK(e.source() == file.string());
    CHECK(std::string{e.what()} == file.string() +
                                       ": supervision.intensity: expected a non-negative "
                                       "integer, got \"five\"");
  }
  config_error bare{"nodes[0].actors[1].type", "unknown actor type \"x\""};
  CHECK(std::string{bare.what()} == "nodes[0].actors[1].type: unknown actor type \"x\"");
  CHECK(bare.path() == "nodes[0].actors[1].type");
}

TEST_CASE("a missing or unreadable file is a config_error with an empty path", "[config]") {
  temp_dir dir;
  for (auto file : {(dir.path / "absent.yaml").string(), dir.path.string()}) {
    CAPTURE(file);
    try {
      load_deployment(file);
      FAIL("no error");
    } catch (const config_error& e) {
      CHECK(e.path().empty());
      CHECK_THAT(e.what(), Contains(file) && Contains("cannot"));
    }
  }
}

TEST_CASE("the sample config parses and documents the defaults", "[config]") {
  auto cfg = load_deployment("configs/sample.yaml");
  CHECK(cfg.name == "sample-two-dc");
  CHECK(cfg.source == "configs/sample.yaml");
  CHECK(cfg.plugins.empty());
  // The sample spells out every global default: they must be the struct defaults.
  CHECK(cfg.log == log_level::info);
  CHECK(cfg.seed == deployment_config{}.seed);
  CHECK(cfg.supervision == supervision_config{});
  CHECK(cfg.failure_detector == failure_detector_config{});
  CHECK(cfg.transport == transport_config{});
  CHECK(cfg.data_plane == data_plane_settings{});

  REQUIRE(cfg.clusters.size() == 2);
  CHECK(cfg.clusters.at("prfaas").kind == "prefill-only");
  CHECK(cfg.clusters.at("pd").kind == "pd");
  CHECK(cfg.clusters.at("pd").share == 0); // no shares: first come first served
  CHECK(cfg.model["block_tokens"].as<int>() == 512);
  REQUIRE(cfg.links.IsSequence());
  CHECK(cfg.links[0]["rate"].as<std::string>() == "1gbit");
  CHECK(parse_rate(cfg.links[0]["rate"].as<std::string>()) == 1'000'000'000);
  REQUIRE(cfg.link_list.size() == 1);
  CHECK(cfg.link_list[0].rate_bps == 1'000'000'000);
  CHECK(cfg.link_list[0].connections == 4);
  CHECK(cfg.find_link("pd", "prfaas") == &cfg.link_list[0]);

  REQUIRE(cfg.nodes.size() == 2);
  const auto* pd = cfg.find_node("pd-0");
  REQUIRE(pd != nullptr);
  CHECK(pd->cluster == "pd");
  CHECK(pd->control == "tcp://127.0.0.1:7101");
  CHECK(pd->admin == "127.0.0.1:9101");
  CHECK_FALSE(pd->log.has_value());
  CHECK(pd->path == "nodes[1]");
  REQUIRE(pd->actors.size() == 5);
  CHECK(pd->actors[4].type == "counter");
  CHECK(pd->actors[4].restart == "temporary");
  const auto* pf = cfg.find_node("prfaas-0");
  REQUIRE(pf->actors.size() == 2);
  CHECK(pf->actors[1].restart == "transient");
  CHECK(pf->actors[1].params["tick"].as<std::string>() == "1s");
  CHECK(cfg.find_node("prfaas-0")->log == log_level::debug);
  CHECK(cfg.find_node("nowhere") == nullptr);
}

TEST_CASE("omitted keys take the struct defaults", "[config]") {
  auto cfg = parse_deployment(one_node, "<string>");
  const deployment_config defaults;
  CHECK(cfg.name == "d");
  CHECK(cfg.source == "<string>");
  CHECK(cfg.plugins.empty());
  CHECK(cfg.log == defaults.log);
  CHECK(cfg.seed == defaults.seed);
  CHECK(cfg.supervision == defaults.supervision);
  CHECK(cfg.failure_detector == defaults.failure_detector);
  CHECK(cfg.transport == defaults.transport);
  CHECK(cfg.clusters.empty());
  CHECK(cfg.model.IsNull());
  CHECK(cfg.links.IsNull());
  REQUIRE(cfg.nodes.size() == 1);
  const auto& node = cfg.nodes[0];
  CHECK(node.name == "n0");
  CHECK(node.cluster.empty());
  CHECK(node.admin.empty());
  CHECK_FALSE(node.log.has_value());
  CHECK(node.actors.empty());
  CHECK(node.path == "nodes[0]");
}

TEST_CASE("explicit settings override the defaults", "[config]") {
  auto cfg = parse_deployment(one_node + R"(
seed: 18446744073709551615
log_level: warn
supervision: { intensity: 0, period: 1m, backoff: 1.5s }
failure_detector: { interval: 50ms, misses: 3, suspect_misses: 1 }
transport:
  overflow: drop_oldest
  max_bulk_bytes: 1GiB
  max_envelope_bytes: 1MB
  retry_interval: 100us
  send_hwm: 0
  inline_delivery: false
)",
                              "<string>");
  CHECK(cfg.seed == 18446744073709551615u);
  CHECK(cfg.log == log_level::warn);
  CHECK(cfg.supervision.intensity == 0);
  CHECK(cfg.supervision.period == 60s);
  CHECK(cfg.supervision.backoff == 1500ms);
  CHECK(cfg.failure_detector.interval == 50ms);
  CHECK(cfg.failure_detector.misses == 3);
  CHECK(cfg.failure_detector.suspect_misses == 1);
  CHECK(cfg.transport.overflow == overflow_policy::drop_oldest);
  CHECK(cfg.transport.max_bulk_bytes == (uint64_t{1} << 30));
  CHECK(cfg.transport.max_envelope_bytes == 1'000'000);
  CHECK(cfg.transport.retry_interval == 100us);
  CHECK(cfg.transport.max_retry_interval == transport_config{}.max_retry_interval);
  CHECK(cfg.transport.send_hwm == 0);
  CHECK_FALSE(cfg.transport.inline_delivery);
  CHECK(transport_config{}.inline_delivery);
  CHECK(cfg.transport.request_timeout == transport_config{}.request_timeout);
}

TEST_CASE("actor entries keep their other keys as params", "[config]") {
  auto cfg = parse_deployment(header + R"(
nodes:
  - name: n0
    control: ipc:///tmp/prfaas-n0
    data: inproc://n0-data
    actors:
      - { type: echo, name: e0 }
      - type: scheduler
        name: sched
        restart: temporary
        policy: prfaas
        weights: [1, 2]
        nested: { a: 1 }
)",
                              "<string>");
  const auto& actors = cfg.nodes.at(0).actors;
  REQUIRE(actors.size() == 2);
  CHECK(actors[0].restart == "permanent");
  CHECK(actors[0].params.IsMap());
  CHECK(actors[0].params.size() == 0);
  CHECK(actors[0].path == "nodes[0].actors[0]");
  CHECK(actors[1].type == "scheduler");
  CHECK(actors[1].name == "sched");
  CHECK(actors[1].restart == "temporary");
  CHECK(actors[1].path == "nodes[0].actors[1]");
  REQUIRE(actors[1].params.IsMap());
  CHECK(actors[1].params.size() == 3);
  CHECK(actors[1].params["policy"].as<std::string>() == "prfaas");
  CHECK(actors[1].params["weights"][1].as<int>() == 2);
  CHECK(actors[1].params["nested"]["a"].as<int>() == 1);
  CHECK_FALSE(actors[1].params["type"]);
}

TEST_CASE("endpoints that do not clash are accepted", "[config]") {
  auto cfg = parse_deployment(header + R"(
nodes:
  - { name: a, control: 'tcp://host-a:7100', data: 'tcp://host-a:7200', admin: 'host-a:0' }
  - { name: b, control: 'tcp://host-b:7100', data: 'tcp://host-b:7200', admin: 'host-b:0' }
  - { name: c, control: 'tcp://127.0.0.1:7100', data: 'ipc:///tmp/c', admin: 'localhost:9100' }
  - { name: d, control: 'inproc://d', data: 'ipc:///tmp/d', admin: '127.0.0.1:9101' }
  - { name: e, control: 'tcp://[::1]:7300', data: 'tcp://[::1]:7301' }
)",
                              "<string>");
  CHECK(cfg.nodes.size() == 5);
  CHECK(cfg.nodes[0].admin == "host-a:0");
}

TEST_CASE("relative plugin paths resolve against the file's folder", "[config]") {
  temp_dir dir;
  const std::string plugins = "plugins: [libfoo.so, sub/../lib/libbar.so, /opt/prfaas/libbaz.so]\n";
  auto file = dir.write("deploy/d.yaml", one_node + plugins);
  auto cfg = load_deployment(file.string());
  REQUIRE(cfg.plugins.size() == 3);
  auto folder = fs::absolute(file).parent_path();
  CHECK(cfg.plugins[0] == (folder / "libfoo.so").string());
  CHECK(cfg.plugins[1] == (folder / "lib/libbar.so").string());
  CHECK(cfg.plugins[2] == "/opt/prfaas/libbaz.so");
  CHECK(fs::path{cfg.plugins[0]}.is_absolute());

  // Text from no file keeps them as written.
  auto inline_cfg = parse_deployment(one_node + plugins, "<string>");
  CHECK(inline_cfg.plugins[0] == "libfoo.so");
  CHECK(inline_cfg.plugins[1] == "sub/../lib/libbar.so");
}
