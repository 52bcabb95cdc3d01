// The serving path end to end, on the committed deployments (configs/local.yaml and
// configs/two-dc/deployment.yaml, with free ports substituted): real node processes,
// real HTTP, KVCache moved by the real data plane. With the reference engine, the
// tokens a request gets must be exactly those of a single engine running prefill and
// decode in one process — whether the prompt was prefilled on the PrfaaS cluster
// (its KV crossing the link) or locally, streamed or not.

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <regex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "prfaas/engine/profile_engine.hpp"
#include "prfaas/engine/reference_engine.hpp"
#include "e2e_support.hpp"
#include "support/http_probe.hpp"
#include "support/process.hpp"

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace t = prfaas::test;
namespace eng = prfaas::engine;

namespace {

using namespace prfaas::test::e2e;

/// The committed file with every 127.0.0.1 port replaced by a free one and the
/// scheduler's threshold set. `ports` receives old → new.
std::string adapt(const std::string& file, uint64_t threshold, std::map<int, int>& ports) {
  auto text = t::read_file(src + "/" + file);
  REQUIRE(!text.empty());
  auto out = t::with_free_ports(text, ports);
  return std::regex_replace(out, std::regex{"threshold: [0-9]+"},
                            "threshold: " + std::to_string(threshold));
}

/// What one reference engine in one process produces.
std::vector<int> single_engine(const std::string& prompt, size_t n, float temperature,
                               uint64_t seed) {
  eng::reference_config rc;
  rc.weight_seed = 1;
  rc.layer_pattern = "LLLFLLLF";
  auto e = eng::reference_engine::create(rc);
  REQUIRE(e.ok());
  return generate(**e, prompt, n, temperature, seed);
}

/// local.yaml with its data_plane line replaced by `data_plane`.
std::string with_data_plane(std::string yaml, const std::string& data_plane) {
  auto out = std::regex_replace(yaml, std::regex{"data_plane: .*"}, "data_plane: " + data_plane);
  REQUIRE(out != yaml);
  return out;
}

/// configs/local.yaml (free ports, the given threshold, optionally another data_plane
/// line) running in one prfaas-node process, up and serving.
struct local_deployment {
  t::temp_dir dir;
  std::map<int, int> ports; ///< committed port -> the one used
  std::unique_ptr<t::child_process> node;

  explicit local_deployment(uint64_t threshold, const std::string& data_plane = {}) {
    auto yaml = adapt("configs/local.yaml", threshold, ports);
    if (!data_plane.empty())
      yaml = with_data_plane(yaml, data_plane);
    auto cfg = dir.file("local.yaml", yaml);
    node = std::make_unique<t::child_process>(
        t::command{.argv = {bin + "/prfaas-node", "--config", cfg.string(), "--all"},
                   .out_file = dir.path() / "node.log"});
    REQUIRE(serving(http()));
    REQUIRE(peers_up(ports.at(9101), {"prfaas-0"}));
    REQUIRE(t::workers_ready(ports.at(9101), 2, 1));
  }
  int http() const { return ports.at(8000); }
  std::string output() const { return node->output(); }
};

const std::string short_prompt = "The quick brown fox jumps over the lazy dog.";
std::string long_prompt() {
  std::string p;
  while (p.size() < 700)
    p += "Prefill-as-a-Service ships KVCache across datacenters over plain Ethernet. ";
  return p;
}

} // namespace

TEST_CASE("every committed deployment passes --check (actor types, parameters, model)",
          "[serving][config]") {
  for (const char* file : {"configs/local.yaml", "configs/sample.yaml",
                           "configs/two-dc/deployment.yaml", "configs/bench-profile.yaml"}) {
    auto r = t::run({.argv = {bin + "/prfaas-node", "--config", src + "/" + file, "--check"}}, 30s);
    INFO(file << "\n" << r.output);
    CHECK(r.code == 0);
  }
}

