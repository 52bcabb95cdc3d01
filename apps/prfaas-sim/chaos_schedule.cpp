#include "chaos_schedule.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace prfaas::sim {

const char* name_of(fault_kind k) {
  switch (k) {
  case fault_kind::crash_prefill:
    return "crash_prefill";
  case fault_kind::crash_decode:
    return "crash_decode";
  case fault_kind::crash_directory:
    return "crash_directory";
  case fault_kind::pause:
    return "pause";
  case fault_kind::partition:
    return "partition";
  case fault_kind::one_way:
    return "one_way";
  case fault_kind::flap:
    return "flap";
  case fault_kind::degrade:
    return "degrade";
  case fault_kind::message_loss:
    return "message_loss";
  case fault_kind::crash_points:
    return "crash_points";
  case fault_kind::burst:
    return "burst";
  case fault_kind::slow_restart:
    return "slow_restart";
  case fault_kind::crash_gateway:
    return "crash_gateway";
  case fault_kind::data_loss:
    return "data_loss";
  case fault_kind::data_corrupt:
    return "data_corrupt";
  }
  return "?";
}

roles roles_of(const deployment_config& dep, const std::string& gateway) {
  roles r;
  for (auto& [name, c] : dep.clusters)
    (c.kind == "prefill-only" ? r.prfaas_cluster : r.pd_cluster) = name;
  r.gateways.push_back(gateway);
  for (auto& n : dep.nodes) {
    (n.cluster == r.prfaas_cluster ? r.prfaas : r.pd).push_back(n.name);
    for (auto& a : n.actors)
      if (a.type == "gateway") {
        r.gateway_actor[n.name] = a.name;
        if (n.name != gateway)
          r.gateways.push_back(n.name);
      }
    if (n.name == gateway)
      continue;
    for (auto& a : n.actors) {
      if (a.type == "prefill_worker")
        r.prefill.push_back(n.name);
      else if (a.type == "decode_worker")
        r.decode.push_back(n.name);
      else if (a.type == "kv_directory")
        r.directory.push_back(n.name);
    }
  }
  for (auto* v : {&r.prefill, &r.decode, &r.directory}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
    r.workers.insert(r.workers.end(), v->begin(), v->end());
  }
  if (r.prfaas_cluster.empty() || r.pd_cluster.empty())
    throw std::invalid_argument("the chaos sweep needs a prefill-only and a pd cluster");
  if (r.prefill.empty() || r.decode.size() < 2)
    throw std::invalid_argument("the chaos sweep needs prefill nodes and at least two decode nodes "
                                "(besides the gateway's)");
  if (auto* l = dep.find_link(r.prfaas_cluster, r.pd_cluster))
    r.link_bps = static_cast<double>(l->rate_bps);
  return r;
}

std::vector<fault> schedule_of(const chaos_options& o, uint64_t seed, const roles& r,
                               double arrivals_s) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 17);
  auto uniform = [&](double a, double b) {
    return std::uniform_real_distribution<double>{a, b}(rng);
  };
  auto pick = [&](const std::vector<std::string>& v) {
    return v.empty() ? std::string{}
                     : v[std::uniform_int_distribution<size_t>{0, v.size() - 1}(rng)];
  };
  std::vector<fault> out;
  const double last_start = std::max(3.0, 0.7 * arrivals_s);
  for (size_t i = 0; i < o.faults; ++i) {
    fault f;
    f.kind = all_kinds[((seed - 1) * o.faults + i) % all_kinds.size()];
    f.at_s = uniform(2.0, last_start);
    f.for_s = uniform(1.0, 8.0);
    switch (f.kind) {
    case fault_kind::burst:
      f.for_s = 70;
      break; // its backlog drains before the tail
    // Some restarts come before the failure detector could notice (restart < bound).
    case fault_kind::crash_prefill:
      f.target = pick(r.prefill);
      f.for_s = uniform(0.2, 8.0);
      break;
    case fault_kind::crash_decode:
      f.target = pick(r.decode);
      f.for_s = uniform(0.2, 8.0);
      break;
    case fault_kind::crash_directory:
      f.target = pick(r.directory);
      f.for_s = uniform(0.2, 8.0);
      break;
    case fault_kind::pause:
      f.target = pick(r.workers);
      break;
    case fault_kind::slow_restart:
      f.target = pick(r.workers);
      f.for_s = uniform(2.0, 6.0);
      break;
    case fault_kind::crash_gateway:
      f.target = pick(std::vector<std::string>(r.gateways.begin() + 1, r.gateways.end()));
      break;
    default:
      break;
    }
    if ((f.kind == fault_kind::crash_directory || f.kind == fault_kind::crash_gateway) &&
        f.target.empty())
      f.kind = fault_kind::crash_points;
    out.push_back(f);
  }
  if (o.data_faults && o.data_plane == "real") {
    fault f;
    f.kind = data_kinds[(seed - 1) % data_kinds.size()];
    f.at_s = uniform(2.0, last_start);
    f.for_s = uniform(1.0, 8.0);
    out.push_back(f);
  }
  std::sort(out.begin(), out.end(), [](const fault& a, const fault& b) { return a.at_s < b.at_s; });
  return out;
}

} // namespace prfaas::sim
