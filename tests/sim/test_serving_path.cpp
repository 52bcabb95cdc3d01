// The serving path end to end in virtual time: a request enters the real gateway
// (in-process ingress), the real scheduler routes it, a real prefill worker runs the
// profile engine on a manual clock and streams its KVCache layer by layer over the
// simulated data plane (shared link capacity, latency), the real decode worker
// imports it and decodes with continuous batching, and tokens come back through the
// gateway. Timings are checked against the profile's model — they are virtual, so
// exact up to the network latencies — and tokens against a single-engine run.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/engine_setup.hpp"
#include "gateway/sim_ingress.hpp"
#include "prfaas/engine/profile_engine.hpp"
#include "prfaas/runtime/metrics.hpp"
#include "prfaas/runtime/sim_data_plane.hpp"
#include "support/sim_fixture.hpp"

using namespace std::chrono_literals;
using prfaas::test::sim_fixture;
namespace sv = prfaas::serving;

namespace {

const std::string yaml = R"(
deployment: sim-serving
failure_detector: { interval: 1s, misses: 10, suspect_misses: 5 }
transport: { retry_interval: 200ms, request_timeout: 5s }
model:
  name: kimi-sim
  engine: profile
  profile: configs/profiles/kimi-linear-1t-h20.yaml
  kv_scale: 0.001
  block_tokens: 512
clusters:
  prfaas: { kind: prefill-only }
  pd: { kind: pd }
links:
  - { between: [prfaas, pd], rate: 10gbit }
nodes:
  - name: p0
    cluster: prfaas
    control: "tcp://127.0.0.1:7100"
    data: "tcp://127.0.0.1:7200"
    actors:
      - { type: prefill_worker, name: pf, cache_blocks: 0,
          profile: configs/profiles/kimi-linear-1t-h200.yaml }
  - name: d0
    cluster: pd
    control: "tcp://127.0.0.1:7101"
    data: "tcp://127.0.0.1:7201"
    actors:
      - { type: gateway, name: gw, listen: "127.0.0.1:0", request_timeout: 600s }
      - { type: scheduler, name: sched, threshold: 4096 }
      - { type: prefill_worker, name: pdp, cache_blocks: 0 }
      - { type: decode_worker, name: dec, max_batch: 4 }
)";

struct client_request {
  std::shared_ptr<sv::accepted_request> a;
  bool ended = false;
};

/// Hands a request to the gateway as a simulated client would.
std::shared_ptr<client_request> submit(sim_fixture& f, const std::string& id,
                                       std::vector<sv::token> prompt, uint32_t max_tokens) {
  auto c = std::make_shared<client_request>();
  c->a = std::make_shared<sv::accepted_request>();
  c->a->id = id;
  c->a->req.prompt = std::move(prompt);
  c->a->req.max_tokens = max_tokens;
  c->a->req.ignore_eos = true;
  c->a->req.seed = 7;
  c->a->channel = std::make_shared<sv::stream_channel>();
  c->a->channel->on_end([c] { c->ended = true; });
  c->a->accepted = f.now();
  auto gw = f.at("d0").context().msgr().lookup("gw");
  REQUIRE(gw);
  caf::anon_send(gw, sv::sim_submit{c->a});
  f.run();
  return c;
}

/// Waits `wait` of virtual time; the request must have ended, without an error, with
/// its final update (tokens and summary).
sv::stream_update finished_update(sim_fixture& f, const client_request& c,
                                  std::chrono::nanoseconds wait) {
  f.advance(wait);
  REQUIRE(c.ended);
  auto u = c.a->channel->next(0ms);
  REQUIRE(u);
  REQUIRE_FALSE(u->error);
  REQUIRE(u->finished);
  return *u;
}

std::vector<sv::token> prompt_of(uint32_t n, uint32_t salt) {
  std::vector<sv::token> p(n);
  for (uint32_t i = 0; i < n; ++i)
    p[i] = static_cast<sv::token>((i * 2654435761u + salt) % 50000);
  return p;
}

