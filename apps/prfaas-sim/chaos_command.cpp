#include "chaos_command.hpp"

#include <array>
#include <iostream>
#include <random>

#include <caf/all.hpp>

#include "common/engine_setup.hpp"
#include "gateway/sim_ingress.hpp"
#include "loadgen/workload.hpp"
#include "prfaas/engine/clock.hpp"
#include "prfaas/messages/membership.hpp"
#include "prfaas/runtime/faults.hpp"
#include "prfaas/runtime/probes.hpp"
#include "chaos_checks.hpp"
#include "chaos_schedule.hpp"
#include "run_command.hpp"
#include "sim_request.hpp"
#include "prfaas/sim/sim_world.hpp"

namespace prfaas::sim {

namespace {

using json = nlohmann::json;
namespace sv = prfaas::serving;
namespace lg = prfaas::loadgen;

std::chrono::nanoseconds secs(double s) {
  return std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9));
}

// -- one seed's run -----------------------------------------------------------------

using chaos::failure;
using chaos::fmt;
using chaos::membership_seen;
using chaos::tracked;

class chaos_run {
public:
  chaos_run(const chaos_options& o, uint64_t seed)
      : o_(o), seed_(seed), w_(o.config), r_(roles_of(w_.deployment(), o.gateway)) {
    const auto* gw = w_.deployment().find_node(o.gateway);
    if (!gw)
      throw std::invalid_argument("--gateway " + o.gateway + ": no such node");
    for (auto& a : gw->actors)
      if (a.type == "gateway") {
        gateway_actor_ = a.name;
        auto p = w_.registry().params_for(a);
        request_timeout_s_ = std::chrono::duration<double>(p.dur("request_timeout")).count();
      }
    if (gateway_actor_.empty())
      throw std::invalid_argument("--gateway " + o.gateway + ": the node has no gateway");
    const auto& fd = w_.deployment().failure_detector;
    detection_bound_s_ = std::chrono::duration<double>(fd.interval * (fd.misses + 1)).count();
    if (o.sabotage == "tight_bound")
      detection_bound_s_ = 0;
    else if (!o.sabotage.empty() && o.sabotage != "hide_outcome" && o.sabotage != "corrupt_stream")
      throw std::invalid_argument(
          "--sabotage: expected hide_outcome, corrupt_stream or tight_bound, got \"" + o.sabotage +
          "\"");
    oracle_model_ = serving::read_model(w_.deployment());
  }

  json run() {
    reset_probe_tally();
    reset_fault_tally();
    w_.fabric().set_live(o_.data_plane == "real", seed_);
    w_.start();
    observe_membership();
    w_.run_until(w_.now() + secs(3)); // membership settles
    t0_ = w_.now();
    baseline_actors_ = w_.system().registry().running();

    const double arrivals_s = static_cast<double>(o_.requests) / o_.rate;
    faults_ = schedule_of(o_, seed_, r_, arrivals_s);
    burst_base_ = o_.requests + o_.tail_requests;
    double healed_s = 0;
    for (auto& f : faults_) {
      schedule(f);
      healed_s = std::max(healed_s, f.at_s + f.for_s);
    }
    tail_from_s_ = std::max(healed_s + o_.settle_s, arrivals_s);
    reqs_.reserve(o_.requests + o_.tail_requests + faults_.size() * burst_size);
    submit_workload();

    const double give_up_s = tail_from_s_ + o_.tail_requests * 0.5 + request_timeout_s_ + 30;
    w_.run_until(t0_ + secs(give_up_s), [&] { return issued_ == total_ && ended_ == total_; });
    // Quiescence: every lease runs out. A decode reservation or a pending cross-node
    // request lives at most as long as its request's deadline; transfers and
    // partial inbound ones within the data plane's timeouts.
    w_.run_until(w_.now() + secs(request_timeout_s_ + 10));
    return report();
  }

private:
  double now_s() const { return std::chrono::duration<double>(w_.now() - t0_).count(); }

  // -- load ---------------------------------------------------------------------------

