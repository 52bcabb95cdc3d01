// The prfaas-node binary: exit codes and messages for bad configurations, clean
// shutdown on signals, escalation on a crash loop.

#include <csignal>

#include <catch2/catch.hpp>

#include "support/process.hpp"

using namespace std::chrono_literals;
using namespace prfaas::test;
using Catch::Matchers::Contains;

namespace {

std::string node_yaml(const std::string& actors, const std::string& extra = "") {
  auto ports = free_ports(2);
  return "deployment: cli\n" + extra +
         "nodes:\n"
         "  - name: n0\n"
         "    control: tcp://127.0.0.1:" +
         std::to_string(ports[0]) +
         "\n"
         "    data: tcp://127.0.0.1:" +
         std::to_string(ports[1]) +
         "\n"
         "    actors:\n" +
         actors;
}

struct node_run {
  int code;           ///< -1 when still running after the timeout
  std::string output; ///< stdout and stderr, as the node wrote them
};

node_run run_node(const temp_dir& dir, const std::string& yaml,
                  std::vector<std::string> extra = {"--node", "n0"},
                  std::chrono::milliseconds timeout = 20s) {
  auto cfg = dir.file("cfg.yaml", yaml);
  auto log = dir.path() / "out.log";
  std::filesystem::remove(log);
  command cmd{{PRFAAS_BIN_DIR "/prfaas-node", "--config", cfg.string()}, {}, log};
  cmd.argv.insert(cmd.argv.end(), extra.begin(), extra.end());
  child_process p{cmd};
  auto code = p.wait(timeout);
  return {code.value_or(-1), p.out()};
}

} // namespace

TEST_CASE("prfaas-node rejects bad deployments with exit code 2 and the key path") {
  temp_dir dir;
  struct row {
    std::string yaml;
    std::string expect;
  };
  std::vector<row> rows{
      {node_yaml("      - { type: echo, name: e }\n", "failure_detector: { interval_ms: 5 }\n"),
       "failure_detector.interval_ms: unknown key"},
      {node_yaml("      - { type: nonesuch, name: e }\n"),
       "nodes[0].actors[0].type: unknown actor type \"nonesuch\""},
      {node_yaml("      - { type: crashy, name: e, tick: often }\n"),
       "nodes[0].actors[0].tick: expected a duration"},
      {node_yaml("      - { type: pinger, name: p, targets: \"not-an-address\" }\n"),
       "nodes[0].actors[0].targets: not a node/actor address"},
      {node_yaml("      - { type: echo, name: e }\n      - { type: echo, name: e }\n"),
       "nodes[0].actors[1].name: duplicate actor name"},
      {"deployment: [oops\n", "cfg.yaml"},
  };
  for (auto& r : rows) {
    INFO(r.yaml);
    auto res = run_node(dir, r.yaml);
    CHECK(res.code == 2);
    CHECK_THAT(res.output, Contains("configuration error") && Contains(r.expect));
  }
  auto missing = run_node(dir, node_yaml("      - { type: echo, name: e }\n"), {"--node", "zz"});
  CHECK(missing.code == 2);
  CHECK_THAT(missing.output, Contains("no node named \"zz\""));
}

TEST_CASE("prfaas-node --check validates without starting") {
  temp_dir dir;
  auto res = run_node(dir, node_yaml("      - { type: echo, name: e }\n"), {"--check"});
  CHECK(res.code == 0);
  CHECK_THAT(res.output, Contains("ok: deployment cli, 1 nodes"));
}

TEST_CASE("prfaas-node stops cleanly on SIGINT and SIGTERM") {
  temp_dir dir;
  auto cfg = dir.file("cfg.yaml", node_yaml("      - { type: crashy, name: t, tick: 5ms }\n"
                                            "      - { type: echo, name: e }\n"));
  for (int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    auto log = dir.path() / ("sig" + std::to_string(sig) + ".log");
    child_process p{{{PRFAAS_BIN_DIR "/prfaas-node", "--config", cfg.string(), "--all"}, {}, log}};
    REQUIRE(eventually(
        [&] { return read_file(log).find("actor_started child=e") != std::string::npos; }, 10s));
    p.signal(sig);
    auto code = p.wait(10s);
    INFO(read_file(log));
    REQUIRE(code.has_value()); // no hang, despite the re-arming timer
    CHECK(*code == 0);
    CHECK_THAT(read_file(log), Contains("node_stopped"));
  }
}

TEST_CASE("prfaas-node exits non-zero when a crash loop escalates") {
  temp_dir dir;
  auto res = run_node(dir, node_yaml("      - { type: crashy, name: c, crash_after: 20ms }\n",
                                     "supervision: { intensity: 3, period: 10s }\n"));
  CHECK(res.code == 3);
  CHECK_THAT(res.output,
             Contains("supervisor_escalate child=c") && Contains("crashed more than 3 times"));
}