/// What one engine alone makes of the prompt: the first token, then max_tokens − 1 steps.
std::vector<sv::token> reference_tokens(const std::vector<sv::token>& prompt, uint32_t max_tokens) {
  auto prof = prfaas::engine::load_profile("configs/profiles/kimi-linear-1t-h20.yaml");
  REQUIRE(prof);
  prfaas::engine::manual_clock clk;
  prfaas::engine::profile_engine_config pc;
  pc.kv_scale = 0.001;
  auto e = prfaas::engine::profile_engine::create(std::move(prof.value()), pc, clk);
  REQUIRE(e);
  prfaas::engine::prefill_request req;
  req.id = 1;
  req.prompt = prompt;
  req.sampling = {1.0f, 7};
  auto r = (*e)->prefill(req, {});
  REQUIRE(r);
  std::vector<sv::token> out{r->first_token};
  std::vector<prfaas::engine::seq_id> batch{1};
  while (out.size() < max_tokens) {
    auto t = (*e)->decode_step(batch);
    REQUIRE(t);
    out.push_back(t->front());
  }
  return out;
}

double h200_prefill_s(uint32_t tokens) {
  auto prof = prfaas::engine::load_profile("configs/profiles/kimi-linear-1t-h200.yaml");
  REQUIRE(prof);
  return prof->prefill_seconds(tokens);
}

} // namespace

TEST_CASE("a long prompt is prefilled on the PrfaaS cluster and decoded in the PD cluster in "
          "virtual time") {
  sim_fixture f{yaml};
  f.start("p0");
  f.start("d0");
  f.advance(2s);
  const uint32_t n = 20000, max_tokens = 64;
  auto prompt = prompt_of(n, 1);
  const auto t0 = f.now();
  auto c = submit(f, "long-1", prompt, max_tokens);
  const auto u = finished_update(f, *c, 30s);
  const auto& s = *u.finished;
  CHECK(s.prfaas["route"] == "prfaas");
  CHECK(s.prfaas["prefill_node"] == "p0");
  CHECK(s.completion_tokens == max_tokens);
  CHECK(u.out.tokens == reference_tokens(prompt, max_tokens));

  // TTFT: the H200 prefill plus what the link could not hide (the last layer's chunk
  // and the meta) plus a few 1 ms control-plane hops — all virtual, so exact.
  const double prefill_s = h200_prefill_s(n);
  const double ttft_s = s.prfaas["ttft_ms"].get<double>() / 1e3;
  CHECK(ttft_s >= prefill_s);
  CHECK(ttft_s < prefill_s + 0.05);
  CHECK(s.prfaas["engine_prefill_ms"].get<double>() == Approx(prefill_s * 1e3).epsilon(1e-6));
  // Decode: one step per token after the first, each the profile's step time at batch 1.
  const double tpot_s = (s.prfaas["e2e_ms"].get<double>() - s.prfaas["ttft_ms"].get<double>()) /
                        1e3 / (max_tokens - 1);
  auto h20 = prfaas::engine::load_profile("configs/profiles/kimi-linear-1t-h20.yaml");
  CHECK(tpot_s >= h20->decode_seconds(1, n));
  CHECK(tpot_s < h20->decode_seconds(1, n + max_tokens) + 0.002);
  CHECK(f.now() - t0 >= 30s);

  // The KVCache crossed the link at full size (the engine moved 1/1000 of it).
  auto fabric = f.net().data_fabric();
  auto across = fabric->totals("prfaas", "pd");
  CHECK(across.bytes_delivered == Approx(h20->kv_bytes(n)).epsilon(0.01));
  CHECK(across.open == 0);
}