TEST_CASE(
    "local deployment: the same tokens from PrfaaS prefill, local prefill and a single engine",
    "[serving][e2e]") {
  const auto lp = long_prompt();
  struct probe {
    std::string prompt;
    float temperature;
    uint64_t seed;
  };
  const std::vector<probe> probes = {
      {short_prompt, 0.0f, 0}, {lp, 0.0f, 0}, {short_prompt, 0.8f, 7}, {lp, 0.8f, 42}};
  const size_t n = 24;
  std::vector<std::vector<int>> expected;
  for (auto& p : probes)
    expected.push_back(single_engine(p.prompt, n, p.temperature, p.seed));
  REQUIRE(expected[0] != expected[1]); // the probes are not trivially equal

  // threshold 0: every prompt is offloaded; huge: none is.
  for (uint64_t threshold : {uint64_t{0}, uint64_t{1} << 40}) {
    DYNAMIC_SECTION("threshold " << threshold) {
      local_deployment d{threshold};
      const int http = d.http();
      auto& ports = d.ports;
      auto& node = *d.node;
      const std::string want_route = threshold == 0 ? "prfaas" : "pd";
      for (size_t i = 0; i < probes.size(); ++i) {
        auto& p = probes[i];
        auto c = complete(http, request_body(p.prompt, n, p.temperature, p.seed, false));
        INFO("probe " << i << ": " << c.body.dump() << "\n" << node.output());
        REQUIRE(c.status == 200);
        CHECK(c.route == want_route);
        CHECK(c.finish_reason == "length");
        CHECK(c.tokens == expected[i]);
        CHECK(c.body["usage"]["completion_tokens"] == n);
        CHECK(c.body["usage"]["prompt_tokens"] == p.prompt.size());
        // The long prompt's second time (probe 3) reuses the prefix cache of the worker
        // that prefilled it the first time (one per cluster here): all its full blocks
        // of 64 tokens, as long as one token is left to compute.
        if (i == 3)
          CHECK(c.body["prfaas"]["cached_tokens"] == (p.prompt.size() - 1) / 64 * 64);
        if (i < 2)
          CHECK(c.body["prfaas"]["cached_tokens"] == 0);
      }
      // A new prompt sharing the long one's first blocks: the shared prefix is reused,
      // the tail computed, and the tokens are still exactly a single engine's.
      const auto shared =
          lp.substr(0, 300) + " and then something else entirely, " + lp.substr(0, 50);
      auto expect_shared = single_engine(shared, n, 0.0f, 0);
      auto cs = complete(http, request_body(shared, n, 0.0f, 0, false));
      INFO(cs.body.dump());
      REQUIRE(cs.status == 200);
      CHECK(cs.body["prfaas"]["cached_tokens"] == 256); // 300 shared bytes = 4 whole blocks
      CHECK(cs.tokens == expect_shared);
      // The workers told the KV directory what they cache, and the scheduler asked it.
      auto m = t::http_get(ports.at(9101), "/metrics");
      REQUIRE(m);
      CHECK(metric_sum(*m, "prfaas_kv_directory_entries") > 0);
      CHECK(metric_sum(*m, "prfaas_kv_directory_hit_blocks_total") > 0);
      // Streamed: the same tokens and text, in OpenAI's SSE shape.
      std::vector<json> events;
      auto s = stream(http, request_body(lp, n, 0.8f, 42, true), events);
      auto whole = complete(http, request_body(lp, n, 0.8f, 42, false));
      INFO(node.output());
      REQUIRE(s.status == 200);
      CHECK(s.tokens == expected[3]);
      CHECK(s.text == whole.text);
      CHECK(s.finish_reason == "length");
      CHECK(s.route == want_route);
      REQUIRE(events.size() >= 3);
      CHECK(events.back() == "[DONE]");
      auto& usage = events[events.size() - 2];
      CHECK(usage["usage"]["completion_tokens"] == n);
      CHECK(usage["choices"].empty());
      node.signal(SIGTERM);
      CHECK(node.wait(20s) == 0);
    }
  }
}

