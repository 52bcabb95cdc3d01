#include "run_command.hpp"

#include <fstream>
#include <iostream>
#include <map>
#include <random>

#include <caf/all.hpp>

#include "common/progress_line.hpp"
#include "gateway/sim_ingress.hpp"
#include "loadgen/results.hpp"
#include "loadgen/trace.hpp"
#include "loadgen/workload.hpp"
#include "prfaas/runtime/config.hpp"
#include "cluster_figures.hpp"
#include "run_inputs.hpp"
#include "sim_request.hpp"
#include "prfaas/sim/sim_world.hpp"

namespace prfaas::sim {

namespace {

using json = nlohmann::json;
namespace sv = prfaas::serving;
namespace lg = prfaas::loadgen;

/// The gauges one sample reads, resolved once.
struct worker_gauges {
  std::string cluster;
  bool prfaas = false;
  bool decode = false;
  prometheus::Gauge* queue = nullptr;
  prometheus::Gauge* active = nullptr;
};

struct series {
  std::vector<double> t_s, in_flight, completed, prfaas_queue, prfaas_active, pdp_queue, pdp_active,
      decode_active, decode_waiting, threshold, scarce, planned, pd_prefill, planned_pd_prefill,
      link_up, prfaas_speed_scale, pd_speed_scale;
  /// With several schedulers (one per PD cluster): each one's planned t, by cluster.
  std::map<std::string, std::vector<double>> planned_by_cluster;
  std::map<std::string, std::vector<double>> link_gbps, link_util, link_capacity_gbps,
      link_backlog_mb;
};

class run_state {
public:
  run_state(const run_options& o, sim_world& w) : o_(o), w_(w) {}

  /// The gateway clients use; with `--gateway all`, every gateway in node order, the
  /// requests handed to them in turn (one PD cluster's clients each).
  void find_gateway() {
    for (auto& n : w_.deployment().nodes)
      for (auto& a : n.actors)
        if (a.type == "gateway" &&
            (o_.gateway.empty() || o_.gateway == "all" || o_.gateway == n.name + "/" + a.name)) {
          gateways_.push_back({w_.at(n.name).context().msgr().lookup(a.name), n.cluster});
          if (o_.gateway != "all")
            return;
        }
    if (gateways_.empty())
      throw std::invalid_argument(o_.gateway.empty() || o_.gateway == "all"
                                      ? "the deployment has no gateway"
                                      : "--gateway " + o_.gateway + ": no such gateway");
  }

  void find_gauges() {
    for (auto& n : w_.deployment().nodes) {
      auto it = w_.deployment().clusters.find(n.cluster);
      const bool prfaas = it != w_.deployment().clusters.end() && it->second.kind == "prefill-only";
      auto& m = *w_.at(n.name).node_metrics();
      for (auto& a : n.actors) {
        if (a.type != "prefill_worker" && a.type != "decode_worker")
          continue;
        const bool decode = a.type == "decode_worker";
        prometheus::Labels l{{"worker", a.name}, {"role", decode ? "decode" : "prefill"}};
        workers_.push_back({n.cluster, prfaas, decode, &m.gauge("prfaas_worker_queue_depth", "", l),
                            &m.gauge("prfaas_worker_active", "", l)});
      }
      for (auto& a : n.actors)
        if (a.type == "scheduler")
          planned_of_.emplace_back(n.cluster,
                                   &m.gauge("prfaas_scheduler_planned_threshold_tokens", "", {}));
      for (auto& a : n.actors)
        if (a.type == "scheduler" && !threshold_) {
          threshold_ = &m.gauge("prfaas_scheduler_threshold_tokens", "", {});
          scarce_ = &m.gauge("prfaas_scheduler_bandwidth_scarce", "", {});
          planned_ = &m.gauge("prfaas_scheduler_planned_threshold_tokens", "", {});
          link_up_ = &m.gauge("prfaas_scheduler_link_up", "", {});
          pd_prefill_ = &m.gauge("prfaas_scheduler_pd_workers", "", {{"role", "prefill"}});
          planned_pd_ = &m.gauge("prfaas_scheduler_planned_pd_workers", "", {{"role", "prefill"}});
          for (auto [side, g] : {std::pair{"prfaas", &prfaas_scale_}, std::pair{"pd", &pd_scale_}})
            *g = &m.gauge("prfaas_scheduler_prefill_speed_scale", "", {{"side", side}});
        }
    }
    for (auto& l : w_.deployment().link_list) {
      cross_links_.emplace_back(l.a, l.b);
      cross_links_.emplace_back(l.b, l.a);
    }
  }