TEST_CASE(
    "short prompts stay in the PD cluster and concurrent requests keep their own tokens in order") {
  sim_fixture f{yaml};
  f.start("p0");
  f.start("d0");
  f.advance(2s);
  std::vector<std::shared_ptr<client_request>> reqs;
  std::vector<std::vector<sv::token>> prompts;
  for (uint32_t i = 0; i < 6; ++i) {
    prompts.push_back(prompt_of(i % 2 ? 1000 + 100 * i : 8000 + 500 * i, 10 + i));
    reqs.push_back(submit(f, "r" + std::to_string(i), prompts.back(), 32 + i));
  }
  f.advance(60s);
  for (uint32_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    REQUIRE(reqs[i]->ended);
    auto u = reqs[i]->a->channel->next(0ms);
    REQUIRE(u);
    REQUIRE(u->finished);
    CHECK(u->finished->prfaas["route"] == (i % 2 ? "pd" : "prfaas"));
    CHECK(u->out.tokens == reference_tokens(prompts[i], 32 + i));
  }
}

namespace {

/// One histogram series of a node's Prometheus text: its cumulative buckets (le → count),
/// sum and count. Selected by name and label substrings, all present (e.g. `route="pd"`).
struct histogram_sample {
  std::vector<std::pair<double, double>> buckets;
  double sum = -1, count = -1;
};

histogram_sample histogram_of(sim_fixture& f, const std::string& node, const std::string& name,
                              const std::vector<std::string>& labels) {
  histogram_sample h;
  std::istringstream text{f.at(node).node_metrics()->serialize()};
  auto value = [](const std::string& line) { return std::stod(line.substr(line.rfind(' ') + 1)); };
  for (std::string line; std::getline(text, line);) {
    if (!std::all_of(labels.begin(), labels.end(),
                     [&](auto& l) { return line.find(l) != std::string::npos; }))
      continue;
    if (line.rfind(name + "_bucket{", 0) == 0) {
      // `le` is a label of its own (`role="..."` ends in le=" too).
      auto at = line.find("{le=\"");
      if (at == std::string::npos)
        at = line.find(",le=\"");
      REQUIRE(at != std::string::npos);
      at += 5;
      const auto le = line.substr(at, line.find('"', at) - at);
      h.buckets.emplace_back(le == "+Inf" ? HUGE_VAL : std::stod(le), value(line));
    } else if (line.rfind(name + "_sum{", 0) == 0) {
      h.sum = value(line);
    } else if (line.rfind(name + "_count{", 0) == 0) {
      h.count = value(line);
    }
  }
  return h;
}

/// The one observation of `h` lies in the bucket whose upper bound is the first ≥ `v`:
/// every bucket below it counts 0, it and all above count 1.
void check_single_observation(const histogram_sample& h, double v) {
  REQUIRE(h.buckets.size() > 2);
  CHECK(h.count == 1);
  CHECK(h.sum == Approx(v).epsilon(1e-9));
  for (auto& [le, n] : h.buckets) {
    INFO("bucket le=" << le << " value " << v);
    CHECK(n == (v <= le ? 1 : 0));
  }
}

} // namespace

