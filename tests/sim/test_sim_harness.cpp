// `prfaas-sim run` as a function of its inputs: the same seed gives byte-identical
// results, another seed gives other results, and a run's figures hang together
// (every request ends, routes split at the threshold, the link carried the offloads).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <unistd.h>

#include "run_command.hpp"

namespace {

const char* deployment = R"(
deployment: harness
failure_detector: { interval: 1s, misses: 10, suspect_misses: 5 }
transport: { retry_interval: 500ms, request_timeout: 10s }
model:
  engine: profile
  profile: PROFILES/kimi-linear-1t-h20.yaml
  kv_scale: 0.0001
  block_tokens: 512
  max_context: 140000
clusters:
  prfaas: { kind: prefill-only }
  pd: { kind: pd }
links:
  - { between: [prfaas, pd], rate: 100gbit }
nodes:
  - { name: gw0, cluster: pd, control: "tcp://127.0.0.1:7001", data: "tcp://127.0.0.1:8001",
      actors: [ { type: gateway, name: gw, request_timeout: 3600s, max_inflight: 100000 },
                { type: scheduler, name: sched, policy: threshold, threshold: 19400 } ] }
  - { name: p0, cluster: prfaas, control: "tcp://127.0.0.1:7002", data: "tcp://127.0.0.1:8002",
      actors: [ { type: prefill_worker, name: pf, cache_blocks: 0, max_queue: 100000,
                  profile: PROFILES/kimi-linear-1t-h200.yaml } ] }
  - { name: pdp0, cluster: pd, control: "tcp://127.0.0.1:7003", data: "tcp://127.0.0.1:8003",
      actors: [ { type: prefill_worker, name: pf, cache_blocks: 0, max_queue: 100000 } ] }
  - { name: d0, cluster: pd, control: "tcp://127.0.0.1:7004", data: "tcp://127.0.0.1:8004",
      actors: [ { type: decode_worker, name: dec, max_batch: 20, max_queue: 100000 } ] }
)";

/// The deployment in a file (profiles by absolute path: tests run from the source root).
std::string write_deployment() {
  std::string text = deployment;
  const std::string profiles = std::string{PRFAAS_SOURCE_DIR} + "/configs/profiles";
  for (size_t at; (at = text.find("PROFILES")) != std::string::npos;)
    text.replace(at, 8, profiles);
  char name[] = "/tmp/prfaas-sim-harness-XXXXXX";
  int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream{name} << text;
  return name;
}

prfaas::sim::run_options options(const std::string& file, uint64_t seed) {
  prfaas::sim::run_options o;
  o.config = file;
  o.seed = seed;
  o.rate = 1.5;
  o.requests = 24;
  o.output_tokens = 48;
  o.sample_interval_s = 2;
  return o;
}

} // namespace

TEST_CASE("the same seed gives byte-identical results and another seed different ones") {
  auto file = write_deployment();
  auto a = prfaas::sim::simulate(options(file, 1)).dump();
  auto b = prfaas::sim::simulate(options(file, 1)).dump();
  auto c = prfaas::sim::simulate(options(file, 2)).dump();
  std::remove(file.c_str());
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("a run ends every request and routes by the threshold") {
  auto file = write_deployment();
  std::vector<double> ttft;
  auto r = prfaas::sim::simulate(options(file, 3), &ttft);
  std::remove(file.c_str());
  const auto& s = r["summary"];
  CHECK(s["requests"]["total"] == 24);
  CHECK(s["requests"]["ok"] == 24);
  CHECK(s["unfinished"] == 0);
  CHECK(ttft.size() == 24);
  const int prfaas = s["routes"].value("prfaas", 0), pd = s["routes"].value("pd", 0);
  CHECK(prfaas + pd == 24);
  CHECK(prfaas > 0);
  CHECK(pd > 0);
  // What the offloaded requests shipped crossed the link: each offload moves at least
  // S_kv(19.4K) ≈ 0.49 GB of KVCache, and the sampled series accounts for it.
  const double bytes = r["links"]["prfaas->pd"]["bytes_delivered"].get<double>();
  CHECK(bytes >= prfaas * 0.45e9);
  double sampled = 0;
  const auto& ts = r["timeseries"];
  for (size_t i = 0; i < ts["t_s"].size(); ++i) {
    const double dt = ts["t_s"][i].get<double>() - (i ? ts["t_s"][i - 1].get<double>() : 0.0);
    sampled += ts["links"]["prfaas->pd"]["gbps"][i].get<double>() * dt * 1e9 / 8;
  }
  CHECK(sampled <= bytes * 1.000001);
  CHECK(sampled >= bytes * 0.5);
}

TEST_CASE("online re-planning follows the lengths: down to the short law's t, up after a shift") {
  // The committed deployment of docs/simulation.md's shifting workload, shortened: 100 s
  // of mu = 8.0 (the planner: t = 1,015, 1 prefill / 7 decode), then 100 s of mu = 9.9
  // (t = 19,400, 3 / 5). It starts at the second plan.
  prfaas::sim::run_options o;
  o.config = std::string{PRFAAS_SOURCE_DIR} + "/configs/sim/replan-shift.yaml";
  o.seed = 1;
  o.rate = 2.5;
  o.duration_s = 200;
  o.input_mu = 8.0;
  o.input_phases = {"100:9.9"};
  o.output_tokens = 256;
  auto r = prfaas::sim::simulate(o);
  CHECK(r["summary"]["requests"]["ok"] == r["summary"]["issued"]);
  // Re-planning and conversions are driven by virtual time: the same seed, the same run.
  CHECK(prfaas::sim::simulate(o).dump() == r.dump());
  const auto& ts = r["timeseries"];
  double short_max = 0, long_min = 1e18;
  uint32_t prefill_target_end = 0;
  for (size_t i = 0; i < ts["t_s"].size(); ++i) {
    const double t = ts["t_s"][i], planned = ts["planned_threshold_tokens"][i];
    if (t >= 60 && t < 100)
      short_max = std::max(short_max, planned);
    if (t >= 170 && t <= 200) {
      long_min = std::min(long_min, planned);
      prefill_target_end = ts["planned_pd_prefill_workers"][i];
    }
  }
  INFO("planned t: at most " << short_max << " late in the short phase, at least " << long_min
                             << " late in the long one");
  CHECK(short_max < 19400.0 / 4); // moved well down from where it started
  CHECK(long_min > 19400.0 * 0.6);
  CHECK(prefill_target_end >= 2);
  // Every engine here runs exactly at its profile, so each side's speed scale, from the
  // workers' reported prefills through the scheduler, is 1 once a plan was made; paces
  // (tokens/s) of different prompts compared had it swing between 0.68 and 1.33.
  size_t planned_samples = 0;
  for (const char* side : {"prfaas", "pd"})
    for (size_t i = 0; i < ts["t_s"].size(); ++i) {
      const double s = ts["prefill_speed_scale"][side][i];
      if (s == 0)
        continue; // no plan yet
      ++planned_samples;
      INFO(side << " at " << ts["t_s"][i].get<double>() << " s");
      CHECK(s == Approx(1.0).epsilon(1e-6));
    }
  CHECK(planned_samples > 60);
}