  /// Bandwidth steps and link outages, in workload time (after start()).
  void schedule_link_events() {
    for (auto& text : o_.bandwidth_steps) {
      auto [t, bps] = parse_step(text);
      for (auto& l : w_.deployment().link_list)
        w_.fabric().schedule_link_rate(l.a, l.b, t0_ + to_ns(t), bps);
    }
    for (auto& text : o_.link_downs) {
      auto cut = parse_outage(text);
      if (!cut.a.empty() && w_.deployment().find_link(cut.a, cut.b) == nullptr)
        throw std::invalid_argument("--link-down " + text +
                                    ": the deployment declares no link "
                                    "between " +
                                    cut.a + " and " + cut.b);
      w_.timer().at(t0_ + to_ns(cut.start_s), [this, cut] { cut_links(true, cut); });
      w_.timer().at(t0_ + to_ns(cut.start_s + cut.seconds), [this, cut] { cut_links(false, cut); });
    }
  }

  /// Every node pair across the cut link (every declared link when it names none) stops
  /// (or resumes) talking, both ways: control, heartbeats and KV alike (a
  /// cross-datacenter link that is down).
  void cut_links(bool down, const link_outage& cut) {
    for (auto& l : w_.deployment().link_list) {
      if (!cut.a.empty() && w_.deployment().find_link(cut.a, cut.b) != &l)
        continue;
      for (auto& a : w_.deployment().nodes)
        for (auto& b : w_.deployment().nodes)
          if (a.cluster == l.a && b.cluster == l.b) {
            if (down) {
              w_.net().block(a.name, b.name);
              w_.net().block(b.name, a.name);
            } else {
              w_.net().unblock(a.name, b.name);
              w_.net().unblock(b.name, a.name);
            }
          }
    }
  }

  void start(std::unique_ptr<lg::request_source> src) {
    src_ = std::move(src);
    t0_ = w_.now();
    last_sample_ = t0_;
    for (auto& [a, b] : cross_links_)
      last_bytes_[a + "->" + b] = w_.fabric().totals(a, b).bytes_delivered;
    next_arrival();
    sample_later();
  }

  size_t ended() const { return completed_; }
  size_t expected() const { return o_.requests > 0 ? o_.requests : issued_; }
  double virtual_s() const { return std::chrono::duration<double>(w_.now() - t0_).count(); }

  bool finished() const {
    if (!arrivals_done_)
      return false;
    if (in_flight_ == 0)
      return true;
    return w_.now() > t0_ + to_ns(last_arrival_s_ + o_.drain_s);
  }