  /// `n` requests of the sweep's shape (log-normal prompts, median ~3K tokens, at most
  /// 16K) arriving at `rate`.
  std::vector<lg::request_spec> workload(uint64_t seed, size_t n, double rate,
                                         uint32_t output_tokens) const {
    std::mt19937_64 rng(seed);
    lg::synthetic_config c;
    c.input = {lg::length_dist::lognormal, 0, {.mu = 8.0, .sigma = 0.8, .min = 256, .max = 16384}};
    c.output = {lg::length_dist::fixed, output_tokens, {}};
    c.arrivals.kind = lg::parse_arrival_kind("poisson");
    c.arrivals.rate = rate;
    c.stop = {.max_requests = n, .duration_s = 0};
    c.validate();
    lg::synthetic_workload src(c, rng);
    std::vector<lg::request_spec> out;
    while (auto s = src.next())
      out.push_back(std::move(*s));
    return out;
  }

  void submit_workload() {
    auto specs = workload(seed_, o_.requests + o_.tail_requests, o_.rate, o_.output_tokens);
    total_ += specs.size();
    for (size_t i = 0; i < specs.size(); ++i) {
      auto spec = specs[i];
      const bool tail = i >= o_.requests;
      const double at =
          tail ? tail_from_s_ + 0.5 * static_cast<double>(i - o_.requests) : spec.arrival_s;
      w_.timer().at(t0_ + secs(at), [this, spec, tail] { submit(spec, tail); });
    }
  }

  /// Clients spread over the gateways by request index; a gateway that is down refuses
  /// the connection.
  void submit(const lg::request_spec& spec, bool tail) {
    auto a = sim_request(spec, w_.now());
    const size_t slot = reqs_.size();
    const auto& gw = r_.gateways[spec.index % r_.gateways.size()];
    reqs_.push_back({.spec = spec, .a = a, .accepted_s = now_s(), .tail = tail, .gateway = gw});
    ++issued_;
    if (!w_.running(gw)) { // nothing listens: the client's connect fails at once
      lose_connection(slot, "connection refused (gateway " + gw + " is down)");
      return;
    }
    a->channel->on_end([this, slot] { ended(slot); });
    caf::anon_send(w_.at(gw).context().msgr().lookup(r_.gateway_actor.at(gw)),
                   sv::sim_submit{std::move(a)});
  }

  /// What an HTTP client sees when its gateway process dies: the connection drops.
  /// The outcome is the client's; whatever the dead gateway held never reaches it.
  void lose_connection(size_t slot, const std::string& why) {
    auto& t = reqs_[slot];
    if (t.ended_s >= 0)
      return;
    ++ended_;
    t.ended_s = now_s();
    t.connection_lost = true;
    t.error = why;
  }

  void ended(size_t slot) {
    auto& t = reqs_[slot];
    if (t.connection_lost)
      return; // its client is gone
    if (o_.sabotage == "hide_outcome" && !hidden_) {
      hidden_ = true;
      return;
    }
    if (t.ended_s < 0)
      ++ended_;
    t.ended_s = now_s();
    auto u = t.a->channel->next(std::chrono::milliseconds(0));
    if (!u)
      return;
    t.tokens = u->out.tokens;
    if (u->finished && o_.sabotage == "corrupt_stream" && !corrupted_ && !t.tokens.empty()) {
      corrupted_ = true;
      t.tokens[t.tokens.size() / 2] ^= 1;
    }
    if (u->finished) {
      t.ok = true;
      t.status = 200;
      t.completion_tokens = u->finished->completion_tokens;
    } else if (u->error) {
      t.status = u->error->status;
      t.error = u->error->message;
    }
  }

  // -- faults -------------------------------------------------------------------------

  void at(double s, std::function<void()> fn) { w_.timer().at(t0_ + secs(s), std::move(fn)); }

