#include "report.hpp"

#include <cstdio>
#include <sstream>

#include "prfaas/runtime/config.hpp"

namespace prfaas::chaos {

namespace {

using json = nlohmann::json;

std::string secs(std::optional<double> s) {
  if (!s)
    return "never";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", *s);
  return buf;
}

std::string bound(const std::optional<seconds>& b) {
  return b ? " (bound " + secs(b->count()) + ")" : "";
}

std::string bits(double bps) {
  char buf[32];
  if (bps >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1f Mbit/s", bps / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1f kbit/s", bps / 1e3);
  return buf;
}

json opt(std::optional<double> v) {
  return v ? json(*v) : json(nullptr);
}

} // namespace

tally classify(const std::vector<request_record>& records, double deadline_s,
               std::optional<double> heal_s) {
  tally t;
  for (auto& rec : records) {
    const auto& r = rec.r;
    const std::string status = r.value("status", "");
    if (status == "client_saturated") {
      ++t.not_sent;
      continue;
    }
    ++t.sent;
    if (heal_s && r.value("sent_s", 0.0) > *heal_s) {
      ++t.after_heal;
      if (status != "ok" || r.value("output_tokens", 0u) != r.value("requested_output_tokens", 0u))
        ++t.failed_after_heal;
    }
    auto lose = [&](const std::string& why) {
      ++t.lost;
      ++t.lost_by[why];
      auto x = r;
      x["stream"] = rec.stream;
      x["lost_because"] = why;
      t.lost_requests.push_back(x);
    };
    if (status == "ok") {
      auto got = r.value("output_tokens", 0u), want = r.value("requested_output_tokens", 0u);
      if (got > want) {
        ++t.duplicated;
        auto x = r;
        x["stream"] = rec.stream;
        x["lost_because"] = "duplicated_tokens";
        t.lost_requests.push_back(x);
      } else if (got < want) {
        lose("missing_tokens");
      } else if (r.value("e2e_ms", 0.0) > deadline_s * 1000) {
        lose("after_deadline");
      } else {
        ++t.completed;
      }
    } else if (status.rfind("http_", 0) == 0 || status == "stream_error") {
      ++t.failed;
      ++t.failed_by[status];
    } else {
      lose(status); // timeout, connection_error, bad_response (truncated), cancelled
    }
  }
  return t;
}

fault_outcome judge(const fault_spec& f, double applied_s, std::optional<double> undone_s,
                    const detection& seen, std::optional<rule_counts> rules,
                    std::optional<link_usage> usage) {
  fault_outcome o{f, applied_s, undone_s, seen, rules, usage};
  o.collateral_ok = !rules || rules->collateral == 0;
  o.across_ok = !seen.routed_across || *seen.routed_across == 0;
  double offloads = 0;
  for (auto& [c, r] : seen.routes_before)
    offloads += r.first;
  if (offloads >= 10)
    for (auto& [a, ra] : seen.routes_before)
      for (auto& [b, rb] : seen.routes_before)
        if (ra.second > rb.second && ra.first < rb.first)
          o.rates_ok = false;
  // A cut that never bound (the bucket never ran dry), or that the link used less
  // than half of on average, left nothing for the deployment to detect.
  if (f.kind == fault_kind::rate && usage && !seen.detected_s)
    o.no_effect =
        usage->overlimits == 0 || usage->bits_per_s < 0.5 * static_cast<double>(parse_rate(f.rate));
  if (f.detect_within && !o.no_effect)
    o.detect_ok = seen.detected_s && *seen.detected_s <= f.detect_within->count();
  // Recovery is judged where some observer saw the fault: one too short for any detector
  // (a link down under the monitor's 2 s, a pause under the detector's) leaves nothing to
  // recover from, and the end-of-run check that the deployment is whole still holds it.
  if (f.recover_within && undone_s && seen.detected_s)
    o.recover_ok = seen.recovered_s && *seen.recovered_s <= f.recover_within->count();
  return o;
}

bool report::passed() const {
  if (requests.lost || requests.duplicated || requests.sent == 0)
    return false;
  if (!unhealthy_at_end.empty() || !unexpected_exits.empty())
    return false;
  if (requests.failed_after_heal || !held.empty())
    return false;
  if (tokens && !tokens->ok())
    return false;
  for (auto& f : faults)
    if (!f.detect_ok || !f.recover_ok || !f.collateral_ok || !f.across_ok || !f.rates_ok)
      return false;
  return true;
}

json report::to_json() const {
  json j = {{"scenario", scenario},
            {"topology", topology},
            {"seed", seed},
            {"passed", passed()},
            {"requests",
             {{"sent", requests.sent},
              {"completed", requests.completed},
              {"failed_with_error", requests.failed},
              {"lost", requests.lost},
              {"duplicated", requests.duplicated},
              {"not_sent", requests.not_sent},
              {"failed_by", requests.failed_by},
              {"lost_by", requests.lost_by},
              {"lost_requests", requests.lost_requests}}},
            {"gateway", gateway},
            {"prefills_by_cluster", prefills},
            {"unhealthy_at_end", unhealthy_at_end},
            {"unexpected_exits", unexpected_exits},
            {"held_at_quiescence", held}};
  if (tokens)
    j["tokens"] = {{"checked", tokens->checked},
                   {"unrecorded", tokens->unrecorded},
                   {"mismatched", tokens->mismatched},
                   {"examples", tokens->examples}};
  j["requests"]["after_heal"] = requests.after_heal;
  j["requests"]["failed_after_heal"] = requests.failed_after_heal;
  if (!note.empty())
    j["note"] = note;
  j["faults"] = json::array();
  for (auto& f : faults) {
    json one = {{"fault", to_string(f.fault.kind)},
                {"what", f.fault.describe()},
                {"applied_s", f.applied_s},
                {"undone_s", opt(f.undone_s)},
                {"detected_s", opt(f.seen.detected_s)},
                {"detected_by", f.seen.detected_by},
                {"detect_within_s",
                 f.fault.detect_within ? json(f.fault.detect_within->count()) : json(nullptr)},
                {"recovered_s", opt(f.seen.recovered_s)},
                {"held_s", opt(f.seen.held_s)},
                {"held_by", f.seen.held_by},
                {"recover_within_s",
                 f.fault.recover_within ? json(f.fault.recover_within->count()) : json(nullptr)},
                {"detect_ok", f.detect_ok},
                {"recover_ok", f.recover_ok},
                {"no_effect", f.no_effect},
                {"collateral_ok", f.collateral_ok},
                {"routed_across", opt(f.seen.routed_across)},
                {"rates_ok", f.rates_ok}};
    if (f.rules)
      one["rules"] =
          json{{"dropped_packets", f.rules->dropped}, {"collateral_packets", f.rules->collateral}};
    if (f.usage)
      one["link"] = json{{"bits_per_s", f.usage->bits_per_s}, {"overlimits", f.usage->overlimits}};
    if (f.fired)
      one["fired"] = *f.fired;
    j["faults"].push_back(one);
  }
  return j;
}

namespace {

/// One fault's lines of the report.
void fault_text(std::ostream& o, const fault_outcome& f) {
  o << "  at " << secs(f.applied_s) << ": " << f.fault.describe() << "\n";
  if (f.fault.kind == fault_kind::fault_point && f.no_effect)
    o << "    no effect observed (the fault point never fired)\n";
  else if (f.fault.kind == fault_kind::fault_point)
    o << "    fired " << (f.fired ? std::to_string(*f.fired) : std::string{"?"})
      << " times (nothing to detect: judged by the invariants)\n";
  else if (f.no_effect)
    o << "    no effect observed (link carried " << bits(f.usage->bits_per_s)
      << ", under the cut's " << f.fault.rate << "; its token bucket ran dry "
      << f.usage->overlimits << " times)\n";
  else
    o << "    detected after " << secs(f.seen.detected_s)
      << (f.seen.detected_by.empty() ? "" : " by " + f.seen.detected_by)
      << bound(f.fault.detect_within) << (f.detect_ok ? "" : "  MISSED") << "\n";
  if (f.usage && !f.no_effect)
    o << "    link carried " << bits(f.usage->bits_per_s) << " during the cut (bucket ran dry "
      << f.usage->overlimits << " times)\n";
  if (f.rules)
    o << "    rules dropped " << f.rules->dropped
      << " packets; between nodes it does not name: " << f.rules->collateral
      << (f.collateral_ok ? "" : "  COLLATERAL") << "\n";
  if (!f.seen.routes_before.empty()) {
    o << "    offloads before it, by PrfaaS cluster (link rate):";
    for (auto& [c, r] : f.seen.routes_before)
      o << " " << c << " " << r.first << " (" << bits(r.second) << ")";
    o << (f.rates_ok ? "" : "  AGAINST THE RATES") << "\n";
  }
  if (f.seen.routed_across)
    o << "    offloads routed across it from detection to its end: " << *f.seen.routed_across
      << (f.across_ok ? "" : "  ROUTED ACROSS") << "\n";
  if (f.undone_s && f.fault.kind == fault_kind::fault_point)
    o << "    undone at " << secs(f.undone_s) << "\n";
  else if (f.undone_s && !f.seen.detected_s)
    o << "    undone at " << secs(f.undone_s) << ", never seen faulty (nothing to recover)\n";
  else if (f.undone_s)
    o << "    undone at " << secs(f.undone_s) << ", healthy again after "
      << secs(f.seen.recovered_s)
      << (f.seen.held_s ? " from the end of " + f.seen.held_by + " (" + secs(f.seen.held_s) +
                              " later), which began before this one had recovered"
                        : std::string{})
      << bound(f.fault.recover_within) << (f.recover_ok ? "" : "  MISSED") << "\n";
}

} // namespace

std::string report::text() const {
  std::ostringstream o;
  o << "prfaas-chaos: " << scenario << " (" << topology << ", seed " << seed << ")\n";
  if (!note.empty())
    o << "  note: " << note << "\n";
  o << "  requests: sent " << requests.sent << ", completed " << requests.completed
    << ", failed-with-error " << requests.failed << ", lost " << requests.lost << ", duplicated "
    << requests.duplicated << ", not sent (client busy) " << requests.not_sent << "\n";
  auto kinds = [&](const char* what, const std::map<std::string, size_t>& m) {
    if (m.empty())
      return;
    o << "  " << what << ":";
    for (auto& [k, n] : m)
      o << " " << k << " " << n;
    o << "\n";
  };
  if (requests.after_heal)
    o << "  sent after the faults healed: " << requests.after_heal << ", not completed "
      << requests.failed_after_heal << (requests.failed_after_heal ? "  FAILED AFTER HEAL" : "")
      << "\n";
  kinds("failed by", requests.failed_by);
  kinds("lost by", requests.lost_by);
  for (size_t i = 0; i < requests.lost_requests.size() && i < 10; ++i)
    o << "    " << requests.lost_requests[i].dump() << "\n";
  for (auto& f : faults)
    fault_text(o, f);
  if (!prefills.empty()) {
    o << "  prefills by cluster:";
    for (auto& [k, v] : prefills)
      o << " " << k << " " << v;
    o << "\n";
  }
  if (!gateway.empty()) {
    o << "  gateway:";
    for (auto& [k, v] : gateway)
      o << " " << k << "=" << v;
    o << "\n";
  }
  for (auto& [node, code] : unexpected_exits)
    o << "  " << node << " exited on its own with code " << code << "\n";
  o << "  deployment at the end: " << (unhealthy_at_end.empty() ? "whole" : unhealthy_at_end)
    << "\n";
  if (tokens) {
    o << "  tokens: " << tokens->checked << " completed requests checked against an undisturbed "
      << "engine, " << tokens->mismatched << " mismatched";
    if (tokens->unrecorded)
      o << ", " << tokens->unrecorded << " without token ids";
    o << (tokens->ok() ? "" : "  TOKEN MISMATCH") << "\n";
    for (auto& e : tokens->examples)
      o << "    " << e << "\n";
  }
  o << "  held at quiescence:";
  if (held.empty())
    o << " nothing";
  for (auto& [what, n] : held)
    o << " " << what << "=" << n;
  o << (held.empty() ? "" : "  HELD") << "\n";
  o << "  " << (passed() ? "PASS" : "FAIL") << "\n";
  return o.str();
}

} // namespace prfaas::chaos