  json result(uint64_t events) {
    const double end_s = std::chrono::duration<double>(w_.now() - t0_).count();
    for (auto& r : results_)
      if (r.status == lg::outcome::timeout)
        r.e2e_s = end_s - r.scheduled_s;
    // Throughput over the span requests were served: first arrival to last completion.
    const double span = std::max(1e-9, last_end_s_ - first_arrival_s_);
    lg::slo_config slo;
    slo.tpot_ms = o_.tpot_slo_ms;
    auto summary = lg::summarize_run(results_, slo, span);
    json out;
    out["summary"] = lg::to_json(summary);
    out["summary"]["issued"] = issued_;
    out["summary"]["unfinished"] = in_flight_;
    out["summary"]["virtual_end_s"] = end_s;
    out["summary"]["offered_rate"] = issued_ / std::max(1e-9, last_arrival_s_ - first_arrival_s_);
    out["stages"] = stages(span);
    out["timeseries"] = timeseries();
    for (auto& [a, b] : cross_links_) {
      auto t = w_.fabric().totals(a, b);
      out["links"][a + "->" + b] = {{"bytes_delivered", t.bytes_delivered},
                                    {"mean_gbps", t.bytes_delivered * 8 / span / 1e9}};
    }
    if (gateways_.size() > 1) {
      out["by_cluster"] = by_cluster(results_, cluster_of_, w_.deployment());
      out["link_outages"] = link_outages(results_, cluster_of_, w_.deployment(), o_.link_downs);
    }
    out["events"] = events;
    return out;
  }

  const std::vector<lg::request_result>& results() const { return results_; }

private:
  static std::chrono::nanoseconds to_ns(double s) {
    return std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9));
  }

  void next_arrival() {
    auto spec = src_->next();
    if (!spec) {
      arrivals_done_ = true;
      return;
    }
    auto at = t0_ + to_ns(spec->arrival_s);
    w_.timer().at(at, [this, s = std::move(*spec)]() mutable {
      submit(std::move(s));
      next_arrival();
    });
  }

  void submit(lg::request_spec spec) {
    auto a = sim_request(spec, w_.now());
    const size_t slot = results_.size();
    const auto& gw = gateways_[slot % gateways_.size()];
    cluster_of_.push_back(gw.cluster);
    lg::request_result r;
    r.index = spec.index;
    r.input_tokens = spec.input_tokens;
    r.requested_output_tokens = spec.output_tokens;
    r.scheduled_s = r.sent_s = spec.arrival_s;
    // Until it ends, a request counts as not finished in time (the run may stop first).
    r.status = lg::outcome::timeout;
    r.error = "still in flight when the run ended";
    results_.push_back(r);
    if (issued_ == 0)
      first_arrival_s_ = spec.arrival_s;
    last_arrival_s_ = spec.arrival_s;
    ++issued_;
    ++in_flight_;
    a->channel->on_end([this, slot, ch = std::weak_ptr<sv::stream_channel>(a->channel)] {
      if (auto c = ch.lock())
        ended(slot, *c);
    });
    caf::anon_send(gw.actor, sv::sim_submit{std::move(a)});
  }

  void ended(size_t slot, sv::stream_channel& ch) {
    --in_flight_;
    ++completed_;
    auto& r = results_[slot];
    r.status = lg::outcome::ok;
    r.error.clear();
    const double now_s = std::chrono::duration<double>(w_.now() - t0_).count();
    last_end_s_ = std::max(last_end_s_, now_s);
    auto u = ch.next(std::chrono::milliseconds(0));
    if (!u || u->error || !u->finished) {
      r.status = lg::outcome::stream_error;
      r.http_status = u && u->error ? u->error->status : 0;
      r.error = u && u->error ? u->error->message : "ended without an outcome";
      r.e2e_s = now_s - r.scheduled_s;
      return;
    }
    const auto& p = u->finished->prfaas;
    r.http_status = 200;
    r.output_tokens = u->finished->completion_tokens;
    r.ttft_s = p.value("ttft_ms", 0.0) / 1e3;
    r.e2e_s = p.value("e2e_ms", 0.0) / 1e3;
    r.prfaas.present = true;
    r.prfaas.request_id = p.value("request_id", "");
    r.prfaas.route = p.value("route", "");
    r.prfaas.prefill_node = p.value("prefill_node", "");
    r.prfaas.engine_prefill_ms = p.value("engine_prefill_ms", 0.0);
    r.prfaas.transfer_wire_ms = p.value("transfer_wire_ms", 0.0);
    r.prfaas.ttft_ms = p.value("ttft_ms", 0.0);
    r.prfaas.attempts = p.value("attempts", 0);
    r.prfaas.prefill_queue_ms = p.value("prefill_queue_ms", 0.0);
  }

