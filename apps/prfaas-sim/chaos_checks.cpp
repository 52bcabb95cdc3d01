#include "chaos_checks.hpp"

#include <cstdio>

#include "common/token_diff.hpp"

namespace prfaas::sim::chaos {

using json = nlohmann::json;

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

// -- the oracle -----------------------------------------------------------------------

token_oracle::token_oracle(const serving::model_settings& model)
    : clock_(std::make_unique<engine::manual_clock>()),
      engine_(serving::make_engine(model, "oracle", *clock_)) {}

token_oracle::~token_oracle() = default;

const std::vector<serving::token>& token_oracle::expected(size_t i, const tracked& t) {
  auto [it, fresh] = tokens_.try_emplace(i);
  if (!fresh)
    return it->second;
  auto& out = it->second;
  const auto& r = t.a->req;
  engine::prefill_request req;
  req.id = i + 1;
  req.prompt = r.prompt;
  req.sampling = {r.temperature, r.seed, 0};
  auto p = engine_->prefill(req, {});
  if (!p)
    throw std::runtime_error("oracle prefill of " + t.a->id + ": " + p.message());
  out.push_back(p->first_token);
  const engine::seq_id id = req.id;
  while (out.size() < r.max_tokens) {
    auto step = engine_->decode_step(std::span<const engine::seq_id>(&id, 1));
    if (!step)
      throw std::runtime_error("oracle decode of " + t.a->id + ": " + step.message());
    out.push_back(step->front());
  }
  engine_->release(id);
  return out;
}

// -- requests -------------------------------------------------------------------------

namespace {

/// The stream's own promises: ended once, nothing after its end, within its deadline.
void check_stream(const tracked& t, double request_timeout_s, violations& v) {
  const std::string& id = t.a->id;
  if (t.a->channel->end_calls() != 1)
    v(id + ": the gateway ended the stream " + std::to_string(t.a->channel->end_calls()) +
      " times");
  if (t.a->channel->late_pushes() != 0)
    v(id + ": tokens pushed after the stream ended");
  if (t.ended_s - t.accepted_s > request_timeout_s + 0.2)
    v(id + ": ended " + fmt(t.ended_s - t.accepted_s) + " s after acceptance, past its " +
      fmt(request_timeout_s) + " s deadline");
}

/// A failed request: its status, where a 504 waited, and a stream that is a prefix of
/// the engine's.
void check_failed(const tracked& t, const std::vector<serving::token>& want, json& failures,
                  std::map<std::string, size_t>& deadline_in, violations& v) {
  const std::string& id = t.a->id;
  if (t.status == 504)
    if (auto at = t.error.rfind("in state "); at != std::string::npos)
      ++deadline_in[t.error.substr(at + 9)];
  if (failures.size() < 20)
    failures.push_back({{"id", id},
                        {"status", t.status},
                        {"error", t.error},
                        {"accepted_s", t.accepted_s},
                        {"ended_s", t.ended_s},
                        {"tokens_delivered", t.tokens.size()}});
  if (t.tokens.size() > want.size() || !std::equal(t.tokens.begin(), t.tokens.end(), want.begin()))
    v(id + ": failed (" + std::to_string(t.status) +
      ") after a stream that is not a prefix of the engine's: " +
      app::describe_token_diff(t.tokens, want));
  if (t.status == 0)
    v(id + ": ended without a status");
}

} // namespace

json check_requests(const std::vector<tracked>& reqs, token_oracle& oracle,
                    double request_timeout_s, violations& v) {
  std::map<std::string, size_t> outcomes;
  std::map<std::string, size_t> deadline_in; ///< 504s by the state they were waiting in
  json failures = json::array();
  size_t ok = 0, duplicated = 0, lost = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto& t = reqs[i];
    if (t.ended_s < 0) {
      ++lost;
      v(t.a->id + ": accepted at " + fmt(t.accepted_s) + " s and never ended");
      continue;
    }
    if (t.connection_lost) { // the client's own outcome; the dead gateway's state is gone
      ++outcomes["connection_lost"];
      continue;
    }
    ++outcomes[t.ok ? "ok" : std::to_string(t.status)];
    check_stream(t, request_timeout_s, v);
    const auto& want = oracle.expected(i, t);
    if (!t.ok) {
      check_failed(t, want, failures, deadline_in, v);
      continue;
    }
    ++ok;
    if (t.tokens.size() > want.size())
      ++duplicated;
    if (t.tokens != want || t.completion_tokens != want.size())
      v(t.a->id + ": completed with " + app::describe_token_diff(t.tokens, want));
  }
  return {{"outcomes", outcomes},
          {"failures", failures},
          {"deadline_in_state", deadline_in},
          {"ok", ok},
          {"lost", lost},
          {"duplicated", duplicated}};
}

