// Fencing end to end, with real processes: a PrfaaS prefill node frozen (SIGSTOP)
// while it computes an offloaded prompt is declared down, its request fails over to
// the local prefill worker, and when it wakes (SIGCONT, same incarnation) it learns it
// was declared down and drops the order instead of delivering its stale KV.

#include <catch2/catch.hpp>

#include <csignal>
#include <thread>

#include "e2e_support.hpp"

namespace {

using namespace prfaas::test::e2e;

/// A PD node (gateway, scheduler, local prefill, decode) and a PrfaaS prefill node, each
/// its own process; profile engines that take their profiled time, so a long prompt's
/// prefill lasts seconds (long enough to freeze its node in the middle).
std::string fencing_deployment(const std::vector<uint16_t>& p) {
  auto port = [&](size_t i) { return std::to_string(p.at(i)); };
  return R"(
deployment: fencing
log_level: info
model:
  name: kimi-linear-1t
  engine: profile
  profile: )" +
         src + R"(/configs/profiles/kimi-linear-1t-h20.yaml
  kv_scale: 0.0009765625
  block_tokens: 512
  max_context: 131072
clusters:
  prfaas: { kind: prefill-only }
  pd: { kind: pd }
links:
  - { between: [prfaas, pd], rate: 1gbit, connections: 2 }
failure_detector: { interval: 200ms, misses: 5, suspect_misses: 2 }
nodes:
  - name: pf
    cluster: prfaas
    control: tcp://127.0.0.1:)" +
         port(0) + R"(
    data: tcp://127.0.0.1:)" +
         port(1) + R"(
    admin: 127.0.0.1:)" +
         port(2) + R"(
    actors:
      - { type: prefill_worker, name: p0, cache_blocks: 0 }
  - name: pd
    cluster: pd
    control: tcp://127.0.0.1:)" +
         port(3) + R"(
    data: tcp://127.0.0.1:)" +
         port(4) + R"(
    admin: 127.0.0.1:)" +
         port(5) + R"(
    actors:
      - { type: scheduler, name: sched, policy: threshold, threshold: 1024 }
      - { type: prefill_worker, name: pdp, cache_blocks: 0 }
      - { type: decode_worker, name: dec, max_batch: 8 }
      - { type: gateway, name: gw, listen: 127.0.0.1:)" +
         port(6) + R"( }
)";
}

} // namespace

TEST_CASE("a prefill node frozen mid-prefill learns it was declared down and delivers nothing "
          "stale",
          "[serving][e2e][faults]") {
  t::temp_dir dir;
  const auto p = t::free_ports(7);
  auto cfg = dir.file("fencing.yaml", fencing_deployment(p));
  std::map<std::string, std::unique_ptr<t::child_process>> nodes;
  for (const char* n : {"pf", "pd"})
    nodes[n] = std::make_unique<t::child_process>(
        t::command{.argv = {bin + "/prfaas-node", "--config", cfg.string(), "--node", n},
                   .out_file = dir.path() / (std::string{n} + ".log")});
  auto logs = [&] { return nodes.at("pf")->output() + "\n" + nodes.at("pd")->output(); };
  const int http = p[6];
  REQUIRE(serving(http));
  REQUIRE(peers_up(p[5], {"pf"}));
  REQUIRE(t::workers_ready(p[5], 2, 1));

  // About 2.5 s of prefill on the profiled H20: offloaded (above the threshold).
  std::string prompt;
  while (prompt.size() < 16000)
    prompt += "Fencing: a node that wakes after its peers gave up on it must not deliver. ";
  const size_t n = 8;
  const auto expected = single_profile_engine(prompt, n, 0.8f, 5);
  auto body = request_body(prompt, n, 0.8f, 5, false);
  body["model"] = "kimi-linear-1t";
  completion c;
  std::thread client{[&] { c = complete(http, body); }};
  // Freeze pf once it computes the order, for 2.5 s (the detection bound is 1 s).
  const bool computing = t::eventually(
      [&] {
        auto m = t::http_get(p[2], "/metrics");
        return m && metric_sum(*m, "prfaas_worker_active") >= 1;
      },
      30s, 10ms);
  if (computing) {
    nodes.at("pf")->signal(SIGSTOP);
    std::this_thread::sleep_for(2500ms);
    nodes.at("pf")->signal(SIGCONT);
  }
  client.join();
  INFO(logs());
  REQUIRE(computing);
  // The request failed over to the local prefill worker: one answer, the right tokens.
  REQUIRE(c.status == 200);
  CHECK(c.tokens == expected);
  CHECK(c.body["prfaas"]["prefill_node"] == "pd");
  CHECK(c.body["prfaas"]["attempts"] == 2);
  // pf woke, learned it had been declared down, and ended the order without delivering
  // it. Two things race on waking, under a millisecond apart in CI logs: the fence
  // notice (the order is dropped as stale, counted and logged) and the end of its
  // transfer (cancelled by pd, which failed the request over, or timed out): then the
  // order fails with its transfer before pf can know it was stale. Either way nothing
  // of it may be delivered (judged below from the transfers and pd's KV).
  CHECK(t::eventually(
      [&] { return nodes.at("pf")->output().find("fenced_by peer=pd") != std::string::npos; }, 10s,
      50ms));
  uint64_t stale = 0;
  const bool ended = t::eventually(
      [&] {
        auto m = t::http_get(p[2], "/metrics");
        stale = m ? static_cast<uint64_t>(metric_sum(*m, "prfaas_prefill_stale_orders_total")) : 0;
        return stale >= 1 ||
               nodes.at("pf")->output().find("data_transfer_failed") != std::string::npos;
      },
      20s, 50ms);
  CHECK(ended);
  if (stale >= 1)
    CHECK(nodes.at("pf")->output().find("prefill_order_dropped worker=p0") != std::string::npos);
  // ... and delivered nothing of it: no transfer of pf ended delivered, pd took no KV
  // from it (whatever pf sent before it learned was dropped as fenced or cancelled).
  auto pf_metrics = t::http_get(p[2], "/metrics");
  REQUIRE(pf_metrics);
  CHECK(metric_sum_with(*pf_metrics, "prfaas_data_transfers_total", "outcome=\"ok\"") == 0);
  // pf is up at pd again once it acknowledged, and serves the next offloaded prompt.
  REQUIRE(peers_up(p[5], {"pf"}));
  auto again = complete(http, body);
  REQUIRE(again.status == 200);
  CHECK(again.tokens == expected);
  CHECK(again.body["prfaas"]["prefill_node"] == "pf");
  // Its transfer is the only one of pf's that ended delivered.
  pf_metrics = t::http_get(p[2], "/metrics");
  REQUIRE(pf_metrics);
  CHECK(metric_sum_with(*pf_metrics, "prfaas_data_transfers_total", "outcome=\"ok\"") == 1);
  for (auto& [name, node] : nodes)
    node->signal(SIGTERM);
  for (auto& [name, node] : nodes)
    CHECK(node->wait(20s) == 0);
}