  void sample_later() {
    w_.timer().after(to_ns(o_.sample_interval_s), [this] {
      sample();
      if (!finished())
        sample_later();
    });
  }

  void sample() {
    const auto now = w_.now();
    const double dt = std::chrono::duration<double>(now - last_sample_).count();
    last_sample_ = now;
    s_.t_s.push_back(std::chrono::duration<double>(now - t0_).count());
    s_.in_flight.push_back(static_cast<double>(in_flight_));
    s_.completed.push_back(static_cast<double>(completed_));
    double q[3] = {0, 0, 0}, act[3] = {0, 0, 0};
    for (auto& g : workers_) {
      int k = g.decode ? 2 : g.prfaas ? 0 : 1;
      q[k] += g.queue->Value();
      act[k] += g.active->Value();
    }
    s_.prfaas_queue.push_back(q[0]);
    s_.prfaas_active.push_back(act[0]);
    s_.pdp_queue.push_back(q[1]);
    s_.pdp_active.push_back(act[1]);
    s_.decode_waiting.push_back(q[2]);
    s_.decode_active.push_back(act[2]);
    s_.threshold.push_back(threshold_ ? threshold_->Value() : 0);
    s_.scarce.push_back(scarce_ ? scarce_->Value() : 0);
    s_.planned.push_back(planned_ ? planned_->Value() : 0);
    s_.link_up.push_back(link_up_ ? link_up_->Value() : 1);
    s_.pd_prefill.push_back(pd_prefill_ ? pd_prefill_->Value() : 0);
    s_.planned_pd_prefill.push_back(planned_pd_ ? planned_pd_->Value() : 0);
    s_.prfaas_speed_scale.push_back(prfaas_scale_ ? prfaas_scale_->Value() : 0);
    s_.pd_speed_scale.push_back(pd_scale_ ? pd_scale_->Value() : 0);
    if (planned_of_.size() >= 2)
      for (auto& [cluster, g] : planned_of_)
        s_.planned_by_cluster[cluster].push_back(g->Value());
    for (auto& [a, b] : cross_links_) {
      auto key = a + "->" + b;
      auto t = w_.fabric().totals(a, b);
      double gbps = dt > 0 ? (t.bytes_delivered - last_bytes_[key]) * 8 / dt / 1e9 : 0;
      last_bytes_[key] = t.bytes_delivered;
      s_.link_gbps[key].push_back(gbps);
      s_.link_capacity_gbps[key].push_back(t.capacity_bps / 1e9);
      s_.link_util[key].push_back(t.capacity_bps > 0 ? gbps * 1e9 / t.capacity_bps : 0);
      s_.link_backlog_mb[key].push_back(t.backlog_bytes / 1e6);
    }
  }

  json stages(double span) const {
    json out;
    std::map<std::string, std::vector<double>> queue, prefill, ttft;
    std::map<std::string, size_t> count;
    uint64_t out_tokens = 0;
    for (auto& r : results_) {
      if (!r.ok())
        continue;
      auto& route = r.prfaas.route;
      ++count[route];
      queue[route].push_back(r.prfaas.prefill_queue_ms.value_or(0));
      prefill[route].push_back(r.prfaas.engine_prefill_ms);
      if (r.ttft_s)
        ttft[route].push_back(*r.ttft_s * 1e3);
      out_tokens += r.output_tokens;
    }
    for (auto& [route, n] : count) {
      out["prefill_" + route] = {
          {"requests", n},
          {"requests_per_s", static_cast<double>(n) / span},
          {"queue_ms", lg::to_json(lg::summarize(queue.at(route)))},
          {"engine_prefill_ms", lg::to_json(lg::summarize(prefill.at(route)))},
          {"ttft_ms", lg::to_json(lg::summarize(ttft[route]))}};
    }
    double active = 0, waiting = 0;
    for (size_t i = 0; i < s_.decode_active.size(); ++i) {
      active += s_.decode_active[i];
      waiting += s_.decode_waiting[i];
    }
    const double n = std::max<double>(1, static_cast<double>(s_.decode_active.size()));
    out["decode"] = {{"tokens_per_s", static_cast<double>(out_tokens) / span},
                     {"mean_batch_total", active / n},
                     {"mean_waiting_total", waiting / n}};
    return out;
  }