TEST_CASE("local deployment: a stop sequence ends the output before it, end to end",
          "[serving][e2e]") {
  const auto expected = single_engine(short_prompt, 40, 0.0f, 0);
  // Pick a stop string from the middle of the expected output: two consecutive ASCII
  // bytes (the byte tokenizer's tokens are the output's bytes) whose first occurrence
  // in the output's bytes is at position k >= 4.
  std::string bytes;
  for (int t : expected)
    bytes.push_back(static_cast<char>(t & 0xFF));
  size_t k = 0;
  for (size_t i = 4; i + 1 < expected.size() && k == 0; ++i)
    if (expected[i] > 0 && expected[i] < 0x80 && expected[i + 1] > 0 && expected[i + 1] < 0x80 &&
        bytes.find(bytes.substr(i, 2)) == i)
      k = i;
  REQUIRE(k != 0);
  const std::string stop = bytes.substr(k, 2);
  local_deployment d{256};
  auto body = request_body(short_prompt, 40, 0.0f, 0, false);
  body["stop"] = stop;
  body.erase("ignore_eos");
  auto c = complete(d.http(), body);
  INFO(c.body.dump() << "\n" << d.output());
  REQUIRE(c.status == 200);
  CHECK(c.finish_reason == "stop");
  // The output is the text before the stop string, and the tokens that text comes from.
  CHECK(c.tokens == std::vector<int>(expected.begin(), expected.begin() + static_cast<long>(k)));
  CHECK(c.body["usage"]["completion_tokens"] == k + 2); // the stop string's tokens were generated
}

TEST_CASE("two-dc deployment: one process per role serves the same tokens", "[serving][e2e]") {
  t::temp_dir dir;
  std::map<int, int> ports;
  auto cfg = dir.file("two-dc.yaml", adapt("configs/two-dc/deployment.yaml", 256, ports));
  std::vector<std::unique_ptr<t::child_process>> nodes;
  for (const char* n : {"prfaas-0", "pd-p0", "pd-d0", "pd-gw"})
    nodes.push_back(std::make_unique<t::child_process>(
        t::command{.argv = {bin + "/prfaas-node", "--config", cfg.string(), "--node", n},
                   .out_file = dir.path() / (std::string{n} + ".log")}));
  auto logs = [&] {
    std::string s;
    for (auto& n : nodes)
      s += n->output() + "\n";
    return s;
  };
  const int http = ports.at(8000);
  REQUIRE(serving(http));
  REQUIRE(peers_up(ports.at(9301), {"prfaas-0", "pd-p0", "pd-d0"}));
  REQUIRE(t::workers_ready(ports.at(9301), 2, 1));
  const auto lp = long_prompt();
  for (auto& [prompt, route] : {std::pair{short_prompt, "pd"}, std::pair{lp, "prfaas"}}) {
    auto expected = single_engine(prompt, 16, 0.0f, 0);
    auto c = complete(http, request_body(prompt, 16, 0.0f, 0, false));
    INFO(c.body.dump() << "\n" << logs());
    REQUIRE(c.status == 200);
    CHECK(c.route == route);
    CHECK(c.tokens == expected);
  }
  for (auto& n : nodes)
    n->signal(SIGTERM);
  for (auto& n : nodes)
    CHECK(n->wait(20s) == 0);
}