  void schedule(const fault& f) {
    const double end = f.at_s + f.for_s;
    switch (f.kind) {
    case fault_kind::crash_prefill:
    case fault_kind::crash_decode:
    case fault_kind::crash_directory:
    case fault_kind::crash_gateway:
      at(f.at_s, [this, n = f.target] { node_down(n); });
      at(end, [this, n = f.target] { node_up(n); });
      break;
    case fault_kind::pause:
      at(f.at_s, [this, n = f.target] { pause(n, true); });
      at(end, [this, n = f.target] { pause(n, false); });
      break;
    case fault_kind::slow_restart:
      at(f.at_s, [this, n = f.target] { slow(n, true); });
      at(f.at_s + 1.0, [this, n = f.target] { node_down(n); });
      at(f.at_s + 1.2, [this, n = f.target] { node_up(n); });
      at(end, [this, n = f.target] { slow(n, false); });
      break;
    case fault_kind::partition:
      at(f.at_s, [this] { cut(true, true); });
      at(end, [this] { cut(true, false); });
      break;
    case fault_kind::one_way:
      at(f.at_s, [this] { cut(false, true); });
      at(end, [this] { cut(false, false); });
      break;
    case fault_kind::flap:
      for (int i = 0; i < 3; ++i) {
        const double step = f.for_s / 6;
        at(f.at_s + 2 * i * step, [this] { cut(true, true); });
        at(f.at_s + (2 * i + 1) * step, [this] { cut(true, false); });
      }
      break;
    case fault_kind::degrade:
      at(f.at_s, [this] { degrade(true); });
      at(end, [this] { degrade(false); });
      break;
    case fault_kind::data_loss:
    case fault_kind::data_corrupt: {
      const bool loss = f.kind == fault_kind::data_loss;
      at(f.at_s, [this, loss] { damage(loss, true); });
      at(end, [this, loss] { damage(loss, false); });
      break;
    }
    case fault_kind::message_loss:
      at(f.at_s, [this] { points({"transport.drop", "transport.duplicate"}, 0.02, true); });
      at(end, [this] { points({"transport.drop", "transport.duplicate"}, 0.02, false); });
      break;
    case fault_kind::crash_points:
      at(f.at_s, [this] {
        points({"prefill.crash", "kv_directory.crash"}, 0.25, true);
        points({"decode.crash"}, 0.01, true); // per batch step: a few crashes a second
      });
      at(end, [this] {
        points({"prefill.crash", "kv_directory.crash"}, 0.25, false);
        points({"decode.crash"}, 0.01, false);
      });
      break;
    case fault_kind::burst: {
      // Long answers: decoding them all takes longer than a deadline, which no
      // admission can know in advance (a stream may end early), so some end 504.
      auto specs = workload(seed_ + 0x5EED, burst_size, 1000.0, burst_output_tokens);
      for (size_t k = 0; k < specs.size(); ++k) {
        specs[k].index = burst_base_ + k; // ids of their own
        at(f.at_s + specs[k].arrival_s, [this, s = specs[k]] { submit(s, false); });
      }
      burst_base_ += specs.size();
      total_ += specs.size();
      break;
    }
    }
  }

  /// Overlapping faults nest: a node comes back when the last fault holding it ends.
  void node_down(const std::string& n) {
    if (crashed_[n]++ > 0)
      return;
    note_failure(n);
    w_.crash(n);
    for (size_t i = 0; i < reqs_.size(); ++i)
      if (reqs_[i].gateway == n)
        lose_connection(i, "connection reset (gateway " + n + " crashed)");
  }
  void node_up(const std::string& n) {
    if (--crashed_[n] > 0)
      return;
    w_.restart(n);
    arm_points(n);
  }
  void pause(const std::string& n, bool on) {
    if (on) {
      if (paused_[n]++ == 0) {
        note_failure(n);
        w_.net().isolate(n);
      }
    } else if (--paused_[n] == 0) {
      w_.net().rejoin(n);
    }
  }
  /// Every link of `n` at 400 ms one way (nested faults: the first sets, the last restores).
  void slow(const std::string& n, bool on) {
    if (on ? slowed_[n]++ > 0 : --slowed_[n] > 0)
      return;
    for (auto& other : w_.deployment().nodes) {
      if (other.name == n)
        continue;
      if (on)
        base_latency_[{n, other.name}] = w_.net().latency(n, other.name);
      w_.net().set_latency(n, other.name,
                           on ? std::chrono::milliseconds(400) : base_latency_[{n, other.name}]);
    }
    if (!on) // frames sent while slowed still arrive this late
      slow_in_flight_until_[n] = now_s() + 0.4;
  }