TEST_CASE("the gateway's latency and token histograms agree with the figures each response "
          "reports, by route") {
  sim_fixture f{yaml};
  f.start("p0");
  f.start("d0");
  f.advance(2s);
  auto long_req = submit(f, "hist-long", prompt_of(20000, 3), 16);
  auto long_done = finished_update(f, *long_req, 30s);
  auto short_req = submit(f, "hist-short", prompt_of(1000, 4), 8);
  auto short_done = finished_update(f, *short_req, 30s);
  for (auto* u : {&long_done, &short_done}) {
    const auto& p = u->finished->prfaas;
    const std::string route = p["route"];
    INFO("route " << route);
    const std::string sel = "route=\"" + route + "\"";
    const double ttft = p["ttft_ms"].get<double>() / 1e3, e2e = p["e2e_ms"].get<double>() / 1e3;
    CHECK(ttft > 0);
    check_single_observation(histogram_of(f, "d0", "prfaas_gateway_ttft_seconds", {sel}), ttft);
    check_single_observation(histogram_of(f, "d0", "prfaas_gateway_e2e_seconds", {sel}), e2e);
    check_single_observation(
        histogram_of(f, "d0", "prfaas_gateway_time_per_output_token_seconds", {sel}),
        (e2e - ttft) / (u->finished->completion_tokens - 1));
    check_single_observation(histogram_of(f, "d0", "prfaas_gateway_prefill_queue_seconds", {sel}),
                             p["prefill_queue_ms"].get<double>() / 1e3);
    check_single_observation(histogram_of(f, "d0", "prfaas_gateway_transfer_tail_seconds", {sel}),
                             p["transfer_wire_ms"].get<double>() / 1e3);
    check_single_observation(histogram_of(f, "d0", "prfaas_gateway_prompt_tokens", {sel}),
                             u->finished->prompt_tokens);
    check_single_observation(histogram_of(f, "d0", "prfaas_gateway_output_tokens", {sel}),
                             u->finished->completion_tokens);
    check_single_observation(histogram_of(f, "d0", "prfaas_gateway_cached_tokens", {sel}),
                             u->finished->cached_tokens);
    CHECK(histogram_of(f, "d0", "prfaas_gateway_e2e_seconds", {sel}).buckets.size() ==
          prfaas::latency_buckets().size() + 1);
  }
  CHECK(long_done.finished->prfaas["route"] == "prfaas");
  CHECK(short_done.finished->prfaas["route"] == "pd");
  CHECK(long_done.finished->prompt_tokens == 20000);
  // The workers' own histograms: one prefill each side, its engine time as reported,
  // every prompt token computed (no prefix cache here); one decode step per token after
  // the first, each over a batch of one (the requests ran one after the other).
  for (auto [node, worker, u] :
       {std::tuple{"p0", "pf", &long_done}, std::tuple{"d0", "pdp", &short_done}}) {
    INFO("prefill worker " << worker);
    const std::string sel = std::string("worker=\"") + worker + "\"";
    check_single_observation(histogram_of(f, node, "prfaas_worker_prefill_seconds", {sel}),
                             u->finished->prfaas["engine_prefill_ms"].get<double>() / 1e3);
    check_single_observation(
        histogram_of(f, node, "prfaas_worker_prefill_tokens", {sel, "kind=\"computed\""}),
        u->finished->prompt_tokens);
    check_single_observation(
        histogram_of(f, node, "prfaas_worker_prefill_tokens", {sel, "kind=\"reused\""}), 0);
  }
  const auto batch = histogram_of(f, "d0", "prfaas_worker_decode_batch_size", {"worker=\"dec\""});
  const auto step = histogram_of(f, "d0", "prfaas_worker_decode_step_seconds", {"worker=\"dec\""});
  CHECK(batch.count == (16 - 1) + (8 - 1));
  CHECK(batch.sum == batch.count);
  CHECK(step.count == batch.count);
  CHECK(step.sum > 0);

  // The e2e series carries the outcome; nothing failed.
  CHECK(histogram_of(f, "d0", "prfaas_gateway_e2e_seconds", {"outcome=\"ok\""}).buckets.size() > 0);
  CHECK(histogram_of(f, "d0", "prfaas_gateway_e2e_seconds", {"outcome=\"deadline\""}).count == -1);
}

TEST_CASE("the same requests give the same virtual timings twice") {
  auto run = [] {
    sim_fixture f{yaml};
    f.start("p0");
    f.start("d0");
    f.advance(2s);
    std::vector<std::shared_ptr<client_request>> reqs;
    for (uint32_t i = 0; i < 5; ++i)
      reqs.push_back(submit(f, "r" + std::to_string(i), prompt_of(3000 + 3000 * i, i), 16));
    f.advance(60s);
    std::vector<std::string> out;
    for (auto& r : reqs) {
      auto u = r->a->channel->next(0ms);
      REQUIRE(u);
      REQUIRE(u->finished);
      out.push_back(u->finished->prfaas.dump());
    }
    return out;
  };
  CHECK(run() == run());
}