  json timeseries() const {
    json links;
    for (auto& [key, v] : s_.link_gbps)
      links[key] = {{"gbps", v},
                    {"utilisation", s_.link_util.at(key)},
                    {"capacity_gbps", s_.link_capacity_gbps.at(key)},
                    {"backlog_mb", s_.link_backlog_mb.at(key)}};
    json out{
        {"t_s", s_.t_s},
        {"in_flight", s_.in_flight},
        {"completed", s_.completed},
        {"threshold_tokens", s_.threshold},
        {"bandwidth_scarce", s_.scarce},
        {"planned_threshold_tokens", s_.planned},
        {"scheduler_link_up", s_.link_up},
        {"pd_prefill_workers", s_.pd_prefill},
        {"planned_pd_prefill_workers", s_.planned_pd_prefill},
        // The re-planner's measured / profiled prefill time per side (0 before a plan).
        {"prefill_speed_scale", {{"prfaas", s_.prfaas_speed_scale}, {"pd", s_.pd_speed_scale}}},
        {"prfaas_queue", s_.prfaas_queue},
        {"prfaas_active", s_.prfaas_active},
        {"pd_prefill_queue", s_.pdp_queue},
        {"pd_prefill_active", s_.pdp_active},
        {"decode_active", s_.decode_active},
        {"decode_waiting", s_.decode_waiting},
        {"links", links}};
    // The series above are the first scheduler's; with several, each one's planned t.
    if (!s_.planned_by_cluster.empty())
      out["planned_threshold_tokens_by_cluster"] = s_.planned_by_cluster;
    return out;
  }

  const run_options& o_;
  sim_world& w_;
  struct gateway {
    caf::actor actor;
    std::string cluster;
  };
  std::vector<gateway> gateways_;
  std::vector<std::string> cluster_of_; ///< per request: its gateway's cluster
  std::unique_ptr<lg::request_source> src_;
  std::vector<worker_gauges> workers_;
  prometheus::Gauge* threshold_ = nullptr;
  prometheus::Gauge* scarce_ = nullptr;
  prometheus::Gauge* planned_ = nullptr;
  prometheus::Gauge* link_up_ = nullptr;    ///< the scheduler's view: no monitor reports it down
  prometheus::Gauge* pd_prefill_ = nullptr; ///< PD prefill workers taking work (conversion)
  prometheus::Gauge* planned_pd_ = nullptr; ///< ... the re-planner's target
  prometheus::Gauge *prfaas_scale_ = nullptr, *pd_scale_ = nullptr; ///< ... its speed scales
  /// Every scheduler's planned-t gauge, with its PD cluster.
  std::vector<std::pair<std::string, prometheus::Gauge*>> planned_of_;
  std::vector<std::pair<std::string, std::string>> cross_links_;
  std::map<std::string, double> last_bytes_;
  sim_world::time_point t0_{}, last_sample_{};
  std::vector<lg::request_result> results_;
  series s_;
  size_t issued_ = 0, in_flight_ = 0, completed_ = 0;
  bool arrivals_done_ = false;
  double first_arrival_s_ = 0, last_arrival_s_ = 0, last_end_s_ = 0;
};

} // namespace