  void cut(bool both_ways, bool on) {
    int& depth = both_ways ? cut_both_ : cut_one_;
    if (on ? depth++ > 0 : --depth > 0)
      return;
    for (auto& a : r_.prfaas)
      for (auto& b : r_.pd) {
        if (on) {
          w_.net().block(a, b);
          if (both_ways)
            w_.net().block(b, a);
        } else {
          // Another cut may still hold a direction.
          if (cut_one_ == 0 && cut_both_ == 0)
            w_.net().unblock(a, b);
          if (both_ways && cut_both_ == 0)
            w_.net().unblock(b, a);
        }
      }
  }
  void degrade(bool on) {
    if (on ? degraded_++ > 0 : --degraded_ > 0)
      return;
    const double full = r_.link_bps > 0 ? r_.link_bps : 100e9;
    w_.fabric().schedule_link_rate(r_.prfaas_cluster, r_.pd_cluster, w_.now(),
                                   on ? full / 100 : full);
  }
  /// Data-plane frames across the link lost (`loss`) or chunks corrupted, both ways.
  void damage(bool loss, bool on) {
    int& depth = loss ? lossy_ : corrupting_;
    if (on ? depth++ > 0 : --depth > 0)
      return;
    const double p = on ? 0.05 : 0.0;
    for (auto [a, b] :
         {std::pair{r_.prfaas_cluster, r_.pd_cluster}, std::pair{r_.pd_cluster, r_.prfaas_cluster}})
      loss ? w_.fabric().set_loss(a, b, p) : w_.fabric().set_corrupt(a, b, p);
  }
  /// Fault points on every node now running (and on nodes restarted while active).
  void points(std::vector<std::string> names, double p, bool on) {
    for (auto& n : names)
      point_depth_[n] += on ? 1 : -1;
    for (auto& n : names)
      point_p_[n] = point_depth_[n] > 0 ? p : 0.0;
    for (auto& [name, _] : w_.nodes())
      arm_points(name);
  }
  void arm_points(const std::string& node) {
    if (!w_.running(node))
      return;
    auto& f = w_.at(node).faults();
    f.set_seed(seed_);
    for (auto& [point, p] : point_p_)
      f.set(point, p);
  }

  // -- failure detection ----------------------------------------------------------------

  void observe_membership() {
    auto* seen = &seen_;
    auto* self = this;
    auto obs = w_.system().spawn([seen, self](caf::event_based_actor*) -> caf::behavior {
      return {[seen, self](const membership_event& e) {
        seen->push_back({self->now_s(), e.peer, e.state});
      }};
    });
    caf::anon_send(caf::actor_cast<caf::actor>(w_.at(o_.gateway).transport()),
                   caf::subscribe_atom_v, obs);
    w_.run_until(w_.now());
  }

  /// A node fails now: remember when, unless the gateway's node already has it down.
  void note_failure(const std::string& n) {
    peer_state last = peer_state::down;
    for (auto& s : seen_)
      if (s.peer == n)
        last = s.state;
    // The last heartbeat can arrive as late as the slowest link it may have left on: a
    // link restored from 400 ms still delivers what it carried for 400 ms.
    double latency = std::chrono::duration<double>(w_.net().latency(n, o_.gateway)).count();
    if (now_s() < slow_in_flight_until_[n])
      latency = std::max(latency, 0.4);
    if (last != peer_state::down)
      failures_.push_back({now_s(), n, latency});
  }

  // -- the checks (chaos_checks.hpp) -----------------------------------------------------