TEST_CASE("a link that collapses mid-transfer times the transfer out and the gateway fails over to "
          "local prefill") {
  sim_fixture f{yaml};
  f.start("p0");
  f.start("d0");
  f.advance(2s);
  auto prompt = prompt_of(10000, 3);
  auto c = submit(f, "cut", prompt, 8);
  f.advance(100ms); // prefill running on p0, chunks streaming
  f.net().data_fabric()->set_link_rate("prfaas", "pd", 1e3); // a trickle: the transfer stalls
  f.advance(120s);
  REQUIRE(c->ended);
  auto u = c->a->channel->next(0ms);
  REQUIRE(u);
  REQUIRE(u->finished);
  CHECK(u->finished->prfaas["attempts"] == 2);
  CHECK(u->finished->prfaas["prefill_node"] == "d0");
  CHECK(u->out.tokens == reference_tokens(prompt, 8));
}

TEST_CASE("KV chunks sent eight layers per message arrive whole: the same tokens and bytes in "
          "fewer messages") {
  struct outcome {
    std::vector<sv::token> tokens;
    double bytes = 0, ttft_s = 0;
    uint64_t messages = 0;
  };
  const uint32_t n = 20000, max_tokens = 16;
  const auto prompt = prompt_of(n, 5);
  auto run = [&](const std::string& deployment) {
    sim_fixture f{deployment};
    f.start("p0");
    f.start("d0");
    f.advance(2s);
    auto c = submit(f, "grouped", prompt, max_tokens);
    const auto u = finished_update(f, *c, 30s);
    CHECK(u.finished->prfaas["route"] == "prfaas");
    auto t = f.net().data_fabric()->totals("prfaas", "pd");
    CHECK(t.open == 0);
    return outcome{u.out.tokens, t.bytes_delivered,
                   u.finished->prfaas["ttft_ms"].get<double>() / 1e3, t.messages};
  };
  auto grouped_yaml = yaml;
  const std::string pf = "name: pf, cache_blocks: 0,";
  grouped_yaml.replace(grouped_yaml.find(pf), pf.size(), pf + " layers_per_push: 8,");
  const auto one = run(yaml);
  const auto grouped = run(grouped_yaml);
  // A message never grows past the data plane's max_chunk_bytes to fill its group:
  // below any chunk's size, every chunk goes alone again.
  auto capped_yaml = grouped_yaml;
  capped_yaml.replace(capped_yaml.find("model:"), 6, "data_plane: { max_chunk_bytes: 1 }\nmodel:");
  const auto capped = run(capped_yaml);

  CHECK(one.tokens == reference_tokens(prompt, max_tokens));
  CHECK(grouped.tokens == one.tokens);
  CHECK(grouped.bytes == Approx(one.bytes).epsilon(1e-9));
  // 64 layers and the sequence record, then the transfer's TransferMeta: 66 messages
  // layer by layer; 8 groups of 8 layers, the record, the TransferMeta: 10.
  CHECK(one.messages == 66);
  CHECK(grouped.messages == 10);
  CHECK(capped.messages == 66);
  CHECK(capped.tokens == one.tokens);
  // Larger messages leave the link less of the prefill to hide behind.
  CHECK(grouped.ttft_s >= one.ttft_s);
  CHECK(one.ttft_s >= h200_prefill_s(n));

  grouped_yaml.replace(grouped_yaml.find("layers_per_push: 8"), 18, "layers_per_push: 0");
  try {
    sim_fixture bad{grouped_yaml};
    FAIL("layers_per_push: 0 was accepted");
  } catch (const prfaas::config_error& e) {
    CHECK(e.path() == "nodes[0].actors[0].layers_per_push");
    CHECK_THAT(e.reason(), Catch::Contains("between 1 and 4096"));
  }
}