void add_run_options(CLI::App& cmd, run_options& o) {
  cmd.add_option("--config", o.config, "deployment file (as for prfaas-node)")->required();
  cmd.add_option("--workload", o.workload, "lognormal (the paper's) | trace (Mooncake JSONL)");
  cmd.add_option("--trace", o.trace, "trace file for --workload trace");
  cmd.add_option("--trace-time-scale", o.trace_time_scale, "arrival = timestamp × this");
  cmd.add_option("--trace-input-scale", o.trace_input_scale, "input lengths and blocks × this");
  cmd.add_option("--seed", o.seed, "drives everything random");
  cmd.add_option("--data-plane", o.data_plane,
                 "fluid: the fluid link model | real: the data plane's own sender and receiver "
                 "over simulated frames")
      ->check(CLI::IsMember({"fluid", "real"}));
  cmd.add_option("--log-level", o.log,
                 "the simulated nodes' logs to stderr, each line stamped t=<virtual seconds>: "
                 "trace | debug | info | warn | error | off")
      ->transform(
          CLI::CheckedTransformer(std::map<std::string, log_level>{{"trace", log_level::trace},
                                                                   {"debug", log_level::debug},
                                                                   {"info", log_level::info},
                                                                   {"warn", log_level::warn},
                                                                   {"error", log_level::error},
                                                                   {"off", log_level::off}},
                                  CLI::ignore_case));
  cmd.add_option("--arrivals", o.arrivals, "poisson | bursty | mmpp");
  cmd.add_option("--rate", o.rate, "req/s (bursty: during bursts)");
  cmd.add_option("--burst-on", o.burst_on_s, "bursty: seconds of each burst");
  cmd.add_option("--burst-off", o.burst_off_s, "bursty: idle seconds after each burst");
  cmd.add_option("--mmpp-rates", o.mmpp_rates, "mmpp: req/s in state 0 and 1")->expected(2);
  cmd.add_option("--mmpp-dwell", o.mmpp_dwell_s, "mmpp: mean seconds in state 0 and 1")
      ->expected(2);
  cmd.add_option("--requests", o.requests, "stop after this many requests");
  cmd.add_option("--duration", o.duration_s, "stop arrivals after this many virtual seconds");
  cmd.add_option("--output-tokens", o.output_tokens, "fixed output length (0: the trace's)");
  cmd.add_option("--input-mu", o.input_mu, "lognormal: mu of input lengths")->capture_default_str();
  cmd.add_option("--input-sigma", o.input_sigma, "lognormal: sigma of input lengths")
      ->capture_default_str();
  cmd.add_option("--input-min", o.input_min, "lognormal: shortest input")->capture_default_str();
  cmd.add_option("--input-max", o.input_max, "lognormal: longest input")->capture_default_str();
  cmd.add_option("--input-phase", o.input_phases,
                 "SECONDS:MU: lognormal input lengths with this mu from then on (repeatable; a "
                 "workload whose lengths shift)");
  cmd.add_option("--bandwidth-step", o.bandwidth_steps,
                 "SECONDS:GBPS: every cross-cluster link's capacity from then on (repeatable)");
  cmd.add_option("--link-down", o.link_downs,
                 "START:SECONDS[:A,B]: every cross-cluster link (or the one between clusters "
                 "A and B) is cut both ways for that long (repeatable)");
  cmd.add_option("--sample-interval", o.sample_interval_s, "virtual seconds between samples");
  cmd.add_option("--drain", o.drain_s, "virtual seconds after the last arrival at most");
  cmd.add_option("--tpot-slo-ms", o.tpot_slo_ms, "decode SLO (25 ms = 40 tokens/s)");
  cmd.add_option("--gateway", o.gateway,
                 "node/actor of the gateway clients use, or all: every gateway in turn (one "
                 "PD cluster's clients each; the JSON gains by_cluster)");
}

CLI::App* add_run_command(CLI::App& app, run_options& o) {
  auto* cmd = app.add_subcommand("run", "simulate a deployment under a workload in virtual time");
  add_run_options(*cmd, o);
  cmd->add_option("--json", o.json_out, "write the result here (default stdout)");
  cmd->add_option("--requests-csv", o.requests_csv, "per-request results (CSV)");
  return cmd;
}