TEST_CASE("data-plane faults: corrupted, dropped and delayed chunks are repaired, tokens unchanged",
          "[serving][e2e][faults]") {
  local_deployment d{0, "{ chunk_timeout: 100ms, transfer_timeout: 20s, faults: { seed: 7, "
                        "corrupt: 0.2, drop: 0.1, delay: 0.2, delay_for: 20ms } }"};
  const int http = d.http();
  auto& ports = d.ports;
  auto& node = *d.node;
  const auto lp = long_prompt();
  for (int i = 0; i < 8; ++i) {
    auto prompt = lp + std::to_string(i);
    auto expected = single_engine(prompt, 12, 0.0f, 0);
    auto c = complete(http, request_body(prompt, 12, 0.0f, 0, false));
    INFO("request " << i << ": " << c.body.dump() << "\n" << node.output());
    REQUIRE(c.status == 200);
    CHECK(c.route == "prfaas");
    CHECK(c.body["prfaas"]["attempts"] == 1); // repaired in place, no failover
    CHECK(c.tokens == expected);
  }
  auto receiver = t::http_get(ports.at(9101), "/metrics");
  auto sender = t::http_get(ports.at(9100), "/metrics");
  REQUIRE(receiver);
  REQUIRE(sender);
  CHECK(metric_sum(*receiver, "prfaas_data_corrupt_chunks_total") > 0);
  CHECK(metric_sum(*sender, "prfaas_data_retransmits_total") > 0);
  CHECK(metric_sum(*receiver, "prfaas_gateway_failovers_total") == 0);
}

TEST_CASE("a KV transfer that cannot complete fails over to local prefill with one complete stream",
          "[serving][e2e][faults]") {
  // Every chunk from prfaas-0 to pd-0 is lost: offloaded transfers time out.
  local_deployment d{0, "{ chunk_timeout: 100ms, transfer_timeout: 1s, faults: { seed: 3, "
                        "blackhole_peers: [\"prfaas-0->pd-0\"] } }"};
  const int http = d.http();
  auto& ports = d.ports;
  auto& node = *d.node;
  const auto lp = long_prompt();
  auto expected = single_engine(lp, 20, 0.8f, 11);
  auto c = complete(http, request_body(lp, 20, 0.8f, 11, false));
  INFO(c.body.dump() << "\n" << node.output());
  REQUIRE(c.status == 200);
  CHECK(c.tokens == expected);
  CHECK(c.body["prfaas"]["attempts"] == 2);
  CHECK(c.body["prfaas"]["prefill_node"] == "pd-0"); // the local prefill served it
  std::vector<json> events;
  auto s = stream(http, request_body(lp, 20, 0.8f, 11, true), events);
  REQUIRE(s.status == 200);
  CHECK(s.tokens == expected); // no repeats, no gaps
  CHECK(s.finish_reason == "length");
  auto m = t::http_get(ports.at(9101), "/metrics");
  REQUIRE(m);
  CHECK(metric_sum(*m, "prfaas_gateway_failovers_total") == 2);
  CHECK(metric_sum(*m, "prfaas_gateway_requests_total") == 2);
}

namespace {

/// One gateway node (gateway, scheduler, prefill worker) and two decode nodes, each
/// its own process, on free loopback ports; profile engines that take their profiled
/// time (a decode step of tens of milliseconds, so a stream lasts long enough to
/// lose its decode worker in the middle).
std::string resume_deployment(const std::vector<uint16_t>& p) {
  auto port = [&](size_t i) { return std::to_string(p.at(i)); };
  std::string y = R"(
deployment: resume
log_level: info
model:
  name: kimi-linear-1t
  engine: profile
  profile: )" + src +
                  R"(/configs/profiles/kimi-linear-1t-h20.yaml
  kv_scale: 0.0009765625
  block_tokens: 512
  max_context: 131072
clusters:
  pd: { kind: pd }
# 1 s: a gateway frozen for half a second on a loaded machine must not call the
# surviving decode node down.
failure_detector: { interval: 200ms, misses: 5, suspect_misses: 2 }
nodes:
  - name: gw
    cluster: pd
    control: tcp://127.0.0.1:)" +
                  port(0) + R"(
    data: tcp://127.0.0.1:)" +
                  port(1) + R"(
    admin: 127.0.0.1:)" +
                  port(2) + R"(
    actors:
      - { type: scheduler, name: sched, policy: threshold, threshold: 1000000 }
      - { type: gateway, name: gw, listen: 127.0.0.1:)" +
                  port(3) + R"( }
      - { type: prefill_worker, name: pdp, cache_blocks: 0 }
)";
  for (int d = 0; d < 2; ++d)
    y += "  - name: d" + std::to_string(d) + R"(
    cluster: pd
    control: tcp://127.0.0.1:)" +
         port(4 + 3 * d) + R"(
    data: tcp://127.0.0.1:)" +
         port(5 + 3 * d) + R"(
    admin: 127.0.0.1:)" +
         port(6 + 3 * d) + R"(
    actors:
      - { type: decode_worker, name: dec, max_batch: 8 }
)";
  return y;
}

} // namespace