// -- gateway isolation ----------------------------------------------------------------

void check_gateway_isolation(const std::vector<fault>& faults, const std::vector<tracked>& reqs,
                             violations& v) {
  // A request on another gateway that failed while one crashed, with no other fault
  // anywhere near its lifetime, was hurt by it.
  for (auto& g : faults) {
    if (g.kind != fault_kind::crash_gateway)
      continue;
    for (auto& t : reqs) {
      if (t.gateway == g.target || t.connection_lost || t.ok || t.ended_s < 0)
        continue;
      if (t.ended_s < g.at_s || t.accepted_s > g.at_s + g.for_s)
        continue; // not alive during the crash
      bool other = false;
      for (auto& f : faults)
        other = other || (&f != &g && t.accepted_s <= f.at_s + f.for_s + 10 && t.ended_s >= f.at_s);
      if (!other)
        v(t.a->id + " on " + t.gateway + " failed (" + std::to_string(t.status) + ": " + t.error +
          ") while only gateway " + g.target + " had crashed");
    }
  }
}

void check_progress(const std::vector<tracked>& reqs, size_t tail_requests, violations& v) {
  size_t tail_ok = 0;
  for (auto& t : reqs)
    tail_ok += t.tail && t.ok && t.ended_s >= 0 && !t.connection_lost ? 1 : 0;
  if (tail_ok != tail_requests)
    v("progress: " + std::to_string(tail_ok) + " of the " + std::to_string(tail_requests) +
      " requests sent after the faults healed succeeded");
}

// -- detection ------------------------------------------------------------------------

json check_detection(const std::vector<failure>& failures, const std::vector<membership_seen>& seen,
                     double bound_s, violations& v) {
  // Every crash or pause of a node the gateway saw up was reported down in time:
  // interval × (misses + 1) after the last heartbeat could arrive.
  json detections = json::array();
  for (auto& [t, n, latency] : failures) {
    double found = -1;
    for (auto& s : seen)
      if (s.peer == n && s.state == peer_state::down && s.t_s >= t) {
        found = s.t_s;
        break;
      }
    if (found < 0) {
      v("detection: " + n + " failed at " + fmt(t) + " s and was never reported down");
      continue;
    }
    const double bound = bound_s + (bound_s > 0 ? latency : 0);
    detections.push_back({{"node", n},
                          {"failed_s", t},
                          {"detected_ms", (found - t) * 1e3},
                          {"bound_ms", bound * 1e3}});
    if (found - t > bound + 1e-6)
      v("detection: " + n + " reported down " + fmt(found - t) + " s after it failed (bound " +
        fmt(bound) + " s)");
  }
  return detections;
}

// -- quiescence -----------------------------------------------------------------------

namespace {

/// What the actors of one node hold: live requests, queued and active work.
void worker_holdings(sim_world& w, const std::string& name, const auto& hold) {
  auto& m = *w.at(name).node_metrics();
  for (auto& a : w.deployment().find_node(name)->actors) {
    if (a.type == "gateway")
      hold(name + "/" + a.name + " live requests",
           m.gauge("prfaas_gateway_live_requests", "", {{"gateway", a.name}}).Value());
    if (a.type != "prefill_worker" && a.type != "decode_worker")
      continue;
    prometheus::Labels l{{"worker", a.name},
                         {"role", a.type == "decode_worker" ? "decode" : "prefill"}};
    hold(name + "/" + a.name + " queue", m.gauge("prfaas_worker_queue_depth", "", l).Value());
    hold(name + "/" + a.name + " active", m.gauge("prfaas_worker_active", "", l).Value());
  }
}

} // namespace

json check_quiescence(sim_world& w, size_t baseline_actors, violations& v) {
  json held = json::object();
  auto hold = [&](const std::string& what, double n) {
    if (n != 0) {
      held[what] = n;
      v("quiescence: " + what + " = " + fmt(n));
    }
  };
  for (auto& [name, nd] : w.nodes()) {
    worker_holdings(w, name, hold);
    // Periodic traffic (load queries, link probes) is always in flight; a request
    // still waiting after 2 s on an idle system is held by mistake.
    const auto old = std::chrono::seconds(2);
    hold(name + " cross-node requests waiting > 2 s for an answer",
         static_cast<double>(nd->context().msgr().pending_outbound(old)));
    hold(name + " cross-node requests waiting > 2 s for a local actor",
         static_cast<double>(nd->context().msgr().pending_inbound(old)));
  }
  hold("open KV transfers", static_cast<double>(w.fabric().open_transfers()));
  const auto actors = w.system().registry().running();
  hold("actors beyond the start (leaked)",
       static_cast<double>(actors) - static_cast<double>(baseline_actors));
  return held;
}

} // namespace prfaas::sim::chaos