json simulate(const run_options& o, std::vector<double>* ttft_by_arrival) {
  sim_world w{o.config};
  std::mt19937_64 rng{o.seed};
  auto src = make_source(o, rng);
  w.fabric().set_live(o.data_plane == "real", o.seed);
  w.set_log_level(o.log);
  w.start();
  w.run_until(w.now() + std::chrono::nanoseconds(static_cast<int64_t>(o.warmup_s * 1e9)));
  run_state st{o, w};
  st.find_gateway();
  st.find_gauges();
  st.start(std::move(src));
  st.schedule_link_events();
  // On a terminal, a progress line (quiet when stderr is piped).
  progress_line progress{o.rate > 0 ? "prfaas-sim at " + json(o.rate).dump() + " req/s"
                                    : "prfaas-sim " + o.workload};
  w.run_until(sim_world::time_point::max(), [&] {
    progress.tick(st.ended(), st.expected(), st.virtual_s(), w.events());
    return st.finished();
  });
  progress.finish(st.ended(), st.expected(), st.virtual_s(), w.events());
  json out = st.result(w.events());
  out["config"] = o.config;
  out["workload"] = o.workload == "trace" ? o.trace : o.workload;
  out["arrivals"] = o.arrivals;
  out["rate"] = o.rate;
  if (o.workload == "lognormal")
    out["input"] = {
        {"mu", o.input_mu}, {"sigma", o.input_sigma}, {"min", o.input_min}, {"max", o.input_max}};
  out["seed"] = o.seed;
  out["bandwidth_steps"] = o.bandwidth_steps;
  if (!o.link_downs.empty())
    out["link_downs"] = o.link_downs;
  if (!o.input_phases.empty())
    out["input_phases"] = o.input_phases;
  if (ttft_by_arrival)
    for (auto& r : st.results())
      ttft_by_arrival->push_back(r.ttft_s.value_or(r.e2e_s));
  if (!o.requests_csv.empty()) {
    std::ofstream csv{o.requests_csv};
    csv << "index,arrival_s,input_tokens,output_tokens,route,attempts,ttft_ms,tpot_ms,e2e_ms,"
           "prefill_queue_ms,status\n";
    for (auto& r : st.results())
      csv << r.index << ',' << r.scheduled_s << ',' << r.input_tokens << ',' << r.output_tokens
          << ',' << r.prfaas.route << ',' << r.prfaas.attempts << ','
          << (r.ttft_s ? *r.ttft_s * 1e3 : -1) << ',' << (r.tpot_s() ? *r.tpot_s() * 1e3 : -1)
          << ',' << r.e2e_s * 1e3 << ',' << r.prfaas.prefill_queue_ms.value_or(0) << ',' << r.kind()
          << '\n';
  }
  return out;
}

bool report_bad_input(const std::function<void()>& body) {
  try {
    body();
    return true;
  } catch (const config_error& e) {
    std::cerr << "prfaas-sim: configuration error: " << e.what() << "\n";
  } catch (const std::invalid_argument& e) {
    std::cerr << "prfaas-sim: " << e.what() << "\n";
  }
  return false;
}

bool write_json(const json& out, const std::string& path) {
  if (path.empty() || path == "-") {
    std::cout << out.dump(1) << "\n";
    return true;
  }
  std::ofstream f{path};
  if (!f) {
    std::cerr << "prfaas-sim: cannot write " << path << "\n";
    return false;
  }
  f << out.dump(1) << "\n";
  return true;
}

int run_run(const run_options& o) {
  json out;
  const auto wall0 = std::chrono::steady_clock::now();
  if (!report_bad_input([&] { out = simulate(o); }))
    return 2;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  // Wall time goes to stderr only: the JSON is a function of the inputs alone.
  std::cerr << "prfaas-sim: " << out["summary"]["requests"]["total"] << " requests, "
            << out["summary"]["virtual_end_s"] << " virtual s, " << out["events"]
            << " timer events in " << wall << " s wall\n";
  return write_json(out, o.json_out) ? 0 : 2;
}

} // namespace prfaas::sim