TEST_CASE("a decode node killed mid-stream: the stream continues on the other decode node, "
          "no token repeated or missing",
          "[serving][e2e][faults]") {
  t::temp_dir dir;
  const auto p = t::free_ports(10);
  auto cfg = dir.file("resume.yaml", resume_deployment(p));
  node_processes procs{dir.path(), cfg, {"d0", "d1", "gw"}};
  auto& nodes = procs.nodes;
  auto logs = [&] { return procs.logs(); };
  const int http = p[3];
  REQUIRE(serving(http));
  REQUIRE(peers_up(p[2], {"d0", "d1"}));
  REQUIRE(t::workers_ready(p[2], 1, 2));

  const std::string prompt = "Resume me on another decode worker, please.";
  const size_t n = 120;
  const auto expected = single_profile_engine(prompt, n, 0.8f, 21);
  // Stream in a thread; kill the decode node that serves it once tokens flow.
  std::vector<json> events;
  completion s;
  auto body = request_body(prompt, n, 0.8f, 21, true);
  body["model"] = "kimi-linear-1t";
  std::thread client{[&] { s = stream(http, body, events); }};
  std::string victim;
  const bool busy = t::eventually(
      [&] {
        for (int d = 0; d < 2; ++d) {
          auto m = t::http_get(p[6 + 3 * d], "/metrics");
          if (m && metric_sum(*m, "prfaas_worker_tokens_total") >= 20) {
            victim = "d" + std::to_string(d);
            return true;
          }
        }
        return false;
      },
      30s, 20ms);
  if (busy)
    nodes.at(victim)->signal(SIGKILL);
  client.join();
  INFO(logs());
  INFO("stream status " << s.status << ", " << s.tokens.size() << " tokens; d0 metrics:\n"
                        << t::http_get(p[6], "/metrics").value_or("?"));
  REQUIRE(busy);
  REQUIRE(s.status == 200);
  CHECK(s.finish_reason == "length");
  CHECK(s.tokens.size() == n);
  CHECK(s.tokens == expected); // the same tokens as one engine: no repeats, no gaps
  auto m = t::http_get(p[2], "/metrics");
  REQUIRE(m);
  CHECK(metric_sum(*m, "prfaas_gateway_decode_resumes_total") == 1);
  // The survivor served the rest.
  const std::string survivor = victim == "d0" ? "d1" : "d0";
  auto sm = t::http_get(p[survivor == "d0" ? 6 : 9], "/metrics");
  REQUIRE(sm);
  CHECK(metric_sum(*sm, "prfaas_worker_tokens_total") > 0);
  for (auto& [name, node] : nodes)
    if (name != victim)
      node->signal(SIGTERM);
  for (auto& [name, node] : nodes)
    if (name != victim)
      CHECK(node->wait(20s) == 0);
}