  json report() {
    chaos::violations v;
    chaos::token_oracle oracle(oracle_model_);
    json out = chaos::check_requests(reqs_, oracle, request_timeout_s_, v);
    chaos::check_gateway_isolation(faults_, reqs_, v);
    chaos::check_progress(reqs_, o_.tail_requests, v);
    auto detections = chaos::check_detection(failures_, seen_, detection_bound_s_, v);
    auto held = chaos::check_quiescence(w_, baseline_actors_, v);
    json faults = json::array();
    for (auto& f : faults_)
      faults.push_back(
          {{"kind", name_of(f.kind)}, {"target", f.target}, {"at_s", f.at_s}, {"for_s", f.for_s}});
    out["seed"] = seed_;
    out["requests"] = reqs_.size();
    out["faults"] = faults;
    out["fault_points_fired"] = fault_tally();
    out["detections"] = detections;
    out["held_at_quiescence"] = held;
    out["probes"] = probe_tally();
    out["violations"] = v.list;
    out["virtual_s"] = now_s();
    out["events"] = w_.events();
    return out;
  }

  const chaos_options& o_;
  uint64_t seed_;
  sim_world w_;
  roles r_;
  std::string gateway_actor_;
  double request_timeout_s_ = 0;
  double detection_bound_s_ = 0;
  serving::model_settings oracle_model_;
  sim_world::time_point t0_{};
  size_t baseline_actors_ = 0;
  bool hidden_ = false, corrupted_ = false; ///< sabotage done
  std::vector<fault> faults_;
  static constexpr size_t burst_size = 120;
  static constexpr uint32_t burst_output_tokens = 1536;
  size_t burst_base_ = 0; ///< index of the next burst request
  double tail_from_s_ = 0;
  size_t total_ = 0, issued_ = 0, ended_ = 0;
  std::vector<tracked> reqs_;
  std::map<std::string, int> crashed_, paused_, point_depth_, slowed_;
  std::map<std::string, double> slow_in_flight_until_; ///< a slowed link's frames still in flight
  std::map<std::pair<std::string, std::string>, std::chrono::nanoseconds> base_latency_;
  std::map<std::string, double> point_p_;
  int cut_both_ = 0, cut_one_ = 0, degraded_ = 0, lossy_ = 0, corrupting_ = 0;
  std::vector<membership_seen> seen_;
  std::vector<failure> failures_;
};

} // namespace

CLI::App* add_chaos_command(CLI::App& app, chaos_options& o) {
  auto* cmd = app.add_subcommand(
      "chaos", "deterministic chaos sweep: faults under load, invariants checked");
  cmd->add_option("--config", o.config, "deployment file (e.g. configs/sim/chaos.yaml)")
      ->required();
  cmd->add_option("--seed", o.seed, "first seed")->capture_default_str();
  cmd->add_option("--seeds", o.seeds, "how many seeds (consecutive)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--requests", o.requests, "requests per seed during the faults")
      ->capture_default_str();
  cmd->add_option("--rate", o.rate, "their Poisson rate (req/s)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tail", o.tail_requests, "requests after the faults healed (must all succeed)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--output-tokens", o.output_tokens, "tokens per request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--faults", o.faults, "scheduled faults per seed")->capture_default_str();
  cmd->add_option("--settle", o.settle_s, "seconds after the last heal before the tail")
      ->capture_default_str();
  cmd->add_option("--gateway", o.gateway, "the gateway's node (never faulted)")
      ->capture_default_str();
  cmd->add_option("--json", o.json_out, "write the JSON report here (default stdout)");
  cmd->add_option("--data-plane", o.data_plane,
                  "real: the data plane's own sender and receiver over simulated frames; "
                  "fluid: the fluid link model alone (faster)")
      ->capture_default_str()
      ->check(CLI::IsMember({"real", "fluid"}));
  cmd->add_flag("!--no-data-faults", o.data_faults,
                "no data-plane fault (lost frames, corrupted chunks) on top of --faults");
  cmd->add_flag("!--quiet", o.progress, "no progress lines on stderr");
  cmd->add_option("--sabotage", o.sabotage,
                  "negative control of the checker: hide_outcome | corrupt_stream | tight_bound");
  return cmd;
}

json chaos_seed(const chaos_options& opts, uint64_t seed) {
  chaos_run run(opts, seed);
  return run.run();
}

} // namespace prfaas::sim