TEST_CASE("cache move: a prompt whose cached prefix sits in the PrfaaS cluster prefills locally "
          "after pulling that prefix, with a single engine's tokens",
          "[serving][e2e]") {
  local_deployment d{256};
  const int http = d.http();
  const auto lp = long_prompt();
  // The long prompt is offloaded: its blocks end up in prfaas-0's prefix cache, and the
  // KV directory hears of them.
  auto first = complete(http, request_body(lp, 8, 0.0f, 0, false));
  INFO(first.body.dump() << "\n" << d.output());
  REQUIRE(first.status == 200);
  REQUIRE(first.route == "prfaas");
  REQUIRE(t::eventually(
      [&] {
        auto m = t::http_get(d.ports.at(9101), "/metrics");
        return m && metric_sum(*m, "prfaas_kv_directory_entries") > 0;
      },
      10s, 20ms));
  // The same prompt and a short question: uncached in the PD cluster it is far above the
  // threshold, but with the PrfaaS cluster's cache only the question is left — within
  // the threshold. Bandwidth is abundant (an idle link), so the cache comes to the PD
  // prefill worker and the question is computed there.
  const auto q = lp + " So what does that mean for me?";
  const size_t full_blocks = (lp.size() / 64) * 64;
  auto expected = single_engine(q, 16, 0.8f, 3);
  auto c = complete(http, request_body(q, 16, 0.8f, 3, false));
  INFO(c.body.dump() << "\n" << d.output());
  REQUIRE(c.status == 200);
  CHECK(c.route == "pd");
  CHECK(c.body["prfaas"]["cached_tokens"] == full_blocks);
  CHECK(c.tokens == expected);
  auto m = t::http_get(d.ports.at(9101), "/metrics");
  REQUIRE(m);
  CHECK(t::metric(*m, "prfaas_prefill_cache_moves_total", {"outcome=\"moved\""}) == 1);
  CHECK(t::metric(*m, "prfaas_prefill_cache_moved_blocks_total") == full_blocks / 64);
}

TEST_CASE("a KV transfer that cannot reach its decode node, with no other prefill worker, goes "
          "from the same prefill worker to the other decode node",
          "[serving][e2e][faults]") {
  // The gateway node's data plane loses every frame to d0 while the control plane
  // stays up: a request reserved on d0 fails its transfer; the only prefill worker is
  // the one that failed, so the request moves to d1 (before: 503, no route).
  t::temp_dir dir;
  const auto p = t::free_ports(10);
  auto cfg =
      dir.file("switch.yaml", resume_deployment(p) + "data_plane: { chunk_timeout: 100ms, "
                                                     "transfer_timeout: 1s, faults: { seed: 5, "
                                                     "blackhole_peers: [\"gw->d0\"] } }\n");
  node_processes procs{dir.path(), cfg, {"d0", "d1", "gw"}};
  auto& nodes = procs.nodes;
  auto logs = [&] { return procs.logs(); };
  REQUIRE(serving(p[3]));
  REQUIRE(peers_up(p[2], {"d0", "d1"}));
  REQUIRE(t::workers_ready(p[2], 1, 2));
  const std::string prompt = "Take the other road to the decode worker.";
  const size_t n = 8;
  const auto expected = single_profile_engine(prompt, n, 0.8f, 23);
  auto body = request_body(prompt, n, 0.8f, 23, false);
  body["model"] = "kimi-linear-1t";
  for (int i = 0; i < 3; ++i) {
    auto c = complete(p[3], body);
    INFO("request " << i << ": " << c.body.dump() << "\n" << logs());
    REQUIRE(c.status == 200);
    CHECK(c.tokens == expected);
  }
  auto gm = t::http_get(p[2], "/metrics");
  auto d0 = t::http_get(p[6], "/metrics");
  REQUIRE(gm);
  REQUIRE(d0);
  CHECK(metric_sum(*gm, "prfaas_gateway_decode_switches_total") >= 1); // d0 was chosen
  CHECK(metric_sum(*d0, "prfaas_worker_tokens_total") == 0);           // and never decoded
  for (auto& [_, node] : nodes)
    node->signal(SIGTERM);
  for (auto& [_, node] : nodes)
    CHECK(node->wait(20s) == 0);
}
